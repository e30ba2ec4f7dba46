"""apply_patch: unified diffs as `git diff` and `diff -u` write them.

`parse()` turns diff text into `FilePatch`es and `apply()` computes every file's new content
from a read callback; both are pure, so the tool can check the whole patch before it touches
a single file (all or nothing). Context must match exactly, line endings aside (a CRLF file
keeps CRLF whatever the diff uses). A hunk whose line numbers drifted is found by its context,
nearest the stated line first, and the result says where.

Leniencies for diffs written by a model, each also checked to give what the author meant:
header line counts that do not add up (the body decides), `@@` headers without numbers,
blank context lines that lost their leading space, and a missing "\\ No newline at end of
file" marker (the file keeps its final-newline state).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from pydantic import Field

from nanohermes.pathrules import read_exact, unlink_exact
from nanohermes.permissions import Effect, SubjectKind
from nanohermes.tools import Approval, Params, Tool, ToolContext, ToolError, ToolResult
from nanohermes.tools.files import (
    TextFile,
    atomic_write,
    bounded_diff,
    checked_write_target,
    diff_stat,
    looks_binary,
    unified_diff,
)


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
    """git writes a/ and b/; `diff -ru before after` writes before/ and after/."""
    old, new = fp.old_path, fp.new_path
    if fp.git or (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")):
        if old is not None and old.startswith("a/"):
            old = old[2:]
        if new is not None and new.startswith("b/"):
            new = new[2:]
    elif old is not None and new is not None and "/" in old and "/" in new and old.split("/")[0] != new.split("/")[0]:
        old, new = old.split("/", 1)[1], new.split("/", 1)[1]
    fp.old_path, fp.new_path = old, new


def parse(text: str) -> list[FilePatch]:
    """Every file section of a unified diff, in order. Text outside file sections (a commit
    message, `Index:` lines, a mail signature) is ignored."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    crlf = [ln.endswith("\r") for ln in raw]
    lines = [ln[:-1] if cr else ln for ln, cr in zip(raw, crlf)]
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
        fp.old_path = "a/" + _header_path(line.split(" ", 2)[2])  # type: ignore[operator]
        fp.copy = line.startswith("copy")
    elif line.startswith(("rename to ", "copy to ")):
        fp.new_path = "b/" + _header_path(line.split(" ", 2)[2])  # type: ignore[operator]
    elif line.startswith(("Binary files ", "GIT binary patch")):
        fp.binary = True


def _hunk(lines: list[str], i: int, crlf: list[bool]) -> tuple[Hunk, int]:
    header = lines[i]
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
        if satisfied() and (line in ("", "-- ") or not line[:1] in (" ", "-", "+")):
            break  # after the counted lines: a blank line or a mail signature ends the hunk
        if line == "":
            if i == n - 1 or need_old < 0 and _only_blank_until_header(lines, i):
                break
            line = " "  # a blank context line whose leading space was stripped
        tag = line[0]
        if tag not in " -+":
            break
        hunk.lines.append((tag, line[1:]))
        hunk.cr.append(crlf[i])
        seen_old += tag != "+"
        seen_new += tag != "-"
        i += 1
    if not hunk.lines:
        raise PatchError(f"hunk `{header}` has no lines; give context lines (space), removals (-) and additions (+)")
    return hunk, i


def _only_blank_until_header(lines: list[str], i: int) -> bool:
    while i < len(lines) and lines[i] == "":
        i += 1
    return i == len(lines) or not lines[i][:1] in (" ", "-", "+", "\\") or lines[i].startswith("--- ")


def touched_paths(diff_text: str) -> list[str]:
    """Every path a patch touches, in order, once each: each file, both ends of a rename or
    copy, deletions; normalised as the tool uses them. A diff that does not parse touches
    nothing (it fails before any file is read), and a path the tool refuses (absolute, or
    leaving the workspace) is left out: it fails the whole patch before anything is written."""
    try:
        patches = parse(diff_text)
    except PatchError:
        return []
    out: list[str] = []
    for fp in patches:
        for p in (fp.old_path, fp.new_path):
            try:
                norm = _safe_rel(p) if p is not None else None
            except PatchError:
                continue
            if norm is not None and norm not in out:
                out.append(norm)
    return out


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
        for (tag, t), cr in zip(h.lines, h.cr):
            if tag == " ":
                region.append(cur[r])
                r += 1
            elif tag == "-":
                r += 1
            else:
                region.append((t, eol or ("\r\n" if cr else "\n")))
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


