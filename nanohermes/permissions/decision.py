"""The decision: `Policy`, `Verdict`, what a mode or tool list blocks (`blocked`, `visible`)
and `decide()` for one call, commands judged simple command by simple command."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from nanohermes.commands import (
    code_from_stdin, is_read_only, prints_files, reads_secret, unanalysable, uncertain_word,
)
from nanohermes.hosts import host_matches
from nanohermes.modes import Mode
from nanohermes.permissions.commands import allow_matches, could_match, deny_matches, rule_text, suggest_command_rule
from nanohermes.permissions.reading import ReadRules, read_rules
from nanohermes.permissions.rules import (
    DEFAULT_SECRET_FILES, MODE_BLOCKED_EFFECTS, Decision, Effect, Rule, Target, escape_pattern, is_secret, literal_pattern,
    match_command_text, names_tool,
)
from nanohermes.secrets import holds_own_secret, own_secret
from nanohermes.shellparse import ParseError, SimpleCommand, split

# -- the decision --------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Policy:
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


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str = ""
    # For "ask": the rules an "always" answer should remember (empty: the tool's own
    # suggestion). None: nothing can be remembered, this call is asked every time.
    suggest: tuple[Rule, ...] | None = ()
    basis: Basis = "rule"  # for "allow": why (see Basis)


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


def visible(policy: Policy, tool_name: str, effect: Effect = "run") -> bool:
    return blocked(policy, tool_name, effect) is None


def _unattended(policy: Policy) -> bool:
    return policy.mode == Mode.GOAL or policy.auto_approve or policy.skip_permissions


def unattended(policy: Policy) -> bool:
    """Nobody is asked (goal mode, --yes): facts that only lead to a question need no look."""
    return _unattended(policy)


def _unasked(policy: Policy) -> Basis:
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


def _protected(policy: Policy, why: str, *, command: bool = False) -> Verdict:
    """A protected write: asked of a person. An unattended run has nobody to ask: a command
    runs in the sandbox, which keeps those paths read-only (or, with the sandbox off, with the
    full rights the person chose), a file tool's write is refused."""
    if policy.mode in (Mode.PLAN, Mode.DEBUG):
        return Verdict("deny", f"protected path: refused in {policy.mode} mode ({why})")
    if policy.skip_permissions:
        return Verdict("allow", basis="bypass")
    if _unattended(policy):
        if command:
            return Verdict("allow", basis="unattended")
        return Verdict("deny", f"{protected_reason(why)}; {UNATTENDED}")
    return Verdict("ask", protected_reason(why), None)


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


def decide(policy: Policy, *, tool_name: str, approval: str, target: Target) -> Verdict:
    """allow | ask | deny for one call. `approval` is the tool's own level: never, edit, always.

    `target` is what the call touches, already resolved by the caller (see `Target`): its
    subjects are what rule patterns are matched against, its kind says how."""
    if why := blocked(policy, tool_name, target.effect):
        return Verdict("deny", why)
    if target.kind == "command" and target.subjects:
        return _decide_command(policy, tool_name, target.subjects[0], target.protected,
                               target.secret_read, target.rule_read)
    reading = read_verdict(policy, tool_name, target)
    if (denied := _rule_verdict(policy.deny, tool_name, target, reading, "deny")) is not None:
        return denied
    if policy.mode == Mode.PLAN and target.effect in ("write", "run") and approval != "never":
        return Verdict("deny", f"{tool_name} changes things and plan mode is read-only")
    if target.protected:
        return _protected(policy, target.protected)
    # A tool that needs no approval runs on that basis whatever else would allow it.
    natural: Basis = ("read-only" if target.read_only else "tool") if approval == "never" else "rule"
    if _unattended(policy):
        return Verdict("allow", basis=_unasked(policy) if natural == "rule" else natural)
    if (asked := _rule_verdict(policy.ask, tool_name, target, reading, "ask")) is not None:
        return asked
    secrets = [s for s in (*target.subjects, *target.aliases) if _secret_subject(policy, s)] \
        if target.kind == "path" and target.read_only and target.shows_contents else []
    for rule in policy.allow:
        # A secret file needs a rule that names it: `read_file` alone does not cover .env.
        if _hits(rule, tool_name, target, every=True) and not (secrets and rule.pattern is None):
            return Verdict("allow", basis=natural)
    if secrets:
        what = ("holds nanohermes's own files (its config, sessions, memory)" if not is_secret(
            secrets[0], policy.secret_files) else "is on the secret-file list (permissions.secret_files)")
        return Verdict("ask", f"{secrets[0]} {what}",
                       tuple(Rule(tool_name, escape_pattern(s)) for s in dict.fromkeys(secrets)))
    if target.kind == "host" and target.subjects and policy.mode in (Mode.DEFAULT, Mode.ACCEPT_EDITS):
        host = target.subjects[0]
        return Verdict("ask", f"fetches from {host}, a host no rule allows yet",
                       (Rule(tool_name, "domain:" + escape_pattern(host)),))
    if approval == "never":
        return Verdict("allow", basis=natural)
    if approval == "edit" and policy.mode == Mode.ACCEPT_EDITS:
        return Verdict("allow", basis="mode")
    return Verdict("ask", "edits a file" if approval == "edit" else "needs approval")


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


