"""File tools: read_file, write_file, edit_file, list_dir, and edit_file's readings of a near
miss (old_string as the model meant it). What they share with apply_patch (how a path is
named, text decoding, atomic writes, the stale-file guard, diffs for people) is
`nanohermes.tools.fileops`.

Paths are taken relative to the workspace (absolute paths work too) and resolved once, by
`nanohermes.pathrules.resolve`, into the call's Target; the tools read and write exactly those
resolved paths, opened without following a symlink put there after the check. Writes go
through symlinks to the real file. Reading is allowed anywhere. A write is *protected* (asked
even in accept-edits, refused in plan and debug) when `nanohermes.pathrules.protected_write`
says so: outside the workspace and `extra_write_roots`, inside `.git/`, or nanohermes's own config.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, ClassVar, TypeVar

from nanohermes.budget import Limits
from nanohermes.pathrules import held, open_exact, swapped
from nanohermes.permissions import Effect, SubjectKind
from nanohermes.tools.base import Attempt, Approval, Params, ReadOnlyTool, Tool, ToolContext, ToolError, ToolResult, about
from nanohermes.tools.fileops import (
    BOM,
    TextFile,
    Withheld,
    atomic_write,
    bounded_diff,
    checked_write_target,
    diff_stat,
    guard_fresh,
    looks_binary,
    editor_write,
    near_namesakes,
    open_current,
    read_current,
    remember_file,
    shown_path,
    unified_diff,
    with_eol,
    write_error,
)

if TYPE_CHECKING:
    from nanohermes.tools.matching import Span

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


def _stat_file(shown: str, tool: str, real: Path, ctx: ToolContext) -> os.stat_result:
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
        st = _stat_file(shown, self.name, real, ctx)
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
    import io

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


# --------------------------------------------------------------------------------------
# the write tools


# The params of a writer: every one names its file in `path`.
_WP = TypeVar("_WP", "WriteFileParams", "EditFileParams")


@dataclass(frozen=True, kw_only=True)
class _Writer(Tool[_WP]):
    """What write_file and edit_file share: approval "edit", the protected-path check, the
    rule subject, the planned change checked before anyone is asked, and a diff computed
    without writing for the approval prompt."""
    spawns: ClassVar[bool] = False

    group: ClassVar[str] = "files"
    approval: ClassVar[Approval] = "edit"
    kind: ClassVar[SubjectKind] = "path"
    effect: ClassVar[Effect] = "write"

    def rule_subject(self, args: _WP) -> str | None:
        return args.path  # the runtime resolves it into the Target

    def approval_detail(self, args: _WP, ctx: ToolContext, attempt: Attempt) -> str:
        try:
            return self.plan(args, ctx, attempt, guard=False).diff(ctx)  # the stale-file guard speaks when it runs
        except ToolError as e:
            return f"(the change cannot be previewed: {e})"
        except Exception as e:  # a preview must never break the approval prompt
            return f"(the change cannot be previewed: {type(e).__name__}: {e})"

    async def precheck(self, args: _WP, ctx: ToolContext, attempt: Attempt) -> None:
        # What `run` plans (a file never read or changed since, old_string not found), without the write.
        await self.in_thread(self.plan, args, ctx, attempt)

    def plan(self, args: _WP, ctx: ToolContext, attempt: Attempt, *, guard: bool = True) -> Change:
        """The change the call makes to the file it was judged on, without writing it."""
        raise NotImplementedError

    async def run(self, args: _WP, ctx: ToolContext, attempt: Attempt) -> ToolResult:
        result: ToolResult = await self.in_thread(self._apply, args, ctx, attempt)
        return result

    def _apply(self, args: _WP, ctx: ToolContext, attempt: Attempt) -> ToolResult:
        change = self.plan(args, ctx, attempt)
        if change.already:
            return ToolResult(text=change.report)  # the edit stands already: the file is not touched
        try:
            if not editor_write(ctx, change.target, change.new_bytes, change.mode):  # an editor's buffer first
                atomic_write(change.target, change.new_bytes, change.mode)
        except OSError as e:
            raise write_error(change.shown, e) from None
        remember_file(ctx, change.target, change.new_bytes)
        return ToolResult(text=change.report, display=change.diff(ctx))


@dataclass(frozen=True)
class Change:
    """One file's planned new content, computed before anything is written."""

    target: Path
    shown: str
    old_text: str | None  # None: the file does not exist yet
    new_text: str
    new_bytes: bytes
    mode: int | None
    report: str
    already: bool = False  # an edit whose new text already stands in the file: nothing is written

    def diff(self, ctx: ToolContext) -> str:
        if self.already:
            return f"(already applied: {self.shown} holds new_string where old_string was; nothing will change)"
        old = "/dev/null" if self.old_text is None else f"a/{self.shown}"
        d = unified_diff(self.old_text or "", self.new_text, old, f"b/{self.shown}")
        return bounded_diff(d, ctx.limits.edit_diff_chars)


