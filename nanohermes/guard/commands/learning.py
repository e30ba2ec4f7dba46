"""What the catalogue says an "always" answer learns of one simple command: the words that
name what runs, its options and its other arguments (`learned_shape`: `git log` and
`--oneline`, `python -m pytest` and `-x`), and whether only the exact line may be learned
(`exact_only`: sed, find, env, `git -C x push` ...)."""

from __future__ import annotations

import posixpath
import re

from nanohermes.guard.commands.entry import Options
from nanohermes.guard.commands.running import dangerous_assign
from nanohermes.guard.commands.table import lookup
from nanohermes.guard.shellwords import SimpleCommand, Word

# A subcommand word: `run`, `build`, `ls-files`, `db:migrate`; never a path, an option or a quoted word.
_SUBWORD = re.compile(r"[a-z][a-z0-9]*(?:[-_:][a-z0-9]+)*")
# (the words naming what runs as written, its options, its other arguments)
Shape = tuple[list[str], list[Word], list[Word]]


def learned_shape(cmd: SimpleCommand) -> Shape | None:
    """How a learned rule sees a command: the words naming what runs (as written, after the
    assignments that change what runs), its options and its other arguments. None when no
    rule short of the exact line may stand for it (an interpreter reading code from a flag or
    stdin, a bare tool of subcommands)."""
    words = cmd.words
    if not words or words[0].dynamic:
        return None
    raws = [w.raw or w.text for w in words]
    entry = lookup(posixpath.basename(words[0].text))
    shape = entry.learn if entry is not None else "program"
    n = _script_words(words) if shape == "script" else _subcommand_words(words, raws) if shape == "subcommands" else 1
    if n is None:
        return None
    rest = words[n:]
    options = [w for w in rest if w.text.startswith("-")]
    lead = [a for a in cmd.assigns if dangerous_assign(a)]
    return [*lead, *raws[:n]], options, [w for w in rest if not w.text.startswith("-")]


def _script_words(words: tuple[Word, ...]) -> int | None:
    """An interpreter and its script (2 words) or `-m module` (3); None for no script (stdin),
    or -c, -e, -p, -I, -r ...: flags that run or load code."""
    if len(words) < 2 or (words[1].text.startswith("-") and words[1].text != "-m"):
        return None
    n = 3 if words[1].text == "-m" else 2
    return n if n <= len(words) else None


def _subcommand_words(words: tuple[Word, ...], raws: list[str]) -> int | None:
    """A tool and up to two subcommand words written plainly; None for `git -C x push` or a
    bare `git`, where a prefix would be the whole tool."""
    n = 1
    while n < len(words) and n < 3 and _SUBWORD.fullmatch(words[n].text) and raws[n] == words[n].text:
        n += 1
    return n if n > 1 else None


def exact_only(cmd: SimpleCommand) -> bool:
    """May "always" learn only the exact line? For a program whose entry says so (sed, find,
    env, interpreters' flags ...), one run through a wrapper or with appended arguments
    (xargs); for git and sort, when an option (or a global option) points them at other
    programs, config or files."""
    entry = lookup(posixpath.basename(cmd.name))
    if entry is not None and isinstance(entry.exact, Options):
        leading = entry.leading.split(cmd.argv)[0] if entry.leading is not None else []
        return bool(leading) or entry.exact.used(cmd.argv[1:])
    return (entry is not None and entry.exact is True) or bool(cmd.wrappers) or cmd.open_args
