"""The person's yes in the REPL, in a real pty: a project's instruction file that imports a
file outside the workspace is read only after a yes, asked before the first prompt is sent;
the yes is remembered for that project and file; a no leaves it out, named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_repl_pty import Term, term  # noqa: F401  # the REPL fixture, shared

from nanohermes.testing import FakeServer, Reply

TEAM = "TEAM-RULES-41c9"
OTHER = "OTHER-RULES-9e02"


def test_a_yes_lets_an_outside_import_in_and_is_remembered(term: Any, server: FakeServer, workspace: Path,
                                                           tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "team.md").write_text(TEAM)
    (shared / "other.md").write_text(OTHER)
    (workspace / "CLAUDE.md").write_text("Team rules: @../shared/team.md and @../shared/other.md")
    server.add(Reply(text="first answer"), Reply(text="second answer"))
    t = term()
    t.prompt()
    t.type("hi")
    t.wait("approve?")
    t.wait(f"{shared / 'team.md'}")
    t.wait("asked because: a project file reaches outside the workspace")
    t.wait("[n] No")
    assert "note for the model" not in t.text
    t.armed()
    t.child.send("y")
    t.wait("✓ yes, read it (remembered for this project)")
    t.wait("approve?")
    t.wait(f"{shared / 'other.md'}")
    t.wait("[n] No")
    t.armed()
    t.child.send("n")
    t.wait("⊘ no")  # no note: no model asked for this file
    t.wait(f"{shared / 'other.md'} (imported by {workspace / 'CLAUDE.md'}) not read: it resolves to "
           f"{shared / 'other.md'}, outside the workspace")
    t.wait("you answered no in this session")
    t.wait("first answer")
    t.leave()
    system = server.requests[0]["messages"][0]["content"]
    assert TEAM in system and OTHER not in json.dumps(server.requests)

    # The next session of this project reads the allowed file without a question, and asks
    # again about the one answered no.
    t = term()
    t.prompt()
    t.type("again")
    t.wait("approve?")
    t.wait(f"{shared / 'other.md'}")
    t.wait("[n] No")
    t.armed()
    t.child.send("n")
    t.wait("⊘ no")  # no note: no model asked for this file
    t.wait("second answer")
    t.leave()
    assert t.text.count("approve?") == 1
    system = server.requests[1]["messages"][0]["content"]
    assert TEAM in system and OTHER not in json.dumps(server.requests)
