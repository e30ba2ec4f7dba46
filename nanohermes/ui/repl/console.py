"""The REPL's console: rich's, with every control character of what it draws escaped, and a
terminal that cannot encode a character shown "?" rather than crashing."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from nanohermes.common.controls import escape_controls, has_controls


class InertConsole(Console):
    """The REPL's console: the text of everything it draws (an answer, a warning naming a
    project's file, an error quoting a server) shows control characters escaped
    (`controls.escape_controls`), whatever renderable carries it: rich passes ESC through. Text
    is escaped before it is laid out (so a line wraps as it is shown); a segment some other
    renderable yields is escaped as it comes. Rich's own control segments (the live display's
    cursor moves) are kept, and its colours are added after this, when the segments are written."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterator[Segment]:
        if isinstance(renderable, Text) and has_controls(renderable.plain):
            renderable = self._inert(renderable)
        elif isinstance(renderable, str) and has_controls(renderable):
            renderable = escape_controls(renderable)
        for segment in super().render(renderable, options):
            if segment.control is None and has_controls(segment.text):
                yield Segment(escape_controls(segment.text), segment.style)
            else:
                yield segment

    def _inert(self, text: Text) -> Text:
        """`text` with its control characters escaped, each piece keeping its style."""
        out = Text(justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end,
                   tab_size=text.tab_size)
        for piece in text.render(self, end=""):
            out.append(escape_controls(piece.text), piece.style)
        return out


def make_console() -> Console:
    # A terminal that cannot encode a character shows "?" instead of crashing.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a text file's, not every stream's
        with contextlib.suppress(Exception):
            if reconfigure is not None:
                reconfigure(errors="replace")
    return InertConsole(highlight=False)


def can_encode(text: str) -> bool:
    """Whether the terminal's encoding can show `text` (the prompt's arrow, say)."""
    try:
        text.encode(sys.stdout.encoding or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False
