"""What a request offers within `max_tools`: the MCP servers' tools deferred behind `tool_search`.

An endpoint takes a bounded number of functions in one request (OpenAI's chat completions:
128, the `max_tools` config key), and every tool's spec is sent with every request. When the
tools offered would pass `max_tools`, or the MCP tools' specs `mcp_tool_specs_chars`, the MCP
servers' tools are deferred, as Claude Code's MCP tool search does: the model is offered the
built-ins, `tool_search` (`tools.toolsearch`, loaded only with MCP servers), and the MCP tools
it has loaded with it (most recent first, as many as fit). No request carries more than
`max_tools` functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nanohermes.common.budget import Limits
from nanohermes.tools.base import Tool

SEARCH = "tool_search"  # the tool that finds and loads the deferred ones
# The MCP tools loaded with tool_search, oldest first (session state: they stay loaded).
LOADED = "tool_search.loaded"
_NOTED = "tool_search.noted"  # what the person was last told about deferral


def spec_chars(tool: Tool, limits: Limits) -> int:
    return len(json.dumps(tool.spec(limits), ensure_ascii=False))


def offered(tools: list[Tool], state: dict[str, Any], max_tools: int, limits: Limits,
            notice: Callable[[str], None] = lambda text: None) -> list[Tool]:
    """The tools a request offers, in pool order, never more than `max_tools`: all of them when
    they fit; else the tools that are not an MCP server's, `tool_search`, and the loaded MCP
    tools that fit beside them. `notice` tells the person when what is deferred changes."""
    search = next((t for t in tools if t.name == SEARCH), None)
    rest = [t for t in tools if t.name != SEARCH]
    deferrable = [t for t in rest if t.kind == "mcp"]
    size = sum(spec_chars(t, limits) for t in deferrable)
    if len(rest) <= max_tools and size <= limits.mcp_tool_specs_chars:
        _note(state, notice, "")
        return rest
    core = [t for t in rest if t.kind != "mcp"]
    if search is None or len(core) + 1 > max_tools:  # nothing to defer behind, or no room even for the search
        kept_core = core[:max_tools]
        _note(state, notice, f"{len(rest) - len(kept_core)} of {len(rest)} tools are not offered: the endpoint "
                             f"takes {max_tools} functions (max_tools)")
        return kept_core
    loaded = {t.name: t for t in deferrable}
    room, budget = max_tools - len(core) - 1, limits.mcp_tool_specs_chars
    kept: set[str] = set()
    for name in reversed(state.get(LOADED, [])):  # the most recently loaded first
        tool = loaded.get(name)
        if tool is None or len(kept) >= room:
            continue
        cost = spec_chars(tool, limits)
        if cost <= budget:
            kept.add(name)
            budget -= cost
    why = (f"more than the {max_tools} functions the endpoint takes (max_tools)" if len(rest) > max_tools
           else f"{size} chars of specs, more than mcp_tool_specs_chars ({limits.mcp_tool_specs_chars})")
    _note(state, notice, f"{len(deferrable)} MCP tools ({why}) are not listed to the model: it finds them with "
                         f"tool_search")
    out: list[Tool] = []
    for t in rest:
        if t.kind == "mcp" and search not in out:
            out.append(search)
        if t.kind != "mcp" or t.name in kept:
            out.append(t)
    return out if search in out else [*out, search]


def _note(state: dict[str, Any], notice: Callable[[str], None], text: str) -> None:
    if state.get(_NOTED, "") != text:
        state[_NOTED] = text
        if text:
            notice(text)
