"""Questions in a real terminal: an approval box, an MCP server's form and the folder-trust
question take only keys typed after they appeared (what was typed ahead waits in the next
prompt), and Esc at one of them means no and stops the turn, the person back at the prompt.
Each runs nanohermes on a pty against the fake server; a guard of 60 s
(`limits.approval_guard_secs`) makes "typed before it could be read" certain, whatever the load."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from nanohermes.common.dirs import user_config_path
from nanohermes.turn.runtime import INTERRUPTED
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.ui.keyguard import HELD_HINT
from tests.test_repl_pty import REPO, term, tool_results  # noqa: F401  # `term` is a fixture

LONG_GUARD = {"limits": {"approval_guard_secs": 60}}
DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


def last_user_message(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def test_keys_typed_around_an_approval_never_answer_it_and_wait_in_the_next_prompt(
        term: Any, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"}, id="w")), Reply(text="next one"))
    t = term(config=LONG_GUARD)
    t.prompt()
    t.type("write it")
    t.child.send("ad")  # the person starts their next message while the turn runs
    t.wait("approve?")
    t.wait("[n] No")
    t.child.send("d a test, yes")  # and goes on as the box comes up: `a` would be "always", `y` "yes"
    t.wait(HELD_HINT.strip())
    t.child.send("\x1b")  # Esc: no, and stop
    t.wait("⊘ no, and stopped: say what to do instead")
    t.prompt()
    assert not (workspace / "a.txt").exists()
    assert len(server.requests) == 1  # the model was not called again
    t.type(" please")  # the prompt holds what was typed
    t.wait("next one")
    t.leave()
    assert last_user_message(server.requests[1]) == "add a test, yes please"
    assert tool_results(server.requests[1]) == {"w": INTERRUPTED}  # the refused call was answered


def test_a_key_typed_once_the_box_takes_answers_answers_it(term: Any, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"})), Reply(text="written"))
    t = term()
    t.prompt()
    t.type("write it")
    t.wait("approve?")
    t.armed()  # the hint names the answer keys once they count
    t.child.send("y")
    t.wait("written")
    t.leave()
    assert (workspace / "a.txt").read_text() == "x"


def test_esc_at_an_approval_refuses_and_returns_to_the_prompt(term: Any, server: FakeServer,
                                                              workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch a.txt"}, id="r1"),
                          call("write_file", {"path": "b.txt", "content": "x"}, id="w2")),
               Reply(text="what instead?"))
    t = term()
    t.prompt()
    t.type("do both")
    t.wait("approve?")
    t.child.send("\x1b")  # not held back: Esc only ever stops
    t.wait("⊘ no, and stopped")
    t.prompt()
    assert len(server.requests) == 1
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    t.type("use make instead")
    t.wait("what instead?")
    t.leave()
    assert tool_results(server.requests[1]) == {"r1": INTERRUPTED, "w2": INTERRUPTED}  # every pending call
    assert last_user_message(server.requests[1]) == "use make instead"


def test_n_still_takes_a_note_for_the_model(term: Any, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"}, id="w")), Reply(text="understood"))
    t = term()
    t.prompt()
    t.type("write it")
    t.wait("approve?")
    t.armed()
    t.child.send("n")
    t.wait("note for the model")
    t.type("write b.txt instead")
    t.wait("understood")  # the turn went on: the model read the note
    t.leave()
    assert "write b.txt instead" in tool_results(server.requests[1])["w"]


def test_esc_at_an_mcp_form_declines_it_and_stops_the_turn(term: Any, server: FakeServer) -> None:
    server.add(tool_reply(call("mcp__demo__ask", {}, id="a")), Reply(text="after"))
    t = term(config={"mcpServers": {"demo": {"command": sys.executable, "args": [DEMO]}}, "permission_mode": "goal"})
    t.prompt()
    t.type("order something")
    t.wait("MCP server demo asks")
    t.wait("[y] Answer it")
    t.child.send("\x1b")
    t.wait("⊘ declined, and stopped")
    t.prompt()
    assert len(server.requests) == 1
    t.type("never mind")
    t.wait("after")
    t.leave()
    assert tool_results(server.requests[1]) == {"a": INTERRUPTED}


def test_esc_in_a_field_of_an_mcp_form_declines_it_and_stops_the_turn(term: Any, server: FakeServer) -> None:
    server.add(tool_reply(call("mcp__demo__ask", {}, id="a")), Reply(text="after"))
    t = term(config={"mcpServers": {"demo": {"command": sys.executable, "args": [DEMO]}}, "permission_mode": "goal"})
    t.prompt()
    t.type("order something")
    t.wait("[y] Answer it")
    t.armed()
    t.child.send("y")
    t.wait("Name * (string)")
    t.child.send("\x1b")
    t.wait("⊘ declined, and stopped")
    t.prompt()
    assert len(server.requests) == 1
    t.leave()


def test_keys_typed_at_the_trust_question_never_trust_the_folder(term: Any, server: FakeServer,
                                                                 workspace: Path) -> None:
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({"permissions": {"allow": ["run_command"]}}))
    server.add(Reply(text="answered"))
    t = term(config=LONG_GUARD)
    t.wait("a folder you trust:")
    t.wait("[t] Trust this folder")
    t.child.send("tell")  # the first message, typed as the question comes up: `t` would trust
    t.wait(HELD_HINT.strip())
    t.child.send("\x1b")  # Esc: the safe answer
    t.wait("continuing without them (asked again next time)")
    t.prompt()
    t.type(" me")
    t.wait("answered")
    t.leave()
    assert last_user_message(server.requests[0]) == "tell me"
    assert "trusted_projects" not in json.loads(user_config_path().read_text())


def test_p_on_a_terminal_discards_keys_typed_before_its_question(server: FakeServer, workspace: Path,
                                                                 home: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"})), Reply(text="done"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test-key", "TERM": "xterm-256color"}
    child = pexpect.spawn(sys.executable, ["-m", "nanohermes", "-p", "write it", "--base-url", server.base_url,
                                           "--model", "fake-model"], cwd=str(workspace), env=env, encoding="utf-8",
                          timeout=60)
    try:
        child.send("y\r")  # typed while nanohermes starts, long before anything is asked
        child.expect_exact("Allow? [y]es once")
        child.send("n\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert not (workspace / "a.txt").exists()
    assert len(server.requests) == 2


def test_p_on_a_terminal_takes_no_key_until_its_question_has_been_up_a_moment(server: FakeServer, workspace: Path,
                                                                             home: Path) -> None:
    """A line typed as the question comes up (an Enter finishing it would be "yes") is
    discarded: keys count once the keyboard has been quiet for limits.approval_guard_secs."""
    from nanohermes.ui.headless import GUARD_HINT

    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"limits": {"approval_guard_secs": 5}}))
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"}, id="w")), Reply(text="done"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test-key", "TERM": "xterm-256color"}
    child = pexpect.spawn(sys.executable, ["-m", "nanohermes", "-p", "write it", "--base-url", server.base_url,
                                           "--model", "fake-model"], cwd=str(workspace), env=env, encoding="utf-8",
                          timeout=60)
    try:
        child.expect_exact("wants to run write_file")
        child.expect_exact(GUARD_HINT)
        child.send("yes\r")  # typed as the question comes up: it must not answer
        child.expect_exact("Allow? [y]es once")
        child.send("n\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert not (workspace / "a.txt").exists()
    assert tool_results(server.requests[1])["w"].startswith("Denied by the user")
@pytest.mark.parametrize("key", ["\x1b", "\x03"], ids=["esc", "ctrl-c"])
def test_esc_or_ctrl_c_at_the_note_after_a_no_stops_the_turn_and_keeps_what_was_typed(
        term: Any, server: FakeServer, workspace: Path, key: str) -> None:
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"}, id="w")), Reply(text="said instead"))
    t = term()
    t.prompt()
    t.type("write it")
    t.wait("[n] No")
    t.armed()
    t.child.send("n")
    t.wait("note for the model")
    t.child.send("use b.txt")
    t.child.send(key)
    t.wait("⊘ no, and stopped: say what to do instead")
    t.prompt()
    assert len(server.requests) == 1  # the model was not called again
    assert not (workspace / "a.txt").exists()
    t.type("")  # the prompt holds the note's words: Enter sends them
    t.wait("said instead")
    t.leave()
    assert tool_results(server.requests[1]) == {"w": INTERRUPTED}
    assert last_user_message(server.requests[1]) == "use b.txt"


def test_ctrl_c_in_a_field_of_an_mcp_form_cancels_it_and_stops_the_turn(term: Any, server: FakeServer) -> None:
    server.add(tool_reply(call("mcp__demo__ask", {}, id="a")), Reply(text="after"))
    t = term(config={"mcpServers": {"demo": {"command": sys.executable, "args": [DEMO]}}, "permission_mode": "goal"})
    t.prompt()
    t.type("order something")
    t.wait("[y] Answer it")
    t.armed()
    t.child.send("y")
    t.wait("Name * (string)")
    t.child.send("\x03")
    t.wait("⊘ cancelled (interrupted)")
    t.prompt()
    assert len(server.requests) == 1
    t.type("never mind")
    t.wait("after")
    t.leave()
    assert tool_results(server.requests[1]) == {"a": INTERRUPTED}


@pytest.mark.parametrize("how", ["typed", "command line"])
def test_esc_at_the_trust_question_sends_nothing_and_keeps_the_message_at_the_prompt(
        term: Any, server: FakeServer, workspace: Path, how: str) -> None:
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({"permissions": {"allow": ["run_command"]}}))
    server.add(Reply(text="answered"))
    t = term(args=("fix the build",) if how == "command line" else ())
    if how == "typed":
        # Sent as the REPL starts: the line usually leaves the prompt before the question comes
        # up, else the question takes the prompt's place with the line in it; either way it
        # must wait in the prompt, unsent.
        t.child.send("fix the build\r")
    t.wait("[t] Trust this folder")
    t.child.send("\x1b")  # the safe answer, and a stop
    t.wait("continuing without them (asked again next time)")
    t.prompt()
    assert server.requests == []
    t.type(" now")  # the message waits at the prompt, to send as it is or to change
    t.wait("answered")
    t.leave()
    assert last_user_message(server.requests[0]) == "fix the build now"
    assert not user_config_path().exists()  # nothing remembered: asked again next time


def test_a_guard_of_zero_lets_a_key_answer_the_box_as_soon_as_it_shows(term: Any, server: FakeServer,
                                                                        workspace: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "a.txt", "content": "x"})), Reply(text="written"))
    t = term(config={"limits": {"approval_guard_secs": 0}})
    t.prompt()
    t.type("write it")
    t.wait("[n] No")
    t.child.send("y")  # at once: no wait for the keyboard to be quiet
    t.wait("✓ yes, once")
    t.wait("written")
    t.leave()
    assert (workspace / "a.txt").read_text() == "x"
    assert HELD_HINT.strip() not in t.text  # the box never held a key back
