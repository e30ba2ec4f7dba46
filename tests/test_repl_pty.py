"""The REPL in a real pseudo-terminal (pexpect) against the loopback fake server.

Each test starts `nanohermes` with no -p on a pty, types like a person, and reads the screen
output with escape sequences stripped. Waits are on text, with generous timeouts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from nanohermes.turn.runtime import INTERRUPTED, denied
from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent
WAIT = 60  # seconds for any one thing to appear on screen; only reached when something is broken
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78NOMDEc]|[\r\x07\x0e\x0f]")


class Term:
    def __init__(self, workspace: Path, home: Path, server: FakeServer, *, config: dict[str, Any] | None = None,
                 env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        if config is not None:
            cfg = home / ".config" / "nanohermes" / "config.json"
            cfg.parent.mkdir(parents=True, exist_ok=True)
            cfg.write_text(json.dumps(config))
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test-key", "TERM": "xterm-256color",
                    **(env or {})}
        full_env.pop("NO_COLOR", None) if "NO_COLOR" not in (env or {}) else None
        self.child = pexpect.spawn(sys.executable, ["-m", "nanohermes", "--base-url", server.base_url, "--model",
                                                    "fake-model", *args],
                                   cwd=str(workspace), env=full_env, dimensions=(40, 100), encoding="utf-8",
                                   codec_errors="replace", timeout=WAIT)
        self.raw = ""
        self.text = ""
        self.mark = 0  # waits look only after the previous match

    def pump(self) -> None:
        """Read what the terminal shows now (answering its requests), for a test that waits on
        something other than the screen."""
        self._pump()

    def _pump(self) -> None:
        try:
            chunk = self.child.read_nonblocking(65536, timeout=0.2)
        except pexpect.TIMEOUT:
            return
        # Answer cursor-position requests as a terminal would (prompt-toolkit sizes its
        # bottom toolbar from the reply).
        for _ in range(chunk.count("\x1b[6n")):
            self.child.send("\x1b[1;1R")
        self.raw += chunk
        self.text = _ANSI.sub("", self.raw)

    def wait(self, text: str, timeout: float = WAIT) -> None:
        """Wait until `text` appears after the previous match. Its words may be broken across
        lines wherever the terminal's width or a box's border breaks them: how far a line
        reaches depends on what comes before it (a temporary path, longer under another user
        or another test runner, moves every later break)."""
        import time

        words = text.split()
        pattern = re.compile(r"[\s│]+".join(re.escape(w) for w in words) if words else re.escape(text))
        end = time.monotonic() + timeout
        while True:
            m = pattern.search(self.text, self.mark)
            if m is not None:
                self.mark = m.end()
                return
            if time.monotonic() > end:
                raise AssertionError(f"{text!r} did not appear; screen since the last match:\n{self.text[self.mark:][-3000:]}")
            try:
                self._pump()
            except pexpect.EOF:
                raise AssertionError(f"nanohermes exited before {text!r} appeared:\n{self.text[-3000:]}") from None

    def prompt(self) -> None:
        """Wait for the input prompt's bottom toolbar (drawn with the prompt)."""
        self.wait("mode:")

    def type(self, line: str) -> None:
        self.child.send(line + "\r")

    def armed(self) -> None:
        """Wait until a question takes answers: keys sent before its hint shows them would be
        kept for the next message (see `ui.keyguard`)."""
        self.wait("and Enter, or press")

    def leave(self) -> None:
        """Ctrl-D at the next prompt: nanohermes exits with 0."""
        self.prompt()
        self.child.send("\x04")
        assert self.exit_code() == 0

    def exit_code(self) -> int:
        import time

        end = time.monotonic() + WAIT
        while True:  # keep answering the terminal until the process is gone
            assert time.monotonic() < end, f"nanohermes did not exit:\n{self.text[-2000:]}"
            try:
                self._pump()
            except pexpect.EOF:
                break
        self.child.close()
        assert self.child.exitstatus is not None, self.text[-2000:]
        return self.child.exitstatus


@pytest.fixture
def term(workspace: Path, home: Path, server: FakeServer) -> Iterator[Any]:
    started: list[Term] = []

    def start(**kw: Any) -> Term:
        t = Term(workspace, home, server, **kw)
        started.append(t)
        return t

    yield start
    for t in started:
        if t.child.isalive():
            t.child.terminate(force=True)


def wait_for(cond: Any, timeout: float = WAIT) -> None:
    import time

    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.05)


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def test_prompt_gets_the_answer_and_ctrl_d_exits_0(term: Any, server: FakeServer, home: Path) -> None:
    server.add(Reply(text="Hello from **the model**.\n\n- first point\n- second point"), Reply(text="two lines"),
               Reply(text="pasted"))
    t = term()
    t.prompt()
    t.type("say hi")
    t.wait("Hello from the model.")
    t.wait("• second point")
    t.prompt()
    t.type("line one\x1b\rline two")  # Alt+Enter adds a line
    t.wait("two lines")
    t.prompt()
    t.type("\x1b[200~pasted\nblock\x1b[201~")  # a bracketed paste stays one message
    t.wait("pasted")
    t.leave()
    users = [r["messages"][-1]["content"] for r in server.requests]
    assert users == ["say hi", "line one\nline two", "pasted\nblock"]
    assert "+say hi" in (home / ".local/state/nanohermes/history").read_text()


def test_the_toolbar_shows_the_cost_only_when_the_model_has_a_price(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="unpriced", usage=(1000, 100)))
    t = term()
    t.prompt()
    assert "$" not in t.text.split("mode:")[-1]  # nothing known yet
    t.type("one")
    t.wait("unpriced")
    t.wait("session 1,100 tokens")  # the toolbar, redrawn with the prompt
    assert "$" not in t.text
    t.child.send("\x04")
    assert t.exit_code() == 0
    server.add(Reply(text="priced", usage=(1000, 100)))
    t = term(config={"prices": {"fake-model": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}}})
    t.prompt()
    t.type("two")
    t.wait("priced")
    t.wait("session 1,100 tokens · $0.0030")
    t.child.send("\x04")
    assert t.exit_code() == 0


