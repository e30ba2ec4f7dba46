"""The `*** Begin Patch` format OpenAI's models write (Codex's apply_patch reads it).

File operations between `*** Begin Patch` and `*** End Patch`; an update is a series of
chunks, each optionally opened by `@@` or `@@ <a line to find first>` (a class or def line;
several such lines stacked are found in order, each below the one before), of context
(space), removed (-) and added (+) lines, found by content alone; `*** End of File` anchors
the chunk at the end. Markers may carry stray blanks around them, and the decorations models add
(`*** Begin Patch ***`, `***Begin Patch`, another case).

`parse_begin_patch()` turns the text into `FileOp`s and `apply_begin_patch()` computes every
file's new content from a read callback, both pure like the unified diff's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from nanohermes.tools.matching import TIERS, Ambiguous, closest_region, quote_lines, seek_lines
from nanohermes.tools.patches.common import Outcome, PatchError, added_lines, clip, dominant_eol, lines_with_eol, working_copy


BEGIN, END = "*** Begin Patch", "*** End Patch"
_ADD, _DELETE, _UPDATE, _MOVE = "*** Add File:", "*** Delete File:", "*** Update File:", "*** Move to:"
_EOF_MARK = "*** End of File"


_MARKERS = (BEGIN, END, _EOF_MARK, _ADD, _DELETE, _UPDATE, _MOVE)


def marker_line(line: str) -> str:
    """A marker line as the format writes it, whatever decorates it: `*** Begin Patch ***`,
    `***Begin Patch`, `*** BEGIN PATCH` and `*** Update File: a.py ***` are `*** Begin Patch`
    and `*** Update File: a.py`; any other line is returned stripped."""
    t = line.strip()
    if not t.startswith("***"):
        return t
    body = t.lstrip("*").strip().rstrip("*").rstrip()
    for marker in _MARKERS:
        word = marker[4:]
        if body[:len(word)].lower() == word.lower():
            return marker + body[len(word):]
    return t


def mentions_begin(text: str) -> bool:
    """Does a line of `text` open the `*** Begin Patch` format (a patch with words around it)?"""
    return any(marker_line(line) == BEGIN for line in text.split("\n") if "begin" in line.lower())


def is_begin_patch(text: str) -> bool:
    """Is this the `*** Begin Patch` format (detected from its first marker line)?"""
    for line in text.lstrip().split("\n", 3)[:3]:
        if marker_line(line) == BEGIN:
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
    t = marker_line(line)
    if not t.startswith(marker):
        return None
    return t[len(marker):].strip()


def _is_marker(line: str) -> bool:
    t = marker_line(line)
    return t in (END, _EOF_MARK) or t.startswith((_ADD, _DELETE, _UPDATE, _MOVE))


def rebase_paths(folder: str, text: str) -> str:
    """`text`, a patch whose relative paths are read from `folder`, with those paths written
    from the workspace instead (`cd sub && apply_patch ...`)."""
    out = []
    for line in text.split("\n"):
        for marker in (_ADD, _DELETE, _UPDATE, _MOVE):
            if (path := _marker(line, marker)) is not None:
                if path and not os.path.isabs(path):
                    line = f"{marker} {os.path.normpath(os.path.join(folder, path))}"
                break
        out.append(line)
    return "\n".join(out)


def parse_begin_patch(text: str) -> list[FileOp]:
    """Every file operation of a `*** Begin Patch` text, or a PatchError naming the line."""
    lines = text.replace("\r\n", "\n").split("\n")
    # What a model puts around the patch (a sentence, a heredoc `<<'EOF'`, a code fence) is
    # dropped before `*** Begin Patch`; after `*** End Patch` only the closing `EOF` or fence.
    lo = next((i for i, ln in enumerate(lines) if marker_line(ln) == BEGIN), None)
    if lo is None:
        raise PatchError(f"the patch must start with `{BEGIN}`")
    hi = next((i for i in range(len(lines) - 1, lo, -1) if marker_line(lines[i]) == END), None)
    if hi is None:
        raise PatchError(f"line {len(lines)}: the patch must end with `{END}` (was it cut off?); no file was changed")
    for j in range(hi + 1, len(lines)):
        if lines[j].strip() not in ("", "EOF", "```"):
            raise PatchError(f"line {j + 1}: `{clip(lines[j], 80)}` comes after `{END}`; end the patch there")
    hi += 1
    ops: list[FileOp] = []
    i = lo + 1
    end = hi - 1
    while i < end:
        line = lines[i]
        if not line.strip() or marker_line(line) in (BEGIN, END):  # blank, or two patches sent as one
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
                    raise PatchError(f"line {i + 1}: `{clip(lines[i], 80)}` in `*** Add File: {path}`: every line "
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
            raise PatchError(f"line {i + 1}: `{clip(line, 80)}` is not a file operation; expected "
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
            if marker_line(line) == _EOF_MARK:
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
            raise PatchError(f"line {i + 1}: `{clip(line, 80)}` in `{_UPDATE} {op.path}` is neither context "
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
    cur = lines_with_eol(text)
    content = [c for c, _ in cur]
    eol = dominant_eol(cur) if cur else "\n"
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
        plus, changed = added_lines(lines, content, pos, tier)
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
            f"It expects:\n" + "\n".join(clip(w) for w in want[:12]) + ("\n…" if len(want) > 12 else "") +
            f"\n{where}\n{shown if content else ''}".rstrip() +
            "\nRead the file again and copy the lines from its current content (without read_file's line numbers).")


def apply_begin_patch(ops: list[FileOp], read: Callable[[str], str | None]) -> list[Outcome]:
    """Each operation's outcome, in order, computed from `read` without touching the disk.
    Operations see the effect of earlier ones on the same path."""
    state, current = working_copy(read)

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


__all__ = ["BEGIN", "END", "Chunk", "FileOp", "apply_begin_patch", "is_begin_patch", "marker_line", "mentions_begin",
           "parse_begin_patch", "rebase_paths"]
