"""The session's index as a stat cache of the workspace, and the scans that keep it current.

A scan (`Scanner.scan`) asks git for the files whose stat changed since the last scan
(`diff-files`) and the new ones (`ls-files -o`), hashes and keeps only those, and returns what
changed. That costs what `git status` costs and grows with the files that changed, not with
the files that exist. A new session's index starts from the newest one of the workspace
(`seed`); a repository's first session starts from the repository's own index where its git
keeps files' bytes as they are, so even the first scan hashes only what `git status` would
find changed; the same listing that finds the new files checks that index. After a session's
first scan, `newfiles` (the workspace's folders and their times, listed in the background once
that scan is done) says where new files may be, so a scan asks git only about those.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Generic, TypeVar

from nanohermes.common.budget import Limits
from nanohermes.turn.checkpoints.gitpack import write_blobs
from nanohermes.turn.checkpoints.newfiles import RACY_NS, Folders
from nanohermes.turn.checkpoints.repository import Repository
from nanohermes.turn.checkpoints.shadow import Shadow, nul
from nanohermes.turn.checkpoints.versions import UNKEPT, Change, CheckpointError, Scan, Version
from nanohermes.common.dirs import data_home, open_private

T = TypeVar("T")

# Sessions' indexes kept in a store; an older one is removed when a new session starts.
KEPT_INDEXES = 8
# Pathspecs given to one git command at most.
_PATHSPEC_BATCH = 100
# Above this many paths, one listing of the whole index beats pathspecs (git matches each one).
_LISTED_FROM = 64
# Paths in at most this many folders are looked up in a listing of those folders alone (git
# matches every entry against each folder: past a few dozen, the whole listing costs less).
_FOLDERS_UPTO = 32
# At most this many paths are named to `rev-parse` at once (each is an argument).
_NAMED_UPTO = 1000
# Above this many files to keep, their contents go into one pack rather than a file each.
PACK_FROM = 32
# A submodule's mode as an index entry holds it (a regular expression finds it sooner than `in`).
_GITLINK = re.compile(re.escape((0o160000).to_bytes(4, "big")))
# A file the index does not hold, in `ls-files -z -v -o` (the listing after a NUL put first).
_OTHER = re.compile(rb"\0\? ([^\0]*)")


class Scanner:
    """This session's index (`shadow.index`) of the workspace: seeded, scanned, and asked what
    it holds. `grew` is told the bytes each scan kept (the store's measure of its growth)."""

    def __init__(self, shadow: Shadow, limits: Limits, skip_dirs: frozenset[str], repository: Repository | None,
                 grew: Callable[[int], None]) -> None:
        self.shadow = shadow
        self.workspace = shadow.workspace
        self.limits = limits
        self.skip_dirs = skip_dirs
        self.repository = repository
        self.grew = grew
        # nanohermes's own data (this store, the sessions) when the workspace holds it ($HOME)
        own = data_home().resolve()
        self._own = own.relative_to(self.workspace).as_posix() if own.is_relative_to(self.workspace) \
            and own != self.workspace else None
        self._prefix = str(self.workspace).rstrip(os.sep) + os.sep  # a path of the workspace, as a string
        self._root = os.geteuid() == 0  # reads every file
        self._unkept: dict[str, str] = {}  # present but not kept: path -> why
        self._folders: Folders | None = None  # the workspace's folders as the last scan found them
        self._walking: Aside[Folders] | None = None  # the first listing of them, in the background
        self._walk_from: int | None = None  # when the scan that is to list them started (they are listed after it)
        # An index seeded from the repository's, not checked yet; and whether the first listing
        # found every entry of it one a scan keeps as it is (`_plain`).
        self._seeding = False
        self._seed_plain = False
        self._seed_links = False  # the seeded index may hold a submodule (its bytes say so)
        self._converting: Aside[bool] | None = None  # whether the repository's git converts files, once asked

    # -- seeding ---------------------------------------------------------------------------
    def seed(self) -> None:
        """Start a new session's index from the newest one of this workspace: it is a stat
        cache, so the first scan hashes only what changed since (a `-p` run is a new
        session each time). Old sessions' indexes beyond a few are removed: a session that
        finds its own gone is seeded again. The first session of a workspace that is a
        repository's top folder starts from that repository's own index instead."""
        others = self.shadow.indexes()
        if others:
            # git replaces an index by renaming a finished file over it: a copy is never torn.
            with open_private(self.shadow.index, "wb", encoding=None) as f:
                f.write(others[-1].read_bytes())
        elif self.repository is not None and self.repository.top == self.workspace:
            self._seed_from(self.repository.index)
        for old in others[:-KEPT_INDEXES]:
            old.unlink(missing_ok=True)

    def _seed_from(self, index: Path) -> None:
        """The user's index as a stat cache: git already knows the hash of every tracked
        file whose stat has not changed, and its objects hold the contents, so the first scan
        hashes only what git status would find changed. That holds only where git keeps the
        file's bytes as they are: a repository whose git may convert them (attributes,
        core.autocrlf, LFS) is not used. What the index holds that a scan would not
        (submodules, unmerged or flagged entries, skipped folders) is left out, and an index
        this git cannot read as ours (a split one) is not used at all. Whether its git
        converts is asked beside the first listing, which is made again without the index
        in the rare case it does."""
        try:
            data = index.read_bytes()
        except OSError:
            return
        self._converting = Aside(self.converts)
        with open_private(self.shadow.index, "wb", encoding=None) as f:
            f.write(data)
        # Looked for by the first scan's listing of new files, which reads the index anyway
        # (`_first_untracked`); only an index it cannot vouch for is listed again (`_seeded`).
        self._seeding, self._seed_plain = True, False
        # An entry's mode is 4 bytes of the entry: a submodule's (160000) cannot be there
        # when these bytes are nowhere in the file.
        self._seed_links = _GITLINK.search(data) is not None

    def _seed_check(self) -> list[str] | None:
        """What the seeded index holds that a scan would not, to drop; None when the index
        may not be used at all (its git converts some files, or it cannot be read as ours).
        Asked only when the first listing could not vouch for every entry (`_plain`)."""
        p = self.shadow.run_git("ls-files", "-s", "-v", "-z", borrow=True)
        if p.returncode != 0:
            return None
        drop: list[str] = []
        for rec in p.stdout.split(b"\0"):
            if not rec:
                continue
            tag, _, rest = rec.partition(b" ")  # H: a plain tracked entry; lowercase or S: flagged
            meta, _, name = rest.partition(b"\t")
            mode, _, stage = meta.split(b" ")
            path = name.decode("utf-8", "surrogateescape")
            if tag != b"H" or stage != b"0" or mode == b"160000" or not self.skip_dirs.isdisjoint(path.split("/")[:-1]):
                drop.append(path)
            if path.rsplit("/", 1)[-1] == ".gitattributes":  # its git converts some files: hashed as they are
                return None
        return drop

    def _seeded(self) -> bool:
        """Apply the seeded index's check; True when it changed the index (what was listed
        from it is to be listed again)."""
        seeding, self._seeding = self._seeding, False
        converting, self._converting = self._converting, None
        if not seeding:
            return False
        if converting is not None and converting.result():
            drop: list[str] | None = None
        elif self._seed_plain and not self._seed_links:
            return False
        else:
            drop = self._seed_check()
        if drop is None:
            self.shadow.index.unlink(missing_ok=True)
        elif drop:
            self.shadow.git("update-index", "-z", "--force-remove", "--stdin", stdin=nul(drop))
        else:
            return False
        self._folders = self._walking = None
        return True

    def converts(self) -> bool:
        """Whether the user's git may store a file otherwise than as its bytes (attributes from
        any source but the tree, which the index shows; core.autocrlf)."""
        assert self.repository is not None
        common = self.repository.objects.parent
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        if any(p.exists() for p in (common / "info" / "attributes", xdg / "git" / "attributes",
                                    Path("/etc/gitattributes"))):
            return True
        p = self.shadow.run_git("config", "--get-regexp", r"^core\.(autocrlf|attributesfile)$", users=True)
        if p.returncode not in (0, 1):  # 1: none set
            return True
        return any(line.lower() != b"core.autocrlf false" for line in p.stdout.splitlines() if line.strip())

    # -- scanning --------------------------------------------------------------------------
    def scan(self) -> Scan:
        """What changed in the workspace since this index's last scan; the new contents are
        kept (the index then describes the workspace as it is). The store holds its lock."""
        fresh = not self.shadow.index.exists()
        try:
            try:
                listed: tuple[dict[str, Version], list[str]] | None = self._listings(fresh)
            except CheckpointError:
                if not self._seeding:
                    raise
                listed = None  # perhaps an index git cannot read as ours: the check says
            if self._seeded() or listed is None:
                fresh = not self.shadow.index.exists()
                listed = self._listings(fresh)
            old, new = listed
        except BaseException:
            self._folders = self._walking = self._walk_from = None  # what it learned may not be in the index
            raise
        cap = self.limits.checkpoint_max_files
        if (len(new) if fresh else self._entries() + len(new)) > cap:
            raise CheckpointError(f"the workspace has more than {cap} files "
                                  "(limits.checkpoint_max_files); checkpoints are off for it")
        keep: list[str] = []
        gone: list[str] = []
        unkept: dict[str, str] = {}
        links: dict[str, bool] = {}
        seen: dict[str, os.stat_result] = {}
        looked = time.time_ns()
        grown = 0
        candidates = sorted({*old, *new, *self._unkept})
        for path in candidates:
            # git lists no new file behind a symbolic link; an indexed one may be now
            kind, size = self._kind(path, links if path in old or path in self._unkept else None, seen)
            if kind == "keep":
                keep.append(path)
                grown += size
            elif kind == "gone":
                gone.append(path)
            else:
                unkept[path] = kind
        remove = [p for p in [*gone, *unkept] if p in old]
        if remove:
            self.shadow.git("update-index", "-z", "--force-remove", "--stdin", stdin=nul(remove))
        now = self._add(keep, unkept, _Looked(seen, looked)) if keep else {}
        changes: list[Change] = []
        for path in candidates:
            before = old.get(path) or (UNKEPT if path in self._unkept else None)
            after = now.get(path) or (UNKEPT if path in unkept else None)
            if before != after:
                changes.append(Change(path, before, after))
        fresh_unkept = [p for p in unkept if p not in self._unkept]
        for path in candidates:
            if path in unkept:
                self._unkept[path] = unkept[path]
            else:
                self._unkept.pop(path, None)
        self.grew(grown)
        self._walk()
        return Scan(tuple(changes), tuple(p for p in fresh_unkept if unkept[p] == "too big"),
                    tuple(p for p in fresh_unkept if unkept[p] == "unreadable"))

    def _listings(self, fresh: bool) -> tuple[dict[str, Version], list[str]]:
        """The index's entries whose file changed (`_stat_changed`) and the files it does not
        hold yet. The first scan of this store's session asks git for the new files
        (`_untracked`), and once it is done the workspace's folders are listed in the
        background (`newfiles.Folders`, `_walk`); later scans list again only the folders whose
        time moved, and ask git about what appeared in them alone. Each runs beside the stat of
        the indexed files: a first scan costs what git status costs, a later one less."""
        started = time.time_ns()
        folders = self._listed()
        if folders is None:
            untracked = Aside(self._first_untracked)
            old = {} if fresh else self._stat_changed()
            new, self._seed_plain = untracked.result()
            self._walk_from = started
            return old, new
        appeared = Aside(lambda: folders.news(started))
        old = {} if fresh else self._stat_changed()
        candidates = appeared.result()
        if len(candidates) > 2 * _PATHSPEC_BATCH:  # a whole new tree: git walks it once
            return old, self._untracked()
        return old, self._untracked(candidates) if candidates else []

    def _walk(self) -> None:
        """List the workspace's folders in the background, after a scan that asked git for every
        new file: only the next scan needs them, so this one does not wait for them, nor share
        the processor with them while it works."""
        started, self._walk_from = self._walk_from, None
        if started is not None:
            made = Folders(str(self.workspace), self._skipped)
            # Whenever it runs, what it lists is judged by that scan's start: a folder that
            # changed since is listed again next time, every file in it a candidate.
            self._walking = Aside(lambda: made.build(started))

    def _listed(self) -> Folders | None:
        """The folders as the last scan left them, once listed (None: not yet, or the listing failed)."""
        walking, self._walking = self._walking, None
        if walking is not None:
            try:
                self._folders = walking.result()
            except Exception:  # not listed: the next scan asks git for everything, as the first
                self._folders = None
        return self._folders

    def _skipped(self, rel: str) -> bool:
        """A folder a scan does not enter (besides repositories of their own): the skipped
        folders, and nanohermes's own data when the workspace holds it."""
        return rel.rpartition("/")[2] in self.skip_dirs or rel == self._own

    def _stat_changed(self) -> dict[str, Version]:
        """The index's entries whose file changed (or may have: git compares contents only
        for entries whose stat changed), with what the index holds for them."""
        out = self.shadow.git("diff-files", "-z", "--raw", "--no-renames").split(b"\0")
        old: dict[str, Version] = {}
        for i in range(0, len(out) - 1, 2):
            if not out[i].startswith(b":"):
                break
            meta = out[i][1:].decode("ascii").split(" ")  # old mode, new mode, old blob, new blob, status
            old[out[i + 1].decode("utf-8", "surrogateescape")] = Version(meta[0], meta[2])
        return old

    def _untracked(self, among: list[str] | None = None) -> list[str]:
        """Files the index does not hold yet (`among`: of these paths alone, a folder's as
        `path/`), skipped folders left out. A folder holding a repository of its own is listed
        as `name/` by git and not entered: left out too."""
        args = self._others_args()
        if among is not None:
            args += ["--", *among]
        return [p for p in self.shadow.text(*args).split("\0") if p and not p.endswith("/")]

    def _others_args(self) -> list[str]:
        """`ls-files` listing the files the index does not hold, skipped folders left out."""
        args = ["ls-files", "-z", "-o", *(f"--exclude={_glob_escape(d)}/" for d in sorted(self.skip_dirs))]
        if self._own:
            args.append(f"--exclude=/{_glob_escape(self._own)}/")
        return args

    def _first_untracked(self) -> tuple[list[str], bool]:
        """Every file the index does not hold yet (`_untracked`), and whether the index is one
        a scan may take as it is. Of an index just seeded from the repository's, the same
        listing names every entry with its tag, so that one reading of the index also checks
        it (`_plain`); any other index is the session's own."""
        if not self._seeding:
            return self._untracked(), True
        out = self.shadow.git(*self._others_args(), "-c", "-v")
        return ([p.decode("utf-8", "surrogateescape") for p in _OTHER.findall(b"\0" + out) if not p.endswith(b"/")],
                self._plain(out))

    def _plain(self, listing: bytes) -> bool:
        """Whether every entry of this listing (`ls-files -z -v -c -o`) is one a scan keeps as
        it is: tagged H (not unmerged, skipped or assumed unchanged), in no skipped folder,
        and no `.gitattributes` among them. Counted and looked up in C, not entry by entry;
        a name that only looks like a skipped folder or `.gitattributes` sends the index to
        the exact check (`_seed_check`)."""
        records = listing.count(b"\0")
        tagged = sum(listing.count(b"\0" + tag) + listing.startswith(tag) for tag in (b"H ", b"? "))
        if tagged != records:
            return False
        below, top = _named(self.skip_dirs)
        return below.search(listing) is None and top.search(b"\0" + listing) is None

    def _kind(self, path: str, links: dict[str, bool] | None, seen: dict[str, os.stat_result]) -> tuple[str, int]:
        """("keep", size), ("gone", 0) or (why it is not kept, 0). `links`: check that no
        folder on the way is a symbolic link (git does not follow one to a folder: nor do we).
        `seen` is given the stat of a file to keep."""
        if links is not None and beyond_link(self.workspace, path, links):
            return "gone", 0
        try:
            st = os.lstat(f"{self._prefix}{path}")
        except OSError:
            return "gone", 0
        if stat.S_ISLNK(st.st_mode):
            seen[path] = st
            return "keep", 0
        if not stat.S_ISREG(st.st_mode):
            return "gone", 0  # a folder where the file was, a socket, a fifo
        if st.st_size > self.limits.checkpoint_file_max_bytes:
            return "too big", 0
        if not (self._root or _readable(st)):
            return "unreadable", 0
        seen[path] = st
        return "keep", st.st_size

    def _add(self, paths: list[str], unkept: dict[str, str], looked: _Looked) -> dict[str, Version]:
        """Hash these files into the index and keep their contents; returns their entries.
        A few are simply copied into the store. Many (a first scan, a checkout) are hashed
        "info only" first, and only the contents neither the store nor the user's repository
        holds are kept, written together into one pack (`gitpack`): their cost follows their
        bytes, not their number. Nothing is written to the user's repository, not even its
        objects' times. A file that became unreadable since it was looked at is left out,
        not the scan."""
        if len(paths) <= PACK_FROM:
            return self._hashed(self._update(paths, unkept), looked)
        kept = self._update(paths, unkept, "--info-only")
        found = self._hashed(kept, looked)
        lost = self.shadow.unheld(sorted({v.blob for v in found.values()}), borrow=True)
        if lost:
            wanted = {p: v for p, v in found.items() if v.blob in lost}
            packed = write_blobs(self.shadow.git_dir / "objects" / "pack",
                                 ((v.blob, self._content(p, v)) for p, v in sorted(wanted.items())))
            # Changed again since git hashed it (or unreadable now): hashed and kept afresh.
            again = [p for p, v in wanted.items() if v.blob not in packed]
            if again:
                self.shadow.git("update-index", "-z", "--force-remove", "--stdin", stdin=nul(again))  # or git keeps its hash
                found.update(self._entries_of(self._update(again, unkept)))
        return found

    def _hashed(self, paths: list[str], looked: _Looked) -> dict[str, Version]:
        """What git has just hashed into the index for these files. When none of them changed
        from the scan's look before git's to one after it, git read what the scan saw: the
        index names their contents (`rev-parse`, a lookup by path, where a listing filtered by
        pathspecs matches every entry against every path) and their stat gives their modes, as
        git derives them. Otherwise (a file written while the scan runs, or shortly before:
        a turn's new files) they are read from the index's listing (`_entries_of`)."""
        if not paths or len(paths) > _NAMED_UPTO or not all(looked.still(self._prefix, p) for p in paths):
            return self._entries_of(paths)
        p = self.shadow.run_git("rev-parse", *(f":0:{path}" for path in paths))
        names = p.stdout.split()
        if p.returncode != 0 or len(names) != len(paths):  # one left the index (gone since)
            return self._entries_of(paths)
        return {path: Version(_mode(looked.seen[path]), name.decode("ascii"))
                for path, name in zip(paths, names, strict=True)}

    def _content(self, path: str, version: Version) -> bytes | None:
        """The bytes git hashed for `path` as `version`: a symbolic link's target, or the file's
        content (never through a link that replaced it since); None when it cannot be read."""
        full = f"{self._prefix}{path}"
        try:
            if version.mode == "120000":
                return os.fsencode(os.readlink(full))
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, "rb") as f:
                return f.read(self.limits.checkpoint_file_max_bytes + 1)
        except OSError:
            return None

    def _update(self, paths: list[str], unkept: dict[str, str], *flags: str) -> list[str]:
        args = ("update-index", "-z", "--add", "--remove", "--replace", *flags, "--stdin")
        if self.shadow.run_git(*args, stdin=nul(paths)).returncode == 0:
            return paths
        kept: list[str] = []
        for path in paths:  # rare: find the one git could not read
            if self.shadow.run_git(*args, stdin=nul([path])).returncode == 0:
                kept.append(path)
            else:
                unkept[path] = "unreadable"
        return kept

    def _entries(self) -> int:
        """How many entries the index holds (its header says)."""
        try:
            with open(self.shadow.index, "rb") as f:
                head = f.read(12)
        except OSError:
            return 0
        return int.from_bytes(head[8:12], "big") if head[:4] == b"DIRC" else 0

    def _entries_of(self, paths: list[str], index: Path | None = None) -> dict[str, Version]:
        """What the index holds for these paths. Past a few dozen, git lists the whole index
        once (or their few folders) and each path is looked up in the listing (git matches
        every entry against every path given as a pathspec)."""
        if not paths:
            return {}
        if len(paths) > _LISTED_FROM:
            # In a few folders (a formatter over one package): only theirs are listed.
            folders = {p.rpartition("/")[0] for p in paths}
            among = ("--", *sorted(folders)) if len(folders) <= _FOLDERS_UPTO and "" not in folders else ()
            return _looked_up(self.shadow.git("ls-files", "-s", "-z", *among, index=index), paths)
        want = set(paths)
        out = b"".join(self.shadow.git("ls-files", "-s", "-z", "--", *paths[i:i + _PATHSPEC_BATCH], index=index)
                       for i in range(0, len(paths), _PATHSPEC_BATCH))
        found: dict[str, Version] = {}
        for rec in out.split(b"\0"):
            if not rec:
                continue
            meta, _, name = rec.partition(b"\t")
            path = name.decode("utf-8", "surrogateescape")
            if path in want:
                mode, blob, _stage = meta.decode("ascii").split(" ")
                found[path] = Version(mode, blob)
        return found

    def versions(self, paths: Iterable[str]) -> dict[str, Version | None]:
        """What the index holds for these paths now (after a scan: the workspace's contents)."""
        wanted = sorted(set(paths))
        found = self._entries_of(wanted)
        return {p: found.get(p) or (UNKEPT if p in self._unkept else None) for p in wanted}


