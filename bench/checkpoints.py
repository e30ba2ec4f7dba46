"""Checkpoint cost beside `git status --porcelain`, in a generated repository.

Generates a committed git repository of N small files (40,000 by default, in nested
folders, with a few git-ignored build files and untracked ones), then measures, each as the
median of several runs:

- `git status --porcelain` there (the yardstick);
- the first scan of a new store (the first checkpoint ever of the workspace);
- a scan with nothing changed, and with 10 and 1,000 files changed (what a turn costs, before
  it and after it);
- a whole turn's checkpoint work: the scan before, the scan after and keeping the changes;
- a new session's first scan (seeded from the last session's stat cache, as each `-p` run is).

Each line prints seconds, the seconds of `git status` run just before each of its runs, and
the median of the per-run ratios (load that changes on a shared machine moves both alike). A ratio that stays near 1 as N grows
means a checkpoint costs what git status costs; the rows with more changed files show the
cost growing with what changed.

    python bench/checkpoints.py [--files 40000] [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanohermes.common.budget import Limits
from nanohermes.turn.checkpoints import Store, skipped_dirs
from nanohermes.tools.search.walk import ignore_dir_names

GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def git(ws: Path, *args: str) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


def generate(ws: Path, files: int, sync: bool = True) -> list[Path]:
    """`files` committed files of 100 to 2,000 bytes, 40 to a folder; returns them."""
    paths = []
    per_dir = 40
    for i in range(files):
        d = ws / "src" / f"pkg{i // (per_dir * 25)}" / f"mod{(i // per_dir) % 25}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        p = d / f"file{i % per_dir}.py"
        p.write_text(f"# file {i}\n" + f"value = {i}\n" * (5 + i % 150))
        paths.append(p)
    (ws / ".gitignore").write_text("build/\n*.log\n")
    git(ws, "init", "-q")
    git(ws, "config", "gc.auto", "0")  # no gc of its own in the background while it is measured
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "generated")
    git(ws, "repack", "-adq")  # packed, as a cloned repository is
    (ws / "build").mkdir()
    for i in range(50):
        (ws / "build" / f"out{i}.o").write_bytes(os.urandom(2000))
    for i in range(20):
        (ws / f"untracked{i}.txt").write_text(f"untracked {i}\n")
    if sync:  # the generated files on disk: their write-back does not fall into the timings
        os.sync()
    return paths


def paired(runs: int, fn: Callable[[], object], yardstick: Callable[[], object],
           before: Callable[[], object] = lambda: None) -> tuple[float, float, float]:
    """Median seconds of `fn` and of `yardstick`, and the median of their per-run ratios: each
    run times the yardstick just before `fn`, so load that changes on a shared machine moves
    both alike."""
    times, bases, ratios = [], [], []
    for _ in range(runs):
        t = time.perf_counter()
        yardstick()
        base = time.perf_counter() - t
        before()
        t = time.perf_counter()
        fn()
        took = time.perf_counter() - t
        times.append(took)
        bases.append(base)
        ratios.append(took / base)
    return statistics.median(times), statistics.median(bases), statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=40_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 200 files, once each")
    args = ap.parse_args()
    if args.quick:
        args.files, args.runs = 200, 1
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        print(f"generating {args.files:,} files ...", flush=True)
        paths = generate(ws, args.files, sync=not args.quick)
        limits = Limits()
        skip = skipped_dirs(ignore_dir_names(None))

        def status() -> None:
            subprocess.run(["git", "status", "--porcelain"], cwd=ws, check=True, capture_output=True)

        status()  # git's own index refreshed once, as it would be in daily use
        rows: list[tuple[str, tuple[float, float, float]]] = []

        def fresh_store() -> None:
            shutil.rmtree(Path(tmp) / "data", ignore_errors=True)

        rows.append(("first scan of a new store", paired(args.runs, lambda: Store(ws, limits, skip, "s1").scan(),
                                                         status, fresh_store)))
        store = Store(ws, limits, skip, "s1")
        store.scan()
        rows.append(("scan, nothing changed", paired(args.runs, store.scan, status)))
        for n in (10, min(1000, len(paths))):
            def touch(n: int = n) -> None:
                for p in paths[:n]:
                    with p.open("a") as f:
                        f.write("# edited\n")

            rows.append((f"scan, {n:,} files changed", paired(args.runs, store.scan, status, touch)))

        def turn() -> None:
            store.scan()
            with paths[7].open("a") as f:
                f.write("# the turn's edit\n")
            store.pin(store.scan().changes, "turn")

        rows.append(("a turn: scan before, one file changed, scan after, kept", paired(args.runs, turn, status)))

        session = [1]

        def next_session() -> Store:
            session[0] += 1
            return Store(ws, limits, skip, f"s{session[0] + 1}")

        rows.append(("a new session's first scan (a -p run)", paired(args.runs, lambda: next_session().scan(),
                                                                      status)))
        print(f"{'':<58} {'seconds':>8}   {'git status':>10} {'ratio':>7}")
        for label, (secs, base, ratio) in rows:
            print(f"{label:<58} {secs:8.3f} s {base:8.3f} s {ratio:6.2f}x")

if __name__ == "__main__":
    main()
