"""More MCP tools than a request may carry: deferred behind tool_search. A real 200-tool
server (SDK-written) against a fake endpoint that refuses more than 128 functions, as
OpenAI's chat completions do: no request may ever carry more."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from nanohermes.assemble import build_agent
from nanohermes.config import Config
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply

MANY = str(Path(__file__).parent / "mcp" / "many_tools.py")
DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


def names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def test_a_200_tool_server_never_sends_more_than_128_functions(turn) -> None:  # type: ignore[no-untyped-def]
    with FakeServer(max_tools=128) as server:
        server.add(tool_reply(call("tool_search", {"query": "weather record 40"}, id="s")),
                   tool_reply(call("mcp__many__lookup_040", {"key": "k"}, id="l")), Reply(text="done"))
        ran = turn("-p", "find the weather", "--yes", "--verbose", server=server,
                  config={"mcpServers": {"many": {"command": sys.executable, "args": [MANY]}}})
        assert server.violations == []
    assert ran.code == 0, ran.err
    first, second, _ = (names(r) for r in server.requests)
    assert max(len(first), len(second)) <= 128
    assert "tool_search" in first and not any(n.startswith("mcp__many__") for n in first)
    found = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}["s"]
    first = found.splitlines()[0]
    assert first.startswith("mcp__many__lookup_040: ") and "weather record number 40" in first
    assert "loaded 10 tools: " in found
    assert "mcp__many__lookup_040" in second and len([n for n in second if n.startswith("mcp__many__")]) == 10
    result = {m["tool_call_id"]: m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"}["l"]
    assert result == "weather #40: k"
    [told] = [line for line in ran.err.splitlines() if "200 MCP tools " in line]
    assert " 128 " in told and "(max_tools)" in told and "tool_search" in told, told


def build(workspace: Path, servers: dict[str, Any], **config: Any) -> tuple[Any, RecordingUI]:
    ui = RecordingUI()
    cfg = Config.from_dict({"mcp": {"servers": servers}, "permission_mode": "goal", **config})
    return build_agent(cfg, workspace, ui, llm=ScriptedLLM(), save_session=False), ui


def test_few_tools_are_all_offered_and_no_search(workspace: Path) -> None:
    built, _ = build(workspace, {"demo": {"command": sys.executable, "args": [DEMO]}})

    async def go() -> list[str]:
        async with built.session():
            return [t.name for t in built.agent.runtime.visible_tools()]

    offered = asyncio.run(go())
    assert "mcp__demo__echo" in offered and "tool_search" not in offered


def test_mcp_tool_specs_chars_lowered_defers_the_tools(workspace: Path) -> None:
    built, ui = build(workspace, {"demo": {"command": sys.executable, "args": [DEMO]}},
                      limits={"mcp_tool_specs_chars": 500})

    async def go() -> tuple[list[str], int]:
        async with built.session():
            rt = built.agent.runtime
            size = sum(len(json.dumps(t.spec(rt.limits))) for t in rt.tools if t.kind == "mcp")
            return [t.name for t in rt.visible_tools()], size

    offered, size = asyncio.run(go())
    assert "tool_search" in offered and not any(n.startswith("mcp__demo__") for n in offered)
    notes = [e.text for e in ui.of(Notice) if "tool_search" in e.text]
    assert notes == [f"14 MCP tools ({size} chars of specs, more than mcp_tool_specs_chars (500)) are not listed to "
                     f"the model: it finds them with tool_search"]


def test_tool_search_results_lowered_shows_and_loads_that_many(workspace: Path) -> None:
    built, _ = build(workspace, {"many": {"command": sys.executable, "args": [MANY, "--count", "40"]}},
                     max_tools=30, limits={"tool_search_results": 3})

    async def go() -> tuple[str, list[str]]:
        async with built.session():
            rt = built.agent.runtime
            out = await rt.run_calls([ToolCall("s", "tool_search", json.dumps({"query": "invoices"}))])
            return str(out[0].content), [t.name for t in rt.visible_tools()]

    text, offered = asyncio.run(go())
    lines = text.splitlines()
    assert [ln.split(":")[0] for ln in lines[:3]] == ["mcp__many__lookup_001", "mcp__many__lookup_009",
                                                      "mcp__many__lookup_017"]
    assert lines[3:] == ["loaded 3 tools: call them by name from your next step on",
                         "… 2 more matching tools not shown (limit tool_search_results: 3); narrow the query to see "
                         "others"]
    assert [n for n in offered if n.startswith("mcp__many__")] == ["mcp__many__lookup_001", "mcp__many__lookup_009",
                                                                   "mcp__many__lookup_017"]
    assert len(offered) <= 30


def test_only_the_most_recently_loaded_tools_that_fit_are_offered(workspace: Path) -> None:
    built, _ = build(workspace, {"many": {"command": sys.executable, "args": [MANY, "--count", "40"]}}, max_tools=28)

    async def go() -> tuple[list[str], str]:
        async with built.session():
            rt = built.agent.runtime
            core = len([t for t in rt.tools if t.kind != "mcp"])  # the built-ins, the helpers, tool_search
            assert core == 26
            await rt.run_calls([ToolCall("a", "tool_search", json.dumps({"query": "select:mcp__many__lookup_005"}))])
            await rt.run_calls([ToolCall("b", "tool_search", json.dumps(
                {"query": "select:mcp__many__lookup_006,mcp__many__lookup_007"}))])
            offered = [t.name for t in rt.visible_tools()]
            # A deferred tool still runs when called by name.
            out = await rt.run_calls([ToolCall("c", "mcp__many__lookup_005", json.dumps({"key": "x"}))])
            return offered, str(out[0].content)

    offered, direct = asyncio.run(go())
    assert len(offered) == 28
    assert [n for n in offered if n.startswith("mcp__many__")] == ["mcp__many__lookup_006", "mcp__many__lookup_007"]
    assert direct == "shipping #5: x"


def test_a_search_that_finds_nothing_says_what_to_do(workspace: Path) -> None:
    built, _ = build(workspace, {"many": {"command": sys.executable, "args": [MANY, "--count", "40"]}}, max_tools=30)

    async def go() -> list[str]:
        async with built.session():
            out = await built.agent.runtime.run_calls([
                ToolCall("a", "tool_search", json.dumps({"query": "zebra"})),
                ToolCall("b", "tool_search", json.dumps({"query": "select:mcp__many__nope"}))])
            return [str(m.content) for m in out]

    unmatched, unnamed = asyncio.run(go())
    assert unmatched.startswith("ERROR: no MCP tool matches 'zebra';")
    assert unnamed.startswith("ERROR: no MCP tool named mcp__many__nope;")
