"""apply_patch: unified diffs as `git diff` and `diff -u` write them, and the `*** Begin
Patch` format OpenAI's models write (Codex's apply_patch reads it), told apart by the text.

`parse()` turns diff text into `FilePatch`es and `apply()` computes every file's new content
from a read callback (`parse_begin_patch()` and `apply_begin_patch()` likewise for the other
format); all are pure, so the tool can check the whole patch before it touches a single file
(all or nothing). Context is matched in tiers (see nanohermes.tools.matching): exactly, line
endings aside (a CRLF file keeps CRLF whatever the diff uses), then loosely when the loose
match is unique, and the result names the tier. A hunk whose line numbers drifted is found by
its context, nearest the stated line first, and the result says where.

Leniencies for diffs written by a model, each also checked to give what the author meant:
header line counts that do not add up (the body decides), `@@` headers without numbers,
blank context lines that lost their leading space, and a missing "\\ No newline at end of
file" marker (the file keeps its final-newline state). What cannot be read as meant (a line
without its prefix inside a hunk, a hunk that changes nothing) is an error naming the line.

Paths: the tool names every path as written (`written_paths`) as its subjects, so the runtime
resolves them with the one resolver like any other tool's (`l/../x` with `l -> deep/er` is
`deep/x`); the resolved paths are what the rules judge and what the patch reads and writes,
through the link-refusing opens of `nanohermes.pathrules`. Nothing here folds `..` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanohermes.pathrules import read_exact, swapped, unlink_exact
from nanohermes.permissions import Effect, SubjectKind
from nanohermes.tools.base import Approval, Params, Tool, ToolContext, ToolError, ToolResult
from nanohermes.tools.matching import TIERS, Ambiguous, closest_region, follow_quotes, quote_lines, reindent, seek_lines
from nanohermes.tools.fileops import (
    TextFile,
    changed_since_seen,
    atomic_write,
    forget_file,
    guard_fresh,
    near_namesakes,
    remember_file,
    bounded_diff,
    checked_write_target,
    diff_stat,
    shown_path,
    looks_binary,
    unified_diff,
)


# Where the old content of a file a patch replaced unread is kept, in the session folder.
REPLACED_DIR = "replaced"


class PatchError(ValueError):
    """The diff cannot be parsed or does not apply; the text says where and what next."""


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
            old, new = _p1(old), _p1(new)
            if old != new:
                old = new = min(old, new, key=len)
    elif old is None and new is not None and new.startswith("b/") is False and "/" in new and fp.old_epoch:
        new = _p1(new)
    elif new is None and old is not None and "/" in old and fp.new_epoch:
        old = _p1(old)
    fp.old_path, fp.new_path = old, new


def _p1(path: str) -> str:
    return path.split("/", 1)[1] if "/" in path else path


# `diff -N` marks the missing side of a created or deleted file with the epoch as its date.
_EPOCH = re.compile(r"\t(1970-01-01|1969-12-31)[ T]\d\d:\d\d:\d\d(\.0+)?( [+-]\d{4})?\s*$")


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
        raise PatchError("no file sections found; a diff needs `--- a/path` and `+++ b/path` lines, then `@@` hunks")
    for fp in patches:
        if fp.binary:
            raise PatchError(f"{fp.path}: binary patches are not supported; write the file with write_file instead")
        if fp.kind == "modify" and not fp.hunks and fp.old_mode == fp.new_mode:
            raise PatchError(f"{fp.path}: the file section has no @@ hunks; add hunks with matching context")
    return patches


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
        raise PatchError(f"`{_clip(line.strip())}`: a rename or copy names a file, not /dev/null; fix the header")
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
                raise PatchError(f"line {i + 1}: `{_clip(line, 80)}` in hunk `{header}` is neither context "
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


@dataclass
class Outcome:
    """What one file section does, computed without touching the disk."""

    kind: str  # create | modify | delete | rename | copy
    old_path: str | None
    new_path: str | None
    old_text: str | None
    new_text: str | None
    executable: bool | None = None  # set or clear the exec bits; None: leave as is
    hunks: int = 0
    notes: list[str] = field(default_factory=list)


Line = tuple[str, str]  # (content, eol) with eol "\n", "\r\n" or "" (last line without newline)


def _split(text: str) -> list[Line]:
    if not text:
        return []
    parts = text.split("\n")
    final = text.endswith("\n")
    if final:
        parts.pop()
    out: list[Line] = [(p[:-1], "\r\n") if p.endswith("\r") else (p, "\n") for p in parts]
    if not final:
        out[-1] = (parts[-1], "")
    return out


def _dominant(lines: list[Line]) -> str:
    crlf = sum(1 for _, e in lines if e == "\r\n")
    lf = sum(1 for _, e in lines if e == "\n")
    return "\r\n" if crlf > lf else "\n"


def apply_file(fp: FilePatch, text: str, path: str) -> tuple[str, list[str]]:
    """Apply one file's hunks to its text: the new text and notes about drifted hunks."""
    cur = _split(text)
    notes: list[str] = []
    floor = 0  # hunks apply in order and never overlap
    drift = 0  # where the previous hunk was found vs where it said (carried forward, like patch)
    shift = 0  # lines added minus removed so far: current index -> original line number
    for k, h in enumerate(fp.hunks, 1):
        old, new = h.old, h.new
        # Added lines take the file's line ending; in a file with none yet, the diff's own.
        eol = _dominant(cur) if any(e for _, e in cur) else None
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
        plus, changed = _added_lines(h.lines, [c for c, _ in cur], pos, tier)
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
            eol = _dominant(cur) if any(e for _, e in cur) else ("\r\n" if sum(h.cr) * 2 > len(h.cr) else "\n")
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
    want = _clip(old[best_len]) if best_len < len(old) else "(end of hunk)"
    got = _clip(cur[at][0]) if at < len(cur) else "(end of file)"
    lo, hi = max(0, best - 1), min(len(cur), best + len(old) + 1, best + 12)
    shown = "\n".join(f"{j - shift + 1:>6} | {_clip(cur[j][0])}" for j in range(lo, hi)) or "      | (the file is empty)"
    return (f"{path}: hunk {k} ({h.header}) does not match; no file was changed.\n"
            f"First line that did not match, line {line_no}: the hunk expects `{want}` but the file has `{got}`.\n"
            f"The file has there:\n{shown}\n"
            "Read the file again and regenerate the diff from its current content, or use edit_file.")


