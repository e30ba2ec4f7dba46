"""What nanohermes says of a project's Claude Code files (.claude/settings.json, .mcp.json) and
the person's own, each warning once, from a real load of the config. The other tests assert which
parts apply and which key each warning names; rewording a warning changes one line here."""

from __future__ import annotations

import json
from pathlib import Path

from nanohermes.config import load_config, user_config_path


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
