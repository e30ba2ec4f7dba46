"""What a decision is made from and what it gives: the `Policy` (mode, tool lists, rules,
secret files, sandbox), the `Verdict` and the `Basis` it allows on; what a mode or a tool
list blocks (`blocked`, `visible`); and what every kind of call shares: whether anybody is
asked (`unattended`), and the verdict on a protected write (`protected_verdict`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from nanohermes.common.modes import Mode
from nanohermes.guard.permissions.rules import DEFAULT_SECRET_FILES, MODE_BLOCKED_EFFECTS, Decision, Effect, Rule, names_tool


@dataclass(frozen=True, kw_only=True)
class Policy:
    """What the session's mode, tool lists and rules say, for `decide` to judge calls by."""

    mode: Mode = Mode.DEFAULT
    auto_approve: bool = False
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    secret_files: tuple[str, ...] = DEFAULT_SECRET_FILES
    # Real paths of nanohermes's own secret files and folders (`secrets.own_paths`), and the
    # ones inside them this session may read anyway (its own saved tool results).
    own_secrets: tuple[str, ...] = ()
    own_readable: tuple[str, ...] = ()
    # False where the OS sandbox is unavailable: then no command runs unasked but the
    # argument-checked built-in read-only ones written as plain words (allow rules and
    # learned rules ask); --yes and goal mode still approve, as the person chose. It may be
    # the check that tells instead (the sandbox probe starts processes): asked the first time
    # a decision needs it, so a session that never runs a command never pays for it. Read it
    # through `is_sandboxed`.
    sandboxed: bool | Callable[[], bool] = True
    # --dangerously-skip-permissions: every call that would ask runs as if a person said yes
    # (protected writes too, and commands outside the sandbox); deny rules and mode blocks hold.
    skip_permissions: bool = False

    def is_sandboxed(self) -> bool:
        return self.sandboxed() if callable(self.sandboxed) else self.sandboxed


# Why a call may run without a person's yes, as far as the rules know (the gate adds "person"
# for a yes at the prompt): "read-only" every command is a built-in read-only one, or the tool
# only reads; "tool" the tool needs no approval (it changes only nanohermes's own state);
# "rule" an allow rule (configured, learned, saved in the project); "mode" accept-edits lets a
# workspace edit through; "unattended" --yes, goal mode or auto_approve; "hook" a PreToolUse
# hook answered the question; "bypass" --dangerously-skip-permissions. The gate confines by
# it: read-only for "read-only" and "tool", none for "bypass" (as for a person's yes),
# workspace-write for the rest.
Basis = Literal["person", "read-only", "tool", "rule", "mode", "unattended", "hook", "bypass"]


# Why a call is refused, as far as the rules know (the gate adds "hook" for a PreToolUse
# hook's no, "person" for a person's, "error" for a call that cannot be judged or can only
# fail): "rule" a deny rule, a read rule or the config's tool lists; "mode" the mode blocks
# what the tool does; "plan" plan mode changes nothing; "protected" a protected path that may
# not be written here; "unattended" nobody is asked, and only a question could let it run.
Denial = Literal["rule", "mode", "plan", "protected", "unattended", "hook", "person", "error"]


@dataclass(frozen=True)
class Verdict:
    """What `decide` says of a call: allow, ask or deny, why, and on what basis."""

    decision: Decision
    reason: str = ""
    # For "ask": the rules an "always" answer should remember (empty: the tool's own
    # suggestion). None: nothing can be remembered, this call is asked every time.
    suggest: tuple[Rule, ...] | None = ()
    basis: Basis = "rule"  # for "allow": why (see Basis)
    denied_by: Denial = "rule"  # for "deny": by what (see Denial)


def blocked(policy: Policy, tool_name: str, effect: Effect = "run") -> str | None:
    """Why a tool is hidden from the model and refused outright, or None. `effect` is what
    the tool declares it does; the worst case when unknown."""
    if effect in MODE_BLOCKED_EFFECTS.get(policy.mode, frozenset()):
        return f"{tool_name} is not available in {policy.mode} mode"
    if names_tool(policy.disallowed_tools, tool_name):
        return f"{tool_name} is disallowed by config (disallowed_tools)"
    if policy.allowed_tools and not names_tool(policy.allowed_tools, tool_name):
        return f"{tool_name} is not in allowed_tools"
    for rule in policy.deny:
        if rule.pattern is None and rule.names(tool_name):
            return f"{tool_name} is denied by rule {rule}"
    return None


def blocked_by(policy: Policy, effect: Effect) -> Denial:
    """What `blocked` refused a tool by: the mode, or a rule (the config's tool lists too)."""
    return "mode" if effect in MODE_BLOCKED_EFFECTS.get(policy.mode, frozenset()) else "rule"


def visible(policy: Policy, tool_name: str, effect: Effect = "run") -> bool:
    return blocked(policy, tool_name, effect) is None


def unattended(policy: Policy) -> bool:
    """Nobody is asked (goal mode, --yes): facts that only lead to a question need no look."""
    return policy.mode == Mode.GOAL or policy.auto_approve or policy.skip_permissions


def unasked(policy: Policy) -> Basis:
    """The basis of what an unattended run approves: --dangerously-skip-permissions's own."""
    return "bypass" if policy.skip_permissions else "unattended"


# Protected: outside the workspace, git's metadata and hooks, or a file that configures
# nanohermes or runs when it starts; the reason goes on to say which.
PROTECTED = "writes a protected path"
UNATTENDED = ("nobody is asked in an unattended run (--yes, goal mode, auto_approve), so it is refused: run without "
              "them to be asked, or with --dangerously-skip-permissions to allow everything")


def protected_reason(why: str) -> str:
    """What a protected write's question or refusal says: which path, and why it is protected."""
    return f"{PROTECTED}: {why}"


def protected_verdict(policy: Policy, why: str, *, command: bool = False) -> Verdict:
    """A protected write: asked of a person. An unattended run has nobody to ask: a command
    runs in the sandbox, which keeps those paths read-only (or, with the sandbox off, with the
    full rights the person chose), a file tool's write is refused."""
    if policy.mode in (Mode.PLAN, Mode.DEBUG):
        return Verdict("deny", f"protected path: refused in {policy.mode} mode ({why})", denied_by="protected")
    if policy.skip_permissions:
        return Verdict("allow", basis="bypass")
    if unattended(policy):
        if command:
            return Verdict("allow", basis="unattended")
        return Verdict("deny", f"{protected_reason(why)}; {UNATTENDED}", denied_by="protected")
    return Verdict("ask", protected_reason(why), None)


_Decided = TypeVar("_Decided")
# One step of a decision: its verdict on the call, or None to leave the call to the next step.
Step = Callable[[_Decided], "Verdict | None"]
