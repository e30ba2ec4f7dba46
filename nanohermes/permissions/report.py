"""Reporting: the rules in force and where each came from, for /permissions."""

from __future__ import annotations

from collections.abc import Iterable

from nanohermes.permissions.commands import READ_ONLY_COMMANDS
from nanohermes.permissions.decision import Policy
from nanohermes.permissions.rules import MODE_BLOCKED_EFFECTS, Effect

# -- reporting -----------------------------------------------------------------------------

def describe(policy: Policy, tools: Iterable[tuple[str, Effect]] = ()) -> list[str]:
    """The rules in force and where each came from, one line each (for /permissions).
    `tools` are the (name, effect) of the pool, for what the mode blocks."""
    lines = [f"mode: {policy.mode}" + ("  (--yes: every call that would ask is approved; file writes stay inside the "
                                       "workspace, protected paths refused)" if policy.auto_approve else "")]
    if policy.skip_permissions:
        lines.append("--dangerously-skip-permissions: every call runs as if you approved it, protected writes too, "
                     "commands outside the sandbox; deny rules and mode blocks still apply")
    pool = tools
    blocked_effects = MODE_BLOCKED_EFFECTS.get(policy.mode, frozenset())
    blocked_tools = sorted({n for n, e in pool if e in blocked_effects})
    if blocked_tools:
        lines.append(f"blocked by the mode: {', '.join(blocked_tools)}")
    if policy.allowed_tools:
        lines.append(f"allowed_tools (only these): {', '.join(policy.allowed_tools)}")
    if policy.disallowed_tools:
        lines.append(f"disallowed_tools: {', '.join(policy.disallowed_tools)}")
    for kind, rules in (("deny", policy.deny), ("ask", policy.ask), ("allow", policy.allow)):
        for rule in rules:
            lines.append(f"{kind:<5}  {rule}  — {rule.origin or 'config'}")
    if not (policy.deny or policy.ask or policy.allow):
        lines.append("no allow/ask/deny rules")
    lines.append("built-in: read-only commands run without asking (" + ", ".join(sorted(READ_ONLY_COMMANDS)[:12])
                 + ", ...; with their risky options checked)")
    lines.append("commands the analysis cannot follow exactly (eval, exec, brace expansion, computed names, ...) are "
                 "asked every time" + ("; with deny rules, --yes and goal mode refuse them"
                                       if any(r.names("run_command") for r in policy.deny) else ""))
    if not policy.is_sandboxed():
        lines.append("no OS sandbox: only built-in read-only commands written as plain words run without asking; "
                     "allow and learned rules ask, and --yes / goal mode run commands unconfined")
    if policy.secret_files:
        lines.append(f"secret files, asked before reading: {', '.join(policy.secret_files)}")
    return lines
