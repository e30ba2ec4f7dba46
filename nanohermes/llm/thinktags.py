"""Thinking a model writes into its answer's text between tags (`<think>...</think>`, and the
other tags of `THINK_TAGS`), told apart from the answer as it streams: people see it as
thinking, and the answer a turn ends with (`-p`'s text, json's `result`) is without it. The
history keeps the message as the model sent it.

A block counts where its opening tag starts a line (a prose mention of the tag is answer): a
model's template puts it first, or first after a tool call's result. A closing tag with no
opening one (a template that put the opening tag in the prompt) is not told apart: the text
before it streamed as answer before the tag came. `llm.textfinders.drafts` reads the same tags
for calls in thinking.
"""

from __future__ import annotations

from collections.abc import Callable

# (opening, closing) of thinking written into the answer's text.
THINK_TAGS = (("<think>", "</think>"), ("<seed:think>", "</seed:think>"), ("<thinking>", "</thinking>"),
              ("[THINK]", "[/THINK]"), ("<|channel>", "<channel|>"))
_PREFIXES = frozenset(tag[:n] for pair in THINK_TAGS for tag in pair for n in range(1, len(tag)))


class ThinkSplit:
    """Streamed answer text, its thinking blocks sent to `reasoning` (tags left out) and the
    rest to `text`; a piece that may begin a tag is held until the next one (or `flush`)."""

    def __init__(self, text: Callable[[str], None], reasoning: Callable[[str], None] | None) -> None:
        self.text = text
        self.reasoning = reasoning
        self._held = ""
        self._closing = ""  # inside a block: the tag that ends it
        self._line_start = True  # the text so far ends a line (or is empty): an opening tag counts here
        self._after_block = False  # a block just ended: the line breaks after it are its own

    def feed(self, piece: str) -> None:
        self._held += piece
        while self._held and self._step():
            pass

    def flush(self) -> None:
        """The end of the answer: what was held goes out as what it is."""
        held, self._held = self._held, ""
        self._out(held)

    def _step(self) -> bool:
        """Pass on what is settled; True when a tag was taken and more may follow."""
        held = self._held
        if self._closing:
            end = held.find(self._closing)
            if end >= 0:
                self._out(held[:end])
                self._held, self._closing = held[end + len(self._closing):], ""
                self._line_start = self._after_block = True
                return True
            keep = _tail_prefix(held, (self._closing,))
        else:
            at, opening, closing = self._opening(held)
            if opening:
                self._out(held[:at])
                self._held, self._closing = held[at + len(opening):], closing
                return True
            keep = _tail_prefix(held, tuple(o for o, _ in THINK_TAGS))
        self._out(held[:len(held) - keep])
        self._held = held[len(held) - keep:]
        return False

    def _opening(self, held: str) -> tuple[int, str, str]:
        """The first opening tag that starts a line: (where, it, its closing), or (-1, "", "")."""
        for opening, closing in THINK_TAGS:
            at = held.find(opening)
            while at >= 0:
                line = held[held.rfind("\n", 0, at) + 1:at]
                if not line.strip() and (self._line_start or "\n" in held[:at]):
                    return at, opening, closing
                at = held.find(opening, at + 1)
        return -1, "", ""

    def _out(self, piece: str) -> None:
        if not piece:
            return
        if self._closing and self.reasoning is not None:
            self.reasoning(piece)
        elif not self._closing:
            if self._after_block:
                piece = piece.lstrip("\n")
                self._after_block = not piece
                if not piece:
                    return
            self.text(piece)
            self._line_start = piece.endswith("\n") or (self._line_start and not piece.strip(" \t"))


def _tail_prefix(text: str, tags: tuple[str, ...]) -> int:
    """How many chars at the end of `text` may begin one of `tags`."""
    for n in range(min(len(text), max(map(len, tags)) - 1), 0, -1):
        if text[-n:] in _PREFIXES and any(t.startswith(text[-n:]) for t in tags):
            return n
    return 0


def parts(answer: str) -> tuple[str, str]:
    """(its thinking, the rest) of `answer`, read as `ThinkSplit` reads them as they stream."""
    said: list[str] = []
    thought: list[str] = []
    split = ThinkSplit(said.append, thought.append)
    split.feed(answer)
    split.flush()
    return "".join(thought), "".join(said)


def visible(answer: str) -> str:
    """`answer` without its thinking blocks."""
    return parts(answer)[1] if any(o in answer for o, _ in THINK_TAGS) else answer
