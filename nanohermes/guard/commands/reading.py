"""What the catalogue says a simple command reads: the words that may name files it prints,
and whether it reads folders whole (`read_operands`, for the path rules' look on disk); the
files its options read (`option_reads`); and whether, by the names alone, it prints a file on
the secret list or a process's environment (`reads_secret`)."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import replace

from nanohermes.guard.commands.entry import Command, Options, Reads
from nanohermes.guard.commands.running import prints_files
from nanohermes.guard.commands.table import FIND_RUNS, lookup
from nanohermes.guard.secrets import is_secret
from nanohermes.guard.shellwords import SimpleCommand, Word

_CONTENTS = Reads()
_HERE = Word(".", ".")  # with no folder named, a command reading folders whole reads the current one
# What a command reads, given how its entry says it reads and the words after its name (or
# after its subcommand): (the words naming files, whether it reads folders whole).
_Reader = Callable[[SimpleCommand, Reads, list[Word]], tuple[list[Word], bool]]


def read_operands(cmd: SimpleCommand) -> tuple[list[Word], bool]:
    """(the words that may name files this command prints, whether it reads folders whole):
    its input redirections, and what its entry's `reads` names."""
    words: list[Word] = [r.target for r in cmd.redirects if r.op in ("<", "<>") and r.target is not None]
    if not cmd.words:
        return words, False
    reads, args = _how_it_reads(cmd)
    found, recursive = _READERS[reads.kind](cmd, reads, args)
    return words + found, recursive


def _how_it_reads(cmd: SimpleCommand) -> tuple[Reads, list[Word]]:
    """The `reads` of the command's entry, or of the subcommand it runs when that one has its
    own (`git grep`), with the words after the name or the subcommand."""
    entry = lookup(posixpath.basename(cmd.name))
    args = list(cmd.words[1:])
    if entry is None:
        return _CONTENTS, args
    sub, rest = entry.subcommand(cmd.argv[1:]) if entry.subcommands else (None, ())
    if sub is not None and sub.reads is not None:
        return sub.reads, args[len(args) - len(rest):]
    return entry.reads or _CONTENTS, args


def _contents(cmd: SimpleCommand, reads: Reads, args: list[Word]) -> tuple[list[Word], bool]:
    """Its operands and the values of its `--option=value` options; a searcher's first operand
    is its pattern unless an option gives one."""
    recursive = cmd.open_args or reads.recursive is True or \
        (isinstance(reads.recursive, Options) and reads.recursive.used(w.text for w in args))
    values, positionals, pattern_given = _operands(args)
    if reads.kind == "search" and not pattern_given and positionals:
        positionals = positionals[1:]  # the pattern
    return values + positionals + ([_HERE] if recursive and not positionals else []), recursive


def _operands(args: list[Word]) -> tuple[list[Word], list[Word], bool]:
    """(the values of `--option=value` options, the operands, whether an option gives a
    searcher's pattern: -e, -f, --regexp, --file)."""
    values: list[Word] = []
    positionals: list[Word] = []
    pattern_given = False
    for w in args:
        if w.text.startswith("-") and "=" in w.text:
            value = w.text.split("=", 1)[1]
            pattern_given = pattern_given or w.text.startswith(("--regexp=", "--file="))
            values.append(Word(value, value, glob=w.glob))
        elif w.text.startswith("-") and w.text != "-":
            pattern_given = pattern_given or w.text in ("-e", "-f", "--regexp", "--file")
        else:
            positionals.append(w)
    return values, positionals, pattern_given


def _names(cmd: SimpleCommand, reads: Reads, args: list[Word]) -> tuple[list[Word], bool]:
    return _option_files(reads, args), False


def _words(cmd: SimpleCommand, reads: Reads, args: list[Word]) -> tuple[list[Word], bool]:
    return [w for w in args if not w.text.startswith("-")], False


def _starts(cmd: SimpleCommand, reads: Reads, args: list[Word]) -> tuple[list[Word], bool]:
    """find's starting points, read whole, when a command it runs (`-exec CMD`) prints files."""
    runs = [args[i + 1] for i, w in enumerate(args[:-1]) if w.text in FIND_RUNS]
    if not any(prints_files(posixpath.basename(r.text)) for r in runs):
        return [], False
    starts: list[Word] = []
    for w in args:
        if w.text.startswith(("-", "(", "!")):
            break
        starts.append(w)
    return starts or [_HERE], True