def _load_text(ctx: ToolContext, path: str, tool: str, real: Path) -> tuple[Path, str, TextFile, bytes]:
    """Read a whole existing text file for editing, refusing what cannot be edited safely.
    `real` is the resolved path the call was judged on; the bytes come back too, for the
    stale-file guard."""
    shown = shown_path(ctx, path, real)
    target = checked_write_target(ctx, real, shown)
    st = _stat_file(shown, tool, target, ctx)
    if st.st_size > ctx.limits.edit_file_max_bytes:
        raise ToolError(f"{shown} is {st.st_size} bytes (> {ctx.limits.edit_file_max_bytes}); too big to edit in memory")
    try:
        data = read_current(ctx, target)
    except OSError as e:
        raise ToolError(f"cannot read {shown}: {e.strerror}; check its permissions") from None
    if looks_binary(data[: ctx.limits.binary_sniff_bytes]):
        raise ToolError(f"{shown} looks like a binary file ({len(data)} bytes); {tool} edits text files only")
    return target, shown, TextFile.decode(data, st.st_mode), data


@dataclass(frozen=True, kw_only=True)
class WriteFileParams(Params):
    path: str
    content: str

    non_empty: ClassVar[dict[str, str]] = {"path": ""}
    claude_fields: ClassVar[dict[str, str]] = {"path": "file_path"}


@dataclass(frozen=True, kw_only=True)
class WriteFile(_Writer[WriteFileParams]):
    name: ClassVar[str] = "write_file"
    claude_names: ClassVar[tuple[str, ...]] = ("Write",)
    description: ClassVar[str] = (
        "Create a file or replace its whole content (parent folders are created; atomic; keeps "
        "permissions). Replacing an existing file needs a read_file of it first in this session. Prefer "
        "edit_file for small changes, apply_patch for many."
    )
    params: ClassVar[type[Params]] = WriteFileParams
    shows_contents: ClassVar[bool] = False  # it reports sizes, never the file's text (read rules do not cover it)

    def plan(self, args: WriteFileParams, ctx: ToolContext, attempt: Attempt, *, guard: bool = True) -> Change:
        real = self.resolved(args, ctx, attempt).paths[0]  # the file the rules judged
        shown = shown_path(ctx, args.path, real)
        target = checked_write_target(ctx, real, shown)
        old: TextFile | None = None
        mode: int | None = None
        if target.exists():
            try:
                st = target.stat()
                mode = st.st_mode
                # The old content only feeds the diff: a huge or binary file is not loaded for it.
                whole = st.st_size <= ctx.limits.edit_file_max_bytes
                data = read_current(ctx, target) if whole else b"\x00"
                head = data if whole else _head(target, ctx.limits.binary_sniff_bytes)
            except OSError as e:
                raise ToolError(f"cannot read {shown}: {e.strerror}; check its permissions") from None
            if guard:
                # read_file refuses a binary file, so for one only its staleness counts.
                guard_fresh(ctx, target, shown, data if whole else None, must_have_seen=not looks_binary(head))
            old = TextFile.decode(data, mode) if not looks_binary(data[: ctx.limits.binary_sniff_bytes]) else None
        content, notes = _content_artefacts(args.content, shown)
        if old is not None:
            refuse_omission(old.text, content, "content", shown,
                            "Nothing was written: send the whole file in content, every line you mean to keep written "
                            "out, or change only part of it with edit_file or apply_patch")
        new_bytes = content.encode("utf-8", errors="surrogateescape")
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "overwrote" if target.exists() else "created"
        report = f"{verb} {shown} ({len(new_bytes)} bytes, {lines} line{'s' if lines != 1 else ''})"
        report += f" ({'; '.join(notes)})" if notes else ""
        old_text = (old.text if old else "") if target.exists() else None
        return Change(target, shown, old_text, content, new_bytes, mode, report)


def _content_artefacts(content: str, shown: str) -> tuple[str, list[str]]:
    """A whole file's content without what models wrap around it: one Markdown fence, or line
    breaks sent as literal escapes; each repair named, a guess refused with its reason."""
    from nanohermes.tools.artefacts import Guess, decode_newlines, unfence

    notes: list[str] = []
    try:
        content, note = unfence(content, shown)
        notes += [note] if note else []
        content, note = decode_newlines(content)
        notes += [note] if note else []
    except Guess as e:
        raise ToolError(f"nothing was written to {shown}: {e}") from None
    return content, notes


