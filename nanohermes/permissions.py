"""Who may run what: modes, tool lists, rules, and `decide()` -> allow | ask | deny.

Pure functions over plain values, table-tested. The same matcher filters the tool specs the
model sees (`visible`) and checks every call at run time (`decide`), because a model can
replay a tool name from history after the mode changed.

Check order: mode block list, then `disallowed_tools`, then `allowed_tools` (when non-empty,
only those), then deny rules, then plan-mode read-only check, then ask/allow rules and the
tool's own approval level.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Literal

Decision = Literal["allow", "ask", "deny"]

WRITE_TOOLS = frozenset({"write_file", "edit_file", "apply_patch"})
MODE_BLOCKS: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "accept-edits": frozenset(),
    "plan": WRITE_TOOLS | {"run_command", "git_commit"},
    "debug": WRITE_TOOLS | {"git_commit"},
    "goal": frozenset(),
}

_RULE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(frozen=True)
class Rule:
    tool: str  # a tool name, or an MCP prefix such as mcp__server
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = _RULE.match(text)
        if not m:
            raise ValueError(f"malformed permission rule {text!r}; expected `tool` or `tool(pattern)`")
        pattern = m.group(2)
        return cls(m.group(1), pattern.strip() if pattern is not None else None)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def names(self, tool_name: str) -> bool:
        """Does the rule name this tool? `mcp__srv` names every tool of that server."""
        return tool_name == self.tool or (self.tool.startswith("mcp__") and tool_name.startswith(self.tool + "__"))

    def matches(self, tool_name: str, subject: str | None) -> bool:
        if not self.names(tool_name):
            return False
        if self.pattern is None:
            return True
        return subject is not None and fnmatch.fnmatchcase(subject, self.pattern)


def names_tool(rules: list[str] | tuple[str, ...], tool_name: str) -> bool:
    """Whether a plain list of tool names / rules (allowed_tools, disallowed_tools) names the tool."""
    for text in rules:
        try:
            if Rule.parse(text).names(tool_name):
                return True
        except ValueError:
            continue
    return False


@dataclass(frozen=True, kw_only=True)
class Policy:
    mode: str = "default"
    auto_approve: bool = False
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str = ""


def blocked(policy: Policy, tool_name: str) -> str | None:
    """Why a tool is hidden from the model and refused outright, or None."""
    if tool_name in MODE_BLOCKS.get(policy.mode, frozenset()):
        return f"{tool_name} is not available in {policy.mode} mode"
    if names_tool(policy.disallowed_tools, tool_name):
        return f"{tool_name} is disallowed by config (disallowed_tools)"
    if policy.allowed_tools and not names_tool(policy.allowed_tools, tool_name):
        return f"{tool_name} is not in allowed_tools"
    for rule in policy.deny:
        if rule.pattern is None and rule.names(tool_name):
            return f"{tool_name} is denied by rule {rule}"
    return None


def visible(policy: Policy, tool_name: str) -> bool:
    return blocked(policy, tool_name) is None


def decide(
    policy: Policy,
    *,
    tool_name: str,
    approval: str,
    read_only: bool,
    subject: str | None = None,
    protected: bool = False,
) -> Verdict:
    """allow | ask | deny for one call. `approval` is the tool's own level: never, edit, always."""
    if why := blocked(policy, tool_name):
        return Verdict("deny", why)
    for rule in policy.deny:
        if rule.matches(tool_name, subject):
            return Verdict("deny", f"denied by rule {rule}")
    if policy.mode == "plan" and not read_only and approval != "never":
        return Verdict("deny", f"{tool_name} changes things and plan mode is read-only")
    if protected:
        if policy.mode in ("plan", "debug"):
            return Verdict("deny", f"protected path: refused in {policy.mode} mode")
        if policy.mode == "goal" or policy.auto_approve:
            return Verdict("allow")
        return Verdict("ask", "writes a protected path")
    if policy.mode == "goal" or policy.auto_approve:
        return Verdict("allow")
    for rule in policy.ask:
        if rule.matches(tool_name, subject):
            return Verdict("ask", f"rule {rule} asks")
    for rule in policy.allow:
        if rule.matches(tool_name, subject):
            return Verdict("allow")
    if approval == "never" or (approval == "edit" and policy.mode == "accept-edits"):
        return Verdict("allow")
    return Verdict("ask", "edits a file" if approval == "edit" else "needs approval")
