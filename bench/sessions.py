"""Transcript overhead as a session grows: a 500-turn scripted session against the fake server.

Each turn is a prompt, one tool round (read_file) and an answer, so the history and the
transcript grow all the way (the session budget compacts the history now and then, as in real
use). The time spent writing the transcript (appends, usage records, the end-of-turn fsync) is
measured per turn; the medians of the first and last 50 turns are printed side by side. A flat
ratio (about 1.0) means writing stays O(1) per message however long the session is.

    python bench/sessions.py [--turns 500] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanohermes.assemble import build_agent
from nanohermes.turn.compact import SUMMARY_INSTRUCTIONS
from nanohermes.config import Config
from nanohermes.common.events import NullUI
from nanohermes.turn.session import Transcript
from nanohermes.testing import FakeServer, Reply, call, tool_reply


class TimedTranscript(Transcript):
    """The real transcript, with the time spent in its writing methods added up."""

    writing: float = 0.0  # appends, each flushed to the OS
    syncing: float = 0.0  # the end-of-turn fsync (disk-bound, noisy on a shared machine)

    def _write(self, obj: dict[str, Any]) -> None:
        t = time.perf_counter()
        super()._write(obj)
        TimedTranscript.writing += time.perf_counter() - t

    def sync(self) -> None:
        t = time.perf_counter()
        super().sync()
        TimedTranscript.syncing += time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 4 turns")
    args = ap.parse_args()
    turns = 4 if args.quick else args.turns
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "notes.txt").write_text("".join(f"line {i}: " + "n" * 60 + "\n" for i in range(12)))
        step = {"n": 0}

        def script(body: dict[str, Any]) -> Reply:
            if body["messages"][0]["content"] == SUMMARY_INSTRUCTIONS:
                return Reply(text="Goal: read notes.txt each turn. Files touched: notes.txt.")
            step["n"] += 1
            return tool_reply(call("read_file", {"path": "notes.txt"})) if step["n"] % 2 else Reply(text="read " * 20)

        with FakeServer(default=script) as server:  # type: ignore[arg-type]
            config = Config(model="fake-model", base_url=server.base_url, api_key="k", max_retries=0)
            agent = build_agent(config, ws, NullUI()).agent
            transcript = agent.session.transcript
            assert transcript is not None
            transcript.__class__ = TimedTranscript  # same object, timed methods
            writes: list[float] = []
            syncs: list[float] = []

            async def session() -> None:
                for n in range(turns):
                    w, s = TimedTranscript.writing, TimedTranscript.syncing
                    await agent.ask(f"turn {n}: read notes.txt again")
                    writes.append(TimedTranscript.writing - w)
                    syncs.append(TimedTranscript.syncing - s)

            started = time.perf_counter()
            asyncio.run(session())
            wall = time.perf_counter() - started
            transcript.close()
            size = transcript.path.stat().st_size
    k = min(50, turns // 2)
    print(f"{turns} turns in {wall:.1f}s; transcript {size / 1024:.0f} KiB, {len(server.requests)} requests")
    print(f"{'per turn, median, microseconds':<34}{'first ' + str(k):>12}{'last ' + str(k):>12}{'ratio':>8}")
    for label, xs in (("appends (written and flushed)", writes), ("end-of-turn fsync", syncs),
                      ("total", [a + b for a, b in zip(writes, syncs, strict=True)])):
        first, last = statistics.median(xs[:k]) * 1e6, statistics.median(xs[-k:]) * 1e6
        print(f"{label:<34}{first:>12.1f}{last:>12.1f}{last / first:>8.2f}")


if __name__ == "__main__":
    main()
