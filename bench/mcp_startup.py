"""MCP startup and call cost: servers start concurrently, and a call is a small round trip.

Starts 1 and then N copies of the test suite's demo server (stdio, the SDK's server API) the
way a session does, and prints the wall time of each start side by side with the ratio: about
1.0 means N servers cost what one does (they start at once); N would mean one after another.
Each server's start is mostly Python importing the SDK, so with fewer cores than servers the
ratio also shows the cores' share (on 2 cores, 4 servers give about 1.7).
Then times 200 sequential `echo` calls through the tool runtime against the one-server
baseline of a direct SDK call, so the runtime's own overhead per call shows as a ratio.

    python bench/mcp_startup.py [--servers 4] [--calls 200] [--quick]
"""

from __future__ import annotations

import argparse
import os
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanohermes.assemble import build_agent
from nanohermes.config import Config
from nanohermes.common.events import NullUI
from nanohermes.common.messages import ToolCall
from nanohermes.testing import ScriptedLLM

DEMO = str(Path(__file__).resolve().parent.parent / "tests" / "mcp" / "demo_server.py")


def built_with(n: int, workspace: Path):  # type: ignore[no-untyped-def]
    servers = {f"s{i}": {"command": sys.executable, "args": [DEMO]} for i in range(n)}
    cfg = Config.from_dict({"mcp": {"servers": servers}, "permission_mode": "goal"})
    return build_agent(cfg, workspace, NullUI(), llm=ScriptedLLM(), save_session=False)


async def start_time(n: int, workspace: Path) -> float:
    built = built_with(n, workspace)
    t = time.perf_counter()
    await built.start()
    elapsed = time.perf_counter() - t
    connected = sum(s.status == "connected" for s in built.mcp.servers.values())
    await built.aclose()
    assert connected == n, built.mcp_lines()
    return elapsed


async def call_times(calls: int, workspace: Path) -> tuple[float, float]:
    """Median seconds per call: through the runtime, and straight through the SDK client."""
    built = built_with(1, workspace)
    async with built.session():
        runtime = built.agent.runtime
        via_runtime: list[float] = []
        for i in range(calls):
            t = time.perf_counter()
            await runtime.run_calls([ToolCall(f"c{i}", "mcp__s0__echo", '{"text": "x"}')])
            via_runtime.append(time.perf_counter() - t)
        client = built.mcp.servers["s0"].client
        direct: list[float] = []
        for _ in range(calls):
            t = time.perf_counter()
            await client.call_tool("echo", {"text": "x"})
            direct.append(time.perf_counter() - t)
    return statistics.median(via_runtime), statistics.median(direct)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="a smoke run: each start once with 2 servers, 5 calls")
    args = ap.parse_args()
    if args.quick:
        args.servers, args.calls = 2, 5
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        os.environ["XDG_STATE_HOME"] = tmp  # the servers' stderr logs go here, not into the real home
        many = asyncio.run(start_time(args.servers, ws))
        one = many if args.quick else asyncio.run(start_time(1, ws))
        print(f"startup: 1 server {one:.2f}s, {args.servers} servers {many:.2f}s, ratio {many / one:.2f} "
              f"(1.0 = fully concurrent, {args.servers}.0 = one after another)")
        runtime, direct = asyncio.run(call_times(args.calls, ws))
        print(f"echo call: through the runtime {runtime * 1000:.2f} ms, direct SDK call {direct * 1000:.2f} ms, "
              f"ratio {runtime / direct:.2f} (median of {args.calls})")


if __name__ == "__main__":
    main()
