"""Commands through `nanohermes -p`: approvals (the turn, in this process), and no task outlives the
real process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from exec_support import marked_pids, no_leftover_processes, wait_until  # noqa: F401
from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent


def tool_results(server: FakeServer, request: int) -> list[str]:
    return [m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"]


def test_commit_is_refused_without_a_terminal_or_yes(turn, server: FakeServer, workspace: Path) -> None:
    for args in (["init", "-q"], ["config", "user.name", "A"], ["config", "user.email", "a@b.c"]):
        subprocess.run(["git", *args], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("a\n")
    server.add(tool_reply(call("git_commit", {"message": "sneaky", "paths": ["a.txt"]})), Reply(text="ok"))
    r = turn("-p", "commit it", server=server)
    assert r.code == 0, r.err
    assert tool_results(server, 1) == ["Denied by the user. Do not retry it; ask what to do instead."]
    log = subprocess.run(["git", "log"], cwd=workspace, capture_output=True, text=True)
    assert log.returncode != 0 and "does not have any commits yet" in log.stderr


def test_commit_runs_with_yes(turn, server: FakeServer, workspace: Path) -> None:
    for args in (["init", "-q"], ["config", "user.name", "A"], ["config", "user.email", "a@b.c"]):
        subprocess.run(["git", *args], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("a\n")
    server.add(tool_reply(call("git_commit", {"message": "approved", "paths": ["a.txt"]})), Reply(text="ok"))
    r = turn("-p", "commit it", "--yes", server=server)
    assert r.code == 0, r.err
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True).stdout.strip()
    assert tool_results(server, 1)[0].startswith(f"committed {head}\n")


def test_command_is_refused_without_a_terminal_or_yes(turn, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch made"})), Reply(text="ok"))
    r = turn("-p", "go", server=server)
    assert r.code == 0, r.err
    assert tool_results(server, 1) == ["Denied by the user. Do not retry it; ask what to do instead."]
    assert not (workspace / "made").exists()


def test_tasks_are_killed_when_the_run_ends(cli, server: FakeServer, no_leftover_processes: str) -> None:
    server.add(tool_reply(call("run_command", {"command": "sleep 300 & sleep 301; wait", "background": True})),
               Reply(text="started it"))
    r = cli("-p", "start a server", "--yes", "--verbose", server=server)
    assert r.code == 0, r.err
    assert tool_results(server, 1)[0].startswith("started background task ")
    assert "killed (session ended)" in r.err  # the task-finished notice
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


def test_tasks_are_killed_when_the_run_fails(cli, server: FakeServer, no_leftover_processes: str) -> None:
    server.add(tool_reply(call("run_command", {"command": "sleep 300 & sleep 301; wait", "background": True})),
               Fault(status=400, message="bad request"))
    r = cli("-p", "start a server", "--yes", server=server)
    assert r.code == 1, r.err
    assert "bad request" in r.err
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


@pytest.mark.parametrize("sig,code,said", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_tasks_are_killed_when_nanohermes_is_signalled(server: FakeServer, workspace: Path, no_leftover_processes: str,
                                                        sig: int, code: int, said: str) -> None:
    # The model starts a task with a child, then takes its time answering: the signal
    # arrives while nanohermes waits on the model with the task running.
    server.add(tool_reply(call("run_command", {"command": "sleep 300 & sleep 301; wait", "background": True})),
               Reply(text="never seen", delay=60))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    argv = [sys.executable, "-m", "nanohermes", "-p", "go", "--yes", "--output-format", "json",
            "--base-url", server.base_url, "--model", "fake-model"]
    # (SIGINT reaches it at its default even when the suite runs in a background job: conftest.)
    proc = subprocess.Popen(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # nanohermes itself, the task's shell and its two sleeps, and the model is asked again
        assert wait_until(lambda: len(marked_pids(no_leftover_processes)) >= 4 and len(server.requests) >= 2, timeout=60)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # failed: nanohermes and whatever it started go, not only nanohermes
            proc.kill()
            proc.communicate()
            for pid in marked_pids(no_leftover_processes):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    assert proc.returncode == code, err
    assert f"nanohermes: {said}" in err
    assert '"exit_reason": "interrupted"' in out
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)
