"""What nanohermes says of MCP servers, each message once, with real servers. The other tests
assert decisions and state; rewording a message changes one row here (see
tests/wording_support.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from wording_support import said

from nanohermes.assemble import build_agent
from nanohermes.config import Config
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply

# -- MCP: one session with a real server that crashes and one that cannot start ------------------

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


async def _mcp_session(ws: Path) -> dict[str, str]:
    ui = RecordingUI()
    servers = {"demo": {"command": sys.executable, "args": [DEMO]}, "missing": {"command": "/nonexistent/server"}}
    built = build_agent(Config.from_dict({"mcp": {"servers": servers}, "permission_mode": "goal"}), ws, ui,
                        llm=ScriptedLLM(), save_session=False)
    said: dict[str, str] = {}

    async def one(name: str, **args: object) -> str:
        [msg] = await built.agent.runtime.run_calls([ToolCall(f"c{len(said)}", name, json.dumps(args))])
        return msg.content or ""

    async with built.session():
        said["binary-resource"] = await one("mcp_read_resource", server="demo", uri="blob://bytes")
        said["unknown-server"] = await one("mcp_list_prompts", server="nope")
        said["crashed-in-a-call"] = await one("mcp__demo__crash")
        for _ in range(500):  # the exit code follows the closed connection
            if "code 3" in built.mcp_lines()[0]:
                break
            await asyncio.sleep(0.02)
        said["not-connected"] = await one("mcp__demo__echo", text="x")
        said["status-failed"], said["status-not-started"] = built.mcp_lines()
        said["failed-to-start"], said["stopped"] = [n.text for n in ui.of(Notice) if n.level == "warning"]
        said["stopped-told-to-the-model"] = built.agent.full_prompt().split("## MCP server demo\n")[1]
    return said


@pytest.fixture(scope="module")
def mcp_said(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return asyncio.run(_mcp_session(tmp_path_factory.mktemp("ws")))


GONE = "the connection closed (the server exited or dropped it)"
MISSING = "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/server'"
MCP: list[tuple[str, str]] = [
    ("binary-resource", "[resource blob://bytes] [binary data application/octet-stream, 4 bytes; not shown as text]"),
    ("unknown-server", "ERROR: unknown MCP server `nope`; configured: demo, missing"),
    ("crashed-in-a-call", "ERROR: mcp__demo__crash failed: MCP server demo closed the connection; it is not "
                          "available for the rest of this session (restart nanohermes to reconnect)"),
    # {any}: the end of the server's stderr, when it wrote any
    ("not-connected", f"ERROR: MCP server demo is not connected (failed: {GONE}{{any}}; the server exited with code 3); "
                      "fix its config (see /mcp) and restart nanohermes, or work without it"),
    ("status-failed", f"demo: failed, 14 tools (stdio {sys.executable} {DEMO}) — {GONE}{{any}}; the server exited with "
                      "code 3"),
    ("status-not-started", f"missing: failed, 0 tools (stdio /nonexistent/server) — {MISSING}"),
    ("failed-to-start", f"MCP server missing failed to start: {MISSING}; continuing without it"),
    ("stopped", f"MCP server demo stopped ({GONE}{{any}}); its tools are unavailable for the rest of this session (see /mcp, "
                "restart nanohermes to reconnect)"),
    ("stopped-told-to-the-model", f"This server stopped during the session ({GONE}). Its tools (mcp__demo__*) now "
                                  "fail at once: do not call them; work without them, and tell the person if the "
                                  "task needs them."),
]


@pytest.mark.parametrize("key,text", MCP, ids=[k for k, _ in MCP])
def test_mcp_says(mcp_said: dict[str, str], key: str, text: str) -> None:
    assert said(mcp_said[key], text), mcp_said[key]


def test_mcp_without_servers_says_where_to_configure_them(workspace: Path) -> None:
    built = build_agent(Config(), workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    assert built.mcp_lines() == ["no MCP servers configured (config key mcp.servers)"]


def test_tool_search_says(workspace: Path) -> None:
    from test_tool_search import MANY, build

    built, _ = build(workspace, {"many": {"command": sys.executable, "args": [MANY, "--count", "40"]}}, max_tools=30)

    async def go() -> list[str]:
        async with built.session():
            out = await built.agent.runtime.run_calls([
                ToolCall("a", "tool_search", json.dumps({"query": "zebra"})),
                ToolCall("b", "tool_search", json.dumps({"query": "select:mcp__many__nope"}))])
            return [str(m.content) for m in out]

    assert asyncio.run(go()) == [
        "ERROR: no MCP tool matches 'zebra'; try other words (a server's name matches all of its tools)",
        "ERROR: no MCP tool named mcp__many__nope; search by words to find the names"]


def test_a_server_growing_and_asking_the_person_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    demo = {"command": sys.executable, "args": [DEMO]}
    server.add(tool_reply(call("mcp__demo__grow", {"name": "fresh"}, id="g")), Reply(text="done"))
    ran = turn("-p", "grow", "--yes", "--verbose", server=server, config={"mcpServers": {"demo": demo}})
    assert [line for line in ran.err.splitlines() if "now offers" in line] == [
        "nanohermes: MCP server demo now offers 15 tools (new: mcp__demo__fresh)"]
    server.add(tool_reply(call("mcp__demo__ask", {}, id="a")), Reply(text="done"))
    turn("-p", "order", "--yes", server=server, config={"mcpServers": {"demo": demo}})
    [asked] = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert asked == (
        'decline: null\n\n[MCP server demo asked the person for input ("Place your order"); nanohermes declined, as '
        "nobody is there to answer in this run. If you need that input, ask for it in your answer.]")