def test_tools_and_plan_mode_refuse_a_write_call(term: Any, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "new.txt", "content": "x"}, id="w1")), Reply(text="ok, refused"))
    t = term(config={"disallowed_tools": ["list_dir"]})
    t.prompt()
    t.type("/too\t")  # Tab completes the command
    t.wait("read_file")
    t.wait("hidden list_dir: is disallowed by config (disallowed_tools)")
    t.prompt()
    t.child.send("\x1b[Z")  # Shift+Tab cycles the mode
    t.wait("accept-edits")
    t.type("/mode plan")
    t.wait("mode: plan")
    t.prompt()
    t.type("write it")
    t.wait("✗ write_file new.txt")
    t.wait("ok, refused")
    t.leave()
    assert "PermissionDenied" not in t.text and "call_id=" not in t.text  # the ✗ line says it, once
    assert not (workspace / "new.txt").exists()
    names = {s["function"]["name"] for s in server.requests[0]["tools"]}
    assert "write_file" not in names and "list_dir" not in names
    assert tool_results(server.requests[1])["w1"] == "ERROR: write_file is not available in plan mode"


def test_a_deny_rule_and_a_sandbox_refusal_are_lines_of_their_own_not_event_dumps(
        term: Any, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    server.add(tool_reply(call("write_file", {"path": "plan.txt", "content": "x"}, id="w1")), Reply(text="refused"),
               tool_reply(call("run_command", {"command": f"touch {outside}/x"}, id="r1")), Reply(text="sandboxed"))
    t = term(config={"permissions": {"deny": ["write_file(plan.txt)"], "allow": ["run_command(touch *)"]}})
    t.prompt()
    t.type("write the plan")
    t.wait("✗ write_file plan.txt")
    t.wait("refused")
    t.prompt()
    t.type("touch it")
    t.wait("asked because: the sandbox (workspace-write) refused")
    t.wait("[n] No")
    t.armed()
    t.child.send("n")
    t.wait("note for the model")
    t.type("")
    t.wait("⊘ run_command touch")
    t.wait("sandboxed")
    t.leave()
    squeezed = re.sub(r"\s+", "", t.text)  # the line wraps at the terminal's width
    assert re.sub(r"\s+", "", f"⊘ run_command touch {outside}/x: sandbox (workspace-write) refused a write to "
                              f"{outside}/x") in squeezed
    assert "PermissionDenied" not in t.text and "SandboxRefused" not in t.text and "call_id=" not in t.text
    assert not (workspace / "plan.txt").exists() and not (outside / "x").exists()
    assert tool_results(server.requests[1])["w1"].startswith("ERROR: ")


def test_a_change_that_cannot_apply_fails_at_once_without_an_approval_prompt(
        term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("old notes\n")
    bad_patch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-not there\n+new\n"
    server.add(tool_reply(call("write_file", {"path": "notes.txt", "content": "new"}, id="w1"),
                          call("edit_file", {"path": "notes.txt", "old_string": "zzz", "new_string": "b"}, id="e1"),
                          call("apply_patch", {"diff": bad_patch}, id="p1"),
                          call("git_commit", {"message": "notes", "all": True}, id="g1")),
               Reply(text="all four failed"))
    t = term()
    t.prompt()
    t.type("change the notes")
    t.wait("✗ write_file notes.txt")
    t.wait("read it first")
    t.wait("✗ edit_file notes.txt")
    t.wait("old_string not found in notes.txt")
    t.wait("✗ apply_patch notes.txt")
    t.wait("✗ git_commit notes")
    t.wait("fatal: not a git repository")
    t.wait("all four failed")
    t.leave()
    assert "approve?" not in t.text
    results = tool_results(server.requests[1])
    assert all(results[k].startswith("ERROR: ") for k in ("w1", "e1", "p1", "g1")), results
    assert (workspace / "notes.txt").read_text() == "old notes\n"


def test_an_edit_is_approved_on_its_diff_and_shown_coloured(term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\ny = 2\n")
    server.add(tool_reply(call("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 42"}, id="e1")),
               Reply(text="edited"))
    t = term()
    t.prompt()
    t.type("change x")
    t.wait("approve?")
    t.wait("+x = 42")  # the diff is in the prompt
    t.wait("[n] No")
    t.armed()
    t.child.send("y")
    t.wait("✓ edit_file app.py")
    t.wait("edited")
    t.leave()
    assert t.text.count("+x = 42") == 1  # the approved diff is not printed a second time
    assert (workspace / "app.py").read_text() == "x = 42\ny = 2\n"
    assert re.search(r"\x1b\[(?:[0-9;]*;)?32m\s*\+x = 42", t.raw), "added lines are green"
    assert re.search(r"\x1b\[(?:[0-9;]*;)?31m\s*-x = 1", t.raw), "removed lines are red"


def test_approval_answered_yes_then_no_with_a_note(term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "secret.txt").write_text("s3cret\n")
    server.add(tool_reply(call("read_file", {"path": "secret.txt"}, id="r1")), Reply(text="read it"),
               tool_reply(call("read_file", {"path": "secret.txt"}, id="r2")), Reply(text="did not read it"))
    t = term(config={"permissions": {"ask": ["read_file"]}})
    t.prompt()
    t.type("read the secret")
    t.wait("approve?")
    t.wait("asked because: rule read_file asks")
    t.wait("[n] No")
    t.armed()
    t.child.send("y")
    t.wait("✓ yes, once")
    t.wait("read it")
    t.prompt()
    t.type("again")
    t.wait("approve?")
    t.wait("[n] No")
    t.armed()
    t.child.send("n")
    t.wait("note for the model")
    t.type("use the public file")
    t.wait("⊘ read_file secret.txt")
    t.wait("did not read it")
    t.leave()
    assert tool_results(server.requests[1]) == {"r1": "1\ts3cret"}
    assert tool_results(server.requests[3])["r2"] == denied("use the public file")


def test_ctrl_c_while_waiting_for_the_model_keeps_the_history_valid(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="too late", delay=120), Reply(text="back again"))
    t = term()
    t.prompt()
    t.type("take your time")
    t.wait("waiting for fake-model")
    wait_for(lambda: len(server.requests) == 1)  # the request is with the model, not still leaving
    t.child.send("\x03")
    t.wait("⊘ interrupted")
    t.prompt()
    t.type("hello again")
    t.wait("back again")
    t.leave()
    # FakeServer rejects (and the fixture reports) a conversation with an unanswered call.
    roles = [(m["role"], m["content"]) for m in server.requests[1]["messages"][1:]]
    assert roles == [("user", "take your time"), ("user", "hello again")]


@pytest.mark.parametrize("keys", ["\x1b", "\x1b\x1b"])
def test_esc_while_the_answer_streams_interrupts_the_turn(term: Any, server: FakeServer, keys: str) -> None:
    server.add(Reply(text="word " * 200, stall_after=20, stall_secs=120), Reply(text="back again"))
    t = term()
    t.prompt()
    t.type("tell me a story")
    t.wait("word word")
    t.wait("esc or ctrl-c to interrupt")  # how to stop it, while it runs
    t.child.send(keys)
    t.wait("⊘ interrupted")
    t.prompt()
    t.type("hello again")
    t.wait("back again")
    t.leave()
    assert [m["role"] for m in server.requests[1]["messages"][1:]] == ["user", "assistant", "user"]


def test_esc_stops_a_running_command_and_an_arrow_key_does_not(term: Any, server: FakeServer,
                                                                workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "sleep 300 && touch done.txt"})), Reply(text="stopped it"))
    t = term(config={"auto_approve": True})
    t.prompt()
    t.type("run it")
    t.wait("run_command sleep 300")
    t.child.send("\x1b[A")  # up arrow: an escape sequence, not Esc
    import time

    time.sleep(0.5)
    assert "⊘ interrupted" not in t.text[t.mark:]
    t.child.send("\x1b")
    t.wait('⊘ interrupted (1 unfinished call was answered "interrupted by user")')
    t.prompt()
    t.type("what now?")
    t.wait("stopped it")
    t.leave()
    assert not (workspace / "done.txt").exists()


