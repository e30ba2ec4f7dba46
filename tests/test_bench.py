"""Every benchmark in bench/ runs against the code as it is now: each script's `--quick` mode (a
smoke run, a few seconds) ends well and prints its table, so a change that breaks one fails
here rather than when someone next measures. Nothing about the timings is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))  # _x.py: a shared module


def test_every_script_is_run_here() -> None:
    assert {p.name for p in SCRIPTS} >= {"startup.py", "search.py", "checkpoints.py", "exec.py", "sessions.py",
                                         "turn.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_a_benchmark_runs_in_its_quick_mode(script: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "NANOHERMES_MODEL")}
    p = subprocess.run([sys.executable, str(script), "--quick"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=300)
    assert p.returncode == 0, f"{script.name} --quick failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, p.stderr
    assert len(p.stdout.splitlines()) >= 2, p.stdout
