"""How a command line is decided: its simple commands (`shellparse.split`), each judged with
the catalogue of commands (`nanohermes.guard.commands`), in the named steps of `LINE_STEPS`; and
whether a line is read-only (`read_only_line`)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from nanohermes.guard.commands import (
    code_from_stdin, is_read_only, prints_files, reads_secret, unanalysable, uncertain_word,
)
from nanohermes.common.modes import Mode
from nanohermes.guard.permissions.commands import allow_matches, could_match, deny_matches, rule_text, suggest_command_rule
from nanohermes.guard.permissions.policy import (
    Policy, Step, Verdict, blocked, blocked_by, protected_verdict, unasked, unattended,
)
from nanohermes.guard.permissions.rules import Rule, Target, escape_pattern, literal_pattern, match_command_text
from nanohermes.guard.shellparse import ParseError, SimpleCommand, split

UNANALYSABLE_HELP = ("write it as plain simple commands with every word spelled out (no eval, exec, brace "
                     "expansion, computed names or arithmetic on variables), or leave it for a person to approve")


@dataclass(frozen=True)
class Line:
    """A command line being decided (`target.subjects[0]`), with the facts its steps share
    (`line_of` works them out)."""

    policy: Policy
    tool: str
    target: Target
    parsed: list[SimpleCommand] | None  # its simple commands; None when it does not parse
    # Why the line cannot be analysed ("" when it can): it does not parse, or a simple
    # command does what the analysis does not model.
    problem: str
    denies: tuple[Rule, ...]  # the deny rules that name the tool
    maybe: Rule | None  # a deny rule that could match once its expansions and appended arguments are known

    @property
    def text(self) -> str:
        return self.target.subjects[0]

    @property
    def commands(self) -> list[SimpleCommand]:
        return self.parsed or []


def line_of(policy: Policy, tool_name: str, target: Target) -> Line:
    """The command line of `target` with the facts its steps share."""
    try:
        parsed: list[SimpleCommand] | None = split(target.subjects[0])
        problem = ""
    except ParseError as e:
        parsed, problem = None, str(e)
    if parsed is not None:
        problem = next((why for c in parsed if (why := unanalysable(c))), "")
    denies = tuple(r for r in policy.deny if r.names(tool_name))
    maybe = next((r for r in denies if any(could_match(r, c) for c in parsed or ())), None)
    return Line(policy, tool_name, target, parsed, problem, denies, maybe)


def _mode_blocks(line: Line) -> Verdict | None:
    """What the mode, the tool lists or a rule naming the whole tool refuse outright."""
    why = blocked(line.policy, line.tool, line.target.effect)
    return Verdict("deny", why, denied_by=blocked_by(line.policy, line.target.effect)) if why else None


def _deny_rules(line: Line) -> Verdict | None:
    """A deny rule that meets the line (each physical line that can be analysed, when the
    whole cannot), or a read rule denying a path it would print."""
    seen = line.parsed if line.parsed is not None else _line_by_line(line.text)
    for rule in line.denies:
        if rule.pattern is None or match_command_text(rule.pattern, line.text.strip()) \
                or any(deny_matches(rule, c) for c in seen):
            return Verdict("deny", f"denied by rule {rule}")
    ruled = line.target.rule_read
    if ruled and ruled[0] == "deny":
        return Verdict("deny", f"the command reads {ruled[1]}, which rule {ruled[2]} denies")
    return None


def _plan(line: Line) -> Verdict | None:
    if line.policy.mode == Mode.PLAN:
        return Verdict("deny", f"{line.tool} changes things and plan mode is read-only", denied_by="plan")
    return None


def _unseen_by_deny_rules(line: Line) -> Verdict | None:
    """Nobody will be asked, and the deny rules cannot see inside this line."""
    if unattended(line.policy) and line.denies and line.problem:
        return Verdict("deny", f"the command cannot be analysed ({line.problem}) and deny rules apply to {line.tool}; "
                               f"unattended runs refuse it: {UNANALYSABLE_HELP}", denied_by="unattended")
    return None


def _maybe_denied_unattended(line: Line) -> Verdict | None:
    if unattended(line.policy) and line.maybe is not None:
        return Verdict("deny", f"the command could match deny rule {line.maybe} once its globs, expansions or "
                               "appended arguments are known; unattended runs refuse it: spell those words out",
                       denied_by="unattended")
    return None


def _protected_writes(line: Line) -> Verdict | None:
    return protected_verdict(line.policy, line.target.protected, command=True) if line.target.protected else None


def _unattended_run(line: Line) -> Verdict | None:
    if not unattended(line.policy):
        return None
    return Verdict("allow", basis="read-only" if _all_read_only(line) else unasked(line.policy))


def _read_rule_asks(line: Line) -> Verdict | None:
    """An ask rule on reading a path the line prints: asked every time, as nothing learned could be narrower."""
    ruled = line.target.rule_read
    return Verdict("ask", f"the command reads {ruled[1]}, and rule {ruled[2]} asks", None) if ruled else None


def _unanalysable(line: Line) -> Verdict | None:
    if not line.problem:
        return None
    rule = next((r for r in line.policy.ask if r.names(line.tool)), None)
    if rule is not None:
        return Verdict("ask", f"rule {rule} asks", None)
    return Verdict("ask", f"the command cannot be analysed ({line.problem}), so it is asked every time", None)


def _maybe_denied(line: Line) -> Verdict | None:
    if line.maybe is not None:
        return Verdict("ask", f"the command could match deny rule {line.maybe} once its globs, expansions or appended "
                              "arguments are known", None)
    return None


def _each_command(line: Line) -> Verdict | None:
    """Each simple command on its own (ask rules, secret files, allow rules, writes): why the
    ones that may not run are asked, and the rules "always" would learn (none when one of
    them can never be learned)."""
    reasons: list[str] = []
    suggest: list[Rule] = []
    remember = True
    readers = [c for c in line.commands if _reads_files(c)] or line.commands
    for cmd in line.commands:
        why, learn = check_simple(line.policy, line.tool, cmd, line.target.secret_read if cmd in readers else "")
        if why:
            reasons.append(why)
            if learn is None:
                remember = False
            elif learn not in suggest:
                suggest.append(learn)
    return Verdict("ask", "; ".join(reasons), tuple(suggest) if remember else None) if reasons else None


def _no_sandbox(line: Line) -> Verdict | None:
    if line.policy.is_sandboxed() or (_plain_words(line.text, line.commands)
                                      and all(is_read_only(c) for c in line.commands)):
        return None
    return Verdict("ask", "there is no OS sandbox on this system, so only the built-in read-only commands "
                          "written as plain words run without asking", None)


def _read_only(line: Line) -> Verdict | None:
    return Verdict("allow", basis="read-only") if _all_read_only(line) else None


def _allowed(line: Line) -> Verdict:
    """What is left runs: on a rule, or on accept-edits when no rule allows any of its commands."""
    on_mode = line.policy.mode == Mode.ACCEPT_EDITS and not any(
        _allowed_by_rule(line.policy, line.tool, c) for c in line.commands)
    return Verdict("allow", basis="mode" if on_mode else "rule")


# The command line's steps, in order: the first that gives a verdict decides.
LINE_STEPS: tuple[Step[Line], ...] = (
    _mode_blocks, _deny_rules, _plan, _unseen_by_deny_rules, _maybe_denied_unattended, _protected_writes,
    _unattended_run, _read_rule_asks, _unanalysable, _maybe_denied, _each_command, _no_sandbox, _read_only, _allowed,
)


def decide_line(policy: Policy, tool_name: str, target: Target) -> Verdict:
    """allow | ask | deny for a command line (the target's first subject)."""
    line = line_of(policy, tool_name, target)
    return next(v for step in LINE_STEPS if (v := step(line)) is not None)


# -- one simple command -------------------------------------------------------------------

def check_simple(policy: Policy, tool_name: str, cmd: SimpleCommand, found_secret: str = "") -> tuple[str, Rule | None]:
    """("", None) when this simple command may run; else why not, and the rule to learn."""
    shown = rule_text(cmd, full=True, raw=True) or "(empty command)"
    asking = next((r for r in policy.ask if r.names(tool_name) and (deny_matches(r, cmd) or could_match(r, cmd))),
                  None)
    if asking is not None:
        return f"rule {asking} asks for `{shown}`", None
    secret = reads_secret(cmd, policy.secret_files) or bool(found_secret)
    by_rule = _allowing_rule(policy, tool_name, cmd, secret)
    if by_rule is None and not (is_read_only(cmd) and not secret):
        return _not_allowed(tool_name, cmd, shown, secret, found_secret)
    if cmd.writes and policy.mode != Mode.ACCEPT_EDITS and not _covers_writes(by_rule, cmd):
        # A read-only allow does not cover writing a file; a rule must spell the redirection.
        full = rule_text(cmd, full=True, raw=True)
        return f"`{shown}` writes {', '.join(cmd.writes)}", Rule(tool_name, escape_pattern(full))
    return "", None


def _allowing_rule(policy: Policy, tool_name: str, cmd: SimpleCommand, secret: bool) -> Rule | None:
    """The first allow rule that covers the command. A secret read needs a rule that spells
    the line out (what an "always" to the secret question learns): `run_command(cat *)` is no
    consent to `cat .env`."""
    for rule in policy.allow:
        if not rule.names(tool_name):
            continue
        if rule.pattern is None and not secret:
            return rule
        if rule.pattern and allow_matches(rule, cmd) and not (secret and not literal_pattern(rule.pattern)):
            return rule
    return None


def _not_allowed(tool_name: str, cmd: SimpleCommand, shown: str, secret: bool, found_secret: str
                 ) -> tuple[str, Rule | None]:
    """Why a command no rule allows is asked, and the rule "always" would learn (None: asked every time)."""
    if secret:
        what = found_secret or "a file on the secret-file list"
        return f"`{shown}` reads {what} (permissions.secret_files)", Rule(tool_name, escape_pattern(shown))
    if code_from_stdin(cmd):
        return f"`{shown}` runs a program read from standard input, so it is asked every time", None
    return f"`{shown}` is not allowed by a rule", suggest_command_rule(cmd, tool_name)


def _covers_writes(rule: Rule | None, cmd: SimpleCommand) -> bool:
    """Does the rule that allows the command cover the files it writes: a rule for the whole
    tool, or one that matches the line with its redirections (or a tee's files)?"""
    if rule is None or rule.pattern is None:
        return rule is not None
    full = rule_text(cmd, full=True, raw=True)
    return (">" in rule.pattern or cmd.operands_written) and match_command_text(rule.pattern, full)


def _all_read_only(line: Line) -> bool:
    """Would the line run with no rule at all: every simple command a built-in read-only one
    that writes nothing and reads no secret file? Then it runs in the read-only sandbox."""
    return bool(line.commands) and not line.target.secret_read and all(
        not unanalysable(c) and is_read_only(c) and not c.writes and not reads_secret(c, line.policy.secret_files)
        for c in line.commands)


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