UNANALYSABLE_HELP = ("write it as plain simple commands with every word spelled out (no eval, exec, brace "
                     "expansion, computed names or arithmetic on variables), or leave it for a person to approve")


def _decide_command(policy: Policy, tool_name: str, command: str, protected: str, secret: str = "",
                    ruled: tuple[str, str, str] | tuple[()] = ()) -> Verdict:
    try:
        commands: list[SimpleCommand] | None = split(command)
        problem = ""
    except ParseError as e:
        commands, problem = None, str(e)
    denies = [r for r in policy.deny if r.names(tool_name)]
    if (denied := _command_denied(denies, command, commands, ruled)) is not None:
        return denied
    if policy.mode == Mode.PLAN:
        return Verdict("deny", f"{tool_name} changes things and plan mode is read-only")
    if commands is not None:
        problem = next((why for c in commands if (why := unanalysable(c))), "")
    maybe = next((r for r in denies if any(could_match(r, c) for c in commands or ())), None)
    if _unattended(policy) and denies and problem:
        # Nobody will be asked, and the deny rules cannot see inside this line.
        return Verdict("deny", f"the command cannot be analysed ({problem}) and deny rules apply to {tool_name}; "
                               f"unattended runs refuse it: {UNANALYSABLE_HELP}")
    if _unattended(policy) and maybe is not None:
        return Verdict("deny", f"the command could match deny rule {maybe} once its globs, expansions or appended "
                               "arguments are known; unattended runs refuse it: spell those words out")
    if protected:
        return _protected(policy, protected, command=True)
    if _unattended(policy):
        return Verdict("allow", basis="read-only" if _all_read_only(policy, commands, secret) else _unasked(policy))
    if ruled:  # an ask rule on reading: asked every time, as nothing learned could be narrower
        return Verdict("ask", f"the command reads {ruled[1]}, and rule {ruled[2]} asks", None)
    if problem:
        for rule in policy.ask:
            if rule.names(tool_name):
                return Verdict("ask", f"rule {rule} asks", None)
        return Verdict("ask", f"the command cannot be analysed ({problem}), so it is asked every time", None)
    assert commands is not None
    if maybe is not None:
        return Verdict("ask", f"the command could match deny rule {maybe} once its globs, expansions or appended "
                              "arguments are known", None)
    reasons: list[str] = []
    suggest: list[Rule] = []
    remember = True
    readers = [c for c in commands if _reads_files(c)] or commands
    for cmd in commands:
        why, learn = _check_simple(policy, tool_name, cmd, secret if cmd in readers else "")
        if why:
            reasons.append(why)
            if learn is None:
                remember = False
            elif learn not in suggest:
                suggest.append(learn)
    if reasons:
        return Verdict("ask", "; ".join(reasons), tuple(suggest) if remember else None)
    if not policy.is_sandboxed() and not (_plain_words(command, commands) and all(is_read_only(c) for c in commands)):
        return Verdict("ask", "there is no OS sandbox on this system, so only the built-in read-only commands "
                              "written as plain words run without asking", None)
    if _all_read_only(policy, commands, secret):
        return Verdict("allow", basis="read-only")
    return Verdict("allow", basis="mode" if policy.mode == Mode.ACCEPT_EDITS and not any(
        _allowed_by_rule(policy, tool_name, c) for c in commands) else "rule")


def _command_denied(denies: list[Rule], command: str, commands: list[SimpleCommand] | None,
                    ruled: tuple[str, str, str] | tuple[()]) -> Verdict | None:
    """A deny rule that meets the line (each physical line that can be analysed, when the
    whole cannot), or a read rule denying a path it would print; else None."""
    seen = commands if commands is not None else _line_by_line(command)
    for rule in denies:
        if rule.pattern is None or match_command_text(rule.pattern, command.strip()) \
                or any(deny_matches(rule, c) for c in seen):
            return Verdict("deny", f"denied by rule {rule}")
    if ruled and ruled[0] == "deny":
        return Verdict("deny", f"the command reads {ruled[1]}, which rule {ruled[2]} denies")
    return None


