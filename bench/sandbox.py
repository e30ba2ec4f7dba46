"""Benchmark: what the OS sandbox costs per command.

Runs the same short commands through run_command's process path (spawn, drain, sweep)
unsandboxed, under `read-only` and under `workspace-write` (in a git repository, so the
read-only binds of git's metadata are made), each time with the confinement finished as the
gate finishes it for a call (git's config read, the secret files and other programs' sockets
looked for, the mounts, a network namespace with its loopback up, the private /dev/shm, the
PID namespace with its own /proc and init), and prints per command, side by side, the
median and the fastest wall time and the CPU time (nanohermes and every process of the
command, reaped), with the difference against unsandboxed. Goal: under 10 ms more per
command. The median wall time moves with the machine's load (each process the launcher
hands over to may wait for a CPU); the fastest run and the CPU time say what the sandbox
itself costs. Then the PID namespace's own share: workspace-write with and without it.

Then the cost of withholding secret files: in a tree of `--files` files over 50 folders
with `--secrets` secret files among them, each command under workspace-write looks for them
again (the per-folder cache makes that a stat per folder) and covers each one; printed
against the same command with no look and nothing to cover, and the first, uncached look
alone.

Usage: python bench/sandbox.py [--quick] [--repeat K] [--files N] [--secrets S]
(--quick: 10 runs each, 500 files, 5 secrets: a few seconds)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nanohermes.guard import sandbox, withhold  # noqa: E402
from nanohermes.guard.permissions.rules import DEFAULT_SECRET_FILES  # noqa: E402
from nanohermes.common.budget import Limits  # noqa: E402
from nanohermes.config import Config  # noqa: E402
from nanohermes.guard.sandbox import confine  # noqa: E402
from nanohermes.tools.process import command_env, run_capped, shell_argv  # noqa: E402

COMMANDS = ["true", "echo hi > /dev/null", "ls -la", "git status --short"]


def _cpu() -> float:
    """CPU seconds of this process and of every child it reaped (their children included)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(command: str, conf: sandbox.Confinement | Callable[[], sandbox.Confinement], ws: Path,
            repeat: int) -> tuple[float, float, float]:
    """(median wall ms, fastest wall ms, mean CPU ms) of one command, confinement included."""
    async def go() -> tuple[list[float], float]:
        times = []
        lim = Limits()
        cpu = _cpu()
        for _ in range(repeat):
            t = time.perf_counter()
            fin = await run_capped(shell_argv(command), cwd=ws, env=command_env(), limits=lim, timeout=60,
                                   out_cap=lim.run_command_capture_bytes, err_cap=lim.run_command_capture_bytes,
                                   confinement=conf if isinstance(conf, sandbox.Confinement) else conf())
            times.append(time.perf_counter() - t)
            assert fin.exit_code == 0, (command, fin.sandbox, fin.err.text())
        return times, _cpu() - cpu

    times, cpu = asyncio.run(go())
    return statistics.median(times) * 1000, min(times) * 1000, cpu / repeat * 1000


def cell(ms: float, base: float) -> str:
    return f"{ms:6.2f} (+{ms - base:5.2f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10 runs each, 500 files, 5 secrets")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--secrets", type=int, default=20)
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.files, args.secrets = 10, 500, 5
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
        print(f"\nper command, {args.repeat} runs each: median wall ms / fastest wall ms / mean CPU ms "
              "(+ more than unsandboxed)")
        print(f"{'command':20} {'unsandboxed':>20}  {'read-only':<38} {'workspace-write'}")
        worst = [0.0, 0.0, 0.0]
        for cmd in COMMANDS:
            base = measure(cmd, confs["off"], ws, args.repeat)
            cells = []
            for p in ("read-only", "workspace-write"):
                got = measure(cmd, confs[p], ws, args.repeat)
                worst = [max(w, g - b) for w, g, b in zip(worst, got, base, strict=True)]
                cells.append(" / ".join(f"{g:5.2f} (+{g - b:5.2f})" for g, b in zip(got, base, strict=True)))
            print(f"{cmd:20} {' / '.join(f'{b:5.2f}' for b in base):>20}  {cells[0]:<38} {cells[1]}")
        print(f"\nworst cost per command: {worst[0]:.2f} ms median wall, {worst[1]:.2f} ms fastest wall, "
              f"{worst[2]:.2f} ms CPU (goal: under 10 ms)")
        if avail.pid:
            pid_cost(ws, confs["workspace-write"], args.repeat)
        secrets_cost(ws, args)


def pid_cost(ws: Path, conf: Callable[[], sandbox.Confinement], repeat: int) -> None:
    """workspace-write with and without the PID namespace (its init, its /proc, the relay)."""
    without = functools.partial(lambda: dataclasses.replace(conf(), pid=False))
    with_pid = measure("true", conf, ws, repeat)
    bare = measure("true", without, ws, repeat)
    print("the PID namespace's share (true, workspace-write): "
          + ", ".join(f"+{w - b:.2f} ms {what}" for w, b, what in zip(with_pid, bare, ("median wall", "fastest wall",
                                                                                       "CPU"), strict=True)))


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
        base, _, base_cpu = measure(cmd, plain, ws, args.repeat)
        ms, _, cpu = measure(cmd, withheld, ws, args.repeat)
        worst = max(worst, cpu - base_cpu)
        print(f"{cmd:22} median wall {cell(ms, base)} / CPU {cell(cpu, base_cpu)}")
    print(f"worst cost of withholding per command: {worst:.2f} ms of CPU")


if __name__ == "__main__":
    main()