def apply(patches: list[FilePatch], read: Callable[[str], str | None]) -> list[Outcome]:
    """Each file section's outcome, in order. `read(path)` gives a file's current text or None
    when it does not exist. Sections see the effect of earlier sections on the same path."""
    state: dict[str, str | None] = {}

    def current(path: str) -> str | None:
        if path not in state:
            state[path] = read(path)
        return state[path]

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
        if kind == "delete":
            state[src] = None  # type: ignore[index]
        else:
            if kind == "rename":
                state[src] = None  # type: ignore[index]
            state[o.new_path] = new_text  # type: ignore[index]
    return out


# --------------------------------------------------------------------------------------
# the tool


class ApplyPatchParams(Params):
    diff: str = Field(description="A unified diff (as `git diff` or `diff -u` write it) with paths relative to the workspace.")

    non_empty: ClassVar[dict[str, str]] = {"diff": "pass a unified diff with ---/+++ headers and @@ hunks"}


def _safe_rel(path: str) -> str:
    """A patch path must stay inside the workspace: no absolute paths, no `..` that leaves it."""
    if not path or "\x00" in path:
        raise PatchError(f"invalid path {path!r} in the diff; use paths relative to the workspace")
    if os.path.isabs(path) or path.startswith("~"):
        raise PatchError(f"{path}: absolute paths are refused in a patch; use paths relative to the workspace")
    norm = os.path.normpath(path)
    if norm == ".." or norm.startswith("../") or norm == ".":
        raise PatchError(f"{path}: the path leaves the workspace; use paths relative to the workspace")
    return norm


@dataclass(frozen=True)
class _Plan:
    outcomes: list[Outcome]
    files: dict[str, TextFile | None]  # each touched path's original encoding facts
    paths: dict[str, Path]  # patch path -> real target


