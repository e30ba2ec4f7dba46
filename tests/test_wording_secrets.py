"""What nanohermes says when it keeps a secret file's contents from a command or from the model,
each message once, through `-p` with the real sandbox. The other tests assert that the value
never reached the model, which file was withheld and what was refused; rewording a message
changes one row here."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from exec_support import call as run_tool
from exec_support import make_runtime

from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply

AVAIL = sandbox.probe()
needs_the_sandbox = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                                       reason="needs Landlock and user namespaces")


def results(server: FakeServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def notes(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("note: ")]


@needs_the_sandbox
def test_a_secret_file_withheld_from_a_program_says(turn: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / ".env").write_text("K=v\n")
    server.add(tool_reply(call("run_command", {"command": "python3 -c \"open('.env')\""})), Reply(text="done"))
    turn("-p", "go", server=server, config={"permissions": {"allow": ["run_command(python3 *)"]}})
    assert notes(results(server)[0]) == [
        f"note: the OS sandbox (workspace-write) refused access to {workspace / '.env'}, a secret file the sandbox "
        "withholds (permissions.secret_files): this line ran sandboxed because no person approved it, and the "
        "workspace's secret files are withheld from it (reads fail with \"Permission denied\"). Reading one needs a "
        "person's approval at the prompt; otherwise do without it"]


@needs_the_sandbox
def test_too_many_secret_files_to_withhold_say(turn: Any, server: FakeServer, workspace: Path) -> None:
    for i in range(3):
        (workspace / f"k{i}.pem").write_text("k\n")
    config = {"limits": {"sandbox_secret_files": 2}, "permissions": {"allow": ["run_command(python3 *)"]}}
    server.add(tool_reply(call("run_command", {"command": "python3 -c 1"})), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", server=server, config=config)
    assert json.loads(r.out)["permission_denials"][0]["reason"] == (
        "needs approval (more than 2 secret files in the workspace (limits.sandbox_secret_files), so the sandbox "
        "cannot withhold every secret file (permissions.secret_files) from it; a yes runs it outside the sandbox)")
    server.add(tool_reply(call("run_command", {"command": "python3 -c 1"})), Reply(text="done"))
    turn("-p", "go", "--yes", server=server, config={"limits": {"sandbox_secret_files": 2}})
    assert results(server) == [
        "ERROR: more than 2 secret files in the workspace (limits.sandbox_secret_files), so the sandbox cannot withhold "
        "every secret file (permissions.secret_files) from a command no person approved; raise the limit, or approve "
        "the command at the prompt; the command did not run. `nanohermes doctor` shows what the sandbox needs"]


@needs_the_sandbox
def test_a_secret_value_replaced_in_a_commands_output_says(turn: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / ".env").write_text("API_TOKEN=tok-0123456789abcdef\n")
    (workspace / "notes.txt").write_text("copied here: tok-0123456789abcdef\n")
    server.add(tool_reply(call("run_command", {"command": "cat notes.txt"})), Reply(text="done"))
    turn("-p", "go", server=server, stdin=None)
    assert notes(results(server)[0]) == [
        "note: 1 value of the workspace's secret files (permissions.secret_files) was replaced by [REDACTED] in this "
        "output: commands no person approved may not read them (a person's yes at the prompt lets a command read one)"]


def test_a_patch_leaving_the_workspace_says(workspace: Path) -> None:
    out = run_tool(make_runtime(workspace), "apply_patch", diff="--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n")
    assert out == "ERROR: ../x: the path leaves the workspace; use paths relative to the workspace"


def test_the_sandbox_off_says_so_in_doctor(turn: Any) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    r = turn("doctor", "--base-url", url, config={"sandbox": {"mode": "off"}})
    assert [line for line in r.out.splitlines() if line.startswith("[warn] sandbox")] == [
        "[warn] sandbox: off (sandbox.mode or --sandbox off): commands that run without asking (--yes, goal mode) run "
        "with your full rights"]