def test_esc_at_an_empty_prompt_does_nothing(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="still here"))
    t = term()
    t.prompt()
    t.child.send("\x1b")
    t.child.send("\x1b")
    t.type("hi")
    t.wait("still here")
    t.leave()
    assert [m["content"] for m in server.requests[0]["messages"][1:]] == ["hi"]


def test_ctrl_c_during_a_stuck_tool_answers_every_call_and_exit_does_not_hang(
        term: Any, server: FakeServer, workspace: Path) -> None:
    # A web server that accepts and never answers: web_fetch waits on it (a tool that hangs).
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/slow"
    (workspace / "a.txt").write_text("a\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}, id="ok1"), call("web_fetch", {"url": url}, id="stuck"),
                          call("list_dir", {}, id="ls")),
               Reply(text="recovered"))
    try:
        t = term(config={"permissions": {"allow": ["web_fetch"]}})  # no question: the fetch itself hangs
        t.prompt()
        t.type("fetch it")
        t.wait("✓ list_dir")  # the batch's other calls are done; web_fetch is still waiting
        t.child.send("\x03")
        t.wait("⊘ interrupted")
        t.prompt()
        t.type("what happened?")
        t.wait("recovered")
        t.leave()
    finally:
        silent.close()
    # The three run as one parallel batch: the two that finished keep their results.
    results = tool_results(server.requests[1])
    assert results == {"ok1": "1\ta", "stuck": INTERRUPTED, "ls": "a.txt  2"}


def test_text_typed_during_a_turn_is_sent_when_it_ends(term: Any, server: FakeServer) -> None:
    release = threading.Event()

    def slow(body: dict[str, Any]) -> Reply:
        release.wait(WAIT)
        return Reply(text="first answer")

    server.add(slow, Reply(text="second answer"))
    t = term()
    t.prompt()
    t.type("first")
    t.wait("waiting for fake-model")
    t.type("queued question")
    t.wait("chars typed ahead")
    release.set()
    t.wait("first answer")
    t.wait("second answer")
    t.leave()
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": "queued question"}


def test_at_path_attaches_the_file_bounded_like_read_file(term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "notes.md").write_text("one\ntwo\nthree\n")
    server.add(Reply(text="got it"))
    t = term(config={"limits": {"read_file_window_lines": 2}})
    t.prompt()
    t.child.send("look at @no\t")  # Tab completes the path
    t.wait("@notes.md")
    t.type(" please")
    t.wait("attached notes.md")
    t.wait("got it")
    t.leave()
    assert server.requests[0]["messages"][-1]["content"] == (
        'look at @notes.md please\n\n<file path="notes.md">\n1\tone\n2\ttwo\n\n'
        "showing lines 1-2 of 3; continue with offset=3\n</file>")


def test_ctrl_c_twice_at_an_empty_prompt_exits(term: Any, server: FakeServer) -> None:
    t = term()
    t.prompt()
    t.child.send("\x03")
    t.wait("press Ctrl-C again or Ctrl-D to exit")
    t.child.send("\x03")
    assert t.exit_code() == 0


def test_compact_view_shows_the_summary_label(term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")

    def route(body: dict[str, Any]) -> Reply:
        if body["model"] == "labeller":
            return Reply(text="Read the a file")
        return main.pop(0)

    main = [tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="all done")]
    server.default = route  # type: ignore[assignment]
    t = term(config={"summary_model": "labeller"})
    t.prompt()
    t.type("go")
    t.wait("all done")
    t.mark = 0  # the label is printed when it arrives: before or after the answer's text
    t.wait("▸ Read the a file · 1 call")
    t.child.send("\x04")
    assert t.exit_code() == 0


def test_no_color_and_an_ascii_terminal_do_not_crash(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="héllo ✓ wörld"))
    t = term(env={"NO_COLOR": "1", "PYTHONIOENCODING": "ascii", "LANG": "C", "LC_ALL": "C"})
    t.prompt()
    t.type("hi")
    t.wait("h?llo ? w?rld")
    assert "> hi" in t.text  # the prompt falls back to ASCII
    t.child.setwinsize(24, 60)  # a resized terminal keeps working
    t.type("/tools")
    t.wait("read_file")
    t.leave()
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", t.raw), "colour codes despite NO_COLOR"


