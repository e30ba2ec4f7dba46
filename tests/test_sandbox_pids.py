"""A sandboxed command's own processes: its own PID namespace and /proc. Each door is first
shown open to a plain command (the control), then closed to a command nanohermes runs
unasked; and the work that uses processes (ps, kill, background jobs, exit statuses, a
graceful end at a timeout) behaves as it does unconfined. Real kernel, real processes."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exec_support import confined_context, marked_pids, no_leftover_processes, run_confined, wait_until  # noqa: F401
from nanohermes.guard import sandbox
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.guard.sandbox.pidns import INIT_TITLE
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.guard.sandbox import confine
from nanohermes.tools.process import command_env, run_capped, shell_argv
from nanohermes.tools.shell import RunCommand, RunCommandParams

AVAIL = sandbox.probe()
pytestmark = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.pid),
                                reason="needs Landlock and a PID namespace of its own (`nanohermes doctor` says which "
                                       "is missing)")


def model_runs(turn: Any, server: FakeServer, command: str, *flags: str) -> str:
    """The model calls run_command once; the result it got back."""
    server.add(tool_reply(call("run_command", {"command": command}, id="c1")), Reply(text="done"))
    r = turn("-p", "go", *flags, server=server, stdin=None)
    assert r.code == 0, r.err
    return next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the person's that no command of the model's may see or signal."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_command_nobody_approved_lists_only_its_own_processes(turn: Any, server: FakeServer,
                                                                  bystander: subprocess.Popen[bytes]) -> None:
    listing = "ps -eo pid=,args=; ls /proc | grep -c '^[0-9]'"
    control = subprocess.run(["sh", "-c", listing], capture_output=True, text=True).stdout
    assert f"{bystander.pid} sleep 300" in control and f"{os.getpid()} " in control  # the door is real

    out = model_runs(turn, server, listing)  # ps and ls run unasked: read-only, confined
    rows = [line.split(None, 1) for line in out.split("stdout:\n", 1)[1].split("\n\nstderr:")[0].splitlines()]
    pids = {int(r[0]): r[1] for r in rows if len(r) == 2}
    assert pids[1] == INIT_TITLE.decode()  # the namespace's init, not a copy of nanohermes's arguments
    assert max(pids) < 10 and str(bystander.pid) not in pids and os.getpid() not in pids, out
    assert "sleep 300" not in out and int(rows[-1][0]) < 10  # /proc holds only the namespace's (init, sh, ls, grep)


def test_a_command_nobody_approved_cannot_reach_a_process_outside(workspace: Path,
                                                                    bystander: subprocess.Popen[bytes]) -> None:
    pid = bystander.pid
    reach = f"kill -STOP {pid}; echo kill=$?; cat /proc/{pid}/cmdline; echo; cat /proc/1/environ | head -c 20"
    control = subprocess.run(["sh", "-c", reach], capture_output=True, text=True)
    assert "kill=0" in control.stdout and "sleep" in control.stdout  # the door is real
    os.kill(pid, signal.SIGCONT)  # the control stopped it
    for policy in ("read-only", "workspace-write"):
        out = run_confined(workspace, reach, policy).text
        assert "kill=1" in out and "No such process" in out, out
        assert f"/proc/{pid}/cmdline: No such file or directory" in out
        assert "cat: /proc/1/environ: Permission denied" in out  # the init's memory is nanohermes's
    assert bystander.poll() is None and "T" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    refused = f"signalling process {pid}, a process outside the command's own PID namespace"
    assert run_confined(workspace, f"kill -STOP {pid}", "workspace-write").refused[0].startswith(refused)
    out = run_confined(workspace, f"python3 -c 'import os, sys; os.kill(int(sys.argv[1]), 0)' {pid}", "read-only")
    assert out.refused[0].startswith(refused) and "a background task is stopped with task_kill" in out.text, out.text
    own = run_confined(workspace, "sleep 30 & p=$!; echo pid=$p; kill $p; wait $p; kill $p", "workspace-write")
    assert "No such process" in own.text, own.text
    inside = int(own.text.split("pid=")[1].split()[0])
    try:
        host_program = bool(Path(f"/proc/{inside}/cmdline").read_bytes())
    except OSError:
        host_program = False
    if not host_program:  # a number no program has here: only the command's own process, gone
        assert own.refused == [], own.text


def test_a_refused_look_into_its_own_proc_is_named_as_such(workspace: Path) -> None:
    """The command's /proc is its own: a refusal there names the sandbox's init (or its own
    /proc), never the host's process of that number as a write the sandbox refused."""
    for policy in ("read-only", "workspace-write"):
        ran = run_confined(workspace, "cat /proc/1/environ; head -c1 /proc/1/maps", policy)
        assert "cat: /proc/1/environ: Permission denied" in ran.text, ran.text
        init = ("the sandbox's init (pid 1 of the command's own PID namespace, a copy of nanohermes, whose memory, "
                "environment and files no command may read)")
        assert ran.refused == [f"access to /proc/1/environ, {init}", f"access to /proc/1/maps, {init}"]
        assert "a write to" not in ran.text and "sandbox.writable_roots;" not in ran.text.split("What lets it through")[1]
        assert "no setting shows sandboxed commands nanohermes's processes or anyone else's" in ran.text


