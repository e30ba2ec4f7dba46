"""Tool-call arguments as models send them: one JSON object, repaired when the intent is
clear (a trailing comma, an object encoded twice), refused with what arrived when not, and
bounded in nesting before any recursive parser sees them."""

from __future__ import annotations

import json
import re
from typing import Any


def parse_arguments(text: str, max_depth: int) -> dict[str, Any]:
    """A call's arguments as one JSON object, forgiving what models are known to send: a
    trailing comma, or the object encoded a second time as a JSON string. Anything else is a
    ValueError whose text quotes what arrived. Nesting is checked on the text first, so a
    hostile depth is refused before any recursive parser sees it."""
    if not text.strip():
        return {}
    too_deep = _too_deep(text, max_depth)
    if too_deep is not None:
        raise ValueError(f"nest deeper than {max_depth} levels (limit tool_args_max_depth){too_deep}; "
                         "send flatter arguments")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        try:
            value = json.loads(_drop_trailing_commas(text))
        except json.JSONDecodeError:
            start = text[:80] + ("…" if len(text) > 80 else "")
            raise ValueError(f"are not valid JSON ({e.msg}: char {e.pos}); the arguments must be one JSON "
                             f"object, e.g. {{\"path\": \"a.txt\"}}. Received: {start!r}") from None
    if isinstance(value, str) and _too_deep(value, max_depth) is None:  # the object encoded twice
        inner: Any = None
        for candidate in (value, _drop_trailing_commas(value)):
            try:
                inner = json.loads(candidate)
                break
            except json.JSONDecodeError:
                continue
        if isinstance(inner, dict):
            value = inner
    if not isinstance(value, dict):
        raise ValueError(f"must be a JSON object, got {type(value).__name__}")
    return value


def _too_deep(text: str, max_depth: int) -> str | None:
    """None when `text` nests at most `max_depth` levels; else where (" in field `x`").
    Strings are skipped by the regex engine, so a large `content` costs one C-speed pass."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    field = last = ""
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok[0] == '"':
            if depth == 1:
                last = tok[1:-1]
        elif tok in "[{":
            depth += 1
            if depth == 2:
                field = last
            if depth > max_depth:
                return f" in field `{field}`" if field else ""
        else:
            depth -= 1
    return None


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.S)


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _drop_trailing_commas(text: str) -> str:
    """`{"a": 1,}` -> `{"a": 1}`, leaving commas inside strings alone."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        m = _TRAILING_COMMA.match(text, i) if c == "," else None
        if m:
            out.append(m.group(1))
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)