@dataclass(frozen=True)
class _Looked:
    """The stat a scan took of each file to keep (`seen`) before git hashed them, and when
    it began taking them (`at`, nanoseconds)."""

    seen: dict[str, os.stat_result]
    at: int

    def still(self, prefix: str, path: str) -> bool:
        """Whether `path` is as it was seen, and was then last changed well before: any change
        since (its bytes, its mode, a file renamed over it) would have moved its ctime to the
        time of the change, later than the one seen. One within `RACY_NS` before the look
        might have left it in the same tick of the clock: not trusted."""
        before = self.seen.get(path)
        if before is None or max(before.st_ctime_ns, before.st_mtime_ns) >= self.at - RACY_NS:
            return False  # (a file system may keep no ctime that moves: its mtime counts too)
        try:
            now = os.lstat(f"{prefix}{path}")
        except OSError:
            return False
        return (now.st_ino, now.st_dev, now.st_mode, now.st_size, now.st_mtime_ns, now.st_ctime_ns) == \
            (before.st_ino, before.st_dev, before.st_mode, before.st_size, before.st_mtime_ns, before.st_ctime_ns)


def _mode(st: os.stat_result) -> str:
    """The mode git gives a file of this stat in the index (file modes and symbolic links kept)."""
    if stat.S_ISLNK(st.st_mode):
        return "120000"
    return "100755" if st.st_mode & stat.S_IXUSR else "100644"


