"""File tool speed, each against the obvious baseline, printed as ratios (no assertions).

    python bench/files.py

- the edit diff: nanohermes's unified_diff (common head and tail skipped) vs difflib.unified_diff,
  for a one-line change in a 50,000-line file;
- read_file's window near the end of a 40 MB log vs reading the file whole and splitting it.
"""

from __future__ import annotations

import asyncio
import difflib
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanohermes.budget import Limits
from nanohermes.config import Config
from nanohermes.tools import ToolContext
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
    old = "".join(f"    value_{i} = compute({i})\n" for i in range(50_000))
    new = old.replace("value_25000 = compute(25000)", "value_25000 = compute(0)")
    ours = best_of(lambda: unified_diff(old, new, "a/f", "b/f"))
    base = best_of(lambda: "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/f", "b/f")), 3)
    print(f"edit diff, 50,000 lines, 1 changed: {ours * 1e3:.1f} ms vs difflib {base * 1e3:.1f} ms -> {base / ours:.1f}x faster")

    with tempfile.TemporaryDirectory() as d:
        ws = Path(d)
        line = "2024-05-01T10:00:00 INFO request served in 12ms by worker 7\n"
        (ws / "app.log").write_text(line * (40_000_000 // len(line)))
        tool, ctx = ReadFile(), ToolContext(workspace=ws, limits=Limits(), config=Config())
        args = tool.parse({"path": "app.log", "offset": 600_000, "limit": 100})
        ours = best_of(lambda: asyncio.run(tool.run(args, ctx)), 3)

        def naive() -> str:
            lines = (ws / "app.log").read_text().splitlines()
            return "\n".join(lines[599_999:600_099])

        base = best_of(naive, 3)
        mem_ours = peak_bytes(lambda: tool._read(args, ctx))
        mem_base = peak_bytes(naive)
        print(f"read_file window at line 600,000 of a 40 MB log: {ours * 1e3:.0f} ms vs whole read {base * 1e3:.0f} ms "
              f"({base / ours:.1f}x); peak memory {mem_ours / 1e6:.1f} MB vs {mem_base / 1e6:.1f} MB "
              f"({mem_base / max(mem_ours, 1):.0f}x less)")


if __name__ == "__main__":
    main()
