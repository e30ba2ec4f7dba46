"""The characters no person should be shown raw, and how they are shown instead: the one
definition the model wire (server text), the `-p` output (`inert_output`) and the REPL's
console share. It imports nothing of nanohermes, so the REPL's first prompt and every output
path can use it at no cost.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

# C0 controls but tab and newline, DEL and the C1 range, which a terminal would act on; and the
# invisible format characters that change how a line reads unseen: bidi embeddings,
# overrides, isolates and marks (text shown in another order than it runs), the zero width
# space, the word joiner and invisible operators, the BOM. Not the zero width (non-)joiners,
# which emoji and several scripts need to be drawn right and which hide nothing.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
                      "\u2066-\u2069\ufeff]")


def _escape_one(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    return {"\r": "\\r", "\x1b": "\\x1b"}.get(ch, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_controls(text: str, *, newlines: bool = False) -> str:
    """`text` with every control character written out (`\\x1b[2K`, `\\r`, `\\u202e`), so a
    terminal shows it instead of acting on it; `newlines` escapes line breaks too (one-line views)."""
    out = CONTROL.sub(_escape_one, text)
    return out.replace("\n", "\\n") if newlines else out


def has_controls(text: str) -> bool:
    """Would a terminal act on (or hide) part of `text`?"""
    return CONTROL.search(text) is not None


def inert_json(document: str) -> str:
    """A JSON document (as `json.dumps` writes it) with the control characters JSON leaves raw
    (DEL, the C1 range, the invisible format characters) written as `\\uXXXX` escapes: it reads
    back to exactly the same values, and shows inert on a terminal. Outside strings JSON holds
    none of them, so every one replaced is inside a string."""
    return CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", document)


class InertWriter:
    """A text stream whose every write shows control characters escaped, newlines and tabs
    kept: the model's text, a tool's name, a path from the workspace, a server's message can
    set no clipboard (OSC 52), title (OSC 2) or colour, move no cursor and hide nothing. Each
    character is escaped on its own, so a sequence split across writes is escaped too.
    Everything else (isatty, fileno, flush, encoding) is the wrapped stream's."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(escape_controls(text) if has_controls(text) else text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def inert_output(*, stdout: bool) -> Iterator[None]:
    """sys.stderr, and with `stdout` sys.stdout when it is a terminal, write inertly until the
    block ends. stderr is for people wherever it goes (a terminal, a log read later); stdout
    carries the answer, which a pipe or a file gets exactly as the model wrote it."""
    saved = sys.stdout, sys.stderr
    sys.stderr = InertWriter(sys.stderr)
    if stdout and _is_terminal(sys.stdout):
        sys.stdout = InertWriter(sys.stdout)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # a closed stream
        return False