def _readable(st: os.stat_result) -> bool:
    """Whether this process (not root) may read the file: the permission bits, as the kernel
    checks them, without a call per file."""
    uid = os.geteuid()
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IRUSR)
    if st.st_gid in _groups():
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)


@cache
def _groups() -> frozenset[int]:
    return frozenset([os.getegid(), *os.getgroups()])


def beyond_link(root: Path, path: str, cache: dict[str, bool]) -> bool:
    """Whether a folder on the way to `path` is a symbolic link (`cache`: what was found of
    each folder, for the next path)."""
    parts = path.split("/")[:-1]
    for i in range(len(parts)):
        folder = "/".join(parts[:i + 1])
        if folder not in cache:
            try:
                cache[folder] = stat.S_ISLNK(os.lstat(root / folder).st_mode)
            except OSError:
                cache[folder] = False  # missing, or a file in the way: said where it matters
        if cache[folder]:
            return True
    return False


def _looked_up(listing: bytes, paths: Iterable[str]) -> dict[str, Version]:
    """The entries of these paths in the `ls-files -s -z` listing of a whole index, which
    lists them sorted by their bytes (as git keeps them): each found by bisection, unless
    they are so many that reading every entry once costs less."""
    records = listing.split(b"\0")
    if records and not records[-1]:
        records.pop()
    found: dict[str, Version] = {}
    paths = list(paths)
    if len(paths) * len(records).bit_length() > len(records):  # most of the index: read once, in order
        want = {p.encode("utf-8", "surrogateescape"): p for p in paths}
        for rec in records:
            meta, _, name = rec.partition(b"\t")
            if name in want:
                mode, blob, _stage = meta.decode("ascii").split(" ")
                found[want[name]] = Version(mode, blob)
        return found
    for path in paths:
        name = path.encode("utf-8", "surrogateescape")
        i = bisect.bisect_left(records, name, key=_name_of)
        while i < len(records) and _name_of(records[i]) == name:  # an unmerged path's last stage
            mode, blob, _stage = records[i].partition(b"\t")[0].decode("ascii").split(" ")
            found[path] = Version(mode, blob)
            i += 1
    return found


