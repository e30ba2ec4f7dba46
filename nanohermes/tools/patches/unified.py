"""Unified diffs as `git diff` and `diff -u` write them.

`parse()` turns diff text into `FilePatch`es and `apply()` computes every file's new content
from a read callback; both are pure, so the tool can check the whole patch before it touches
a single file. Context is matched in tiers (see nanohermes.tools.matching): exactly, line
endings aside (a CRLF file keeps CRLF whatever the diff uses), then loosely when the loose
match is unique, and the result names the tier. A hunk whose line numbers drifted is found by
its context, nearest the stated line first, and the result says where.

Leniencies for diffs written by a model, each also checked to give what the author meant:
header line counts that do not add up (the body decides), `@@` headers without numbers,
blank context lines that lost their leading space, and a missing "\\ No newline at end of
file" marker (the file keeps its final-newline state). What cannot be read as meant (a line
without its prefix inside a hunk, a hunk that changes nothing) is an error naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from nanohermes.tools.matching import TIERS, Ambiguous, seek_lines
from nanohermes.tools.patches.common import (
    Line,
    Outcome,
    PatchError,
    added_lines,
    clip,
    dominant_eol,
    lines_with_eol,
    working_copy,
)


# --------------------------------------------------------------------------------------
# parse


@dataclass
class Hunk:
    header: str  # the @@ line as written
    old_start: int | None  # None: a header without numbers (search from the previous hunk)
    new_start: int | None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", text without EOL)
    old_no_eol: bool = False  # "\ No newline at end of file" after the old side's last line
    new_no_eol: bool = False
    cr: list[bool] = field(default_factory=list)  # per line: did the diff itself end it with CRLF?

    @property
    def old(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "+"]

    @property
    def new(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "-"]


@dataclass
class FilePatch:
    old_path: str | None  # None: /dev/null, the file is created
    new_path: str | None  # None: /dev/null, the file is deleted
    hunks: list[Hunk] = field(default_factory=list)
    git: bool = False  # came with a `diff --git` header
    old_mode: str | None = None
    new_mode: str | None = None
    copy: bool = False
    binary: bool = False
    named: bool = False  # the ---/+++ lines were seen
    old_epoch: bool = False  # `diff -N`: the old side is dated at the epoch (the file is created)
    new_epoch: bool = False
    dated: bool = False  # both names carry a date after a tab: made by `diff`, not written by hand
    # A created or deleted file named under a prefix `git apply` would strip (`--- orig/x`,
    # `+++ /dev/null`): the name without it. Which one is meant, `settle_prefixes` decides.
    alternative: str | None = None
    prefixes: tuple[str, ...] = ()  # the first components stripped from this section's two names

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or "?"

    @property
    def kind(self) -> str:
        if self.old_path is None:
            return "create"
        if self.new_path is None:
            return "delete"
        if self.old_path != self.new_path:
            return "copy" if self.copy else "rename"
        return "modify"


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(s: str) -> str:
    """git's C-style quoted path: "t\\303\\251st.txt" -> tést.txt."""
    body, out, i = s[1:-1] if s.endswith('"') else s[1:], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567":
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(c.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _header_path(rest: str) -> str | None:
    rest = rest.strip(" ")
    if rest.startswith('"'):
        end = rest.find('"', 1)
        while end > 0 and rest[end - 1] == "\\":
            end = rest.find('"', end + 1)
        name = _unquote(rest[: end + 1] if end > 0 else rest)
    else:
        name = rest.split("\t")[0].rstrip()
    return None if name == "/dev/null" else name


def _git_names(rest: str) -> tuple[str | None, str | None]:
    """The a/ and b/ names of a `diff --git a/X b/Y` line (used when no ---/+++ follow)."""
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        return _unquote(rest[: end + 1]), _header_path(rest[end + 2:])
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[:half][2:] == rest[half + 1:][2:]:
        return rest[:half], rest[half + 1:]
    i = rest.rfind(" b/")
    return (rest[:i], rest[i + 1:]) if i > 0 else (rest, rest)


def _strip_prefix(fp: FilePatch) -> None:
    """git writes a/ and b/; `diff -ru before after` writes before/ and after/ (one
    component each, as `git apply` strips with -p1). A traditional diff names one file, so
    two different names after the strip become the shorter one, as git apply takes it.
    The same path on both sides (a model writing `--- src/x.py`) is kept as written."""
    old, new = fp.old_path, fp.new_path
    git_prefixes = (old is None or old.startswith("a/")) and (new is None or new.startswith("b/"))
    if fp.git and not git_prefixes and old is not None and new is not None and old != new \
            and not fp.copy and _p1(old) == _p1(new) and "/" in old and "/" in new:
        old = new = _p1(old)  # `git diff --src-prefix=orig/ --dst-prefix=mod/`: git apply -p1 strips any prefix
    elif fp.git or git_prefixes:
        if old is not None and old.startswith("a/"):
            old = old[2:]
        if new is not None and new.startswith("b/"):
            new = new[2:]
    elif old is not None and new is not None and old != new:
        a, b = old.removeprefix("a/"), new.removeprefix("b/")  # one side with git's prefix, one without
        if a == b:
            old = new = a
        else:
            fp.prefixes = (old.split("/", 1)[0], new.split("/", 1)[0]) if "/" in old and "/" in new else ()
            old, new = _p1(old), _p1(new)
            if old != new:
                old = new = min(old, new, key=len)
    elif old is None and new is not None and new.startswith("b/") is False and "/" in new:
        if fp.old_epoch or fp.dated:  # `diff -u /dev/null new/x` names the file under its folder: git strips it
            new = _p1(new)
        else:
            fp.alternative = _p1(new)
    elif new is None and old is not None and "/" in old:
        if fp.new_epoch:
            old = _p1(old)
        else:
            fp.alternative = _p1(old)
    fp.old_path, fp.new_path = old, new


def settle_prefixes(patches: list[FilePatch], exists: Callable[[str], bool], folder_exists: Callable[[str], bool]) -> None:
    """Decide, for each created or deleted file named under a prefix (`--- orig/x`, `+++
    /dev/null`), whether the prefix is one `git apply` strips, by which path exists: a deleted
    file is the one that exists; a created one loses the prefix when another section of the
    patch stripped it (`--- orig/a`, `+++ mod/a`), or when its folder is missing while the
    folder without the prefix exists (and is not the workspace itself: `tests/new.py` is meant
    as written). A creation `diff` dated has lost it already (`_strip_prefix`). `exists` and
    `folder_exists` take a path as the patch names it."""
    stripped = {p for fp in patches for p in fp.prefixes}
    for fp in patches:
        alt, fp.alternative = fp.alternative, None
        if alt is None:
            continue
        if fp.new_path is None and fp.old_path is not None:
            if not exists(fp.old_path) and exists(alt):
                fp.old_path = alt
        elif fp.new_path is not None:
            head = fp.new_path.split("/", 1)[0]
            if head in stripped or ("/" in alt and folder_exists(alt) and not folder_exists(fp.new_path)):
                fp.new_path = alt


def _p1(path: str) -> str:
    return path.split("/", 1)[1] if "/" in path else path


# `diff -N` marks the missing side of a created or deleted file with the epoch as its date.
_EPOCH = re.compile(r"\t(1970-01-01|1969-12-31)[ T]\d\d:\d\d:\d\d(\.0+)?( [+-]\d{4})?\s*$")
# `diff -u` dates each name (`--- /dev/null\t2024-05-01 10:00:00.000000000 +0000`), as a hand
# no model writes: such a patch was made from two folders, and git apply strips one component.
_DATED = re.compile(r"\t\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def parse(text: str) -> list[FilePatch]:
    """Every file section of a unified diff, in order. Text outside file sections (a commit
    message, `Index:` lines, a mail signature) is ignored."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    crlf = [ln.endswith("\r") for ln in raw]
    lines = [ln[:-1] if cr else ln for ln, cr in zip(raw, crlf, strict=True)]
    patches: list[FilePatch] = []
    cur: FilePatch | None = None
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            a, b = _git_names(line[len("diff --git "):])
            cur = FilePatch(a, b, git=True)
            patches.append(cur)
            i += 1
            while i < n and not lines[i].startswith(("--- ", "@@", "diff ")):
                _extended(cur, lines[i])
                i += 1
            if not (i < n and lines[i].startswith("--- ")):
                _strip_prefix(cur)
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            old, new = _header_path(line[4:]), _header_path(lines[i + 1][4:])
            if cur is not None and cur.git and not cur.hunks and not cur.named:
                cur.old_path, cur.new_path = old, new
            else:
                cur = FilePatch(old, new)
                patches.append(cur)
            cur.named = True
            if not cur.git:
                cur.dated = bool(_DATED.search(line) and _DATED.search(lines[i + 1]))
                cur.old_epoch = bool(_EPOCH.search(line))
                cur.new_epoch = bool(_EPOCH.search(lines[i + 1]))
                if cur.old_epoch and cur.new_epoch:
                    cur.old_epoch = cur.new_epoch = False  # both dated 1970: an ordinary modification
                if cur.old_epoch:
                    cur.old_path = None
                elif cur.new_epoch:
                    cur.new_path = None
            _strip_prefix(cur)
            i += 2
            continue
        if line.startswith("@@"):
            if cur is None:
                raise PatchError(f"line {i + 1}: hunk `{line}` comes before any file header; "
                                 "start each file with `--- a/path` and `+++ b/path` lines")
            hunk, i = _hunk(lines, i, crlf)
            cur.hunks.append(hunk)
            continue
        i += 1
    if not patches:
        raise PatchError(_no_sections(text))
    for fp in patches:
        if fp.binary:
            raise PatchError(f"{fp.path}: binary patches are not supported; write the file with write_file instead")
        if fp.kind == "modify" and not fp.hunks and fp.old_mode == fp.new_mode:
            raise PatchError(f"{fp.path}: the file section has no @@ hunks; add hunks with matching context")
    return patches


_BEGIN_LIKE = re.compile(r"^\W*begin[ _-]*patch\W*$", re.IGNORECASE | re.MULTILINE)


def _no_sections(text: str) -> str:
    """The error for a text that is neither format, naming the one it seems to try."""
    both = ("a unified diff needs `--- a/path` and `+++ b/path` lines, then `@@` hunks; the other format starts "
            "with a line `*** Begin Patch` and ends with `*** End Patch`")
    if (tried := _BEGIN_LIKE.search(text)) is not None:
        return (f"no file sections found: `{clip(tried.group(0).strip(), 80)}` looks like the `*** Begin Patch` "
                f"format's first line but is not it ({both})")
    return f"no file sections found ({both})"


def _extended(fp: FilePatch, line: str) -> None:
    for prefix, attr in (("old mode ", "old_mode"), ("new mode ", "new_mode"),
                         ("new file mode ", "new_mode"), ("deleted file mode ", "old_mode")):
        if line.startswith(prefix):
            setattr(fp, attr, line[len(prefix):].strip())
    if line.startswith("new file mode"):
        fp.old_path = None
    elif line.startswith("deleted file mode"):
        fp.new_path = None
    elif line.startswith(("rename from ", "copy from ")):
        fp.old_path = "a/" + _named_path(line)
        fp.copy = line.startswith("copy")
    elif line.startswith(("rename to ", "copy to ")):
        fp.new_path = "b/" + _named_path(line)
    elif line.startswith(("Binary files ", "GIT binary patch")):
        fp.binary = True


def _named_path(line: str) -> str:
    """The path of a `rename from`/`copy to` line: a real file, never /dev/null."""
    path = _header_path(line.split(" ", 2)[2])
    if path is None:
        raise PatchError(f"`{clip(line.strip())}`: a rename or copy names a file, not /dev/null; fix the header")
    return path


def _hunk(lines: list[str], i: int, crlf: list[bool]) -> tuple[Hunk, int]:
    header = lines[i]
    start = i
    m = _HUNK.match(header)
    if m:
        old_start, new_start = int(m.group(1)), int(m.group(3))
        need_old = int(m.group(2)) if m.group(2) is not None else 1
        need_new = int(m.group(4)) if m.group(4) is not None else 1
        hunk = Hunk(m.group(0), old_start, new_start)  # without the section text after @@
    else:  # "@@" or "@@ def f(): @@": no numbers, the context alone places it
        hunk, need_old, need_new = Hunk(header.strip(), None, None), -1, -1
    i += 1
    n = len(lines)
    seen_old = seen_new = 0

    def satisfied() -> bool:
        return need_old >= 0 and seen_old >= need_old and seen_new >= need_new

    while i < n:
        line = lines[i]
        if line.startswith("\\"):
            if hunk.lines:
                tag = hunk.lines[-1][0]
                hunk.old_no_eol |= tag in " -"
                hunk.new_no_eol |= tag in " +"
            i += 1
            continue
        if line.startswith(("@@", "diff --git ")):
            break
        if (satisfied() or need_old < 0) and line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            break
        if satisfied() and (line in ("", "-- ") or line[:1] not in (" ", "-", "+")):
            break  # after the counted lines: a blank line or a mail signature ends the hunk
        if line == "":
            if i == n - 1 or (need_old < 0 and _only_blank_until_header(lines, i)):
                break
            line = " "  # a blank context line whose leading space was stripped
        tag = line[0]
        if tag not in " -+":
            if _hunk_goes_on(lines, i + 1):
                raise PatchError(f"line {i + 1}: `{clip(line, 80)}` in hunk `{header}` is neither context "
                                 "(a leading space), a removal (-) nor an addition (+); give every hunk line "
                                 "its prefix (a context line keeps its leading space)")
            break
        hunk.lines.append((tag, line[1:]))
        hunk.cr.append(crlf[i])
        seen_old += tag != "+"
        seen_new += tag != "-"
        i += 1
    if not hunk.lines:
        raise PatchError(f"hunk `{header}` has no lines; give context lines (space), removals (-) and additions (+)")
    if all(tag == " " for tag, _ in hunk.lines):
        raise PatchError(f"line {start + 1}: hunk `{header}` has only context lines and would change nothing; "
                         "mark the lines to remove with - and the lines to add with +")
    return hunk, i


def _hunk_goes_on(lines: list[str], i: int) -> bool:
    """Do removals or additions follow (before the next header or blank line)? Then the
    line before them was meant to be part of the hunk."""
    while i < len(lines) and lines[i] and not lines[i].startswith(("@@", "diff ", "--- ", "+++ ")):
        if lines[i][0] in "-+":
            return True
        if lines[i][0] != " ":
            return False
        i += 1
    return False


def _only_blank_until_header(lines: list[str], i: int) -> bool:
    while i < len(lines) and lines[i] == "":
        i += 1
    return i == len(lines) or lines[i][:1] not in (" ", "-", "+", "\\") or lines[i].startswith("--- ")


# --------------------------------------------------------------------------------------
# apply


def apply_file(fp: FilePatch, text: str, path: str) -> tuple[str, list[str]]:
    """Apply one file's hunks to its text: the new text and notes about drifted hunks."""
    cur = lines_with_eol(text)
    notes: list[str] = []
    floor = 0  # hunks apply in order and never overlap
    drift = 0  # where the previous hunk was found vs where it said (carried forward, like patch)
    shift = 0  # lines added minus removed so far: current index -> original line number
    for k, h in enumerate(fp.hunks, 1):
        old, new = h.old, h.new
        # Added lines take the file's line ending; in a file with none yet, the diff's own.
        eol = dominant_eol(cur) if any(e for _, e in cur) else None
        if h.old_start is None:
            expected = floor
        else:
            stated = h.old_start - 1 if old else h.old_start
            expected = max(floor, stated + shift + drift)
        pos = _find(cur, old, expected, floor, at_eof=h.old_no_eol)
        tier = 0
        if pos is None and old:
            try:
                hit = seek_lines([c for c, _ in cur], old, floor, eof=h.old_no_eol)
            except Ambiguous as e:
                raise PatchError(f"{path}: hunk {k} ({h.header}) matches only with {TIERS[e.tier]}, and then at "
                                 f"lines {', '.join(map(str, e.lines))}; no file was changed. Copy the context "
                                 "exactly from the file, or add lines to make it unique") from None
            if hit is not None:
                pos, tier = hit
                notes.append(f"hunk {k} of {path} ({h.header}) matched with {TIERS[tier]}")
        if pos is None:
            raise PatchError(_mismatch(path, k, h, cur, old, expected, floor, shift))
        found = pos - shift + 1
        if h.old_start is not None and old and found != h.old_start:
            notes.append(f"hunk {k} of {path} ({h.header}) matched at line {found}, not {h.old_start} "
                         f"(line numbers drifted by {found - h.old_start:+d})")
        if h.old_start is not None:
            drift = pos - (h.old_start - 1 if old else h.old_start) - shift
        at_end = pos + len(old) == len(cur)
        had_newline = not cur or cur[-1][1] != ""
        region, r = [], pos
        plus, changed = added_lines(h.lines, [c for c, _ in cur], pos, tier)
        if changed:
            notes[-1] += f", {changed}"
        added = iter(plus)
        for (tag, _text), cr in zip(h.lines, h.cr, strict=True):
            if tag == " ":
                region.append(cur[r])
                r += 1
            elif tag == "-":
                r += 1
            else:
                region.append((next(added), eol or ("\r\n" if cr else "\n")))
        cur[pos:pos + len(old)] = region
        if eol is None:  # still none of its own: what the new lines use, else the diff's majority
            eol = dominant_eol(cur) if any(e for _, e in cur) else ("\r\n" if sum(h.cr) * 2 > len(h.cr) else "\n")
        for j in range(len(cur) - 1):  # a line that used to be last now has a follower
            if cur[j][1] == "":
                cur[j] = (cur[j][0], eol)
        if at_end and cur:
            keep_missing = not had_newline and not h.old_no_eol  # the diff did not know; keep the state
            last_eol = "" if h.new_no_eol or keep_missing else (cur[-1][1] or eol)
            cur[-1] = (cur[-1][0], last_eol)
        floor = pos + len(region)
        shift += len(new) - len(old)
    return "".join(c + e for c, e in cur), notes


def _matches_at(cur: list[Line], old: list[str], p: int) -> bool:
    return all(cur[p + j][0] == old[j] for j in range(len(old)))


def _find(cur: list[Line], old: list[str], expected: int, floor: int, *, at_eof: bool) -> int | None:
    """The position of `old` in `cur` at or after `floor`, nearest `expected` first."""
    if not old:
        return expected if expected <= len(cur) else None
    last = len(cur) - len(old)
    if last < floor:
        return None
    candidates = [last] if at_eof else None
    if candidates is not None:
        return last if _matches_at(cur, old, last) else None
    expected = min(max(expected, floor), last)
    first = old[0]
    for d in range(0, max(expected - floor, last - expected) + 1):
        for p in (expected - d, expected + d) if d else (expected,):
            if floor <= p <= last and cur[p][0] == first and _matches_at(cur, old, p):
                return p
    return None


def _mismatch(path: str, k: int, h: Hunk, cur: list[Line], old: list[str], expected: int, floor: int, shift: int) -> str:
    """Name the file, the hunk and the first line that did not match, and show what is there."""
    if not old:
        return (f"{path}: hunk {k} ({h.header}) inserts after line {h.old_start}, but the file has only "
                f"{len(cur) - shift} lines; no file was changed. Read the file and fix the line numbers.")
    best, best_len = min(max(expected, floor), max(floor, len(cur) - 1)), -1
    for p in range(floor, len(cur)):
        n = 0
        while n < len(old) and p + n < len(cur) and cur[p + n][0] == old[n]:
            n += 1
        if n > best_len or (n == best_len and abs(p - expected) < abs(best - expected)):
            best, best_len = p, n
    if best_len <= 0:
        best = min(max(expected, floor), max(0, len(cur) - 1))
        best_len = 0
    at = best + best_len
    line_no = at - shift + 1
    want = clip(old[best_len]) if best_len < len(old) else "(end of hunk)"
    got = clip(cur[at][0]) if at < len(cur) else "(end of file)"
    lo, hi = max(0, best - 1), min(len(cur), best + len(old) + 1, best + 12)
    shown = "\n".join(f"{j - shift + 1:>6} | {clip(cur[j][0])}" for j in range(lo, hi)) or "      | (the file is empty)"
    return (f"{path}: hunk {k} ({h.header}) does not match; no file was changed.\n"
            f"First line that did not match, line {line_no}: the hunk expects `{want}` but the file has `{got}`.\n"
            f"The file has there:\n{shown}\n"
            "Read the file again and regenerate the diff from its current content, or use edit_file.")


def apply(patches: list[FilePatch], read: Callable[[str], str | None]) -> list[Outcome]:
    """Each file section's outcome, in order. `read(path)` gives a file's current text or None
    when it does not exist. Sections see the effect of earlier sections on the same path."""
    state, current = working_copy(read)

    out: list[Outcome] = []
    for fp in patches:
        kind = fp.kind
        src = fp.old_path
        text = current(src) if src is not None else None
        if kind != "create" and text is None:
            if not fp.git and fp.hunks and all(not h.old for h in fp.hunks) and src == fp.new_path:
                kind, text = "create", None  # diff -N: a new file against an empty old one
            else:
                raise PatchError(f"{src} does not exist; no file was changed. Check the path (relative to the workspace)")
        if kind == "create" and fp.new_path is not None and current(fp.new_path) is not None:
            raise PatchError(f"{fp.new_path} already exists but the patch creates it (--- /dev/null); "
                             "no file was changed. Diff against its current content instead")
        if kind in ("rename", "copy") and fp.new_path is not None and current(fp.new_path) is not None:
            raise PatchError(f"cannot {kind} {src} to {fp.new_path}: it already exists; no file was changed")
        new_text, notes = apply_file(fp, text or "", fp.path) if fp.hunks else (text or "", [])
        if fp.hunks and kind == "modify" and new_text == text and fp.old_mode == fp.new_mode:
            raise PatchError(f"{fp.path}: the hunks' - and + lines are the same, so the patch would change nothing; "
                             "no file was changed. Put the new text on the + lines")
        if kind == "delete":
            if new_text != "":
                raise PatchError(f"the patch deletes {src} but the file has other lines than the diff removes; "
                                 "no file was changed. Read the file and regenerate the diff")
            kind = "delete"
        executable = None
        if fp.new_mode is not None and (fp.old_mode != fp.new_mode or kind == "create"):
            executable = fp.new_mode.endswith("755")
        o = Outcome(kind, src, fp.new_path if kind != "delete" else None, text,
                    None if kind == "delete" else new_text, executable, len(fp.hunks), notes)
        out.append(o)
        if kind in ("delete", "rename") and src is not None:  # src is set: the file was read above
            state[src] = None
        if kind != "delete" and o.new_path is not None:
            state[o.new_path] = new_text
    return out


__all__ = ["FilePatch", "Hunk", "apply", "apply_file", "parse", "settle_prefixes"]
