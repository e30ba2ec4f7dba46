"""A run without config files skips validation only where it would change nothing: the
config equals the validated one, pydantic is not even imported, and every value validation
would refuse or convert still goes through pydantic, with the same errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from nanohermes.config import Config, load_config, user_config_path
from nanohermes.common.errors import ConfigError
from nanohermes.guard.redact import collect

FLAG_SETS: list[dict[str, Any]] = [
    {},
    {"model": "m", "base_url": "http://127.0.0.1:9/v1"},
    {"api_key": "sk-plain-flag-0123456789", "permission_mode": "plan", "auto_approve": True, "max_turns": 3},
    {"wire_api": "responses", "reasoning_effort": "high", "model": None},
    {"max_turns": "7", "permission_mode": "debug"},  # text for a number: converted by validation
]


@pytest.mark.parametrize("flags", FLAG_SETS)
def test_a_config_without_files_equals_the_validated_one(workspace: Path, flags: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    loaded = load_config(workspace, flags=flags)
    given = {k: v for k, v in flags.items() if v is not None}
    assert loaded.config == Config.from_dict({"base_url": "http://127.0.0.1:8/v1", **given})
    defaults = Config()
    changed = {f.name for f in fields(Config) if getattr(loaded.config, f.name) != getattr(defaults, f.name)}
    assert changed == {"base_url", *given}  # every other key holds its default
    assert loaded.config.build_limits() == Config().build_limits()
    if "max_turns" in flags:
        assert loaded.config.max_turns == int(flags["max_turns"])


def test_values_validation_refuses_keep_their_errors(workspace: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(workspace, flags={"max_turns": 0})
    assert e.value.message == "key `max_turns`: input should be greater than or equal to 1 (got 0)"
    with pytest.raises(ConfigError) as e:
        load_config(workspace, flags={"permission_mode": "yolo"})
    assert e.value.message.startswith("key `permission_mode`: input should be 'default', 'accept-edits'")


def test_secrets_are_collected_from_a_config_without_files_and_with_one(workspace: Path) -> None:
    plain = load_config(workspace, flags={"api_key": "sk-from-a-flag-0123456789"}).config
    assert "sk-from-a-flag-0123456789" in collect(plain, environ={})
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text('{"web_search": {"brave_api_key_env": "X"}, "mcp": {"servers": {"s": '
                                  '{"url": "http://127.0.0.1:1/mcp", "headers": {"api_key": "hdr-secret-0123456789"}}}}}')
    filed = load_config(workspace).config
    assert "hdr-secret-0123456789" in collect(filed, environ={})


# Loads the config in a fresh interpreter and prints which of these modules it imported.
PROBE = """
import json, sys
from pathlib import Path
from nanohermes.config import load_config
from nanohermes.common.errors import ConfigError
try:
    config = load_config(Path(sys.argv[1]), flags=json.loads(sys.argv[2])).config
    print(json.dumps({"pydantic": "pydantic" in sys.modules, "model": config.model, "max_turns": config.max_turns}))
except ConfigError as e:
    print(json.dumps({"pydantic": "pydantic" in sys.modules, "error": e.message}))
"""


def probe(workspace: Path, home: Path, flags: dict[str, Any] | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "NANOHERMES_MODEL")}
    r = subprocess.run([sys.executable, "-c", PROBE, str(workspace), json.dumps(flags or {})], env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_a_run_without_config_files_never_imports_pydantic(workspace: Path, home: Path) -> None:
    assert not any(home.rglob("config.json"))
    assert probe(workspace, home, {"model": "m", "max_turns": 3, "permission_mode": "plan"}) == {
        "pydantic": False, "model": "m", "max_turns": 3}


def test_values_that_need_validating_still_get_it(workspace: Path, home: Path) -> None:
    # Text for a number is converted, as before; a value out of bounds is refused with its key.
    assert probe(workspace, home, {"max_turns": "7"}) == {"pydantic": True, "model": "gpt-4.1-mini", "max_turns": 7}
    assert probe(workspace, home, {"max_turns": 0}) == {
        "pydantic": True, "error": "key `max_turns`: input should be greater than or equal to 1 (got 0)"}
    # A config file is validated as well: its plain values without pydantic, a value it would
    # convert by pydantic, and a bad value in it names the file and the key.
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text('{"model": "from-file", "permissions": {"allow": ["run_command(git *)"]}}')
    assert probe(workspace, home) == {"pydantic": False, "model": "from-file", "max_turns": 50}
    user_config_path().write_text('{"model": "from-file", "max_turns": "9"}')
    assert probe(workspace, home) == {"pydantic": True, "model": "from-file", "max_turns": 9}
    user_config_path().write_text('{"hooks": {"Stop": [{"hooks": [{"command": "true", "timeout": 0}]}]}}')
    assert probe(workspace, home) == {
        "pydantic": True,
        "error": f"{user_config_path()}: key `hooks.Stop.0.hooks.0.timeout`: input should be greater than 0 (got 0)"}


EXAMPLE = json.loads((Path(__file__).resolve().parent.parent / "config.example.json").read_text())
HOOK = {"type": "command", "command": "true", "timeout": 5}
FILES: list[dict[str, Any]] = [
    EXAMPLE, *({key: value} for key, value in EXAMPLE.items()),
    {"hooks": {"Stop": [{"hooks": [HOOK]}]}}, {"hooks": {"Stop": [{"hooks": [{**HOOK, "timeout": 0}]}]}},
    {"hooks": {"Stop": [{"hooks": [{**HOOK, "command": ""}]}]}}, {"hooks": {"Stop": [{"matcher": 1, "hooks": []}]}},
    {"permission_mode": "plan", "max_turns": 3, "compact_at_share": 0.5}, {"permission_mode": "yolo"},
    {"max_turns": 0}, {"max_turns": True}, {"max_turns": 2.0}, {"compact_at_share": 1}, {"compact_at_share": "0.5"},
    {"limits": {"max_output": 100}}, {"permissions": {"deny": ["read_file(.env)"], "allow": "run_command"}},
    {"mcp": {"servers": {"s": {"command": "srv", "args": ["-v"], "env": {"A": "b"}}}}},
    {"mcp": {"servers": {"s": {"url": "http://127.0.0.1:1/mcp", "transport": "http"}}}},
    {"mcp": {"servers": {"s": {"command": "srv", "url": "http://127.0.0.1:1/mcp"}}}},
    {"subagents": {"helper": {"description": "helps", "max_turns": 4}}}, {"subagents": {"helper": {}}},
    {"prices": {"m": {"input": 1, "output": 2.5}}}, {"sandbox": {"mode": "off"}}, {"sandbox": {"network": "yes"}},
    {"web_search": {"provider": "brave", "brave_api_key_env": "OPENAI_API_KEY"}}, {"model": None}, {"model": 5},
]


@pytest.mark.parametrize("data", FILES, ids=lambda d: json.dumps(d)[:60])
def test_a_file_built_without_pydantic_is_what_pydantic_builds(data: dict[str, Any]) -> None:
    from pydantic import TypeAdapter, ValidationError

    from nanohermes.common.plaindata import NOT_PLAIN, made

    ours = made(Config, data)
    try:
        theirs = TypeAdapter(Config).validate_python(data)
    except ValidationError:
        assert ours is NOT_PLAIN
        return
    assert ours is NOT_PLAIN or (ours, repr(ours)) == (theirs, repr(theirs))


def test_the_example_file_is_built_without_pydantic() -> None:
    from nanohermes.common.plaindata import NOT_PLAIN, made

    assert made(Config, EXAMPLE) is not NOT_PLAIN
