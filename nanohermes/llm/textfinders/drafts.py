"""Where an answer thinks: the spans of its text that are the model's thinking (`<think>`,
`<seed:think>`, `[THINK]`, Gemma 4's thought channel, Harmony's analysis channel), whose calls
are drafts, never run."""

from __future__ import annotations

import re

from nanohermes.llm.thinktags import THINK_TAGS

# A Harmony message on the analysis channel, its header from `<|start|>` (a recipient there or
# after the channel changes nothing: the analysis channel is thinking, whoever it addresses).
_ANALYSIS = re.compile(r"(?:<\|start\|>[^<]*)?<\|channel\|>\s*analysis\b[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
                       r".*?(?:<\|end\|>|<\|call\|>|(?=<\|start\|>)|\Z)", re.DOTALL)


def thinking(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that are thinking: between a tag and its closing one (to the end
    when it is not closed; from the start for a closing tag with no opening one, as when the
    template put the opening tag in the prompt), and Harmony's analysis messages."""
    # quirk: reasoning.think-tags
    spans: list[tuple[int, int]] = []
    for opening, closing in THINK_TAGS:
        first_open, first_close = text.find(opening), text.find(closing)
        if first_close >= 0 and (first_open < 0 or first_close < first_open):
            spans.append((0, first_close + len(closing)))
        at = text.find(opening)
        while at >= 0:
            end = text.find(closing, at + len(opening))
            stop = len(text) if end < 0 else end + len(closing)
            spans.append((at, stop))
            at = text.find(opening, stop)
    spans += [(m.start(), m.end()) for m in _ANALYSIS.finditer(text)]
    return sorted(spans)


def blank(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span blanked out (same length, so offsets hold; line breaks kept)."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def thought(text: str) -> str:
    """The text of `text`'s thinking spans, one after the other."""
    return "\n".join(text[s:e] for s, e in thinking(text))
