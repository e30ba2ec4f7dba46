"""The glob tool's patterns and grep's `include`: normalised, then compiled by the shared
engine (`nanohermes.guard.pathglob`, glob dialect); a pattern it cannot compile is a ToolError."""

from __future__ import annotations

import re

from nanohermes.guard.pathglob import glob_regex
from nanohermes.tools.base import ToolError


def compile_glob(pattern: str, most: int) -> re.Pattern[str]:
    """A path glob as a regex that must consume the whole relative path.

    `**` as a whole segment matches zero or more segments; `*` and `?` stay inside one
    segment (and match leading dots); `[a-z]` and `[!x]` classes; `\\` escapes. Forward
    slashes separate segments. `{a,b}` is either, at most `most` alternatives in all.
    """
    pat = pattern.replace("\\/", "/")
    while pat.startswith("./"):
        pat = pat[2:]
    try:
        return glob_regex(pat, most=most)
    except re.error as e:
        raise ToolError(f"invalid glob {pattern!r}: {e}") from None


def backslash_hint(pattern: str) -> str:
    """For a pattern that matched nothing: when it holds a backslash, which a glob reads as an
    escape while a pattern written for Windows meant a folder break (`src\\*.py`), the same
    pattern with `/` to try; "" otherwise."""
    if "\\" not in pattern:
        return ""
    slashed = pattern.replace("\\", "/")
    return f"; `\\` escapes the next character in a glob, and folders are separated by `/`: try {slashed!r}"
