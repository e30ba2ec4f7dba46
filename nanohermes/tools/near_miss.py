"""edit_file's readings of a near miss: old_string as the model meant it when it is not in the
file as sent (read_file's line numbers, blank lines at its ends, escapes, a final newline,
elision lines), each reading named in the result, a loose match only when unique, and the
closest lines of the file when none fits; and how the found text is replaced."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from nanohermes.tools.base import ToolError
from nanohermes.tools.fileops import TextFile, with_eol

if TYPE_CHECKING:
    from nanohermes.tools.matching import Span


class Sent(Protocol):
    """What edit_file was sent (its params)."""

    @property
    def old_string(self) -> str: ...

    @property
    def new_string(self) -> str: ...

    @property
    def replace_all(self) -> bool: ...


@dataclass(frozen=True)
class Edit:
    """An edit worked out: replacements made, new_string as used, the repairs named, the new text."""

    n: int
    new: str
    notes: list[str]
    result: str
    applied: str = ""  # the result is the text as it was: where new_string already stands


def new_string_artefacts(text: str, old_sent: str, new: str, shown: str) -> tuple[str, list[str]]:
    """new_string without what a model copies into it by mistake, once old_string matched as
    sent: read_file's line numbers on every line (where the file has no such lines of its
    own, which would make them possibly content)."""
    # only an edit that missed reads its artefacts and near matches
    from nanohermes.tools.artefacts import all_numbered, numbered_like_content, numbering, strip_numbers

    notes: list[str] = []
    if all_numbered(new) and not all_numbered(old_sent):
        kind = numbering(new)
        if numbered_like_content(text, new):
            like = "read_file's (`12<TAB>`)" if kind == "read_file" else kind
            raise ToolError(f"new_string's lines all start with line numbers like {like} and old_string's do not, but "
                            f"{shown} has lines like that of its own, so they may be content: send new_string without "
                            "the numbers (if they are content, include such a line in old_string too)")
        new = strip_numbers(new)
        notes.append(f"{_numbers(kind, copied=True)} stripped from new_string")
    return new, notes


def _numbers(kind: str, *, copied: bool = False) -> str:
    """How a note names line numbers of `kind` (`artefacts.numbering`)."""
    if kind == "read_file":
        return "line numbers copied from read_file" if copied else "read_file's line numbers"
    return f"line numbers like {kind}"


def near_miss(text: str, f: TextFile, args: Sent, shown: str) -> Edit:
    """old_string is not in the file as sent: read it as the model meant it, in order, and
    take the first reading that matches (a loose tier only when unique): read_file's line
    numbers stripped; blank lines at its start or end ignored; escaped twice (literal `\\n`,
    `\\"`) decoded; a final newline the file's last line does not have; elision lines
    (`...`, `# ... existing code ...`) in both strings as "the lines in between stay". With no
    reading found, an edit whose new_string already stands there is "already applied";
    anything else is a ToolError that shows the closest lines of the file."""
    # only an edit that missed reads its artefacts and near matches
    # only an edit that missed reads its artefacts and near matches
    from nanohermes.tools.artefacts import all_numbered, is_elision, numbering, strip_numbers, unescape_twice
    from nanohermes.tools.matching import TIERS, find_text

    sent_old, sent_new = args.old_string.replace("\r\n", "\n"), args.new_string.replace("\r\n", "\n")
    old_s, new_s, notes = sent_old, sent_new, []
    if all_numbered(sent_old):
        old_s, new_s = strip_numbers(sent_old), strip_numbers(sent_new, like=sent_old)
        notes.append(f"{_numbers(numbering(sent_old))} stripped from old_string" +
                     (" and new_string" if new_s != sent_new else ""))
    else:
        new_s, more = new_string_artefacts(text, sent_old, new_s, shown)
        notes += more
    readings = [(old_s, new_s, notes)]
    if (trimmed := _trim_blank_edges(old_s, new_s)) is not None:
        readings.append((trimmed[0], trimmed[1], [*notes, trimmed[2]]))
    if (plain_old := unescape_twice(old_s)) is not None:
        escaped = [*notes, "old_string and new_string were escaped twice (literal \\n or \\\"): read unescaped"]
        plain_new = unescape_twice(new_s) or new_s
        readings.append((plain_old, plain_new, escaped))
        if (trimmed := _trim_blank_edges(plain_old, plain_new)) is not None:
            readings.append((trimmed[0], trimmed[1], [*escaped, trimmed[2]]))
    for tier in range(len(TIERS)):  # every reading exactly before any loosely
        for old_r, new_r, why in readings:
            one = range(tier, tier + 1)
            found = find_text(text, with_eol(old_r, f.eol), one) or find_text(text, old_r, one)
            if found is not None:
                return _matched(text, f, args, shown, found, old_r, new_r, why)
    for old_r, new_r, why in readings:
        if old_r.endswith("\n") and not text.endswith("\n") and len(old_r) > 1:
            tail = with_eol(old_r[:-1], f.eol)
            if text.endswith(tail) and text.count(tail) == 1:
                new_eol = with_eol(new_r, f.eol)
                return Edit(1, new_eol, [*why, "old_string's final newline ignored: the file's last line has none"],
                             replace(text, tail, new_eol, f.eol, False))
    if any(is_elision(ln) for ln in old_s.split("\n")) and (done := _elided(text, f, old_s, new_s, shown)) is not None:
        return Edit(1, new_s, [*notes, done[1]], done[0])
    for _old, new_r, why in readings:
        if _stands(text, new_r, f.eol):
            at = text.count("\n", 0, text.find(with_eol(new_r, f.eol) if with_eol(new_r, f.eol) in text else new_r)) + 1
            return Edit(0, new_r, why, text, applied=f"old_string is not in {shown} but new_string is (line {at})")
    raise _not_found(text, shown, readings[-1][0])


def _matched(text: str, f: TextFile, args: Sent, shown: str, found: tuple[list[Span], int], needle: str,
             new_s: str, notes: list[str]) -> Edit:
    """The edit for a reading of old_string found at `found` (spans, tier): every exact
    occurrence with replace_all, else the one match; a loose one must be unique, and the new
    text follows the file's indentation and quotes where the tier ignored them."""
    # only an edit that missed reads its artefacts and near matches
    from nanohermes.tools.matching import TIERS, follow_quotes, keep_typography, reindent

    spans, tier = found
    new_eol = with_eol(new_s, f.eol)
    notes = list(notes)
    if tier == 0:  # what the reading changed was all that differed: an exact match after all
        old_eol = text[spans[0].start:spans[0].end]
        if len(spans) > 1 and not args.replace_all:
            raise ToolError(f"old_string occurs {len(spans)} times in {shown} (lines {occurrence_lines(text, old_eol)}); "
                            "pass replace_all=true or add context to make it unique")
        n = len(spans) if args.replace_all else 1
        return Edit(n, new_eol, notes, replace(text, old_eol, new_eol, f.eol, args.replace_all))
    if len(spans) > 1:
        where = ", ".join(str(text.count("\n", 0, sp.start) + 1) for sp in spans[:10])
        raise ToolError(f"old_string is not in {shown} as written; with {TIERS[tier]} it matches "
                        f"{len(spans)} places (lines {where}), and a loose match must be unique: "
                        "copy old_string exactly from the file, or add context")
    sp = spans[0]
    notes.append(f"matched with {TIERS[tier]}")
    if tier >= 2:  # indentation was ignored: new_string's is translated to the file's
        first = text.count("\n", 0, sp.start)
        want = needle.split("\n")
        have = [ln.rstrip("\r") for ln in text.split("\n")[first:first + len(want)]]
        new_lines = new_s.split("\n")
        fixed = reindent(list(zip(have, want, strict=False)), new_lines)  # the file may end first
        if fixed != new_lines and not needle[:1].isspace():
            fixed[0] = new_lines[0]  # it goes after the file's own indentation, kept in place
        if fixed != new_lines:
            notes.append("new_string re-indented like the file")
            new_eol = with_eol("\n".join(fixed), f.eol)
    if tier >= 3:  # quotes the file's way first; what is left the model's ASCII stood for is the file's
        new_eol, quoted = follow_quotes(text[sp.start:sp.end], needle, new_eol)
        notes += [quoted.replace("new text's", "new_string's")] if quoted else []
        new_eol, kept = keep_typography(text[sp.start:sp.end], needle, new_eol)
        notes += [kept.replace("the new text", "new_string")] if kept else []
    return Edit(1, new_eol, notes, text[: sp.start] + new_eol + text[sp.end:])


