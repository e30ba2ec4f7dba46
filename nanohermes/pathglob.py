"""The one path-glob engine: a glob as a regex over a whole slash-separated path, shared by the
glob tool (and grep's `include`) and the path patterns of permission rules.

Both dialects: `*` and `?` stay inside one folder and match leading dots; `[a-z]`, `[!x]` and
`[^x]` are classes, which never match `/` (a class lives inside one folder); a `[` without its
`]` is literal; a whole `**` segment matches zero or more folders (`**/x`, `a/**/b`), and a run
of them means one. The regex must match the whole path (use `fullmatch`).

The dialects differ only where their users promise different things:
- the glob dialect (what the glob tool documents): `\\` escapes the next character; a
  trailing `dir/**` needs something below `dir`; a `**` inside a name is a plain `*`.
- the rule dialect (what permission rules document, "`**` crosses folders"): `\\` is an
  ordinary character (rules spell a literal with a class, `[*]`, as `escape_pattern`
  writes them); `dir/**` also names `dir` itself, so a rule for a folder covers the folder;
  a `**` inside a name crosses folders (`src**` reaches `src/a/b`).
"""

from __future__ import annotations

import functools
import re


def _segment(seg: str, rule: bool) -> str:
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            start = i
            while i < n and seg[i] == "*":
                i += 1
            out.append(".*" if rule and i - start > 1 else "[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\" and not rule:
            i += 1
            out.append(re.escape(seg[i] if i < n else "\\"))
        elif c == "[":
            cls = _class(seg, i, rule)
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


def _class(seg: str, start: int, rule: bool) -> tuple[str, int] | None:
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
        if c == "\\" and not rule and i + 1 < len(seg):
            i += 1
            c = seg[i]
        if c == "-" and items and i + 1 < len(seg) and seg[i + 1] != "]":
            items.append("-")
        else:
            items.append("\\" + c if c in "\\^[]&~|-" else c)
        first = False
        i += 1
    return None


@functools.lru_cache(maxsize=1024)
def glob_regex(pattern: str, *, rule: bool = False) -> re.Pattern[str]:
    """`pattern` as a regex over a whole path, in the glob dialect or (`rule`) the rule
    dialect; raises `re.error` for a class the regex engine rejects (`[z-a]`)."""
    segs = pattern.split("/")
    # Consecutive `**` segments mean the same as one and would only slow the regex down.
    segs = [s for k, s in enumerate(segs) if not (s == "**" and k > 0 and segs[k - 1] == "**")]
    parts: list[str] = []
    for k, seg in enumerate(segs):
        last = k == len(segs) - 1
        if seg == "**":
            if not last:
                parts.append("(?:[^/]*/)*")  # empty or ending in `/`: also an absolute path's root
            elif not rule:
                parts.append("[^/]+(?:/[^/]+)*")
            elif parts:
                parts[-1] = parts[-1].removesuffix("/") + "(?:/.*)?"  # `dir/**` names `dir` too
            else:
                parts.append(".*")
            continue
        parts.append(_segment(seg, rule) + ("" if last else "/"))
    return re.compile("".join(parts), re.DOTALL)


__all__ = ["glob_regex"]
