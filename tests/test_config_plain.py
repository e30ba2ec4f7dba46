"""A run without config files skips validation only where it would change nothing: the
config equals the validated one, and every value validation would refuse or convert still
goes through pydantic, with the same errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from nanohermes.config import Config, load_config, user_config_path
from nanohermes.errors import ConfigError
from nanohermes.redact import collect

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
    assert loaded.config == Config.model_validate({"base_url": "http://127.0.0.1:8/v1", **given})
    assert loaded.config.model_fields_set == {"base_url", *given}
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


def test_a_config_without_files_still_validates_assignments(workspace: Path) -> None:
    config = load_config(workspace).config
    config.model = "other-model"
    assert config.model == "other-model"
    with pytest.raises(ValidationError):
        config.max_turns = 0
    with pytest.raises(ValidationError):
        config.permissions.allow = "not a list"  # type: ignore[assignment]


def test_secrets_are_collected_from_a_config_without_files_and_with_one(workspace: Path) -> None:
    plain = load_config(workspace, flags={"api_key": "sk-from-a-flag-0123456789"}).config
    assert "sk-from-a-flag-0123456789" in collect(plain, environ={})
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text('{"web_search": {"brave_api_key_env": "X"}, "mcp": {"servers": {"s": '
                                  '{"url": "http://127.0.0.1:1/mcp", "headers": {"api_key": "hdr-secret-0123456789"}}}}}')
    filed = load_config(workspace).config
    assert "hdr-secret-0123456789" in collect(filed, environ={})
