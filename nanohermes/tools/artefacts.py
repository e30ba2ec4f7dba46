"""What models wrap around or write into the text they send to be written, and taking it off.

Seen in real model output: read_file's line-number prefixes (`12<TAB>`, as read_file and
`cat -n` write them, or `    12→`, as other agents' read tools do) copied into the new text of
an edit; a whole file sent inside one Markdown fence (```` ```python ````, sometimes after a line
naming the file); a file whose line breaks arrived as literal `\\n` escapes (its JSON encoded
twice); old text escaped twice. Each repair returns the text and a note that names it, which
the tool puts in its result; where a repair would be a guess, `Guess` says why and the tool
refuses the call with that reason, so nothing is written that nobody meant. A placeholder line
(`# ... rest of the file is the same ...`, `// (unchanged fields...)`) put in place of lines the
new text no longer has is found by `omission`, and the tool refuses the write with those lines.
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import re
from dataclasses import dataclass


class Guess(ValueError):
    """The text may hold an artefact, but taking it off would be a guess: the reason, for the model."""


# --------------------------------------------------------------------------------------
# line-number prefixes

# The forms read tools number lines in: read_file and `cat -n` (`12<TAB>`), other agents'
# (`    12→`), opencode's (`12: `, and its older `00012| `). The last two look like content
# (a YAML key, a table), so they count only with consecutive numbers.
NUMBER_PREFIX = re.compile(r"^ *\d+(?:\t|\u2192)")
_COLON = re.compile(r"^(\d+):(?: |$)")
_PIPE = re.compile(r"^ *(\d+)\|(?: |$)")
_FORMS = ((NUMBER_PREFIX, "read_file"), (_COLON, "`12: `"), (_PIPE, "`00012| `"))


def _body(lines: list[str]) -> list[str]:
    return lines[:-1] if lines and lines[-1] == "" else lines


def _form(s: str) -> tuple[re.Pattern[str], str] | None:
    """The numbering every line of `s` (a final line break aside) carries, and its name."""
    body = _body(s.split("\n"))
    for rx, name in _FORMS if body else ():
        found = [rx.match(ln) for ln in body]
        if not all(found):
            continue
        if rx is NUMBER_PREFIX or all(int(b.group(1)) == int(a.group(1)) + 1
                                      for a, b in itertools.pairwise(m for m in found if m)):
            return rx, name
    return None


def all_numbered(s: str) -> bool:
    """Does every line of `s` (a final line break aside) carry a line-number prefix?"""
    return _form(s) is not None


def numbering(s: str) -> str:
    """Whose line numbers every line of `s` carries: "read_file" (`12<TAB>`, `12→`), or the
    look of another read tool's (`` `12: ` ``); "" when it has none."""
    form = _form(s)
    return form[1] if form else ""


def strip_numbers(s: str, like: str | None = None) -> str:
    """`s` without the line-number prefix of each line that carries one, in the form every
    line of `like` (by default `s`) carries."""
    form = _form(like if like is not None else s)
    rx = form[0] if form else NUMBER_PREFIX
    return "\n".join(rx.sub("", ln, count=1) for ln in s.split("\n"))


def numbered_like_content(text: str, like: str = "") -> bool:
    """Does the file itself have lines that look like numbered ones, in the form of `like`
    (a tab-separated table of numbers, YAML keys that are numbers)? Then prefixes in new
    text may be content, and stripping them a guess."""
    form = _form(like)
    rx = form[0] if form else NUMBER_PREFIX
    return any(rx.match(ln) for ln in text.split("\n", 2000)[:2000])


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


def is_elision(line: str) -> bool:
    """`...`, `# ... existing code ...`, `// …`, `/* ... */`, `<!-- ... -->`: a line standing
    for lines left out."""
    return ("..." in line or "\u2026" in line) and bool(_ELISION.match(line))


# --------------------------------------------------------------------------------------
# omission placeholders: a line of new text that stands for old lines it does not write out

_OPEN_COMMENT = re.compile(r"^(?:#+|//+|--+|;+|/\*+|<!--|\{/\*+|\*+|%+|'|rem\b)[ \t]*", re.IGNORECASE)
_CLOSE_COMMENT = re.compile(r"[ \t]*(?:\*+/\}?|-->)$")
_DOTS = re.compile(r"\.\.\.+|\u2026")
# Words that say lines were left out, in a comment or a short line of their own.
_LEFT_OUT = (r"rest\s+of|remain(?:s|ing|der)?(?:\s+(?:the\s+same|unchanged|as\s+(?:is|before)))?|unchanged|unmodified|"
             r"same\s+as\s+(?:before|above|below|the\s+original|original)|(?:is|are|stays?|remains?)\s+the\s+same|"
             r"omitted|for\s+brevity|existing\s+(?:code|implementation|methods?|functions?|fields?|imports?|logic|"
             r"content|tests?|props|properties|styles?|config(?:uration)?|lines?|rules?|entries|items|cases?|"
             r"routes?|handlers?)|previous\s+(?:code|implementation|content|lines?)|no\s+changes?|code\s+here|"
             r"as\s+before|snip(?:ped)?|elided|(?:and\s+)?the\s+rest|etc|"
             r"keep(?:s|ing)?\s+(?:the\s+)?(?:rest|existing|others?|remaining)|"
             r"(?:stays?|left|kept|remains?)\s+as\s+(?:is|before|it\s+(?:is|was))")