def test_without_its_own_namespace_a_confined_command_would_see_them(workspace: Path,
                                                                     bystander: subprocess.Popen[bytes]) -> None:
    """The control for the launcher itself: the same confinement without the PID namespace
    (what a machine that refuses one gets) shows the person's processes."""
    conf = dataclasses.replace(confine("read-only", workspace=workspace, config=Config(), limits=Limits()), pid=False)

    async def run() -> str:
        lim = Limits()
        fin = await run_capped(shell_argv(f"cat /proc/{bystander.pid}/cmdline"), cwd=workspace, env=command_env(),
                               limits=lim, timeout=30, out_cap=4096, err_cap=4096, confinement=conf)
        return fin.out.text()

    assert asyncio.run(run()) == "sleep\x00300\x00"


def test_processes_of_its_own_work_as_unconfined(workspace: Path) -> None:
    line = ("sleep 30 & child=$!; ps -o pid=,args= -p $child; kill $child; wait $child; echo status=$?; "
            "python3 -c 'import multiprocessing as m; print(sum(m.get_context(\"fork\").Pool(2).map(abs, [-1, 2])))'; "
            "echo self=$$")
    out = run_confined(workspace, line, "workspace-write").text
    assert out.startswith("exit code: 0"), out
    assert "sleep 30\n" in out and "status=143\n" in out and "\n3\n" in out
    assert "self=2\n" in out  # the shell is pid 2 of its namespace, after the init


@pytest.mark.parametrize(("line", "shown"), [
    ("exit 7", "exit code: 7"),
    ("kill -TERM $$", "exit code: killed by SIGTERM"),
    ("kill -SEGV $$", "exit code: killed by SIGSEGV"),
])
def test_the_result_carries_the_commands_own_exit(workspace: Path, line: str, shown: str) -> None:
    out = run_confined(workspace, line, "workspace-write").text
    assert out.startswith(shown + "\n"), out
    assert not [p for p in os.listdir(workspace) if p.startswith("core")]  # the relay leaves no core file


def test_a_command_that_ends_gracefully_at_its_timeout_still_does(workspace: Path) -> None:
    """The timeout's TERM reaches the command's group; the relay nanohermes waits on holds it
    back for itself, so the command's own handler still runs before the KILL."""
    line = "trap 'echo graceful; exit 0' TERM; echo up; sleep 30 & wait"
    ctx, attempt = confined_context(workspace, "workspace-write", limits=Limits(command_kill_grace_secs=30))
    out = asyncio.run(RunCommand().run(RunCommandParams(command=line, timeout_secs=1), ctx, attempt))
    text = out if isinstance(out, str) else out.text
    assert text.startswith("exit code: killed (timed out after 1s)") and "up\ngraceful" in text, text


def test_background_jobs_are_handled_as_before(workspace: Path, no_leftover_processes: str) -> None:
    """A job still writing when the shell exits is waited for (within command_pipe_grace_secs);
    one that let go of the output is killed with the call; one that left the group (setsid) is
    killed and counted; none outlives the call."""
    out = run_confined(workspace, "(sleep 0.2; echo late) & sleep 300 > /dev/null 2>&1 & "
                                  "setsid sleep 301 > /dev/null 2>&1 < /dev/null & sleep 0.1; echo early",
                       "workspace-write").text
    assert "early\nlate" in out and "note: 1 process the command started outside its process group" in out, out
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


def test_without_a_pid_namespace_doctor_says_what_is_weaker() -> None:
    lines = sandbox.Availability(abi=6, namespaces=True, pid=False, pid_error="EPERM").lines()
    weak = [text for good, text in lines if not good]
    assert weak == ["no PID namespace with its own /proc (EPERM): commands see the machine's other processes and "
                    "their command lines"]
    assert "its own processes (a PID namespace and /proc" in sandbox.Availability(abi=6, namespaces=True,
                                                                                   pid=True).lines()[1][1]


_FALLBACK = """
import subprocess, sys
from pathlib import Path
from nanohermes.guard import sandbox
a = sandbox.probe()
conf = sandbox.confinement("read-only", workspace=Path(sys.argv[1]))
prepared = sandbox.prepare(conf)
argv, env = ["/bin/sh", "-c", f"echo ran; test -d /proc/{sys.argv[2]} && echo sees-outside"], prepared.env({"PATH": "/usr/bin:/bin"})
r = subprocess.run(argv, preexec_fn=prepared.preexec(argv, env), env=env, capture_output=True, text=True)
prepared.cleanup()
print(a.namespaces, a.pid, conf.pid, r.returncode, *r.stdout.split(), sep="|")
print(a.pid_error)
"""


def test_where_no_procfs_of_its_own_can_be_mounted_commands_run_without_the_pid_namespace(workspace: Path) -> None:
    """A container that covers part of /proc (as container engines do) keeps a user namespace
    from mounting a procfs of its own: the probe says why, and commands still run confined,
    in the other namespaces."""
    import shutil
    import sys

    from conftest import REPO

    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs util-linux's unshare and mount to build such a container")
    line = f"mount --bind /dev/null /proc/keys && {sys.executable} -c \"$0\" {workspace} {os.getpid()}"
    r = subprocess.run(["unshare", "-Urm", "sh", "-c", line, _FALLBACK], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    if "mount" in r.stderr and r.returncode != 0:
        pytest.skip(f"cannot cover /proc/keys here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    state, why = r.stdout.strip().split("\n")
    assert state.split("|") == ["True", "False", "False", "0", "ran", "sees-outside"]  # the machine's processes
    assert why.endswith("mounting /proc for the command's own processes: Operation not permitted")
