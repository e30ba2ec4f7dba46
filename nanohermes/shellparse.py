"""Shell command analysis for permission checks: a command line -> its simple commands.

`split(command)` walks a POSIX/bash command line the way the shell would split it and
returns every simple command it would run: across `&&`, `||`, `;`, `|`, `&`, newlines,
subshells `( )`, groups `{ }`, command substitution `$( )` and backticks, process
substitution `<( )`, and the scripts of `bash -c '...'`. Quotes are respected (a quoted
`;` is an argument, not a separator); leading `VAR=value` assignments, redirections and the
wrappers `env`, `timeout`, `nice`, `time`, `nohup`, `stdbuf`, `command`, `xargs` are seen
through, so a rule is matched against the command that really runs.

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
Pure: no I/O, no globals that change.
The scanner (`shellscan`) reads the line; this module sees through the wrappers and marks
what is not modelled; the model itself (`Word`, `Redirect`, `SimpleCommand`, `ParseError`)
lives in `shellwords` and is re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import replace

from nanohermes.shellscan import Scanner
from nanohermes.shellwords import ASSIGNMENT, SHELL_STATE_VARS, ParseError, Redirect, SimpleCommand, Word, assigned

__all__ = ["ParseError", "Redirect", "SimpleCommand", "Word", "split"]


# -- wrappers ------------------------------------------------------------------------------
# option -> takes a separate value?
_ENV_OPTS = {"-i": False, "--ignore-environment": False, "-0": False, "--null": False, "-u": True, "--unset": True,
             "-C": True, "--chdir": True, "-v": False, "--debug": False}
_TIMEOUT_OPTS = {"-s": True, "--signal": True, "-k": True, "--kill-after": True, "--preserve-status": False,
                 "--foreground": False, "-v": False, "--verbose": False}
_NICE_OPTS = {"-n": True, "--adjustment": True}
_STDBUF_OPTS = {"-i": True, "-o": True, "-e": True, "--input": True, "--output": True, "--error": True}
_XARGS_OPTS = {"-0": False, "--null": False, "-a": True, "--arg-file": True, "-d": True, "--delimiter": True,
               "-E": True, "-e": False, "--eof": False, "-I": True, "-i": False, "--replace": False, "-L": True,
               "-l": False, "--max-lines": False, "-n": True, "--max-args": True, "-P": True, "--max-procs": True,
               "-p": False, "--interactive": False, "-r": False, "--no-run-if-empty": False, "-s": True,
               "--max-chars": True, "-t": False, "--verbose": False, "-x": False, "--exit": False,
               "--process-slot-var": True, "-o": False, "--open-tty": False, "--show-limits": False}
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})


def _skip_options(words: list[Word], opts: dict[str, bool], *, attached: bool = True) -> list[Word] | None:
    """Drop leading options of a wrapper; None when an option is unknown (not seen through)."""
    i = 0
    while i < len(words):
        t = words[i].text
        if t == "--":
            return words[i + 1:]
        if not t.startswith("-") or t == "-":
            return words[i:]
        name = t.split("=", 1)[0]
        if name in opts:
            i += 2 if opts[name] and "=" not in t else 1
            continue
        if attached and len(t) > 2 and t[:2] in opts and not t.startswith("--"):
            i += 1  # -n5, -s9, -oL
            continue
        if name.lstrip("-").isdigit() and opts is _NICE_OPTS:  # nice -5
            i += 1
            continue
        return None
    return []


def _mark(cmd: SimpleCommand, why: str) -> SimpleCommand:
    return cmd if cmd.unmodelled else replace(cmd, unmodelled=why)


# Programs that run their arguments as a command in ways not followed here (privileges,
# namespaces, other sessions, repeated runs): the line is unanalysable.
_RUNNERS = frozenset({"sudo", "doas", "su", "runuser", "chroot", "unshare", "nsenter", "flock", "ionice", "chrt",
                      "taskset", "strace", "ltrace", "watch", "script", "setpriv", "firejail", "systemd-run",
                      "busybox", "toybox", "parallel", "fakeroot", "proot", "bwrap", "valgrind", "catchsegv",
                      "xdg-open", "open", "osascript", "nohup.exe", "start-stop-daemon", "daemonize", "at", "batch",
                      "crontab", "tmux", "screen", "expect", "rlwrap", "unbuffer", "cgexec", "numactl", "prlimit"})
_EXEC_OPTS = {"-a": True, "-c": False, "-l": False}
_SETSID_OPTS = {"-c": False, "--ctty": False, "-f": False, "--fork": False, "-w": False, "--wait": False}
# Wrappers that take only options before the command they run: name -> (options, why the
# wrapped command is unmodelled, "" when it runs as written).
_OPTIONS_ONLY = {
    "nice": (_NICE_OPTS, ""), "time": ({"-p": False}, ""), "nohup": ({"-p": False}, ""), "stdbuf": (_STDBUF_OPTS, ""),
    "command": ({"-p": False}, ""), "builtin": ({"-p": False}, ""),
    "setsid": (_SETSID_OPTS, "`setsid` is not analysed"),  # a new session outlives the command's process group
}


def _unwrap(cmd: SimpleCommand) -> list[SimpleCommand]:
    """See through wrappers: `timeout 5 env X=1 nice git log` checks `git log`. A wrapper
    with an option not listed here is not seen through, and the command is unmodelled."""
    if not cmd.words or cmd.words[0].dynamic:
        return [cmd]
    name, rest = cmd.words[0].text, list(cmd.words[1:])
    if name == "env":
        return _env(cmd, rest)
    if name == "timeout":
        inner = _skip_options(rest, _TIMEOUT_OPTS)
        return _wrapped(cmd, inner[1:] if inner else None)  # past the duration
    if name in ("command", "builtin") and any(w.text in ("-v", "-V") for w in rest[:1]):
        return [cmd]  # a lookup, not a run
    if name in _OPTIONS_ONLY:
        opts, why = _OPTIONS_ONLY[name]
        return _wrapped(cmd, _skip_options(rest, opts), why=why)
    if name == "exec":
        return _exec(cmd, rest)
    if name == "xargs":
        return _xargs(cmd, rest)
    if name in _SHELLS:
        return _shell_c(cmd, rest)
    if name == "eval":
        return _eval(cmd, rest)
    if name == "find":
        return [cmd, *_find_exec(cmd, rest)]
    if name in _RUNNERS:
        return [_mark(cmd, f"`{name}` runs another command in a way that is not analysed")]
    return [cmd]


def _wrapped(cmd: SimpleCommand, inner: list[Word] | None, *, why: str = "", assigns: tuple[str, ...] = (),
             appends: bool = False) -> list[SimpleCommand]:
    """The commands the wrapper `cmd` runs, given the words it wraps: None when one of its
    options is not listed here (then it is not seen through and the wrapper is unmodelled),
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