_LEADING_BLANKS = re.compile(r"\A(?:[ \t]*\n)+")
_TRAILING_BLANKS = re.compile(r"\n(?:[ \t]*\n)+[ \t]*\Z")


def _trim_blank_edges(old: str, new: str) -> tuple[str, str, str] | None:
    """old_string and new_string without the blank lines at old_string's start and end (a
    model's spurious empty first line), and the note; None when it has none."""
    what = []
    if _LEADING_BLANKS.match(old) and old.strip():
        old, new = _LEADING_BLANKS.sub("", old), _LEADING_BLANKS.sub("", new)
        what.append("start")
    if _TRAILING_BLANKS.search(old) and old.strip():
        old, new = _TRAILING_BLANKS.sub("\n", old), _TRAILING_BLANKS.sub("\n", new)
        what.append("end")
    if not what:
        return None
    return old, new, f"blank lines at the {' and '.join(what)} of old_string ignored"


def _elided(text: str, f: TextFile, old: str, new: str, shown: str) -> tuple[str, str] | None:
    """old_string and new_string with the same elision lines (`# ... existing code ...`): each
    part between them is found in order (the first uniquely), replaced by new_string's part,
    and the file's lines in between stay. (new text, note), or None when that reading fails."""
    # only an edit that missed reads its artefacts and near matches
    # only an edit that missed reads its artefacts and near matches
    from nanohermes.tools.artefacts import is_elision
    from nanohermes.tools.matching import find_text

    def parts(s: str) -> tuple[list[str], list[str]]:
        segs: list[str] = []
        cur: list[str] = []
        marks: list[str] = []
        for ln in s.split("\n"):
            if is_elision(ln):
                segs.append("\n".join(cur))
                marks.append(ln.strip())
                cur = []
            else:
                cur.append(ln)
        segs.append("\n".join(cur))
        return segs, marks

    old_parts, marks = parts(old)
    new_parts, new_marks = parts(new)
    if len(old_parts) != len(new_parts):
        raise ToolError(f"old_string has {len(marks)} elision line(s) ({marks[0]}) and new_string {len(new_marks)}; "
                        "give both the same ones where the lines to keep are, or send the lines in full")
    spans: list[tuple[int, int]] = []
    pos = 0
    for k, part in enumerate(old_parts):
        if not part.strip():
            if 0 < k < len(old_parts) - 1 or new_parts[k].strip():
                return None  # two elisions in a row, or new text where nothing old stands
            spans.append((pos, pos) if k == 0 else (len(text), len(text)))
            continue
        needle = with_eol(part, f.eol)
        at = text.find(needle, pos)
        if at < 0 or (not spans and text.count(needle) > 1):
            hit = find_text(text[pos:], needle)
            if hit is None or len(hit[0]) != 1:
                return None
            at, end = pos + hit[0][0].start, pos + hit[0][0].end
        else:
            end = at + len(needle)
        spans.append((at, end))
        pos = end
    out = [text[:spans[0][0]]]
    for k, (_start, end) in enumerate(spans):
        out.append(with_eol(new_parts[k], f.eol) if old_parts[k].strip() else "")
        out.append(text[end:spans[k + 1][0]] if k + 1 < len(spans) else text[end:])
    kept = sum(text.count("\n", spans[k][1], spans[k + 1][0]) for k in range(len(spans) - 1))
    return "".join(out), (f"the elision line `{marks[0]}` in old_string and new_string read as: the lines in between "
                          f"stay ({max(0, kept - 1)} kept)")


