"""Three ways a confined call used to fail badly: a sandboxed `git diff` that could not diff
(git 2.39's "external diff died"), a folder swapped for a link while a patch was being
approved (an internal error that ended the run), and a connection the command's own network
refused (said nowhere to be the sandbox's). Real git, real processes, real sockets."""

from __future__ import annotations

import asyncio
import ctypes
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from exec_support import make_runtime, run_confined
from nanohermes.guard import sandbox
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import ApprovalReply, ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Attempt, ToolContext, ToolError, build_tools
from nanohermes.tools.base import Params, Tool
from nanohermes.tools.patch import ApplyPatch, ApplyPatchParams

AVAIL = sandbox.probe()
confined = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                              reason="needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def repo(workspace: Path) -> Path:
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "T")):
        git(workspace, *args).check_returncode()
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "add", "a.txt").check_returncode()
    git(workspace, "commit", "-qm", "first").check_returncode()
    (workspace / "a.txt").write_text("two\n")
    return workspace


# -- a sandboxed git diff ------------------------------------------------------------------

@confined
def test_a_git_diff_nobody_approved_shows_the_diff(turn: Any, server: FakeServer, repo: Path) -> None:
    # The control: the setting that was meant to turn external diffs off is a program git cannot run.
    blanked = git(repo, "-c", "diff.external=", "diff")
    assert blanked.returncode != 0 and "external diff died" in blanked.stderr

    server.add(tool_reply(call("run_command", {"command": "git diff; git log -p -1 --format=%s"}, id="c1")),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", server=server, stdin=None)  # read-only commands: unasked
    assert r.code == 0, r.err
    [out] = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert out.startswith("exit code: 0"), out
    assert out.count("-one\n+two") == 1 and "first\n" in out and "+one" in out
    assert r.json()["sandbox_refusals"] == []


# -- a folder swapped for a link -----------------------------------------------------------

PATCH = "--- a/d/a.txt\n+++ b/d/a.txt\n@@ -1 +1 @@\n-one\n+two\n"


@pytest.fixture
def tree(workspace: Path, tmp_path: Path) -> tuple[Path, Path]:
    """d/a.txt in the workspace, and a file of the same name outside it that a link could reach."""
    (workspace / "d").mkdir()
    (workspace / "d" / "a.txt").write_text("one\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("one\n")
    return workspace / "d", outside


class SwapWhileAsked(RecordingUI):
    """A person who reads the approval while a process they started swaps the folder for a
    link (as a background task could), then says yes."""

    def __init__(self, folder: Path, target: Path) -> None:
        super().__init__(answers=["yes"])
        self.folder, self.target = folder, target

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        self.folder.rename(self.folder.with_name("d.real"))
        self.folder.symlink_to(self.target)
        return await super().confirm(request)


def test_a_folder_swapped_for_a_link_during_the_approval_is_a_clear_refusal(workspace: Path,
                                                                             tree: tuple[Path, Path]) -> None:
    folder, outside = tree
    ui = SwapWhileAsked(folder, outside)

    async def go() -> list[str]:
        rt = make_runtime(workspace, ui=ui, mode="default")
        calls = [ToolCall(id="p1", name="apply_patch", arguments=json.dumps({"diff": PATCH})),
                 ToolCall(id="r1", name="read_file", arguments=json.dumps({"path": "d.real/a.txt"}))]
        msgs = await rt.run_calls(calls)
        return [m.content or "" for m in msgs]

    patched, read = asyncio.run(go())
    assert len(ui.of(ApprovalRequest)) == 1
    assert patched.startswith("ERROR: ") and "symlink" in patched, patched
    assert (outside / "a.txt").read_text() == "one\n"  # nothing written through the link
    assert (workspace / "d.real" / "a.txt").read_text() == "one\n"
    assert "one" in read  # the turn went on


def test_in_the_repl_a_folder_swapped_while_the_box_is_open_is_a_clear_refusal(server: FakeServer, workspace: Path,
                                                                                 home: Path, tree: tuple[Path, Path]) -> None:
    """The person reads the patch in the approval box while a process swaps the folder for a
    link; their yes gets the call's error, the turn goes on, and nothing is written outside."""
    from test_repl_pty import Term, tool_results

    folder, outside = tree
    server.add(tool_reply(call("apply_patch", {"diff": PATCH}, id="p1")), Reply(text="the turn went on"))
    t = Term(workspace, home, server)
    try:
        t.prompt()
        t.type("patch it")
        t.wait("approve?")
        t.wait("[n] No")
        folder.rename(folder.with_name("d.real"))
        folder.symlink_to(outside)
        t.armed()
        t.child.send("y")
        t.wait("the turn went on")
        t.leave()
    finally:
        if t.child.isalive():
            t.child.terminate(force=True)
    assert "internal error" not in t.text
    result = tool_results(server.requests[1])["p1"]
    assert result.startswith("ERROR: ") and "symlink" in result, result
    assert (outside / "a.txt").read_text() == "one\n" and (workspace / "d.real" / "a.txt").read_text() == "one\n"


def test_a_folder_swapping_back_and_forth_never_breaks_the_approval(workspace: Path, tree: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    """A process that keeps exchanging the folder and a link (renameat2 RENAME_EXCHANGE) makes
    a path resolution now and then find a link that is a folder by the time it is read: the
    approval text is then plain, never an exception that ends the run."""
    if not hasattr(ctypes.CDLL(None), "renameat2"):
        pytest.skip("libc has no renameat2")
    folder, outside = tree
    (workspace / "l").symlink_to(outside)
    swapper = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, sys\nlibc = ctypes.CDLL(None)\na, b = sys.argv[1].encode(), sys.argv[2].encode()\n"
        "print(flush=True)\nwhile True:\n    libc.renameat2(-100, a, -100, b, 2)\n"), str(folder), str(workspace / "l")],
        stdout=subprocess.PIPE)
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == b"\n"
        ctx = ToolContext(workspace=workspace, limits=Limits(), config=Config())
        tool, args = ApplyPatch(), ApplyPatchParams(diff=PATCH)
        for _ in range(2000):
            try:
                attempt = Attempt(target=tool.target(args, ctx))
            except ToolError as e:  # a resolution refused while the path changes: the tool's own error
                assert "changed while it was being resolved" in str(e), e
                continue
            assert isinstance(tool.approval_detail(args, ctx, attempt), str)
    finally:
        swapper.kill()
        swapper.wait()


