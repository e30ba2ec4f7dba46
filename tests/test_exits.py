"""nanohermes's exit callbacks (`nanohermes.common.exits`) run once, the latest first, however the
process ends: through `-p`'s quick exit (tests/test_oneshot_exit.py) or the interpreter's own
exit, as typer's commands end; one that fails is reported and does not stop the others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]

def first():
    print("first ran", file=sys.stderr)

def broken():
    raise RuntimeError("boom")

at_exit(first)
at_exit(first)  # registered once
at_exit(broken)
at_exit(lambda: print("last registered ran", file=sys.stderr))
from nanohermes.cli import main
main()
"""


def test_callbacks_run_once_latest_first_when_a_typer_command_ends(workspace: Path, home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_STATE_HOME": str(home / "state")}
    p = subprocess.run([sys.executable, "-c", SCRIPT, "sessions"], cwd=workspace, env=env, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert lines[0] == "last registered ran"
    assert lines[1].startswith("nanohermes: exit callback broken failed: RuntimeError: boom")
    assert lines[2:] == ["first ran"]
