"""File tools: read_file and list_dir, and the workspace path policy they share."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from nanohermes.tools import Approval, Params, Tool, ToolContext, ToolError


def resolve_path(ctx: ToolContext, path: str) -> Path:
    """A model-given path as an absolute path: relative ones are taken from the workspace."""
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = ctx.workspace / p
    return Path(os.path.normpath(p))


def display_path(ctx: ToolContext, p: Path) -> str:
    try:
        return p.relative_to(ctx.workspace).as_posix() or "."
    except ValueError:
        return str(p)


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head


class ReadFileParams(Params):
    path: str = Field(description="File path, relative to the workspace or absolute.")
    offset: int = Field(1, ge=1, description="1-based line number to start at.")
    limit: int = Field(2000, ge=1, description="Maximum number of lines to return.")

    non_empty: ClassVar[dict[str, str]] = {"path": ""}


@dataclass(frozen=True, kw_only=True)
class ReadFile(Tool):
    name: ClassVar[str] = "read_file"
    group: ClassVar[str] = "files"
    description: ClassVar[str] = (
        "Read a text file and return its lines numbered as `N\\tline`. Reads at most `limit` lines "
        "(default 2000) from `offset` (1-based); when more lines remain, the last line says how to "
        "continue. Files over 4 MiB must be read in chunks with offset/limit. Binary files are refused. "
        "Use list_dir for directories and grep to find text across files."
    )
    params: ClassVar[type[Params]] = ReadFileParams
    approval: ClassVar[Approval] = "never"
    persist: ClassVar[bool] = False  # its own window bounds it; persisting would loop read -> file -> read

    def read_only(self, args: Params) -> bool:
        return True

    def concurrency_safe(self, args: Params) -> bool:
        return True

    def rule_subject(self, args: Params) -> str | None:
        return args.path  # type: ignore[attr-defined]

    def output_limit(self) -> str:
        return "read_file_window_lines lines, read_file_max_bytes"

    async def run(self, args: Params, ctx: ToolContext) -> str:
        assert isinstance(args, ReadFileParams)
        return await self.in_thread(self._read, args, ctx)

    def _read(self, args: ReadFileParams, ctx: ToolContext) -> str:
        lim = ctx.limits
        p = resolve_path(ctx, args.path)
        shown = display_path(ctx, p)
        try:
            st = p.stat()
        except FileNotFoundError:
            raise ToolError(f"{shown} does not exist; check the path with list_dir or glob") from None
        except OSError as e:
            raise ToolError(f"cannot read {shown}: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{shown} is a directory; use list_dir to see its entries")
        windowed = args.offset != 1 or args.limit != lim.read_file_window_lines
        if st.st_size > lim.read_file_max_bytes and not windowed:
            raise ToolError(
                f"{shown} is {st.st_size} bytes (> {lim.read_file_max_bytes}); read it in chunks with offset/limit"
            )
        with open(p, "rb") as f:
            if looks_binary(f.read(lim.binary_sniff_bytes)):
                raise ToolError(f"{shown} looks like a binary file ({st.st_size} bytes); it cannot be shown as text")
        limit = min(args.limit, lim.read_file_window_lines) if not windowed else args.limit
        return self._window(p, shown, args.offset, limit, lim.read_file_line_chars)

    @staticmethod
    def _window(p: Path, shown: str, offset: int, limit: int, line_chars: int) -> str:
        # Stream the file: a window of a huge log must not load the whole file.
        out: list[str] = []
        total = 0
        clipped = 0
        with open(p, encoding="utf-8", errors="replace", newline="") as f:
            for total, line in enumerate(f, 1):
                if offset <= total < offset + limit:
                    line = line.rstrip("\r\n")
                    if len(line) > line_chars:
                        line = line[:line_chars] + "…"
                        clipped += 1
                    out.append(line)
        if total == 0:
            return f"{shown} is empty (0 lines)"
        if offset > total:
            raise ToolError(f"offset {offset} is past the end of {shown} ({total} lines)")
        # Number width from the file's total so columns line up across windows.
        width = len(str(total))
        last = offset + len(out) - 1
        body = "\n".join(f"{n:>{width}}\t{text}" for n, text in enumerate(out, offset))
        notes: list[str] = []
        if clipped:
            notes.append(f"{clipped} lines longer than {line_chars} chars were clipped with …")
        if last < total:
            notes.append(f"showing lines {offset}-{last} of {total}; continue with offset={last + 1}")
        return body + ("\n\n" + "\n".join(notes) if notes else "")


class ListDirParams(Params):
    path: str = Field(".", description="Directory, relative to the workspace or absolute.")


@dataclass(frozen=True, kw_only=True)
class ListDir(Tool):
    name: ClassVar[str] = "list_dir"
    group: ClassVar[str] = "files"
    description: ClassVar[str] = (
        "List a directory: subdirectories first (ending in /), then files with their sizes in bytes; "
        "symlinks are marked. Shows every entry (no ignore rules) up to 300. "
        "Use glob to find files by name pattern across the tree."
    )
    params: ClassVar[type[Params]] = ListDirParams
    approval: ClassVar[Approval] = "never"

    def read_only(self, args: Params) -> bool:
        return True

    def concurrency_safe(self, args: Params) -> bool:
        return True

    def rule_subject(self, args: Params) -> str | None:
        return args.path  # type: ignore[attr-defined]

    def output_limit(self) -> str:
        return "list_dir_entries entries"

    async def run(self, args: Params, ctx: ToolContext) -> str:
        assert isinstance(args, ListDirParams)
        return await self.in_thread(self._list, args, ctx)

    def _list(self, args: ListDirParams, ctx: ToolContext) -> str:
        p = resolve_path(ctx, args.path)
        shown = display_path(ctx, p)
        if not p.exists():
            raise ToolError(f"{shown} does not exist; list the parent directory to see what is there")
        if not p.is_dir():
            raise ToolError(f"{shown} is not a directory; use read_file to read it")
        dirs: list[str] = []
        files: list[str] = []
        try:
            entries = list(os.scandir(p))
        except OSError as e:
            raise ToolError(f"cannot list {shown}: {e.strerror}") from None
        for e in entries:
            link = e.is_symlink()
            if e.is_dir():
                dirs.append(e.name + "/" + (" -> " + os.readlink(e.path) if link else ""))
            else:
                try:
                    size = e.stat().st_size
                    files.append(f"{e.name}  {size}" + (" -> " + os.readlink(e.path) if link else ""))
                except OSError:
                    files.append(f"{e.name}  (broken link -> {os.readlink(e.path)})" if link else e.name)
        rows = sorted(dirs) + sorted(files)
        if not rows:
            return f"{shown}/ is empty"
        cap = ctx.limits.list_dir_entries
        text = "\n".join(rows[:cap])
        if len(rows) > cap:
            text += f"\n\n{len(rows)} entries, showing first {cap}"
        return text


def tools() -> list[Tool]:
    return [ReadFile(), ListDir()]
