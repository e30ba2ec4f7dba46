"""/rewind and /undo put back the session's state with its history: the todo list, what the
model has read (the stale-file guard), the title; /compact afterwards sees only what remains.
Real files, the real shadow store, a real agent driven by ScriptedLLM, and the REPL's own
command functions; one run through the REPL in a pty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_checkpoints import ask, build, command

from nanohermes.turn.session import list_sessions
from nanohermes.testing import Reply, ScriptedLLM, call, tool_reply


def results(llm: ScriptedLLM, request: int = -1) -> list[str]:
    """The tool results a request sent back, in order."""
    return [m["content"] for m in llm.requests[request]["messages"] if m["role"] == "tool"]


def todo(items: list[str]) -> Reply:
    return tool_reply(call("todo_write", {"todos": [{"content": c, "status": "pending"} for c in items]}))


def test_rewind_puts_back_the_todo_list_of_before_the_turn(workspace: Path) -> None:
    llm = ScriptedLLM([todo(["plan A"]), Reply(text="planned"), todo(["plan B"]), Reply(text="replanned"),
                       tool_reply(call("todo_read")), Reply(text="read"),
                       tool_reply(call("todo_read")), Reply(text="read again")])
    built = build(workspace, llm)
    ask(built, "first", "second")
    assert "conversation rewound to before turn 2" in command(built, "/rewind 2")
    ask(built, "what is the plan?")
    assert "[ ] 1. plan A" in results(llm)[-1] and "plan B" not in results(llm)[-1]
    assert "conversation rewound to before turn 1" in command(built, "/rewind 1")
    ask(built, "and now?")
    assert results(llm)[-1] == "No todo list yet; create one with todo_write."


def test_a_resumed_session_rewinds_to_the_todo_list_it_had(workspace: Path) -> None:
    built = build(workspace, ScriptedLLM([todo(["plan A"]), Reply(text="planned"), todo(["plan B"]),
                                          Reply(text="replanned")]))
    ask(built, "first", "second")
    path = built.agent.session.path
    built.agent.session.close()
    llm = ScriptedLLM([tool_reply(call("todo_read")), Reply(text="read")])
    resumed = build(workspace, llm, resume=path)
    assert "conversation rewound to before turn 2" in command(resumed, "/rewind 2 conversation")
    resumed.agent.session.close()
    again = build(workspace, llm, resume=path)  # the rewound state is the one on disk too
    ask(again, "what is the plan?")
    assert "plan A" in results(llm)[-1] and "plan B" not in results(llm)[-1]


def test_compact_after_a_rewind_sees_only_what_remains(workspace: Path) -> None:
    llm = ScriptedLLM([todo(["plan A"]), Reply(text="planned A"), Reply(text="noted"),
                       todo(["plan B"]), Reply(text="planned B SECRET-B"), Reply(text="the summary")])
    built = build(workspace, llm)
    ask(built, "first", "filler", "second, with B")
    command(built, "/rewind 3")
    command(built, "/compact")
    summarised = json.dumps(llm.requests[-1]["messages"])
    assert "planned A" in summarised and "SECRET-B" not in summarised and "second, with B" not in summarised
    summary = built.agent.session.history[0].content or ""
    assert "Current todo list (kept from before compacting):\n[ ] 1. plan A" in summary and "plan B" not in summary


@pytest.mark.parametrize("how", ["/rewind 2", "/rewind 2 files", "/undo"])
def test_a_file_nanohermes_restored_counts_as_read_as_it_restored_it(workspace: Path, how: str) -> None:
    (workspace / "a.txt").write_text("one\n")
    llm = ScriptedLLM([tool_reply(call("read_file", {"path": "a.txt"})),
                       tool_reply(call("edit_file", {"path": "a.txt", "old_string": "one", "new_string": "two"})),
                       Reply(text="two"),
                       tool_reply(call("edit_file", {"path": "a.txt", "old_string": "two", "new_string": "three"})),
                       Reply(text="three"),
                       tool_reply(call("edit_file", {"path": "a.txt", "old_string": "two", "new_string": "four"})),
                       Reply(text="four")])
    built = build(workspace, llm)
    ask(built, "make it two", "make it three")
    assert (workspace / "a.txt").read_text() == "three\n"
    assert "restored 1 file to before turn 2: a.txt" in command(built, how)
    assert (workspace / "a.txt").read_text() == "two\n"
    ask(built, "make it four")
    assert results(llm)[-1].startswith("edited a.txt"), results(llm)[-1]
    assert (workspace / "a.txt").read_text() == "four\n"


def test_a_file_read_only_in_the_rewound_turns_is_no_longer_read(workspace: Path) -> None:
    (workspace / "b.txt").write_text("the person's\n")
    llm = ScriptedLLM([Reply(text="hello"), tool_reply(call("read_file", {"path": "b.txt"})), Reply(text="read it"),
                       tool_reply(call("write_file", {"path": "b.txt", "content": "replaced\n"})), Reply(text="tried")])
    built = build(workspace, llm)
    ask(built, "hi", "read b.txt")
    command(built, "/rewind 2 conversation")
    ask(built, "replace b.txt")
    assert "you have not read it in this session" in results(llm)[-1]
    assert (workspace / "b.txt").read_text() == "the person's\n"


def test_a_file_changed_in_the_rewound_turn_is_stale_when_only_the_conversation_goes_back(workspace: Path) -> None:
    (workspace / "c.txt").write_text("one\n")
    llm = ScriptedLLM([tool_reply(call("read_file", {"path": "c.txt"})), Reply(text="read"),
                       tool_reply(call("run_command", {"command": "printf 'two\\n' > c.txt"})), Reply(text="changed"),
                       tool_reply(call("write_file", {"path": "c.txt", "content": "three\n"})), Reply(text="tried")])
    built = build(workspace, llm)
    ask(built, "read c.txt", "change it")
    command(built, "/rewind 2 conversation")  # the files stay as turn 2 left them
    ask(built, "write c.txt")
    assert "c.txt changed on disk since you last read or wrote it" in results(llm)[-1]
    assert (workspace / "c.txt").read_text() == "two\n"


def test_a_session_whose_first_turn_was_rewound_takes_the_next_prompt_as_its_title(workspace: Path) -> None:
    built = build(workspace, ScriptedLLM([Reply(text="one"), Reply(text="two")]))
    ask(built, "the first idea")
    command(built, "/rewind 1")
    assert [s.title for s in list_sessions(workspace)] == ["(untitled)"]
    ask(built, "the better idea")
    built.agent.session.close()
    assert [s.title for s in list_sessions(workspace)] == ["the better idea"]
    resumed = build(workspace, ScriptedLLM([]), resume=built.agent.session.path)
    assert resumed.agent.session.transcript is not None
    assert resumed.agent.session.transcript.meta["title"] == "the better idea"


def test_in_the_repl_rewind_puts_back_the_todo_list_and_a_bang_command_titles_the_session(
        workspace: Path, home: Path) -> None:
    from test_repl_pty import Term, tool_results

    from nanohermes.testing import FakeServer

    with FakeServer() as server:
        server.add(todo(["plan A"]), Reply(text="planned A"), todo(["plan B"]), Reply(text="planned B"),
                   tool_reply(call("todo_read", id="r1")), Reply(text="read the plan"))
        t = Term(workspace, home, server, config={"auto_approve": True})
        try:
            t.prompt()
            t.type("!echo started")
            t.wait("✓ !echo started")
            t.prompt()
            t.type("plan it")
            t.wait("planned A")
            t.prompt()
            t.type("plan again")
            t.wait("planned B")
            t.prompt()
            t.type("/rewind 2")
            t.wait("conversation rewound to before turn 2")
            t.wait("plan again")  # offered again at the prompt
            t.child.send("\x03")  # Ctrl-C clears it
            t.prompt()
            t.type("what is the plan?")
            t.wait("read the plan")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
        read = tool_results(server.requests[-1])["r1"]
        assert "plan A" in read and "plan B" not in read
    assert [s.title for s in list_sessions(workspace)] == ["!echo started"]
