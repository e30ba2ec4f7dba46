"""The argument checks of read-only commands whose arguments are a language of their own (a
sed script, an awk program) or whose operands change what they do (uniq's second operand is
a file it writes): each reads the arguments as the program parses them and says whether they
keep the command read-only."""

from __future__ import annotations

import re

from nanohermes.guard.commands.entry import ArgCheck


def positionals(most: int, *valued: str) -> ArgCheck:
    """At most `most` operands; the options in `valued` (`f`, `skip-fields`) take the next word."""
    def check(args: tuple[str, ...]) -> bool:
        n = 0
        skip = False
        for a in args:
            if skip:
                skip = False
            elif a.startswith("-") and a != "-":
                skip = a.lstrip("-") in valued
            else:
                n += 1
        return n <= most

    return check


# -- sed: no -i or script file, and a script of printing commands only ----------------------

_SED_CMD = re.compile(
    r"""^\s*(?:(?:\d+|\$|/(?:[^/\\]|\\.)*/)(?:\s*,\s*(?:\d+|\$|/(?:[^/\\]|\\.)*/))?)?\s*!?\s*"""
    r"""(?:[pdqQ=nNgGhHxl]|s(?P<d>[^\w\s\\])(?:(?!(?P=d))[^\\]|\\.)*(?P=d)(?:(?!(?P=d))[^\\]|\\.)*(?P=d)[gpiImM0-9]*)?\s*$""",
    re.S,
)
# sed's options: -> takes a value? (-i, -f, --in-place, --file and unknown ones end the check)
_SED_SHORT = {"n": False, "E": False, "r": False, "s": False, "u": False, "z": False, "b": False,
              "e": True, "l": True}
_SED_LONG = {"--quiet": False, "--silent": False, "--regexp-extended": False, "--separate": False,
             "--unbuffered": False, "--null-data": False, "--posix": False, "--debug": False, "--sandbox": False,
             "--binary": False, "--follow-symlinks": False, "--expression": True, "--line-length": True}
# An option sed's check does not follow; else (the script it gives or None, where the next word is).
_Taken = tuple[str | None, int] | None


def sed(args: tuple[str, ...]) -> bool:
    """sed without -i or a script file, and with a script of only printing commands (no w,
    W, e, r, R). Options are parsed as sed parses them: `-l 9` takes 9, `-ne p` takes p."""
    scripts = _sed_scripts(args)
    return bool(scripts) and all(all(_SED_CMD.match(part) for part in re.split(r"[;\n]", s)) for s in scripts or ())


def _sed_scripts(args: tuple[str, ...]) -> list[str] | None:
    """The scripts sed would run (given by -e or --expression, else its first operand), or
    None when an option is not followed."""
    scripts: list[str] = []
    explicit = False
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            if not explicit and i < len(args):
                scripts.append(args[i])
            break
        if a.startswith("-") and a != "-":
            taken = _sed_long(a, args, i) if a.startswith("--") else _sed_short(a, args, i)
            if taken is None:
                return None
            script, i = taken
            if script is not None:
                scripts.append(script)
                explicit = True
        elif not explicit and not scripts:
            scripts.append(a)  # the first operand is the script
    return scripts


def _sed_long(a: str, args: tuple[str, ...], i: int) -> _Taken:
    name, eq, value = a.partition("=")
    if name not in _SED_LONG:
        return None  # --in-place, --file and anything unknown
    if not _SED_LONG[name]:
        return None, i
    if not eq:
        if i >= len(args):
            return None
        value, i = args[i], i + 1
    return (value if name == "--expression" else None), i


def _sed_short(a: str, args: tuple[str, ...], i: int) -> _Taken:
    for j, c in enumerate(a[1:], 1):
        if c not in _SED_SHORT:
            return None  # -i, -f and anything unknown
        if _SED_SHORT[c]:
            value = a[j + 1:]
            if not value:
                if i >= len(args):
                    return None
                value, i = args[i], i + 1
            return (value if c == "e" else None), i
    return None, i


# -- awk: inline programs that run nothing ---------------------------------------------------

_AWK_VALUE = frozenset({"-F", "-v", "--field-separator", "--assign"})
_AWK_FLAGS = frozenset({"-b", "--characters-as-bytes", "-c", "--traditional", "-P", "--posix", "-r", "--re-interval",
                        "-S", "--sandbox", "-N", "--use-lc-numeric", "-s", "--no-optimize", "-C", "--copyright",
                        "-V", "--version", "-h", "--help", "-n", "--non-decimal-data"})
_AWK_RISKY = re.compile(r"system|getline|close|fflush|[|>@]|ENVIRON|PROCINFO|\bextension\b")


def awk(args: tuple[str, ...]) -> bool:
    """awk with inline programs that cannot run commands, write files or load code; options
    outside a short list (`-f`, `-i`, `-l`, `-o`, `-p`, `-d`, `-W` ...) end the check."""
    programs = _awk_programs(args)
    return programs is not None and all(not _AWK_RISKY.search(p) for p in programs)


def _awk_programs(args: tuple[str, ...]) -> list[str] | None:
    """The programs awk would run (given by -e or --source, else its first operand), or None
    when an option is not followed or there is none."""
    programs: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        step = _awk_option(a, args, i, programs)
        if not step:
            return None
        i += step
    if not programs:
        if i >= len(args):
            return None
        programs.append(args[i])
    return programs


def _awk_option(a: str, args: tuple[str, ...], i: int, programs: list[str]) -> int:
    """How many words the option `a` (at `i`) takes, 0 for one not followed; a program it
    gives joins `programs`."""
    name = a.split("=", 1)[0]
    if name in _AWK_VALUE:
        return 1 if "=" in a else 2
    if a[:2] in ("-F", "-v") and len(a) > 2:
        return 1
    if name in ("-e", "--source"):
        if "=" in a:
            programs.append(a.split("=", 1)[1])
            return 1
        if i + 1 < len(args):
            programs.append(args[i + 1])
            return 2
        return 0
    return 1 if a in _AWK_FLAGS else 0