def test_mcp_servers_start_behind_the_prompt_and_report_failures(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="still works"))
    t = term(config={"mcp": {"servers": {"broken": {"command": "/nonexistent/mcp-server"}}}})
    t.wait("MCP server broken failed to start")
    t.prompt()
    t.type("/mcp")
    t.wait("broken: failed, 0 tools")
    t.prompt()
    t.type("hi")
    t.wait("still works")
    t.leave()



def test_an_mcp_server_killed_at_the_prompt_is_reported_there_once(term: Any, server: FakeServer, tmp_path: Path) -> None:
    pid_file = tmp_path / "raw.pid"
    raw = {"command": sys.executable, "args": [str(REPO / "tests" / "mcp" / "raw_server.py")],
           "env": {"RAW_PID_FILE": str(pid_file)}}
    server.add(Reply(text="first answer"), Reply(text="second answer"))
    t = term(config={"mcp": {"servers": {"raw": raw}}})
    t.prompt()
    t.type("hello")
    t.wait("first answer")
    t.prompt()
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # while the REPL waits for input, no turn running
    t.wait("MCP server raw stopped (the server exited: killed by SIGKILL); its tools are unavailable")
    t.type("/mcp")
    t.wait("raw: failed, 2 tools")
    t.wait("killed by SIGKILL")  # the line before it names the server's command: its wrap varies
    t.prompt()
    t.type("anything else")
    t.wait("second answer")
    t.leave()
    assert t.text.count("MCP server raw stopped") == 1
    system = server.requests[1]["messages"][0]["content"]
    assert "## MCP server raw\nThis server stopped during the session (the server exited: killed by SIGKILL)" in system
    assert "stopped during the session" not in server.requests[0]["messages"][0]["content"]

def test_an_error_ending_a_turn_is_shown_and_the_repl_goes_on(term: Any, server: FakeServer) -> None:
    server.add(Fault(status=401, message="bad key"), Reply(text="fine now"))
    t = term()
    t.prompt()
    t.type("first")
    t.wait("error: the model endpoint refused the API key (401")
    t.wait("hint: check the key")
    t.prompt()
    t.type("second")
    t.wait("fine now")
    t.leave()


def test_continue_opens_the_repl_on_the_latest_session(term: Any, workspace: Path, server: FakeServer) -> None:
    from nanohermes.common.messages import Message
    from nanohermes.turn.session import Transcript

    saved = Transcript.create(workspace, model="fake-model", mode="default")
    for m in (Message.user("remember the number 7"), Message("assistant", "noted: 7")):
        saved.append(m)
    saved.close()
    server.add(Reply(text="it was 7"))
    t = term(args=("--continue",))
    t.wait(f"resumed {saved.path.stem}: 2 messages")
    t.wait("› remember the number 7")
    t.wait("noted: 7")
    t.prompt()
    t.type("which number?")
    t.wait("it was 7")
    t.prompt()
    t.type("/exit")
    assert t.exit_code() == 0
    assert server.requests[0]["messages"][1:] == [{"role": "user", "content": "remember the number 7"},
                                                  {"role": "assistant", "content": "noted: 7"},
                                                  {"role": "user", "content": "which number?"}]
    lines = [json.loads(x) for x in saved.path.read_text().splitlines()]
    assert [x["message"]["content"] for x in lines if x["type"] == "message"][-2:] == ["which number?", "it was 7"]


def test_a_bad_flag_value_ends_the_repl_with_the_usage_error(term: Any) -> None:
    t = term(args=("--mode", "bogus"))
    t.wait("nanohermes: error: --mode takes default, accept-edits, plan, debug or goal, not 'bogus'")
    t.wait("hint: `nanohermes --help` lists the options")
    assert t.exit_code() == 2


def test_a_broken_config_ends_the_repl_with_the_config_error(term: Any, workspace: Path) -> None:
    bad = workspace / "bad.json"
    bad.write_text('{"model": 1')
    t = term(args=("--config", str(bad)))
    t.wait(f"nanohermes: error: {bad}: invalid JSON at line 1")
    t.wait("hint: fix the file or move it away")
    assert t.exit_code() == 2


def test_config_warnings_and_another_workspace_show_above_the_prompt(term: Any, server: FakeServer,
                                                                      workspace: Path) -> None:
    other = workspace / "sub"
    other.mkdir()
    (other / "only-here.txt").write_text("x\n")
    server.add(Reply(text="seen"))
    t = term(config={"modle": "x"}, args=("-C", str(other)))
    t.wait(f"workspace: {other.resolve()}")
    t.wait("warning:")
    t.wait("modle")  # the line ("<path>: unknown config keys ignored: modle") may wrap
    t.prompt()
    t.child.send("@only\t")  # @paths complete in the workspace named by -C
    t.wait("@only-here.txt")
    t.type("")
    t.wait("seen")
    t.leave()


