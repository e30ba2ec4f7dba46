"""Shell command analysis for permission checks: a command line -> its simple commands.

`split(command)` walks a POSIX/bash command line the way the shell would split it and
returns every simple command it would run: across `&&`, `||`, `;`, `|`, `&`, newlines,
subshells `( )`, groups `{ }`, command substitution `$( )` and backticks, process
substitution `<( )`, and the scripts of `bash -c '...'`. Quotes are respected (a quoted
`;` is an argument, not a separator); leading `VAR=value` assignments, redirections and the
wrappers the catalogue of commands lists (`env`, `timeout`, `nice`, `time`, `nohup`, `stdbuf`,
`command`, `xargs`, `find -exec`: an entry's `wraps`) are seen through, so a rule is matched
against the command that really runs.

The analysis fails closed, on two levels:
- `ParseError`: the line's structure is not followed with certainty (case statements,
  function definitions, arithmetic with anything but numbers, `${...}` with operators,
  `$'...'` with escapes beyond the plain ones, backticks with backslashes, array
  subscripts, brace expansion / globs / expansions in command position, unquoted
  here-documents with substitutions, unbalanced quotes). The caller asks instead of guessing.
- `SimpleCommand.unmodelled`: the structure is known (so deny rules can still look at the
  commands) but what a command does is not modelled exactly: `exec`, `setsid`, `sudo` and
  other runners, wrappers with options not listed here (`env -S`), a shell reading its
  script from standard input (`bash <<< ...`, `... | sh`), builtins that evaluate text as
  code or variable names (`eval`, `source`, `trap`, `let`, `declare`, `printf -v`,
  `test -v`, `read` into arrays...), assignments that change how later commands resolve
  (`PATH=...;`), brace expansion in arguments. The caller treats the line as unanalysable.
  Which builtins' forms are not modelled is each one's catalogue entry's `problem`.
Pure: no I/O, no globals that change.

The scanner (`shellscan`) reads the line; this module sees through the wrappers and marks
what is not modelled, reading the catalogue (`nanohermes.guard.commands`); the model itself (`Word`,
`Redirect`, `SimpleCommand`, `ParseError`) lives in `shellwords` and is re-exported here.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import replace

from nanohermes.guard.commands.entry import Command, Wraps
from nanohermes.guard.commands.table import lookup
from nanohermes.guard.shellscan import Scanner
from nanohermes.guard.shellwords import (
    ASSIGNMENT, SHELL_STATE_VARS, ParseError, Redirect, SimpleCommand, Word, assigned, var_name,
)

__all__ = ["ParseError", "Redirect", "SimpleCommand", "Word", "split"]


# -- wrappers: the catalogue entry's `wraps` says how each runs its command -------------------

def _unwrap(cmd: SimpleCommand) -> list[SimpleCommand]:
    """See through wrappers: `timeout 5 env X=1 nice git log` checks `git log`. A wrapper
    with an option its entry does not list is not seen through, and the command is unmodelled."""
    if not cmd.words or cmd.words[0].dynamic:
        return [cmd]
    entry = lookup(cmd.words[0].text)
    if entry is None or entry.wraps is None:
        return [cmd]
    return _WRAPPERS[entry.wraps.kind](cmd, list(cmd.words[1:]), entry.wraps)


def _skip_options(words: list[Word], wraps: Wraps) -> list[Word] | None:
    """Drop leading options of a wrapper; None when an option is unknown (not seen through)."""
    i = 0
    while i < len(words):
        t = words[i].text
        if t == "--":
            return words[i + 1:]
        if not t.startswith("-") or t == "-":
            return words[i:]
        taken = _option_words(t, wraps)
        if not taken:
            return None
        i += taken
    return []


def _option_words(t: str, wraps: Wraps) -> int:
    """How many words the wrapper's option `t` takes; 0 for one its entry does not list."""
    name = t.split("=", 1)[0]
    if name in wraps.options:
        return 2 if wraps.options[name] and "=" not in t else 1
    if len(t) > 2 and t[:2] in wraps.options and not t.startswith("--"):
        return 1  # -n5, -s9, -oL
    if wraps.numeric and name.lstrip("-").isdigit():
        return 1  # nice -5
    return 0


