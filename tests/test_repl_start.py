"""How the REPL starts, in a real pseudo-terminal against the loopback fake server: the
welcome comes before a first message given on the command line, a misspelled setting that
restricts what runs ends the start with "did you mean", and what was typed meanwhile is
printed back and kept in the input history rather than lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_repl_pty import term  # noqa: F401  (the REPL-on-a-pty fixture)

from nanohermes.testing import FakeServer, Reply


def test_a_first_message_on_the_command_line_comes_after_the_welcome(term: Any, server: FakeServer,
                                                                     workspace: Path) -> None:
    server.add(Reply(text="on it"))
    t = term(args=("fix the failing test",))
    t.wait(f"workspace: {workspace}")
    t.wait("› fix the failing test")  # echoed after the welcome, not above it
    t.wait("on it")
    t.leave()
    assert t.text.index("model: fake-model") < t.text.index("› fix the failing test")


def test_a_misspelled_safety_setting_ends_the_start_and_the_first_message_is_printed_back(
        term: Any, home: Path) -> None:
    t = term(config={"permision_mode": "plan"}, args=("delete the build folder",))
    t.wait("unknown key `permision_mode`; did you mean `permission_mode`?")
    t.wait("restricts what runs")
    assert t.exit_code() == 2
    assert "not sent: delete the build folder" in t.text


def test_text_typed_before_a_bad_config_ends_the_repl_is_printed_back_and_kept_in_the_history(
        term: Any, home: Path) -> None:
    t = term(config={"permissions": {"dny": ["run_command"]}})
    t.child.send("my half-typed question")  # typed as it starts, before the config is read
    t.wait("unknown key `permissions.dny`; did you mean `permissions.deny`?")
    assert t.exit_code() == 2
    assert "not sent (Up brings it back at the next start): my half-typed question" in t.text
    assert "+my half-typed question" in (home / ".local/state/nanohermes/history").read_text()


def test_a_misspelled_safety_setting_is_a_usage_error_in_a_script(turn: Any, server: FakeServer) -> None:
    r = turn("-p", "hi", server=server, config={"permision_mode": "plan"})
    assert r.code == 2 and server.requests == []
    assert "unknown key `permision_mode`; did you mean `permission_mode`?" in r.err
    server.add(Reply(text="ran"))
    r = turn("-p", "hi", server=server, config={"modle": "x"})  # not one that restricts what runs: a warning
    assert (r.code, r.out) == (0, "ran\n")
    assert "unknown config keys ignored: modle (did you mean model?)" in r.err