def _head(target: Path, n: int) -> bytes:
    with os.fdopen(open_exact(target), "rb") as f:
        return f.read(n)


@dataclass(frozen=True, kw_only=True)
class EditFileParams(Params):
    path: str
    old_string: str
    new_string: str
    replace_all: bool = False

    non_empty: ClassVar[dict[str, str]] = {"path": ""}
    claude_fields: ClassVar[dict[str, str]] = {"path": "file_path"}

    def __post_init__(self) -> None:
        super().__post_init__()
        # Only "" is empty here: replacing a run of spaces or a tab is a real edit.
        if self.old_string == "":
            raise ValueError("old_string must not be empty; use write_file to create a file")


@dataclass(frozen=True, kw_only=True)
class EditFile(_Writer[EditFileParams]):
    name: ClassVar[str] = "edit_file"
    claude_names: ClassVar[tuple[str, ...]] = ("Edit",)
    description: ClassVar[str] = (
        "Replace `old_string` with `new_string` in a file you read. `old_string` must occur once (or pass "
        "replace_all=true): add surrounding lines to make it unique. Matched exactly, else ignoring "
        "whitespace or Unicode punctuation if unique (the result names each repair); a miss shows the closest "
        "lines. read_file's `N<TAB>` line numbers are stripped only where every line of old_string has one (then "
        "from new_string too) or every line of new_string does. Keeps line endings and encoding. "
        "Use write_file to create a file and apply_patch for many changes."
    )
    params: ClassVar[type[Params]] = EditFileParams

    def plan(self, args: EditFileParams, ctx: ToolContext, attempt: Attempt, *, guard: bool = True) -> Change:
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are identical; nothing would change")
        target, shown, f, data = _load_text(ctx, args.path, self.name, self.resolved(args, ctx, attempt).paths[0])
        if guard:
            guard_fresh(ctx, target, shown, data)
        text = f.text
        old, new = _match_eol(text, f.eol, args.old_string, args.new_string)
        count = text.count(old)
        if count == 0:
            edit = _near_miss(text, f, args, shown)
        else:
            if count > 1 and not args.replace_all:
                lines = _occurrence_lines(text, old)
                raise ToolError(f"old_string occurs {count} times in {shown} (lines {lines}); "
                                "pass replace_all=true or add context to make it unique")
            new, notes = _new_string_artefacts(text, args.old_string, new, shown)
            edit = _Edit(count if args.replace_all else 1, new, notes, _replace(text, old, new, f.eol, args.replace_all))
        refuse_omission(text, edit.result, "new_string", shown,
                        "Nothing was written: write those lines out in new_string, or make old_string smaller so that "
                        "it leaves them out (a line standing for kept lines works only where old_string has the same "
                        "line)")
        if not f.utf8 and not edit.new.isascii():
            raise ToolError(f"{shown} is not UTF-8, and edit_file keeps its bytes as they are; "
                            "new_string must be ASCII here (or rewrite the file with write_file)")
        extra = f" ({'; '.join(edit.notes)})" if edit.notes else ""
        if edit.result == text:
            report = f"already applied: {edit.applied}; nothing changed in {shown}{extra}"
        else:
            plus, minus = diff_stat(unified_diff(text, edit.result, "a", "b"))
            n = edit.n
            report = f"edited {shown}: replaced {n} occurrence{'s' if n != 1 else ''} (+{plus} -{minus} lines){extra}"
        return Change(target, shown, text, edit.result, f.encode(edit.result), f.mode, report,
                      already=edit.result == text)


@dataclass(frozen=True)
class _Edit:
    """An edit worked out: replacements made, new_string as used, the repairs named, the new text."""

    n: int
    new: str
    notes: list[str]
    result: str
    applied: str = ""  # the result is the text as it was: where new_string already stands


def _new_string_artefacts(text: str, old_sent: str, new: str, shown: str) -> tuple[str, list[str]]:
    """new_string without what a model copies into it by mistake, once old_string matched as
    sent: read_file's line numbers on every line (where the file has no such lines of its
    own, which would make them possibly content)."""
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


def refuse_omission(old: str, new: str, holder: str, shown: str, advice: str) -> None:
    """A ToolError when `new` puts a placeholder line (`# ... rest of the code ...`) in place of
    lines of `old` that it would drop (`artefacts.omission`)."""
    from nanohermes.tools.artefacts import omission

    if (found := omission(old, new)) is not None:
        raise ToolError(found.refusal(holder, shown, advice))