def _mark(cmd: SimpleCommand, why: str) -> SimpleCommand:
    return cmd if cmd.unmodelled else replace(cmd, unmodelled=why)


def _after_options(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`nice -n 5 CMD`, `timeout 5 CMD`: the command after the wrapper's options (and the
    words it `skips`); `command -v NAME` is a lookup, not a run."""
    if rest[:1] and rest[0].text in wraps.lookup:
        return [cmd]
    inner = _skip_options(rest, wraps)
    if wraps.skips:
        inner = inner[wraps.skips:] if inner else None
    return _wrapped(cmd, inner, why=wraps.why)


def _runner(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    return [_mark(cmd, f"`{cmd.name}` runs another command in a way that is not analysed")]


def _wrapped(cmd: SimpleCommand, inner: list[Word] | None, *, why: str = "", assigns: tuple[str, ...] = (),
             appends: bool = False) -> list[SimpleCommand]:
    """The commands the wrapper `cmd` runs, given the words it wraps: None when one of its
    options is not listed (then it is not seen through and the wrapper is unmodelled),
    empty when it wraps nothing. `why` marks every command when the wrapper changes how
    they run; `assigns` are the wrapper's own (`env X=1`), added to the wrapped command's;
    `appends` when the wrapper adds arguments at run time (xargs)."""
    name = cmd.name
    open_args = cmd.open_args or appends
    if inner is None:
        return [_mark(cmd, why or f"`{name}` with an option not analysed here")]
    if not inner:
        if open_args and name != "xargs":  # `xargs env`: the arguments it appends are the command
            return [_mark(cmd, f"`xargs {name}` runs its input as a command; it is not analysed")]
        return [_mark(cmd, why) if why else cmd]  # nothing wrapped (`env` alone prints the environment)
    out = _unwrap(replace(cmd, words=tuple(inner), assigns=(*cmd.assigns, *assigns), wrappers=(*cmd.wrappers, name),
                          open_args=open_args))
    return [_mark(c, why) if why else c for c in out]


def _env(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`env [options] [NAME=value...] CMD` runs CMD with the assignments: they join the
    wrapped command's own, so an assignment that changes how it runs is still seen."""
    inner = _skip_options(rest, wraps)
    assigns: list[str] = []
    while inner and ASSIGNMENT.match(inner[0].raw):
        assigns.append(assigned(inner[0]))
        inner = inner[1:]
    return _wrapped(cmd, inner, assigns=tuple(assigns))


