"""The sandbox seen through the real REPL on a pty: a line a person approves at the prompt
runs outside the sandbox, and a sandbox refusal is offered to the person with one keypress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from test_repl_pty import term, tool_results  # noqa: F401  (the pty fixture)

pytestmark = pytest.mark.skipif(not sandbox.probe().landlock, reason="Landlock is not available here")


def test_a_line_approved_at_the_prompt_is_not_sandboxed(term: Any, server: FakeServer, tmp_path: Path) -> None:
    outside = tmp_path / "approved.txt"
    cmd = f'touch {outside}; echo "[$NANOHERMES_SANDBOX]"'
    server.add(tool_reply(call("run_command", {"command": cmd}, id="r1")), Reply(text="ran it"))
    t = term()
    t.prompt()
    t.type("touch it")
    t.wait("approve?")
    t.wait("[n] No")
    t.armed()
    t.child.send("y")
    t.wait("ran it")
    t.leave()
    assert outside.exists()
    assert tool_results(server.requests[1])["r1"].startswith("exit code: 0\n\nstdout:\n[]\n")


def test_a_refusal_is_offered_with_one_keypress_and_rerun_outside(term: Any, server: FakeServer,
                                                                  tmp_path: Path) -> None:
    outside = tmp_path / "refused.txt"
    server.add(tool_reply(call("run_command", {"command": f"touch {outside}"}, id="r1")), Reply(text="done now"))
    t = term(config={"permissions": {"allow": ["run_command(touch *)"]}})
    t.prompt()
    t.type("touch it")
    t.wait("approve?")
    t.wait("asked because: the sandbox (workspace-write) refused a write to")
    t.wait("run it again outside")
    t.wait("[n] No")
    assert not outside.exists()  # the sandboxed run could not
    t.armed()
    t.child.send("y")
    t.wait("done now")
    t.leave()
    assert outside.exists()
    result = tool_results(server.requests[1])["r1"]
    assert result.startswith("exit code: 0") and "ran outside the sandbox, approved by the user" in result