def _clip(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "…"


def _working_copy(read: Callable[[str], str | None]) -> tuple[dict[str, str | None], Callable[[str], str | None]]:
    """The files as earlier sections of one patch left them (None: absent), each read from
    `read` on first use; write a path's new text into the dict."""
    state: dict[str, str | None] = {}

    def current(path: str) -> str | None:
        if path not in state:
            state[path] = read(path)
        return state[path]

    return state, current


def apply(patches: list[FilePatch], read: Callable[[str], str | None]) -> list[Outcome]:
    """Each file section's outcome, in order. `read(path)` gives a file's current text or None
    when it does not exist. Sections see the effect of earlier sections on the same path."""
    state, current = _working_copy(read)

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


# --------------------------------------------------------------------------------------
# the `*** Begin Patch` format
#
# What OpenAI's models write (Codex's apply_patch reads it): file operations between
# `*** Begin Patch` and `*** End Patch`; an update is a series of chunks, each optionally
# opened by `@@` or `@@ <a line to find first>` (a class or def line; several such lines
# stacked are found in order, each below the one before), of context (space),
# removed (-) and added (+) lines, found by content alone; `*** End of File` anchors the
# chunk at the end. Markers may carry stray blanks around them.

BEGIN, END = "*** Begin Patch", "*** End Patch"
_ADD, _DELETE, _UPDATE, _MOVE = "*** Add File:", "*** Delete File:", "*** Update File:", "*** Move to:"
_EOF_MARK = "*** End of File"


def is_begin_patch(text: str) -> bool:
    """Is this the `*** Begin Patch` format (detected from its first marker line)?"""
    for line in text.lstrip().split("\n", 3)[:3]:
        if line.strip() == BEGIN:
            return True
    return False


@dataclass
class Chunk:
    # The text after each `@@` opening the chunk: lines to find in order before its lines
    # (`@@ class A` then `@@ def f`, stacked, narrow the search as Codex does).
    contexts: list[str] = field(default_factory=list)
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", text)
    eof: bool = False
    line_no: int = 0  # where the chunk starts in the patch, for errors

    @property
    def old(self) -> list[str]:
        return [t for tag, t in self.lines if tag != "+"]


@dataclass
class FileOp:
    kind: str  # add | delete | update
    path: str
    move_to: str | None = None
    content: str = ""  # add: the new file's text
    chunks: list[Chunk] = field(default_factory=list)
    line_no: int = 0


def _marker(line: str, marker: str) -> str | None:
    """The path after a marker like `*** Update File:`, blanks around either tolerated."""
    t = line.strip()
    if not t.startswith(marker):
        return None
    return t[len(marker):].strip()


def _is_marker(line: str) -> bool:
    t = line.strip()
    return t in (END, _EOF_MARK) or t.startswith((_ADD, _DELETE, _UPDATE, _MOVE))


def parse_begin_patch(text: str) -> list[FileOp]:
    """Every file operation of a `*** Begin Patch` text, or a PatchError naming the line."""
    lines = text.replace("\r\n", "\n").split("\n")
    # What a model puts around the patch (a sentence, a heredoc `<<'EOF'`, a code fence) is
    # dropped before `*** Begin Patch`; after `*** End Patch` only the closing `EOF` or fence.
    lo = next((i for i, ln in enumerate(lines) if ln.strip() == BEGIN), None)
    if lo is None:
        raise PatchError(f"the patch must start with `{BEGIN}`")
    hi = next((i for i in range(len(lines) - 1, lo, -1) if lines[i].strip() == END), None)
    if hi is None:
        raise PatchError(f"line {len(lines)}: the patch must end with `{END}` (was it cut off?); no file was changed")
    for j in range(hi + 1, len(lines)):
        if lines[j].strip() not in ("", "EOF", "```"):
            raise PatchError(f"line {j + 1}: `{_clip(lines[j], 80)}` comes after `{END}`; end the patch there")
    hi += 1
    ops: list[FileOp] = []
    i = lo + 1
    end = hi - 1
    while i < end:
        line = lines[i]
        if not line.strip() or line.strip() in (BEGIN, END):  # blank, or two patches sent as one
            i += 1
            continue
        if (path := _marker(line, _ADD)) is not None:
            op = FileOp("add", path, line_no=i + 1)
            i += 1
            body: list[str] = []
            while i < end and not _is_marker(lines[i]):
                if lines[i] == "" and _more_added(lines, i, end):
                    body.append("")  # an empty line whose + was dropped
                    i += 1
                    continue
                if lines[i] == "":
                    i += 1
                    continue
                if not lines[i].startswith("+"):
                    raise PatchError(f"line {i + 1}: `{_clip(lines[i], 80)}` in `*** Add File: {path}`: every line "
                                     "of a new file starts with +")
                body.append(lines[i][1:])
                i += 1
            op.content = "".join(b + "\n" for b in body)
            ops.append(op)
        elif (path := _marker(line, _DELETE)) is not None:
            ops.append(FileOp("delete", path, line_no=i + 1))
            i += 1
        elif (path := _marker(line, _UPDATE)) is not None:
            op = FileOp("update", path, line_no=i + 1)
            i += 1
            if i < end and (dest := _marker(lines[i], _MOVE)) is not None:
                op.move_to = dest
                i += 1
            i = _chunks(lines, i, end, op)
            ops.append(op)
        else:
            raise PatchError(f"line {i + 1}: `{_clip(line, 80)}` is not a file operation; expected "
                             f"`{_ADD} path`, `{_DELETE} path` or `{_UPDATE} path`")
    if not ops:
        raise PatchError(f"the patch has no file operations between `{BEGIN}` and `{END}`; nothing to do")
    for op in ops:
        if not op.path or (op.move_to is not None and not op.move_to):
            raise PatchError(f"line {op.line_no}: a file operation without a path")
    return ops


# `@@ -12,4 +12,5 @@ def f():` written where `@@ def f():` belongs.
_NUMBERED = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@(.*)$")


def _more_added(lines: list[str], i: int, end: int) -> bool:
    while i < end and lines[i] == "":
        i += 1
    return i < end and lines[i].startswith("+")


def _chunks(lines: list[str], i: int, end: int, op: FileOp) -> int:
    chunk: Chunk | None = None
    while i < end:
        line = lines[i]
        if _is_marker(line):
            if line.strip() == _EOF_MARK:
                if chunk is None or not chunk.lines:
                    raise PatchError(f"line {i + 1}: `{_EOF_MARK}` with no lines before it in `{_UPDATE} {op.path}`")
                chunk.eof = True
                chunk = None
                i += 1
                continue
            break
        head = line.rstrip()
        if head == "@@" or line.startswith("@@ "):
            text = line[3:].strip() if head != "@@" else ""
            if (numbered := _NUMBERED.match(text)) is not None:
                text = numbered.group(1).strip()  # a unified-diff header: the content places the chunk
            if chunk is not None and not chunk.lines and chunk.contexts:
                chunk.contexts += [text] if text else []  # stacked under the one before: narrows it
            else:
                chunk = Chunk([text] if text else [], line_no=i + 1)
                op.chunks.append(chunk)
            i += 1
            continue
        if chunk is None:
            if not line.strip():  # blank lines before a chunk separate, they are not context
                i += 1
                continue
            chunk = Chunk(line_no=i + 1)  # the first chunk may start without @@
            op.chunks.append(chunk)
        tag = line[:1]
        if line == "":
            chunk.lines.append((" ", ""))  # a blank context line that lost its space
        elif tag in " -+":
            chunk.lines.append((tag, line[1:]))
        else:
            raise PatchError(f"line {i + 1}: `{_clip(line, 80)}` in `{_UPDATE} {op.path}` is neither context "
                             "(a leading space), a removal (-) nor an addition (+); give every line its prefix")
        i += 1
    if not op.chunks:
        raise PatchError(f"line {op.line_no}: `{_UPDATE} {op.path}` has no changes; add @@ chunks with -/+ lines"
                         + (" (or give only `*** Move to:` to rename? a move needs at least one chunk)" if op.move_to else ""))
    for c in op.chunks:
        while c.lines and c.lines[-1] == (" ", "") and not c.eof:
            c.lines.pop()  # blank lines between chunks are separators, not context
        if not any(tag != " " for tag, _ in c.lines):
            raise PatchError(f"line {c.line_no}: the chunk of `{_UPDATE} {op.path}` has no - or + lines and would "
                             "change nothing; mark what to remove with - and what to add with +")
    return i


def _apply_chunks(path: str, text: str, chunks: list[Chunk], notes: list[str]) -> str:
    cur = _split(text)
    content = [c for c, _ in cur]
    eol = _dominant(cur) if cur else "\n"
    out: list[str] = []
    at = 0  # chunks apply in order: each is searched after the previous one
    copied = 0
    for k, c in enumerate(chunks, 1):
        for context in c.contexts:
            # An @@ line is written without its indentation by convention: the first line
            # below the cursor equal to it once stripped is the format's own definition.
            want = context.strip()
            plain = next((i for i in range(at, len(content)) if content[i].strip() == want), None)
            try:
                hit = (plain, 0) if plain is not None else seek_lines(content, [context], at)
            except Ambiguous as e:
                raise PatchError(f"{path}: `@@ {context}` (patch line {c.line_no}) matches only with "
                                 f"{TIERS[e.tier]}, at lines {', '.join(map(str, e.lines))}; no file was changed. "
                                 "Copy the line exactly") from None
            if hit is None and (start := _line_starting(content, want, at)) is not None:
                # `@@ class A` for `class A(Base):`: the line's start, up to a word's end, names it.
                notes.append(f"{path}: `@@ {context}` matched line {start + 1} by its start")
                hit = (start, 0)
            if hit is None:
                raise PatchError(_not_found(path, c, content, [context], at, f"`@@ {context}`"))
            if hit[1]:
                notes.append(f"{path}: `@@ {context}` matched with {TIERS[hit[1]]}")
            at = hit[0] + 1
        lines = c.lines
        old = [t for tag, t in lines if tag != "+"]
        if not old:
            pos = at if c.contexts and not c.eof else len(content)
            tier = 0
        else:
            try:
                hit = _seek_chunk(content, old, at, c.eof)
                if hit is None and lines[-1] == (" ", ""):
                    # A trailing blank context line may stand for the file's final newline.
                    while lines and lines[-1] == (" ", ""):
                        lines = lines[:-1]
                    old = [t for tag, t in lines if tag != "+"]
                    hit = _seek_chunk(content, old, at, c.eof) if old else (len(content), 0)
            except Ambiguous as e:
                raise PatchError(f"{path}: chunk {k} (patch line {c.line_no}) matches only with {TIERS[e.tier]}, at "
                                 f"lines {', '.join(map(str, e.lines))}; no file was changed. Copy the lines "
                                 "exactly, or add context (or an @@ line) to make it unique") from None
            if hit is None:
                raise PatchError(_not_found(path, c, content, old, at, f"chunk {k}"))
            pos, tier = hit
        if tier:
            notes.append(f"{path}: chunk {k} matched with {TIERS[tier]}")
        plus, changed = _added_lines(lines, content, pos, tier)
        if changed:
            notes[-1] += f", {changed}"
        added = iter(plus)
        out.extend(content[copied:pos])
        r = pos
        for tag, _text in lines:
            if tag == " ":
                out.append(content[r])  # the file's own line, whatever whitespace the patch gave
                r += 1
            elif tag == "-":
                r += 1
            else:
                out.append(next(added))
        copied = at = r
    out.extend(content[copied:])
    # Like Codex's apply_patch: an updated file ends with a newline; the file's line ending is kept.
    return "".join(line + eol for line in out)


def _line_starting(content: list[str], want: str, at: int) -> int | None:
    """The first line at or after `at` that, stripped, starts with `want` where a word ends
    (`class A` starts `class A(Base):`, not `class AB:`); None when there is none."""
    if not want:
        return None
    for i in range(at, len(content)):
        line = content[i].strip()
        if line.startswith(want) and (len(line) == len(want) or not _word_char(line[len(want)])
                                      or not _word_char(want[-1])):
            return i
    return None


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _added_lines(lines: list[tuple[str, str]], content: list[str], pos: int, tier: int) -> tuple[list[str], str]:
    """The + lines of a hunk matched at `pos`, and what was changed in them ("" for nothing):
    after a match that ignored indentation, the indentation translated to the file's (see
    matching.reindent); after one that mapped punctuation, the quotes written as the file's."""
    plus = [t for tag, t in lines if tag == "+"]
    if tier < 2:
        return plus, ""
    old = [t for tag, t in lines if tag != "+"]
    have = content[pos:pos + len(old)]  # the file may end first
    fixed = reindent(list(zip(have, old, strict=False)), plus)
    changed = [_REINDENTED] if fixed != plus else []
    if tier >= 3:
        quoted, note = follow_quotes("\n".join(have), "\n".join(old), "\n".join(fixed))
        if note:
            fixed = quoted.split("\n")
            changed.append(note.replace("new text's", "its + lines'"))
    return fixed, ", ".join(changed)


_REINDENTED = "its + lines re-indented like the file"


def _seek_chunk(content: list[str], old: list[str], at: int, eof: bool) -> tuple[int, int] | None:
    """`*** End of File` tries the end first, then anywhere below the cursor (as Codex does)."""
    return seek_lines(content, old, at, eof=eof) or (seek_lines(content, old, at) if eof else None)


def _not_found(path: str, c: Chunk, content: list[str], want: list[str], at: int, what: str) -> str:
    region = closest_region(content, want, floor=0)
    tried = ", ".join(TIERS)
    if region is None:
        shown = quote_lines(content, at, 8) or "(the file is empty)"
        where = f"The file has from line {at + 1}:" if content else "The file is empty."
    else:
        lo = max(0, region - 2)
        shown = quote_lines(content, lo, len(want) + 4)
        where = f"The closest region, lines {lo + 1}-{min(len(content), lo + len(want) + 4)}:"
    return (f"{path}: {what} (patch line {c.line_no}) was not found (tried {tried}); no file was changed.\n"
            f"It expects:\n" + "\n".join(_clip(w) for w in want[:12]) + ("\n…" if len(want) > 12 else "") +
            f"\n{where}\n{shown if content else ''}".rstrip() +
            "\nRead the file again and copy the lines from its current content (without read_file's line numbers).")


def apply_begin_patch(ops: list[FileOp], read: Callable[[str], str | None]) -> list[Outcome]:
    """Each operation's outcome, in order, computed from `read` without touching the disk.
    Operations see the effect of earlier ones on the same path."""
    state, current = _working_copy(read)

    out: list[Outcome] = []
    for op in ops:
        text = current(op.path)
        if op.kind == "add":
            # As Codex does, an added file replaces one that is there (the stale guard still applies).
            kind = "create" if text is None else "modify"
            out.append(Outcome(kind, op.path if text is not None else None, op.path, text, op.content, None, 0, []))
            state[op.path] = op.content
            continue
        if text is None:
            verb = "delete" if op.kind == "delete" else "update"
            raise PatchError(f"{op.path} does not exist, so it cannot be {verb}d (patch line {op.line_no}); "
                             "no file was changed. Check the path (relative to the workspace), or add it with `*** Add File:`")
        if op.kind == "delete":
            out.append(Outcome("delete", op.path, None, text, None, None, 0, []))
            state[op.path] = None
            continue
        notes: list[str] = []
        new_text = _apply_chunks(op.path, text, op.chunks, notes)
        if new_text == text and op.move_to in (None, op.path):
            raise PatchError(f"{op.path}: the chunks' - and + lines are the same, so `{_UPDATE} {op.path}` "
                             f"(patch line {op.line_no}) would change nothing; no file was changed. Put the new text on the + lines")
        dest = op.move_to or op.path
        if dest != op.path:
            existing = current(dest)
            o = Outcome("rename", op.path, dest, text, new_text, None, len(op.chunks), notes)
            if existing is not None:
                o.notes.append(f"{dest} existed and was replaced by the moved file")
            state[op.path] = None
        else:
            o = Outcome("modify", op.path, op.path, text, new_text, None, len(op.chunks), notes)
        state[dest] = new_text
        out.append(o)
    return out


def _written(diff_text: str) -> list[str]:
    """Every path the patch names, in order, as written (git's a/ and b/ taken off)."""
    if is_begin_patch(diff_text):
        return [p for op in parse_begin_patch(diff_text) for p in (op.path, op.move_to) if p]
    return [p for fp in parse(diff_text) for p in (fp.old_path, fp.new_path) if p is not None]


def written_paths(diff_text: str) -> list[str]:
    """Every path a patch (either format) touches, in order, once each, as written: each
    file, both ends of a rename or move, deletions. These are the call's subjects: the one
    resolver turns each into the path the kernel would use (a `..` after a symlink climbs
    from where the link points), and that path is what is judged and written. A path the
    tool refuses whatever the workspace (`..` leaving it as text, `~`, a NUL) is left out,
    as is everything of a patch that does not parse: either fails before any file is touched."""
    try:
        found = _written(diff_text)
    except PatchError:
        return []
    out: list[str] = []
    for p in found:
        try:
            _check_written(p)
        except PatchError:
            continue
        if p not in out:
            out.append(p)
    return out


def touched_paths(diff_text: str) -> list[str]:
    """The paths of `written_paths` read as text (`./n/../a` is `a`), once each: names for a
    person, never what is judged or written (see `written_paths`)."""
    out: list[str] = []
    for p in written_paths(diff_text):
        norm = os.path.normpath(p)
        if norm not in out:
            out.append(norm)
    return out


# --------------------------------------------------------------------------------------
# the tool


# Other tools' names for the patch text, and arguments that only comment on the call.
_PATCH_NAMES = ("input", "patch")
_COMMENTARY = frozenset({"explanation", "description", "reason", "summary", "thought"})


@dataclass(frozen=True, kw_only=True)
class ApplyPatchParams(Params):
    diff: str

    @classmethod
    def prepare(cls, raw: dict[str, Any]) -> dict[str, Any]:
        # OpenAI's published apply_patch tool names its argument `input`, others `patch`; editor
        # agents teach models to send an `explanation` beside it, which changes nothing here.
        named = [k for k in _PATCH_NAMES if k in raw] if "diff" not in raw else []
        return {("diff" if named and k == named[0] and len(named) == 1 else k): v for k, v in raw.items()
                if k not in _COMMENTARY or not isinstance(v, str)}

    non_empty: ClassVar[dict[str, str]] = {"diff": "pass a unified diff with ---/+++ headers and @@ hunks, "
                                                   "or a `*** Begin Patch` … `*** End Patch` patch"}


def _check_written(path: str, workspace: Path | None = None) -> None:
    """What a patch may name whatever the file system says: a path relative to the workspace
    that does not climb out of it as text (as `git apply` takes a patch: files of one tree),
    or an absolute path inside it (`workspace`: checked when given). Where such a path
    really leads (symlinks and `..` resolved) is the resolver's to say and the rules' to judge:
    outside the workspace it is a protected write, as for write_file."""
    if not path or "\x00" in path:
        raise PatchError(f"invalid path {path!r} in the diff; use paths relative to the workspace")
    if path.startswith("~"):
        raise PatchError(f"{path}: home-relative paths are refused in a patch; use paths relative to the workspace")
    if os.path.isabs(path):
        if workspace is None:
            return
        as_text = os.path.normpath(path)
        roots = (os.path.normpath(workspace), os.path.realpath(workspace))
        if not any(as_text.startswith(root.rstrip("/") + "/") for root in roots):
            raise PatchError(f"{path}: absolute paths outside the workspace are refused in a patch; "
                             "use paths relative to the workspace")
        return
    as_text = os.path.normpath(path)
    if as_text == ".." or as_text.startswith("../") or as_text == ".":
        raise PatchError(f"{path}: the path leaves the workspace; use paths relative to the workspace")


@dataclass(frozen=True)
class _Plan:
    outcomes: list[Outcome]
    files: dict[str, TextFile | None]  # each touched path's original encoding facts
    paths: dict[str, Path]  # patch path -> real target
    # Files an `*** Add File` or a `*** Move to` replaces whole that the model never read: as
    # Codex does, they are replaced, but their old bytes are kept in the session folder first.
    unread: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ApplyPatch(Tool[ApplyPatchParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "apply_patch"
    group: ClassVar[str] = "files"
    description: ClassVar[str] = (
        "Apply a patch, for multi-hunk or multi-file changes, instead of edit_file: a unified diff "
        "(`git diff`, `diff -u`), or\n*** Begin Patch\n*** Update File: path\n*** Move to: new/path "
        "(optional)\n@@ def f():\n context\n-old\n+new\n*** Add File: path\n+line\n*** Delete File: path\n"
        "*** End Patch\n(`@@` takes an optional line to find first; stacked, `@@ class A` then `@@ def f`, they narrow in "
        "order; `*** End of File` anchors at the end.) "
        "Context matches exactly, else ignoring whitespace or Unicode punctuation if unique (the result "
        "says so). All or nothing: on failure no file changes and the error shows the file's lines."
    )
    params: ClassVar[type[Params]] = ApplyPatchParams
    approval: ClassVar[Approval] = "edit"
    kind: ClassVar[SubjectKind] = "path"
    effect: ClassVar[Effect] = "write"

    def summary(self, args: ApplyPatchParams) -> str:
        paths = sorted(written_paths(args.diff))  # as written, like write_file's path: what is judged is resolved
        if not paths:
            return "a patch that does not parse"
        return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")

    def rule_subject(self, args: ApplyPatchParams) -> str | None:
        # The single path of a one-file patch; rules see every path through `subjects`.
        paths = written_paths(args.diff)
        return paths[0] if len(paths) == 1 else None

    def subjects(self, args: ApplyPatchParams) -> list[str]:
        return written_paths(args.diff)  # the runtime resolves them into the Target

    def approval_detail(self, args: ApplyPatchParams, ctx: ToolContext) -> str:
        try:
            return self._display(self._plan(args, ctx), ctx)
        except (ToolError, PatchError) as e:
            return f"(the patch cannot be applied: {e})\n\n{args.diff}"

    async def precheck(self, args: ApplyPatchParams, ctx: ToolContext) -> None:
        await self.in_thread(self._plan, args, ctx)  # a patch that does not apply, without writing

    async def run(self, args: ApplyPatchParams, ctx: ToolContext) -> ToolResult:
        return await self.in_thread(self._run, args, ctx)

    def _plan(self, args: ApplyPatchParams, ctx: ToolContext) -> _Plan:
        ops: list[FileOp] | None = None
        patches: list[FilePatch] = []
        judged = self.resolved(args, ctx)
        # Each path as written -> the name the patch is applied under: one per judged real
        # path, so two spellings of one file (`a`, `./a`, `l/../x` and `deep/x`) are one
        # file to the all-or-nothing working copy. The name is how the model is told about
        # it (`files.shown_path`): as written while that spelling reaches the judged file.
        names: dict[Path, str] = {}
        real_of: dict[str, Path] = {}

        def name(written: str) -> str:
            _check_written(written, ctx.workspace)
            real = judged.path_of(written)
            if real is None:  # cannot happen: every path the parser finds was judged
                raise ToolError(f"{written} was not checked before the patch ran; no file was changed")
            shown = names.setdefault(real, shown_path(ctx, written, real))
            if real_of.setdefault(shown, real) != real:  # one name, two files: the full path tells them apart
                shown = names[real] = str(real)
                real_of[shown] = real
            return shown

        try:
            if is_begin_patch(args.diff):
                ops = parse_begin_patch(args.diff)
                for op in ops:
                    op.path = name(op.path)
                    op.move_to = name(op.move_to) if op.move_to is not None else None
            else:
                patches = parse(args.diff)
                for fp in patches:
                    fp.old_path = name(fp.old_path) if fp.old_path is not None else None
                    fp.new_path = name(fp.new_path) if fp.new_path is not None else None
        except PatchError as e:
            raise ToolError(str(e)) from None
        files: dict[str, TextFile | None] = {}
        paths: dict[str, Path] = {}
        unread: list[str] = []

        reading: list[str] = []  # the file being read, for an error that names it

        def read(path: str) -> str | None:
            reading[:] = [path]
            target = checked_write_target(ctx, real_of[path], path)
            paths[path] = target
            if not target.exists():
                files[path] = None
                return None
            st = target.stat()
            if st.st_size > ctx.limits.edit_file_max_bytes:
                raise ToolError(f"{path} is {st.st_size} bytes (> {ctx.limits.edit_file_max_bytes}); too big to patch in memory")
            data = read_exact(target)
            if looks_binary(data[: ctx.limits.binary_sniff_bytes]):
                raise ToolError(f"{path} looks like a binary file ({len(data)} bytes); apply_patch changes text files only")
            guard_fresh(ctx, target, path, data)
            tf = TextFile.decode(data, st.st_mode)
            files[path] = tf
            return tf.text

        try:
            if ops is not None:
                outcomes = apply_begin_patch(ops, read)
                for o in outcomes:  # replacing a whole file: one changed since it was read is refused
                    replaced = o.new_path if o.kind == "modify" and not o.hunks else (
                        o.new_path if o.kind == "rename" and files.get(o.new_path or "") is not None else None)
                    if replaced is not None and replaced in paths:
                        guard_fresh(ctx, paths[replaced], replaced)
                        was = files.get(replaced)
                        if was is not None and was.text and changed_since_seen(ctx, paths[replaced]) is None \
                                and replaced not in unread:
                            unread.append(replaced)
            else:
                outcomes = apply(patches, read)
        except PatchError as e:
            message = str(e)
            for path, was in files.items():  # a path that does not exist, with a namesake that does
                if was is None and message.startswith(f"{path} does not exist") and \
                        (namesakes := near_namesakes(ctx, paths[path])):
                    message = message.replace(f"{path} does not exist", f"{path} does not exist (did you mean "
                                              f"{namesakes}?)", 1)
            raise ToolError(message) from None
        except OSError as e:
            if swapped(e) and reading:
                raise ToolError(f"cannot read {reading[0]}: a symlink appeared in its path after it was checked; "
                                "no file was changed: check the path and try again") from None
            raise ToolError(f"cannot read {e.filename}: {e.strerror}; no file was changed") from None
        if unread and ctx.session_folder is None:  # nowhere to keep what would be replaced
            raise ToolError(f"{unread[0]} already exists and you have not read it in this session; read it first with "
                            "read_file (the session is not recorded, so its content could not be kept if replaced)")
        return _Plan(outcomes, files, paths, tuple(unread))

    def _run(self, args: ApplyPatchParams, ctx: ToolContext) -> ToolResult:
        plan = self._plan(args, ctx)
        final: dict[str, tuple[str | None, bool | None]] = {}  # path -> (new text or None to delete, exec)
        for o in plan.outcomes:
            if o.kind in ("delete", "rename") and o.old_path is not None:
                final[o.old_path] = (None, None)
            if o.new_path is not None:
                prev_exec = final.get(o.new_path, (None, None))[1]
                final[o.new_path] = (o.new_text, o.executable if o.executable is not None else prev_exec)
        originals: dict[Path, bytes | None] = {}
        kept = self._keep_unread(plan, ctx)
        path = ""
        try:
            for path, (text, executable) in final.items():
                target = plan.paths[path]  # every final path was read, so judged and checked, while planning
                originals[target] = read_exact(target) if target.exists() else None
                if text is None:
                    if target.exists():
                        unlink_exact(target)
                    forget_file(ctx, target)
                    continue
                like = plan.files.get(path) or _source_encoding(plan, path)
                data = like.encode(text) if like else text.encode("utf-8", errors="surrogateescape")
                mode = like.mode if like else None
                if executable is not None:
                    base = mode if mode is not None else (0o666 & ~_umask())
                    mode = base | 0o111 if executable else base & ~0o111
                atomic_write(target, data, mode)
                remember_file(ctx, target, data)
        except OSError as e:
            _restore(originals)
            for target in originals:  # back as they were: what was recorded of the new content is void
                forget_file(ctx, target)
            if swapped(e):  # the judged path is opened without following links: one put there since fails
                raise ToolError(f"cannot write {path}: a symlink appeared in its path after it was checked; every "
                                "file was restored: check the path and try again") from None
            raise ToolError(f"cannot write {e.filename or ''}: {e.strerror or e}; every file was restored") from None
        report = self._report(plan)
        for shown, saved in kept:
            report += f"\n{shown} existed and you had not read it; it was replaced, and its old content is kept in {saved}"
        return ToolResult(text=report, display=self._display(plan, ctx))

    @staticmethod
    def _keep_unread(plan: _Plan, ctx: ToolContext) -> list[tuple[str, Path]]:
        """Save the bytes of each unread file the patch replaces whole, before anything is written."""
        from nanohermes.dirs import private_dir

        if not plan.unread or ctx.session_folder is None:
            return []
        where = private_dir(ctx.session_folder / REPLACED_DIR)
        out: list[tuple[str, Path]] = []
        for shown in plan.unread:
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{ctx.call_id or 'call'}-{Path(shown).name}").lstrip(".")[:120]
            saved, n = where / stem, 1
            while saved.exists():
                n += 1
                saved = where / f"{stem}.{n}"
            try:
                data = read_exact(plan.paths[shown])
                fd = os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            except OSError as e:
                raise ToolError(f"{shown} exists and you have not read it; keeping its content before replacing it "
                                f"failed ({e.strerror or e}), so no file was changed: read it first with read_file") from None
            out.append((shown, saved))
        return out

    @staticmethod
    def _report(plan: _Plan) -> str:
        rows: list[str] = []
        notes: list[str] = []
        for o in plan.outcomes:
            plus, minus = diff_stat(unified_diff(o.old_text or "", o.new_text or "", "a", "b"))
            hunks = f"{o.hunks} hunk{'s' if o.hunks != 1 else ''}, " if o.hunks else ""
            stat_ = f" ({hunks}+{plus} -{minus})" if o.hunks else ""
            if o.kind == "create":
                rows.append(f"created {o.new_path}{stat_}")
            elif o.kind == "delete":
                rows.append(f"deleted {o.old_path}")
            elif o.kind in ("rename", "copy"):
                verb = "renamed" if o.kind == "rename" else "copied"
                rows.append(f"{verb} {o.old_path} -> {o.new_path}{stat_}")
            elif not o.hunks:  # `*** Add File` over a file that was there
                rows.append(f"replaced {o.new_path} (+{plus} -{minus})")
            else:
                rows.append(f"patched {o.new_path}{stat_}")
            if o.executable is not None and o.kind != "create":
                rows[-1] += " (now executable)" if o.executable else " (no longer executable)"
            notes.extend(o.notes)
        return "\n".join(rows + notes)

    @staticmethod
    def _display(plan: _Plan, ctx: ToolContext) -> str:
        parts: list[str] = []
        for o in plan.outcomes:
            old = _side("a", o.old_path) if o.old_text is not None and o.old_path else "/dev/null"
            new = _side("b", o.new_path) if o.new_path is not None else "/dev/null"
            d = unified_diff(o.old_text or "", o.new_text or "", old, new)
            if not d:
                d = {"rename": f"rename {o.old_path} -> {o.new_path}\n", "copy": f"copy {o.old_path} -> {o.new_path}\n",
                     "create": f"new empty file {o.new_path}\n", "delete": f"deleted empty file {o.old_path}\n"}.get(o.kind, "")
            parts.append(d)
        return bounded_diff("".join(parts), ctx.limits.edit_diff_chars)


def _side(prefix: str, path: str) -> str:
    """A diff header's name: `a/src/x.py` inside the workspace, a path outside it as it is."""
    return path if os.path.isabs(path) else f"{prefix}/{path}"


def _source_encoding(plan: _Plan, path: str) -> TextFile | None:
    """A renamed or copied file keeps its source's BOM and mode."""
    for o in plan.outcomes:
        if o.new_path == path and o.old_path is not None and o.old_path != path:
            return plan.files.get(o.old_path)
    return None


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def _restore(originals: dict[Path, bytes | None]) -> None:
    for target, data in originals.items():
        try:
            if data is None:
                if target.exists():
                    unlink_exact(target)
            else:
                atomic_write(target, data, target.stat().st_mode if target.exists() else None)
        except OSError:
            pass


def tools() -> list[Tool]:
    return [ApplyPatch()]


__all__ = ["ApplyPatch", "Chunk", "FileOp", "FilePatch", "Hunk", "Outcome", "PatchError", "apply", "apply_begin_patch",
           "apply_file", "is_begin_patch", "parse", "parse_begin_patch", "touched_paths",
           "written_paths"]
