"""Which files may be new in a workspace since it was last looked at, told by its folders' times.

A folder's modification and change times move whenever an entry is added to it, removed or
renamed, so a folder whose times have not moved since it was listed holds no new file. The change
time counts because nothing sets it back: a command that puts a folder's modification time back
after making a file in it does not hide the file. `Folders` lists every
folder of the workspace once (`build`), and later (`news`) reads only the time of each folder,
listing again only the folders whose time moved: the files and folders that appeared in them
are the candidates, which git then sorts into new or already known. That is git's own
untracked cache, for a walk git's cache does not serve (checkpoints keep ignored files too).

A folder whose time was within `RACY_NS` of the scan, or moved while it was read, is "racy":
a change in the same tick of the clock may leave its time where it was, and what was read of
it may not be what git saw. It is listed again next time whatever its time says, and then
every file in it is a candidate, not only the new names. The folders never
entered: `.git`, a folder holding a repository of its own (git lists it as one entry and does
not go in), the folders `skip` names, and symbolic links (git does not follow them).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass

# A folder whose time is this close to when it was listed is listed again next time: file
# systems keep times in ticks (a few milliseconds, a second on some), and two changes in one
# tick leave the same time.
RACY_NS = 3_000_000_000


@dataclass(frozen=True)
class _Seen:
    mtime: int
    ctime: int
    ino: int
    files: frozenset[str]
    folders: frozenset[str]
    settled: bool  # not racy: its time was older than RACY_NS, and did not move while it was read


class Folders:
    """The folders of the workspace at `root` as last listed. `skip(rel)`: a folder (its path
    from the root, with forward slashes) not to enter."""

    def __init__(self, root: str, skip: Callable[[str], bool]) -> None:
        self.root = os.path.join(root, "")
        self.skip = skip
        self.seen: dict[str, _Seen] = {}

    def build(self, started_ns: int) -> Folders:
        """List every folder (`started_ns`: when the scan this belongs to started); returns itself."""
        self.seen = {}
        self._enter("", started_ns)
        return self

    def news(self, started_ns: int) -> list[str]:
        """The files and folders that appeared since the last listing (a folder as `path/`,
        every file in it new too), each folder whose time moved listed again."""
        out: list[str] = []
        for rel in list(self.seen):
            seen = self.seen.get(rel)
            if seen is None:  # below a folder found gone or replaced in this pass
                continue
            try:
                st = os.lstat(self.root + rel if rel else self.root)
            except OSError:
                self._forget(rel)
                continue
            if seen.settled and (st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (seen.mtime, seen.ctime, seen.ino):
                continue
            if not stat.S_ISDIR(st.st_mode):
                self._forget(rel)
                continue
            now = self._list(rel, st, started_ns)
            if now is None:
                self._forget(rel)
                continue
            out += [_join(rel, name) for name in sorted(now.files - seen.files if seen.settled else now.files)]
            for name in sorted(now.folders - seen.folders):
                out.append(_join(rel, name) + "/")
                self._enter(_join(rel, name), started_ns)
            for name in seen.folders - now.folders:
                self._forget(_join(rel, name))
        return out

    def _enter(self, rel: str, started_ns: int) -> None:
        """List `rel` and every folder below it."""
        todo = [rel]
        while todo:
            folder = todo.pop()
            try:
                st = os.lstat(self.root + folder if folder else self.root)
            except OSError:
                continue
            seen = self._list(folder, st, started_ns)
            if seen is not None:
                todo += [_join(folder, name) for name in seen.folders]

    def _list(self, rel: str, st: os.stat_result, started_ns: int) -> _Seen | None:
        """Read folder `rel` (whose stat, taken before, is `st`) and keep what it holds."""
        files: list[str] = []
        folders: list[str] = []
        try:
            with os.scandir(self.root + rel if rel else self.root) as it:
                for e in it:
                    if e.name == ".git":
                        continue
                    if not e.is_dir(follow_symlinks=False):
                        files.append(e.name)
                    elif _join(rel, e.name) in self.seen or not self._skipped(_join(rel, e.name), e.path):
                        # One entered before stays entered when it becomes a repository: git goes
                        # on listing new files in a folder whose files its index holds.
                        folders.append(e.name)
            after = os.lstat(self.root + rel if rel else self.root)
        except OSError:
            return None
        settled = (after.st_mtime_ns, after.st_ctime_ns) == (st.st_mtime_ns, st.st_ctime_ns) \
            and max(st.st_mtime_ns, st.st_ctime_ns) < started_ns - RACY_NS
        seen = _Seen(st.st_mtime_ns, st.st_ctime_ns, st.st_ino, frozenset(files), frozenset(folders), settled)
        self.seen[rel] = seen
        return seen

    def _skipped(self, rel: str, path: str) -> bool:
        return self.skip(rel) or _nested_repository(path)

    def _forget(self, rel: str) -> None:
        """`rel` is gone (or no folder now): it and every folder below it."""
        if not rel:
            self.seen = {}
            return
        below = rel + "/"
        for key in [k for k in self.seen if k == rel or k.startswith(below)]:
            del self.seen[key]


def _nested_repository(folder: str) -> bool:
    """Whether git surely takes `folder` for a repository of its own, which its listing of new
    files does not enter: its `.git` is a git folder (or a `gitdir:` file naming one) as git
    checks one, `HEAD` naming a ref or a commit beside `objects/` and `refs/`. Any other `.git`
    (a stray file, an empty folder, a worktree's, a link) is entered: git enters the folder or
    drops what it finds there when asked about it, and a turn cannot hide files behind a `.git`
    git does not believe in."""
    entry = os.path.join(folder, ".git")
    try:
        st = os.lstat(entry)
        if stat.S_ISDIR(st.st_mode):
            return _git_folder(entry)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
            return False
        with open(entry, "rb") as f:
            text = f.read(4096)
    except OSError:
        return False
    named = text.rstrip(b"\r\n")  # as git reads it: only line ends are trimmed
    if not named.startswith(b"gitdir: ") or b"\0" in named or len(named) == len(b"gitdir: "):
        return False
    return _git_folder(os.path.join(folder, os.fsdecode(named[len(b"gitdir: "):])))


def _git_folder(path: str) -> bool:
    """A git folder as git checks one (`HEAD` naming a ref or a commit, `objects/`, `refs/`),
    without a `commondir` (a worktree's: not vouched for here)."""
    try:
        if os.path.lexists(os.path.join(path, "commondir")):
            return False
        if not all(os.access(os.path.join(path, d), os.X_OK) and os.path.isdir(os.path.join(path, d))
                   for d in ("objects", "refs")):
            return False
        head = os.path.join(path, "HEAD")
        if os.path.islink(head):
            return os.readlink(head).startswith("refs/")
        with open(head, "rb") as f:
            text = f.read(256)
    except OSError:
        return False
    if text.startswith(b"ref:"):
        return text[4:].lstrip().startswith(b"refs/")
    return re.fullmatch(rb"(?:[0-9a-f]{40}|[0-9a-f]{64})\s*", text) is not None


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


__all__ = ["RACY_NS", "Folders"]
