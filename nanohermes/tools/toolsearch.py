"""More tools than a request may carry: MCP tools found with `tool_search`.

Which tools a request offers, and when the MCP servers' tools are deferred behind this one, is
`tools.offering`'s. `tool_search` finds deferred tools by words or names and loads them: the
model calls them by name from its next step on. A deferred tool still runs when called by name
(its permissions are checked as ever); it is only not listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from nanohermes.guard.permissions import Effect
from nanohermes.tools.base import Attempt, Approval, Params, Tool, ToolContext, ToolError, about
from nanohermes.tools.offering import LOADED, SEARCH

_WORD = re.compile(r"[a-z0-9]+")


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

    name: ClassVar[str] = SEARCH
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