def _near_miss(text: str, f: TextFile, args: EditFileParams, shown: str) -> _Edit:
    """old_string is not in the file as sent: read it as the model meant it, in order, and
    take the first reading that matches (a loose tier only when unique): read_file's line
    numbers stripped; blank lines at its start or end ignored; escaped twice (literal `\\n`,
    `\\"`) decoded; a final newline the file's last line does not have; elision lines
    (`...`, `# ... existing code ...`) in both strings as "the lines in between stay". With no
    reading found, an edit whose new_string already stands there is "already applied";
    anything else is a ToolError that shows the closest lines of the file."""
    from nanohermes.tools.artefacts import all_numbered, is_elision, numbering, strip_numbers, unescape_twice
    from nanohermes.tools.matching import TIERS, find_text

    sent_old, sent_new = args.old_string.replace("\r\n", "\n"), args.new_string.replace("\r\n", "\n")
    old_s, new_s, notes = sent_old, sent_new, []
    if all_numbered(sent_old):
        old_s, new_s = strip_numbers(sent_old), strip_numbers(sent_new, like=sent_old)
        notes.append(f"{_numbers(numbering(sent_old))} stripped from old_string" +
                     (" and new_string" if new_s != sent_new else ""))
    else:
        new_s, more = _new_string_artefacts(text, sent_old, new_s, shown)
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
                return _Edit(1, new_eol, [*why, "old_string's final newline ignored: the file's last line has none"],
                             _replace(text, tail, new_eol, f.eol, False))
    if any(is_elision(ln) for ln in old_s.split("\n")) and (done := _elided(text, f, old_s, new_s, shown)) is not None:
        return _Edit(1, new_s, [*notes, done[1]], done[0])
    for _old, new_r, why in readings:
        if _stands(text, new_r, f.eol):
            at = text.count("\n", 0, text.find(with_eol(new_r, f.eol) if with_eol(new_r, f.eol) in text else new_r)) + 1
            return _Edit(0, new_r, why, text, applied=f"old_string is not in {shown} but new_string is (line {at})")
    raise _not_found(text, shown, readings[-1][0])


def _matched(text: str, f: TextFile, args: EditFileParams, shown: str, found: tuple[list[Span], int], needle: str,
             new_s: str, notes: list[str]) -> _Edit:
    """The edit for a reading of old_string found at `found` (spans, tier): every exact
    occurrence with replace_all, else the one match; a loose one must be unique, and the new
    text follows the file's indentation and quotes where the tier ignored them."""
    from nanohermes.tools.matching import TIERS, follow_quotes, keep_typography, reindent

    spans, tier = found
    new_eol = with_eol(new_s, f.eol)
    notes = list(notes)
    if tier == 0:  # what the reading changed was all that differed: an exact match after all
        old_eol = text[spans[0].start:spans[0].end]
        if len(spans) > 1 and not args.replace_all:
            raise ToolError(f"old_string occurs {len(spans)} times in {shown} (lines {_occurrence_lines(text, old_eol)}); "
                            "pass replace_all=true or add context to make it unique")
        n = len(spans) if args.replace_all else 1
        return _Edit(n, new_eol, notes, _replace(text, old_eol, new_eol, f.eol, args.replace_all))
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
    return _Edit(1, new_eol, notes, text[: sp.start] + new_eol + text[sp.end:])


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


def _match_eol(text: str, eol: str, old: str, new: str) -> tuple[str, str]:
    """Translate the model's line endings to the file's: a CRLF file stays CRLF even when
    old_string and new_string come with LF. The text as sent wins when it matches."""
    old_eol, new_eol = with_eol(old, eol), with_eol(new, eol)
    if old_eol in text:
        return old_eol, new_eol
    if old in text:
        return old, new
    return old_eol, new_eol


def _replace(text: str, old: str, new: str, eol: str, replace_all: bool) -> str:
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


def _occurrence_lines(text: str, needle: str, limit: int = 10) -> str:
    lines: list[str] = []
    start = 0
    while len(lines) < limit and (i := text.find(needle, start)) >= 0:
        lines.append(str(text.count("\n", 0, i) + 1))
        start = i + max(1, len(needle))
    more = text.count(needle) - len(lines)
    return ", ".join(lines) + (f" and {more} more" if more > 0 else "")


def tools() -> list[Tool]:
    return [ReadFile(), ListDir(), WriteFile(), EditFile()]
