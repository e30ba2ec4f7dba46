"""Hooks written for Claude Code, unchanged: its tool names in matchers, its field names in
`tool_input`, jq scripts as people write them; real hook processes, the real CLI."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.assemble import build_agent
from nanohermes.config import Config, load_config
from nanohermes.doctor import Setup, check_hooks
from nanohermes.events import RecordingUI
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply

# The guard from Claude Code's hook examples: read the command with jq, refuse `rm`.
GUARD = r"""#!/bin/sh
cmd=$(jq -r '.tool_input.command')
case "$cmd" in
  *rm\ *) echo "rm is not allowed here: $cmd" >&2; exit 2 ;;
esac
exit 0
"""

# Appends its stdin to the log named by its argument.
LOGGER = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')"

needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def logger(log: Path) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(LOGGER)} {shlex.quote(str(log))}"


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []


def hooks(event: str, matcher: str, command: str) -> dict[str, Any]:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}


def run_calls(workspace: Path, config: dict[str, Any], *calls: Any) -> tuple[ScriptedLLM, RecordingUI]:
    llm = ScriptedLLM([tool_reply(*calls), Reply(text="done")])
    ui = RecordingUI()
    built = build_agent(Config.from_dict({"permission_mode": "goal", **config}), workspace, ui, llm=llm,
                        save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    return llm, ui


def tool_results(llm: ScriptedLLM) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"}


@needs_jq
def test_a_bash_matcher_jq_guard_blocks_rm_through_the_cli(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                           tmp_path: Path) -> None:
    guard = tmp_path / "guard.sh"
    guard.write_text(GUARD)
    guard.chmod(0o755)
    (workspace / "keep.txt").write_text("precious")
    server.add(tool_reply(call("run_command", {"command": "rm -f keep.txt"}, id="rm"),
                          call("run_command", {"command": "echo still here"}, id="echo")), Reply(text="done"))
    ran = turn("-p", "clean up", "--yes", server=server,
              config={"hooks": hooks("PreToolUse", "Bash", str(guard))})
    assert ran.code == 0, ran.err
    assert (workspace / "keep.txt").read_text() == "precious"
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert results["rm"] == "ERROR: blocked by a PreToolUse hook: rm is not allowed here: rm -f keep.txt"
    assert "still here" in results["echo"]


def test_claude_code_names_match_and_tool_input_carries_its_field_names(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    (workspace / "a.txt").write_text("old text\n")
    config = {"hooks": {**hooks("PreToolUse", "Edit|Write", logger(log)),
                        "PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": logger(log)}]}]}}
    run_calls(workspace, config,
              call("edit_file", {"path": "a.txt", "old_string": "old", "new_string": "new"}, id="e"),
              call("write_file", {"path": "sub/b.txt", "content": "B"}, id="w"),
              call("read_file", {"path": "a.txt"}, id="r"),
              call("list_dir", {"path": "."}, id="l"))
    got = [(r["hook_event_name"], r["tool_name"], r["tool_input"]) for r in records(log)]
    assert got == [
        ("PreToolUse", "Edit", {"path": "a.txt", "old_string": "old", "new_string": "new", "replace_all": False,
                                "file_path": str(workspace / "a.txt")}),
        ("PreToolUse", "Write", {"path": "sub/b.txt", "content": "B", "file_path": str(workspace / "sub" / "b.txt")}),
        ("PostToolUse", "Read", {"path": "a.txt", "offset": 1, "limit": 2000, "file_path": str(workspace / "a.txt")}),
    ]
    assert (workspace / "a.txt").read_text() == "new text\n"


def test_a_hook_matched_by_our_own_name_is_told_claude_codes_name_and_ours_beside_it(workspace: Path,
                                                                                      tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    run_calls(workspace, {"hooks": hooks("PreToolUse", "run_command", logger(log))},
              call("run_command", {"command": "true", "background": False, "timeout_secs": 5}))
    (r,) = records(log)
    assert r["tool_name"] == "Bash" and r["nanohermes"]["tool_name"] == "run_command"
    assert r["tool_input"]["command"] == "true" and r["tool_input"]["run_in_background"] is False
    assert r["tool_input"]["timeout"] == 5000  # Claude Code's Bash counts milliseconds
    assert r["nanohermes"]["tool_input"] == {"command": "true", "cwd": None, "timeout_secs": 5, "background": False}


def test_a_patch_is_shown_to_a_file_guard_once_per_file(workspace: Path, tmp_path: Path) -> None:
    """A guard reading `file_path` must see every file a patch touches, or a second file slips by."""
    log = tmp_path / "log.jsonl"
    guard = tmp_path / "guard.py"
    guard.write_text("import json, sys\n"
                     "data = json.load(sys.stdin)\n"
                     f"open({str(log)!r}, 'a').write(json.dumps(data) + '\\n')\n"
                     "if data['tool_input']['file_path'].endswith('secret.cfg'):\n"
                     "    print('not that file', file=sys.stderr); sys.exit(2)\n")
    (workspace / "a.txt").write_text("a\n")
    (workspace / "secret.cfg").write_text("s\n")
    diff = ("*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Update File: secret.cfg\n@@\n-s\n+S\n"
            "*** End Patch\n")
    llm, _ = run_calls(workspace, {"hooks": hooks("PreToolUse", "Edit", f"{shlex.quote(sys.executable)} {guard}")},
                       call("apply_patch", {"diff": diff}, id="p"))
    seen = [r["tool_input"]["file_path"] for r in records(log)]
    assert seen == [str(workspace / "a.txt"), str(workspace / "secret.cfg")]
    assert all(r["tool_name"] == "Edit" for r in records(log))
    assert tool_results(llm)["p"] == "ERROR: blocked by a PreToolUse hook: not that file"
    assert (workspace / "a.txt").read_text() == "a\n" and (workspace / "secret.cfg").read_text() == "s\n"


def test_updated_input_in_claude_codes_names_rewrites_ours(workspace: Path, tmp_path: Path) -> None:
    out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                  "updatedInput": {"file_path": str(workspace / "elsewhere.txt"), "content": "moved"}}}
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote('import sys; sys.stdin.read(); print(sys.argv[1])')} " \
              f"{shlex.quote(json.dumps(out))}"
    run_calls(workspace, {"hooks": hooks("PreToolUse", "Write", command)},
              call("write_file", {"path": "asked.txt", "content": "asked"}))
    assert not (workspace / "asked.txt").exists()
    assert (workspace / "elsewhere.txt").read_text() == "moved"


def test_mcp_tools_match_by_claude_codes_mcp_names(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    demo = str(Path(__file__).parent / "mcp" / "demo_server.py")
    run_calls(workspace, {"mcp": {"servers": {"demo": {"command": sys.executable, "args": [demo]}}},
                          "hooks": hooks("PreToolUse", "mcp__demo__.*", logger(log))},
              call("mcp__demo__echo", {"text": "hi"}))
    assert [(r["tool_name"], r["tool_input"]) for r in records(log)] == [("mcp__demo__echo", {"text": "hi"})]


def test_a_matcher_that_matches_no_tool_is_named_by_doctor_and_hooks(workspace: Path, home: Path) -> None:
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True)
    entries = [{"matcher": m, "hooks": [{"type": "command", "command": "true"}]}
               for m in ("Bash", "Edit|MultiEdit", "NotebookEdit", "bash", "mcp__github__.*", "mcp__other__x")]
    cfg.write_text(json.dumps({"hooks": {"PreToolUse": entries},
                               "mcp": {"servers": {"github": {"command": "true"}}}}))
    loaded = load_config(workspace)
    checks = asyncio.run(check_hooks(Setup(workspace, loaded)))
    warned = [c.detail for c in checks if c.name == "hook matcher"]
    assert [w.split(" matcher ")[1].split(" (")[0] for w in warned] == ["'NotebookEdit'", "'bash'", "'mcp__other__x'"]
    assert all(c.status == "warn" for c in checks if c.name == "hook matcher")

    built = build_agent(loaded.config, workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    assert built.hooks is not None
    tools = {t.name: t.claude_names for t in built.agent.runtime.tools}
    lines = built.hooks.lines(tools, ("github",))
    assert [ln for ln in lines if ln.startswith("warning:")] == [f"warning: {w}" for w in warned]


# -- one Claude Code name a call, whatever the matcher --------------------------------------------------

# The shape of the popular collections' guard: registered with matcher "" and checking the name itself.
PY_GUARD = """import json, sys
data = json.load(sys.stdin)
if data.get("tool_name") == "Bash" and "rm -rf" in data.get("tool_input", {}).get("command", ""):
    print("Dangerous command blocked: rm -rf", file=sys.stderr)
    sys.exit(2)
