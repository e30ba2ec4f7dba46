"""The file tools that read: read_file and list_dir. The ones that write are in
`nanohermes.tools.writes` (edit_file's readings of a near miss in `nanohermes.tools.near_miss`).
What they share with apply_patch (how a path is named, text decoding, atomic writes, the
stale-file guard, diffs for people) is `nanohermes.tools.fileops`.

Paths are taken relative to the workspace (absolute paths work too) and resolved once, by
`nanohermes.guard.pathrules.resolve`, into the call's Target; the tools read exactly those resolved
paths, opened without following a symlink put there after the check. Reading is allowed
anywhere (read rules and secret files aside).
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, ClassVar

from nanohermes.common.budget import Limits
from nanohermes.guard.pathrules import held, swapped
from nanohermes.guard.permissions import SubjectKind
from nanohermes.tools.base import Attempt, Params, ReadOnlyTool, Tool, ToolContext, ToolError, about
from nanohermes.tools.fileops import (
    BOM,
    Withheld,
    looks_binary,
    near_namesakes,
    open_current,
    remember_file,
    shown_path,
)

# --------------------------------------------------------------------------------------
# read_file


@dataclass(frozen=True, kw_only=True)
class ReadFileParams(Params):
    path: str
    # None: not given. A window given explicitly streams even a huge file; without `limit`
    # the window is `read_file_window_lines`.
    offset: int | None = field(default=None, metadata=about(ge=1, shown_default=1))
    limit: int | None = field(default=None, metadata=about(ge=1, shown_default=2000))

    non_empty: ClassVar[dict[str, str]] = {"path": ""}
    claude_fields: ClassVar[dict[str, str]] = {"path": "file_path"}


def stat_file(shown: str, tool: str, real: Path, ctx: ToolContext) -> os.stat_result:
    """The file's stat, or a ToolError saying what it is instead. `real` (a resolved path) is
    looked at without following a final symlink: one there now was put after the check."""
    try:
        st = os.stat(real, follow_symlinks=False)
    except FileNotFoundError:
        if (namesakes := near_namesakes(ctx, real)):
            raise ToolError(f"{shown} does not exist; did you mean {namesakes}?") from None
        hint = "use write_file to create it" if tool == "edit_file" else "check the path with list_dir or glob"
        raise ToolError(f"{shown} does not exist; {hint}") from None
    except OSError as e:
        raise ToolError(f"cannot read {shown}: {e.strerror}; check the path and its permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown} is a directory; use list_dir to see its entries")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{shown} is not a regular file (a device, pipe or socket); {tool} reads regular files only")
    return st


def _lines(f: BinaryIO, cap_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """(head of each line, clipped?) with at most `cap_bytes` of a line in memory, so a
    one-line 1 GB file streams in bounded memory too."""
    readline = f.readline
    while True:
        chunk: bytes = readline(cap_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) < cap_bytes:
            yield chunk, False
            continue
        rest = chunk
        while rest and not rest.endswith(b"\n"):  # skip the remainder of an overlong line
            rest = readline(cap_bytes)
        yield chunk, True


@dataclass(frozen=True, kw_only=True)
class ReadFile(ReadOnlyTool[ReadFileParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "read_file"
    claude_names: ClassVar[tuple[str, ...]] = ("Read",)
    group: ClassVar[str] = "files"
    description: ClassVar[str] = (
        "Read a text file as numbered lines (`N<TAB>line`): `limit` lines (default "
        "{read_file_window_lines}) from `offset` (1-based). When more remain, a last line says how to "
        "continue (offset=…). Lines over {read_file_line_chars} chars are clipped; files over "
        "{read_file_max_bytes} need offset/limit; binary files are refused. Use list_dir for folders and "
        "grep to search across files."
    )
    params: ClassVar[type[Params]] = ReadFileParams
    persist: ClassVar[bool] = False  # its own window bounds it; persisting would loop read -> file -> read
    kind: ClassVar[SubjectKind] = "path"
    limit_defaults: ClassVar[dict[str, str]] = {"limit": "read_file_window_lines"}  # the default window

    def rule_subject(self, args: ReadFileParams) -> str | None:
        return args.path  # the runtime resolves it into the Target

    def output_limit(self) -> str:
        return "read_file_window_lines lines, read_file_max_bytes, read_file_line_chars, max_output"

    async def run(self, args: ReadFileParams, ctx: ToolContext, attempt: Attempt) -> str:
        text: str = await self.in_thread(self._read, args, ctx, attempt)
        return text

    def _read(self, args: ReadFileParams, ctx: ToolContext, attempt: Attempt) -> str:
        lim = ctx.limits
        real = self.resolved(args, ctx, attempt).paths[0]  # the file the secret list and rules judged
        shown = shown_path(ctx, args.path, real)
        st = stat_file(shown, self.name, real, ctx)
        try:
            f, held = open_current(ctx, real)  # the editor's buffer, when an editor holds the session
        except OSError as e:
            if swapped(e):
                raise ToolError(f"cannot read {shown}: a symlink appeared in its path after it was checked; "
                                "read it again") from None
            raise ToolError(f"cannot read {shown}: {e.strerror}; check its permissions") from None
        with f:
            if looks_binary(f.read(lim.binary_sniff_bytes)):
                raise ToolError(f"{shown} looks like a binary file ({st.st_size if held is None else len(held)} bytes); "
                                "read_file shows text files only")
            # A window given explicitly streams even a huge file; the default whole read is gated.
            windowed = args.offset is not None or args.limit is not None
            size = st.st_size if held is None else len(held)
            if size > lim.read_file_max_bytes and not windowed:
                raise ToolError(
                    f"{shown} is {size} bytes (> {lim.read_file_max_bytes}); read it in chunks with offset/limit"
                )
            limit = args.limit if args.limit is not None else lim.read_file_window_lines
            text = self._window(f, shown, args.offset or 1, limit, lim)
        remember_file(ctx, real, held)  # a buffer's bytes: a later edit of it there is seen as a change
        return text

    @staticmethod
    def _window(f: BinaryIO, shown: str, offset: int, limit: int, lim: Limits) -> str:
        # Only the window is read, then at most `read_file_count_bytes` more to count the
        # lines after it: a window of a 20 GiB log costs what the window costs.
        line_chars, max_chars = lim.read_file_line_chars, lim.max_output
        total_if_short = _skip_lines(f, offset - 1)
        if total_if_short is not None:
            return _past_end(shown, offset, total_if_short)
        # Lines are kept while they fit the output budget (less room for the notes), so the
        # exit clamp never cuts the middle of a window and `continue with` stays exact.
        budget = max(0, max_chars - 200)
        out: list[str] = []
        used = clipped = 0
        end = f.tell()
        more = False  # a line after the window exists
        for n, (raw, over) in enumerate(_lines(f, line_chars * 4 + 4), offset):
            if n >= offset + limit:
                more = True
                break
            if n == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            line = raw.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
            if over or len(line) > line_chars:
                line = line[:line_chars] + "…"
                clipped += 1
            cost = len(line) + 9  # the number, a tab and a newline
            if out and used + cost > budget:
                more = True
                break
            out.append(line)
            used += cost
            end = f.tell()
        if not out:
            return _past_end(shown, offset, offset - 1)
        last = offset + len(out) - 1
        total: int | None = last
        at_least = last
        if more:
            f.seek(end)
            rest, at_eof = _count_lines_bounded(f, lim.read_file_count_bytes)
            total = last + rest if at_eof else None
            at_least = last + rest + 1  # bytes remain past the count: at least one more line
        width = len(str(total if total is not None else last))
        body = "\n".join(f"{num:>{width}}\t{text}" for num, text in enumerate(out, offset))
        notes: list[str] = []
        if clipped:
            notes.append(f"{clipped} line{'s' if clipped != 1 else ''} longer than {line_chars} chars clipped with …")
        if total is None:
            notes.append(f"showing lines {offset}-{last} of at least {at_least} (not counted to the end); "
                         f"continue with offset={last + 1}")
        elif last < total:
            notes.append(f"showing lines {offset}-{last} of {total}; continue with offset={last + 1}")
        return body + ("\n\n" + "\n".join(notes) if notes else "")


def numbered(data: bytes, shown: str, limits: Limits) -> str:
    """A whole file already read (`@path` attachments) as read_file shows it with no window
    given: numbered lines, the first `read_file_window_lines`, with the same notes."""

    return ReadFile._window(io.BytesIO(data), shown, 1, limits.read_file_window_lines, limits)


def _past_end(shown: str, offset: int, total: int) -> str:
    if total == 0:
        return f"{shown} is empty (0 lines)"
    raise ToolError(f"offset {offset} is past the end of {shown} ({total} lines); use an offset from 1 to {total}")


def _skip_lines(f: BinaryIO, k: int) -> int | None:
    """Position `f` at the start of line k+1, counting newlines a chunk at a time. None when
    it got there; else the file ended first, and this is its number of lines."""
    f.seek(0)
    pos = n = 0
    last = b""
    while k > 0:
        chunk = f.read(1 << 20)
        if not chunk:
            return n + (1 if last and last != b"\n" else 0)
        c = chunk.count(b"\n")
        if c < k:
            k -= c
            n += c
            pos += len(chunk)
            last = chunk[-1:]
            continue
        i = -1
        for _ in range(k):
            i = chunk.index(b"\n", i + 1)
        f.seek(pos + i + 1)
        return None
    return None


def _count_lines_bounded(f: BinaryIO, cap: int) -> tuple[int, bool]:
    """(lines from the position on, reached the end?), reading at most `cap` bytes."""
    n, read = 0, 0
    last = b""
    while read < cap and (chunk := f.read(min(1 << 20, cap - read))):
        n += chunk.count(b"\n")
        last = chunk[-1:]
        read += len(chunk)
    at_eof = read < cap or not f.read(1)
    return n + (1 if at_eof and last and last != b"\n" else 0), at_eof


# --------------------------------------------------------------------------------------
# list_dir


@dataclass(frozen=True, kw_only=True)
class ListDirParams(Params):
    path: str = "."


@dataclass(frozen=True, kw_only=True)
class ListDir(ReadOnlyTool[ListDirParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "list_dir"
    claude_names: ClassVar[tuple[str, ...]] = ("LS",)
    group: ClassVar[str] = "files"
    description: ClassVar[str] = (
        "List one folder (not recursive): subfolders first (ending in /), then files with sizes in "
        "bytes; symlinks as `name -> target`; hidden and ignored entries included, at most "
        "{list_dir_entries}. Use glob to find files by name across the tree."
    )
    params: ClassVar[type[Params]] = ListDirParams
    kind: ClassVar[SubjectKind] = "path"
    shows_contents: ClassVar[bool] = False  # names and sizes only: a secret file's name is no secret

    def rule_subject(self, args: ListDirParams) -> str | None:
        return args.path  # the runtime resolves it into the Target

    def output_limit(self) -> str:
        return "list_dir_entries entries"

    async def run(self, args: ListDirParams, ctx: ToolContext, attempt: Attempt) -> str:
        text: str = await self.in_thread(self._list, args, ctx, attempt)
        return text

    def _list(self, args: ListDirParams, ctx: ToolContext, attempt: Attempt) -> str:
        p = self.resolved(args, ctx, attempt).paths[0]  # the folder the rules judged
        shown = shown_path(ctx, args.path, p)
        if not p.exists():
            raise ToolError(f"{shown} does not exist; list the parent directory to see what is there")
        if not p.is_dir():
            raise ToolError(f"{shown} is not a directory; use read_file to read it")
        try:
            with held(p) as (where, _):  # the folder judged, even if relinked since; held while its entries are read
                return self._rows(where, shown, ctx, Withheld(ctx, attempt, p))
        except OSError as e:
            if swapped(e):
                raise ToolError(f"cannot list {shown}: a symlink appeared in its path after it was checked; "
                                "list it again") from None
            raise ToolError(f"cannot list {shown}: {e.strerror}; check its permissions") from None

    @staticmethod
    def _rows(where: Path, shown: str, ctx: ToolContext, withheld: Withheld) -> str:
        with os.scandir(where) as it:
            entries = [e for e in it if withheld.keeps(e.name)]
        note = withheld.note("entry", "not listed")

        def is_dir(e: os.DirEntry[str]) -> bool:
            try:
                return e.is_dir()  # follows symlinks: a link to a directory lists with them
            except OSError:
                return False

        # Sort first, then stat only what is shown: a 100,000-entry folder costs 300 stats.
        dirs = sorted((e for e in entries if is_dir(e)), key=lambda e: e.name)
        files = sorted((e for e in entries if not is_dir(e)), key=lambda e: e.name)
        ordered = [*dirs, *files]
        if not ordered:
            empty = f"{shown}/ is empty" if shown != "." else "the directory is empty"
            return empty + (f" but for what is withheld\n\n{note}" if note else "")
        cap = ctx.limits.list_dir_entries
        rows = [_entry_row(e, is_dir(e)) for e in ordered[:cap]]
        text = "\n".join(rows)
        notes = [f"{len(ordered)} entries, showing first {cap}"] if len(ordered) > cap else []
        return text + ("\n\n" + "\n".join([*notes, note] if note else notes) if notes or note else "")


def _entry_row(e: os.DirEntry[str], is_dir: bool) -> str:
    link = ""
    if e.is_symlink():
        try:
            link = " -> " + os.readlink(e.path)
        except OSError:
            link = " -> ?"
    if is_dir:
        return f"{e.name}/{link}"
    try:
        size = e.stat().st_size
    except OSError:  # a link whose target is gone
        return f"{e.name}{link} (broken link)"
    return f"{e.name}  {size}{link}"


def tools() -> list[Tool]:
    return [ReadFile(), ListDir()]
