"""`decide()`: allow | ask | deny for one call, as an ordered list of named steps (`STEPS`;
a command line goes through its own, `lines.LINE_STEPS`), the first that gives a verdict
deciding; and the read rules' verdict on what a path call reads (`read_verdict`)."""

from __future__ import annotations

from dataclasses import dataclass

from nanohermes.guard.hosts import host_matches
from nanohermes.common.modes import Mode
from nanohermes.guard.permissions.policy import (
    Basis, Policy, Step, Verdict, blocked, blocked_by, protected_verdict, unasked, unattended,
)
from nanohermes.guard.permissions.reading import ReadRules, read_rules
from nanohermes.guard.permissions.rules import Decision, Rule, Target, escape_pattern, is_secret
from nanohermes.guard.secrets import holds_own_secret, own_secret


def decide(policy: Policy, *, tool_name: str, approval: str, target: Target) -> Verdict:
    """allow | ask | deny for one call. `approval` is the tool's own level: never, edit, always.

    `target` is what the call touches, already resolved by the caller (see `Target`): its
    subjects are what rule patterns are matched against, its kind says how."""
    if target.kind == "command" and target.subjects:
        # a command line's steps, the shell analysis and the catalogue: at the first command
        # judged (a turn that reads and writes files never needs them)
        from nanohermes.guard.permissions.lines import decide_line

        return decide_line(policy, tool_name, target)
    call = call_of(policy, tool_name, approval, target)
    return next(v for step in STEPS if (v := step(call)) is not None)


@dataclass(frozen=True)
class Call:
    """A call (not a command line) being decided, with the facts its steps share (`call_of`
    works them out)."""

    policy: Policy
    tool: str
    approval: str  # the tool's own level: never, edit, always
    target: Target
    reading: Verdict | None  # the read rules' deny or ask verdict on what it reads
    # The basis it runs on when allowed: a tool that needs no approval runs on that basis
    # whatever else would allow it.
    natural: Basis
    # The secret files among what it shows of (a reader's subjects, an edit's, whose errors
    # quote the file), and whether an allow rule covers it (a secret file needs one naming it).
    secrets: list[str]
    named: bool


def call_of(policy: Policy, tool_name: str, approval: str, target: Target) -> Call:
    """The call with the facts its steps share."""
    natural: Basis = ("read-only" if target.read_only else "tool") if approval == "never" else "rule"
    secrets = secret_subjects(policy, target)
    # A secret file needs a rule that names it: `read_file` alone does not cover .env.
    named = any(_hits(r, tool_name, target, every=True) and not (secrets and r.pattern is None) for r in policy.allow)
    return Call(policy, tool_name, approval, target, read_verdict(policy, tool_name, target), natural, secrets, named)


def _mode_blocks(call: Call) -> Verdict | None:
    """What the mode, the tool lists or a rule naming the whole tool refuse outright."""
    why = blocked(call.policy, call.tool, call.target.effect)
    return Verdict("deny", why, denied_by=blocked_by(call.policy, call.target.effect)) if why else None


def _deny_rules(call: Call) -> Verdict | None:
    return _rule_verdict(call.policy.deny, call.tool, call.target, call.reading, "deny")


def _plan(call: Call) -> Verdict | None:
    if call.policy.mode == Mode.PLAN and call.target.effect in ("write", "run") and call.approval != "never":
        return Verdict("deny", f"{call.tool} changes things and plan mode is read-only", denied_by="plan")
    return None


def _protected_writes(call: Call) -> Verdict | None:
    return protected_verdict(call.policy, call.target.protected) if call.target.protected else None


UNATTENDED_READ = ("nobody is asked in an unattended run (--yes, goal mode, auto_approve), and the sandbox withholds "
                   "it from every command, so it is not shown: run without them to be asked")
UNATTENDED_SECRET = ("nobody is asked in an unattended run (--yes, goal mode, auto_approve), and the sandbox withholds "
                     "it from every command, so it is not shown: run without them to be asked, or allow it by a rule "
                     "that names it: ")


def _unattended_run(call: Call) -> Verdict | None:
    """Nobody is asked: what would be asked runs, but what the sandbox withholds from every
    command is not shown by a file tool either (a path a read rule asks about, a secret file no
    allow rule names), unless everything is allowed (--dangerously-skip-permissions)."""
    policy = call.policy
    if not unattended(policy):
        return None
    if not policy.skip_permissions and call.reading is not None and call.reading.decision == "ask":
        return Verdict("deny", f"{call.reading.reason} before a file is read; {UNATTENDED_READ}", denied_by="unattended")
    if not policy.skip_permissions and call.secrets and not call.named:
        first = call.secrets[0]
        return Verdict("deny", f"{first} {_secret_what(policy, first)}; {UNATTENDED_SECRET}"
                               f"{call.tool}({escape_pattern(first)})", denied_by="unattended")
    return Verdict("allow", basis=unasked(policy) if call.natural == "rule" else call.natural)


def _ask_rules(call: Call) -> Verdict | None:
    return _rule_verdict(call.policy.ask, call.tool, call.target, call.reading, "ask")


def _allow_rules(call: Call) -> Verdict | None:
    return Verdict("allow", basis=call.natural) if call.named else None