_READERS: dict[str, _Reader] = {"contents": _contents, "search": _contents, "names": _names, "starts": _starts,
                                "words": _words}


def option_reads(cmd: SimpleCommand) -> list[Word]:
    """The words a command that prints only names or hashes reads as files because of its
    options (its entry's `option_files` and `operands_with`: `date -f FILE`, `sha256sum -c FILE`)."""
    return _option_reads(lookup(posixpath.basename(cmd.name)) if cmd.words else None, cmd)


def _option_reads(entry: Command | None, cmd: SimpleCommand) -> list[Word]:
    if entry is None or entry.reads is None or entry.reads.kind != "names":
        return []
    return _option_files(entry.reads, list(cmd.words[1:]))


def _option_files(reads: Reads, words: list[Word]) -> list[Word]:
    found: list[Word] = []
    operands: list[Word] = []
    whole = False
    i = 0
    while i < len(words):
        text = words[i].text
        if text == "--":
            operands += words[i + 1:]
            break
        if not text.startswith("-") or text == "-" or \
                (text.startswith("--") and text.partition("=")[0] not in reads.option_files | reads.operands_with):
            operands.append(words[i])
            i += 1
            continue
        values, i, makes_whole = _option(reads, words, i)
        found += values
        whole = whole or makes_whole
    return found + (operands if whole else [])


def _option(reads: Reads, words: list[Word], i: int) -> tuple[list[Word], int, bool]:
    """The file the option at `i` names (its value: the rest of the word or the next word),
    where the next option starts, and whether it makes every operand a file it reads."""
    w = words[i]
    if w.text.startswith("--"):
        opt, eq, value = w.text.partition("=")
        if opt not in reads.option_files:
            return [], i + 1, True
        return ([replace(w, text=value)], i + 1, False) if eq else (words[i + 1:i + 2], i + 2, False)
    whole = False
    for j, c in enumerate(w.text[1:], 1):
        whole = whole or f"-{c}" in reads.operands_with
        if f"-{c}" in reads.option_files:
            rest = w.text[j + 1:]
            return ([replace(w, text=rest)], i + 1, whole) if rest else (words[i + 1:i + 2], i + 2, whole)
    return [], i + 1, whole


_ENVIRON = re.compile(r"/proc/[^/]+/(?:task/[^/]+/)?environ\Z")


def _environ(w: Word | None) -> bool:
    """A process's environment (nanohermes's own holds its keys), by any spelling or glob."""
    if w is None:
        return False
    return bool(_ENVIRON.search(w.text)) or (w.glob and fnmatch.fnmatchcase("/proc/1/environ", w.text))


def reads_secret(cmd: SimpleCommand, patterns: tuple[str, ...]) -> bool:
    """Would the command print the contents of a file on the secret list, or a process's
    environment? By the names as written; the path rules look on disk (links, globs, folders)."""
    entry = lookup(posixpath.basename(cmd.name)) if cmd.words else None
    prints = bool(cmd.words) and (entry is None or entry.prints)
    # What it reads, the words besides: its input, a list of names read from a file, the files
    # its options read (`date -f FILE` prints each line of FILE back in an error).
    named = [*(r.target for r in cmd.redirects if r.op in ("<", "<>") and r.target is not None),
             *_listed_names(cmd), *_option_reads(entry, cmd)]
    if any(map(_environ, named)) or (prints and any(map(_environ, cmd.words[1:]))):
        return True
    if not patterns:
        return False
    if any(is_secret(w.text, patterns, glob=w.glob) for w in named):
        return True
    return prints and any(_secret_part(w, patterns) for w in cmd.words[1:])


def _listed_names(cmd: SimpleCommand) -> list[Word]:
    """A list of file names read from a file: the names, that is the contents, are printed in
    error messages (`du --files0-from=.env`)."""
    out: list[Word] = []
    for i, w in enumerate(cmd.words):
        if w.text.startswith("--files0-from="):
            out.append(replace(w, text=w.text.split("=", 1)[1]))
        elif w.text == "--files0-from" and i + 1 < len(cmd.words):
            out.append(cmd.words[i + 1])
    return out


def _secret_part(w: Word, patterns: tuple[str, ...]) -> bool:
    """A word naming a secret file, whole or as a part after `=` or `:` (`--file=.env`, `HEAD:.env`)."""
    parts = re.split(r"[=:]", w.text) if "=" in w.text or ":" in w.text else [w.text]
    return any(part and is_secret(part, patterns, glob=w.glob) for part in parts)
