"""What both patch formats share: the error, a file's outcome computed without touching the
disk, a file's text as lines that keep their endings, the working copy one patch's sections
see, and the added lines made to follow the file after a loose match."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nanohermes.tools.matching import follow_quotes, keep_typography, reindent


class PatchError(ValueError):
    """The diff cannot be parsed or does not apply; the text says where and what next."""


@dataclass
class Outcome:
    """What one file section does, computed without touching the disk."""

    kind: str  # create | modify | delete | rename | copy
    old_path: str | None
    new_path: str | None
    old_text: str | None
    new_text: str | None
    executable: bool | None = None  # set or clear the exec bits; None: leave as is
    hunks: int = 0
    notes: list[str] = field(default_factory=list)


Line = tuple[str, str]  # (content, eol) with eol "\n", "\r\n" or "" (last line without newline)


def lines_with_eol(text: str) -> list[Line]:
    """`text` as lines with their endings; a last line without a newline has "" for its ending."""
    if not text:
        return []
    parts = text.split("\n")
    final = text.endswith("\n")
    if final:
        parts.pop()
    out: list[Line] = [(p[:-1], "\r\n") if p.endswith("\r") else (p, "\n") for p in parts]
    if not final:
        out[-1] = (parts[-1], "")
    return out


def dominant_eol(lines: list[Line]) -> str:
    """The line ending most of `lines` have (LF on a tie)."""
    crlf = sum(1 for _, e in lines if e == "\r\n")
    lf = sum(1 for _, e in lines if e == "\n")
    return "\r\n" if crlf > lf else "\n"


def clip(s: str, n: int = 200) -> str:
    """`s` cut to `n` characters for an error message, the cut marked with …."""
    return s if len(s) <= n else s[:n] + "…"


def working_copy(read: Callable[[str], str | None]) -> tuple[dict[str, str | None], Callable[[str], str | None]]:
    """The files as earlier sections of one patch left them (None: absent), each read from
    `read` on first use; write a path's new text into the dict."""
    state: dict[str, str | None] = {}

    def current(path: str) -> str | None:
        if path not in state:
            state[path] = read(path)
        return state[path]

    return state, current


def added_lines(lines: list[tuple[str, str]], content: list[str], pos: int, tier: int) -> tuple[list[str], str]:
    """The + lines of a hunk matched at `pos`, and what was changed in them ("" for nothing):
    after a match that ignored indentation, the indentation translated to the file's (see
    matching.reindent); after one that mapped punctuation, the file's typography kept where they
    leave its text as it was and their other quotes written as the file's."""
    plus = [t for tag, t in lines if tag == "+"]
    if tier < 2:
        return plus, ""
    old = [t for tag, t in lines if tag != "+"]
    have = content[pos:pos + len(old)]  # the file may end first
    fixed = reindent(list(zip(have, old, strict=False)), plus)
    changed = ["its + lines re-indented like the file"] if fixed != plus else []
    if tier >= 3:
        quoted, note = follow_quotes("\n".join(have), "\n".join(old), "\n".join(fixed))
        if note:
            fixed = quoted.split("\n")
            changed.append(note.replace("new text's", "its + lines'"))
        kept, note = keep_typography("\n".join(have), "\n".join(old), "\n".join(fixed))
        if note:
            fixed = kept.split("\n")
            changed.append(note.replace("the new text leaves", "they leave"))
    return fixed, ", ".join(changed)


__all__ = ["Line", "Outcome", "PatchError", "added_lines", "clip", "dominant_eol",
           "lines_with_eol", "working_copy"]
