"""Thinking a model writes into its answer's text between tags (`<think>...</think>`, and the
other tags of `THINK_TAGS`), told apart from the answer as it streams: people see it as
thinking, and the answer a turn ends with (`-p`'s text, json's `result`) is without it. The
history keeps the message as the model sent it.

A block counts where its opening tag starts a line (a prose mention of the tag is answer): a
model's template puts it first, or first after a tool call's result. A template may instead put
the opening tag in the prompt (DeepSeek-R1's distills, Qwen3's thinking templates): the reply
starts inside the block and only its closing tag comes. Such a lone closing tag counts when it is
the first thinking tag of the reply (no opening tag and no other closing tag came before it), it
stands outside code (a fence, a backtick span) and only blanks follow it on its line: all the
reply's text before it is thinking. Any other closing tag is prose. Since only that tag tells,
the text a reply starts with is held until it is known (the tag, another tag, thinking in a field
of its own, or the reply's end), for a model whose name says it may (`TEMPLATE_THINKERS`: Qwen3,
QwQ, DeepSeek-R1 and its distills, GLM-Z1, Magistral, ... and any name with "think" or
"reason"; not a hosted one, whose service keeps thinking out of the text), until the
conversation shows that it does not (`may_open_in_prompt`). Other models' replies stream as
they come; what a turn ends with is read whole and leaves such thinking out all the same.
`llm.textfinders.drafts` reads the same tags for calls in thinking.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from nanohermes.common.messages import Message

# (opening, closing) of thinking written into the answer's text.
THINK_TAGS = (("<think>", "</think>"), ("<seed:think>", "</seed:think>"), ("<thinking>", "</thinking>"),
              ("[THINK]", "[/THINK]"), ("<|channel>", "<channel|>"))
_PREFIXES = frozenset(tag[:n] for pair in THINK_TAGS for tag in pair for n in range(1, len(tag)))
_LONGEST = max(len(tag) for pair in THINK_TAGS for tag in pair)
_FENCES = ("```", "~~~")
# Models whose chat templates may put the opening tag in the prompt, by the names their
# weights and servers go by (`Qwen/Qwen3-32B`, `qwen3:30b`, `deepseek-r1-distill-llama-70b`).
TEMPLATE_THINKERS = re.compile(r"qwen3|qwq|deepseek-r1|r1-distill|deepseek-reasoner|glm-z1|glm-4\.[5-9]|magistral|"
                               r"exaone-deep|seed-oss|minimax-m[12]|hermes-4|think|reason", re.IGNORECASE)
# Hosted models, named bare or behind a router's prefix (`openai/gpt-4o`): their services send
# thinking apart or not at all, never a template's half-open block.
_HOSTED = re.compile(r"(?:^|/)(?:gpt-(?!oss)|chatgpt|o[134](?:-|$)|claude|gemini)", re.IGNORECASE)


class _LoneWatch:
    """A reply's first text, watched for a lone closing tag (see the module's docstring) as it
    streams: in time linear in the text, however small its pieces."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.size = 0
        self.tail = ""  # the end of the text looked at, which may begin a tag
        self.at = -1  # the closing tag found, waiting for what follows it on its line
        self.tag = ""

    def text(self) -> str:
        return "".join(self.pieces)

    def add(self, piece: str, *, end: bool) -> int | None:
        """The lone closing tag's offset once known, -1 when the reply has none, None while
        more text may still tell (`end`: the reply is over)."""
        self.pieces.append(piece)
        base, self.size = self.size - len(self.tail), self.size + len(piece)
        if self.at < 0:
            window = self.tail + piece
            at, tag = _first_tag(window)
            if at < 0:
                self.tail = window[len(window) - min(len(window), _LONGEST - 1):]
                return -1 if end else None
            if not any(tag == c for _, c in THINK_TAGS):
                return -1  # an opening tag first: the reply's blocks open as usual
            self.at, self.tag = base + at, tag
            text = self.text()
            if _in_code(text[:self.at]):
                return -1
            piece = text[self.at + len(tag):]
        after = piece.lstrip(" \t")
        if not after:
            return self.at if end else None
        return self.at if after[0] in "\r\n" else -1


def _first_tag(text: str) -> tuple[int, str]:
    """The first thinking tag, opening or closing, in `text`: (where, it), or (-1, "")."""
    found = ((at, tag) for pair in THINK_TAGS for tag in pair if (at := text.find(tag)) >= 0)
    return min(found, default=(-1, ""))


