"""How command rules meet a simple command: allow rules by the words as written, deny and ask
rules however it is spelled (and whether they could match once its expansions are known),
and the narrowest rule to suggest for "always" (the shape it learns comes from the catalogue
of commands, `nanohermes.guard.commands`), read back when a learned rule is matched."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import replace
from functools import lru_cache

from nanohermes.guard.commands import dangerous_assign, exact_only, git_globals, learned_shape, unanalysable, uncertain_word
from nanohermes.guard.permissions.rules import Rule, escape_pattern, match_command_text
from nanohermes.guard.shellparse import ParseError, SimpleCommand, Word, split

# The tail of a learned prefix rule: more arguments, but no option the rule does not spell
# (`git clean -n <args>` never covers `git clean -f`). Never a word of a parsed command.
ARGS = "<args>"


def suggest_command_rule(cmd: SimpleCommand, tool_name: str = "run_command") -> Rule:
    """The narrowest useful rule for "always": what runs (the program, its subcommand words,
    an interpreter's script or module) with exactly the options given, and any other
    arguments (`git log --oneline <args>`, `rm -rf <args>`, `python -m pytest -x <args>`): an
    option changes what a command does (`-n`, `--force`, `--hard`), so one the rule does not
    spell is asked again. The exact text when a prefix would cover arbitrary code (`python -c
    ...`, `sh` reading stdin, `git -C x push`, sed, awk, find, xargs, env ...), a changed
    environment or a write. Words keep their quotes as written, so the rule re-parsed
    matches the same command."""
    exact = Rule(tool_name, escape_pattern(rule_text(cmd, full=bool(cmd.writes), raw=True,
                                                      assigns=bool(cmd.wrappers) or exact_only(cmd))))
    if any(dangerous_assign(a) for a in cmd.assigns) or cmd.writes or unanalysable(cmd) or exact_only(cmd):
        return exact
    shape = learned_shape(cmd)
    if shape is None:
        return exact
    prefix, options, _ = shape
    shown = list(dict.fromkeys(w.raw or w.text for w in options))  # as typed, once each
    return Rule(tool_name, escape_pattern(" ".join([*prefix, *shown])) + " " + ARGS)


def _option_set(options: list[Word]) -> frozenset[str]:
    """The options, a short group counted as its letters (`-rf` is `-r -f`)."""
    out: set[str] = set()
    for w in options:
        out.update(f"-{c}" for c in w.text[1:]) if _SHORT_GROUP.fullmatch(w.text) else out.add(w.text)
    return frozenset(out)


@lru_cache(maxsize=256)
def _learned_rule(pattern: str) -> tuple[list[str], frozenset[str], list[str]] | None:
    """A `... <args>` pattern read back as the command it was learned from."""
    text = re.sub(r"\[(.)\]", r"\1", pattern[:-len(ARGS)].rstrip())
    try:
        [cmd] = split(text)
    except (ParseError, ValueError):
        return None
    shape = learned_shape(cmd)
    if shape is None:
        return None
    prefix, options, args = shape
    return prefix, _option_set(options), [w.raw or w.text for w in args]


def _learned_matches(pattern: str, cmd: SimpleCommand) -> bool:
    """Same program and subcommand, exactly the rule's options (grouped or ordered any
    way), its arguments first if it names some, then only plain arguments: a word that
    could become an option once the shell expands it (`$X`, a glob, braces) is not covered."""
    rule, shape = _learned_rule(pattern), learned_shape(cmd)
    if rule is None or shape is None:
        return False
    prefix, options, args = shape
    if prefix != rule[0] or _option_set(options) != rule[1] or cmd.open_args:
        return False
    if any(w.dynamic or w.glob or w.brace or w.splits for w in args):
        return False
    raws = [w.raw or w.text for w in args]
    return raws[:len(rule[2])] == rule[2]


def rule_text(cmd: SimpleCommand, *, full: bool = False, basename: bool = False, raw: bool = False,
              assigns: bool = False) -> str:
    """The text rules see: dangerous assignments stay in front (a rule for `git log` must not
    cover `GIT_PAGER=x git log`); `full` adds every assignment and redirection; `raw` keeps
    the words as written, quotes included (allow rules match that, so `sed -i '1e x' f` and
    `sed -i 1e x f` are different commands to them)."""
    words = [w.raw or w.text for w in cmd.words] if raw else list(cmd.argv)
    if basename and words:
        words[0] = posixpath.basename(words[0])
    kept = [a for a in cmd.assigns if full or assigns or dangerous_assign(a)]
    return " ".join([*kept, *words, *(_redirections(cmd, raw) if full else [])])


def _redirections(cmd: SimpleCommand, raw: bool) -> list[str]:
    """The command's redirections that write a file, as `2> target`."""
    return [f"{r.fd}{r.op} {(r.target.raw or r.target.text) if raw else r.target.text}"
            for r in cmd.redirects if r.target is not None and r.writes_file]


