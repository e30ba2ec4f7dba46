"""Path globs as regexes over a whole relative path, for glob's pattern and grep's include."""

from __future__ import annotations

import re

from nanohermes.tools import ToolError

# -- globs ---------------------------------------------------------------------------------

def _glob_segment(seg: str) -> str:
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            while i < n and seg[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\":
            i += 1
            out.append(re.escape(seg[i] if i < n else "\\"))
        elif c == "[":
            cls = _glob_class(seg, i)
            if cls is None:
                out.append(re.escape("["))
            else:
                text, i = cls
                out.append(text)
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _glob_class(seg: str, start: int) -> tuple[str, int] | None:
    """Translate `[...]` at `start`; None when it is not closed (then `[` is literal)."""
    i = start + 1
    negate = i < len(seg) and seg[i] in "!^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    while i < len(seg):
        c = seg[i]
        if c == "]" and not first:
            body = "".join(items)
            # A class never matches the separator: classes live inside one segment.
            return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), i + 1
        if c == "\\" and i + 1 < len(seg):
            i += 1
            c = seg[i]
        if c == "-" and items and i + 1 < len(seg) and seg[i + 1] != "]":
            items.append("-")
        else:
            items.append("\\" + c if c in "\\^[]&~|-" else c)
        first = False
        i += 1
    return None


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex that must consume the whole relative path.

    `**` as a whole segment matches zero or more segments; `*` and `?` stay inside one
    segment (and match leading dots); `[a-z]` and `[!x]` classes; `\\` escapes. Forward
    slashes separate segments.
    """
    pat = pattern.replace("\\/", "/")
    while pat.startswith("./"):
        pat = pat[2:]
    segs = pat.split("/")
    # Consecutive `**` segments mean the same as one and would only slow the regex down.
    segs = [s for k, s in enumerate(segs) if not (s == "**" and k > 0 and segs[k - 1] == "**")]
    parts: list[str] = []
    for k, seg in enumerate(segs):
        last = k == len(segs) - 1
        if seg == "**":
            parts.append("[^/]+(?:/[^/]+)*" if last else "(?:[^/]+/)*")
            continue
        parts.append(_glob_segment(seg) + ("" if last else "/"))
    try:
        return re.compile("".join(parts), re.DOTALL)
    except re.error as e:
        raise ToolError(f"invalid glob {pattern!r}: {e}") from None
