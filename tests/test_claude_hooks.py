"""Hooks written for Claude Code, unchanged: its tool names in matchers, its field names in
`tool_input`, jq scripts as people write them; real hook processes, the real CLI."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from nanohermes.assemble import build_agent
from nanohermes.config import Config, load_config
from nanohermes.doctor import Setup, check_hooks
from nanohermes.common.events import Notice, RecordingUI
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




def hook_said(result: str) -> str:
    """Why a PreToolUse hook blocked a call, from the result the model reads (the wording around
    it: tests/test_wording_hooks.py)."""
    assert result.startswith("ERROR: ") and "PreToolUse hook" in result, result
    return result.split(" hook: ", 1)[1]

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
    assert hook_said(results["rm"]) == "rm is not allowed here: rm -f keep.txt"
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
    assert hook_said(tool_results(llm)["p"]) == "not that file"
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
    assert hook_said(tool_results_of(server)["env"]).startswith("refusing to touch")


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


def test_one_command_in_several_matching_groups_runs_once_per_call(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                    workspace: Path, home: Path, tmp_path: Path) -> None:
    """A logger registered under `Edit`, under `Write|Edit` and in the project's settings too logs an
    edit once, as Claude Code runs identical commands once; another command still runs beside it."""
    log, other = tmp_path / "log.jsonl", tmp_path / "other.jsonl"
    command = logger(log)
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": command}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}}))
    config = {"trusted_projects": [str(workspace.resolve())], "hooks": {
        "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": command}]},
                       {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": command},
                                                           {"type": "command", "command": logger(other)}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}}
    (workspace / "a.txt").write_text("old\n")
    server.add(tool_reply(call("edit_file", {"path": "a.txt", "old_string": "old", "new_string": "new"}, id="e"),
                          call("write_file", {"path": "b.txt", "content": "b"}, id="w")), Reply(text="done"))
    ran = turn("-p", "go", "--yes", server=server, config=config)
    assert ran.code == 0, ran.err
    assert sorted((r["hook_event_name"], r.get("tool_use_id")) for r in records(log)) == [
        ("PreToolUse", "e"), ("PreToolUse", "w"), ("SessionStart", None)]
    assert sorted(r["tool_use_id"] for r in records(other)) == ["e", "w"]


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
    assert hook_said(tool_results(llm)["commit"]) == "no WIP commits"
    head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=workspace, capture_output=True)
    assert head.returncode != 0  # nothing was committed


def test_matchers_read_as_claude_code_reads_them(workspace: Path, tmp_path: Path) -> None:
    from nanohermes.hooks.hooks import Hook

    def hook(m: str) -> Hook:
        return Hook("PreToolUse", m, "true", 1, "")

    assert hook("Edit, Write").matches("Write") and hook("Edit|Write").matches("Edit")
    assert not hook("Edit").matches("NotebookEdit")  # plain names are exact
    assert hook("^Notebook").matches("NotebookEdit") and hook("Edit.*").matches("NotebookEdit")  # a regex searches
    assert hook("mcp__memory__.*").matches("mcp__memory__save") and not hook("mcp__memory").matches("mcp__memory__save")
    assert hook("Agent").matches("Task", ("Agent", "subagent"))


# -- what hooks answer, in every shape Claude Code documents ----------------------------------------------

DECIDER = """import json, sys
data = json.load(sys.stdin)
command = data["tool_input"]["command"]
said = {}
if "deny-me" in command:
    said = {"permissionDecision": "deny", "permissionDecisionReason": "not this one"}
elif "ask-me" in command:
    said = {"permissionDecision": "ask", "permissionDecisionReason": "a person should look"}
elif "allow-me" in command:
    said = {"permissionDecision": "allow", "permissionDecisionReason": "known safe"}
