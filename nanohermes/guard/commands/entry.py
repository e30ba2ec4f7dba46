"""The shape of one entry of the catalogue of commands (`Command`) and of the facts it holds:
options as a program reads them (`Options`), the options a program takes before its
subcommand (`Leading`), which words name the files it reads (`Reads`) and how it runs another
command given on its line (`Wraps`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal

from nanohermes.guard.shellwords import Word

# A finer check of a read-only command's arguments (argv after the name): True when they
# keep it read-only (sed's script prints only, awk's program runs nothing).
ArgCheck = Callable[[tuple[str, ...]], bool]
# Why what a builtin does with these arguments is not modelled exactly, or "": (its name, its words).
Problem = Callable[[str, tuple[Word, ...]], str]


@dataclass(frozen=True)
class Options:
    """A set of options, spelled as the program's manual spells them and matched as the
    program reads them: `--name` alone or as `--name=value`; `-x` alone or inside a group of
    short options (`-rx`), or only alone when `groups` is False; a longer word of one dash
    (find's `-exec`) as that word only; and a spelling ending in `*` as any word that begins
    so (`--output*`). Reading stops at `--` unless `through`."""

    spelled: tuple[str, ...]
    groups: bool = True
    through: bool = False

    def used(self, args: Iterable[str]) -> bool:
        """Is one of the options among `args`?"""
        for a in args:
            if a == "--" and not self.through:
                return False
            if any(self._is(s, a) for s in self.spelled):
                return True
        return False

    def _is(self, spelled: str, a: str) -> bool:
        if spelled.endswith("*"):
            return a.startswith(spelled[:-1])
        if spelled.startswith("--"):
            return a.split("=", 1)[0] == spelled
        if len(spelled) == 2 and self.groups:
            return a.startswith("-") and not a.startswith("--") and spelled[1] in a[1:]
        return a == spelled


@dataclass(frozen=True)
class Leading:
    """The options a program takes before its subcommand (git's global options). The
    `harmless` ones change only its output and how it reads pathspecs; any other points it at
    another repository, config or program, which the analysis does not follow."""

    harmless: frozenset[str]
    valued: frozenset[str] = frozenset()  # they take the next word as their value, unless written `--x=v`
    alone: frozenset[str] = frozenset()  # valued ones that take no next word (`--exec-path` alone prints a path)

    def split(self, argv: tuple[str, ...]) -> tuple[list[str], int]:
        """(the leading options of `argv`, the program's own name first, and the index of its
        subcommand: len(argv) when there is none)."""
        opts: list[str] = []
        i = 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
            a = argv[i]
            opts.append(a)
            name = a.split("=", 1)[0]
            i += 2 if name in self.valued and "=" not in a and name not in self.alone else 1
        return opts, i

    def risky(self, opts: list[str]) -> list[str]:
        """The options among `opts` that are not harmless."""
        return [o for o in opts if o not in self.harmless]


# How a command reads the files its words name:
# - "contents": it prints what is in them: its operands and the values of its `--option=value`
#   options (what every command not known otherwise is taken to do);
# - "search": as "contents", but its first operand is the pattern unless -e, -f, --regexp or
#   --file give one;
# - "names": it prints only names, sizes, hashes or types, except through the options below;
# - "starts": find: its starting points, read whole when a command it runs prints files;
# - "words": git's other subcommands: every word that is not an option, never a folder whole.
ReadKind = Literal["contents", "search", "names", "starts", "words"]


@dataclass(frozen=True, kw_only=True)
class Reads:
    """Which of a command's words name files whose contents it may print (where the path
    rules look for secret files and read rules)."""

    kind: ReadKind = "contents"
    # It reads folders whole: always, or with one of these options (`grep -r`).
    recursive: bool | Options = False
    # "names": options whose value is a file it reads (`date -f FILE`), and options that make
    # every operand one (`sha256sum -c FILE`): what it prints back in errors is in the file.
    option_files: frozenset[str] = frozenset()
    operands_with: frozenset[str] = frozenset()

    @property
    def contents(self) -> bool:
        """Does it print what is in the files it is given?"""
        return self.kind != "names"


# How a command runs the command given on its line: after its options ("options": nice,
# timeout, stdbuf, ...), after its options and assignments ("env"), replacing the shell
# ("exec"), with arguments appended at run time ("xargs"), a script given as text ("shell":
# bash -c, "eval"), find's -exec ("find"), or in a way not followed ("runner": sudo, watch, ...).
WrapKind = Literal["options", "env", "exec", "xargs", "shell", "eval", "find", "runner"]


@dataclass(frozen=True, kw_only=True)
class Wraps:
    """How a command runs another one, so the analysis judges the command that really runs."""

    kind: WrapKind = "options"
    options: Mapping[str, bool] = field(default_factory=dict)  # its options -> takes a separate value?
    skips: int = 0  # words between its options and the command (timeout's duration)
    numeric: bool = False  # `-5` is one of its options (nice)
    lookup: frozenset[str] = frozenset()  # a first option that makes it a lookup, not a run (`command -v`)
    why: str = ""  # why the command it runs is not modelled exactly ("" when it runs as written)


# What names what runs, for a rule an "always" answer learns: the program alone
# (`pytest -q <args>`), the program and up to two subcommand words (`git log <args>`,
# `npm run build <args>`), or an interpreter and its script or `-m module` (`python -m pytest <args>`).
LearnShape = Literal["program", "subcommands", "script"]
# Where a program reads code from standard input: never, when no script or program is given
# on the line (an interpreter), when no SQL follows the database (sqlite3), or always (ed).
StdinCode = Literal["never", "without a script", "without SQL", "always"]


@dataclass(frozen=True)
class Command:
    """One command's entry: everything the permission checks know about it.

    The analyser reads `read_only`, `unsafe`, `check`, `dynamic_ok`, `runs` and the nested
    `subcommands`; the shell analysis reads `wraps`, `problem` and `writes`; the path rules read
    `reads` and `writes`; the rules an "always" answer learns read `learn`, `exact` and
    `stdin_code`. An entry with `subcommands` is judged by the entry of the subcommand used
    (after the `leading` options); a subcommand not listed is no read-only one."""

    name: str
    _: KW_ONLY
    # -- may it run without asking: read-only (it changes nothing and runs nothing else), unless
    # one of the `unsafe` options is used or the `check` of its arguments fails.
    read_only: bool = False
    unsafe: Options | None = None
    check: ArgCheck | None = None
    dynamic_ok: bool = False  # words known only at run time cannot change what it does (echo, test)
    runs: bool | Options = False  # runs commands it is given (always, or with these options): not analysed
    leading: Leading | None = None
    subcommands: Mapping[str, Command] = field(default_factory=dict)
    # -- what it reads and writes. No `reads`: it prints what is in the files it is given
    # ("contents"); a subcommand without one reads as its program's entry says.
    reads: Reads | None = None
    writes: bool = False  # every operand is a file it writes (tee)
    # -- how the shell analysis sees it
    wraps: Wraps | None = None
    problem: Problem | None = None
    # -- what an "always" answer learns: the shape, and whether the exact line is learned
    # instead (always, or when one of these options or a `leading` option is given).
    learn: LearnShape = "program"
    exact: bool | Options = False
    stdin_code: StdinCode = "never"

    @property
    def prints(self) -> bool:
        """Does it print what is in the files it is given?"""
        return self.reads is None or self.reads.contents

    @property
    def plain(self) -> bool:
        """Read-only whatever its arguments say."""
        return self.read_only and self.unsafe is None and self.check is None and not self.subcommands

    def subcommand(self, args: tuple[str, ...]) -> tuple[Command | None, tuple[str, ...]]:
        """The entry of the subcommand `args` (argv after the name) use, after the leading
        options, and the arguments after it; (None, ()) when there is none or it is not listed."""
        i = self.leading.split(("", *args))[1] - 1 if self.leading else 0
        if i >= len(args) or args[i] not in self.subcommands:
            return None, ()
        return self.subcommands[args[i]], args[i + 1:]

    def allows(self, args: tuple[str, ...]) -> bool:
        """Do these arguments keep a read-only command read-only?"""
        if not self.read_only or (self.unsafe is not None and self.unsafe.used(args)):
            return False
        if self.check is not None and not self.check(args):
            return False
        if self.leading is not None and self.leading.risky(self.leading.split(("", *args))[0]):
            return False
        if not self.subcommands:
            return True
        sub, rest = self.subcommand(args)
        return sub is not None and sub.allows(rest)

    def runs_given(self, args: tuple[str, ...]) -> bool:
        """Does it, or the subcommand `args` use, run commands it is given?"""
        if self.runs is True or (isinstance(self.runs, Options) and self.runs.used(args)):
            return True
        sub = self.subcommands.get(args[0]) if args else None
        return sub is not None and sub.runs_given(args[1:])