def test_resume_without_an_id_picks_a_session_then_opens_the_repl(term: Any, workspace: Path,
                                                                    server: FakeServer) -> None:
    from nanohermes.common.messages import Message
    from nanohermes.turn.session import Transcript

    saved = Transcript.create(workspace, model="fake-model", mode="default")
    saved.append(Message.user("the picked topic"))
    saved.close()
    server.add(Reply(text="back on it"))
    t = term(args=("--resume",))
    t.wait("the picked topic")
    t.wait("Resume which session?")
    t.type("1")
    t.prompt()
    t.type("go on")
    t.wait("back on it")
    t.leave()
    assert [m["content"] for m in server.requests[0]["messages"][1:]] == ["the picked topic", "go on"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_a_closed_terminal_ends_the_session_and_its_background_tasks(term: Any, server: FakeServer,
                                                                                 sig: int) -> None:
    from exec_support import marked_pids, wait_until

    marker = uuid.uuid4().hex
    server.add(tool_reply(call("run_command", {"command": "sleep 300", "background": True})), Reply(text="all set"))
    t = term(env={"NH_TEST_PROC_MARK": marker}, args=("--yes",))
    t.prompt()
    t.type("start a server")
    t.wait("all set")
    t.prompt()
    assert wait_until(lambda: len(marked_pids(marker)) >= 2)  # nanohermes and its task
    t.child.kill(sig)
    assert t.exit_code() == 143
    assert "nanohermes: terminated" in t.text
    assert wait_until(lambda: not marked_pids(marker), timeout=10), "a background task outlived nanohermes"


def test_sigterm_during_a_turn_stops_it_and_exits(term: Any, server: FakeServer) -> None:
    from exec_support import marked_pids, wait_until

    marker = uuid.uuid4().hex
    server.add(tool_reply(call("run_command", {"command": "sleep 300"})))
    t = term(env={"NH_TEST_PROC_MARK": marker}, args=("--yes",))
    t.prompt()
    t.type("run it")
    t.wait("run_command sleep 300")
    assert wait_until(lambda: len(marked_pids(marker)) >= 2)
    t.child.kill(signal.SIGTERM)
    assert t.exit_code() == 143
    assert wait_until(lambda: not marked_pids(marker), timeout=10), "the command outlived nanohermes"
    assert len(server.requests) == 1  # the interrupted turn was not carried on


# -- Ctrl-C in every state -------------------------------------------------------------------

@pytest.mark.parametrize("answer", ["y", "a"], ids=["after-yes", "after-always"])
def test_ctrl_c_stops_an_approved_command(term: Any, server: FakeServer, workspace: Path, answer: str) -> None:
    from exec_support import marked_pids, wait_until

    marker = uuid.uuid4().hex
    server.add(tool_reply(call("run_command", {"command": "sleep 300 && touch done.txt"}, id="call_0")), Reply(text="stopped it"))
    t = term(env={"NH_TEST_PROC_MARK": marker})
    t.prompt()
    t.type("run it")
    t.wait("approve?")
    t.wait("[n] No")
    t.armed()
    t.child.send(answer)
    t.wait("run_command sleep 300 && touch done.txt")
    assert wait_until(lambda: len(marked_pids(marker)) >= 2)  # nanohermes and the sleeping shell
    t.child.send("\x03")
    t.wait("⊘ run_command sleep 300 && touch done.txt")  # the interrupted call keeps its line
    t.wait("interrupted")
    t.wait('⊘ interrupted (1 unfinished call was answered "interrupted by user")')
    assert wait_until(lambda: len(marked_pids(marker)) == 1, timeout=10), "the command outlived Ctrl-C"
    t.prompt()
    t.type("what now?")
    t.wait("stopped it")
    t.leave()
    assert "Unknown child process" not in t.text
    assert not (workspace / "done.txt").exists()
    assert len(server.requests) == 2
    assert tool_results(server.requests[1]) == {"call_0": INTERRUPTED}


def test_ctrl_c_at_an_approval_prompt_sends_nothing(term: Any, server: FakeServer) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch never"}, id="call_0")), Reply(text="fine"))
    t = term()
    t.prompt()
    t.type("do it")
    t.wait("approve?")
    t.wait("[n] No")
    t.child.send("\x03")
    t.wait("⊘ no (interrupted)")
    t.wait("⊘ interrupted")
    t.prompt()
    assert len(server.requests) == 1  # no request went out after the cancelled prompt
    t.type("next")
    t.wait("fine")
    t.leave()
    assert len(server.requests) == 2
    assert tool_results(server.requests[1]) == {"call_0": INTERRUPTED}


def test_ctrl_c_mid_answer_keeps_what_was_shown(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="The first half is here and the rest never comes", stall_after=22, stall_secs=120),
               Reply(text="resumed"))
    t = term()
    t.prompt()
    t.type("explain")
    t.wait("The first half is here")
    t.child.send("\x03")
    t.wait("⊘ interrupted")
    assert "unfinished call" not in t.text  # there were no calls to answer
    t.prompt()
    t.type("go on")
    t.wait("resumed")
    t.leave()
    assert server.requests[1]["messages"][1:] == [
        {"role": "user", "content": "explain"},
        {"role": "assistant", "content": "The first half is here"},
        {"role": "user", "content": "go on"}]


def test_ctrl_c_with_call_ids_repeated_across_turns_keeps_the_history_valid(term: Any, server: FakeServer,
                                                                              workspace: Path) -> None:
    # Endpoints that number calls per message send call_0 again: the earlier result for
    # call_0 must not count as the answer to the new, interrupted call_0.
    (workspace / "a.txt").write_text("a\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}, id="call_0")), Reply(text="read"),
               tool_reply(call("run_command", {"command": "sleep 300"}, id="call_0")), Reply(text="valid"))
    t = term(args=("--yes",))
    t.prompt()
    t.type("read")
    t.wait("read")
    t.prompt()
    t.type("sleep")
    t.wait("run_command sleep 300")
    t.child.send("\x03")
    t.wait("⊘ interrupted (1 unfinished call")
    t.prompt()
    t.type("again")
    t.wait("valid")
    t.leave()
    assert not server.violations
    last = server.requests[3]["messages"]
    assert [m["content"] for m in last if m["role"] == "tool"] == ["1\ta", INTERRUPTED]


def test_ctrl_c_while_the_model_reads_a_background_task_keeps_the_task_and_the_history(
        term: Any, server: FakeServer) -> None:
    from exec_support import marked_pids, wait_until

    marker = uuid.uuid4().hex

    def poll(body: dict[str, Any]) -> Reply:
        task_id = re.search(r'task_id="(\w+)"', tool_results(body)["bg"])
        assert task_id is not None
        return tool_reply(call("task_output", {"task_id": task_id.group(1)}, id="poll"))

    server.add(tool_reply(call("run_command", {"command": "sleep 300", "background": True}, id="bg")), poll,
               Reply(text="never shown", delay=120), Reply(text="still here"))

    t = term(env={"NH_TEST_PROC_MARK": marker}, args=("--yes",))
    t.prompt()
    t.type("serve")
    t.wait("task_output")
    t.wait("waiting for fake-model")
    wait_for(lambda: len(server.requests) == 3)
    t.child.send("\x03")
    t.wait("⊘ interrupted")
    assert len(marked_pids(marker)) >= 2  # Ctrl-C stops the turn, not the background task
    t.prompt()
    t.type("status?")
    t.wait("still here")
    t.leave()
    assert not server.violations
    assert wait_until(lambda: not marked_pids(marker), timeout=10), "the background task outlived the session"