def _secret_files(call: Call) -> Verdict | None:
    if not call.secrets:
        return None
    first = call.secrets[0]
    return Verdict("ask", f"{first} {_secret_what(call.policy, first)}",
                   tuple(Rule(call.tool, escape_pattern(s)) for s in dict.fromkeys(call.secrets)))


def _secret_what(policy: Policy, subject: str) -> str:
    return ("holds nanohermes's own files (its config, sessions, memory)" if not is_secret(subject, policy.secret_files)
            else "is on the secret-file list (permissions.secret_files)")


def _new_hosts(call: Call) -> Verdict | None:
    t = call.target
    if t.kind == "host" and t.subjects and call.policy.mode in (Mode.DEFAULT, Mode.ACCEPT_EDITS):
        return Verdict("ask", f"fetches from {t.subjects[0]}, a host no rule allows yet",
                       (Rule(call.tool, "domain:" + escape_pattern(t.subjects[0])),))
    return None


def _own_approval(call: Call) -> Verdict:
    if call.approval == "never":
        return Verdict("allow", basis=call.natural)
    if call.approval == "edit" and call.policy.mode == Mode.ACCEPT_EDITS:
        return Verdict("allow", basis="mode")
    return Verdict("ask", "edits a file" if call.approval == "edit" else "needs approval")


# A call's steps, in order: the first that gives a verdict decides. A command line has its own
# (`lines.LINE_STEPS`).
STEPS: tuple[Step[Call], ...] = (
    _mode_blocks, _deny_rules, _plan, _protected_writes, _unattended_run, _ask_rules, _allow_rules, _secret_files,
    _new_hosts, _own_approval,
)


def _hits(rule: Rule, tool_name: str, target: Target, *, every: bool) -> bool:
    """Does a rule cover the call's subjects? Deny and ask rules need one subject (`every`
    False), allow rules all of them, aliases included; a host is also known by the addresses
    it resolves to, which count for denials only."""
    if not rule.names(tool_name):
        return False
    if rule.pattern is None:
        return True
    if target.kind == "host" and rule.pattern.startswith("domain:"):
        pat = rule.pattern[len("domain:"):]
        if not every and any(host_matches(a, (), pat, by_address=False) for a in target.addresses):
            return True
    subjects = (*target.subjects, *target.aliases)
    if not subjects:
        return False
    test = all if every else any
    return test(rule.matches(tool_name, s, target.kind) for s in subjects)


def _rule_verdict(rules: tuple[Rule, ...], tool_name: str, target: Target, reading: Verdict | None,
                  decision: Decision) -> Verdict | None:
    """The deny (or ask) verdict of the first of `rules` that covers a subject of the call,
    else the read rules' verdict of that kind (`reading`), else None."""
    for rule in rules:
        if _hits(rule, tool_name, target, every=False):
            return Verdict("deny", f"denied by rule {rule}") if decision == "deny" else \
                Verdict("ask", f"rule {rule} asks", None)
    return reading if reading is not None and reading.decision == decision else None


def policy_read_rules(policy: Policy, tool_name: str = "read_file") -> ReadRules:
    """The policy's deny and ask rules that cover `tool_name` reading a path (see `permissions.reading`)."""
    return read_rules(policy.deny, policy.ask, tool_name)


def read_verdict(policy: Policy, tool_name: str, target: Target) -> Verdict | None:
    """The deny or ask verdict of a read rule covering what a path call reads, or None: for a
    tool that reads (its effect) or whose output may quote the file (`shows_contents`: an
    edit's near misses), every subject and alias, and the folders above them."""
    if target.kind != "path" or not (target.read_only or target.shows_contents):
        return None
    rules = policy_read_rules(policy, tool_name)
    if not rules:
        return None
    hits = [h for s in (*target.subjects, *target.aliases) if (h := rules.covering(s)) is not None]
    decision, rule = next((h for h in hits if h[0] == "deny"), hits[0] if hits else ("allow", None))
    if rule is None:
        return None
    return Verdict("deny", f"denied by rule {rule}") if decision == "deny" else Verdict("ask", f"rule {rule} asks", None)


def secret_subjects(policy: Policy, target: Target) -> list[str]:
    """The secret files (the list, nanohermes's own) among what a path call shows of: a reader's
    subjects, and an edit's, whose errors quote the file where the edit does not match."""
    if target.kind != "path" or not target.shows_contents:
        return []
    return [s for s in (*target.subjects, *target.aliases) if _secret_subject(policy, s)]


def reading_asked(policy: Policy, tool_name: str, target: Target) -> bool:
    """Does showing what this path call reads need a person's yes (a read rule that asks, a
    secret file)? Then nothing of the file may reach the model before the answer: not even the
    error of the tool's own check, which quotes the file where an edit does not match."""
    return bool(secret_subjects(policy, target)) or read_verdict(policy, tool_name, target) is not None


def _secret_subject(policy: Policy, subject: str) -> bool:
    """A path reader's subject on the secret list: by its name, or as (or holding, for a
    folder read whole) one of nanohermes's own secret paths. Subjects outside the workspace
    are absolute real paths."""
    if is_secret(subject, policy.secret_files):
        return True
    if not policy.own_secrets or not subject.startswith("/"):
        return False
    if any(subject == r or subject.startswith(r.rstrip("/") + "/") for r in policy.own_readable):
        return False
    return bool(own_secret(subject, policy.own_secrets)) or holds_own_secret(subject, policy.own_secrets)