def _env(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`env [options] [NAME=value...] CMD` runs CMD with the assignments: they join the
    wrapped command's own, so an assignment that changes how it runs is still seen."""
    inner = _skip_options(rest, _ENV_OPTS)
    assigns: list[str] = []
    while inner and ASSIGNMENT.match(inner[0].raw):
        assigns.append(assigned(inner[0]))
        inner = inner[1:]
    return _wrapped(cmd, inner, assigns=tuple(assigns))


def _exec(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`exec CMD` replaces the shell with CMD: seen through, but unmodelled. With only
    redirections it rewires every later command's output."""
    why = "`exec` is not analysed"
    inner = _skip_options(rest, _EXEC_OPTS)
    if inner is not None and not inner:
        return [_mark(cmd, why)]
    return _wrapped(cmd, inner, why=why)


def _xargs(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`xargs CMD` runs CMD with arguments it appends at run time (`open_args`); alone it runs
    `echo`. With `-I` it places its input anywhere in the command: unmodelled. The files it
    reads its arguments from (`-a FILE`) are seen as the command's input, so a secret file
    read that way is still a read."""
    inner = _skip_options(rest, _XARGS_OPTS)
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


def _eval(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`eval` runs its arguments, joined by spaces, as a script: its commands are analysed
    (so deny rules still see them) but unmodelled; text built at run time is refused."""
    if any(w.dynamic for w in rest):
        raise ParseError("eval of text built at run time is not analysed")
    return [_mark(c, "`eval` runs text as code; it is not analysed")
            for c in _script(cmd, " ".join(w.text for w in rest))]


_SHELL_LONG = frozenset({"--norc", "--noprofile", "--posix", "--login", "--noediting", "--restricted"})


def _shell_c(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
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
        if t in ("--", "-"):
            if t == "-":
                return i, script_mode, f"`{name} -` reads its script from standard input; it is not analysed"
            i += 1
            break
        if t.startswith("--"):
            if t not in _SHELL_LONG:
                return i, script_mode, f"`{name} {t}` is not analysed"
            i += 1
            continue
        if t[:1] in "-+" and len(t) > 1:
            letters = t[1:]
            if set(letters) - set("abcefhklmnptuvxBCEHPTo") or "s" in letters:
                return i, script_mode, f"`{name} {t}` is not analysed"
            if "c" in letters and t[0] == "-":
                script_mode = True
            if "o" in letters:
                if i + 1 >= len(rest):
                    return i, script_mode, f"`{name} {t}` without an option name is not analysed"
                i += 1  # the option's name
            i += 1
            continue
        break
    return i, script_mode, ""


def _script(cmd: SimpleCommand, script: str) -> list[SimpleCommand]:
    """The commands of a script run by `cmd` (bash -c, eval); its own redirections stay a command."""
    out = [replace(c, wrappers=(*cmd.wrappers, cmd.name, *c.wrappers)) for c in split(script)]
    if cmd.redirects or cmd.assigns:
        out.append(SimpleCommand((), cmd.assigns, cmd.redirects, (*cmd.wrappers, cmd.name)))
    return out


def _find_exec(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`find -exec CMD {} ;` runs CMD: seen as a command of its own (find itself stays a
    non-read-only command because of -exec)."""
    out: list[SimpleCommand] = []
    i = 0
    while i < len(rest):
        if rest[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(rest) and rest[j].text not in (";", "+"):
                j += 1
            if j > i + 1:
                out += _unwrap(SimpleCommand(tuple(rest[i + 1:j]), wrappers=(*cmd.wrappers, "find"), open_args=True))
            i = j
        i += 1
    return out


# Builtins that evaluate text as code, as variable names (array subscripts are arithmetic,
# and arithmetic runs `$(...)` found in a variable's value) or change how later lines parse
# or resolve commands.
_EVALUATING = {
    "let": "`let` evaluates arithmetic", "declare": "`declare` evaluates names and values",
    "typeset": "`typeset` evaluates names and values", "local": "`local` evaluates names and values",
    "source": "`source` runs a file's commands", ".": "`.` runs a file's commands", "trap": "`trap` runs code later",
    "mapfile": "`mapfile` runs callbacks and assigns arrays", "readarray": "`readarray` runs callbacks",
    "getopts": "`getopts` assigns a named variable", "shopt": "`shopt` changes how later lines parse",
    "enable": "`enable` loads builtins", "hash": "`hash` changes which program a name runs",
    "alias": "`alias` changes what later names run", "bind": "`bind` runs code on keys",
    "complete": "`complete` runs code", "compgen": "`compgen` runs code", "compopt": "`compopt`",
    "fc": "`fc` runs history through an editor", "history": "`history` can rewrite what runs",
}
_SET_OK = frozenset("euxvfCnhbm")
_SET_O_OK = frozenset({"pipefail", "errexit", "nounset", "xtrace", "verbose", "noclobber", "noglob"})
_TEST_UNARY = frozenset({"-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w",
                         "-x", "-G", "-L", "-N", "-O", "-S", "-z", "-n", "!"})
_TEST_BINARY = frozenset({"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"})
_ARITH_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})


def _var_name(text: str) -> str:
    return text.split("=", 1)[0].rstrip("+")


def _finish(cmd: SimpleCommand) -> SimpleCommand:
    """Refuse a command name bash would compute, and mark builtins that evaluate code."""
    for a in cmd.assigns:
        if not cmd.words and _var_name(a) in SHELL_STATE_VARS:
            cmd = _mark(cmd, f"assigning {_var_name(a)} changes how later commands run")
    if not cmd.words:
        return cmd
    _refuse_computed_name(cmd.words[0])
    why = _builtin_problem(cmd.words[0].text, cmd.words[1:])
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


def _builtin_problem(name: str, args: tuple[Word, ...]) -> str:
    """Why what `name args` does is not modelled exactly ("" when it is): brace expansion in
    an argument (the words that run are not the ones written), a builtin that evaluates text
    as code, or a builtin whose arguments can assign, evaluate or run more than they say."""
    if any(w.brace for w in args):
        return "brace expansion is not analysed"
    if name in _EVALUATING:
        return _EVALUATING[name] + "; it is not analysed"
    if name in ("export", "readonly"):
        return _export_problem(name, args)
    if name == "read":
        return _read_problem(args)
    if name == "unset":
        return _unset_problem(args)
    if name == "wait":
        return _wait_problem(args)
    if name == "printf":
        return _printf_problem(args)
    if name == "set":
        return _set_problem(args)
    if name in ("test", "["):
        return _test_problem(args[:-1] if name == "[" and args and args[-1].text == "]" else args)
    if name == "[[":
        return _double_bracket_problem(args)
    return ""


def _export_problem(name: str, args: tuple[Word, ...]) -> str:
    """`export`/`readonly` are followed only for plain names: an option (`-f` exports a
    function, `-n` unexports), a name known only at run time, an array element (its subscript
    is arithmetic) or a variable that changes how later commands run (PATH, IFS...) is not."""
    for w in args:
        if w.dynamic or w.glob or w.brace or (w.text.startswith("-") and w.text != "--") \
                or "[" in _var_name(w.text) or _var_name(w.text) in SHELL_STATE_VARS:
            return f"`{name} {w.text}` is not analysed"
    return ""


def _read_problem(args: tuple[Word, ...]) -> str:
    """`read` assigns the names it is given; an assignment into an array (`-a`), an element
    (its subscript is arithmetic), a name known only at run time or a variable that changes
    how later commands run is not followed."""
    for w in args:
        into_array = w.text.startswith("-") and not w.text.startswith("--") and "a" in w.text
        if w.dynamic or w.glob or w.brace or into_array or "[" in w.text or w.text in SHELL_STATE_VARS:
            return f"`read {w.text}` is not analysed"
    return ""


def _unset_problem(args: tuple[Word, ...]) -> str:
    """`unset 'a[...]'` evaluates the subscript as arithmetic, which runs any `$(...)` in a
    variable's value; so does a name known only at run time that could hold one."""
    if any(w.dynamic or "[" in w.text for w in args):
        return "`unset` of an array element evaluates it; it is not analysed"
    return ""


def _wait_problem(args: tuple[Word, ...]) -> str:
    """`wait -p NAME` assigns a named variable; an unquoted expansion could become `-p`."""
    if any((w.text.startswith("-") and "p" in w.text) or w.splits for w in args):
        return "`wait -p` assigns a named variable; it is not analysed"
    return ""


def _printf_problem(args: tuple[Word, ...]) -> str:
    """`printf -v NAME` assigns a named variable; a format known only at run time could be
    `-v`."""
    if args and args[0].text == "--":
        args = args[1:]
    first = args[0] if args else None
    if first is not None and (first.dynamic or first.glob or first.brace or first.text.startswith("-v")):
        return "`printf -v` (or a format known only at run time) assigns a variable; it is not analysed"
    return ""


def _set_problem(args: tuple[Word, ...]) -> str:
    """`set` is followed for the flags and `-o` names that change only how errors, tracing,
    clobbering and globbing behave; others (`set -o vi`, `-k`, `-B`...) change how later
    lines run or parse, and a flag known only at run time could be any of them. Flags are
    read up to `--` or the first non-option; every `-o`/`+o` name is checked."""
    for w in args:
        t = w.text
        if t == "--" or t[:1] not in "-+":
            break
        if w.dynamic or (t[1:] != "o" and set(t[1:]) - _SET_OK - {"o"}):
            return f"`set {t}` is not analysed"
    opts = [args[i + 1].text for i, w in enumerate(args[:-1]) if w.text in ("-o", "+o")]
    if any(o not in _SET_O_OK for o in opts):
        return "`set -o` with this option is not analysed"
    return ""


def _double_bracket_problem(args: tuple[Word, ...]) -> str:
    """`[[ -v NAME ]]` evaluates a name (and its subscript); the arithmetic operators
    (-eq, -lt...) evaluate their operands as arithmetic, which runs `$(...)` found in a
    variable's value, so only literal numbers are followed. The last such operator gives the
    reason."""
    inner = args[:-1]
    texts = [w.text for w in inner]
    why = ""
    if "-v" in texts or "-R" in texts:
        why = "`[[ -v ]]` evaluates a variable name; it is not analysed"
    for i, t in enumerate(texts):
        if t in _ARITH_OPS and inner[i].raw == t:
            operands = [inner[j] for j in (i - 1, i + 1) if 0 <= j < len(inner)]
            if any(not re.fullmatch(r"-?[0-9]+", o.text) or o.dynamic for o in operands):
                why = f"`[[ ... {t} ... ]]` evaluates its operands as arithmetic; it is not analysed"
    return why


def _test_problem(args: tuple[Word, ...]) -> str:
    """`test -v` evaluates a name (and its subscript); a value known only at run time could
    become that operator. Only the forms whose operators are written out are followed."""
    if any(w.text in ("-v", "-R") for w in args):
        return "`test -v` evaluates a variable name; it is not analysed"
    if any(w.splits or w.glob or w.brace for w in args):
        return "`test` with unquoted expansions is not analysed"
    dynamic = [i for i, w in enumerate(args) if w.dynamic]
    if not dynamic:
        return ""
    n = len(args)
    if n == 1 or (n == 2 and not args[0].dynamic and args[0].text in _TEST_UNARY) \
            or (n == 3 and not args[1].dynamic and args[1].text in _TEST_BINARY):
        return ""
    return "`test` with values known only at run time in this form is not analysed"


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
