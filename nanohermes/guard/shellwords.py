"""The shell command model: what the shell analysis (`shellparse.split`) hands the permission
checks. A `SimpleCommand` is one command the shell would run, its `Word`s (each with what bash
would still do to it at run time), its leading assignments and its `Redirect`s; `ParseError`
is a line whose structure is not followed. Also the shell's own facts both the scanner and the
builtins' checks need: what an assignment word is, and which variables change how later
commands run."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ASSIGNMENT", "SHELL_STATE_VARS", "ParseError", "Redirect", "SimpleCommand", "Word", "assigned", "var_name"]


class ParseError(ValueError):
    """The command line uses shell syntax this analysis does not follow."""


@dataclass(frozen=True)
class Word:
    text: str  # after quote removal; expansions keep their source text, e.g. `$HOME`, `$(pwd)`
    raw: str = ""  # the source text
    expands: bool = False  # contains a parameter expansion ($X, ${X})
    substitutes: bool = False  # contains a command or process substitution
    glob: bool = False  # contains an unquoted * ? or [...]
    brace: bool = False  # contains an unquoted brace expansion: {a,b} or {1..3}
    splits: bool = False  # contains an unquoted expansion: its value is split into words and globbed
    tilde: bool = False  # starts with an unquoted ~ (bash expands ~, ~/x, ~user, ~+, ~-)

    @property
    def dynamic(self) -> bool:
        return self.expands or self.substitutes


@dataclass(frozen=True)
class Redirect:
    op: str  # > >> >| &> &>> < << <<< <> >& <&
    fd: str = ""  # the explicit descriptor, e.g. "2" in 2>
    target: Word | None = None  # None for here-documents

    @property
    def writes_file(self) -> bool:
        """Does this redirection create or change a file?"""
        if self.op not in (">", ">>", ">|", "&>", "&>>", "<>", ">&"):
            return False
        if self.target is None:
            return False
        t = self.target.text
        if self.op == ">&" and (t.isdigit() or t == "-"):
            return False  # descriptor duplication, e.g. 2>&1
        return t not in ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")


@dataclass(frozen=True)
class SimpleCommand:
    words: tuple[Word, ...]
    assigns: tuple[str, ...] = ()  # leading NAME=value, as written after quote removal
    redirects: tuple[Redirect, ...] = ()
    wrappers: tuple[str, ...] = ()  # wrappers seen through, outermost first
    open_args: bool = False  # xargs appends arguments at run time
    unmodelled: str = ""  # why what this command does is not modelled exactly ("" when it is)
    operands_written: bool = False  # every operand is a file it writes (tee: its catalogue entry says so)

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(w.text for w in self.words)

    @property
    def name(self) -> str:
        return self.words[0].text if self.words else ""

    @property
    def text(self) -> str:
        """What rules are matched against: the words joined by single spaces."""
        return " ".join(self.argv)

    @property
    def written(self) -> tuple[Word, ...]:
        """The words naming files this command writes: by redirection, or as operands (tee)."""
        out = [r.target for r in self.redirects if r.writes_file and r.target is not None]
        if self.operands_written:
            out += [w for w in self.words[1:] if not w.text.startswith("-") and w.text != "/dev/null"]
        return tuple(out)

    @property
    def writes(self) -> tuple[str, ...]:
        """Files this command writes by redirection or as operands (tee)."""
        return tuple(w.text for w in self.written)


# A leading `NAME=value` (or `NAME+=value`, `NAME[i]=value`) word: an assignment, not a command.
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
# Variables whose value changes which program a later command runs or what the shell does.
SHELL_STATE_VARS = frozenset({"PATH", "IFS", "BASH_ENV", "ENV", "CDPATH", "SHELLOPTS", "BASHOPTS", "PS4",
                              "PROMPT_COMMAND", "GLOBIGNORE", "BASH_COMPAT", "POSIXLY_CORRECT", "EXECIGNORE",
                              "BASH_LOADABLES_PATH", "FUNCNEST", "HOME", "OLDPWD", "PWD"})


def var_name(assignment: str) -> str:
    """The variable an assignment (`NAME=value`, `NAME+=value`) or a name assigns."""
    return assignment.split("=", 1)[0].rstrip("+")


def assigned(w: Word) -> str:
    """The text of an assignment word. An array element's subscript is evaluated as
    arithmetic, which runs `$(...)` found in a variable's value, so it is refused."""
    if "[" in w.raw.split("=", 1)[0]:
        raise ParseError("array subscripts are evaluated as arithmetic and are not analysed")
    return w.text