def _in_code(text: str) -> bool:
    """Whether the end of `text` is inside a code fence or a backtick span of its last line."""
    lines = text.split("\n")
    fenced = sum(1 for line in lines[:-1] if line.lstrip().startswith(_FENCES)) % 2 == 1
    return fenced or lines[-1].count("`") % 2 == 1


class ThinkSplit:
    """Streamed answer text, its thinking blocks sent to `reasoning` (tags left out) and the
    rest to `text`; a piece that may begin a tag is held until the next one (or `flush`).
    `lone`: the reply may begin inside a block whose opening tag the template put in the prompt,
    so its first text is held (each piece passed to `held` meanwhile, to be shown for now) until
    that is known (`may_open_in_prompt` says when it may)."""

    def __init__(self, text: Callable[[str], None], reasoning: Callable[[str], None] | None, *,
                 lone: bool = False, held: Callable[[str], None] | None = None) -> None:
        self.text = text
        self.reasoning = reasoning
        self.held = held
        self._watch = _LoneWatch() if lone else None
        self._held = ""
        self._closing = ""  # inside a block: the tag that ends it
        self._line_start = True  # the text so far ends a line (or is empty): an opening tag counts here
        self._after_block = False  # a block just ended: the line breaks after it are its own

    def feed(self, piece: str) -> None:
        if self._watch is not None:
            if not self._settle(self._watch.add(piece, end=False)):
                if self.held is not None and piece:
                    self.held(piece)
                return
            piece = ""
        self._held += piece
        while self._held and self._step():
            pass

    def apart(self, piece: str) -> None:
        """Thinking that came in a field of its own: the server tells thinking apart, so the
        text is answer from its start (no lone closing tag is waited for)."""
        if self._watch is not None:
            self._settle(-1)
            self.feed("")
        if self.reasoning is not None:
            self.reasoning(piece)

    def flush(self) -> None:
        """The end of the answer: what was held goes out as what it is."""
        if self._watch is not None:
            self._settle(self._watch.add("", end=True))
            self.feed("")
        held, self._held = self._held, ""
        self._out(held)

    def _settle(self, at: int | None) -> bool:
        """The reply's first text once the watch knows (`at`: its lone closing tag, -1: none):
        the text before the tag goes out as thinking, the rest is read as usual."""
        if at is None or self._watch is None:
            return False
        watch, self._watch = self._watch, None
        text = watch.text()
        if at < 0:
            self._held = text
            return True
        self._closing = watch.tag
        self._out(text[:at])
        self._held, self._closing = text[at + len(watch.tag):], ""
        self._line_start = self._after_block = True
        return True

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


def lone_closing(text: str) -> int:
    """Where a reply's whole `text` ends thinking begun in the prompt: its lone closing tag's
    offset, or -1 (see the module's docstring)."""
    at = _LoneWatch().add(text, end=True)
    return -1 if at is None else at


def may_open_in_prompt(messages: Sequence[Message], model: str = "") -> bool:
    """Whether the reply of `model` to `messages` may begin inside thinking whose opening tag the
    template put in the prompt: when its name says it may (`TEMPLATE_THINKERS`, not a hosted
    one), until the conversation's latest answer with text or thinking shows it does not
    (thinking in a field of its own, or text without a lone closing tag)."""
    if _HOSTED.search(model) or not TEMPLATE_THINKERS.search(model):
        return False
    for m in reversed(messages):
        if m.role != "assistant":
            continue
        if m.reasoning:
            return False
        if m.content and m.content.strip():
            return lone_closing(m.content) >= 0
    return True


def parts(answer: str) -> tuple[str, str]:
    """(its thinking, the rest) of `answer`, read as `ThinkSplit` reads them as they stream."""
    said: list[str] = []
    thought: list[str] = []
    split = ThinkSplit(said.append, thought.append, lone=True)
    split.feed(answer)
    split.flush()
    return "".join(thought), "".join(said)


def message_parts(m: Message) -> tuple[str, str]:
    """(the thinking, the answer) of the model's message `m`, as it streamed: its thinking
    field and the thinking written into its text, then the rest of its text."""
    thought, said = parts(m.content or "")
    return "\n".join(t for t in (m.reasoning, thought) if t), said


def visible(answer: str) -> str:
    """`answer` without its thinking blocks."""
    return parts(answer)[1] if any(tag in answer for pair in THINK_TAGS for tag in pair) else answer