def _all_read_only(policy: Policy, commands: list[SimpleCommand] | None, secret: str) -> bool:
    """Would the line run with no rule at all: every simple command a built-in read-only one
    that writes nothing and reads no secret file? Then it runs in the read-only sandbox."""
    return bool(commands) and not secret and all(
        not unanalysable(c) and is_read_only(c) and not c.writes and not reads_secret(c, policy.secret_files)
        for c in commands or ())


def _allowed_by_rule(policy: Policy, tool_name: str, cmd: SimpleCommand) -> bool:
    return any(r.names(tool_name) and (r.pattern is None or allow_matches(r, cmd)) for r in policy.allow)


def _line_by_line(command: str) -> list[SimpleCommand]:
    """For deny rules only, when the whole line cannot be analysed: the commands of each
    physical line that can be (a line bash reads as text, not commands, only adds refusals)."""
    out: list[SimpleCommand] = []
    for line in command.splitlines():
        try:
            out += split(line)
        except ParseError:
            continue
    return out


def read_only_line(command: str, *, plain: bool = False) -> bool:
    """Is every simple command of the line a built-in read-only one with checked arguments,
    analysable, writing nothing? With `plain`, also one command of words and quotes only
    (what may run unasked where there is no OS sandbox)."""
    try:
        commands = split(command)
    except ParseError:
        return False
    if not commands or any(unanalysable(c) or c.writes or not is_read_only(c) for c in commands):
        return False
    return not plain or _plain_words(command, commands)


def _reads_files(cmd: SimpleCommand) -> bool:
    return (bool(cmd.words) and prints_files(posixpath.basename(cmd.name))) \
        or any(r.op in ("<", "<>") for r in cmd.redirects)


def _plain_words(command: str, commands: list[SimpleCommand]) -> bool:
    """One simple command of words and quotes, and nothing else: no operators,
    redirections, assignments, wrappers, expansions or globs."""
    if len(commands) != 1:
        return False
    [cmd] = commands
    if cmd.assigns or cmd.redirects or cmd.wrappers or not cmd.words \
            or any(uncertain_word(w) or w.tilde or w.splits for w in cmd.words):
        return False
    pattern = r"\s*" + r"[ \t]+".join(re.escape(w.raw) for w in cmd.words) + r"\s*"
    return re.fullmatch(pattern, command) is not None


def _check_simple(policy: Policy, tool_name: str, cmd: SimpleCommand, found_secret: str = "") -> tuple[str, Rule | None]:
    """("", None) when this simple command may run; else why not, and the rule to learn."""
    shown = rule_text(cmd, full=True, raw=True) or "(empty command)"
    for rule in policy.ask:
        if rule.names(tool_name) and (deny_matches(rule, cmd) or could_match(rule, cmd)):
            return f"rule {rule} asks for `{shown}`", None
    secret = reads_secret(cmd, policy.secret_files) or bool(found_secret)
    by_rule = None
    for rule in policy.allow:
        # A secret read needs a rule that spells the line out (what an "always" to the secret
        # question learns): `run_command(cat *)` is no consent to `cat .env`.
        if rule.names(tool_name) and ((rule.pattern is None and not secret) or (rule.pattern and allow_matches(rule, cmd)
                                      and not (secret and not literal_pattern(rule.pattern)))):
            by_rule = rule
            break
    if by_rule is None and not (is_read_only(cmd) and not secret):
        if secret:
            what = found_secret or "a file on the secret-file list"
            return f"`{shown}` reads {what} (permissions.secret_files)", Rule(tool_name, escape_pattern(shown))
        if code_from_stdin(cmd):
            return f"`{shown}` runs a program read from standard input, so it is asked every time", None
        return f"`{shown}` is not allowed by a rule", suggest_command_rule(cmd, tool_name)
    if cmd.writes and policy.mode != Mode.ACCEPT_EDITS:
        # A read-only allow does not cover writing a file; a rule must spell the redirection.
        full = rule_text(cmd, full=True, raw=True)
        covered = by_rule is not None and (by_rule.pattern is None or ((">" in by_rule.pattern or cmd.operands_written)
                                                                       and match_command_text(by_rule.pattern, full)))
        if not covered:
            return f"`{shown}` writes {', '.join(cmd.writes)}", Rule(tool_name, escape_pattern(full))
    return "", None
