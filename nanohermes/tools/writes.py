"""The file tools that write: write_file (a whole file) and edit_file (old_string replaced by
new_string; its readings of a near miss are `nanohermes.tools.near_miss`). Each plans the
change before anyone is asked (the protected-path check, the stale-file guard, a diff for
the approval prompt), and writes it atomically, or into an editor's buffer.

Paths are taken relative to the workspace (absolute paths work too) and resolved once, by
`nanohermes.guard.pathrules.resolve`, into the call's Target; the tools write exactly those
resolved paths. Writes go through symlinks to the real file. A write is *protected* (asked
even in accept-edits, refused in plan and debug) when `nanohermes.guard.pathrules.protected_write`
says so: outside the workspace and `extra_write_roots`, inside `.git/`, or nanohermes's own config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from nanohermes.guard.pathrules import open_exact
from nanohermes.guard.permissions import Effect, SubjectKind
from nanohermes.tools.base import Approval, Attempt, Params, Tool, ToolContext, ToolError, ToolResult
from nanohermes.tools.fileops import (
    TextFile,
    atomic_write,
    bounded_diff,
    checked_write_target,
    diff_stat,
    editor_write,
    guard_fresh,
    looks_binary,
    read_current,
    remember_file,
    shown_path,
    unified_diff,
    write_error,
)
from nanohermes.tools.files import stat_file
from nanohermes.tools.near_miss import Edit, match_eol, near_miss, new_string_artefacts, occurrence_lines, replace

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
    st = stat_file(shown, tool, target, ctx)
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
    # only content that may hold copied artefacts
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
        old, new = match_eol(text, f.eol, args.old_string, args.new_string)
        count = text.count(old)
        if count == 0:
            edit = near_miss(text, f, args, shown)
        else:
            if count > 1 and not args.replace_all:
                lines = occurrence_lines(text, old)
                raise ToolError(f"old_string occurs {count} times in {shown} (lines {lines}); "
                                "pass replace_all=true or add context to make it unique")
            new, notes = new_string_artefacts(text, args.old_string, new, shown)
            edit = Edit(count if args.replace_all else 1, new, notes, replace(text, old, new, f.eol, args.replace_all))
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



def refuse_omission(old: str, new: str, holder: str, shown: str, advice: str) -> None:
    """A ToolError when `new` puts a placeholder line (`# ... rest of the code ...`) in place of
    lines of `old` that it would drop (`artefacts.omission`)."""
    # only new text that looks elided
    from nanohermes.tools.artefacts import omission

    if (found := omission(old, new)) is not None:
        raise ToolError(found.refusal(holder, shown, advice))


def tools() -> list[Tool]:
    return [WriteFile(), EditFile()]
