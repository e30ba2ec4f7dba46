"""What nanohermes says of a project's Claude Code files (.claude/settings.json, .mcp.json) and
the person's own, each warning once, from a real load of the config. The other tests assert which
parts apply and which key each warning names; rewording a warning changes one line here."""

from __future__ import annotations

import json
from pathlib import Path

from exec_support import call

from nanohermes.assemble import build_policy
from nanohermes.config import Config, load_config, project_config_path, user_config_path
from nanohermes.common.events import RecordingUI
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools


def settings(folder: Path, data: dict[str, object], name: str = "settings.json") -> Path:
    path = folder / ".claude" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_unsupported_parts_of_claude_settings_say(workspace: Path, home: Path) -> None:
    path = settings(workspace, {"model": "opus", "statusLine": {"type": "command", "command": "x"},
                                "permissions": {"deny": ["NotebookRead(x)"]},
                                "hooks": {"SubagentStop": [{"hooks": [{"type": "command", "command": "true"}]}],
                                          "Stop": [{"hooks": [{"type": "prompt", "prompt": "check"},
                                                              {"type": "command", "command": "true"}]}]}})
    assert [w for w in load_config(workspace).warnings if w.startswith(str(path))] == [
        f'{path}: permissions.deny rule "NotebookRead(x)" has no counterpart in nanohermes; ignored',
        f"{path}: hooks.SubagentStop: no such event in nanohermes; its hooks never run",
        f"{path}: hooks.Stop: only command hooks run in nanohermes; 1 other hook(s) left out",
        f"{path}: not used by nanohermes, ignored: model, statusLine",
        f"{path}: ignored hooks because this project is not trusted; to allow them, add "
        f'"{workspace.resolve()}" to trusted_projects in {user_config_path()}',
    ]


def test_mcp_json_servers_left_out_say(workspace: Path, home: Path) -> None:
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text(json.dumps({"trusted_projects": [str(workspace)]}))
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}}))
    settings(workspace, {"disabledMcpjsonServers": ["b"]})
    assert [w for w in load_config(workspace).warnings if ".mcp.json" in w] == [
        f"{workspace / '.mcp.json'}: MCP servers not used, as the Claude Code settings say: b"]


def test_an_untrusted_mcp_json_says(workspace: Path, home: Path) -> None:
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "a"}}}))
    assert load_config(workspace).warnings == [
        f"{workspace / '.mcp.json'}: ignored mcp because this project is not trusted; to allow them, add "
        f'"{workspace.resolve()}" to trusted_projects in {user_config_path()}']


def test_a_hook_timeout_past_the_bound_says(workspace: Path, home: Path) -> None:
    path = settings(workspace, {"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "true", "timeout": 5000}]}]}})
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text(json.dumps({"trusted_projects": [str(workspace.resolve())]}))
    assert [w for w in load_config(workspace).warnings if "timeout" in w] == [
        f"{path}: hooks.PreToolUse: a timeout of 5000 s is more than the 3600 s a hook may take here; 3600 s is used"]


def test_the_persons_claude_settings_say_what_is_not_applied(workspace: Path, home: Path) -> None:
    path = settings(home, {"permissions": {"allow": ["Bash(touch:*)"]}, "env": {"A": "1"}})
    assert [w for w in load_config(workspace).warnings if w.startswith(str(path))] == [
        f"{path}: only its hooks and its deny and ask rules apply here; not applied: env, permissions.allow (set them "
        "in nanohermes's own config to use them)"]


def write(path: Path, data: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_malformed_rules_say(workspace: Path, home: Path) -> None:
    user = write(user_config_path(), {"permissions": {"allow": ["run_command("], "deny": ["web_fetch(evil.org)"]}})
    warnings: list[str] = []
    build_policy(load_config(workspace).config, warnings)
    assert sorted(warnings) == [
        f"{user}: permissions.allow: malformed permission rule 'run_command('; expected `tool` or `tool(pattern)`; rule "
        "ignored",
        f"{user}: permissions.deny: malformed permission rule 'web_fetch(evil.org)'; web_fetch patterns look like "
        "`domain:example.com`, not `evil.org`; rule ignored"]


def test_keys_only_the_person_may_set_say(workspace: Path, home: Path) -> None:
    project = write(project_config_path(workspace), {"trusted_projects": ["/"], "web_search": {"brave_url": "x"}})
    write(user_config_path(), {"trusted_projects": [str(workspace)]})
    assert [w for w in load_config(workspace).warnings if w.startswith(str(project))] == [
        f"{project}: ignored trusted_projects, web_search.brave_url: only the user config ({user_config_path()}) may "
        "set them"]


def test_a_search_key_variable_naming_the_models_says(workspace: Path, home: Path) -> None:
    write(user_config_path(), {"web_search": {"brave_api_key_env": "OPENAI_API_KEY"}})
    assert load_config(workspace).warnings == [
        "web_search.brave_api_key_env names the model's key variable $OPENAI_API_KEY; using $BRAVE_API_KEY instead, so "
        "the model key never goes to a search provider"]


def test_unknown_keys_say(workspace: Path, home: Path) -> None:
    user = write(user_config_path(), {"callbacks": {"x": 1}, "web_search": {"brave_urll": "http://x/"}})
    assert load_config(workspace).warnings == [
        f"{user}: unknown config keys ignored: callbacks, web_search.brave_urll (did you mean web_search.brave_url?)"]


def test_a_learned_rule_is_reported_with_where_it_lives(workspace: Path) -> None:
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=RecordingUI(answers=["always"]),
                 policy=Policy())
    call(rt, "run_command", command="touch a")
    assert [line for line in rt.permissions_report() if "touch" in line] == [
        "allow  run_command(touch <args>)  — learned this session"]


def test_a_protected_path_in_debug_mode_says(workspace: Path) -> None:
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=RecordingUI(), policy=Policy(mode="debug"))
    assert call(rt, "run_command", command="echo x > /tmp/x-debug") == (
        "ERROR: protected path: refused in debug mode (/tmp/x-debug is outside the workspace)")