_STRONG = re.compile(rf"\b(?:{_LEFT_OUT})\b", re.IGNORECASE)
# Beside an ellipsis, weaker words say it too (`// ... 3 more methods`, `# ...other fields...`).
_WEAK = re.compile(rf"\b(?:{_LEFT_OUT}|more|others?|etc|keep|kept|existing|previous|same|here|code|lines?|fields?|"
                   r"methods?|functions?|imports?|content|stuff|body)\b", re.IGNORECASE)
_WORDS = re.compile(r"[\w\s,.'()/:-]*")


def placeholder(line: str) -> bool:
    """Does `line` stand for lines left out: `# ... rest of the file is the same ...`,
    `// (unchanged fields...)`, `... rest of code ...`, `existing code here`, `// ...`,
    `<!-- ... -->`? A bare `...` is not one (Python's Ellipsis is code)."""
    text = line.strip()
    if not text or len(text) > 120:
        return False
    opened = _OPEN_COMMENT.match(text)
    commented = opened is not None and opened.end() > 0
    text = _CLOSE_COMMENT.sub("", text[opened.end():] if opened else text).strip()
    text = text.strip("()[]{}<> \t")
    dots = _DOTS.search(text)
    words = _DOTS.sub(" ", text).strip(" \t()[]{}:,;.")
    if not words:
        return commented and dots is not None
    if not _WORDS.fullmatch(words) or len(words.split()) > 12:
        return False  # code or a sentence, not a stand-in
    if dots is not None:
        return dots.start() == 0 or _WEAK.search(words) is not None
    if commented:
        return _STRONG.search(words) is not None
    return len(words.split()) <= 5 and _STRONG.search(words) is not None


@dataclass(frozen=True)
class Omission:
    """A placeholder line of the new text and the old lines it would drop: (1-based number
    in the old text, line) of each, in order."""

    placeholder: str
    dropped: list[tuple[int, str]]

    def lines(self, most: int = 10) -> str:
        """The dropped lines as read_file numbers them, at most `most`, the rest counted."""
        width = len(str(self.dropped[min(most, len(self.dropped)) - 1][0]))
        shown = "\n".join(f"{n:>{width}}\t{ln.rstrip(chr(13))}" for n, ln in self.dropped[:most])
        more = len(self.dropped) - most
        return shown + (f"\n… and {more} more line{'s' if more != 1 else ''}" if more > 0 else "")

    @property
    def span(self) -> str:
        first, last = self.dropped[0][0], self.dropped[-1][0]
        return f"line {first}" if first == last else f"lines {first}-{last}"

    def refusal(self, holder: str, shown: str, advice: str) -> str:
        """The error for the model: what holds the placeholder, the lines it would drop, what to do."""
        n = len(self.dropped)
        return (f"{holder} holds `{self.placeholder}`, a line standing for lines left out, in place of {n} "
                f"line{'s' if n != 1 else ''} of {shown} that it would drop ({self.span}):\n{self.lines()}\n"
                f"{advice}")


# Past this many lines on either side, which old lines a placeholder replaced is judged by
# the lines alone, not by where they stand (an alignment of two huge texts costs too much).
_ALIGN_LINES = 20_000


def omission(old: str, new: str) -> Omission | None:
    """The first placeholder line that `new` puts where `old` had other lines, with the lines
    of `old` it would drop; None when there is none. A placeholder line is judged by what it
    stands for: it counts only where `new` holds it and `old` does not at that place (the
    same line in both is the file's own), and only when lines of `old` are gone from `new`
    (lines moved elsewhere are not dropped): the lines it replaced, and those deleted
    elsewhere with nothing new put in their place. Lines changed into new ones are edits."""
    new_lines = new.split("\n")
    found = [j for j, ln in enumerate(new_lines) if placeholder(ln)]
    if not found:
        return None
    old_lines = old.split("\n")
    # Blank lines are no code and anchor nothing: the lines are aligned without them.
    olds = [i for i, ln in enumerate(old_lines) if ln.strip()]
    news = [j for j, ln in enumerate(new_lines) if ln.strip()]
    had = {ln.strip() for ln in old_lines}
    kept = {ln.strip() for ln in new_lines}
    if len(olds) > _ALIGN_LINES or len(news) > _ALIGN_LINES:
        runs = [(olds, [j for j in found if new_lines[j].strip() not in had])]
    else:
        runs = [([olds[i] for i in range(i1, i2)], [news[j] for j in range(j1, j2)])
                for i1, i2, j1, j2 in _changed([old_lines[i].strip() for i in olds], [new_lines[j].strip() for j in news])]
    stand_in: int | None = None
    dropped: list[tuple[int, str]] = []
    for gone, added in runs:
        here = next((j for j in added if j in found), None)
        changed = any(j not in found and new_lines[j].strip() not in had for j in added)
        if here is not None or not changed:
            stand_in = here if stand_in is None else stand_in
            dropped += [(i + 1, old_lines[i]) for i in gone if old_lines[i].strip() not in kept]
    if stand_in is None or not dropped:
        return None
    return Omission(new_lines[stand_in].strip(), sorted(dropped))


def _changed(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """The runs of lines that differ between `old` and `new`, as (old start, old end, new
    start, new end)."""

    runs: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if runs and runs[-1][1] == i1 and runs[-1][3] == j1:
            runs[-1] = (runs[-1][0], i2, runs[-1][2], j2)
        else:
            runs.append((i1, i2, j1, j2))
    return runs


__all__ = ["NUMBER_PREFIX", "Guess", "Omission", "all_numbered", "decode_newlines", "is_elision", "numbered_like_content",
           "numbering", "omission", "placeholder", "strip_numbers", "unescape_twice", "unfence"]