elif "rewrite-me" in command:
    said = {"permissionDecision": "allow", "updatedInput": {**data["tool_input"], "command": "echo rewritten > new.txt"}}
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **said}}))
"""


def test_hook_specific_output_denies_asks_allows_and_rewrites(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                               workspace: Path, tmp_path: Path) -> None:
    """In -p with nobody to ask: deny refuses, ask refuses (it would be asked), allow runs what
    the rules would ask about, and updatedInput in Claude Code's names runs the rewritten line."""
    server.add(tool_reply(call("run_command", {"command": "touch denied.txt # deny-me"}, id="deny"),
                          call("run_command", {"command": "touch asked.txt # ask-me"}, id="ask"),
                          call("run_command", {"command": "touch allowed.txt # allow-me"}, id="allow"),
                          call("run_command", {"command": "touch original.txt # rewrite-me"}, id="rewrite")),
               Reply(text="done"))
    ran = turn("-p", "go", server=server, config={"hooks": hooks("PreToolUse", "Bash",
                                                                   script(tmp_path, "decide.py", DECIDER))})
    assert ran.code == 0, ran.err
    made = sorted(p.name for p in workspace.iterdir())
    assert made == ["allowed.txt", "new.txt"]
    assert (workspace / "new.txt").read_text() == "rewritten\n"
    assert tool_results_of(server)["deny"] == "ERROR: blocked by a PreToolUse hook: not this one"


def test_ask_asks_even_what_yes_would_run(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                          tmp_path: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch asked.txt # ask-me"}, id="ask")), Reply(text="done"))
    ran = turn("-p", "go", "--yes", server=server,
               config={"hooks": hooks("PreToolUse", "", script(tmp_path, "decide.py", DECIDER))})
    assert ran.code == 0, ran.err
    assert not (workspace / "asked.txt").exists()


def answers(tmp_path: Path, name: str, out: dict[str, Any], code: int = 0) -> str:
    """A hook that reads its input and answers `out` on stdout, exiting with `code`."""
    return script(tmp_path, name, f"import sys\nsys.stdin.read()\nprint({json.dumps(json.dumps(out))})\n"
                                  f"sys.exit({code})\n")


def test_json_is_read_whatever_the_exit_code(workspace: Path, tmp_path: Path) -> None:
    deny = answers(tmp_path, "deny.py", {"hookSpecificOutput": {"permissionDecision": "deny",
                                                                "permissionDecisionReason": "said with exit 1"}}, 1)
    llm, ui = run_calls(workspace, {"hooks": hooks("PreToolUse", "Write", deny)},
                        call("write_file", {"path": "a.txt", "content": "A"}, id="w"))
    assert not (workspace / "a.txt").exists()
    assert hook_said(tool_results(llm)["w"]) == "said with exit 1"
    assert not [n for n in ui.of(Notice) if "exited with" in n.text]  # an answer, not a failure


def test_exit_2_blocks_even_when_the_json_allows(workspace: Path, tmp_path: Path) -> None:
    hook = script(tmp_path, "both.py", "import json, sys\nsys.stdin.read()\n"
                                       "print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'allow'}}))\n"
                                       "print('exit 2 wins', file=sys.stderr)\nsys.exit(2)\n")
    llm, _ = run_calls(workspace, {"hooks": hooks("PreToolUse", "Write", hook)},
                       call("write_file", {"path": "a.txt", "content": "A"}, id="w"))
    assert not (workspace / "a.txt").exists()
    assert tool_results(llm)["w"] == "ERROR: blocked by a PreToolUse hook: exit 2 wins"


def test_additional_context_of_pre_and_post_tool_use_reaches_the_result(workspace: Path, tmp_path: Path) -> None:
    pre = answers(tmp_path, "pre.py", {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                              "additionalContext": "the target is staging"}})
    post = answers(tmp_path, "post.py", {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                                                "additionalContext": "run the linter next"}})
    llm, _ = run_calls(workspace, {"hooks": {**hooks("PreToolUse", "Bash", pre), **hooks("PostToolUse", "Bash", post)}},
                       call("run_command", {"command": "echo hi"}, id="c"))
    text = tool_results(llm)["c"]
    assert "hi" in text and "the target is staging" in text and "run the linter next" in text


def test_updated_tool_output_replaces_what_the_model_sees(workspace: Path, tmp_path: Path) -> None:
    post = answers(tmp_path, "post.py", {"hookSpecificOutput": {
        "hookEventName": "PostToolUse", "updatedToolOutput": {"stdout": "[redacted]", "stderr": "", "interrupted": False,
                                                              "isImage": False}}})
    llm, _ = run_calls(workspace, {"hooks": hooks("PostToolUse", "Bash", post)},
                       call("run_command", {"command": "echo the-secret-value"}, id="c"))
    assert tool_results(llm)["c"] == "[redacted]"


