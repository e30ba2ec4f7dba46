"""Hooks: real hook processes recording their stdin, driven through a real agent and ScriptedLLM."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nanohermes.assemble import Built, build_agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config, load_config
from nanohermes.doctor import Setup, check_hooks
from nanohermes.common.events import ApprovalRequest, Notice, RecordingUI
from nanohermes.hooks.hooks import Hook, Hooks, missing_program
from nanohermes.common.events import PermissionDenied
from nanohermes.testing import Reply, ScriptedLLM, call, tool_reply

# A hook that appends its stdin (one JSON object) to LOG, then answers as told by its
# arguments: `out` printed on stdout, `err` on stderr, then exit with `code`. With
# `--once`, it answers only the first time (a Stop hook that sends the model back once).
RECORDER = r'''
import json, sys
log, code, out, err = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
once = "--once" in sys.argv
data = json.loads(sys.stdin.read())
with open(log, "a") as f:
    f.write(json.dumps(data) + "\n")
if once and data.get("stop_hook_active"):
    sys.exit(0)
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(code)
'''


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    return script


def hook_cmd(recorder: Path, log: Path, code: int = 0, out: str | dict[str, Any] = "", err: str = "",
             once: bool = False) -> str:
    text = json.dumps(out) if isinstance(out, dict) else out
    return " ".join(shlex.quote(str(a)) for a in
                    [sys.executable, recorder, log, code, text, err] + (["--once"] if once else []))


def group(command: str, matcher: str = "", timeout: float = 30) -> dict[str, Any]:
    return {"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": timeout}]}


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def build(ws: Path, llm: ScriptedLLM, ui: RecordingUI, hooks: dict[str, Any], **config: Any) -> Built:
    return build_agent(Config.from_dict({"hooks": hooks, **config}), ws, ui, llm=llm, asks=True, idle_between_turns=True)


def ask(built: Built, *prompts: str) -> None:
    async def go() -> None:
        async with built.session() as agent:
            for p in prompts:
                await agent.ask(p)

    asyncio.run(go())


def tool_messages(llm: ScriptedLLM) -> list[str]:
    return [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]


def denials(ui: RecordingUI) -> list[tuple[str, str, str]]:
    """The calls refused without asking: (tool, by what, why)."""
    return [(d.tool, d.kind, d.reason) for d in ui.of(PermissionDenied)]


def warnings(ui: RecordingUI) -> list[str]:
    return [n.text for n in ui.of(Notice) if n.level == "warning"]


def test_every_event_fires_with_its_documented_input(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    events = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "PreCompact",
              "Notification")
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done"),
                       Reply(text="the summary")])
    ui = RecordingUI(answers=["once"])
    built = build(workspace, llm, ui, {e: [group(hook_cmd(recorder, log))] for e in events})

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("hello")
            assert agent.compactor is not None
            await agent.compactor.manual(agent.session, focus="the files")

    asyncio.run(go())
    got = records(log)
    transcript = built.agent.session.transcript
    assert transcript is not None
    for r in got:
        assert r["session_id"] == transcript.id
        assert r["transcript_path"] == str(transcript.dir / "claude-transcript.jsonl")
        assert r["nanohermes"]["transcript_path"] == str(transcript.path)
        assert r["cwd"] == str(workspace) and r["permission_mode"] == "default"
    by = {e: [r for r in got if r["hook_event_name"] == e] for e in events}
    assert by["SessionStart"] == [{**by["SessionStart"][0], "source": "startup"}]
    assert by["UserPromptSubmit"][0]["prompt"] == "hello"
    assert by["PreToolUse"][0]["tool_name"] == "Write"
    assert by["PreToolUse"][0]["nanohermes"]["tool_name"] == "write_file"
    assert by["PreToolUse"][0]["tool_input"] == {"path": "a.txt", "content": "A", "file_path": str(workspace / "a.txt")}
    assert by["PostToolUse"][0]["tool_input"] == {"path": "a.txt", "content": "A", "file_path": str(workspace / "a.txt")}
    written = {"filePath": str(workspace / "a.txt"), "content": "A", "success": True}
    assert by["PostToolUse"][0]["tool_response"] == written
    assert "a.txt" in by["PostToolUse"][0]["nanohermes"]["tool_response"]
    assert by["Stop"][0]["stop_hook_active"] is False
    assert by["PreCompact"][0]["trigger"] == "manual" and by["PreCompact"][0]["custom_instructions"] == "the files"
    told = sorted((r["notification_type"], r["message"]) for r in by["Notification"])
    assert [kind for kind, _ in told] == ["idle_prompt", "permission_prompt"]
    assert told[1][1].endswith(" write_file: a.txt"), told
    assert by["SessionEnd"][0]["reason"] == "exit"
    assert got[0]["hook_event_name"] == "SessionStart" and got[-1]["hook_event_name"] == "SessionEnd"
    assert (workspace / "a.txt").read_text() == "A"


def test_pre_tool_use_allow_answers_the_approval_question(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI()  # would refuse any question
    ask(build(workspace, llm, ui, {"PreToolUse": [group(hook_cmd(recorder, log, out={
        "permissionDecision": "allow", "permissionDecisionReason": "writes are fine"}), matcher="write_file|edit_file")]}),
        "go")
    assert ui.of(ApprovalRequest) == []
    assert (workspace / "a.txt").read_text() == "A"


def test_pre_tool_use_reads_the_older_decision_spelling(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    for decision, written in (("approve", True), ("block", False)):
        ws = workspace / decision
        ws.mkdir()
        llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
        ask(build(ws, llm, RecordingUI(), {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
            "decision": decision, "reason": "old style"}))]}), "go")
        assert (ws / "a.txt").exists() == written
        [result] = tool_messages(llm)
        assert result.startswith("ERROR") != written
        assert written or result == "ERROR: blocked by a PreToolUse hook: old style"


def test_pre_tool_use_allow_never_lifts_a_deny_rule(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ask(build(workspace, llm, RecordingUI(), {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "permissionDecision": "allow"}))]}, permissions={"deny": ["write_file(a.txt)"]}), "go")
    assert not (workspace / "a.txt").exists()
    assert tool_messages(llm)[0].startswith("ERROR:") and "write_file(a.txt)" in tool_messages(llm)[0]


def test_pre_tool_use_deny_sends_its_reason_to_the_model(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI(answers=["once"])
    ask(build(workspace, llm, ui, {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no writes on Fridays"}}))]}),
        "go")
    [(tool, kind, why)] = denials(ui)
    assert (tool, kind) == ("write_file", "hook") and why.endswith(": no writes on Fridays")
    [result] = tool_messages(llm)
    assert result.startswith("ERROR: ") and result.endswith(why)
    assert not (workspace / "a.txt").exists() and ui.of(ApprovalRequest) == []


def test_pre_tool_use_ask_asks_what_auto_approve_would_allow(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI()  # nobody answers: refused
    ask(build(workspace, llm, ui, {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "permissionDecision": "ask", "permissionDecisionReason": "check this one"}))]}, auto_approve=True), "go")
    [req] = ui.of(ApprovalRequest)
    assert req.reason.endswith(": check this one") and req.rule == ""
    assert not (workspace / "a.txt").exists()
    assert tool_messages(llm)[0].startswith("Denied by the user.")


def test_updated_input_replaces_the_arguments(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI()
    ask(build(workspace, llm, ui, {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "updatedInput": {"path": "safe/a.txt", "content": "A, checked"}}))]}, auto_approve=True), "go")
    assert not (workspace / "a.txt").exists()
    assert (workspace / "safe" / "a.txt").read_text() == "A, checked"
    [rewrote] = [n.text for n in ui.of(Notice) if "rewrote" in n.text]
    assert rewrote.endswith(" write_file") and rewrote.startswith("a PreToolUse hook ")


def test_updated_input_is_checked_by_the_deny_rules_again(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ask(build(workspace, llm, RecordingUI(), {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "permissionDecision": "allow", "updatedInput": {"path": "secret/a.txt", "content": "A"}}))]},
        auto_approve=True, permissions={"deny": ["write_file(secret/**)"]}), "go")
    assert not (workspace / "secret").exists() and not (workspace / "a.txt").exists()
    [result] = tool_messages(llm)
    assert result.startswith("ERROR:") and "write_file(secret/**)" in result


def test_updated_input_that_fails_validation_is_refused(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ask(build(workspace, llm, RecordingUI(), {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "updatedInput": {"content": "no path"}}))]}, auto_approve=True), "go")
    [result] = tool_messages(llm)
    assert result.startswith("ERROR: a PreToolUse hook ") and " write_file " in result, result
    assert "path" in result and not (workspace / "a.txt").exists()


def test_exit_2_blocks_with_stderr_as_the_reason(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI()
    ask(build(workspace, llm, ui, {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", code=2,
                                                                   err="use the formatter first\n"))]},
              auto_approve=True), "go")
    [(_, kind, why)] = denials(ui)
    assert kind == "hook" and why.endswith(": use the formatter first")
    assert tool_messages(llm) == [f"ERROR: {why}"]
    assert not (workspace / "a.txt").exists()


def test_matcher_names_tools_exactly_or_is_a_regular_expression() -> None:
    def hook(m: str) -> Hook:
        return Hook("PreToolUse", m, "true", 1, "")

    assert hook("run_command|write_file").matches("write_file")
    assert not hook("write").matches("write_file")  # a plain name is the whole name
    assert hook("mcp__github__.*").matches("mcp__github__create_issue")
    assert not hook("mcp__github__.*").matches("mcp__gitlab__x")
    assert hook("").matches("anything") and hook("*").matches("anything")


def test_a_hook_only_runs_for_matching_tools(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("x")
    log = tmp_path / "log.jsonl"
    llm = ScriptedLLM([tool_reply(call("read_file", {"path": "a.txt"}), call("list_dir", {})), Reply(text="done")])
    ask(build(workspace, llm, RecordingUI(), {"PreToolUse": [group(hook_cmd(recorder, log), matcher="list_dir")]}), "go")
    assert [(r["tool_name"], r["nanohermes"]["tool_name"]) for r in records(log)] == [("LS", "list_dir")]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_timeout_kills_the_hooks_process_group_and_the_call_goes_on(workspace: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    command = f"sleep 300 & echo $! > {shlex.quote(str(pidfile))}; sleep 300"
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI()
    started = time.monotonic()
    ask(build(workspace, llm, ui, {"PreToolUse": [group(command, timeout=0.5)]}, auto_approve=True), "go")
    assert time.monotonic() - started < 60
    [warned] = warnings(ui)
    assert warned.startswith(f"PreToolUse hook `{command[:57]}…` ") and " 0.5s" in warned, warned
    assert (workspace / "a.txt").read_text() == "A"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_a_crashing_hook_is_a_warning_and_the_call_goes_on(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI()
    crash = tmp_path / "crash.py"
    crash.write_text("raise RuntimeError('hook bug')\n")
    command = f"{shlex.quote(sys.executable)} {crash}"
    ask(build(workspace, llm, ui, {"PreToolUse": [group(command)]}, auto_approve=True), "go")
    [warned] = warnings(ui)
    assert warned.startswith(f"PreToolUse hook `{command[:57]}…` ") and " 1: RuntimeError: hook bug;" in warned
    assert (workspace / "a.txt").read_text() == "A"


def test_other_exit_codes_warn_with_the_first_stderr_line(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("list_dir", {})), Reply(text="done")])
    ui = RecordingUI()
    command = hook_cmd(recorder, tmp_path / "l", code=3, err="warming up\nboom\n")
    ask(build(workspace, llm, ui, {"PreToolUse": [group(command)]}), "go")
    [warned] = warnings(ui)
    assert warned.startswith(f"PreToolUse hook `{command[:57]}…` ") and " 3: boom;" in warned, warned
    assert not tool_messages(llm)[0].startswith("ERROR")


def test_post_tool_use_block_reason_reaches_the_model_and_the_turn_goes_on(workspace: Path, recorder: Path,
                                                                           tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.py", "content": "x=1"})), Reply(text="fixed")])
    ask(build(workspace, llm, RecordingUI(), {"PostToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "decision": "block", "reason": "lint: missing spaces"}), matcher="write_file")]}, auto_approve=True), "go")
    [result] = tool_messages(llm)
    assert result.endswith("\n\nPostToolUse hook: lint: missing spaces")
    assert len(llm.requests) == 2


def test_stop_block_sends_the_model_back_with_the_reason(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    llm = ScriptedLLM([Reply(text="all done"), Reply(text="tests run, now done")])
    ui = RecordingUI()
    built = build(workspace, llm, ui, {"Stop": [group(hook_cmd(recorder, log, out={
        "decision": "block", "reason": "run the tests first"}, once=True))]})
    ask(built, "go")
    last = llm.requests[-1]["messages"]
    assert last[-1]["role"] == "user" and last[-1]["content"].endswith(":\nrun the tests first")
    assert [r["stop_hook_active"] for r in records(log)] == [False, True]
    assert built.agent.session.history[-1].content == "tests run, now done"


def test_stop_exit_2_blocks_too(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([Reply(text="done"), Reply(text="really done")])
    ask(build(workspace, llm, RecordingUI(), {"Stop": [group(hook_cmd(recorder, tmp_path / "l", code=2,
                                                                        err="not yet", once=True))]}), "go")
    assert llm.requests[-1]["messages"][-1]["content"].endswith("\nnot yet")


def test_user_prompt_submit_adds_context_and_can_block(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([Reply(text="ok")])
    ask(build(workspace, llm, RecordingUI(), {"UserPromptSubmit": [group(hook_cmd(recorder, tmp_path / "l", out={
        "additionalContext": "branch: main"}))]}), "hello")
    assert llm.requests[0]["messages"][-1]["content"] == "hello\n\n<hook-context>\nbranch: main\n</hook-context>"

    llm2 = ScriptedLLM([])
    ui = RecordingUI()
    ask(build(workspace, llm2, ui, {"UserPromptSubmit": [group(hook_cmd(recorder, tmp_path / "l", code=2,
                                                                          err="no secrets in prompts"))]}), "my key")
    assert llm2.requests == []  # never sent
    [warned] = [w for w in warnings(ui) if "UserPromptSubmit" in w]
    assert warned.endswith(": no secrets in prompts"), warned


def test_session_start_context_joins_the_system_prompt(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([Reply(text="ok")])
    ask(build(workspace, llm, RecordingUI(), {"SessionStart": [group(hook_cmd(recorder, tmp_path / "l",
                                                                                out="open tickets: 3"))]}), "hi")
    system = llm.requests[0]["messages"][0]["content"]
    assert system.endswith("\n\n<session-start-context>\nopen tickets: 3\n</session-start-context>")


def test_hook_context_limit_lowered(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([Reply(text="ok")])
    ask(build(workspace, llm, RecordingUI(), {"UserPromptSubmit": [group(hook_cmd(recorder, tmp_path / "l", out={
        "additionalContext": "x" * 100}))]}, limits={"hook_context_chars": 40}), "hi")
    expected = "x" * 30 + "\n… output truncated (60 chars omitted) …\n" + "x" * 10
    assert llm.requests[0]["messages"][-1]["content"] == f"hi\n\n<hook-context>\n{expected}\n</hook-context>"


def test_hook_output_limit_lowered(workspace: Path, tmp_path: Path) -> None:
    ui = RecordingUI()
    command = f"{shlex.quote(sys.executable)} -c \"import sys; sys.stdout.write('y' * 5000)\""
    hooks = Hooks([Hook("SessionEnd", "", command, 30, "test")], workspace, Limits(hook_output_bytes=1000), ui.emit)
    run = asyncio.run(hooks.run(hooks.hooks[0], hooks.payload("SessionEnd")))
    assert run.stdout == "y" * 1000
    assert warnings(ui) == [f"SessionEnd hook `{command[:57]}…` stdout cut at 1000 bytes (4000 bytes omitted)"]


def test_notification_needs_a_person_to_wait(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    config = Config.from_dict({"hooks": {"Notification": [group(hook_cmd(recorder, log))]}})
    built = build_agent(config, workspace, RecordingUI(), llm=llm)  # as `-p` without a terminal: nobody is waited on
    ask(built, "go")
    assert records(log) == []


def write_config(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_an_untrusted_projects_hooks_are_ignored(workspace: Path, home: Path) -> None:
    project = workspace / ".nanohermes" / "config.json"
    write_config(project, {"hooks": {"PreToolUse": [group("touch pwned")]}})
    loaded = load_config(workspace)
    assert loaded.config.hooks.PreToolUse == []
    [warned] = [w for w in loaded.warnings if "hooks" in w]
    assert warned.startswith(f"{project}: ") and "not trusted" in warned, warned


def test_a_trusted_projects_hooks_add_to_the_users(workspace: Path, home: Path) -> None:
    user = home / ".config" / "nanohermes" / "config.json"
    project = workspace / ".nanohermes" / "config.json"
    write_config(user, {"trusted_projects": [str(workspace)], "hooks": {"PreToolUse": [group("user-hook")]}})
    write_config(project, {"hooks": {"PreToolUse": [group("project-hook", matcher="run_command")],
                                     "Stop": [group("stop-hook")]}})
    config = load_config(workspace).config
    hooks = Hooks.from_config(config.hooks, workspace, Limits(), lambda e: None)
    assert [(h.event, h.command, h.origin) for h in hooks.hooks] == [
        ("PreToolUse", "user-hook", str(user)), ("PreToolUse", "project-hook", str(project)),
        ("Stop", "stop-hook", str(project))]
    assert hooks.lines()[1].split() == ["PreToolUse", "run_command", "project-hook", "(timeout", "30s;", f"{project})"]


def test_a_bad_matcher_names_the_file(workspace: Path, home: Path) -> None:
    from nanohermes.common.errors import ConfigError

    write_config(home / ".config" / "nanohermes" / "config.json", {"hooks": {"Stop": [group("x", matcher="(")]}})
    with pytest.raises(ConfigError, match="matcher '\\(' is not a regular expression"):
        load_config(workspace)


def test_doctor_checks_each_hooks_program(workspace: Path, home: Path) -> None:
    script = workspace / "hooks" / "ok.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (workspace / "hooks" / "plain.sh").write_text("#!/bin/sh\n")
    write_config(home / ".config" / "nanohermes" / "config.json", {"hooks": {"PreToolUse": [
        {"hooks": [{"command": "./hooks/ok.sh --fast"}, {"command": "FOO=1 no-such-program-xyz arg"},
                   {"command": "hooks/plain.sh"}, {"command": "cat"}]}]}})
    setup = Setup(workspace, load_config(workspace))
    checks = asyncio.run(check_hooks(setup))
    assert [(c.status, c.detail) for c in checks] == [
        ("ok", "./hooks/ok.sh --fast"), ("fail", "no-such-program-xyz: not found on PATH"),
        ("fail", "hooks/plain.sh: not executable (chmod +x it)"), ("ok", "cat")]
    assert missing_program("'unclosed", workspace).endswith(": No closing quotation")  # type: ignore[union-attr]


def test_hooks_command_lists_the_hooks_in_force(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    from rich.console import Console

    from nanohermes.ui.commands import REGISTRY, CommandContext, load_commands

    load_commands()
    built = build(workspace, ScriptedLLM([]), RecordingUI(), {"Stop": [group("notify-done", matcher="")]})
    console = Console(width=200, record=True, color_system=None)
    ctx = CommandContext(agent=built.agent, config=built.agent.runtime.config, workspace=workspace,
                         print=console.print, registry=REGISTRY, built=built)
    asyncio.run(REGISTRY.run("/hooks", ctx))
    [line] = [ln for ln in console.export_text().splitlines() if "notify-done" in ln]
    assert line.split() == ["Stop", "*", "notify-done", "(timeout", "30s;", "config)"]
    assert os.environ.get("NANOHERMES_PROJECT_DIR") is None  # hooks get it, the process does not


def test_a_sub_agents_tool_calls_go_through_the_hooks_too(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    log = tmp_path / "log.jsonl"
    llm = ScriptedLLM([tool_reply(call("subagent", {"agent": "explore", "task": "read a.txt", "wait": True})),
                       tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="child done"),
                       Reply(text="parent done")])
    built = build(workspace, llm, RecordingUI(), {"PreToolUse": [group(hook_cmd(recorder, log, out={
        "permissionDecision": "deny", "permissionDecisionReason": "no reading"}), matcher="read_file")]},
        subagents={"explore": {"description": "Reads", "tools": ["read_file"]}})
    ask(built, "go")
    assert [r["nanohermes"]["tool_name"] for r in records(log)] == ["read_file"]
    child_results = [m["content"] for m in llm.requests[2]["messages"] if m["role"] == "tool"]
    [result] = child_results
    assert result.startswith("ERROR: ") and "PreToolUse hook" in result and result.endswith(": no reading")


def test_an_approval_shows_the_arguments_a_hook_rewrote(workspace: Path, recorder: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "A"})), Reply(text="done")])
    ui = RecordingUI(answers=["once"])
    ask(build(workspace, llm, ui, {"PreToolUse": [group(hook_cmd(recorder, tmp_path / "l", out={
        "permissionDecision": "ask", "updatedInput": {"path": "b.txt", "content": "B"}}))]}), "go")
    [req] = ui.of(ApprovalRequest)
    assert req.summary == "b.txt" and "+B" in req.detail.splitlines() and "+A" not in req.detail.splitlines()
    assert (workspace / "b.txt").read_text() == "B" and not (workspace / "a.txt").exists()


def test_a_hook_that_never_reads_a_large_input_still_times_out(workspace: Path, tmp_path: Path) -> None:
    ui = RecordingUI()
    hooks = Hooks([Hook("PostToolUse", "", "sleep 300", 0.5, "test")], workspace, Limits(), ui.emit)
    started = time.monotonic()
    run = asyncio.run(hooks.run(hooks.hooks[0], hooks.payload("PostToolUse", tool_response="x" * 1_000_000)))
    assert run.code is None and time.monotonic() - started < 30
    [warned] = warnings(ui)
    assert warned.startswith("PostToolUse hook `sleep 300` ") and " 0.5s" in warned, warned


def test_a_hook_cancelled_while_its_pipes_connect_ends_and_leaves_nothing(workspace: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """As for a command: cancelled between the hook's start and asyncio's connecting its
    pipes, with a background member holding them, the hook still ends at once, group killed.
    The loop is held still right after the start, so that moment is caught every time."""
    import uuid

    from exec_support import MARK_VAR, marked_pids, wait_until

    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARK_VAR, marker)
    hooks = Hooks([Hook("PostToolUse", "", "sleep 300 & sleep 301", 60, "test")], workspace, Limits())

    async def go() -> None:
        task = asyncio.create_task(hooks.run(hooks.hooks[0], hooks.payload("PostToolUse")))
        while not marked_pids(marker):
            await asyncio.sleep(0)
        assert wait_until(lambda: len(marked_pids(marker)) >= 3)  # the loop held still
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=20)
        assert done, "the cancelled hook did not end"

    try:
        asyncio.run(go())
        assert wait_until(lambda: not marked_pids(marker), timeout=10)
    finally:
        for pid in marked_pids(marker):
            os.kill(pid, 9)


# -- through the real CLI and REPL -------------------------------------------------------------
def recording_config(recorder: Path, log: Path, events: tuple[str, ...], **kw: Any) -> dict[str, Any]:
    return {"hooks": {e: [group(hook_cmd(recorder, log, **kw))] for e in events}}


def test_print_mode_fires_the_session_events_with_the_runs_session(turn, server: Any, recorder: Path,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path, workspace: Path) -> None:
    from nanohermes.testing import Reply as R

    log = tmp_path / "log.jsonl"
    server.add(R(text="hi there"))
    ran = turn("-p", "hello", "--output-format", "json", server=server,
              config=recording_config(recorder, log, ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")))
    assert ran.code == 0, ran.err
    sid = ran.json()["session_id"]
    seen = records(log)
    assert [r["hook_event_name"] for r in seen] == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
    for r in seen:
        assert r["session_id"] == sid and r["cwd"] == str(workspace)
        assert Path(r["transcript_path"]).is_file() and sid in r["transcript_path"]
    assert seen[0]["source"] == "startup" and seen[1]["prompt"] == "hello" and seen[3]["reason"] == "exit"


def test_print_mode_a_blocked_prompt_is_an_error_exit(turn, server: Any, recorder: Path,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path, home: Path) -> None:
    log = tmp_path / "log.jsonl"
    config = {"hooks": {"UserPromptSubmit": [group(hook_cmd(recorder, log, code=2, err="no secrets in prompts"))]}}
    ran = turn("-p", "the key is sk-123", "--output-format", "json", server=server, config=config)
    assert ran.code == 1, ran.err
    out = ran.json()
    assert (out["exit_reason"], out["is_error"]) == ("error", True)
    assert "UserPromptSubmit" in out["error"] and out["error"].endswith(": no secrets in prompts")
    assert out["turns"] == 0
    text = turn("-p", "again", server=server, config=config)
    assert text.code == 1 and text.out == ""
    assert out["error"] in text.err
    assert server.requests == []  # the prompt never reached the model
    # Nothing was said: no session is left behind for --continue to find.
    assert list((home / ".local/share/nanohermes/sessions").glob("*/*")) == []


def repl_term(workspace: Path, home: Path, server: Any, config: dict[str, Any]) -> Any:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_repl_pty import Term

    return Term(workspace, home, server, config=config)


def wait_for(log: Path, n: int) -> list[dict[str, Any]]:
    """The first `n` records, once they are there (Notification hooks run in the background)."""
    end = time.monotonic() + 30
    while len(records(log)) < n and time.monotonic() < end:
        time.sleep(0.05)
    return records(log)


def test_repl_notifies_clear_restarts_the_session_and_exit_ends_it(workspace: Path, home: Path, recorder: Path,
                                                                    tmp_path: Path) -> None:
    from nanohermes.testing import FakeServer

    log = tmp_path / "log.jsonl"
    config = recording_config(recorder, log, ("SessionStart", "SessionEnd", "Notification"))
    config["hooks"]["SessionStart"] = [group(hook_cmd(recorder, log, out={"additionalContext": "the build is make"}))]
    with FakeServer() as server:
        server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "a"})), Reply(text="wrote it"),
                   Reply(text="fresh start"))
        t = repl_term(workspace, home, server, config)
        try:
            t.prompt()
            t.type("write a file")
            t.wait("[n] No")
            t.armed()
            t.child.send("y")
            t.wait("wrote it")
            t.prompt()
            t.type("/clear")
            t.wait("conversation cleared")
            t.prompt()
            t.type("hello again")
            t.wait("fresh start")
            t.prompt()
            n = len(wait_for(log, 6))
            t.type("/exit")
            assert t.exit_code() == 0
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
        system = next(m for m in server.requests[-1]["messages"] if m["role"] == "system")["content"]
    assert system.count("the build is make") == 1  # the clear's SessionStart context replaced the first
    seen = wait_for(log, n + 1)
    names = [(r["hook_event_name"], r.get("source") or r.get("reason") or r.get("message", "")[:40]) for r in seen]
    assert names[0] == ("SessionStart", "startup")
    asked = [r["message"] for r in seen if r["hook_event_name"] == "Notification" and "permission" in r["message"]]
    assert len(asked) == 1 and " write_file: " in asked[0], asked
    first_idle = names.index(("Notification", "nanohermes is waiting for your input"))
    end_clear = names.index(("SessionEnd", "clear"))
    start_clear = names.index(("SessionStart", "clear"))
    assert first_idle < end_clear < start_clear
    assert names[-1] == ("SessionEnd", "exit")
    # /clear starts a new session: the hooks after it get the new one's id and transcript
    assert seen[end_clear]["session_id"] == seen[0]["session_id"]
    assert seen[start_clear]["session_id"] != seen[0]["session_id"]
    assert seen[-1]["session_id"] == seen[start_clear]["session_id"]
    assert seen[start_clear]["transcript_path"] != seen[0]["transcript_path"]


@pytest.mark.parametrize("how", ["ctrl-d", "sigterm"])
def test_repl_session_end_fires_on_ctrl_d_and_sigterm(workspace: Path, home: Path, recorder: Path, tmp_path: Path,
                                                      how: str) -> None:
    import signal

    from nanohermes.testing import FakeServer

    log = tmp_path / "log.jsonl"
    with FakeServer() as server:
        t = repl_term(workspace, home, server, recording_config(recorder, log, ("SessionStart", "SessionEnd")))
        try:
            t.prompt()
            assert [r["hook_event_name"] for r in wait_for(log, 1)] == ["SessionStart"]
            if how == "ctrl-d":
                t.child.send("\x04")
                assert t.exit_code() == 0
            else:
                t.child.kill(signal.SIGTERM)
                assert t.exit_code() == 143
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
    seen = records(log)
    assert [(r["hook_event_name"], r.get("reason")) for r in seen][1:] == [("SessionEnd", "exit")]
    assert seen[1]["session_id"] == seen[0]["session_id"] != ""


def test_print_mode_mcp_tools_match_as_mcp_server_tool(turn, server: Any, recorder: Path,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path) -> None:
    from nanohermes.testing import Reply as R

    demo = str(Path(__file__).parent / "mcp" / "demo_server.py")
    log = tmp_path / "log.jsonl"
    # The server's start (an interpreter importing the MCP SDK) is not what is tested: on a loaded
    # machine (sixteen workers on two cores) it can take longer than the 30 s servers get by default,
    # and the calls then find no such tool.
    config = {"limits": {"mcp_startup_timeout_secs": 600},
              "mcp": {"servers": {"demo": {"command": sys.executable, "args": [demo]}}},
              "hooks": {"PreToolUse": [group(hook_cmd(recorder, log), matcher="mcp__demo__echo"),
                                       group(hook_cmd(recorder, log, code=2, err="no adding"), matcher="mcp__demo__add")],
                        "PostToolUse": [group(hook_cmd(recorder, log), matcher="mcp__.*")]}}
    server.add(tool_reply(call("mcp__demo__echo", {"text": "hi"}, id="e"), call("mcp__demo__add", {"a": 1, "b": 2}, id="a")),
               R(text="done"))
    ran = turn("-p", "use the tools", "--yes", server=server, config=config)
    assert ran.code == 0, ran.err
    seen = [(r["hook_event_name"], r["tool_name"], r["tool_input"], r.get("tool_response")) for r in records(log)]
    assert seen == [("PreToolUse", "mcp__demo__echo", {"text": "hi"}, None),
                    ("PostToolUse", "mcp__demo__echo", {"text": "hi"}, "echo: hi"),
                    ("PreToolUse", "mcp__demo__add", {"a": 1, "b": 2}, None)]
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert results["e"] == "echo: hi" and results["a"].startswith("ERROR: ") and results["a"].endswith(": no adding")
    assert "PreToolUse hook" in results["a"]


def test_a_hook_without_a_timeout_gets_60_seconds(workspace: Path, home: Path) -> None:
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}))
    config = load_config(workspace).config
    hooks = Hooks.from_config(config.hooks, workspace, Limits(), lambda e: None)
    assert [h.timeout_secs for h in hooks.hooks] == [60.0]
    [line] = hooks.lines()
    assert "(timeout 60s; " in line
