"""More tools than a request may carry: MCP tools found with `tool_search`.

An endpoint takes a bounded number of functions in one request (OpenAI's chat completions:
128, the `max_tools` config key), and every tool's spec is sent with every request. When the
tools offered would pass `max_tools`, or the MCP tools' specs `mcp_tool_specs_chars`, the MCP
servers' tools are deferred, as Claude Code's MCP tool search does: the model is offered the
built-ins, `tool_search`, and the MCP tools it has loaded with it (most recent first, as many
as fit). A deferred tool still runs when called by name (its permissions are checked as ever);
it is only not listed. No request carries more than `max_tools` functions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nanohermes.common.budget import Limits
from nanohermes.guard.permissions import Effect
from nanohermes.tools.base import Attempt, Approval, Params, Tool, ToolContext, ToolError, about

# The MCP tools loaded with tool_search, oldest first (session state: they stay loaded).
LOADED = "tool_search.loaded"
_NOTED = "tool_search.noted"  # what the person was last told about deferral
_WORD = re.compile(r"[a-z0-9]+")


def spec_chars(tool: Tool, limits: Limits) -> int:
    return len(json.dumps(tool.spec(limits), ensure_ascii=False))


def offered(tools: list[Tool], state: dict[str, Any], max_tools: int, limits: Limits,
            notice: Callable[[str], None] = lambda text: None) -> list[Tool]:
    """The tools a request offers, in pool order, never more than `max_tools`: all of them when
    they fit; else the tools that are not an MCP server's, `tool_search`, and the loaded MCP
    tools that fit beside them. `notice` tells the person when what is deferred changes."""
    search = next((t for t in tools if t.name == ToolSearch.name), None)
    rest = [t for t in tools if t.name != ToolSearch.name]
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


@dataclass(frozen=True, kw_only=True)
class ToolSearchParams(Params):
    query: str = field(metadata=about("Words describing the tool you need (matched against the names and "
                                      "descriptions of the MCP servers' tools), or `select:name1,name2` to load tools "
                                      "by their exact names."))
    limit: int | None = field(default=None, metadata=about(ge=1, shown_default=10))

    non_empty: ClassVar[dict[str, str]] = {"query": "describe the tool you need, e.g. `github issues`"}


@dataclass(frozen=True, kw_only=True)
class ToolSearch(Tool[ToolSearchParams]):
    """Finds and loads deferred MCP tools. `candidates` gives every MCP server tool there is."""

    name: ClassVar[str] = "tool_search"
    group: ClassVar[str] = "mcp"
    source: ClassVar[str] = "mcp"
    description: ClassVar[str] = (
        "Find the tools of the connected MCP servers that are not listed to you (there are more than one request "
        "may carry). Returns the best matches, up to {tool_search_results}, each with its name and what it does, "
        "and loads them: call them by name from your next step on. Search before saying a tool is missing."
    )
    params: ClassVar[type[Params]] = ToolSearchParams
    approval: ClassVar[Approval] = "never"  # it only chooses what the model is shown
    effect: ClassVar[Effect] = "state"
    limit_defaults: ClassVar[dict[str, str]] = {"limit": "tool_search_results"}
    candidates: Callable[[], list[Tool]] = field(repr=False, compare=False)

    def summary(self, args: ToolSearchParams) -> str:
        return args.query[:200]

    async def run(self, args: ToolSearchParams, ctx: ToolContext, attempt: Attempt) -> str:
        tools = self.candidates()
        if not tools:
            raise ToolError("no MCP server tool is available (see /mcp)")
        limit = min(args.limit or ctx.limits.tool_search_results, ctx.limits.tool_search_results)
        if args.query.strip().startswith("select:"):
            wanted = [n.strip() for n in args.query.strip()[len("select:"):].split(",") if n.strip()]
            by_name = {t.name: t for t in tools}
            if unknown := [n for n in wanted if n not in by_name]:
                raise ToolError(f"no MCP tool named {', '.join(unknown)}; search by words to find the names")
            found = [by_name[n] for n in wanted]
        else:
            found = _ranked(args.query, tools)
            if not found:
                raise ToolError(f"no MCP tool matches {args.query!r}; try other words (a server's name matches all "
                                f"of its tools)")
        shown = found[:limit]
        loaded: list[str] = ctx.state.setdefault(LOADED, [])
        for t in shown:
            if t.name in loaded:
                loaded.remove(t.name)
            loaded.append(t.name)
        lines = [f"{t.name}: {_first_line(t.describe(ctx.limits))}" for t in shown]
        lines.append(f"loaded {len(shown)} tool{'s' if len(shown) != 1 else ''}: call them by name from your next "
                     f"step on")
        if len(found) > len(shown):
            lines.append(f"… {len(found) - len(shown)} more matching tools not shown (limit tool_search_results: "
                         f"{limit}); narrow the query to see others")
        return "\n".join(lines)


def _ranked(query: str, tools: list[Tool]) -> list[Tool]:
    """Tools with any of the query's words in their name or description, most words first
    (a word in the name counts twice), then by name."""
    words = set(_WORD.findall(query.lower()))
    scored: list[tuple[int, str, Tool]] = []
    for t in tools:
        name = set(_WORD.findall(t.name.lower().replace("_", " ")))
        text = set(_WORD.findall(t.description.lower()))
        score = sum(2 * (w in name) + (w in text) for w in words)
        if score:
            scored.append((-score, t.name, t))
    return [t for _, _, t in sorted(scored, key=lambda x: (x[0], x[1]))]


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"
