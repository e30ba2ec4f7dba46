"""Reporting: the rules in force and where each came from, for /permissions."""

from __future__ import annotations

from collections.abc import Iterable

from nanohermes.guard.commands import CATALOGUE
from nanohermes.guard.permissions.policy import Policy
from nanohermes.guard.permissions.rules import MODE_BLOCKED_EFFECTS, Effect

# -- reporting -----------------------------------------------------------------------------

def describe(policy: Policy, tools: Iterable[tuple[str, Effect]] = ()) -> list[str]:
    """The rules in force and where each came from, one line each (for /permissions).
    `tools` are the (name, effect) of the pool, for what the mode blocks."""
    return [*_mode(policy, tools), *_rules(policy), *_built_in(policy)]


def _mode(policy: Policy, tools: Iterable[tuple[str, Effect]]) -> list[str]:
    """The mode, and what it blocks of the pool."""
    lines = [f"mode: {policy.mode}" + ("  (--yes: every call that would ask is approved; file writes stay inside the "
                                       "workspace, protected paths refused)" if policy.auto_approve else "")]
    if policy.skip_permissions:
        lines.append("--dangerously-skip-permissions: every call runs as if you approved it, protected writes too, "
                     "commands outside the sandbox; deny rules and mode blocks still apply")
    blocked_effects = MODE_BLOCKED_EFFECTS.get(policy.mode, frozenset())
    blocked_tools = sorted({n for n, e in tools if e in blocked_effects})
    if blocked_tools:
        lines.append(f"blocked by the mode: {', '.join(blocked_tools)}")
    return lines


def _rules(policy: Policy) -> list[str]:
    """The tool lists and the rules, each with where it came from."""
    lines: list[str] = []
    if policy.allowed_tools:
        lines.append(f"allowed_tools (only these): {', '.join(policy.allowed_tools)}")
    if policy.disallowed_tools:
        lines.append(f"disallowed_tools: {', '.join(policy.disallowed_tools)}")
    for kind, rules in (("deny", policy.deny), ("ask", policy.ask), ("allow", policy.allow)):
        for rule in rules:
            lines.append(f"{kind:<5}  {rule}  — {rule.origin or 'config'}")
    if not (policy.deny or policy.ask or policy.allow):
        lines.append("no allow/ask/deny rules")
    return lines


def _built_in(policy: Policy) -> list[str]:
    """What holds without any rule: the read-only commands of the catalogue, the commands
    asked every time, the missing sandbox, the secret files."""
    read_only = sorted(name for name, entry in CATALOGUE.items() if entry.read_only)
    lines = ["built-in: read-only commands run without asking (" + ", ".join(read_only[:12])
             + ", ...; with their risky options checked)",
             "commands the analysis cannot follow exactly (eval, exec, brace expansion, computed names, ...) are "
             "asked every time" + ("; with deny rules, --yes and goal mode refuse them"
                                   if any(r.names("run_command") for r in policy.deny) else "")]
    if not policy.is_sandboxed():
        lines.append("no OS sandbox: only built-in read-only commands written as plain words run without asking; "
                     "allow and learned rules ask, and --yes / goal mode run commands unconfined")
    if policy.secret_files:
        lines.append(f"secret files, asked before reading: {', '.join(policy.secret_files)}")
    return lines
