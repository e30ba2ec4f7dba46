"""The one path-glob engine: a glob as a regex over a whole slash-separated path, shared by the
glob tool (and grep's `include`) and the path patterns of permission rules.

Both dialects: `*` and `?` stay inside one folder and match leading dots; `[a-z]`, `[!x]` and
`[^x]` are classes, which never match `/` (a class lives inside one folder); a `[` without its
`]` is literal; a whole `**` segment matches zero or more folders (`**/x`, `a/**/b`), and a run
of them means one. The regex must match the whole path (use `fullmatch`).

The dialects differ only where their users promise different things:
- the glob dialect (what the glob tool documents): `\\` escapes the next character; a
  trailing `dir/**` needs something below `dir`; a `**` inside a name is a plain `*`;
  `{a,b}` is either alternative, as in ripgrep's and Claude Code's globs (nested too; a brace
  without a comma is literal).
- the rule dialect (what permission rules document, "`**` crosses folders"): `\\` is an
  ordinary character (rules spell a literal with a class, `[*]`, as `escape_pattern`
  writes them); `dir/**` also names `dir` itself, so a rule for a folder covers the folder;
  a `**` inside a name crosses folders (`src**` reaches `src/a/b`).
"""

from __future__ import annotations

import functools
import re

from nanohermes.common.budget import Limits


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


def _braces(pattern: str) -> tuple[int, int, list[str]] | None:
    """The first `{...}` of `pattern` holding a comma at its own level: (start, end, its
    alternatives); None when there is none. `\\` escapes; a class's `[...]` is skipped."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[" and (close := pattern.find("]", i + 2)) > 0:
            i = close + 1
            continue
        if c == "{":
            depth, parts, start, j = 0, [], i + 1, i
            while j < n:
                d = pattern[j]
                if d == "\\":
                    j += 2
                    continue
                depth += (d == "{") - (d == "}")
                if depth == 1 and d == ",":
                    parts.append(pattern[start:j])
                    start = j + 1
                if depth == 0:
                    break
                j += 1
            if j < n and parts:
                return i, j + 1, [*parts, pattern[start:j]]
        i += 1
    return None


def alternatives(pattern: str, most: int = Limits.glob_alternatives) -> list[str]:
    """`pattern` with each `{a,b}` spelled out: one pattern per alternative, in order; raises
    `re.error` past `most` of them (`Limits.glob_alternatives`)."""
    out: list[str] = []
    todo = [pattern]
    while todo:
        p = todo.pop(0)
        found = _braces(p)
        if found is None:
            out.append(p)
        else:
            start, end, parts = found
            todo += [p[:start] + part + p[end:] for part in parts]
        if len(out) + len(todo) > most:
            raise re.error(f"the braces make more than {most} alternatives (limits.glob_alternatives); write fewer "
                           "alternatives, or search in several calls")
    return out


@functools.lru_cache(maxsize=1024)
def glob_regex(pattern: str, *, rule: bool = False, most: int = Limits.glob_alternatives) -> re.Pattern[str]:
    """`pattern` as a regex over a whole path, in the glob dialect or (`rule`) the rule
    dialect; raises `re.error` for a class the regex engine rejects (`[z-a]`), or for braces
    spelling out more than `most` alternatives."""
    if not rule and (alts := alternatives(pattern, most)) != [pattern]:
        return re.compile("|".join(f"(?:{glob_regex(a).pattern})" for a in alts), re.DOTALL)
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


__all__ = ["alternatives", "glob_regex"]
