"""What nanohermes writes to a terminal is inert: the model's text, the progress lines naming a
call, a warning quoting a project's file, in `-p` (stdout and stderr on a pty) and in the REPL,
show escape sequences escaped, so no answer sets the clipboard (OSC 52) or the window title
(OSC 2), clears the screen or reorders a line. A pipe gets the answer exactly, stderr escaped;
JSON output is exact."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pexpect

from nanohermes.common.controls import escape_controls
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from tests.test_repl_pty import Term

REPO = Path(__file__).resolve().parent.parent
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: sets the clipboard to "pwned"
TITLE = "\x1b]2;pwned\x1b\\"  # OSC 2, ended by ST: sets the window title
# Also CSI clearing the screen, the 8-bit CSI and a right-to-left override.
ANSWER = f"the answer {CLIPBOARD} then {TITLE} and \x1b[2J and \x9b31m red \u202etxt.exe\tend"
NARRATION = f"let me look {CLIPBOARD}"
PATH = f"missing{TITLE}.txt"
PROJECT_KEY = f"key{CLIPBOARD}"  # an unknown key of a project's config: the start's warning quotes it


def script(server: FakeServer) -> None:
    server.add(tool_reply(call("read_file", {"path": PATH}), text=NARRATION), Reply(text=ANSWER))


def plant_config(workspace: Path) -> None:
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({PROJECT_KEY: 1}))


def run_on_pty(args: list[str], workspace: Path, server: FakeServer, *, code: int | None = 0) -> str:
    """A run whose stdout and stderr are a terminal (stdin too); what the terminal got."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test-key", "TERM": "xterm-256color"}
    child = pexpect.spawn(sys.executable, ["-m", "nanohermes", *args, "--base-url", server.base_url, "--model",
                                           "fake-model"], cwd=str(workspace), env=env, encoding="utf-8",
                          codec_errors="replace", timeout=60, dimensions=(40, 200))
    child.expect(pexpect.EOF)
    child.close()
    assert code is None or child.exitstatus == code, child.before
    return str(child.before)


def assert_inert(shown: str) -> None:
    for raw in (CLIPBOARD, "\x1b]52", "\x1b]2;", "\x1b[2J", "\x9b", "\u202e", "\x07"):
        assert raw not in shown, f"{raw!r} reached the terminal raw"


def test_p_text_on_a_terminal_shows_the_answer_progress_and_warnings_escaped(
        server: FakeServer, workspace: Path) -> None:
    script(server)
    plant_config(workspace)
    shown = run_on_pty(["-p", "go"], workspace, server)
    assert_inert(shown)
    assert "\x1b" not in shown  # -p itself draws nothing: every escape was the model's or the project's
    lines = shown.replace("\r\n", "\n").splitlines()
    assert escape_controls(ANSWER) in lines  # the answer, whole and readable
    assert escape_controls(NARRATION) in lines  # the model's text before its call
    assert any(line.startswith("→ read_file ") and escape_controls(PATH) in line for line in lines)  # the progress line
    assert any("unknown config keys ignored" in line and escape_controls(PROJECT_KEY) in line for line in lines)


def test_p_json_on_a_terminal_is_json_with_the_text_exact(server: FakeServer, workspace: Path) -> None:
    script(server)
    shown = run_on_pty(["-p", "go", "--output-format", "json"], workspace, server)
    assert_inert(shown)
    start = shown.index("{")
    assert json.loads(shown[start:])["result"] == ANSWER


def test_p_without_a_terminal_writes_the_answer_exactly_and_stderr_escaped(
        cli: Any, server: FakeServer, workspace: Path) -> None:
    script(server)
    plant_config(workspace)
    r = cli("-p", "go", "--verbose", server=server)
    assert r.code == 0, r.err
    assert r.out == ANSWER + "\n"  # a script reading stdout gets what the model wrote
    assert_inert(r.err)
    assert escape_controls(NARRATION) in r.err.splitlines()
    assert f"→ read_file {escape_controls(PATH)}" in r.err
    assert escape_controls(PROJECT_KEY) in r.err


def test_stream_json_keeps_every_character(turn: Any, server: FakeServer) -> None:
    script(server)
    r = turn("-p", "go", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    assert [line["result"] for line in r.lines() if line["type"] == "result"] == [ANSWER]
    assert_inert(r.out)  # what JSON leaves raw (C1, bidi controls) is written as \u escapes


def test_the_repl_shows_a_warning_and_the_answer_escaped(workspace: Path, home: Path, server: FakeServer) -> None:
    script(server)
    plant_config(workspace)
    t = Term(workspace, home, server)
    try:
        t.prompt()
        t.type("go")
        t.wait("txt.exe")
        t.leave()
    finally:
        if t.child.isalive():
            t.child.terminate(force=True)
    for raw in (CLIPBOARD, "\x1b]52", "\x1b]2;pwned", "\x1b[2J", "\x9b", "\u202e"):
        assert raw not in t.raw, f"{raw!r} reached the terminal raw"
    # A warning line (rich alone passes ESC through, and drops BEL), whole above the prompt.
    assert "unknown config keys ignored: key\\x1b]52;c;cHduZWQ=" in t.text
    assert "\\x1b]52;c;cHduZWQ=\\x07" in t.text


def test_doctor_on_a_terminal_shows_a_servers_words_escaped(server: FakeServer, workspace: Path, home: Path) -> None:
    # A server that fails at start with an escape sequence on stderr: doctor quotes its last line.
    failing = {"command": "sh", "args": ["-c", f"printf '{CLIPBOARD} cannot start' >&2; exit 3"]}
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"mcp": {"servers": {"broken": failing}}}))
    server.add(tool_reply(call("probe", {"ok": True})))  # the endpoint's check of streaming and tool calls
    shown = run_on_pty(["doctor"], workspace, server, code=1)
    assert_inert(shown)
    assert "\\x1b]52;c;cHduZWQ=" in shown and "cannot start" in shown


def test_the_resume_picker_shows_a_title_typed_with_escapes_escaped(cli: Any, server: FakeServer,
                                                                    workspace: Path) -> None:
    server.add(Reply(text="ok"))
    assert cli("-p", f"rename {TITLE} the module", server=server).code == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test-key", "TERM": "xterm-256color"}
    child = pexpect.spawn(sys.executable, ["-m", "nanohermes", "--resume", "--base-url", server.base_url], env=env,
                          cwd=str(workspace), encoding="utf-8", codec_errors="replace", timeout=60)
    try:
        child.expect_exact("Resume which session?")
        shown = str(child.before)
        child.send("q\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert_inert(shown)
    assert f"rename {escape_controls(TITLE)} the module" in shown
