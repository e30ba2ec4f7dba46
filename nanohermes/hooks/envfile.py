"""What a SessionStart hook leaves in `$CLAUDE_ENV_FILE` for later commands: `export NAME=value`
lines, as Claude Code documents them (and `declare -x NAME="value"`, the form `export -p`
prints, which hooks diffing their environment append).

The file is read, never run: each value is read as the shell would read that one word
(quotes, backslashes, `$NAME` and `${NAME}` from the environment so far, a leading `~`), and
a line that needs the shell to run something (`$(...)`, backticks, `source`, `nvm use`) is
named with its line number and left out, so what a hook wrote can never start a program
here. `unset NAME` removes a variable set before it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass
class Exports:
    """The variables a file sets (in order; None: unset) and why lines were left out."""

    values: dict[str, str | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class _Unreadable(ValueError):
    pass


def load_exports(path: Path, cap_bytes: int, before: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The variables exported so far (`before`) with what the file at `path` sets and unsets,
    read up to `cap_bytes` (whole lines), and what could not be read, each line named."""
    problems: list[str] = []
    try:
        with open(path, "rb") as f:
            data = f.read(cap_bytes + 1)
    except OSError:
        data = b""
    if len(data) > cap_bytes:
        data = data[:cap_bytes].rpartition(b"\n")[0]
        kept = len(data.splitlines())
        problems.append(f"longer than {cap_bytes} bytes (limits.hook_output_bytes); only its first "
                        f"{kept} line{'s were' if kept != 1 else ' was'} read")
    exports = read_exports(data.decode("utf-8", "replace"), {**os.environ, **before})
    problems += [f"{p}; that line was left out" for p in exports.problems]
    values = dict(before)
    for name, value in exports.values.items():
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value
    return values, problems


def read_exports(text: str, environ: Mapping[str, str]) -> Exports:
    """The assignments of `text`, each value expanded against `environ` and what the lines
    before it set."""
    out = Exports()
    env = dict(environ)
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            for name, value in _assignments(line, env):
                out.values[name] = value
                if value is None:
                    env.pop(name, None)
                else:
                    env[name] = value
        except _Unreadable as e:
            out.problems.append(f"line {number}: {e}")
    return out


def _assignments(line: str, env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    if "$(" in line or "`" in line:
        raise _Unreadable("command substitution is not run; write the value out")
    words = _words(line)
    if words[0] == "unset":
        if not all(_NAME.fullmatch(w) for w in words[1:]):
            raise _Unreadable("`unset` takes variable names")
        return [(w, None) for w in words[1:]]
    if words[0] == "export":
        words = words[1:]
    elif words[:2] in (["declare", "-x"], ["typeset", "-x"]):
        words = words[2:]
    out: list[tuple[str, str | None]] = []
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not _NAME.fullmatch(name):
            raise _Unreadable("only `export NAME=value` lines are read (a command here would need the shell to run it)")
        out.append((name, _value(value, env)))
    return out


def _words(line: str) -> list[str]:
    """The line split at blanks outside quotes, each word as written (quotes kept)."""
    words: list[str] = []
    word: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and quote != "'" and i + 1 < len(line):
            word.append(line[i:i + 2])
            i += 2
            continue
        if c == "$" and line.startswith("{", i + 1) and "}" in line[i:]:
            end = line.index("}", i) + 1
            word.append(line[i:end])
            i = end
            continue
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in " \t":
            if word:
                words.append("".join(word))
                word = []
            i += 1
            continue
        elif c in ";&|<>(){}":
            raise _Unreadable(f"`{c}` makes it a shell command, which is not run; write one `export` a line")
        word.append(c)
        i += 1
    if quote:
        raise _Unreadable(f"unterminated {quote}")
    return [*words, "".join(word)] if word else words


def _value(word: str, env: Mapping[str, str]) -> str:
    """One shell word after `NAME=`: quotes removed, `$NAME` expanded except inside '...'."""
    if word.startswith("~") and (len(word) == 1 or word[1] == "/"):
        word = os.path.expanduser("~") + word[1:]
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(word):
        c = word[i]
        if c == quote or (not quote and c in "'\""):
            quote = "" if quote else c
            i += 1
        elif c == "\\" and quote != "'" and i + 1 < len(word):
            nxt = word[i + 1]
            out.append(nxt if not quote or nxt in '$"\\' else c + nxt)
            i += 2
        elif c == "$" and quote != "'" and (m := _VAR.match(word, i)):
            out.append(env.get(m.group(1) or m.group(2), ""))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)
