"""Durable transcripts and resume: torn writes, crashes, --continue, --resume, `sessions`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nanohermes.common.messages import Message, ToolCall, Usage
from nanohermes.turn.session import LOST_RESULT, Transcript, find_session, list_sessions, sessions_dir
from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def only_session(home: Path) -> Path:
    files = list((home / ".local/share/nanohermes/sessions").glob("*/*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def write_session(workspace: Path, *messages: Message) -> Transcript:
    t = Transcript.create(workspace, model="m", mode="default")
    for m in messages:
        t.append(m)
    t.close()
    return t


# -- the file format -----------------------------------------------------------------------
def test_meta_line_has_workspace_model_mode_start_and_title(workspace: Path) -> None:
    t = write_session(workspace, Message.user("\n  Fix the flaky test in ci.yml  \nmore detail"), Message("assistant", "ok"))
    meta = records(t.path)[0]
    assert meta["type"] == "meta"
    assert meta["workspace"] == str(workspace)
    assert (meta["model"], meta["mode"], meta["title"]) == ("m", "default", "Fix the flaky test in ci.yml")
    assert time.strptime(meta["started"][:19], "%Y-%m-%dT%H:%M:%S")


def test_long_title_is_clipped_to_80_chars(workspace: Path) -> None:
    t = write_session(workspace, Message.user("x" * 200))
    assert records(t.path)[0]["title"] == "x" * 79 + "…"


def test_torn_last_line_is_dropped_and_cut_before_appending(workspace: Path) -> None:
    t = write_session(workspace, Message.user("hello"), Message("assistant", "hi"))
    whole = t.path.read_bytes()
    with open(t.path, "ab") as f:
        f.write(b'{"type": "message", "message": {"role": "user", "cont')  # killed mid-write
    t2, loaded = Transcript.open(t.path)
    assert [m.content for m in loaded.history] == ["hello", "hi"]
    assert t.path.read_bytes() == whole  # the torn tail is gone
    t2.append(Message.user("again"))
    t2.close()
    assert [r["message"]["content"] for r in records(t.path)[1:]] == ["hello", "hi", "again"]


def test_unreadable_middle_line_is_skipped_and_counted(workspace: Path) -> None:
    t = write_session(workspace, Message.user("a"))
    with open(t.path, "a") as f:
        f.write("not json\n")
        f.write(json.dumps({"type": "message", "message": {"role": "assistant", "content": "b"}}) + "\n")
    _, loaded = Transcript.open(t.path)
    assert [m.content for m in loaded.history] == ["a", "b"]
    assert loaded.skipped == 1


def test_calls_left_without_result_are_answered_on_load(workspace: Path) -> None:
    calls = (ToolCall("c1", "list_dir", "{}"), ToolCall("c2", "list_dir", "{}"))
    t = write_session(workspace, Message.user("go"), Message("assistant", None, calls), Message.tool("c1", "done"))
    t2, loaded = Transcript.open(t.path)
    t2.close()
    assert loaded.history[-2:] == [Message.tool("c1", "done"), Message.tool("c2", LOST_RESULT)]
    _, again = Transcript.open(t.path)  # the repair was written, so loading is now stable
    assert again.history == loaded.history and again.repaired == []


def test_usage_and_compaction_records_are_replayed(workspace: Path) -> None:
    t = write_session(workspace, Message.user("1"), Message("assistant", "a"), Message.user("2"), Message("assistant", "b"))
    t.record_usage(Usage(100, 10), "m")
    t.record_usage(Usage(5, 1, estimated=True), "m")
    t.record_compaction(Message.user("<conversation-summary>S</conversation-summary>"), kept=1)
    t.append(Message.user("3"))
    t.close()
    _, loaded = Transcript.open(t.path)
    assert [m.content for m in loaded.history] == ["<conversation-summary>S</conversation-summary>", "b", "3"]
    assert loaded.usage == Usage(105, 11, estimated=True)
    assert loaded.turns == 3


def test_find_session_by_prefix_and_errors(workspace: Path) -> None:
    a = write_session(workspace, Message.user("a"))
    assert find_session(workspace, a.id) == a.path
    assert find_session(workspace, a.id[:-2]) == a.path
    from nanohermes.common.errors import UsageError

    with pytest.raises(UsageError, match="no session `nope`"):
        find_session(workspace, "nope")
    with pytest.raises(UsageError, match="not a session ID"):
        find_session(workspace, "../x")


def test_list_sessions_most_recent_first_with_turns(workspace: Path) -> None:
    old = write_session(workspace, Message.user("old one"), Message("assistant", "x"))
    new = write_session(workspace, Message.user("new one"), Message("assistant", "y"), Message.user("more"))
    os.utime(old.path, (1_000_000, 1_000_000))
    infos = list_sessions(workspace)
    assert [(i.id, i.title, i.turns) for i in infos] == [(new.id, "new one", 2), (old.id, "old one", 1)]


# -- end to end ------------------------------------------------------------------------------
def test_p_session_is_found_by_continue_with_its_history_byte_for_byte(turn, server: FakeServer, workspace: Path,
                                                                        home: Path) -> None:
    (workspace / "ünï.txt").write_text("naïve — “quotes” \\ back\\slash\t\x01\n")
    server.add(tool_reply(call("read_file", {"path": "ünï.txt"}), call("list_dir", '{"path": "."}'), text="looking"),
               Reply(text="first answer"), Reply(text="second answer"))
    r1 = turn("-p", "read ünï", "--output-format", "json", server=server)
    assert r1.code == 0, r1.err
    r2 = turn("--continue", "-p", "second question", "--output-format", "json", server=server)
    assert r2.code == 0, r2.err
    assert r2.json()["session_id"] == r1.json()["session_id"]
    before = server.requests[1]["messages"]
    resumed = server.requests[2]["messages"]
    assert json.dumps(resumed[1:len(before)], ensure_ascii=False) == json.dumps(before[1:], ensure_ascii=False)
    assert resumed[len(before):] == [{"role": "assistant", "content": "first answer"},
                                     {"role": "user", "content": "second question"}]
    path = only_session(home)
    assert [r["message"]["role"] for r in records(path) if r["type"] == "message"] == [
        "user", "assistant", "tool", "tool", "assistant", "user", "assistant"]


def test_sigkill_mid_turn_then_continue_resumes_a_valid_history(server: FakeServer, workspace: Path, home: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}, id="r1")), Reply(text="never arrives", delay=60))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    argv = [sys.executable, "-m", "nanohermes", "--base-url", server.base_url, "--model", "fake-model"]
    proc = subprocess.Popen([*argv, "-p", "read a.txt"], cwd=workspace, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while len(server.requests) < 2 and time.monotonic() < deadline:  # the second model call is in flight
        time.sleep(0.02)
    assert len(server.requests) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)

    server.add(Reply(text="resumed fine"))
    p = subprocess.run([*argv, "--continue", "-p", "carry on"], cwd=workspace, env=env, input="",
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, "resumed fine\n"), p.stderr
    # Only the in-flight model call was lost; the tool round before it survived.
    assert server.requests[2]["messages"][1:] == [
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "r1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]},
        {"role": "tool", "content": "1\talpha", "tool_call_id": "r1"},
        {"role": "user", "content": "carry on"},
    ]
    lines = only_session(home).read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # every line valid JSON


def test_sigkill_during_a_tool_marks_the_call_interrupted(server: FakeServer, workspace: Path, home: Path) -> None:
    # The assistant message is on disk before its tools run; the crash leaves it unanswered.
    t = Transcript.create(workspace, model="fake-model", mode="default")
    t.append(Message.user("run it"))
    t.append(Message("assistant", None, (ToolCall("x1", "read_file", '{"path": "a"}'),)))
    t.close()
    server.add(Reply(text="ok"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-m", "nanohermes", "--base-url", server.base_url, "--model", "fake-model",
                        "--continue", "-p", "what happened?"], cwd=workspace, env=env, input="",
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "1 tool call was still running when the session stopped" in p.stderr
    assert server.requests[0]["messages"][3] == {"role": "tool", "content": LOST_RESULT, "tool_call_id": "x1"}


def test_continue_without_a_session_is_a_usage_error(turn) -> None:
    r = turn("--continue", "-p", "x")
    assert r.code == 2
    assert "no saved session for" in r.err and "hint:" in r.err


def test_resume_by_id(turn, server: FakeServer, workspace: Path) -> None:
    first = write_session(workspace, Message.user("topic one"), Message("assistant", "one"))
    write_session(workspace, Message.user("topic two"), Message("assistant", "two"))
    server.add(Reply(text="back"))
    r = turn("--resume", first.id, "-p", "continue one", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert r.json()["session_id"] == first.id
    assert server.requests[0]["messages"][1]["content"] == "topic one"


def test_resume_without_id_and_without_terminal_says_what_to_do(turn, workspace: Path) -> None:
    write_session(workspace, Message.user("x"))
    r = turn("--resume", "-p", "go")
    assert r.code == 2
    assert "--resume without an ID needs a terminal" in r.err
    assert "nanohermes sessions" in r.err


def test_resume_picker_in_a_terminal(server: FakeServer, workspace: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    old = write_session(workspace, Message.user("the older topic"), Message("assistant", "a"))
    os.utime(old.path, (1_000_000, 1_000_000))
    write_session(workspace, Message.user("the newer topic"), Message("assistant", "b"))
    server.add(Reply(text="picked"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    child = pexpect.spawn(sys.executable, ["-m", "nanohermes", "--base-url", server.base_url, "--model", "fake-model",
                                           "--resume", "-p", "hello"], cwd=str(workspace), env=env, encoding="utf-8", timeout=30)
    child.expect("Resume which session")
    assert "1." in child.before and "the newer topic" in child.before and "2." in child.before
    assert "the older topic" in child.before and "1 turns" in child.before
    child.sendline("2")
    child.expect("picked")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert server.requests[0]["messages"][1]["content"] == "the older topic"


def test_sessions_subcommand_lists_title_time_and_turns(turn, workspace: Path) -> None:
    r = turn("sessions")
    assert (r.code, r.out.strip()) == (0, "no saved sessions for this workspace")
    t = Transcript.create(workspace, model="fake-model", mode="default")
    for m in (Message.user("Refactor the parser"), Message("assistant", "a"), Message.user("and test it"), Message("assistant", "b")):
        t.append(m)
    t.close()
    r = turn("sessions")
    assert r.code == 0, r.err
    header, row = r.out.strip().splitlines()
    assert header.split() == ["ID", "LAST", "USED", "TURNS", "TITLE"]
    assert row.endswith("    2  Refactor the parser")
    r = turn("sessions", "--json")
    obj = json.loads(r.out)
    assert (obj["title"], obj["turns"], obj["model"]) == ("Refactor the parser", 2, "fake-model")
    assert Path(obj["path"]).parent == sessions_dir(workspace)


def test_no_session_writes_nothing_and_refuses_continue(turn, server: FakeServer, home: Path) -> None:
    server.add(Reply(text="x"))
    assert turn("-p", "x", "--no-session", server=server).code == 0
    assert not list((home / ".local/share/nanohermes/sessions").glob("*/*.jsonl"))
    r = turn("--continue", "--no-session", "-p", "x")
    assert r.code == 2 and "--no-session cannot be combined" in r.err


def test_a_session_in_use_is_not_opened_twice(workspace: Path) -> None:
    from nanohermes.common.errors import UsageError

    t = write_session(workspace, Message.user("busy"))
    first, _ = Transcript.open(t.path)
    with pytest.raises(UsageError, match=f"session {t.id} is in use by another nanohermes process"):
        Transcript.open(t.path)
    first.close()
    again, loaded = Transcript.open(t.path)  # free again once the first writer is done
    again.close()
    assert [m.content for m in loaded.history] == ["busy"]


def test_resume_in_a_running_session_switches_to_it(workspace: Path) -> None:
    import asyncio

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.testing import ScriptedLLM
    from nanohermes.tools import todo

    other = write_session(workspace, Message.user("the other topic"), Message("assistant", "noted"))
    llm = ScriptedLLM([Reply(text="first"), Reply(text="second"), Reply(text="third")])
    agent = build_agent(Config(), workspace, RecordingUI(), llm=llm).agent
    asyncio.run(agent.ask("current topic"))
    assert agent.session.transcript is not None
    current = agent.session.transcript.path
    todo.restore(agent.runtime.session.state, [])
    assert agent.session.resume(other.path) == []
    assert [m.content for m in agent.session.history] == ["the other topic", "noted"]
    assert agent.runtime.session.folder == other.dir
    asyncio.run(agent.ask("back to it"))
    assert llm.requests[1]["messages"][1]["content"] == "the other topic"
    assert [r["message"]["content"] for r in records(other.path) if r["type"] == "message"][-2:] == ["back to it", "second"]
    agent.session.resume(current)  # and back again; our own lock on it was released first
    agent.session.resume(current)
    assert [m.content for m in agent.session.history] == ["current topic", "first"]
    agent.session.transcript.close()


# -- one Session: /clear and /resume keep history, transcript, folder and meters together ----
def saved(session_path: Path) -> tuple[list[dict], Usage]:
    """What a transcript holds: its messages (no compaction in these tests) and usage."""
    recs = records(session_path)
    usage = Usage()
    for r in recs:
        if r["type"] == "usage":
            usage = usage + Usage(r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"])
    return [r["message"] for r in recs if r["type"] == "message"], usage


def assert_one_session(agent: object) -> None:
    from nanohermes.turn.agent import Agent

    assert isinstance(agent, Agent)
    session = agent.session
    assert session.path is not None and session.transcript is not None
    messages, usage = saved(session.path)
    assert messages == [m.to_wire() for m in session.history]
    assert usage == session.usage and session.usage_by_model == ({"scripted": usage} if usage != Usage() else {})
    assert session.folder == session.transcript.dir


def test_clear_and_resume_leave_one_consistent_session(workspace: Path) -> None:
    import asyncio

    from rich.console import Console

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.testing import ScriptedLLM
    from nanohermes.tools import todo
    from nanohermes.ui.commands import REGISTRY, CommandContext, load_commands

    load_commands()
    (workspace / "d").mkdir()
    for i in range(40):
        (workspace / "d" / f"file{i:02}").write_text("")
    llm = ScriptedLLM([
        tool_reply(call("todo_write", {"todos": [{"content": "step one", "status": "in_progress"}]}),
                   call("list_dir", {"path": "d"})),
        Reply(text="first answer", usage=(7, 3)),
        Reply(text="second answer", usage=(100, 1)),
        Reply(text="after resuming"),
    ])
    config = Config.from_dict({"limits": {"aggregate_budget_chars": 300, "persisted_preview_chars": 10}})
    built = build_agent(config, workspace, RecordingUI(), llm=llm)
    agent = built.agent
    console = Console(width=160, record=True, color_system=None)
    ctx = CommandContext(agent=agent, config=config, workspace=workspace, print=console.print, registry=REGISTRY,
                         built=built)

    async def go() -> None:
        async with built.session():
            await agent.ask("first topic")
            first = agent.session.path
            assert first is not None
            assert_one_session(agent)
            assert agent.session.usage == Usage(17, 8)
            assert [t.content for t in todo.current(agent.session.state)] == ["step one"]
            assert [p.name for p in (first.with_suffix("") / "tool-results").iterdir()] == ["call_2.txt"]

            await REGISTRY.run("/clear", ctx)
            assert agent.session.path != first and agent.session.history == []
            assert agent.session.usage == Usage() and agent.session.usage_by_model == {}
            assert todo.current(agent.session.state) == ()
            assert agent.runtime.session is agent.session and agent.session.folder == agent.session.path.with_suffix("")
            await agent.ask("second topic")
            assert_one_session(agent)
            assert agent.session.usage == Usage(100, 1)
            assert saved(first)[1] == Usage(17, 8)  # the old session is untouched on disk

            await REGISTRY.run(f"/resume {first.stem}", ctx)
            assert agent.session.path == first
            assert_one_session(agent)
            assert agent.session.usage == Usage(17, 8)
            assert [t.content for t in todo.current(agent.session.state)] == ["step one"]
            await agent.ask("back to the first")
            assert_one_session(agent)
            assert [m.content for m in agent.session.history if m.role == "assistant"][-1] == "after resuming"

    asyncio.run(go())
    shown = console.export_text()
    assert "conversation cleared" in shown and f"resumed {agent.session.id}" in shown


def test_a_sub_agent_keeps_its_files_in_the_folder_of_the_session_in_force(workspace: Path) -> None:
    import asyncio

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.testing import ScriptedLLM

    llm = ScriptedLLM([Reply(text="one"),
                       tool_reply(call("subagent", {"agent": "helper", "task": "say hi", "wait": True})),
                       Reply(text="hi from the child"), Reply(text="done")])
    built = build_agent(Config.from_dict({"subagents": {"helper": {"description": "helps", "tools": []}}}),
                        workspace, RecordingUI(), llm=llm)
    agent = built.agent

    async def go() -> None:
        async with built.session():
            await agent.ask("first")
            await built.clear()
            await agent.ask("second")

    asyncio.run(go())
    folder = agent.session.folder
    assert folder is not None and (folder / "agents" / "agent-1.md").read_text() == "hi from the child"