def allow_matches(rule: Rule, cmd: SimpleCommand) -> bool:
    """Does an allow rule cover `cmd`? Matched against the words as written (quotes kept), with
    the harmless assignments left out or spelled; a program known only at run time never is."""
    if not cmd.words or cmd.words[0].dynamic:
        return False  # $CMD args: the program is only known at run time
    pattern = rule.pattern or "*"
    if pattern.endswith(" " + ARGS):
        return _learned_matches(pattern, cmd) and not cmd.writes
    if ">" in pattern:  # a rule that spells a redirection is matched with it
        return match_command_text(pattern, rule_text(cmd, full=True, raw=True))
    # Harmless assignments may be left out of a rule, or spelled in it (exact learned rules).
    return match_command_text(pattern, rule_text(cmd, raw=True)) \
        or match_command_text(pattern, rule_text(cmd, raw=True, assigns=True))


def _seen_through(cmd: SimpleCommand) -> list[SimpleCommand]:
    """The command, and for git the same command without its global options (`git -C . -c
    k=v --no-pager push` is `git push` to a deny rule)."""
    out = [cmd]
    if cmd.words and posixpath.basename(cmd.name) == "git":
        opts, i = git_globals(cmd.argv)
        if opts and i < len(cmd.words):
            out.append(replace(cmd, words=(cmd.words[0], *cmd.words[i:])))
    return out


def deny_matches(rule: Rule, cmd: SimpleCommand) -> bool:
    """Deny and ask rules catch a command however it is spelled: /bin/rm as rm, with its
    assignments or redirections or without them, its short options grouped or apart and in
    any order, git with or without global options, quoted or not."""
    if rule.pattern is None:
        return True
    for c in _seen_through(cmd):
        texts = {c.text, rule_text(c), rule_text(c, full=True), rule_text(c, basename=True),
                 rule_text(c, raw=True), " ".join([posixpath.basename(c.name), *c.argv[1:]])}
        if any(match_command_text(rule.pattern, t) for t in texts if t) or _options_match(rule.pattern, c.argv):
            return True
    return False


def could_match(rule: Rule, cmd: SimpleCommand) -> bool:
    """Could the pattern match once the command's expansions, globs and appended arguments
    are known? (`git pus[h]`, `git $SUB`, `xargs git`, `rm *` against `rm -rf *`.)"""
    if rule.pattern is None:
        return False
    pwords = rule.pattern.split()
    star = len(pwords) > 1 and pwords[-1] == "*"
    if star:
        pwords = pwords[:-1]
    return any(_could_match(pwords, star, c) for c in _seen_through(cmd))


def _could_match(pwords: list[str], star: bool, c: SimpleCommand) -> bool:
    """`could_match` for one spelling of the command: a pattern's words (`star`: with a
    trailing `*`) against words some of which are known only at run time."""
    words = c.words
    if not _uncertain(c) or not _named(c.name, pwords[0]):
        return False
    if any(p.startswith("-") for p in pwords[1:]):
        return True  # options may come anywhere: an unknown word could be one
    for i, p in enumerate(pwords[1:], 1):
        if i >= len(words) or uncertain_word(words[i]):
            return True  # the words still to come, or this one, are known only at run time
        if not fnmatch.fnmatchcase(words[i].text, p):
            return False
    rest = words[len(pwords):]
    return not star and (c.open_args or (bool(rest) and all(w.splits for w in rest)))  # `$EMPTY` is no word at all


def _uncertain(c: SimpleCommand) -> bool:
    """Are some of the command's arguments known only at run time (expansions, globs, braces,
    or what xargs appends)?"""
    return bool(c.words) and (c.open_args or any(uncertain_word(w) for w in c.words[1:]))


def _named(name: str, pattern: str) -> bool:
    """Does a pattern's first word name the program, as written or by its base name (/bin/rm as rm)?"""
    return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(posixpath.basename(name), pattern)


_SHORT_GROUP = re.compile(r"-[A-Za-z]+")


def _options(words: list[str] | tuple[str, ...]) -> tuple[set[str], list[str]]:
    """(the options, the other words in order); `-rf` counts as `-r` and `-f`, and all words
    after `--` are arguments."""
    opts: set[str] = set()
    args: list[str] = []
    for i, w in enumerate(words):
        if w == "--":
            args.extend(words[i + 1:])
            break
        if _SHORT_GROUP.fullmatch(w):
            opts.update(f"-{c}" for c in w[1:])
        elif w.startswith("-") and len(w) > 1:
            opts.add(w)
        else:
            args.append(w)
    return opts, args


def _options_match(pattern: str, argv: tuple[str, ...]) -> bool:
    """A pattern with options names the command with at least those options, however they
    are grouped or ordered: `rm -rf *` catches `rm -r -f x`, `rm -fr x` and `rm -v -f -r x`.
    Its other words must match the command's other words in order."""
    words = pattern.split()
    rest = len(words) > 1 and words[-1] == "*"
    if rest:
        words = words[:-1]
    want, want_args = _options(words[1:])
    if not want or not argv or any(ch in o for o in want for ch in "*?["):
        return False  # no options (the text match decides), or options spelled as a glob
    if not _named(argv[0], words[0]):
        return False
    have, args = _options(argv[1:])
    if not want <= have or len(args) < len(want_args) or (not rest and len(args) != len(want_args)):
        return False
    return all(fnmatch.fnmatchcase(a, p) for a, p in zip(args, want_args, strict=False))  # `rest`: more args
