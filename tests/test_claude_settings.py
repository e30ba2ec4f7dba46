"""Claude Code's project files as a repository brings them: `.claude/settings.json`,
`.claude/settings.local.json` and `.mcp.json`. Their deny and ask rules always apply; allow
rules, env, hooks and MCP servers only in a trusted project. Through the real CLI."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.config.claude_files import translate_rule
from nanohermes.config import load_config, user_config_path
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.ui.trust import TrustQuestion, lines

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


def settings(workspace: Path, data: dict[str, Any], name: str = "settings.json") -> Path:
    path = workspace / ".claude" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def mcp_json(workspace: Path, servers: dict[str, Any]) -> Path:
    path = workspace / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def trusted(workspace: Path, **more: Any) -> dict[str, Any]:
    return {"trusted_projects": [str(workspace.resolve())], **more}


def results(server: FakeServer, request: int = 1) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"}


def test_a_deny_rule_stops_a_read_in_an_untrusted_project(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    (workspace / "secret.txt").write_text("the launch codes")
    (workspace / "notes.txt").write_text("shopping list")
    settings(workspace, {"permissions": {"deny": ["Read(./secret.txt)"]}})
    server.add(tool_reply(call("read_file", {"path": "secret.txt"}, id="s"), call("read_file", {"path": "notes.txt"}, id="n"),
                          call("grep", {"pattern": "launch", "path": "secret.txt"}, id="g")), Reply(text="done"))
    ran = turn("-p", "read them", "--yes", server=server)
    assert ran.code == 0, ran.err
    got = results(server)
    assert got["s"].startswith("ERROR: ") and "Read" not in got["s"] and "read_file(./secret.txt)" in got["s"]
    assert got["g"].startswith("ERROR: ") and "grep(./secret.txt)" in got["g"]
    assert "shopping list" in got["n"]
    assert "launch codes" not in json.dumps(server.requests)


def test_the_local_settings_file_narrows_too(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    settings(workspace, {"permissions": {"deny": ["Bash(rm:*)"]}}, "settings.local.json")
    (workspace / "keep.txt").write_text("x")
    server.add(tool_reply(call("run_command", {"command": "rm keep.txt"}, id="rm")), Reply(text="done"))
    ran = turn("-p", "clean", "--yes", server=server)
    assert ran.code == 0, ran.err
    assert (workspace / "keep.txt").exists()
    assert results(server)["rm"].startswith("ERROR: ") and "run_command(rm:*)" in results(server)["rm"]


def test_an_ask_rule_asks_for_what_would_run_unasked(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    settings(workspace, {"permissions": {"ask": ["Bash(ls:*)"]}})
    server.add(tool_reply(call("run_command", {"command": "ls"}, id="ls")), Reply(text="done"))
    ran = turn("-p", "list", server=server)  # ls runs unasked; no terminal: asked is refused
    assert ran.code == 0, ran.err
    assert "refused run_command `ls`: needs approval" in ran.err
    assert results(server)["ls"].startswith("Denied")


def test_allow_rules_env_and_hooks_wait_for_trust(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                  tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    script = "import sys; open(sys.argv[1], 'a').write('ran' + chr(10))"
    hook = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {log}"
    settings(workspace, {"permissions": {"allow": ["Bash(touch:*)"]}, "env": {"GREETING": "from-claude-settings"},
                         "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]}})
    line = call("run_command", {"command": 'touch greeted && echo "$GREETING"'}, id="e")  # asked unless allowed
    server.add(tool_reply(line), Reply(text="done"))
    untrusted = turn("-p", "greet", server=server)
    assert untrusted.code == 0, untrusted.err
    assert "ignored permissions.allow, env, hooks " in untrusted.err and "not trusted" in untrusted.err
    assert "needs approval" in untrusted.err and not log.exists() and not (workspace / "greeted").exists()

    server.add(tool_reply(line), Reply(text="done"))
    ran = turn("-p", "greet", server=server, config=trusted(workspace))
    assert ran.code == 0, ran.err
    assert "from-claude-settings" in results(server, 3)["e"] and (workspace / "greeted").exists()
    assert log.read_text() == "ran\n"


def test_mcp_json_loads_only_in_a_trusted_project(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_PYTHON", sys.executable)
    mcp_json(workspace, {"demo": {"command": "${DEMO_PYTHON}", "args": [DEMO]}})
    server.add(Reply(text="hi"))
    untrusted = turn("-p", "hi", server=server)
    assert untrusted.code == 0, untrusted.err
    assert not any(t["function"]["name"].startswith("mcp__demo") for t in server.requests[0]["tools"])
    assert f"{workspace / '.mcp.json'}: ignored mcp " in untrusted.err

    server.add(tool_reply(call("mcp__demo__echo", {"text": "hello"}, id="m")), Reply(text="done"))
    ran = turn("-p", "echo", "--yes", server=server, config=trusted(workspace))
    assert ran.code == 0, ran.err
    assert results(server, 2)["m"] == "echo: hello"


def test_the_trust_question_lists_mcp_json_servers(workspace: Path) -> None:
    mcp_json(workspace, {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
                         "web": {"type": "http", "url": "https://mcp.example/mcp"}})
    settings(workspace, {"permissions": {"allow": ["Bash(make:*)"], "deny": ["WebFetch"]}})
    loaded = load_config(workspace)
    assert loaded.project_file == workspace / ".mcp.json"
    q = TrustQuestion(workspace, loaded.project_file, user_config_path(), loaded.asks, reload=lambda: None)
    assert lines(q) == [
        '.mcp.json: MCP server fs: {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}',
        '.mcp.json: MCP server web: {"type": "http", "url": "https://mcp.example/mcp"}',
        '.claude/settings.json: permissions.allow: ["run_command(make:*)"]',
    ]
    assert loaded.config.permissions.deny == ["web_fetch"]  # applied without trust


def test_disabled_mcp_json_servers_are_not_started(workspace: Path, home: Path) -> None:
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text(json.dumps(trusted(workspace)))
    mcp_json(workspace, {"a": {"command": "a"}, "b": {"command": "b"}, "c": {"command": "c"}})
    settings(workspace, {"disabledMcpjsonServers": ["b"]})
    settings(workspace, {"enabledMcpjsonServers": ["a", "b"]}, "settings.local.json")
    loaded = load_config(workspace)
    assert sorted(loaded.config.mcp.servers) == ["a"]
    [unused] = [w for w in loaded.warnings if w.startswith(f"{workspace / '.mcp.json'}: ")]
    assert unused.endswith(": b, c"), unused


def test_unsupported_parts_are_named_once(workspace: Path) -> None:
    settings(workspace, {"$schema": "https://json.schemastore.org/claude-code-settings.json", "model": "opus",
                         "statusLine": {"type": "command", "command": "x"},
                         "permissions": {"allow": [], "deny": ["NotebookRead(x)"], "defaultMode": "plan"},
                         "hooks": {"SubagentStop": [{"hooks": [{"type": "command", "command": "true"}]}],
                                   "Stop": [{"hooks": [{"type": "prompt", "prompt": "check"},
                                                       {"type": "command", "command": "true"}]}]}})
    loaded = load_config(workspace)
    path = workspace / ".claude" / "settings.json"
    # Each part named once, by its key (the wording: tests/test_wording_config.py).
    named = [w.removeprefix(f"{path}: ") for w in loaded.warnings if w.startswith(str(path))]
    assert [w.split(" ")[0] for w in named] == ["permissions.deny", "hooks.SubagentStop:", "hooks.Stop:", "not",
                                                "ignored"]
    assert '"NotebookRead(x)"' in named[0] and " 1 other hook(s) " in named[2] and named[3].endswith(": model, statusLine")
    assert named[4].startswith("ignored hooks ") and f'"{workspace.resolve()}"' in named[4]
    assert loaded.config.permission_mode == "plan"  # stricter: applies untrusted


def test_a_looser_default_mode_waits_for_trust(workspace: Path) -> None:
    settings(workspace, {"permissions": {"defaultMode": "bypassPermissions"}})
    loaded = load_config(workspace)
    assert loaded.config.permission_mode == "default"
    assert loaded.asks == {".claude/settings.json: permission_mode": "goal"}


@pytest.mark.parametrize(("rule", "kind", "ours"), [
    ("Bash", "deny", ["run_command"]),
    ("Bash(npm run test:*)", "allow", ["run_command(npm run test:*)"]),
    ("Read(./.env)", "deny", ["read_file(./.env)", "grep(./.env)", "glob(./.env)", "list_dir(./.env)"]),
    ("Read(//etc/passwd)", "deny", ["read_file(/etc/passwd)", "grep(/etc/passwd)", "glob(/etc/passwd)",
                                    "list_dir(/etc/passwd)"]),
    ("Read(/docs/**)", "allow", ["read_file(docs/**)", "grep(docs/**)", "glob(docs/**)", "list_dir(docs/**)"]),
    ("Read(~/.ssh/**)", "ask", ["read_file(~/.ssh/**)", "grep(~/.ssh/**)", "glob(~/.ssh/**)", "list_dir(~/.ssh/**)"]),
    ("Edit(src/**)", "allow", ["write_file(src/**)", "edit_file(src/**)", "apply_patch(src/**)"]),
    ("Write(*.lock)", "deny", ["write_file(*.lock)", "edit_file(*.lock)", "apply_patch(*.lock)"]),
    ("Write(*.lock)", "allow", ["write_file(*.lock)"]),
    ("WebFetch(domain:docs.python.org)", "allow", ["web_fetch(domain:docs.python.org)"]),
    ("WebSearch", "deny", ["web_search"]),
    ("mcp__github", "deny", ["mcp__github"]),
    ("mcp__github__*", "deny", ["mcp__github"]),
    ("mcp__github__create_issue", "allow", ["mcp__github__create_issue"]),
    ("Task(explore)", "deny", ["subagent"]),
    ("Task(explore)", "allow", None),
    ("run_command(git log *)", "allow", ["run_command(git log *)"]),
    ("NotebookRead", "deny", None),
    ("Bash()", "deny", None),
])
def test_rules_are_carried_over(rule: str, kind: str, ours: list[str] | None, workspace: Path) -> None:
    assert translate_rule(rule, kind, workspace) == ours


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_a_claude_settings_jq_guard_blocks_rm_in_a_trusted_project(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                  workspace: Path) -> None:
    """The guard as a Claude Code user keeps it: in .claude/hooks, named in .claude/settings.json
    with $CLAUDE_PROJECT_DIR, reading the command with jq."""
    hooks = workspace / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    guard = hooks / "no-rm.sh"
    guard.write_text("#!/bin/sh\ncmd=$(jq -r '.tool_input.command')\n"
                     "case \"$cmd\" in *rm\\ *) echo \"blocked: $cmd\" >&2; exit 2 ;; esac\n")
    guard.chmod(0o755)
    settings(workspace, {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/no-rm.sh"}]}]}})
    (workspace / "keep.txt").write_text("x")
    server.add(tool_reply(call("run_command", {"command": "rm keep.txt"}, id="rm")), Reply(text="done"))
    ran = turn("-p", "clean", "--yes", server=server, config=trusted(workspace))
    assert ran.code == 0, ran.err
    assert (workspace / "keep.txt").exists()
    assert results(server)["rm"].startswith("ERROR: ") and results(server)["rm"].endswith(" hook: blocked: rm keep.txt")


# -- the person's own ~/.claude/settings.json ------------------------------------------------------------------

GUARD_PY = "import json, sys\nd = json.load(sys.stdin)\n" \
           "if d['tool_name'] == 'Bash' and 'rm -rf' in d['tool_input'].get('command', ''):\n" \
           "    print('no rm -rf', file=sys.stderr); sys.exit(2)\n"


def test_the_persons_claude_settings_bring_their_hooks_and_narrowing_rules(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                           workspace: Path, home: Path) -> None:
    """Hooks and deny/ask rules of ~/.claude/settings.json apply in every project (they are the
    person's own, and only guard and narrow); its allow rules, env and mode are named, not applied."""
    guard = home / "guard.py"
    guard.write_text(GUARD_PY)
    path = settings(home, {"hooks": {"PreToolUse": [{"matcher": "", "hooks": [
        {"type": "command", "command": f"{shlex.quote(sys.executable)} {shlex.quote(str(guard))}"}]}]},
        "permissions": {"deny": ["Read(./secret.txt)"], "allow": ["Bash(touch:*)"],
                        "defaultMode": "bypassPermissions"},
        "env": {"FROM_CLAUDE_SETTINGS": "1"}})
    (workspace / "build").mkdir()
    (workspace / "secret.txt").write_text("the launch codes")
    server.add(tool_reply(call("run_command", {"command": "rm -rf build"}, id="rm"),
                          call("read_file", {"path": "secret.txt"}, id="secret"),
                          call("run_command", {"command": "touch made"}, id="touch"),
                          call("run_command", {"command": "printenv FROM_CLAUDE_SETTINGS"}, id="env")),
               Reply(text="done"))
    ran = turn("-p", "go", server=server, config={"permissions": {"allow": ["run_command(printenv *)"]}})
    assert ran.code == 0, ran.err
    got = results(server)
    assert (workspace / "build").is_dir() and "no rm -rf" in got["rm"]  # the guard hook refused it
    assert got["secret"].startswith("ERROR: ") and "launch codes" not in json.dumps(server.requests)
    assert not (workspace / "made").exists() and got["touch"].startswith("Denied")  # its allow rule did not apply
    assert got["env"].startswith("exit code: 1\n")  # its env did not apply
    [named] = [line for line in ran.err.splitlines() if f"{path}: " in line]
    assert ": env, permissions.allow, permissions.defaultMode " in named, named


def test_a_broken_claude_settings_file_of_the_person_is_named_not_fatal(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                         home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{not json")
    server.add(Reply(text="fine"))
    ran = turn("-p", "hi", server=server)
    assert ran.code == 0 and ran.out.strip() == "fine", ran.err
    assert f"{path}: invalid JSON at line 1 column 2" in ran.err and "not read" in ran.err
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command"}]}]}}))
    server.add(Reply(text="still fine"))
    ran = turn("-p", "hi", server=server)
    assert ran.code == 0 and ran.out.strip() == "still fine", ran.err
    assert f"{path}: " in ran.err and "not read" in ran.err