def _stands(text: str, new: str, eol: str) -> bool:
    """Is new_string, substantial enough to tell (two lines, or a line of 8 chars), already in the file?"""
    body = new.strip()
    if len(body) < 8 and "\n" not in body:
        return False
    return with_eol(new, eol) in text or new in text


def _not_found(text: str, shown: str, needle: str) -> ToolError:
    """old_string is in no reading of the file: the closest lines (the file's first ones when
    nothing is alike), to copy old_string from."""
    # only an edit that missed reads its artefacts and near matches
    from nanohermes.tools.matching import TIERS, closest_region, quote_lines

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    want = needle.split("\n")
    region = closest_region(lines, want)
    if not lines:
        hint = f"\n{shown} is empty."
    else:
        lo = max(0, region - 2) if region is not None else 0
        hi = min(len(lines), lo + len(want) + 4)
        label = "The closest region of the file" if region is not None else "Nothing in the file is alike; it begins"
        hint = (f"\n{label}, lines {lo + 1}-{hi}:\n" + quote_lines(lines, lo, hi - lo) +
                "\nCopy old_string from these lines (without the line numbers) and retry.")
    return ToolError(f"old_string not found in {shown}; read the file and match it exactly, including whitespace"
                     f" (also tried: {', '.join(TIERS[1:])}, blank lines at its ends, escapes decoded once)" + hint)


def match_eol(text: str, eol: str, old: str, new: str) -> tuple[str, str]:
    """Translate the model's line endings to the file's: a CRLF file stays CRLF even when
    old_string and new_string come with LF. The text as sent wins when it matches."""
    old_eol, new_eol = with_eol(old, eol), with_eol(new, eol)
    if old_eol in text:
        return old_eol, new_eol
    if old in text:
        return old, new
    return old_eol, new_eol


def replace(text: str, old: str, new: str, eol: str, replace_all: bool) -> str:
    """Replace left to right like str.replace, touching nothing outside the matched spans.
    A match that ends the file keeps the file's final newline (or its absence): only that
    replacement is adjusted, never a byte around it."""
    out: list[str] = []
    start = 0
    while (i := text.find(old, start)) >= 0:
        end = i + len(old)
        piece = new
        if end == len(text):
            head = "".join(out) + text[start:i]
            if text.endswith("\n") and head + piece and not (head + piece).endswith("\n"):
                piece += eol
            elif not text.endswith("\n") and piece.endswith("\n"):
                piece = piece[:-2] if piece.endswith("\r\n") else piece[:-1]
        out.append(text[start:i] + piece)
        start = end
        if not replace_all:
            break
    out.append(text[start:])
    return "".join(out)


def occurrence_lines(text: str, needle: str, limit: int = 10) -> str:
    lines: list[str] = []
    start = 0
    while len(lines) < limit and (i := text.find(needle, start)) >= 0:
        lines.append(str(text.count("\n", 0, i) + 1))
        start = i + max(1, len(needle))
    more = text.count(needle) - len(lines)
    return ", ".join(lines) + (f" and {more} more" if more > 0 else "")
