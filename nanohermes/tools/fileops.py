"""What the file tools and apply_patch share: how a path is named to the model, what read
rules withhold from a walk or a listing, the checks before a file is written, text decoded so that it encodes back to the same bytes, atomic
writes, the stale-file guard (what the model has seen of each file this session), the likely
namesakes of a path that does not exist, the unified diff shown to people for an edit, and the
editor's buffers a file is read from and written through when a front end works in an editor.

Each helper takes the resolved path the call was judged on (see `nanohermes.guard.pathrules`):
nothing here resolves a model-given path (`shown_path` reads the written one only to name
the resolved one).
"""

from __future__ import annotations

import difflib
import hashlib
import io
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from nanohermes.common.budget import clamp, plural
from nanohermes.guard.pathrules import open_dir, swapped
from nanohermes.tools.base import Attempt, ToolContext, ToolError
from nanohermes.guard.pathrules import open_exact, read_exact
from nanohermes.tools.search.walk import ignore_dir_names


# --------------------------------------------------------------------------------------
# paths


def shown_path(ctx: ToolContext, written: str, real: Path) -> str:
    """How the model is told about `real`, the resolved path its call was judged on: as it
    wrote it (relative to the workspace, `.`/`..` folded, links kept) when that spelling
    still reaches `real`, else `real` itself (a `..` after a symlink, or a link changed
    since the check). Only names; what is read or written is always `real`."""
    p = Path(os.path.expanduser(written))
    if not p.is_absolute():
        p = ctx.workspace / p
    folded = Path(os.path.normpath(p))
    try:
        same = Path(os.path.realpath(folded)) == real
    except OSError:  # changing under it (a folder swapped for a link): the judged path names it
        same = False
    return display_path(ctx, folded if same else real)


def _workspace_real(ctx: ToolContext) -> Path:
    try:
        return Path(os.path.realpath(ctx.workspace))
    except OSError:
        return ctx.workspace


def display_path(ctx: ToolContext, p: Path) -> str:
    """Workspace-relative when inside it (lexically or once symlinks are resolved)."""
    for root in (ctx.workspace, _workspace_real(ctx)):
        try:
            return p.relative_to(root).as_posix() or "."
        except ValueError:
            continue
    return str(p)


class Withheld:
    """What read rules withhold from one call's walk or listing of the folder `root` (resolved,
    as judged; for the git tools, the repository's top): each path below it is asked by its
    root-relative name, and those withheld are counted for the note. Falsy when no read rule
    covers the tool: then nothing is asked."""

    def __init__(self, ctx: ToolContext, attempt: Attempt, root: Path) -> None:
        self.rule_of = attempt.read_rule
        self.paths: set[str] = set()
        self.rules: list[str] = []
        self.root = str(root).rstrip("/") + "/"
        self.workspace = os.path.realpath(ctx.workspace).rstrip("/") + "/"

    def subject(self, rel: str) -> str:
        """`rel` as rules see it: workspace-relative inside the workspace, absolute outside."""
        full = os.path.normpath(self.root + rel)
        return full[len(self.workspace):] if full.startswith(self.workspace) else full

    def __bool__(self) -> bool:
        return self.rule_of is not None

    def keeps(self, rel: str) -> bool:
        """May the call show (or search) `rel`, a path relative to the root?"""
        if self.rule_of is None:
            return True
        rule = self.rule_of(self.subject(rel))
        if rule is None:
            return True
        self.paths.add(rel)
        if rule not in self.rules:
            self.rules.append(rule)
        return False

    def note(self, noun: str, done: str) -> str:
        """`2 files not searched: withheld by read rule read_file(secrets/**)`, or "" when none was."""
        if not self.paths:
            return ""
        rules = ", ".join(self.rules)
        return f"{plural(len(self.paths), noun)} {done}: withheld by read rule{'s' if len(self.rules) > 1 else ''} {rules}"


def checked_write_target(ctx: ToolContext, target: Path, shown: str) -> Path:
    """`target` (already resolved) if a file can be written there, else a ToolError."""
    if target.is_dir():
        raise ToolError(f"{shown} is a directory; give the path of a file inside it")
    if target.exists() and not target.is_file():
        raise ToolError(f"{shown} is not a regular file; only regular files can be written")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ToolError(f"cannot write {shown}: {display_path(ctx, parent)} is a file, not a directory; choose another path")
            break
    return target


