"""apply_patch: a unified diff (`nanohermes.tools.patches.unified`) or a `*** Begin Patch`
patch (`nanohermes.tools.patches.begin_patch`), told apart by the text.

Both formats compute every file's new content from a read callback without touching the
disk, so the tool checks the whole patch, the stale-file guard included, before it writes a
single file (all or nothing), and restores every file when a write fails. An unread file an
`*** Add File` or a `*** Move to` replaces whole has its old bytes kept in the session
folder first.

Paths: the tool names every path as written (`written_paths`) as its subjects, so the runtime
resolves them with the one resolver like any other tool's (`l/../x` with `l -> deep/er` is
`deep/x`); the resolved paths are what the rules judge and what the patch reads and writes,
through the link-refusing opens of `nanohermes.guard.pathrules`. Nothing here folds `..` first.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from nanohermes.guard.pathrules import read_exact, swapped, unlink_exact
from nanohermes.guard.permissions import Effect, SubjectKind
from nanohermes.tools.base import (
    Approval, Attempt, ClaudeCall, Params, Target, Tool, ToolContext, ToolError, ToolResult, absolute,
)
from nanohermes.tools.fileops import (
    TextFile,
    atomic_write,
    bounded_diff,
    changed_since_seen,
    checked_write_target,
    diff_stat,
    editor_write,
    forget_file,
    guard_fresh,
    looks_binary,
    near_namesakes,
    read_current,
    remember_file,
    shown_path,
    unified_diff,
)
from nanohermes.tools.patches.begin_patch import FileOp, apply_begin_patch, is_begin_patch, parse_begin_patch
from nanohermes.tools.patches.common import Outcome, PatchError
from nanohermes.tools.patches.unified import FilePatch, apply, parse, settle_prefixes
from nanohermes.common.dirs import private_dir


# Where the old content of a file a patch replaced unread is kept, in the session folder.
REPLACED_DIR = "replaced"


# --------------------------------------------------------------------------------------
# the paths a patch names


def _written(diff_text: str) -> list[str]:
    """Every path the patch names, in order, as written (git's a/ and b/ taken off)."""
    if is_begin_patch(diff_text):
        return [p for op in parse_begin_patch(diff_text) for p in (op.path, op.move_to) if p]
    # A created or deleted file's name without its prefix is judged too: which one is meant is
    # decided by what exists (`unified.settle_prefixes`).
    return [p for fp in parse(diff_text) for p in (fp.old_path, fp.new_path, fp.alternative) if p is not None]


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


def claude_calls_of(diff_text: str, workspace: Path) -> list[ClaudeCall]:
    """The patch as the calls Claude Code would make for it, for hooks (see `Tool.claude_calls`):
    per file, a `Write` of a file it adds, an `Edit` of a file it changes in one place or a
    `MultiEdit` of one it changes in several, and the shell's `rm` / `mv` / `cp` for a file it
    deletes, moves or copies (then an `Edit` of the new file if its text changes too). Empty
    when the patch does not parse: the tool reports why."""
    ours = {"diff": diff_text}
    out: list[ClaudeCall] = []

    def edit(path: str, hunks: list[tuple[list[str], list[str]]]) -> None:
        where = {**ours, "file_path": absolute(path, workspace)}
        pairs = [{"old_string": "\n".join(old), "new_string": "\n".join(new)} for old, new in hunks]
        if len(pairs) == 1:
            out.append(ClaudeCall("Edit", {**where, **pairs[0], "replace_all": False}, "path", (path,)))
        elif pairs:
            out.append(ClaudeCall("MultiEdit", {**where, "edits": pairs}, "path", (path,)))

    def shell(verb: str, *paths: str) -> None:
        out.append(ClaudeCall.bash(" ".join([verb, *(shlex.quote(p) for p in paths)]), ours))

    try:
        if is_begin_patch(diff_text):
            for op in parse_begin_patch(diff_text):
                hunks = [(c.old, [t for tag, t in c.lines if tag != "-"]) for c in op.chunks]
                if op.kind == "add":
                    out.append(ClaudeCall("Write", {**ours, "file_path": absolute(op.path, workspace),
                                                    "content": op.content}, "path", (op.path,)))
                elif op.kind == "delete":
                    shell("rm", op.path)
                else:
                    if op.move_to:
                        shell("mv", op.path, op.move_to)
                    edit(op.move_to or op.path, hunks or ([] if op.move_to else [([], [])]))
            return out
        for fp in parse(diff_text):
            hunks = [(h.old, h.new) for h in fp.hunks]
            if fp.kind == "create":
                text = "".join(line + "\n" for h in fp.hunks for line in h.new)
                text = text[:-1] if fp.hunks and fp.hunks[-1].new_no_eol else text
                out.append(ClaudeCall("Write", {**ours, "file_path": absolute(fp.path, workspace), "content": text},
                                      "path", (fp.path,)))
            elif fp.kind == "delete":
                shell("rm", fp.old_path or fp.path)
            elif fp.kind in ("rename", "copy"):
                shell("cp" if fp.kind == "copy" else "mv", fp.old_path or "", fp.path)
                edit(fp.path, hunks)
            else:
                edit(fp.path, hunks or [([], [])])
    except PatchError:
        return []
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
    claude_names: ClassVar[tuple[str, ...]] = ("Edit", "MultiEdit", "Write")
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

    def claude_calls(self, args: ApplyPatchParams, workspace: Path) -> list[ClaudeCall]:
        return claude_calls_of(args.diff, workspace) or super().claude_calls(args, workspace)

    def approval_detail(self, args: ApplyPatchParams, ctx: ToolContext, attempt: Attempt) -> str:
        try:
            return self._display(self._plan(args, ctx, self.resolved(args, ctx, attempt)), ctx)
        except (ToolError, PatchError) as e:
            return f"(the patch cannot be applied: {e})\n\n{args.diff}"
        except OSError as e:  # a path changing while it is read: the run checks it all again
            return f"(the patch cannot be shown: {e.strerror or e}; its files are changing)\n\n{args.diff}"

    async def precheck(self, args: ApplyPatchParams, ctx: ToolContext, attempt: Attempt) -> None:
        await self.in_thread(self._plan, args, ctx, self.resolved(args, ctx, attempt))  # a patch that does not apply

    async def run(self, args: ApplyPatchParams, ctx: ToolContext, attempt: Attempt) -> ToolResult:
        return await self.in_thread(self._run, args, ctx, self.resolved(args, ctx, attempt))

    def _plan(self, args: ApplyPatchParams, ctx: ToolContext, judged: Target) -> _Plan:
        """What the patch does to the files of the Target it was `judged` on, changing nothing."""
        ops: list[FileOp] | None = None
        patches: list[FilePatch] = []
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
                # By what exists at the paths judged for the names as written.
                settle_prefixes(patches, lambda p: (real := judged.path_of(p)) is not None and real.exists(),
                                lambda p: (real := judged.path_of(p)) is not None and real.parent.is_dir())
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
            data = read_current(ctx, target)  # the editor's buffer, when an editor holds the session
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
        # only a patch whose new text looks elided
        from nanohermes.tools.artefacts import omission

        for o in outcomes:  # a placeholder line in place of lines the file would lose
            if o.old_text and o.new_text is not None and (found := omission(o.old_text, o.new_text)) is not None:
                raise ToolError(found.refusal(f"the patch's new text for {o.new_path}", o.old_path or "the file",
                                              "No file was changed: put those lines in the patch as they are (as "
                                              "context or + lines), or patch a smaller part that leaves them out"))
        if unread and ctx.session_folder is None:  # nowhere to keep what would be replaced
            raise ToolError(f"{unread[0]} already exists and you have not read it in this session; read it first with "
                            "read_file (the session is not recorded, so its content could not be kept if replaced)")
        return _Plan(outcomes, files, paths, tuple(unread))

    def _run(self, args: ApplyPatchParams, ctx: ToolContext, judged: Target) -> ToolResult:
        plan = self._plan(args, ctx, judged)
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
                if not editor_write(ctx, target, data, mode):  # an editor's buffer first
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


__all__ = ["ApplyPatch", "ApplyPatchParams", "touched_paths", "written_paths"]
