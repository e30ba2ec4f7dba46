"""The config in parts: each part small enough to review, one enum of modes from every layer
to the policy, and where a rule or hook came from built in by the loader, never set by a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_complexity import measure, over_limit

import nanohermes.config
from nanohermes.assemble import build_policy
from nanohermes.config import Config, load_config, project_config_path, user_config_path
from nanohermes.common.modes import CYCLE, Mode
from nanohermes.guard.trust import trust_folder


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


LIMIT = 25  # the config's parts, counted as the safety core's are (test_complexity)


def test_no_function_of_the_config_is_over_the_complexity_limit() -> None:
    parts = sorted(Path(nanohermes.config.__file__).parent.glob("*.py"))
    assert {p.name for p in parts} >= {"__init__.py", "schema.py", "layers.py", "narrow.py", "validate.py"}
    names = {name for p in parts for name, _, _ in measure(p.read_text(encoding="utf-8"))}
    assert {"load_config", "narrow_project", "Config.__post_init__"} <= names  # the big ones are measured
    over = [f"{p.name}: {name} (line {line}: {n})" for p in parts
            for name, line, n in over_limit(p.read_text(encoding="utf-8"), LIMIT)]
    assert not over, f"over a cyclomatic complexity of {LIMIT}: " + ", ".join(over)


@pytest.mark.parametrize("where", ["flag", "user file", "project file", "claude settings"])
def test_a_mode_from_any_layer_is_the_enum_in_the_config_and_the_policy(workspace: Path, where: str) -> None:
    flags = {"permission_mode": "plan"} if where == "flag" else None
    if where == "user file":
        write(user_config_path(), {"permission_mode": "plan"})
    elif where == "project file":  # stricter than the default: applies untrusted
        write(project_config_path(workspace), {"permission_mode": "plan"})
    elif where == "claude settings":
        write(workspace / ".claude" / "settings.json", {"permissions": {"defaultMode": "plan"}})
    loaded = load_config(workspace, flags=flags)
    assert loaded.warnings == []
    assert loaded.config.permission_mode is Mode.PLAN
    assert build_policy(loaded.config, []).mode is Mode.PLAN


def test_a_mode_written_in_code_is_the_enum_too() -> None:
    assert Config(permission_mode="accept-edits").permission_mode is Mode.ACCEPT_EDITS  # type: ignore[arg-type]
    assert Config().permission_mode is Mode.DEFAULT
    assert [m.value for m in Mode] == ["default", "accept-edits", "plan", "debug", "goal"]
    assert json.dumps({"mode": Mode.ACCEPT_EDITS}) == '{"mode": "accept-edits"}' and f"{Mode.GOAL}" == "goal"
    assert set(CYCLE) < set(Mode) and Mode.GOAL not in CYCLE  # goal is never one keypress too many away


def test_the_cli_refuses_a_mode_the_enum_does_not_have_and_names_those_it_has(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("-p", "x", "--mode", "yolo", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert r.code == 2, r.out + r.err
    assert "yolo" in r.err and all(m.value in r.err for m in Mode), r.err


@pytest.mark.parametrize("trusted", [False, True])
def test_no_file_can_name_where_a_rule_or_hook_came_from(workspace: Path, trusted: bool) -> None:
    # `origins` and `defined_in` are what the loader passes when it builds the sections; from a
    # file they are unknown keys, dropped before the file is validated.
    user = write(user_config_path(), {"permissions": {"deny": ["run_command(rm *)"]}})
    project = write(project_config_path(workspace), {
        "permissions": {"deny": ["web_fetch"], "origins": {"deny": "/home/someone/else.json"}},
        "hooks": {"Stop": [{"matcher": "", "defined_in": "your own config", "hooks": [{"command": "true"}]}]}})
    if trusted:
        trust_folder(workspace, user)
    loaded = load_config(workspace)
    perms = loaded.config.permissions
    assert [(t, perms.origin("deny", t)) for t in perms.deny] == [("run_command(rm *)", str(user)),
                                                                   ("web_fetch", str(project))]
    assert f"{project}: unknown config keys ignored: permissions.origins, hooks.Stop.0.defined_in" in loaded.warnings
    if trusted:  # hooks are a trust key: only then does the project's group apply, named for its file
        assert [g.origin for g in loaded.config.hooks.Stop] == [str(project)]
    else:
        assert loaded.config.hooks.Stop == [] and "hooks" in loaded.asks