def test_a_command_that_fails_is_shown_as_a_failure_with_its_stderr(term: Any, server: FakeServer) -> None:
    script = "echo progress; echo 'E   assert 2 == 3' >&2; exit 2"
    server.add(tool_reply(call("run_command", {"command": script})), Reply(text="it failed"))
    t = term(args=("--yes",))
    t.prompt()
    t.type("test")
    t.wait(f"✗ run_command {script}")
    t.wait("failed")
    t.wait("E   assert 2 == 3")  # the stderr tail, not "exit code / stdout:"
    t.wait("it failed")
    t.leave()
    assert re.search(r"\x1b\[(?:[0-9;]*;)?31m✗", t.raw), "the failure mark is red"


def test_an_approval_shows_escape_sequences_and_carriage_returns_escaped(term: Any, server: FakeServer,
                                                                        workspace: Path) -> None:
    # A command that would draw as `git status --short` if the terminal acted on its escapes.
    command = "touch X; echo hi #\x1b[2K\x1b[1G  git status --short\rgit log"
    server.add(tool_reply(call("run_command", {"command": command})), Reply(text="refused"))
    t = term()
    t.prompt()
    t.type("run")
    t.wait("approve?")
    t.wait("[n] No")
    assert "#\\x1b[2K\\x1b[1G  git status --short\\rgit log" in t.text
    assert "\x1b[2K\x1b[1G  git status" not in t.raw
    t.armed()
    t.child.send("n")
    t.wait("note for the model")
    t.type("")
    t.wait("refused")
    t.leave()
    assert not (workspace / "X").exists()


def test_the_todo_list_is_printed_once(term: Any, server: FakeServer) -> None:
    todos = [{"content": "write the parser", "status": "in_progress"}, {"content": "test it", "status": "pending"}]
    server.add(tool_reply(call("todo_write", {"todos": todos})), Reply(text="planned"))
    t = term()
    t.prompt()
    t.type("plan")
    t.wait("✓ todo_write")
    t.wait("planned")
    t.leave()
    assert t.text.count("write the parser") == 1


def test_shift_tab_cycles_the_attended_modes_and_goal_is_reached_on_purpose(term: Any, server: FakeServer) -> None:
    t = term()
    t.prompt()
    seen = []
    for _ in range(4):
        t.child.send("\x1b[Z")
        t.type("/mode")
        t.wait("mode: ")
        t.wait(" (modes:")
        seen.append(t.text[:t.mark].rsplit("mode: ", 1)[1].split(" ")[0])
    assert seen == ["accept-edits", "plan", "default", "accept-edits"]
    t.type("/mode goal")
    t.wait("mode: goal")
    t.wait("warning: goal mode: every call runs without asking")
    t.prompt()
    t.type("/tools")
    t.wait("read_file")
    t.leave()


def test_goal_mode_from_the_command_line_warns_once(term: Any, server: FakeServer) -> None:
    t = term(args=("--mode", "goal"))
    t.wait("warning: goal mode: every call runs without asking")
    t.leave()
    assert t.text.count("goal mode: every call") == 1


def test_compact_view_without_a_summary_model_labels_each_batch(term: Any, server: FakeServer,
                                                                workspace: Path) -> None:
    for name in ("a", "b", "c"):
        (workspace / f"{name}.txt").write_text(name + "\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}), call("read_file", {"path": "b.txt"}),
                          call("read_file", {"path": "c.txt"}), call("grep", {"pattern": "a"}),
                          call("grep", {"pattern": "b"})),
               Reply(text="all read"))
    t = term()
    t.prompt()
    t.type("/view compact")
    t.wait("view: compact")
    t.prompt()
    t.type("read them")
    t.wait("▸ read 3 files, grep ×2 · 5 calls")
    t.wait("all read")
    t.leave()
    assert "✓ read_file" not in t.text  # one label, not a line per call


def test_compact_prints_one_line(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="first answer " * 10), Reply(text="second answer"), Reply(text="Goal: the summary."))
    t = term()
    for prompt in ("one", "two"):
        t.prompt()
        t.type(prompt)
    t.wait("second answer")
    t.prompt()
    t.type("/compact")
    t.wait("compacted 3 older messages")
    t.leave()
    assert t.text.count("compacted") == 1


def test_a_long_paste_shows_as_a_label_and_is_sent_whole(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="got the paste"))
    pasted = "\n".join(f"row {i}" for i in range(40))
    t = term()
    t.prompt()
    t.type("count these: \x1b[200~" + pasted + "\x1b[201~")
    t.wait("[pasted 40 lines, 1 KB]")
    t.wait("got the paste")
    t.leave()
    assert "row 39" not in t.text  # the input showed the label, not the rows
    assert server.requests[0]["messages"][-1]["content"] == "count these: " + pasted


def test_a_paste_over_the_message_budget_is_saved_to_a_file_the_model_reads(term: Any, server: FakeServer,
                                                                          home: Path) -> None:
    pasted = "\n".join(f"log line {i} " + "x" * 40 for i in range(200))  # ~10 KB

    def read_it(body: dict[str, Any]) -> Reply:
        m = re.search(r"saved to (\S+?\.txt)", body["messages"][-1]["content"])
        assert m is not None, body["messages"][-1]["content"]
        return tool_reply(call("read_file", {"path": m.group(1), "offset": 200, "limit": 1}, id="r"))

    server.add(read_it, Reply(text="read the end"))
    t = term(config={"limits": {"session_budget_chars": 8000}})
    t.prompt()
    t.child.send("\x1b[200~" + pasted + "\x1b[201~")
    t.wait("[pasted 200 lines, 10 KB]")
    t.type("")
    t.wait("pasted text saved to")
    t.wait("read the end")
    t.leave()
    sent = server.requests[0]["messages"][-1]["content"]
    assert "log line 5 " not in sent and "over the per-message budget of 4,000 chars" in sent
    assert tool_results(server.requests[1])["r"].startswith("200\tlog line 199 ")