@dataclass(frozen=True, kw_only=True)
class ApplyPatch(Tool):
    name: ClassVar[str] = "apply_patch"
    group: ClassVar[str] = "files"
    description: ClassVar[str] = (
        "Apply a unified diff (as `git diff` or `diff -u` write it) to files in the workspace: "
        "several files, @@ hunks with matching context lines, new files (--- /dev/null), deleted "
        "files (+++ /dev/null), renames and `\\ No newline at end of file`. Use it for multi-hunk "
        "or multi-file changes, instead of edit_file. The diff must include @@ hunks with context "
        "that matches the file exactly; hunks whose line numbers drifted are found by their context "
        "and reported. All or nothing: if any hunk fails, no file changes and the error shows the "
        "lines actually there. CRLF files keep CRLF. Paths must be relative to the workspace."
    )
    params: ClassVar[type[Params]] = ApplyPatchParams
    approval: ClassVar[Approval] = "edit"
    kind: ClassVar[SubjectKind] = "path"
    effect: ClassVar[Effect] = "write"

    def summary(self, args: Params) -> str:
        try:
            paths = sorted({p.path for p in parse(args.diff)})  # type: ignore[attr-defined]
        except PatchError:
            return "a patch that does not parse"
        return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")

    def _paths(self, args: Params) -> list[str]:
        try:
            patches = parse(args.diff)  # type: ignore[attr-defined]
        except PatchError:
            return []
        return sorted({p for fp in patches for p in (fp.old_path, fp.new_path) if p is not None})

    def rule_subject(self, args: Params) -> str | None:
        # The single path of a one-file patch; rules see every path through `subjects`.
        paths = self._paths(args)
        return paths[0] if len(paths) == 1 else None

    def subjects(self, args: Params) -> list[str]:
        return touched_paths(args.diff)  # type: ignore[attr-defined]

    def approval_detail(self, args: Params, ctx: ToolContext) -> str:
        try:
            return self._display(self._plan(args, ctx), ctx)
        except (ToolError, PatchError) as e:
            return f"(the patch cannot be applied: {e})\n\n{args.diff}"  # type: ignore[attr-defined]

    async def run(self, args: Params, ctx: ToolContext) -> ToolResult:
        return await self.in_thread(self._run, args, ctx)

    def _plan(self, args: Params, ctx: ToolContext) -> _Plan:
        assert isinstance(args, ApplyPatchParams)
        try:
            patches = parse(args.diff)
            for fp in patches:
                fp.old_path = _safe_rel(fp.old_path) if fp.old_path is not None else None
                fp.new_path = _safe_rel(fp.new_path) if fp.new_path is not None else None
        except PatchError as e:
            raise ToolError(str(e)) from None
        files: dict[str, TextFile | None] = {}
        paths: dict[str, Path] = {}
        judged = self.resolved(args, ctx)

        def read(path: str) -> str | None:
            real = judged.path_of(path)
            if real is None:  # cannot happen: every path the parser finds was judged
                raise ToolError(f"{path} was not checked before the patch ran; no file was changed")
            target = checked_write_target(ctx, real, path)
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
            tf = TextFile.decode(data, st.st_mode)
            files[path] = tf
            return tf.text

        try:
            outcomes = apply(patches, read)
        except PatchError as e:
            raise ToolError(str(e)) from None
        except OSError as e:
            raise ToolError(f"cannot read {e.filename}: {e.strerror}; no file was changed") from None
        return _Plan(outcomes, files, paths)

    def _run(self, args: Params, ctx: ToolContext) -> ToolResult:
        plan = self._plan(args, ctx)
        final: dict[str, tuple[str | None, bool | None]] = {}  # path -> (new text or None to delete, exec)
        for o in plan.outcomes:
            if o.kind in ("delete", "rename"):
                final[o.old_path] = (None, None)  # type: ignore[index]
            if o.new_path is not None:
                prev_exec = final.get(o.new_path, (None, None))[1]
                final[o.new_path] = (o.new_text, o.executable if o.executable is not None else prev_exec)
        originals: dict[Path, bytes | None] = {}
        try:
            for path, (text, executable) in final.items():
                target = plan.paths[path]  # every final path was read, so judged and checked, while planning
                originals[target] = read_exact(target) if target.exists() else None
                if text is None:
                    if target.exists():
                        unlink_exact(target)
                    continue
                like = plan.files.get(path) or _source_encoding(plan, path)
                data = like.encode(text) if like else text.encode("utf-8", errors="surrogateescape")
                mode = like.mode if like else None
                if executable is not None:
                    base = mode if mode is not None else (0o666 & ~_umask())
                    mode = base | 0o111 if executable else base & ~0o111
                atomic_write(target, data, mode)
        except OSError as e:
            _restore(originals)
            raise ToolError(f"cannot write {e.filename or ''}: {e.strerror or e}; every file was restored") from None
        return ToolResult(text=self._report(plan), display=self._display(plan, ctx))

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
            old = f"a/{o.old_path}" if o.old_text is not None and o.old_path else "/dev/null"
            new = f"b/{o.new_path}" if o.new_path is not None else "/dev/null"
            d = unified_diff(o.old_text or "", o.new_text or "", old, new)
            if not d:
                d = {"rename": f"rename {o.old_path} -> {o.new_path}\n", "copy": f"copy {o.old_path} -> {o.new_path}\n",
                     "create": f"new empty file {o.new_path}\n", "delete": f"deleted empty file {o.old_path}\n"}.get(o.kind, "")
            parts.append(d)
        return bounded_diff("".join(parts), ctx.limits.edit_diff_chars)


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


__all__ = ["ApplyPatch", "FilePatch", "Hunk", "Outcome", "PatchError", "apply", "apply_file", "parse", "touched_paths"]
