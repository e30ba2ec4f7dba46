"""The one-shot path stays lean: a `-p` turn loads neither the SDK nor the REPL's libraries
(nor ctypes or sqlite3, which only a confined command or the memory store needs), and options
it does not know still get typer's exact errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nanohermes.testing import FakeServer, Reply

REPO = Path(__file__).resolve().parent.parent

# A finished -p run leaves without the interpreter's teardown, but runs the exit handlers:
# the report is one of them.
PROBE = """
import atexit, sys
sys.argv = ["nanohermes", *sys.argv[1:]]

def report():
    import gc

    heavy = [m for m in ("openai", "typer", "rich", "prompt_toolkit", "click", "pygments", "mcp",
                         "nanohermes.llm.responses", "httpx._main", "ctypes", "sqlite3")
             if m in sys.modules and getattr(sys.modules[m], "__file__", None)]
    print("loaded", heavy, file=sys.stderr)
    print("collector", "on" if gc.isenabled() else "off", file=sys.stderr)

atexit.register(report)
from nanohermes.cli import main
main()
"""


def test_a_p_turn_imports_no_sdk_no_typer_no_rich(server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="lean answer"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-c", PROBE, "-p", "hi", "--base-url", server.base_url, "--model", "fake-model",
                        "--output-format=text", "--no-session"], cwd=workspace, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    print(p.stdout)
    assert p.stdout == "lean answer\n", p.stderr
    assert p.returncode == 0 and "loaded []" in p.stderr, p.stderr


def test_the_collector_is_back_on_once_the_turn_runs(server: FakeServer, workspace: Path) -> None:
    """It is off only while the start-up loads: a long run still collects its garbage."""
    server.add(Reply(text="collected"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-c", PROBE, "-p", "hi", "--base-url", server.base_url, "--model", "fake-model",
                        "--no-session"], cwd=workspace, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert p.stdout == "collected\n", p.stderr
    assert "collector on" in p.stderr, p.stderr


def test_a_bad_value_still_gets_typer_s_error(cli, server: FakeServer) -> None:
    r = cli("-p", "hi", "--max-turns", "0", server=server)
    assert r.code == 2
    assert "greater than or equal to 1" in r.err
    r = cli("-p", "hi", "--wire-api", "soap", server=server)
    assert r.code == 2 and "Invalid value for '--wire-api'" in r.err and "'soap'" in r.err
    assert server.requests == []
