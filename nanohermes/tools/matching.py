"""Finding the text a model meant: context matching in tiers, the closest region of a file
quoted when nothing matches, and the new text's quotes and typography after a match that mapped
them (the artefacts a model copies into text, such as line numbers, are `artefacts`').

Both edit_file's `old_string` and patch hunks go through the same tiers, strictest first:
exact; ignoring trailing whitespace; ignoring leading and trailing whitespace; and with
Unicode dashes, quotes, spaces and ellipses mapped to ASCII. A match below the first tier is taken
only when it is the one match of its tier, so a loose comparison never picks between two
candidates. Callers name the tier in their result so the model learns what was forgiven.
"""

from __future__ import annotations

import bisect
import difflib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

TIERS = ("exact", "trailing whitespace ignored", "leading and trailing whitespace ignored",
         "Unicode punctuation mapped to ASCII")

_PUNCT = str.maketrans({
    **{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"},
    **{c: "'" for c in "\u2018\u2019\u201a\u201b"},
    **{c: '"' for c in "\u201c\u201d\u201e\u201f"},
    **{c: " " for c in "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"},
    "\u2026": "...",
})


def ascii_punct(s: str) -> str:
    """Typographic dashes, quotes, spaces and ellipses as their ASCII look-alikes (one char
    for one, but `…` for `...`)."""
    return s.translate(_PUNCT)


def _ascii_map(s: str) -> tuple[str, list[int]]:
    """`ascii_punct(s)` and, for each of its chars, the index in `s` it came from, with one
    more entry, `len(s)`."""
    parts: list[str] = []
    index: list[int] = []
    for i, c in enumerate(s):
        t = c.translate(_PUNCT)
        parts.append(t)
        index += [i] * len(t)
    index.append(len(s))
    return "".join(parts), index


# Per tier: what one line is compared as. Each maps a line to a substring of itself (or a
# same-length translation of one), which is what lets a match map back to the original.
_LINE_FORMS: tuple[Callable[[str], str], ...] = (
    lambda s: s,
    lambda s: s.rstrip(),
    lambda s: s.strip(),
    lambda s: ascii_punct(s).strip(),
)


class Ambiguous(Exception):
    """A loose tier found several candidates; the caller reports them and changes nothing."""

    def __init__(self, tier: int, lines: list[int]) -> None:
        super().__init__(tier, lines)
        self.tier = tier
        self.lines = lines  # 1-based line numbers of the candidates (first few)


# --------------------------------------------------------------------------------------
# line sequences (patch hunks)


def seek_lines(lines: list[str], pattern: list[str], start: int, *, eof: bool = False,
               order: Callable[[int], int] | None = None) -> tuple[int, int] | None:
    """(index, tier) of `pattern` in `lines` at or after `start`, or None.

    The exact tier takes the first candidate in `order` (by default: from `start` down the
    file); looser tiers require a single candidate, else `Ambiguous`. With `eof` the
    pattern must end the file, tried there first.
    """
    if not pattern:
        return (start, 0) if start <= len(lines) else None
    last = len(lines) - len(pattern)
    if last < start:
        return None
    starts = [last] if eof else list(range(start, last + 1))
    if order is not None and not eof:
        starts.sort(key=order)
    m = len(pattern)
    for tier, form in enumerate(_LINE_FORMS):
        want = [form(p) for p in pattern]
        formed = lines if tier == 0 else [form(ln) for ln in lines]
        first = want[0]
        hits: list[int] = []
        for i in starts:
            if formed[i] == first and formed[i:i + m] == want:
                if tier == 0:
                    return i, 0
                hits.append(i)
                if len(hits) > 5:
                    break
        if len(hits) == 1:
            return hits[0], tier
        if hits:
            raise Ambiguous(tier, [h + 1 for h in hits])
    return None


# --------------------------------------------------------------------------------------
# substrings (edit_file)


@dataclass(frozen=True)
class Span:
    start: int  # offsets into the original text
    end: int
    tier: int


class _Normalised:
    """The text with every line in one tier's form, and the way back to original offsets."""

    def __init__(self, text: str, tier: int) -> None:
        form = _LINE_FORMS[tier]
        parts: list[str] = []
        self.orig_start: list[int] = []  # each line's offset in the original
        self.lead: list[int] = []  # chars the form dropped at the line's start
        self.content_end: list[int] = []  # where the line's content ends (before "\r")
        self.norm_start: list[int] = []
        self.norm_len: list[int] = []
        # Per line, where its translated chars come from when the translation changed its
        # length (a `…` read as `...`); None when it is one char for one.
        self.index: list[list[int] | None] = []
        pos = npos = 0
        for line in text.split("\n"):
            f = form(line)
            pre, index = _ascii_map(line) if tier == 3 else (line, [])
            # The forms only strip ends (and translate chars), so `f` sits in the
            # line where its first char is; that char is not blank, so find() is exact.
            self.orig_start.append(pos)
            self.index.append(index if len(pre) != len(line) else None)
            self.lead.append(pre.find(f) if f else 0)
            self.content_end.append(pos + len(line) - (1 if line.endswith("\r") else 0))
            self.norm_start.append(npos)
            self.norm_len.append(len(f))
            parts.append(f)
            pos += len(line) + 1
            npos += len(f) + 1
        self.norm = "\n".join(parts)

    def _line(self, off: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.norm_start, off) - 1
        return k, off - self.norm_start[k]

    def _orig(self, k: int, at: int, *, end: bool = False) -> int:
        """Line k's char `at` of its translated form, as an offset in the line itself (an
        end inside one translated `…` takes in the whole `…`)."""
        index = self.index[k]
        if index is None:
            return at
        if end and 0 < at < len(index) - 1 and index[at] == index[at - 1]:
            return index[at] + 1
        return index[at]

    def start(self, off: int, *, widen: bool) -> int:
        k, col = self._line(off)
        if col == 0 and widen:
            return self.orig_start[k]
        return self.orig_start[k] + self._orig(k, self.lead[k] + col)

    def end(self, off: int) -> int:
        k, col = self._line(off)
        if col == 0:
            return self.orig_start[k]  # the needle ended with a newline
        if col >= self.norm_len[k]:
            return self.content_end[k]  # take in the blanks the needle left out
        return self.orig_start[k] + self._orig(k, self.lead[k] + col, end=True)


def find_text(text: str, needle: str, tiers: range = range(len(_LINE_FORMS))) -> tuple[list[Span], int] | None:
    """Every occurrence of `needle` in `text` in the first of `tiers` that has one: (spans,
    tier), or None when no tier matches. Loose tiers compare line by line; a match that begins
    at a line's first character (or ends at its last) takes in the indentation (or trailing
    blanks) the model's version left out, so the replacement brings its own."""
    if not needle:
        return None
    exact: list[Span] = []
    i = text.find(needle) if 0 in tiers else -1
    while i >= 0 and len(exact) <= 1000:
        exact.append(Span(i, i + len(needle), 0))
        i = text.find(needle, i + len(needle))
    if exact:
        return exact, 0
    for tier in tiers:
        if tier == 0:
            continue
        form = _LINE_FORMS[tier]
        nd = "\n".join(form(ln) for ln in needle.split("\n"))
        if not nd.strip():
            continue
        hay = _Normalised(text, tier)
        widen = needle[:1].isspace()  # the model gave indentation: its own replaces the file's
        spans: list[Span] = []
        j = hay.norm.find(nd)
        while j >= 0 and len(spans) <= 10:
            s = hay.start(j, widen=widen)
            spans.append(Span(s, max(s, hay.end(j + len(nd))), tier))
            j = hay.norm.find(nd, j + len(nd))
        if spans:
            return spans, tier
    return None


# --------------------------------------------------------------------------------------
# the closest region, for errors


def closest_region(lines: list[str], pattern: list[str], *, floor: int = 0) -> int | None:
    """The index where the file looks most like `pattern` (most lines equal once stripped
    and mapped to ASCII), or None when not one line is alike. Common lines (blank, `}`)
    carry no vote, so the region is not just the first brace."""
    form = _LINE_FORMS[3]
    where: dict[str, list[int]] = defaultdict(list)
    for i in range(floor, len(lines)):
        where[form(lines[i])].append(i)
    votes: dict[int, int] = defaultdict(int)
    for j, p in enumerate(pattern):
        f = form(p)
        hits = where.get(f, [])
        if not f or len(hits) > 50:
            continue
        for h in hits:
            votes[h - j] += 1
    if votes:
        best = max(votes.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        return max(floor, min(best, len(lines) - 1))
    # Nothing equal: the line most like the pattern's first non-blank line.

    # Bounded: the first 200 chars of each line, and the first 50,000 lines.
    first = next((form(p) for p in pattern if form(p)), "")[:200]
    if not first or not lines:
        return None
    best_i, best_r = None, 0.6
    for i in range(floor, min(len(lines), floor + 50_000)):
        sm = difflib.SequenceMatcher(None, first, form(lines[i])[:200])
        if sm.real_quick_ratio() > best_r and sm.quick_ratio() > best_r and (r := sm.ratio()) > best_r:
            best_i, best_r = i, r
    return best_i


def quote_lines(lines: list[str], start: int, count: int, *, offset: int = 1, clip: int = 200) -> str:
    """Lines [start, start+count) numbered like read_file (N<TAB>line), clipped."""
    width = len(str(min(len(lines), start + count) + offset - 1)) if lines else 1
    out = []
    for i in range(max(0, start), min(len(lines), start + count)):
        t = lines[i].rstrip("\r")
        out.append(f"{i + offset:>{width}}\t{t if len(t) <= clip else t[:clip] + '…'}")
    return "\n".join(out)


__all__ = ["TIERS", "Ambiguous", "Span", "ascii_punct", "closest_region", "find_text", "follow_quotes",
           "keep_typography", "quote_lines", "seek_lines"]


# --------------------------------------------------------------------------------------
# typography, after a match that mapped Unicode punctuation to ASCII

# Past this many chars, the new text is taken as sent (aligning it char by char costs too much).
_ALIGN_CHARS = 50_000


def _typographic(have: str, want: str) -> list[tuple[int, int, str]]:
    """Where `want` (the model's text) differs from `have` (the file's, which it matched with
    punctuation mapped to ASCII) only in typography: (start, end) in `want`, and `have`'s
    text there (`–` for `-`, `…` for `...`, a no-break space for a space, `'` for `’`)."""

    a_text, a_at = _ascii_map(have)
    b_text, b_at = _ascii_map(want)
    out: list[tuple[int, int, str]] = []
    for a, b, size in difflib.SequenceMatcher(None, a_text, b_text, autojunk=False).get_matching_blocks():
        k = 0
        while k < size:
            first = k
            # One unit: the positions one char of either side stands for (`…` is three).
            while k + 1 < size and (a_at[a + k + 1] == a_at[a + k] or b_at[b + k + 1] == b_at[b + k]):
                k += 1
            k += 1
            whole = all(at[x] != at[x - 1] for at, x in ((a_at, a + first), (b_at, b + first)) if x > 0) and \
                all(at[x] != at[x - 1] for at, x in ((a_at, a + k), (b_at, b + k)))
            hs, he, ws, we = a_at[a + first], a_at[a + k - 1] + 1, b_at[b + first], b_at[b + k - 1] + 1
            if whole and have[hs:he] != want[ws:we]:
                out.append((ws, we, have[hs:he]))
    return out


def keep_typography(have: str, want: str, new: str) -> tuple[str, str]:
    """`new` with the file's typographic punctuation (dashes, quotes, ellipses, no-break and
    other spaces) where it leaves the matched text as it was, after `want` (the model's text)
    matched `have` (the file's) only with punctuation mapped to ASCII: the model's ASCII
    stood for them and did not mean to change them. Text the model wrote anew stays as sent.
    Returns (new text, a note naming what was kept, or "")."""
    if max(len(have), len(want), len(new)) > _ALIGN_CHARS:
        return new, ""
    swaps = _typographic(have, want)
    if not swaps:
        return new, ""

    edits: list[tuple[int, int, str]] = []
    for a, b, size in difflib.SequenceMatcher(None, want, new, autojunk=False).get_matching_blocks():
        edits += [(b + ws - a, b + we - a, kept) for ws, we, kept in swaps if a <= ws and we <= a + size]
    if not edits:
        return new, ""
    out = new
    for start, end, kept in sorted(edits, reverse=True):
        out = out[:start] + kept + out[end:]
    kinds = dict.fromkeys("no-break spaces" if k.isspace() else k for _, _, k in sorted(edits))
    return out, f"the file's typographic punctuation ({' '.join(kinds)}) kept where the new text leaves it as it was"


# --------------------------------------------------------------------------------------
# quotes, after a match that mapped Unicode punctuation to ASCII

_QUOTES = (('"', "\u201c", "\u201d"), ("'", "\u2018", "\u2019"))


def follow_quotes(have: str, want: str, new: str) -> tuple[str, str]:
    """`new` with its quotes written as the file writes them, after `want` (the model's text)
    matched `have` (the file's) only with punctuation mapped: straight where the file's
    matched text has only straight quotes of that kind and the model wrote curly ones
    (curly quotes in code do not parse), curly (opening or closing by what precedes) where
    it has only curly ones and the model wrote straight. Where the file mixes both, `new`
    is kept as sent. Returns (new text, a note naming the change or "")."""
    out, notes = new, []
    for straight, opening, closing in _QUOTES:
        file_curly = have.count(opening) + have.count(closing)
        file_straight = have.count(straight)
        model_curly = want.count(opening) + want.count(closing)
        if model_curly and file_straight and not file_curly:
            if opening in out or closing in out:
                out = out.replace(opening, straight).replace(closing, straight)
                notes.append("straight")
        elif want.count(straight) and file_curly and not file_straight and straight in out:
            chars = list(out)
            for i, c in enumerate(chars):
                if c == straight:
                    before = chars[i - 1] if i else " "
                    chars[i] = opening if before.isspace() or before in "([{<\u2014\u2013-" else closing
            out = "".join(chars)
            notes.append("curly")
    if not notes:
        return new, ""
    kind = "curly" if notes == ["curly"] * len(notes) else "straight" if notes == ["straight"] * len(notes) else ""
    return out, (f"new text's quotes written {kind} like the file's" if kind else "new text's quotes written like the file's")


# --------------------------------------------------------------------------------------
# indentation, after a whitespace-blind match


def _lead(s: str) -> str:
    return s[: len(s) - len(s.lstrip(" \t"))]


def reindent(pairs: list[tuple[str, str]], new: list[str]) -> list[str]:
    """The model's `new` lines with its indentation translated to the file's, when the
    matched (file line, model line) pairs show one consistent translation: a prefix the
    model left out or added, or tabs for spaces (or spaces for tabs) level for level.
    Without one, `new` is returned as it is: guessing could break a file that indentation
    gives meaning to."""
    shown = [(_lead(f), _lead(m)) for f, m in pairs if f.strip() and m.strip()]
    if not shown or all(fw == mw for fw, mw in shown):
        return new
    body = [ln for ln in new if ln.strip()]
    # The model left out a prefix (or wrote one too many): the same on every line.
    if all(fw.endswith(mw) for fw, mw in shown):
        extra = {fw[: len(fw) - len(mw)] for fw, mw in shown}
        if len(extra) == 1:
            p = extra.pop()
            return [p + ln if ln.strip() else ln for ln in new]
    if all(mw.endswith(fw) for fw, mw in shown):
        extra = {mw[: len(mw) - len(fw)] for fw, mw in shown}
        if len(extra) == 1 and all(ln.startswith(p := next(iter(extra))) for ln in body):
            return [ln[len(p):] if ln.strip() else ln for ln in new]
    # Tabs for spaces, level for level.
    for unit_f, unit_m in (("\t", " "), (" ", "\t")):
        if not all(set(fw) <= {unit_f} and set(mw) <= {unit_m} for fw, mw in shown):
            continue
        ratios = {(len(mw), len(fw)) for fw, mw in shown if fw or mw}
        per = {m / f for m, f in ratios if f}
        if len(per) != 1 or any(f == 0 and m for m, f in ratios):
            continue
        k = per.pop()  # model chars per file char
        out = []
        for ln in new:
            lead = _lead(ln)
            if not ln.strip() or not lead:
                out.append(ln)
                continue
            if set(lead) != {unit_m} or (len(lead) / k) % 1:
                return new
            out.append(unit_f * int(len(lead) / k) + ln[len(lead):])
        return out
    return new