def _name_of(record: bytes) -> bytes:
    return record.partition(b"\t")[2]


@cache
def _named(skip_dirs: frozenset[str]) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """A path in an `ls-files -z -v` listing with one of these folders on its way, or named
    `.gitattributes`: below the top folder (after a slash), and at the top (after the tag of
    an entry, with a NUL put before the listing). Each starts with a fixed string, which the
    regular expression engine looks for quickly."""
    folders = b"|".join(re.escape(os.fsencode(d)) for d in sorted(skip_dirs, key=len, reverse=True))
    name = rb"(?:\.gitattributes\0" + (rb"|(?:" + folders + rb")/" if folders else b"") + rb")"
    return re.compile(b"/" + name), re.compile(rb"\0[H?] " + name)


def _glob_escape(name: str) -> str:
    return "".join("\\" + c if c in "*?[]\\!#" else c for c in name)


class Aside(Generic[T]):
    """`fn()` run in a thread of its own while the caller does something else; `result()`
    waits for it and returns what it returned, or raises what it raised."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._out: list[T] = []
        self._err: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="checkpoint-scan", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._out.append(self._fn())
        except BaseException as e:  # handed to the caller, whatever it is
            self._err.append(e)

    def result(self) -> T:
        self._thread.join()
        if self._err:
            raise self._err[0]
        return self._out[0]