"""


def script(tmp_path: Path, name: str, text: str) -> str:
    """A hook script written to a file, and the command line running it."""
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}" if name.endswith(".py") else shlex.quote(str(path))


def test_a_catch_all_python_guard_checking_tool_name_bash_blocks_rm_rf(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                       workspace: Path, tmp_path: Path) -> None:
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_text("object")
    server.add(tool_reply(call("run_command", {"command": "rm -rf build"}, id="rm"),
                          call("run_command", {"command": "echo ok > done.txt"}, id="ok")), Reply(text="done"))
    ran = turn("-p", "clean", "--yes", server=server,
               config={"hooks": hooks("PreToolUse", "", script(tmp_path, "guard.py", PY_GUARD))})
    assert ran.code == 0, ran.err
    assert (workspace / "build" / "out.o").read_text() == "object"
    assert (workspace / "done.txt").read_text() == "ok\n"
    assert "Dangerous command blocked" in tool_results_of(server)["rm"]


@needs_jq
def test_a_catch_all_bash_jq_guard_reads_claude_codes_names(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                            workspace: Path, tmp_path: Path) -> None:
    guard = script(tmp_path, "guard.sh", """#!/bin/bash
input=$(cat)
tool=$(jq -r '.tool_name' <<<"$input")
path=$(jq -r '.tool_input.file_path // empty' <<<"$input")
if [[ "$tool" == "Write" || "$tool" == "Edit" ]] && [[ "$path" == */.env* ]]; then
  echo "refusing to touch $path" >&2
  exit 2