def near_namesakes(ctx: ToolContext, real: Path, most: int = 3) -> str:
    """Files of the workspace a path that does not exist was probably meant to name, as the
    model would write them (`src/utils.py` for `utils.py`): the same name in another folder,
    or a name one slip away in the folder named. "" when there are none. The walk skips the
    ignored folders and stops after `grep_max_files` entries, like a search's."""
    root = Path(os.path.realpath(ctx.workspace))
    if root != real and root not in real.parents:
        return ""
    name, folder = real.name, real.parent
    skip = ignore_dir_names(ctx.config) | {".git"}
    same: list[Path] = []
    stack, seen = [root], 0
    while stack and seen < ctx.limits.grep_max_files and len(same) < most:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in skip:
                        stack.append(Path(e.path))
                elif e.name == name and e.is_file(follow_symlinks=False):
                    same.append(Path(e.path))
            except OSError:
                continue
        stack.sort(key=lambda p: (len(p.parts), str(p)), reverse=True)  # shallower folders first
    found = sorted(same, key=lambda p: (len(p.parts), str(p)))[:most]
    if not found and folder.is_dir():
        try:
            siblings = [e for e in os.listdir(folder) if os.path.isfile(folder / e)]
        except OSError:
            siblings = []
        found = [folder / n for n in difflib.get_close_matches(name, siblings, n=most, cutoff=0.8)]
    return " or ".join(f"`{display_path(ctx, p)}`" for p in found)


# --------------------------------------------------------------------------------------
# bytes, text and atomic writes


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head


BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class TextFile:
    """A file decoded so that encoding back gives the very same bytes."""

    text: str  # without the BOM; undecodable bytes kept as surrogate escapes
    bom: bool
    utf8: bool  # False: some bytes are not UTF-8 (kept as they are)
    mode: int | None  # permission bits to keep; None for a new file

    @classmethod
    def decode(cls, data: bytes, mode: int | None = None) -> TextFile:
        bom = data.startswith(BOM)
        body = data[len(BOM):] if bom else data
        try:
            return cls(body.decode("utf-8"), bom, True, mode)
        except UnicodeDecodeError:
            return cls(body.decode("utf-8", errors="surrogateescape"), bom, False, mode)

    def encode(self, text: str) -> bytes:
        return (BOM if self.bom else b"") + text.encode("utf-8", errors="surrogateescape")

    @property
    def eol(self) -> str:
        """The file's dominant line ending."""
        crlf = self.text.count("\r\n")
        return "\r\n" if crlf and crlf >= self.text.count("\n") - crlf else "\n"


def with_eol(text: str, eol: str) -> str:
    text = text.replace("\r\n", "\n")
    return text.replace("\n", eol) if eol != "\n" else text


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    `path` is a resolved path (no symlinks in it): its folders are opened one by one without
    following links (missing ones are made), so the file lands exactly where the path was
    judged even if a link is swapped in meanwhile. The bytes go to a temp file in the same
    folder (same filesystem, so the rename is atomic), are fsynced, get the old file's mode,
    and are renamed over the target; a rename replaces a link put there, never follows it.
    """
    dfd = open_dir(path.parent, create=True)
    try:
        tmp = f".{path.name}.{secrets.token_hex(4)}.tmp"
        # os.open with 0o666 lets the kernel apply the umask, like any new file gets.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666,
                     dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if mode is not None:
                    os.fchmod(f.fileno(), stat.S_IMODE(mode))
                os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
        try:  # make the rename itself durable; not every platform allows fsync on a directory
            os.fsync(dfd)
        except OSError:
            pass
    finally:
        os.close(dfd)


# --------------------------------------------------------------------------------------
# the editor's buffers
#
# A front end that works inside an editor (ACP) puts a `Buffers` in the session state: the
# file tools then read a file as the editor holds it (unsaved edits included) and write
# through it, so an open buffer never conflicts with its file. Everything else (the checks
# before a write, the stale-file guard, the checkpoints' scan of the disk) is unchanged.

BUFFERS_KEY = "files.buffers"


class Buffers(Protocol):
    """The editor's view of the files. Called from a tool's worker thread, never the loop."""

    def read(self, real: Path) -> str | None:
        """The text of `real` as the editor holds it; None: read the disk."""

    def write(self, real: Path, text: str) -> bool:
        """Write `real` through the editor; False: not taken (write the disk). Raises OSError
        when the editor refused the write."""


def buffers(ctx: ToolContext) -> Buffers | None:
    """The session's editor buffers, when a front end put them there."""
    held: Buffers | None = ctx.state.get(BUFFERS_KEY)
    return held


