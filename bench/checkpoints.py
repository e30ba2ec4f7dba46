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
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _versions import default_before, export

REPO = Path(__file__).resolve().parent.parent
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def git(ws: Path, *args: str) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


_PER_DIR = 40


def generated(ws: Path, files: int) -> list[Path]:
    """The paths of the files `generate` writes, in the order it writes them."""
    return [ws / "src" / f"pkg{i // (_PER_DIR * 25)}" / f"mod{(i // _PER_DIR) % 25}" / f"file{i % _PER_DIR}.py"
            for i in range(files)]


def generate(ws: Path, files: int, sync: bool = True) -> list[Path]:
    """`files` committed files of 100 to 2,000 bytes, 40 to a folder; returns them."""
    paths = generated(ws, files)
    for i, p in enumerate(paths):
        if i % _PER_DIR == 0:
            p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# file {i}\n" + f"value = {i}\n" * (5 + i % 150))
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


Row = tuple[str, tuple[float, float, float]]


def measure(ws: Path, data: Path, files: int, runs: int) -> list[Row]:
    """Every row, measured with the nanohermes found first on sys.path; `data`: the store's home."""
    from nanohermes.common.budget import Limits
    from nanohermes.guard.runs_later import startup_files
    from nanohermes.tools.search.walk import ignore_dir_names
    from nanohermes.turn.checkpoints import Store, skipped_dirs

    os.environ["XDG_DATA_HOME"] = str(data)
    paths = generated(ws, files)
    limits = Limits()
    skip = skipped_dirs(ignore_dir_names(None))

    def status() -> None:
        subprocess.run(["git", "status", "--porcelain"], cwd=ws, check=True, capture_output=True)

    status()  # git's own index refreshed once, as it would be in daily use
    rows: list[Row] = []

    def fresh_store() -> None:
        shutil.rmtree(data, ignore_errors=True)

    rows.append(("first scan of a new store", paired(runs, lambda: Store(ws, limits, skip, "s1").scan(),
                                                     status, fresh_store)))
    store = Store(ws, limits, skip, "s1")
    store.scan()
    rows.append(("scan, nothing changed", paired(runs, store.scan, status)))
    for n in (10, min(1000, len(paths))):
        def touch(n: int = n) -> None:
            for p in paths[:n]:
                with p.open("a") as f:
                    f.write("# edited\n")

        rows.append((f"scan, {n:,} files changed", paired(runs, store.scan, status, touch)))

    def turn() -> None:
        store.scan()
        with paths[7].open("a") as f:
            f.write("# the turn's edit\n")
        store.pin(store.scan().changes, "turn")

    rows.append(("a turn: scan before, one file changed, scan after, kept", paired(runs, turn, status)))

    def looked_turn() -> None:
        store.scan()
        startup_files(ws, limits.startup_scan_folders)
        with paths[7].open("a") as f:
            f.write("# the turn's edit\n")
        store.pin(store.scan().changes, "turn")
        startup_files(ws, limits.startup_scan_folders)

    rows.append(("the same with the start-up files' look before and after", paired(runs, looked_turn, status)))

    session = [1]

    def next_session() -> Store:
        session[0] += 1
        return Store(ws, limits, skip, f"s{session[0] + 1}")

    rows.append(("a new session's first scan (a -p run)", paired(runs, lambda: next_session().scan(), status)))
    return rows




def committed_again(ws: Path) -> None:
    """The generated files put back as committed (the rows before edited some), so each
    version's measure starts from the same clean tree; git's own index refreshed once the
    files' times are out of its racy second."""
    git(ws, "checkout", "-q", "--", "src")
    time.sleep(1.1)
    git(ws, "status", "--porcelain")


def run_version(tree: Path, ws: Path, data: Path, files: int, runs: int) -> list[Row]:
    """`measure` in a process of its own, importing nanohermes from `tree`, from a clean tree."""
    committed_again(ws)
    p = subprocess.run([sys.executable, __file__, "--measure", str(tree), "--ws", str(ws), "--data", str(data),
                        "--files", str(files), "--runs", str(runs)], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"measuring {tree} failed:\n{p.stderr[-3000:]}")
    return [(label, (secs, base, ratio)) for label, secs, base, ratio in json.loads(p.stdout)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=40_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="with --before: each version measured this many times")
    ap.add_argument("--before", default=default_before(), help="the version to compare with (default: git "
                    "merge-base HEAD main); 'none' measures this checkout alone")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 200 files, once each, this checkout alone")
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # (internal) a version's tree: measure it, print JSON
    ap.add_argument("--ws", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        sys.path.insert(0, args.measure)
        rows = measure(Path(args.ws), Path(args.data), args.files, args.runs)
        print(json.dumps([(label, *figures) for label, figures in rows]))
        return
    if args.quick:
        args.files, args.runs = 200, 1
    before = None if args.before in (None, "none") or args.quick else args.before
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        print(f"generating {args.files:,} files ...", flush=True)
        generate(ws, args.files, sync=not args.quick)
        if before is None:
            sys.path.insert(0, str(REPO))
            rows = measure(ws, Path(tmp) / "data", args.files, args.runs)
            print(f"{'':<58} {'seconds':>8}   {'git status':>10} {'ratio':>7}")
            for label, (secs, base, ratio) in rows:
                print(f"{label:<58} {secs:8.3f} s {base:8.3f} s {ratio:6.2f}x")
            return
        trees = {"before": export(before, Path(tmp) / "before"), "after": REPO}
        got: dict[str, list[list[Row]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                print(f"round {r + 1}: {name} ...", flush=True)
                got[name].append(run_version(trees[name], ws, Path(tmp) / f"data-{name}-{r}", args.files, args.runs))
        print(f"before: {before[:12]}   after: this checkout ({REPO}); medians of {args.rounds} rounds")
        print(f"{'':<58} {'before':>8} {'after':>8} {'git status':>10} {'after/before':>13}")
        for i, (label, _) in enumerate(got["after"][0]):
            b = statistics.median(rows[i][1][2] for rows in got["before"])
            a = statistics.median(rows[i][1][2] for rows in got["after"])
            base = statistics.median(rows[i][1][1] for side in got.values() for rows in side)
            print(f"{label:<58} {b:7.2f}x {a:7.2f}x {base:8.3f} s {a / b:12.2f}x")


if __name__ == "__main__":
    main()
