"""Benchmark: what the OS sandbox costs per command.

Runs the same short commands through run_command's process path (spawn, drain, sweep)
unsandboxed, under `read-only` and under `workspace-write` (in a git repository, so the
read-only binds of git's metadata are made), each time with the confinement finished as the
gate finishes it for a call (git's config read, the secret files and other programs' sockets
looked for, the mounts, a network namespace with its loopback up, the private /dev/shm), and
prints the median wall time per command side by side, with the difference in ms and the
ratio. Goal: under 10 ms more per command.

Then the cost of withholding secret files: in a tree of `--files` files over 50 folders
with `--secrets` secret files among them, each command under workspace-write looks for them
again (the per-folder cache makes that a stat per folder) and covers each one; printed
against the same command with no look and nothing to cover, and the first, uncached look
alone.

Usage: python bench/sandbox.py [--repeat K] [--files N] [--secrets S] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nanohermes import sandbox, withhold  # noqa: E402
from nanohermes.permissions.rules import DEFAULT_SECRET_FILES  # noqa: E402
from nanohermes.budget import Limits  # noqa: E402
from nanohermes.config import Config  # noqa: E402
from nanohermes.tools.process import command_env, confine, run_capped, shell_argv  # noqa: E402

COMMANDS = ["true", "echo hi > /dev/null", "ls -la", "git status --short"]


def median_ms(command: str, conf: sandbox.Confinement | Callable[[], sandbox.Confinement], ws: Path,
              repeat: int) -> float:
    async def go() -> list[float]:
        times = []
        lim = Limits()
        for _ in range(repeat):
            t = time.perf_counter()
            fin = await run_capped(shell_argv(command), cwd=ws, env=command_env(), limits=lim, timeout=60,
                                   out_cap=lim.run_command_capture_bytes, err_cap=lim.run_command_capture_bytes,
                                   confinement=conf if isinstance(conf, sandbox.Confinement) else conf())
            times.append(time.perf_counter() - t)
            assert fin.exit_code == 0, (command, fin.sandbox, fin.err.text())
        return times

    return statistics.median(asyncio.run(go())) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--secrets", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="a smoke run: few repetitions, a small tree")
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.files, args.secrets = 2, 100, 3
    avail = sandbox.probe()
    for good, line in avail.lines():
        print(("" if good else "weaker: ") + line)
    if not avail.landlock:
        print("Landlock is not available: nothing to measure")
        return
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
        (ws / "a.txt").write_text("x\n")
        config, lim = Config(), Limits()
        confs = {p: functools.partial(confine, p, workspace=ws, config=config, limits=lim)
                 for p in ("off", "read-only", "workspace-write")}
        print(f"\nmedian of {args.repeat} runs per command, ms (difference, ratio against unsandboxed)")
        print(f"{'command':24} {'unsandboxed':>12} {'read-only':>22} {'workspace-write':>22}")
        worst = 0.0
        for cmd in COMMANDS:
            base = median_ms(cmd, confs["off"], ws, args.repeat)
            cells = []
            for p in ("read-only", "workspace-write"):
                ms = median_ms(cmd, confs[p], ws, args.repeat)
                worst = max(worst, ms - base)
                cells.append(f"{ms:6.2f} (+{ms - base:5.2f}, {ms / base:4.2f}x)")
            print(f"{cmd:24} {base:12.2f} {cells[0]:>22} {cells[1]:>22}")
        print(f"\nworst cost per command: {worst:.2f} ms (goal: under 10 ms)")
        secrets_cost(ws, args)


def secrets_cost(ws: Path, args: argparse.Namespace) -> None:
    lim = Limits()
    for i in range(args.files):
        folder = ws / "src" / f"d{i % 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.py").write_text("x = 1\n")
    for i in range(args.secrets):
        (ws / "src" / f"d{i % 50:02d}" / f"{i}.pem").write_text("secret\n")
    (ws / ".env").write_text("TOKEN=x\n")
    time.sleep(0 if args.quick else 2.1)  # past the window in which a folder's fresh listing is not trusted again

    def look() -> withhold.Secrets:
        return withhold.find(ws, DEFAULT_SECRET_FILES, max_entries=lim.sandbox_secret_scan_entries,
                             max_files=lim.sandbox_secret_files, max_secs=lim.sandbox_secret_scan_secs)

    t = time.perf_counter()
    found = look()
    first = (time.perf_counter() - t) * 1000
    assert len(found.files) == args.secrets + 1 and not found.problem, found

    def withheld() -> sandbox.Confinement:
        f = look()
        return sandbox.confinement("workspace-write", workspace=ws, hidden=f.files, unhidden=f.problem)

    plain = sandbox.confinement("workspace-write", workspace=ws)
    print(f"\nwithholding {len(found.files)} secret files in a tree of {args.files} files "
          f"(first look, uncached: {first:.2f} ms)")
    worst = 0.0
    for cmd in COMMANDS[:3]:
        base = median_ms(cmd, plain, ws, args.repeat)
        ms = median_ms(cmd, withheld, ws, args.repeat)
        worst = max(worst, ms - base)
        print(f"{cmd:24} {base:12.2f} {ms:6.2f} (+{ms - base:5.2f}, {ms / base:4.2f}x)")
    print(f"worst cost of withholding per command: {worst:.2f} ms")


if __name__ == "__main__":
    main()