fi
exit 0
""")
    (workspace / "a.txt").write_text("a\n")
    server.add(tool_reply(call("write_file", {"path": ".env", "content": "KEY=1"}, id="env"),
                          call("edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}, id="edit")),
               Reply(text="done"))
    ran = turn("-p", "go", "--yes", server=server, config={"hooks": hooks("PreToolUse", "", guard)})
    assert ran.code == 0, ran.err
    assert not (workspace / ".env").exists()
    assert (workspace / "a.txt").read_text() == "b\n"
    assert tool_results_of(server)["env"].startswith("ERROR: blocked by a PreToolUse hook: refusing to touch")


def tool_results_of(server: FakeServer, request: int = 1) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"}


NAMED: list[tuple[str, dict[str, Any], str]] = [
    ("run_command", {"command": "true"}, "Bash"),
    ("write_file", {"path": "w.txt", "content": "w"}, "Write"),
    ("read_file", {"path": "r.txt"}, "Read"),
    ("edit_file", {"path": "r.txt", "old_string": "r", "new_string": "R"}, "Edit"),
    ("list_dir", {}, "LS"),
    ("glob", {"pattern": "*.txt"}, "Glob"),
    ("grep", {"pattern": "r"}, "Grep"),
    ("todo_write", {"todos": [{"content": "x", "status": "pending"}]}, "TodoWrite"),
    ("todo_read", {}, "TodoRead"),
    ("git_status", {}, "Bash"),
    ("memory_search", {"query": "x"}, "memory_search"),  # no counterpart: our own name
]


def test_every_call_is_told_by_exactly_one_name_whatever_the_matcher(workspace: Path, tmp_path: Path) -> None:
    """A logger on "" sees each call once, under Claude Code's name where it has one."""
    (workspace / "r.txt").write_text("r\n")
    log = tmp_path / "log.jsonl"
    calls = [call(name, args, id=f"c{i}") for i, (name, args, _) in enumerate(NAMED)]
    run_calls(workspace, {"hooks": hooks("PreToolUse", "", logger(log))}, *calls)
    got = sorted((r["tool_use_id"], r["tool_name"], r["nanohermes"]["tool_name"]) for r in records(log))
    assert got == sorted((f"c{i}", claude, ours) for i, (ours, _, claude) in enumerate(NAMED))  # read-only ones run together


def patch_of(*files: str) -> str:
    return "*** Begin Patch\n" + "".join(files) + "*** End Patch\n"


