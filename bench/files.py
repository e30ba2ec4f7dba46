"""File tool speed, each against the obvious baseline, printed as ratios (no assertions).

    python bench/files.py [--quick]

- the edit diff: nanohermes's unified_diff (common head and tail skipped) vs difflib.unified_diff,
  for a one-line change in a 50,000-line file;
- read_file's window near the end of a 40 MB log vs reading the file whole and splitting it.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.tools import Attempt, ToolContext
from nanohermes.tools.files import ReadFile
from nanohermes.tools.fileops import unified_diff


def best_of(fn: Callable[[], object], n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def peak_bytes(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: a tenth of the sizes, once each")
    quick = ap.parse_args().quick
    scale, n = (10, 1) if quick else (1, 5)
    lines, at = 50_000 // scale, 25_000 // scale
    old = "".join(f"    value_{i} = compute({i})\n" for i in range(lines))
    new = old.replace(f"value_{at} = compute({at})", f"value_{at} = compute(0)")
    ours = best_of(lambda: unified_diff(old, new, "a/f", "b/f"), n)
    base = best_of(lambda: "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/f", "b/f")),
                   min(n, 3))
    print(f"edit diff, {lines:,} lines, 1 changed: {ours * 1e3:.1f} ms vs difflib {base * 1e3:.1f} ms -> "
          f"{base / ours:.1f}x faster")

    with tempfile.TemporaryDirectory() as d:
        ws = Path(d)
        line = "2024-05-01T10:00:00 INFO request served in 12ms by worker 7\n"
        (ws / "app.log").write_text(line * (40_000_000 // scale // len(line)))
        offset = 600_000 // scale
        tool, ctx = ReadFile(), ToolContext(workspace=ws, limits=Limits(), config=Config())
        args = tool.parse({"path": "app.log", "offset": offset, "limit": 100})
        ours = best_of(lambda: asyncio.run(tool.run(args, ctx, Attempt())), min(n, 3))

        def naive() -> str:
            lines = (ws / "app.log").read_text().splitlines()
            return "\n".join(lines[offset - 1:offset + 99])

        base = best_of(naive, min(n, 3))
        mem_ours = peak_bytes(lambda: asyncio.run(tool.run(args, ctx, Attempt())))
        mem_base = peak_bytes(naive)
        print(f"read_file window at line {offset:,} of a {40 // scale} MB log: {ours * 1e3:.0f} ms vs whole read "
              f"{base * 1e3:.0f} ms ({base / ours:.1f}x); peak memory {mem_ours / 1e6:.1f} MB vs {mem_base / 1e6:.1f} MB "
              f"({mem_base / max(mem_ours, 1):.0f}x less)")


if __name__ == "__main__":
    main()
