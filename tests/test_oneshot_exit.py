"""How a one-shot `-p` run starts and ends: one checkpoint snapshot for its one turn (no
background warm-up to wait for and repeat), and nanohermes's exit callbacks run although the
interpreter's teardown is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nanohermes.turn.checkpoints import REF_PREFIX, store_dir
from nanohermes.testing import FakeServer, Reply

REPO = Path(__file__).resolve().parent.parent


def test_a_p_turn_keeps_one_checkpoint_of_what_it_changed(cli, server: FakeServer, workspace: Path) -> None:
    import json

    from nanohermes.testing import call, tool_reply

    (workspace / "a.txt").write_text("a\n")
    server.add(tool_reply(call("write_file", {"path": "b.txt", "content": "b\n"})), Reply(text="done"))
    r = cli("-p", "write b.txt", "--yes", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert json.loads(r.out)["files_changed"] == ["b.txt"]
    git_dir = store_dir(workspace.resolve()) / "git"
    refs = subprocess.run(["git", "--git-dir", str(git_dir), "for-each-ref", "--format=%(objectname)", REF_PREFIX],
                          capture_output=True, text=True, check=True).stdout.split()
    assert len(refs) == 1  # the turn's checkpoint, and nothing for the session's start
    message = subprocess.run(["git", "--git-dir", str(git_dir), "log", "-1", "--format=%s", refs[0]],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert message == "turn 1: write b.txt"
    server.add(Reply(text="nothing to change"))
    r = cli("-p", "look at a.txt", "--output-format", "json", server=server)
    assert json.loads(r.out)["files_changed"] == []  # a turn that changed nothing keeps nothing
    refs = subprocess.run(["git", "--git-dir", str(git_dir), "for-each-ref", "--format=%(objectname)", REF_PREFIX],
                          capture_output=True, text=True, check=True).stdout.split()
    assert len(refs) == 1


EXIT_HANDLER = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]
at_exit(lambda: print("exit handler ran", file=sys.stderr))
from nanohermes.cli import main
main()
print("unreachable: main returned", file=sys.stderr)
"""


def test_a_finished_p_run_runs_the_exit_handlers_and_keeps_its_code(server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="fine"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    base = ["--base-url", server.base_url, "--model", "fake-model", "--no-session"]
    ok = subprocess.run([sys.executable, "-c", EXIT_HANDLER, "-p", "hi", *base], cwd=workspace, env=env,
                        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert (ok.returncode, ok.stdout) == (0, "fine\n"), ok.stderr
    assert ok.stderr == "exit handler ran\n"
    empty = subprocess.run([sys.executable, "-c", EXIT_HANDLER, "-p", " ", *base], cwd=workspace, env=env,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert empty.returncode == 2
    assert empty.stderr.startswith("nanohermes: error: the prompt is empty")
    assert empty.stderr.endswith("exit handler ran\n")
