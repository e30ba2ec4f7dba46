"""How each format of a call written as text is found in an answer, and where the answer thinks.

One finder per entry of the quirk table's text call formats (`nanohermes.llm.quirks`, `text.*`),
keyed by the entry's id: `marked.FIND` for the formats with markers of their own (imported from
`marked` when an answer holds a marker: their patterns are many), `TAILS` for those
without one (a bare JSON call, a pythonic list, GLM-4's name and JSON), which count where they
end the answer (a JSON call in prose too, when it is a complete call of an offered tool). A
finder gives the blocks it found, each (start, end, calls), and the format it read, or raises
`Bad` for a block of its format that cannot be taken, with the reason.
`thinking` gives the spans of an answer that are the model's thinking (`<think>`, `<seed:think>`,
`[THINK]`, Gemma 4's thought channel, Harmony's analysis channel): a call there is a draft.
`llm.textcalls` decides what is taken; nothing here looks at anything but the text.
"""

from __future__ import annotations

from nanohermes.llm.textfinders.common import (
    TEXT_FORMATS,
    Bad,
    Block,
    Call,
    Finder,
    Format,
    Schemas,
    fits,
    format_of,
    json_at,
    named_json,
    offered,
    python_call,
    typed,
)
from nanohermes.llm.textfinders.drafts import blank, thinking, thought
from nanohermes.llm.textfinders.tails import CALL_OPENING, TAILS, json_anywhere

__all__ = ["CALL_OPENING", "TAILS", "TEXT_FORMATS", "Bad", "Block", "Call", "Finder", "Format", "Schemas", "blank",
           "fits", "format_of", "json_anywhere", "json_at", "named_json", "offered", "python_call", "thinking", "thought",
           "typed"]