def read_current(ctx: ToolContext, real: Path) -> bytes:
    """The bytes of `real` (a resolved, judged path) as the person sees them: the editor's
    buffer when an editor holds the session, else the disk (`read_exact`)."""
    held = buffers(ctx)
    text = held.read(real) if held is not None and _editor_reads(ctx, real) else None
    return read_exact(real) if text is None else text.encode("utf-8", errors="surrogateescape")


def open_current(ctx: ToolContext, real: Path) -> tuple[BinaryIO, bytes | None]:
    """`real` opened for reading as `read_current` reads it, and its bytes when they came
    from the editor (None: from the disk, whose stat tells their size)."""
    held = buffers(ctx)
    text = held.read(real) if held is not None and _editor_reads(ctx, real) else None
    if text is None:
        return os.fdopen(open_exact(real), "rb"), None
    data = text.encode("utf-8", errors="surrogateescape")
    return io.BytesIO(data), data


def _editor_reads(ctx: ToolContext, real: Path) -> bool:
    """Is `real` a file the editor is asked for: a regular text file (no NUL in its head on
    disk) of at most `read_file_max_bytes`? A bigger one (a log read by windows) or a binary
    one is read from the disk, never sent whole over the protocol."""
    try:
        st = os.stat(real, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode) or st.st_size > ctx.limits.read_file_max_bytes:
            return False
        with os.fdopen(open_exact(real), "rb") as f:
            return not looks_binary(f.read(ctx.limits.binary_sniff_bytes))
    except OSError:
        return False


def editor_write(ctx: ToolContext, real: Path, data: bytes, mode: int | None = None) -> bool:
    """Write `data` to `real` (a resolved, judged path) through the editor, when one holds the
    session and the write is one it can make as it is (a file of the workspace, still reached
    without a link, a regular file whose mode stays or a new one, its bytes UTF-8 text without
    a BOM; missing folders are made first, as `atomic_write` makes them). False: not written,
    the caller writes the disk (`atomic_write`)."""
    held = buffers(ctx)
    if held is None or not _editor_can_write(ctx, real, data, mode):
        return False
    os.close(open_dir(real.parent, create=True))  # folders opened one by one, never through a link
    return held.write(real, data.decode("utf-8"))


def _editor_can_write(ctx: ToolContext, real: Path, data: bytes, mode: int | None) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        st: os.stat_result | None = os.stat(real, follow_symlinks=False)
    except FileNotFoundError:
        st = None  # a new file
    except OSError:
        return False
    root = Path(os.path.realpath(ctx.workspace))
    if data.startswith(BOM) or root not in real.parents or os.path.realpath(real) != str(real):
        return False
    if st is None:
        return mode is None
    return stat.S_ISREG(st.st_mode) and (mode is None or stat.S_IMODE(mode) == stat.S_IMODE(st.st_mode))


def write_error(shown: str, e: OSError) -> ToolError:
    if swapped(e):
        return ToolError(f"cannot write {shown}: a symlink appeared in its path after it was checked; nothing was "
                         "written: check the path and try again")
    return ToolError(f"cannot write {shown}: {e.strerror or e}; check the path and its permissions")


# --------------------------------------------------------------------------------------
# what the model has seen: the stale-file guard
#
# Every read and write of a file in this session is recorded in the session state, keyed
# by real path, with the file's mtime and size (and a hash of its bytes when a tool had
# them all). A write or edit is refused when the file changed on disk since then (the
# user, an editor or a command changed it), and write_file will not replace an existing
# file the model never looked at: either would silently lose someone's change.

SEEN_KEY = "files.seen"


@dataclass(frozen=True)
class Seen:
    mtime_ns: int
    size: int
    digest: str | None  # sha256 of the bytes, when the whole file was read or written


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _seen_table(ctx: ToolContext) -> dict[str, Seen]:
    return seen_table(ctx.state)


def seen_table(state: dict[str, object]) -> dict[str, Seen]:
    """The stale-file guard's table in a session's tool state, by real path."""
    table = state.setdefault(SEEN_KEY, {})
    return table if isinstance(table, dict) else {}


def remember_file(ctx: ToolContext, real: Path, data: bytes | None = None) -> None:
    """Record that the model has seen `real` as it is now (after a read or a write)."""
    remember(ctx.state, real, data)


