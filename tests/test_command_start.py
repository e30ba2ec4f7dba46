"""What a command's first start costs beyond the command: the sandbox's probe runs once per
process, whoever asks and from whichever thread, and it starts as soon as the model's answer
names a call that may run confined (while the turn settles), never for a turn whose calls start
no process or run unconfined. The command itself is confined as ever. Real processes, the real
kernel sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent
AVAIL = sandbox.probe()

ASKED_AT_ONCE = """
import threading
from nanohermes.guard import sandbox

got = []
start = threading.Barrier(4)

def ask():
    start.wait()
    got.append(sandbox.probe())

threads = [threading.Thread(target=ask) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len({id(a) for a in got}), all(a is sandbox.probe() for a in got), got[0].confines, got[0].pid)
"""


def test_the_probe_runs_once_however_many_threads_ask_at_once(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-c", ASKED_AT_ONCE], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "True", str(AVAIL.confines), str(AVAIL.pid)]


def probed(cli: Any, server: FakeServer, tmp_path: Path, tool: str, args: dict[str, Any], *flags: str) -> bool:
    """Run one `-p --yes` turn whose model calls `tool` once, in a temporary folder of its own;
    whether the sandbox started anything there (the probe, or a confined command, each makes
    the sandbox's folder in it)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    server.add(tool_reply(call(tool, args, id="c1")), Reply(text="done"))
    r = cli("-p", "go", "--yes", *flags, server=server, env={"TMPDIR": str(tmp)})
    assert r.code == 0 and r.out == "done\n", r.err
    return any(p.name.startswith("nanohermes-sandbox-") for p in tmp.iterdir())


def test_a_turn_whose_call_starts_no_process_never_probes_the_sandbox(cli: Any, server: FakeServer, tmp_path: Path,
                                                                       workspace: Path) -> None:
    (workspace / "notes.txt").write_text("plover\n")
    assert not probed(cli, server, tmp_path, "read_file", {"path": "notes.txt"})
    assert "plover" in next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")


def test_with_the_sandbox_off_a_command_never_probes_it(cli: Any, server: FakeServer, tmp_path: Path,
                                                        workspace: Path) -> None:
    assert not probed(cli, server, tmp_path, "run_command", {"command": "echo ran > out.txt"}, "--sandbox", "off")
    assert (workspace / "out.txt").read_text() == "ran\n"


@pytest.mark.skipif(not (AVAIL.landlock and AVAIL.pid), reason="needs Landlock and a PID namespace of its own")
def test_a_command_after_the_early_probe_runs_confined_in_its_own_processes(cli: Any, server: FakeServer,
                                                                             tmp_path: Path, workspace: Path) -> None:
    line = "echo $$ $NANOHERMES_SANDBOX; ls /proc | grep -c '^[0-9]'; touch ../outside.txt || echo refused"
    assert probed(cli, server, tmp_path, "run_command", {"command": line})
    result = next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")
    shown = result.split("stdout:\n", 1)[1].split("\n\nstderr:")[0].split()
    # The shell is the namespace's second process, beside its init; nothing of the machine's shows.
    assert shown[:2] == ["2", "workspace-write"] and int(shown[2]) <= 4 and shown[3] == "refused", result
    assert not (workspace.parent / "outside.txt").exists()


LOADED = """
import sys
from nanohermes.common.exits import at_exit
at_exit(lambda: print("loaded", sorted(m for m in sys.modules if m.startswith("nanohermes.tools.patches")
                                      or m == "nanohermes.tools.tasks"), file=sys.stderr))
sys.argv = ["nanohermes", *sys.argv[1:]]
from nanohermes.cli import main
main()
"""


def test_an_ordinary_command_loads_neither_the_reader_of_patches_sent_through_the_shell_nor_the_task_manager(server: FakeServer,
                                                                              workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "echo ran"}, id="c1")), Reply(text="done"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-c", LOADED, "-p", "go", "--yes", "--base-url", server.base_url, "--model",
                        "fake-model"], cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "done\n", p.stderr
    assert "loaded []" in p.stderr, p.stderr
    assert "ran" in next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")


def test_a_background_command_still_starts_its_task(turn: Any, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "echo bg > bg.txt", "background": True}, id="c1")),
               tool_reply(call("task_list", {}, id="c2")), Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server)
    assert r.code == 0 and r.out == "done\n", r.err
    results = {m["tool_call_id"]: m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"}
    assert results["c1"].startswith("started background task "), results
    task_id = results["c1"].removeprefix("started background task ").split(":")[0]
    assert task_id in results["c2"], results