def test_continue_false_stops_the_turn_after_the_call(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                      workspace: Path, tmp_path: Path) -> None:
    stop = answers(tmp_path, "stop.py", {"continue": False, "stopReason": "the build is red",
                                         "systemMessage": "stopping here", "suppressOutput": True})
    server.add(tool_reply(call("run_command", {"command": "echo one > one.txt"}, id="one")),
               tool_reply(call("run_command", {"command": "echo two > two.txt"}, id="two")), Reply(text="done"))
    ran = turn("-p", "go", "--yes", server=server, config={"hooks": hooks("PostToolUse", "Bash", stop)})
    assert ran.code == 0, ran.err
    assert (workspace / "one.txt").exists() and not (workspace / "two.txt").exists()
    assert len(server.requests) == 1  # the model was not called again
    assert "the build is red" in ran.err and "stopping here" in ran.err


def test_continue_false_in_pre_tool_use_refuses_the_call_and_stops(workspace: Path, tmp_path: Path) -> None:
    stop = answers(tmp_path, "stop.py", {"continue": False, "stopReason": "maintenance window"})
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"}, id="w")), Reply(text="more")])
    built = build_agent(Config.from_dict({"permission_mode": "goal", "hooks": hooks("PreToolUse", "Write", stop)}),
                        workspace, RecordingUI(), llm=llm, save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    assert not (workspace / "a.txt").exists()
    assert len(llm.requests) == 1


def test_a_stop_hooks_additional_context_keeps_the_turn_going(workspace: Path, tmp_path: Path) -> None:
    once = script(tmp_path, "stop.py", "import json, sys\nd = json.load(sys.stdin)\n"
                                      "if not d['stop_hook_active']:\n"
                                      "    print(json.dumps({'hookSpecificOutput': {'hookEventName': 'Stop', "
                                      "'additionalContext': 'run the tests before finishing'}}))\n")
    llm = ScriptedLLM([Reply(text="first"), Reply(text="second")])
    built = build_agent(Config.from_dict({"hooks": hooks("Stop", "", once)}), workspace, RecordingUI(), llm=llm,
                        save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    assert len(llm.requests) == 2
    assert "run the tests before finishing" in llm.requests[1]["messages"][-1]["content"]


def test_a_pre_compact_hook_can_block_compaction(workspace: Path, tmp_path: Path) -> None:
    block = answers(tmp_path, "block.py", {"decision": "block", "reason": "keep the history"})
    llm = ScriptedLLM([Reply(text="one"), Reply(text="two"), Reply(text="summary")])
    ui = RecordingUI()
    built = build_agent(Config.from_dict({"hooks": hooks("PreCompact", "", block)}), workspace, ui, llm=llm,
                        save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("a")
            await agent.ask("b")
            assert agent.compactor is not None
            assert await agent.compactor.manual(agent.session) is None
            assert len(agent.session.history) == 4

    asyncio.run(go())
    assert len(llm.requests) == 2  # no summary was asked for


# -- `if` conditions ---------------------------------------------------------------------------------------

def test_if_conditions_choose_the_calls_a_hook_runs_for(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                        workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    refuse = script(tmp_path, "refuse.py", f"import json, sys\nd = json.load(sys.stdin)\n"
                                           f"open({str(log)!r}, 'a').write(json.dumps(d) + '\\n')\n"
                                           "print('guarded', file=sys.stderr)\nsys.exit(2)\n")
    config = {"hooks": {"PreToolUse": [
        {"matcher": "Write|Edit", "hooks": [{"type": "command", "if": "Write(.env*)", "command": refuse}]},
        {"matcher": "Bash", "hooks": [{"type": "command", "if": "Bash(git push:*)", "command": refuse}]}]}}
    server.add(tool_reply(call("write_file", {"path": ".env.local", "content": "K=1"}, id="env"),
                          call("write_file", {"path": "notes.txt", "content": "n"}, id="notes"),
                          call("write_file", {"path": "sub/.env", "content": "K=2"}, id="deep"),
                          call("run_command", {"command": "echo status > st.txt"}, id="echo"),
                          call("run_command", {"command": "cd . && FOO=1 git push origin main"}, id="push")),
               Reply(text="done"))
    ran = turn("-p", "go", "--yes", server=server, config=config)
    assert ran.code == 0, ran.err
    assert sorted(r["tool_use_id"] for r in records(log)) == ["deep", "env", "push"]
    assert not (workspace / ".env.local").exists() and not (workspace / "sub" / ".env").exists()
    assert (workspace / "notes.txt").read_text() == "n" and (workspace / "st.txt").exists()


def test_a_write_condition_guards_the_file_whichever_file_tool_the_model_picks(  # type: ignore[no-untyped-def]
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    """`if: Write(.env*)` on a group matching every file tool: an edit or a patch of `.env` runs the
    guard as a write does, as a deny rule `Write(.env*)` covers them all."""
    log = tmp_path / "log.jsonl"
    refuse = script(tmp_path, "refuse.py", f"import json, sys\nd = json.load(sys.stdin)\n"
                                           f"open({str(log)!r}, 'a').write(json.dumps(d) + '\\n')\n"
                                           "print('guarded', file=sys.stderr)\nsys.exit(2)\n")
    config = {"hooks": {"PreToolUse": [
        {"matcher": "Write|Edit|MultiEdit", "hooks": [{"type": "command", "if": "Write(.env*)", "command": refuse}]}]}}
    (workspace / ".env").write_text("K=1\n")
    (workspace / "notes.txt").write_text("a\n")
    patch = "--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-K=1\n+K=3\n"
    server.add(tool_reply(call("edit_file", {"path": ".env", "old_string": "K=1", "new_string": "K=2"}, id="edit"),
                          call("apply_patch", {"diff": patch}, id="patch"),
                          call("edit_file", {"path": "notes.txt", "old_string": "a", "new_string": "b"}, id="notes")),
               Reply(text="done"))
    ran = turn("-p", "go", "--yes", server=server, config=config)
    assert ran.code == 0, ran.err
    assert sorted(r["tool_use_id"] for r in records(log)) == ["edit", "patch"]
    assert [r["tool_name"] for r in sorted(records(log), key=lambda r: r["tool_use_id"])] == ["Edit", "Edit"]
    assert (workspace / ".env").read_text() == "K=1\n" and (workspace / "notes.txt").read_text() == "b\n"


def test_a_condition_on_an_event_without_tool_calls_never_runs_and_a_bad_one_always_does(
        workspace: Path, home: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"permission_mode": "goal", "hooks": {
        "Stop": [{"hooks": [{"type": "command", "if": "Bash(ls)", "command": logger(log)}]}],
        "PreToolUse": [{"hooks": [{"type": "command", "if": "Bash(git *) || Edit", "command": logger(log)}]}]}}))
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    built = build_agent(load_config(workspace).config, workspace, RecordingUI(), llm=llm, save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    assert [r["hook_event_name"] for r in records(log)] == ["PreToolUse"]
    assert len([w for w in built.warnings if "`if`" in w]) == 2


@pytest.mark.parametrize("condition, name, own, kind, subject, runs", [
    ("Bash(git *)", "Bash", "run_command", "command", "git status", True),
    ("Bash(git *)", "Bash", "run_command", "command", "npm test && git push", True),  # each simple command
    ("Bash(git *)", "Bash", "run_command", "command", "FOO=bar git push", True),  # assignments left out
    ("Bash(git *)", "Bash", "run_command", "command", "npm test", False),
    ("Bash(git push:*)", "Bash", "run_command", "command", "cd x && git push origin main", True),
    ("Bash(git push:*)", "Bash", "run_command", "command", "git pull", False),
    ("Bash(rm *)", "Bash", "run_command", "command", "echo $(rm -rf /)", True),  # cannot tell: it runs
    ("Bash(rm *)", "Bash", "run_command", "command", "ls -la", False),
    ("Bash", "Bash", "run_command", "command", "anything", True),
    ("Edit(*.ts)", "Edit", "edit_file", "path", "src/a.ts", True),
    ("Edit(*.ts)", "Edit", "edit_file", "path", "src/a.js", False),
    ("Edit(*.ts)", "Write", "write_file", "path", "src/a.ts", True),  # Edit covers every file writer
    ("Edit(*.ts)", "Write", "write_file", "path", "src/a.js", False),
    ("Write(.env*)", "Edit", "edit_file", "path", ".env.local", True),  # as a deny rule Write(.env*) would
    ("Write(.env*)", "MultiEdit", "apply_patch", "path", ".env", True),
    ("Read(.env*)", "Grep", "grep", "path", ".env", True),  # Read covers every reader
    ("Read(.env*)", "Bash", "run_command", "command", "cat .env", False),  # but not the shell
    ("Write(.env*)", "Write", "write_file", "path", "sub/.env.local", True),
    ("Write(.env*)", "Write", "write_file", "path", "env.txt", False),
    ("Edit(/src/**)", "Edit", "edit_file", "path", "src/deep/a.py", True),  # from the project root
    ("Edit(/src/**)", "Edit", "edit_file", "path", "lib/src/a.py", False),
    ("Read(//etc/**)", "Read", "read_file", "path", "/etc/hostname", True),
    ("write_file(.env*)", "Write", "write_file", "path", ".env", True),  # our own name
    ("WebFetch(domain:example.com)", "WebFetch", "web_fetch", "host", "https://Example.com/a", True),
    ("WebFetch(domain:example.com)", "WebFetch", "web_fetch", "host", "https://other.org/", False),
    ("mcp__github", "mcp__github__create_issue", "mcp__github__create_issue", "mcp", "", True),
    ("Agent", "Task", "subagent", "none", "", True),  # Claude Code's newer name of Task
])
def test_if_conditions_match_as_permission_rules(condition: str, name: str, own: str, kind: str, subject: str,
                                                 runs: bool, workspace: Path) -> None:
    from nanohermes.hooks.claude_vocab import Condition
    from nanohermes.tools import ClaudeCall, SubjectKind

    (workspace / "src" / "deep").mkdir(parents=True)
    got = ClaudeCall(name, {}, cast(SubjectKind, kind), (subject,) if subject else ())
    assert Condition.parse(condition).holds(got, own, workspace) is runs


def test_a_claude_settings_files_if_and_updated_input_with_a_description(workspace: Path, home: Path,
                                                                         tmp_path: Path) -> None:
    """`if` in .claude/settings.json (trusted project) is the hook's condition; an updatedInput
    carrying Claude Code's Bash `description` rewrites the command."""
    out = {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {
        "command": "echo safe > safe.txt", "description": "a safer command"}}}
    (workspace / ".claude").mkdir()
    hook = {"type": "command", "if": "Bash(rm *)", "command": answers(tmp_path, "a.py", out)}
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [hook]}]}}))
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"trusted_projects": [str(workspace.resolve())], "permission_mode": "goal"}))
    config = load_config(workspace).config
    assert [h.condition for g in config.hooks.PreToolUse for h in g.hooks] == ["Bash(rm *)"]
    (workspace / "keep.txt").write_text("k")
    llm = ScriptedLLM([tool_reply(call("run_command", {"command": "rm keep.txt"}),
                                  call("run_command", {"command": "echo other > other.txt"})), Reply(text="done")])
    built = build_agent(config, workspace, RecordingUI(), llm=llm, save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    assert (workspace / "keep.txt").exists() and (workspace / "safe.txt").read_text() == "safe\n"
    assert (workspace / "other.txt").read_text() == "other\n"  # the condition did not hold: untouched


def test_a_hook_in_exec_form_gets_each_argument_as_one_word(workspace: Path, tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    (workspace / "hook.py").write_text(f"import json, sys\njson.dump(sys.argv[1:], open({str(out)!r}, 'w'))\n")
    config = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": sys.executable,
                                             "args": ["${CLAUDE_PROJECT_DIR}/hook.py", "two words", "$HOME"]}]}]}}
    llm = ScriptedLLM([Reply(text="done")])
    built = build_agent(Config.from_dict(config), workspace, RecordingUI(), llm=llm, save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    assert json.loads(out.read_text()) == ["two words", "$HOME"]


def test_an_updated_input_reads_back_into_our_arguments(workspace: Path) -> None:
    from nanohermes.tools.git import GitCommit, GitCommitParams
    from nanohermes.tools.shell import RunCommandParams

    args = RunCommandParams(command="sleep 1", background=True)
    sent = args.claude_input(workspace)
    # Sent back with only the command changed: the timeout the call left out stays left out.
    assert RunCommandParams.validate(args.from_claude({**sent, "command": "sleep 2"}, sent)) == \
        RunCommandParams(command="sleep 2", background=True)
    # Claude Code's names: its timeout is in milliseconds, rounded up to whole seconds.
    back = args.from_claude({"command": "true", "timeout": 5500, "run_in_background": False}, sent)
    assert RunCommandParams.validate(back) == RunCommandParams(command="true", timeout_secs=6, background=False)
    commit = GitCommitParams(message="m")
    (shown,) = GitCommit().claude_calls(commit, workspace)
    with pytest.raises(ValueError, match="`command` has no counterpart"):
        commit.from_claude({**shown.input, "command": "git push"}, shown.input)
    assert commit.from_claude(dict(shown.input), shown.input) == {"message": "m", "paths": None, "all": False}


def test_a_claude_settings_hook_timeout_past_the_bound_keeps_the_bound(workspace: Path, home: Path) -> None:
    """Some collections write milliseconds there (5000); Claude Code takes it, so the file must load."""
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "true", "timeout": 5000}]}]}}))
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"trusted_projects": [str(workspace.resolve())]}))
    loaded = load_config(workspace)
    assert [h.timeout for g in loaded.config.hooks.PreToolUse for h in g.hooks] == [3600]
    [capped] = [w for w in loaded.warnings if "timeout" in w]
    assert capped.startswith(f"{workspace / '.claude' / 'settings.json'}: hooks.PreToolUse: ") and " 5000 s " in capped
    assert capped.endswith(" 3600 s is used"), capped


