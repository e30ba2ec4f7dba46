"""Benchmark: memory and drain speed of run_command on a command that writes 1 GiB.

1. Peak RSS of a real `nanohermes -p` process (driven by the loopback fake server) whose
   model runs a command writing 1 GiB to stdout, against the same run with a command that
   writes nothing. Goal: it grows by less than 64 MiB.
2. Drain throughput of run_command (in-process, the same code the CLI runs) against
   `cat > /dev/null` reading the same stream. Goal: within 1.5x of cat's time.

Usage: python bench/exec.py [--bytes N] [--repeat K] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nanohermes.guard import sandbox  # noqa: E402
from nanohermes.common.budget import Limits  # noqa: E402
from nanohermes.tools.process import command_env, run_capped, shell_argv  # noqa: E402
from nanohermes.testing import FakeServer, Reply, call, tool_reply  # noqa: E402

MiB = 1024 * 1024


def peak_rss_of_cli_run(command: str) -> int:
    """Peak RSS in bytes of one `nanohermes -p` run whose model runs `command` once."""
    with FakeServer([tool_reply(call("run_command", {"command": command})), Reply(text="done")]) as server, \
            tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "bench", "HOME": tmp,
               "XDG_CONFIG_HOME": f"{tmp}/.config", "XDG_DATA_HOME": f"{tmp}/.local/share"}
        argv = [sys.executable, "-m", "nanohermes", "-p", "run it", "--yes", "--no-session",
                "--base-url", server.base_url, "--model", "fake-model"]
        proc = subprocess.Popen(argv, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0 or server.violations:
            raise SystemExit(f"nanohermes run failed ({proc.returncode}): {server.violations}")
        return usage.ru_maxrss * 1024  # Linux reports KiB


def drain_secs(command: str) -> float:
    async def go() -> float:
        fin = await run_capped(shell_argv(command), cwd=Path.cwd(), env=command_env(), limits=Limits(),
                               timeout=3600, out_cap=Limits().run_command_capture_bytes,
                               err_cap=Limits().run_command_capture_bytes,
                               confinement=sandbox.Confinement("off"))  # the drain alone: bench/sandbox.py has the rest
        assert fin.exit_code == 0, fin
        return fin.elapsed

    return asyncio.run(go())


def shell_secs(command: str) -> float:
    start = time.perf_counter()
    subprocess.run(["bash", "-c", command], check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1024 * MiB, help="bytes the command writes (default 1 GiB)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the best is kept")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 MiB, once")
    a = ap.parse_args()
    if a.quick:
        a.bytes, a.repeat = MiB, 1
    producer = f"head -c {a.bytes} /dev/zero"

    base = min(peak_rss_of_cli_run("true") for _ in range(a.repeat))
    big = min(peak_rss_of_cli_run(producer) for _ in range(a.repeat))
    print(f"peak RSS of nanohermes -p: {base / MiB:.1f} MiB running `true`, {big / MiB:.1f} MiB running "
          f"`{producer}`; growth {(big - base) / MiB:.1f} MiB (goal < 64 MiB), ratio {big / base:.2f}x")

    ours, cat = [], []
    for _ in range(a.repeat):  # interleaved so both sides see the same machine load
        ours.append(drain_secs(producer))
        cat.append(shell_secs(f"{producer} | cat > /dev/null"))
    o, c = min(ours), min(cat)
    print(f"drain of {a.bytes / MiB:.0f} MiB: run_command {o:.3f}s ({a.bytes / o / MiB:.0f} MiB/s), "
          f"cat > /dev/null {c:.3f}s ({a.bytes / c / MiB:.0f} MiB/s); ratio {o / c:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