def remember(state: dict[str, object], real: Path, data: bytes | None = None) -> None:
    """`remember_file` on a session's tool state: also for nanohermes's own writes outside a
    tool call (a file /rewind or /undo put back counts as seen as it put it back)."""
    try:
        st = os.stat(real)
    except OSError:
        seen_table(state).pop(str(real), None)
        return
    seen_table(state)[str(real)] = Seen(st.st_mtime_ns, st.st_size, _digest(data) if data is not None else None)


def forget_seen(state: dict[str, object]) -> None:
    """Nothing the model has seen is vouched for any more (a conversation rewound to a point
    whose state is not known): it reads a file again before changing it."""
    state.pop(SEEN_KEY, None)


def forget_file(ctx: ToolContext, real: Path) -> None:
    _seen_table(ctx).pop(str(real), None)


def changed_since_seen(ctx: ToolContext, real: Path, data: bytes | None = None) -> bool | None:
    """None: not read or written in this session; True: changed on disk since; False: as seen.
    With the current bytes and a recorded hash, content decides (a `touch` is no change)."""
    seen = _seen_table(ctx).get(str(real))
    if seen is None:
        return None
    if seen.digest is not None and data is not None:
        return _digest(data) != seen.digest
    try:
        st = os.stat(real)
    except OSError:
        return True
    return (st.st_mtime_ns, st.st_size) != (seen.mtime_ns, seen.size)


def stale_error(shown: str) -> ToolError:
    return ToolError(f"{shown} changed on disk since you last read or wrote it (someone or a command changed it); "
                     "nothing was written. Read it again with read_file and redo the change on its current content")


def unread_error(shown: str) -> ToolError:
    return ToolError(f"{shown} already exists and you have not read it in this session; read it first with "
                     "read_file (then write it, or change it with edit_file)")


def guard_fresh(ctx: ToolContext, real: Path, shown: str, data: bytes | None = None, *,
                must_have_seen: bool = False) -> None:
    """Refuse to change an existing file that changed since the model saw it, or (for a
    whole replacement) one it never saw. An empty file has nothing to lose."""
    state = changed_since_seen(ctx, real, data)
    if state:
        raise stale_error(shown)
    if state is None and must_have_seen:
        try:
            empty = os.stat(real).st_size == 0
        except OSError:
            return
        if not empty:
            raise unread_error(shown)


# --------------------------------------------------------------------------------------
# diffs for people


def _range(start: int, length: int) -> str:
    # The same conventions as diff -u: "N" for one line, "N-1,0" for none.
    if length == 1:
        return str(start + 1)
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


def _diff_line(tag: str, line: str) -> str:
    if line.endswith("\n"):
        return tag + line
    return tag + line + "\n\\ No newline at end of file\n"


def unified_diff(old: str, new: str, old_name: str, new_name: str, context: int = 3) -> str:
    """A unified diff git apply accepts. The common head and tail are skipped before
    matching, so a one-line edit of a huge file costs one pass, not a quadratic match."""
    a, b = split_lines(old), split_lines(new)
    if a == b:
        return ""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    lo = max(0, head - context)
    cut = max(0, tail - context)
    a_mid, b_mid = a[lo:len(a) - cut], b[lo:len(b) - cut]
    out = [f"--- {old_name}\n", f"+++ {new_name}\n"]
    if len(a_mid) * len(b_mid) > 4_000_000:  # too big to match line by line: one hunk
        groups = [[("replace", 0, len(a_mid), 0, len(b_mid))]]
    else:
        groups = list(difflib.SequenceMatcher(None, a_mid, b_mid).get_grouped_opcodes(context))
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(lo + i1, i2 - i1)} +{_range(lo + j1, j2 - j1)} @@\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out.extend(_diff_line(" ", line) for line in a_mid[x1:x2])
                continue
            out.extend(_diff_line("-", line) for line in a_mid[x1:x2])
            out.extend(_diff_line("+", line) for line in b_mid[y1:y2])
    return "".join(out)


def diff_stat(diff: str) -> tuple[int, int]:
    """(+added, -removed) lines of one file's diff from unified_diff (its two header lines skipped)."""
    body = diff.split("\n")[2:]
    return sum(1 for ln in body if ln.startswith("+")), sum(1 for ln in body if ln.startswith("-"))


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on "\n" only (str.splitlines also splits on form feeds,
    \x1c-\x1e, \x85 and \u2028, which are ordinary characters in a source file)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def bounded_diff(diff: str, limit: int) -> str:
    return clamp(diff, limit)