def test_a_bare_prompt_opens_the_repl_with_it_and_exit_prints_the_resume_hint(term: Any, server: FakeServer,
                                                                              workspace: Path) -> None:
    from nanohermes.turn.session import list_sessions

    server.add(Reply(text="on it"))
    t = term(args=("fix it",))
    t.wait("on it")
    t.leave()
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "fix it"}
    m = re.search(r"session (\S+) · resume with: nanohermes --resume (\S+)", t.text)
    assert m is not None and m.group(1) == m.group(2)
    assert [i.id for i in list_sessions(workspace)] == [m.group(1)]


def test_cancelling_the_resume_picker_exits_0_quietly(term: Any, workspace: Path) -> None:
    from nanohermes.common.messages import Message
    from nanohermes.turn.session import Transcript

    saved = Transcript.create(workspace, model="fake-model", mode="default")
    saved.append(Message.user("a topic"))
    saved.close()
    t = term(args=("--resume",))
    t.wait("Resume which session?")
    t.type("q")
    assert t.exit_code() == 0
    assert "error" not in t.text[t.mark:]


def test_model_lists_the_endpoint_models_and_checks_a_name(term: Any, server: FakeServer) -> None:
    t = term()
    t.prompt()
    t.type("/model")
    t.wait("model: fake-model")
    t.wait("the endpoint serves")
    t.prompt()
    t.type("/model fake-modle")
    t.wait("the endpoint does not serve 'fake-modle'; did you mean fake-model?")
    t.prompt()
    t.type("/model")
    t.wait("model: fake-model")
    t.leave()


def test_a_missing_at_path_warns(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="no file"))
    t = term()
    t.prompt()
    t.type("look at @missing.py")
    t.wait("@missing.py is not a file in the workspace: not attached (sent as text)")
    t.wait("no file")
    t.leave()