def test_edit_multiedit_and_write_groups_each_fire_once_per_call(workspace: Path, tmp_path: Path) -> None:
    (workspace / "one.txt").write_text("a\nb\nc\nd\ne\n")
    (workspace / "two.txt").write_text("x\n")
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("Edit", "MultiEdit", "Write")}
    groups = [{"matcher": name, "hooks": [{"type": "command", "command": logger(log)}]} for name, log in logs.items()]
    run_calls(workspace, {"hooks": {"PreToolUse": groups}},
              call("edit_file", {"path": "two.txt", "old_string": "x", "new_string": "y"}, id="edit"),
              call("apply_patch", {"diff": patch_of("*** Update File: one.txt\n@@\n-a\n+A\n@@\n-e\n+E\n")}, id="multi"),
              call("apply_patch", {"diff": patch_of("*** Add File: new.txt\n+new\n")}, id="add"),
              call("apply_patch", {"diff": patch_of("*** Update File: two.txt\n@@\n-y\n+z\n")}, id="single"))
    seen = {name: [r["tool_use_id"] for r in records(log)] for name, log in logs.items()}
    assert seen == {"Edit": ["edit", "single"], "MultiEdit": ["multi"], "Write": ["add"]}
    multi = records(logs["MultiEdit"])[0]["tool_input"]
    assert multi["file_path"] == str(workspace / "one.txt")
    assert multi["edits"] == [{"old_string": "a", "new_string": "A"}, {"old_string": "e", "new_string": "E"}]
    assert records(logs["Write"])[0]["tool_input"]["content"] == "new\n"
    assert (workspace / "one.txt").read_text() == "A\nb\nc\nd\nE\n" and (workspace / "two.txt").read_text() == "z\n"


def test_a_patch_deleting_a_file_is_told_as_the_shell_would_do_it(workspace: Path, tmp_path: Path) -> None:
    (workspace / "old.txt").write_text("keep me\n")
    guard = "import json, sys\nif json.load(sys.stdin)['tool_input']['command'].startswith('rm '): sys.exit(2)\n"
    llm, _ = run_calls(workspace, {"hooks": hooks("PreToolUse", "Bash", script(tmp_path, "no_rm.py", guard))},
                       call("apply_patch", {"diff": patch_of("*** Delete File: old.txt\n")}, id="del"))
    assert (workspace / "old.txt").read_text() == "keep me\n"
    assert tool_results(llm)["del"].startswith("ERROR: blocked by a PreToolUse hook")


def test_a_commit_is_told_as_the_git_command_a_bash_guard_knows(workspace: Path, tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "f.txt").write_text("f\n")
    log = tmp_path / "log.jsonl"
    guard = (f"import json, sys\nd = json.load(sys.stdin)\nopen({str(log)!r}, 'a').write(json.dumps(d) + '\\n')\n"
             "if 'git commit' in d['tool_input']['command'] and 'WIP' in d['tool_input']['command']:\n"
             "    print('no WIP commits', file=sys.stderr); sys.exit(2)\n")
    llm, _ = run_calls(workspace, {"hooks": hooks("PreToolUse", "Bash", script(tmp_path, "g.py", guard))},
                       call("git_commit", {"message": "WIP stuff", "paths": ["f.txt"]}, id="commit"))
    (r,) = records(log)
    assert r["tool_input"]["command"] == "git add -- f.txt && git commit -m 'WIP stuff'"
    assert tool_results(llm)["commit"] == "ERROR: blocked by a PreToolUse hook: no WIP commits"
    head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=workspace, capture_output=True)
    assert head.returncode != 0  # nothing was committed


def test_matchers_read_as_claude_code_reads_them(workspace: Path, tmp_path: Path) -> None:
    from nanohermes.hooks import Hook

    def hook(m: str) -> Hook:
        return Hook("PreToolUse", m, "true", 1, "")

    assert hook("Edit, Write").matches("Write") and hook("Edit|Write").matches("Edit")
    assert not hook("Edit").matches("NotebookEdit")  # plain names are exact
    assert hook("^Notebook").matches("NotebookEdit") and hook("Edit.*").matches("NotebookEdit")  # a regex searches
    assert hook("mcp__memory__.*").matches("mcp__memory__save") and not hook("mcp__memory").matches("mcp__memory__save")
    assert hook("Agent").matches("Task", ("Agent", "subagent"))
