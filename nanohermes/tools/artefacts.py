"""What models wrap around or write into the text they send to be written, and taking it off.

Seen in real model output: read_file's line-number prefixes (`12<TAB>`, as read_file and
`cat -n` write them, or `    12→`, as other agents' read tools do) copied into the new text of
an edit; a whole file sent inside one Markdown fence (```` ```python ````, sometimes after a line
naming the file); a file whose line breaks arrived as literal `\\n` escapes (its JSON encoded
twice); old text escaped twice. Each repair returns the text and a note that names it, which
the tool puts in its result; where a repair would be a guess, `Guess` says why and the tool
refuses the call with that reason, so nothing is written that nobody meant.
"""

from __future__ import annotations

import itertools
import json
import os
import re


class Guess(ValueError):
    """The text may hold an artefact, but taking it off would be a guess: the reason, for the model."""


# --------------------------------------------------------------------------------------
# line-number prefixes

NUMBER_PREFIX = re.compile(r"^ *\d+(?:\t|\u2192)")


def _body(lines: list[str]) -> list[str]:
    return lines[:-1] if lines and lines[-1] == "" else lines


def all_numbered(s: str) -> bool:
    """Does every line of `s` (a final line break aside) carry a line-number prefix?"""
    body = _body(s.split("\n"))
    return bool(body) and all(NUMBER_PREFIX.match(ln) for ln in body)


def strip_numbers(s: str) -> str:
    """`s` without the line-number prefix of each line that carries one."""
    return "\n".join(NUMBER_PREFIX.sub("", ln, count=1) for ln in s.split("\n"))


def numbered_like_content(text: str) -> bool:
    """Does the file itself have lines that look like numbered ones (a tab-separated table
    of numbers)? Then prefixes in new text may be content, and stripping them a guess."""
    return any(NUMBER_PREFIX.match(ln) for ln in text.split("\n", 2000)[:2000])


# --------------------------------------------------------------------------------------
# a whole file inside one Markdown fence

_FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})[ \t]*([^`\s]*)(?:[ \t]+(\S+))?[ \t]*$")
_MARKDOWN = frozenset({".md", ".markdown", ".mdx", ".mkd", ".rmd", ".qmd"})


def unfence(content: str, path: str) -> tuple[str, str]:
    """`content` without one Markdown fence around all of it (an optional line naming the file
    first, a language tag or a file name after the opening backticks), and the note; as it is
    with "" when it is not so wrapped. A Markdown file keeps a fence unless its tag says the
    fence holds Markdown (the fence is then the artefact). A fence line inside the block
    would end it, so which lines are the file is a guess: `Guess`."""
    lines = content.split("\n")
    start = 0
    name = os.path.basename(path)
    if len(lines) > 2 and lines[0].strip().strip("`*:") in (path, name) and _FENCE_OPEN.match(lines[1]):
        start = 1  # the file's name on its own line, then the fence (how some edit formats send a file)
    opened = _FENCE_OPEN.match(lines[start]) if lines else None
    if opened is None:
        return content, ""
    end = len(lines) - 1
    while end > start and not lines[end].strip():
        end -= 1
    fence = opened.group(1)
    closing = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    if end == start or not closing.match(lines[end]):
        return content, ""
    tag = opened.group(2).lower()
    if os.path.splitext(path)[1].lower() in _MARKDOWN and tag not in ("markdown", "md"):
        return content, ""  # a Markdown file that is one code block is a Markdown file
    inner = lines[start + 1:end]
    for k, line in enumerate(inner, start + 2):
        if closing.match(line):
            raise Guess(f"content starts with a Markdown fence ({lines[start].strip()}) and ends with one, but line "
                        f"{k} closes a fence too, so which lines belong to the file cannot be told; send the file's "
                        "content alone, without the fence")
    what = lines[start].strip() + (" and the line naming the file" if start else "")
    return "".join(line + "\n" for line in inner), f"the Markdown fence around the content ({what}) removed"


# --------------------------------------------------------------------------------------
# escapes: line breaks sent as `\n`, old text escaped twice

_LITERAL_NEWLINE = re.compile(r"(?<!\\)(?:\\\\)*\\n")
_BARE_QUOTE = re.compile(r'(?<!\\)((?:\\\\)*)"')


def _json_unescape(s: str) -> str | None:
    """`s` read as the inside of a JSON string (a bare `"` taken as itself); None when it is
    not one (a backslash that is no JSON escape)."""
    try:
        out = json.loads('"' + _BARE_QUOTE.sub(r'\1\\"', s) + '"', strict=False)
    except json.JSONDecodeError:
        return None
    return out if isinstance(out, str) else None


def decode_newlines(content: str) -> tuple[str, str]:
    """`content` with its escapes decoded when its only line breaks are literal `\\n`
    sequences (no real one at all), and the note. A `\\n` inside quotes on what would be one
    line (`print("a\\nb")`) may be meant as written: then `Guess`, whose reason says how to
    send a one-line file that means its backslashes."""
    if "\n" in content or not _LITERAL_NEWLINE.search(content):
        return content, ""
    segments = _LITERAL_NEWLINE.split(content)
    for quote in ('"', "'", "`"):
        odd = [len(re.findall(rf"(?<!\\){re.escape(quote)}", seg)) % 2 == 1 for seg in segments]
        if any(a and b for a, b in itertools.pairwise(odd)):
            raise Guess("content has no line breaks, only literal \\n escapes, and one of them sits inside "
                        f"{quote}quotes{quote}, where it may be meant as written; send the content with real line "
                        "breaks (a file meant as one line with these escapes: end it with a real line break)")
    decoded = _json_unescape(content)
    if decoded is None:
        raise Guess("content has no line breaks, only literal \\n escapes, and backslashes that are not JSON escapes, "
                    "so which of them are meant cannot be told; send the content with real line breaks")
    n = decoded.count("\n")
    return decoded, f"its line breaks arrived as literal \\n escapes (JSON encoded twice): decoded to {n} line break" + \
        ("s" if n != 1 else "")


def unescape_twice(s: str) -> str | None:
    """`s` decoded once more when it holds JSON escapes (`\\n`, `\\t`, `\\"`, `\\\\`), as a
    model that escaped its text twice sends it; None when there is nothing to decode."""
    if "\\" not in s:
        return None
    out = _json_unescape(s)
    return out if out is not None and out != s else None


# --------------------------------------------------------------------------------------
# elision lines: "the lines in between stay"

_ELISION = re.compile(r"^[ \t]*(?:(?:#|//|--|;|/\*+|<!--|\*)[ \t]*)?(?:\.\.\.|\u2026)"
                      r"(?:[ \t]*[\w ,.'()/-]*?[ \t]*(?:\.\.\.|\u2026))?[ \t]*(?:\*+/|-->)?[ \t]*$")
_COMMENTED = re.compile(r"^[ \t]*(?:#|//|--|;|/\*|<!--)")


def is_elision(line: str) -> bool:
    """`...`, `# ... existing code ...`, `// …`, `/* ... */`, `<!-- ... -->`: a line standing
    for lines left out."""
    return ("..." in line or "\u2026" in line) and bool(_ELISION.match(line))


def commented_elision(line: str) -> bool:
    """An elision written as a comment (`# ... existing code ...`): never real code, unlike a
    bare `...` (Python's Ellipsis)."""
    return is_elision(line) and bool(_COMMENTED.match(line))


__all__ = ["NUMBER_PREFIX", "Guess", "all_numbered", "commented_elision", "decode_newlines", "is_elision",
           "numbered_like_content", "strip_numbers", "unescape_twice", "unfence"]
