"""What a config file is checked for, through the real CLI: each limit's type and bounds,
unknown keys at any depth, and a project's narrowing values read as validation reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.config import Config, load_config, project_config_path, user_config_path
from nanohermes.common.errors import ConfigError
from nanohermes.testing import FakeServer, Reply, call, tool_reply


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def tool_results(server: FakeServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m.get("role") == "tool"]


# -- limits -----------------------------------------------------------------------------------
@pytest.mark.parametrize("limits, message", [
    ({"grep_matches": 2.5}, "key `limits.grep_matches`: value error, must be a whole number >= 1 (got 2.5)"),
    ({"list_dir_entries": True}, "key `limits.list_dir_entries`: value error, must be a whole number >= 1 (got true)"),
    ({"read_file_window_lines": 0}, "key `limits.read_file_window_lines`: value error, must be a whole number >= 1 "
                                    "(got 0)"),
    ({"todo_items": -1}, "key `limits.todo_items`: value error, must be a whole number >= 1 (got -1)"),
    ({"grep_matches": None}, "key `limits.grep_matches`: value error, must be a whole number >= 1 (got null)"),
    ({"grep_matches": "many"}, 'key `limits.grep_matches`: value error, must be a whole number >= 1 (got "many")'),
    ({"git_timeout_secs": 0}, "key `limits.git_timeout_secs`: value error, must be a number > 0 (got 0)"),
    ({"web_fetch_timeout_secs": False}, "key `limits.web_fetch_timeout_secs`: value error, must be a number > 0 "
                                        "(got false)"),
    ({"command_kill_grace_secs": -1}, "key `limits.command_kill_grace_secs`: value error, must be a number >= 0 "
                                      "(got -1)"),
    # A limit with a top-level key obeys that key's bounds in either spelling.
    ({"max_output": 5}, "key `limits.max_output`: value error, must be a whole number >= 100 (got 5)"),
    ({"session_budget_chars": 999}, "key `limits.session_budget_chars`: value error, must be a whole number >= 1000 "
                                    "(got 999)"),
    ({"task_timeout_secs": 0}, "key `limits.task_timeout_secs`: value error, must be a number > 0 (got 0)"),
    ({"aggregate_budget_chars": 99}, "key `limits.aggregate_budget_chars`: value error, must be a whole number >= 100 "
                                     "or null (got 99)"),
    ({"grep_matchez": 3}, "key `limits.grep_matchez`: value error, no limit has this name; did you mean "
                          "grep_matches? (got 3)"),
    ({"nope": 1}, "key `limits.nope`: value error, no limit has this name (got 1)"),
])
def test_a_limit_the_file_gets_wrong_stops_naming_file_key_and_what_it_takes(
        turn: Any, limits: dict[str, Any], message: str) -> None:
    r = turn("-p", "hi", config={"limits": limits})
    assert r.code == 2, r.err
    assert r.err.splitlines() == [f"nanohermes: error: {user_config_path()}: {message}",
                                  "hint: every limit is listed, with its default, in docs/limits.md"]
    assert "internal error" not in r.err


def test_an_untrusted_projects_bad_limit_is_an_error_naming_the_project_file(turn: Any, workspace: Path) -> None:
    proj = write(project_config_path(workspace), {"limits": {"grep_matches": 0.5}})
    r = turn("-p", "hi")
    assert r.code == 2
    said = r.err.splitlines()[0]
    assert said.startswith(f"nanohermes: error: {proj}: key `limits.grep_matches`: ") and said.endswith(" (got 0.5)")


def test_limits_are_read_as_their_type_and_zero_only_where_it_means_something(
        turn: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "m.txt").write_text("hit\n" * 10)
    server.add(tool_reply(call("grep", {"pattern": "hit"})), Reply(text="done"))
    r = turn("-p", "go", "--no-session", server=server, config={"limits": {
        "grep_matches": "2", "command_kill_grace_secs": 0, "web_fetch_max_redirects": 0,
        "aggregate_budget_chars": None, "task_timeout_secs": 5, "read_file_window_lines": 3.0}})
    assert r.code == 0, r.err
    [result] = tool_results(server)
    assert result.count("m.txt:") == 2
    assert result.endswith("… stopped after 2 matches")


def test_a_config_built_in_code_keeps_the_checks() -> None:
    limits = Config(limits={"grep_matches": "7", "task_timeout_secs": 2}).build_limits()
    assert (limits.grep_matches, limits.task_timeout_secs) == (7, 2)
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        Config(limits={"grep_matches": 2.5})
    cfg = Config()
    cfg.limits = {"todo_items": True}
    with pytest.raises(ConfigError) as e:
        cfg.build_limits()
    assert e.value.message.startswith("config key `limits.todo_items`: ") and e.value.message.endswith(" (got true)")
    cfg = Config(max_output=5)  # not validated: built in code
    with pytest.raises(ConfigError) as e:
        cfg.build_limits()
    assert e.value.message.startswith("config key `max_output`: ") and " >= 100 (got 5)" in e.value.message


# -- unknown keys at any depth ----------------------------------------------------------------
def test_unknown_keys_inside_sections_held_in_dicts_and_lists_are_warned_about(
        turn: Any, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="ok"))
    proj = write(project_config_path(workspace), {"mcp": {"servers": {"a": {"command": "true", "arg": ["typo"]}}},
                                                   "prices": {"gpt-4.1": {"input_per_mtok": 1, "output_per_mtok": 2,
                                                                          "cached_per_mtok": 0}}})
    r = turn("-p", "hi", "--no-session", server=server, config={
        "subagents": {"x": {"description": "d", "tool": ["read_file"]}},
        "hooks": {"Stop": [{"matchr": "x", "hooks": [{"type": "command", "command": "true", "timout": 5}]}]},
        "permissions": {"alow": []}})
    assert r.code == 0, r.err
    warnings = [line for line in r.err.splitlines() if "unknown config keys" in line]
    assert warnings == [
        f"nanohermes: warning: {user_config_path()}: unknown config keys ignored: subagents.x.tool (did you mean "
        "subagents.x.tools?), hooks.Stop.0.matchr (did you mean hooks.Stop.0.matcher?), hooks.Stop.0.hooks.0.timout "
        "(did you mean hooks.Stop.0.hooks.0.timeout?), permissions.alow (did you mean permissions.allow?)",
        f"nanohermes: warning: {proj}: unknown config keys ignored: mcp.servers.a.arg (did you mean "
        "mcp.servers.a.args?), prices.gpt-4.1.cached_per_mtok"]
    # The project's servers and prices are still trust requests, without the dropped keys.
    loaded = load_config(workspace)
    assert loaded.asks == {"mcp": {"servers": {"a": {"command": "true"}}},
                           "prices": {"gpt-4.1": {"input_per_mtok": 1, "output_per_mtok": 2}}}


# -- a project's narrowing values, as read ----------------------------------------------------
def test_a_narrowing_value_written_as_text_narrows(turn: Any, server: FakeServer, workspace: Path) -> None:
    write(project_config_path(workspace), {"max_turns": "1"})
    server.add(tool_reply(call("list_dir", {})), tool_reply(call("list_dir", {})), Reply(text="end"))
    r = turn("-p", "go", "--no-session", server=server, config={})
    assert r.code == 3, r.err
    assert r.err.strip() == "nanohermes: warning: stopped after 1 model call (max_turns)"
    assert len(server.requests) == 1