def test_no_key_on_the_default_endpoint_says_how_to_configure_before_sending(tmp_path: Path, home: Path,
                                                                             workspace: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    child = pexpect.spawn(sys.executable, ["-m", "nanohermes"], cwd=str(workspace),
                          env={**env, "PYTHONPATH": str(REPO), "HOME": str(home), "TERM": "xterm-256color"},
                          dimensions=(40, 200), encoding="utf-8", timeout=WAIT)
    try:
        child.expect("no API key for https://api.openai.com/v1: set OPENAI_API_KEY")
        child.send("hello\r")
        child.expect("nothing is sent until then")
        child.send("\x04")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


# -- conveniences ------------------------------------------------------------------------------

def test_bang_runs_the_persons_command_and_the_model_sees_it(term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("hi\n")
    server.add(Reply(text="I see hello.txt"))
    t = term()
    t.prompt()
    t.type("!ls")
    t.wait("✓ !ls")
    t.wait("hello.txt")
    t.prompt()
    assert server.requests == []  # nothing asked, nothing sent yet
    t.type("what did you see?")
    t.wait("I see hello.txt")
    t.leave()
    sent = [m["content"] for m in server.requests[0]["messages"][1:]]
    assert sent == ['<user-shell command="ls" exit="0">\nhello.txt\n</user-shell>', "what did you see?"]


def test_show_prints_a_tool_result_whole(term: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    server.add(tool_reply(call("read_file", {"path": "long.txt"})), Reply(text="read"))
    t = term()
    t.prompt()
    t.type("read it")
    t.wait("… 26 more lines")  # the row's preview
    t.wait("read")
    t.prompt()
    t.type("/show")
    t.wait("1  read_file")
    t.prompt()
    t.type("/show 1")
    t.wait("read_file {")
    t.wait("line 29")
    t.wait("line 30")  # the whole result, past the preview's four lines
    t.leave()


def test_tasks_lists_background_tasks_and_kills_one(term: Any, server: FakeServer) -> None:
    from exec_support import marked_pids, wait_until

    marker = uuid.uuid4().hex
    server.add(tool_reply(call("run_command", {"command": "sleep 300", "background": True}, id="bg")),
               Reply(text="started"))
    t = term(env={"NH_TEST_PROC_MARK": marker}, args=("--yes",))
    t.prompt()
    t.type("serve")
    t.wait("started")
    t.prompt()
    t.type("/tasks")
    t.wait("running")
    t.wait("sleep 300")
    task_id = re.search(r"\n\s*(\w{6})\s+running", t.text)
    assert task_id is not None, t.text[-1000:]
    assert wait_until(lambda: len(marked_pids(marker)) >= 2)
    t.type(f"/tasks kill {task_id.group(1)}")
    t.wait(f"task {task_id.group(1)}: killed")
    assert wait_until(lambda: len(marked_pids(marker)) == 1, timeout=10)
    t.leave()


def test_resume_in_the_repl_picks_by_number(term: Any, server: FakeServer, workspace: Path) -> None:
    from nanohermes.common.messages import Message
    from nanohermes.turn.session import Transcript

    saved = Transcript.create(workspace, model="fake-model", mode="default")
    for m in (Message.user("the old topic"), Message("assistant", "old answer")):
        saved.append(m)
    saved.close()
    server.add(Reply(text="continuing"))
    t = term()
    t.prompt()
    t.type("/resume")
    t.wait("1. " + saved.path.stem)
    t.prompt()
    t.type("/resume 1")
    t.wait(f"resumed {saved.path.stem}: 2 messages")
    t.wait("old answer")
    t.prompt()
    t.type("go on")
    t.wait("continuing")
    t.leave()
    assert [m["content"] for m in server.requests[0]["messages"][1:]] == ["the old topic", "old answer", "go on"]


def test_the_command_menu_appears_while_typing_and_links_show_their_url(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="See [the docs](https://example.org/docs) for more."))
    t = term()
    t.prompt()
    t.child.send("/per")
    t.wait("The mode and the allow/ask/deny rules")  # the menu's help for /permissions, untouched by Tab
    t.child.send("\x15")  # Ctrl-U clears the line
    t.type("link please")
    t.wait("the docs")
    t.wait("https://example.org/docs")
    t.leave()


def test_context_and_the_toolbar_agree(term: Any, server: FakeServer) -> None:
    server.add(Reply(text="x" * 30_000))
    t = term()
    t.prompt()
    t.type("fill")
    t.wait("xxxx")
    t.prompt()
    t.type("/context")
    t.wait("context window 32,768 tokens (default: neither the endpoint nor the table of known model families")
    t.wait("% of the window")
    pct = t.text[:t.mark].rsplit(" tokens, ", 1)[1].split("%")[0]
    t.wait(f"the toolbar's \"context {pct}%\"")
    t.wait(f"context {pct}% of 33k window (default)")  # the toolbar, redrawn with the next prompt
    assert pct == "23"  # the endpoint's 10 prompt tokens and the 30,004 chars since, at 4 a token: 7,511 of 32,768
    t.child.send("\x04")
    assert t.exit_code() == 0


DEMO_MCP = str(REPO / "tests" / "mcp" / "demo_server.py")


def _is_summary(body: dict[str, Any]) -> bool:
    from nanohermes.turn.compact import SUMMARY_INSTRUCTIONS

    return body["messages"][0]["content"] == SUMMARY_INSTRUCTIONS


@pytest.mark.parametrize("state", ["sub-agent", "mcp-call", "compaction"])
def test_ctrl_c_stops_a_sub_agent_an_mcp_call_and_a_compaction(term: Any, server: FakeServer, state: str) -> None:
    slow = Reply(text="too late", delay=120)
    config: dict[str, Any] = {}
    if state == "sub-agent":
        config = {"subagents": {"explore": {"description": "Reads code", "tools": ["read_file"]}}}
        server.add(tool_reply(call("subagent", {"agent": "explore", "task": "look around", "wait": True}, id="sa")),
                   slow, Reply(text="back again"))
        running, requests_at_cancel = "subagent", 2
    elif state == "mcp-call":
        config = {"mcp": {"servers": {"demo": {"command": sys.executable, "args": [DEMO_MCP]}}}}
        server.add(tool_reply(call("mcp__demo__slow", {"seconds": 120}, id="m")), Reply(text="back again"))
        running, requests_at_cancel = "mcp__demo__slow", 1
    else:
        config = {"limits": {"session_budget_chars": 2000, "compact_keep_chars": 100}}
        summaries = [slow, Reply(text="Goal: the summary.")]
        answers = [Reply(text="y" * 2100), Reply(text="back again")]
        server.default = lambda body: (summaries if _is_summary(body) else answers).pop(0)  # type: ignore[assignment]
        running, requests_at_cancel = "waiting for fake-model", 2
    t = term(config=config, args=("--yes",))
    if state == "compaction":
        t.prompt()
        t.type("fill the context")
        t.wait("yyyy")
    t.prompt()
    t.type("go")
    t.wait(running)
    wait_for(lambda: len(server.requests) == requests_at_cancel)
    t.child.send("\x03")
    t.wait("⊘ interrupted")
    t.prompt()
    t.type("and now?")
    t.wait("back again")
    t.leave()
    assert not server.violations
    if state != "compaction":
        assert tool_results(server.requests[-1]) == {("sa" if state == "sub-agent" else "m"): INTERRUPTED}


def test_the_welcome_names_the_model_endpoint_and_workspace(term: Any, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="hi"))
    t = term()
    t.wait(f"model: fake-model at {server.base_url}")
    t.wait(f"workspace: {workspace.resolve()}")
    t.prompt()
    assert "does not list the model" not in t.text  # it is listed
    t.type("/status")
    t.wait("nanohermes 0.")
    t.wait("model: fake-model (chat wire)")
    t.wait(f"endpoint: {server.base_url} (key from $OPENAI_API_KEY)")
    t.wait(f"workspace: {workspace.resolve()}")
    t.wait("session: ")
    t.wait("config: ")
    t.wait("mode: default")
    t.wait("checkpoints: on")
    t.wait("sandbox: ")
    t.leave()


def test_a_model_the_endpoint_does_not_list_is_warned_about_at_start(workspace: Path, home: Path) -> None:
    with FakeServer(models=("fake-modell", "other")) as server:
        t = Term(workspace, home, server)
        try:
            t.wait("warning: the endpoint does not list the model 'fake-model'; did you mean fake-modell?")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)


def test_a_custom_command_written_while_the_repl_runs_is_there_at_the_next_prompt(
        term: Any, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="listed them"))
    t = term()
    t.prompt()
    t.type("/help")
    t.wait("!command")  # the person's own commands are in the help too
    t.prompt()
    folder = workspace / ".nanohermes" / "commands"
    folder.mkdir(parents=True)
    (folder / "todo.md").write_text("---\ndescription: List the TODOs\n---\nList the TODO comments.")
    t.type("/todo")
    t.wait("listed them")
    t.leave()
    assert server.requests[0]["messages"][-1]["content"] == "List the TODO comments."


def test_the_whole_of_a_large_diff_can_be_read_before_answering(term: Any, server: FakeServer,
                                                               workspace: Path) -> None:
    content = "".join(f"line number {i}\n" for i in range(1, 121))
    server.add(tool_reply(call("write_file", {"path": "big.txt", "content": content})), Reply(text="written"))
    t = term()
    t.prompt()
    t.type("write it")
    t.wait("approve?")
    t.wait("more diff lines")  # the box is cut
    assert "line number 120" not in t.text[t.mark - 5000:]
    t.wait("[v] View the whole diff first")
    t.armed()
    t.child.send("v")
    t.wait("+line number 120")
    t.wait("scroll back to read them")
    t.wait("[y] Yes, once")  # asked again
    t.armed()
    t.child.send("y")
    t.wait("written")
    t.leave()
    assert (workspace / "big.txt").read_text() == content