@dataclass(frozen=True, kw_only=True)
class NoteParams(Params):
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class Unshowable(Tool[NoteParams]):
    """A tool whose text for the approval breaks (as a path changing under it could make any
    tool's break)."""

    name: ClassVar[str] = "unshowable"
    group: ClassVar[str] = "files"
    description: ClassVar[str] = "Write a note."
    params: ClassVar[type[Params]] = NoteParams
    spawns: ClassVar[bool] = False

    def approval_detail(self, args: NoteParams, ctx: ToolContext, attempt: Attempt) -> str:
        raise OSError(22, "Invalid argument", "d")

    async def run(self, args: NoteParams, ctx: ToolContext, attempt: Attempt) -> str:
        return "RAN"


def test_an_approval_that_cannot_be_shown_is_refused_and_the_turn_goes_on(workspace: Path) -> None:
    ui = RecordingUI(answers=["yes"])
    rt = Runtime(tools=[Unshowable(), *build_tools()], config=Config(), workspace=workspace, ui=ui,
                 policy=Policy(mode="default"), limits=Limits())
    (workspace / "a.txt").write_text("kept\n")
    first, second = asyncio.run(rt.run_calls([ToolCall(id="u1", name="unshowable", arguments="{}"),
                                              ToolCall(id="r1", name="read_file", arguments='{"path": "a.txt"}')]))
    assert first.content == ("ERROR: unshowable cannot show what this call would do (OSError: [Errno 22] Invalid "
                             "argument: 'd'); nothing was run; try again")
    assert ui.of(ApprovalRequest) == [] and "kept" in (second.content or "")


# -- a connection the sandbox's network refused ---------------------------------------------

@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A server of the host on 127.0.0.1, recording what reaches it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    t.join()
    srv.close()


PY_CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5); print('CONNECTED')"


@confined
def test_a_connection_refused_by_the_sandboxs_own_loopback_says_so(workspace: Path,
                                                                   listener: tuple[int, list[object]]) -> None:
    port, accepted = listener
    (workspace / "client.py").write_text(PY_CONNECT)
    control = subprocess.run([sys.executable, "client.py", str(port)], cwd=workspace, capture_output=True, text=True)
    assert "CONNECTED" in control.stdout and len(accepted) == 1  # the door is real

    # Python's error names no port: the command line does.
    ran = run_confined(workspace, f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\"",
                       "workspace-write")
    assert "ConnectionRefusedError" in ran.text and "stdout:\n(empty)" in ran.text
    assert ran.refused == [f"a connection to port {port} of the host's loopback (the sandbox has a loopback of its "
                           "own: servers the command starts are reachable, the host's are not)"]
    assert 'set "sandbox": {"network": true}' in ran.text
    # Nothing names it (the port comes from a file): the refusal is still the sandbox's.
    (workspace / "port").write_text(str(port))
    ran = run_confined(workspace, "python3 client.py $(cat port)", "read-only")
    [refused] = ran.refused
    assert refused.startswith("a connection, probably to a server of this machine (it was refused; listening here: ")
    assert "refused a connection, probably" in ran.text
    # The ports listening here, ten at most: with more (other servers of a busy machine),
    # ours may be past the tenth.
    shown = refused.split("listening here: ")[1].split(";")[0].split(", ")
    assert str(port) in shown or (len(shown) == 11 and shown[-1] == "...")
    assert '"network": true' in ran.text
    assert len(accepted) == 1  # only the control's


@confined
def test_a_command_that_waited_for_its_own_server_is_no_refusal(workspace: Path,
                                                                listener: tuple[int, list[object]]) -> None:
    (workspace / "wait.py").write_text(
        "import socket, threading, time\n"
        "try:\n    socket.create_connection(('127.0.0.1', 1), 1)\nexcept OSError as e:\n    print('retrying:', e)\n"
        "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
        "socket.create_connection(srv.getsockname(), 1); print('up')\n")
    ran = run_confined(workspace, "python3 wait.py", "workspace-write")
    assert "Connection refused" in ran.text and "up" in ran.text and ran.refused == []
