"""Esc at a question a sub-agent asks stops that sub-agent's run, as Esc at the main turn's
question stops the main turn: also for one running in the background while the person is at
the prompt. The REPL in a pty, the loopback fake server routing the sub-agent's requests by
its task."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from nanohermes.testing import FakeServer, Reply, call, tool_reply
from test_repl_pty import Term, tool_results

TASK = "write w.txt"


def is_child(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "user" and m.get("content") == TASK for m in body["messages"])


def test_esc_at_a_background_subagents_question_stops_its_run(workspace: Path, home: Path) -> None:
    child = [tool_reply(call("write_file", {"path": "w.txt", "content": "x"})), Reply(text="child went on")]
    parent = [tool_reply(call("subagent", {"agent": "writer", "task": TASK, "wait": False}, id="s")),
              Reply(text="started it"), tool_reply(call("agent_list", {}, id="l")), Reply(text="listed")]
    with FakeServer() as server:
        server.default = lambda body: (child if is_child(body) else parent).pop(0)  # type: ignore[assignment]
        config = {"subagents": {"writer": {"description": "Writes files", "tools": ["write_file"]}}}
        t = Term(workspace, home, server, config=config)
        try:
            t.prompt()
            t.type("start the writer")
            t.wait("started it")
            t.wait("and Enter, or press")  # the sub-agent's question, while the person is at the prompt
            t.child.send("\x1b")
            t.wait("⊘ no, and stopped")
            t.prompt()
            t.type("how is it going?")
            t.wait("listed")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
        children = [r for r in server.requests if is_child(r)]
        board = tool_results(server.requests[-1])["l"]
    assert not (workspace / "w.txt").exists()
    assert len(children) == 1 and child == [Reply(text="child went on")]  # it never asked the model again
    assert "cancelled" in board, board


def test_a_question_open_when_the_turn_ends_still_takes_the_keys(workspace: Path, home: Path) -> None:
    # The sub-agent asks while the turn that started it still runs; that turn ends under the
    # open question (its answer is held until the question is on screen, and a Stop hook
    # tells when it ended). The terminal stays the question's: no prompt starts beside it,
    # its keys are not echoed, and Esc stops the sub-agent; the prompt comes after.
    asked = threading.Event()
    ended = home / "turn-ended"
    child = [tool_reply(call("write_file", {"path": "w.txt", "content": "x"})), Reply(text="child went on")]
    parent: list[Any] = [tool_reply(call("subagent", {"agent": "writer", "task": TASK, "wait": False}, id="s")),
                         Reply(text="started it"), tool_reply(call("agent_list", {}, id="l")), Reply(text="listed")]

    def answer(body: dict[str, Any]) -> Any:
        if is_child(body):
            return child.pop(0)
        if len(parent) == 3:  # the turn's last answer waits for the question
            asked.wait(30)
        return parent.pop(0)

    with FakeServer() as server:
        server.default = answer  # type: ignore[assignment]
        config = {"subagents": {"writer": {"description": "Writes files", "tools": ["write_file"]}},
                  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"touch {ended}"}]}]}}
        t = Term(workspace, home, server, config=config)
        try:
            t.prompt()
            t.type("start the writer")
            t.wait("and Enter, or press")  # the question, while the turn still runs
            asked.set()
            deadline = time.monotonic() + 60
            while not ended.exists() and time.monotonic() < deadline:
                t.pump()
            assert ended.exists()
            t.child.send("\x1b")
            t.wait("⊘ no, and stopped")
            t.prompt()
            t.type("how is it going?")
            t.wait("listed")
            t.leave()
        finally:
            asked.set()
            if t.child.isalive():
                t.child.terminate(force=True)
        board = tool_results(server.requests[-1])["l"]
    assert not (workspace / "w.txt").exists()
    assert "^[" not in t.text  # no key was echoed
    assert child == [Reply(text="child went on")] and "cancelled" in board, board
