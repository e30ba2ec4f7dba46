"""What the shell analysis knows of bash's builtins: those that evaluate text as code or as
variable names, and the forms of `export`, `read`, `unset`, `wait`, `printf`, `set`, `test`,
`[` and `[[` whose arguments assign, evaluate or run more than they say. Each is a `Problem`
of a builtin's entry: why what it does with these words is not modelled exactly, or ""."""

from __future__ import annotations

import re

from nanohermes.guard.commands.entry import Problem
from nanohermes.guard.shellwords import SHELL_STATE_VARS, Word, var_name


def evaluates(what: str = "") -> Problem:
    """A builtin that always evaluates text as code or names, or changes how later lines
    parse or resolve commands; `what` says how (array subscripts are arithmetic, and
    arithmetic runs `$(...)` found in a variable's value)."""
    def problem(name: str, args: tuple[Word, ...]) -> str:
        return f"`{name}` {what}; it is not analysed" if what else f"`{name}`; it is not analysed"

    return problem


_SET_OK = frozenset("euxvfCnhbm")
_SET_O_OK = frozenset({"pipefail", "errexit", "nounset", "xtrace", "verbose", "noclobber", "noglob"})
_TEST_UNARY = frozenset({"-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w",
                         "-x", "-G", "-L", "-N", "-O", "-S", "-z", "-n", "!"})
_TEST_BINARY = frozenset({"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"})
_ARITH_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})



def export_problem(name: str, args: tuple[Word, ...]) -> str:
    """`export`/`readonly` are followed only for plain names: an option (`-f` exports a
    function, `-n` unexports), a name known only at run time, an array element (its subscript
    is arithmetic) or a variable that changes how later commands run (PATH, IFS...) is not."""
    for w in args:
        if w.dynamic or w.glob or w.brace or (w.text.startswith("-") and w.text != "--") \
                or "[" in var_name(w.text) or var_name(w.text) in SHELL_STATE_VARS:
            return f"`{name} {w.text}` is not analysed"
    return ""


def read_problem(name: str, args: tuple[Word, ...]) -> str:
    """`read` assigns the names it is given; an assignment into an array (`-a`), an element
    (its subscript is arithmetic), a name known only at run time or a variable that changes
    how later commands run is not followed."""
    for w in args:
        into_array = w.text.startswith("-") and not w.text.startswith("--") and "a" in w.text
        if w.dynamic or w.glob or w.brace or into_array or "[" in w.text or w.text in SHELL_STATE_VARS:
            return f"`read {w.text}` is not analysed"
    return ""


def unset_problem(name: str, args: tuple[Word, ...]) -> str:
    """`unset 'a[...]'` evaluates the subscript as arithmetic, which runs any `$(...)` in a
    variable's value; so does a name known only at run time that could hold one."""
    if any(w.dynamic or "[" in w.text for w in args):
        return "`unset` of an array element evaluates it; it is not analysed"
    return ""


def wait_problem(name: str, args: tuple[Word, ...]) -> str:
    """`wait -p NAME` assigns a named variable; an unquoted expansion could become `-p`."""
    if any((w.text.startswith("-") and "p" in w.text) or w.splits for w in args):
        return "`wait -p` assigns a named variable; it is not analysed"
    return ""


def printf_problem(name: str, args: tuple[Word, ...]) -> str:
    """`printf -v NAME` assigns a named variable; a format known only at run time could be
    `-v`."""
    if args and args[0].text == "--":
        args = args[1:]
    first = args[0] if args else None
    if first is not None and (first.dynamic or first.glob or first.brace or first.text.startswith("-v")):
        return "`printf -v` (or a format known only at run time) assigns a variable; it is not analysed"
    return ""


def set_problem(name: str, args: tuple[Word, ...]) -> str:
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


def double_bracket_problem(name: str, args: tuple[Word, ...]) -> str:
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


def test_problem(name: str, args: tuple[Word, ...]) -> str:
    """`test -v` evaluates a name (and its subscript); a value known only at run time could
    become that operator. Only the forms whose operators are written out are followed. `[`
    is `test` with a closing `]`."""
    if name == "[" and args and args[-1].text == "]":
        args = args[:-1]
    if any(w.text in ("-v", "-R") for w in args):
        return "`test -v` evaluates a variable name; it is not analysed"
    if any(w.splits or w.glob or w.brace for w in args):
        return "`test` with unquoted expansions is not analysed"
    if not any(w.dynamic for w in args) or _operators_written(args):
        return ""
    return "`test` with values known only at run time in this form is not analysed"


def _operators_written(args: tuple[Word, ...]) -> bool:
    """A test of one value, or a unary or binary test whose operator is written out."""
    n = len(args)
    return n == 1 or (n == 2 and not args[0].dynamic and args[0].text in _TEST_UNARY) \
        or (n == 3 and not args[1].dynamic and args[1].text in _TEST_BINARY)