def test_post_tool_use_is_told_a_commands_result_as_claude_codes_bash_response(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    run_calls(workspace, {"hooks": hooks("PostToolUse", "Bash", logger(log))},
              call("run_command", {"command": "echo out; echo err >&2; exit 3"}, id="c"),
              call("run_command", {"command": "true"}, id="quiet"))
    got = {r["tool_use_id"]: r["tool_response"] for r in records(log)}
    assert got == {"c": {"stdout": "out", "stderr": "err", "interrupted": False, "isImage": False, "exit_code": 3},
                   "quiet": {"stdout": "", "stderr": "", "interrupted": False, "isImage": False, "exit_code": 0}}


def test_post_tool_use_is_told_a_read_as_claude_codes_read_response(workspace: Path, tmp_path: Path) -> None:
    """Claude Code's Read response carries the file's own lines (it numbers them itself from
    `startLine`): a hook hashing or parsing `tool_response.file.content` sees the file."""
    log = tmp_path / "log.jsonl"
    text = "".join(f"line {i}\n" for i in range(1, 11)) + "\n\tindented\n"
    (workspace / "a.txt").write_text(text)
    (workspace / "empty.txt").write_text("")
    run_calls(workspace, {"hooks": hooks("PostToolUse", "Read", logger(log))},
              call("read_file", {"path": "a.txt"}, id="whole"),
              call("read_file", {"path": "a.txt", "offset": 3, "limit": 2}, id="window"),
              call("read_file", {"path": "empty.txt"}, id="empty"))
    got = {r["tool_use_id"]: r["tool_response"] for r in records(log)}
    assert got["whole"] == {"type": "text", "file": {"filePath": str(workspace / "a.txt"), "content": text[:-1],
                                                     "numLines": 12, "startLine": 1, "totalLines": 12}}
    assert got["window"]["file"] | {"filePath": ""} == {"filePath": "", "content": "line 3\nline 4", "numLines": 2,
                                                         "startLine": 3, "totalLines": 12}
    assert got["empty"]["file"]["content"] == "" and got["empty"]["file"]["numLines"] == 0


def test_background_tasks_and_skills_are_told_in_claude_codes_field_names(workspace: Path, tmp_path: Path) -> None:
    """A hook that follows background shells reads BashOutput's `bash_id`, KillShell's `shell_id`
    and the started command's `backgroundTaskId`; a skill tracker reads Skill's `skill`."""
    log = tmp_path / "log.jsonl"
    skill = workspace / ".nanohermes" / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: take notes\n---\nTake notes.\n")
    llm = ScriptedLLM([tool_reply(call("run_command", {"command": "sleep 30", "background": True}, id="bg")),
                       lambda body: tool_reply(*[call(name, {"task_id": task}, id=name) for task in
                                                 [body["messages"][-1]["content"].split()[3].rstrip(":")]
                                                 for name in ("task_output", "task_kill")]),
                       tool_reply(call("skill", {"name": "notes"}, id="sk")), Reply(text="done")])
    built = build_agent(Config.from_dict({"permission_mode": "goal", "hooks": {
        **hooks("PreToolUse", "BashOutput|KillShell|Skill", logger(log)), **hooks("PostToolUse", "Bash", logger(log))}}),
        workspace, RecordingUI(), llm=llm, save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    got = {r["tool_use_id"]: r for r in records(log)}
    task = got["bg"]["tool_response"]["backgroundTaskId"]
    assert got["task_output"]["tool_name"] == "BashOutput" and got["task_output"]["tool_input"]["bash_id"] == task
    assert got["task_kill"]["tool_name"] == "KillShell" and got["task_kill"]["tool_input"]["shell_id"] == task
    assert got["sk"]["tool_name"] == "Skill" and got["sk"]["tool_input"]["skill"] == "notes"