def _exec(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`exec CMD` replaces the shell with CMD: seen through, but unmodelled. With only
    redirections it rewires every later command's output."""
    inner = _skip_options(rest, wraps)
    if inner is not None and not inner:
        return [_mark(cmd, wraps.why)]
    return _wrapped(cmd, inner, why=wraps.why)


def _xargs(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`xargs CMD` runs CMD with arguments it appends at run time (`open_args`); alone it runs
    `echo`. With `-I` it places its input anywhere in the command: unmodelled. The files it
    reads its arguments from (`-a FILE`) are seen as the command's input, so a secret file
    read that way is still a read."""
    inner = _skip_options(rest, wraps)
    options = len(rest) - len(inner or [])  # counted before `echo` stands in for a missing command
    if inner is not None and not inner:
        inner = [Word("echo", "echo")]
    why = ""
    if any(w.text in ("-I", "-i") or w.text.startswith(("-I", "--replace")) for w in rest):
        why = "`xargs -I` places its input anywhere in the command; it is not analysed"
    files = _xargs_arg_files(rest, options)
    return _wrapped(replace(cmd, redirects=(*cmd.redirects, *files)), inner, why=why, appends=True)


def _xargs_arg_files(rest: list[Word], options: int) -> list[Redirect]:
    """The files named by `-a FILE`, `-aFILE` or `--arg-file=FILE` among xargs's first
    `options` words, as redirections of its input."""
    out: list[Redirect] = []
    for j, w in enumerate(rest[:options]):
        if w.text in ("-a", "--arg-file") and j + 1 < len(rest):
            out.append(Redirect("<", "", rest[j + 1]))
        elif w.text.startswith("--arg-file=") or (w.text.startswith("-a") and len(w.text) > 2):
            value = w.text.split("=", 1)[1] if "=" in w.text else w.text[2:]
            out.append(Redirect("<", "", Word(value, value)))
    return out


def _eval(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`eval` runs its arguments, joined by spaces, as a script: its commands are analysed
    (so deny rules still see them) but unmodelled; text built at run time is refused."""
    if any(w.dynamic for w in rest):
        raise ParseError("eval of text built at run time is not analysed")
    return [_mark(c, "`eval` runs text as code; it is not analysed")
            for c in _script(cmd, " ".join(w.text for w in rest))]


_SHELL_LONG = frozenset({"--norc", "--noprofile", "--posix", "--login", "--noediting", "--restricted"})


def _shell_c(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`bash -c 'script'` runs the script: analyse it. `bash file` runs a file (a plain
    command). A shell reading its script from standard input (`bash`, `bash -s`, `... | sh`,
    `sh <<< ...`) or given options not listed here is unmodelled."""
    i, script_mode, problem = _shell_options(cmd.name, rest)
    if problem:
        return [_mark(cmd, problem)]
    if not script_mode:
        if i >= len(rest) and not cmd.open_args:
            return [_mark(cmd, f"`{cmd.name}` reading its script from standard input is not analysed")]
        if cmd.open_args:
            return [_mark(cmd, f"`xargs {cmd.name}` is not analysed")]
        if rest[i].dynamic or rest[i].glob or rest[i].brace:
            return [_mark(cmd, f"`{cmd.name}` running a script named only at run time is not analysed")]
        return [cmd]  # runs a script file: a plain command
    if i >= len(rest):
        raise ParseError(f"{cmd.name} -c without a script")
    script = rest[i]
    if script.dynamic:
        raise ParseError(f"{cmd.name} -c with a script built at run time is not analysed")
    return _script(cmd, script.text)


def _shell_options(name: str, rest: list[Word]) -> tuple[int, bool, str]:
    """A shell's leading options, as (where its operands start, whether `-c` makes the first
    operand the script, why the options are not analysed or ""). Only the flags and long
    options that leave where the script comes from unchanged are followed: `-s` and `-` read
    it from standard input, and an option word known only at run time ends the options (it is
    then judged as the script or the script file's name)."""
    i = 0
    script_mode = False
    while i < len(rest):
        t = rest[i].text
        if rest[i].dynamic or rest[i].glob or rest[i].brace:
            break  # a script (checked by the caller) or a script file's name
        if t == "-":
            return i, script_mode, f"`{name} -` reads its script from standard input; it is not analysed"
        if t == "--":
            i += 1
            break
        if not (t.startswith("--") or (t[:1] in "-+" and len(t) > 1)):
            break
        taken, script, problem = _shell_option(name, t, i + 1 < len(rest))
        if problem:
            return i, script_mode, problem
        script_mode = script_mode or script
        i += taken
    return i, script_mode, ""


def _shell_option(name: str, t: str, more: bool) -> tuple[int, bool, str]:
    """One option word of a shell: (the words it takes, whether it is `-c`, why it is not
    analysed or ""); `more` when a word follows it (`-o` takes an option's name)."""
    if t.startswith("--"):
        return (1, False, "") if t in _SHELL_LONG else (0, False, f"`{name} {t}` is not analysed")
    letters = t[1:]
    if set(letters) - set("abcefhklmnptuvxBCEHPTo") or "s" in letters:
        return 0, False, f"`{name} {t}` is not analysed"
    if "o" in letters and not more:
        return 0, False, f"`{name} {t}` without an option name is not analysed"
    return (2 if "o" in letters else 1), ("c" in letters and t[0] == "-"), ""


def _script(cmd: SimpleCommand, script: str) -> list[SimpleCommand]:
    """The commands of a script run by `cmd` (bash -c, eval); its own redirections stay a command."""
    out = [replace(c, wrappers=(*cmd.wrappers, cmd.name, *c.wrappers)) for c in split(script)]
    if cmd.redirects or cmd.assigns:
        out.append(SimpleCommand((), cmd.assigns, cmd.redirects, (*cmd.wrappers, cmd.name)))
    return out


def _find(cmd: SimpleCommand, rest: list[Word], wraps: Wraps) -> list[SimpleCommand]:
    """`find -exec CMD {} ;` runs CMD: seen as a command of its own (find itself stays a
    non-read-only command because of -exec)."""
    out: list[SimpleCommand] = [cmd]
    i = 0
    while i < len(rest):
        if rest[i].text in wraps.options:
            j = i + 1
            while j < len(rest) and rest[j].text not in (";", "+"):
                j += 1
            if j > i + 1:
                out += _unwrap(SimpleCommand(tuple(rest[i + 1:j]), wrappers=(*cmd.wrappers, cmd.name), open_args=True))
            i = j
        i += 1
    return out


_WRAPPERS: dict[str, Callable[[SimpleCommand, list[Word], Wraps], list[SimpleCommand]]] = {
    "options": _after_options, "env": _env, "exec": _exec, "xargs": _xargs, "shell": _shell_c, "eval": _eval,
    "find": _find, "runner": _runner,
}


# -- builtins: the catalogue entry's `problem` says which forms are not modelled ---------------

def _finish(cmd: SimpleCommand) -> SimpleCommand:
    """Refuse a command name bash would compute, mark builtins that evaluate code, and note
    a command whose operands are files it writes (tee)."""
    for a in cmd.assigns:
        if not cmd.words and var_name(a) in SHELL_STATE_VARS:
            cmd = _mark(cmd, f"assigning {var_name(a)} changes how later commands run")
    if not cmd.words:
        return cmd
    _refuse_computed_name(cmd.words[0])
    name = cmd.words[0].text
    entry = lookup(name)
    writer = lookup(posixpath.basename(name)) if "/" in name else entry  # /usr/bin/tee writes as tee does
    if writer is not None and writer.writes:
        cmd = replace(cmd, operands_written=True)
    why = _builtin_problem(entry, cmd.words)
    return _mark(cmd, why) if why else cmd


def _refuse_computed_name(head: Word) -> None:
    """A command name bash computes at run time (an expansion, brace expansion, a glob, a
    `~user` directory, a `{`) could run any program, so the line is refused (ParseError)
    rather than matched by the text it is written as. `[` and `[[` are names, not globs."""
    if head.dynamic:
        raise ParseError("a command name known only at run time ($X, $(...)) is not analysed")
    if head.brace:
        raise ParseError("brace expansion in command position is not analysed")
    if head.glob and head.text not in ("[", "[["):
        raise ParseError("a glob in command position is not analysed")
    if head.text.startswith("{") or (head.tilde and not (head.text == "~" or head.text.startswith("~/"))):
        raise ParseError(f"the command name {head.raw!r} is not analysed")


def _builtin_problem(entry: Command | None, words: tuple[Word, ...]) -> str:
    """Why what a command does is not modelled exactly ("" when it is): brace expansion in an
    argument (the words that run are not the ones written), or its entry's `problem` (a
    builtin that evaluates text as code, or whose arguments can assign, evaluate or run more
    than they say)."""
    if any(w.brace for w in words[1:]):
        return "brace expansion is not analysed"
    return entry.problem(words[0].text, words[1:]) if entry is not None and entry.problem is not None else ""


def _complete(cmd: SimpleCommand) -> list[SimpleCommand]:
    """What the scanner's simple command runs: wrappers seen through, each command finished."""
    return [_finish(c) for c in _unwrap(cmd)]


def split(command: str) -> list[SimpleCommand]:
    """Every simple command `command` would run, in source order (substitutions first)."""
    if "\x00" in command:
        raise ParseError("NUL byte in command")
    sc = Scanner(command, _complete)
    try:
        sc.parse_list(stop="")
    except RecursionError:
        raise ParseError("nested too deeply") from None
    if sc.heredocs:
        sc.read_heredocs()
    return sc.commands
