"""Checkpoints: what each turn changed in the workspace's files, with the contents before and
after, so /undo, /rewind and /redo put back exactly that, and nothing the person did.

A shadow git repository per workspace lives in nanohermes's data folder
(`$XDG_DATA_HOME/nanohermes/checkpoints/<project>/`): git runs with its own GIT_DIR, its own
index per session and the workspace as GIT_WORK_TREE, with no global or system config, no
hooks and no attributes (so contents are kept and restored byte for byte). The user's `.git`
is never written; when the workspace is in a repository, its objects are read (as git's
alternates), so a file that matches a blob the repository already has costs no copy.

The session's index is a stat cache of the workspace: a scan (`Store.scan`) asks git for the
files whose stat changed since the last scan (`diff-files`) and the new ones (`ls-files -o`),
hashes and keeps only those, and returns what changed. That costs what `git status` costs and
grows with the files that changed, not with the files that exist; a repository's first
session starts from the repository's own index where its git keeps files' bytes as they are,
so even the first scan hashes only what `git status` would find changed. A scan before each turn
takes in whatever the person did between turns; the scan after it is the turn's own changes,
recorded with both contents (copied into the store, so they outlive the user's repository)
in the session's `checkpoints.jsonl`. Undoing puts back only those paths: a path whose
content changed since the turn is the person's, and they choose (keep theirs, take the
checkpoint's, or merge both); a file the turn did not create is never deleted. What an undo
replaced is recorded the same way, so /redo brings it back.

Every file is kept, untracked and git-ignored ones too, except `.git` entries, the
dependency and cache folders grep skips (build outputs such as `build/` and `dist/` are
kept), folders holding a repository of their own, and files over `checkpoint_file_max_bytes`
(named in a note, and left alone by an undo). The store is pruned, oldest checkpoints first,
when it outgrows `checkpoint_store_bytes`.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import os
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from nanohermes import gitpack, newfiles, programs
from nanohermes.budget import Limits, plural
from nanohermes.dirs import data_home, open_private, private_dir, write_private
from nanohermes.events import Event, FilesChanged, Notice
from nanohermes.gitmeta import moved_work_tree
from nanohermes.messages import Message
from nanohermes.programs import GIT_OWN
from nanohermes.session import saved_state, state_of

if TYPE_CHECKING:
    from nanohermes.runs_later import Startup
    from nanohermes.session import Session

T = TypeVar("T")

REF_PREFIX = "refs/nanohermes/checkpoints/"
STATE_REF = "refs/nanohermes/state"  # the contents the sessions' indexes name, kept through a prune
_GIT_CONFIG = (*GIT_OWN, "-c", "core.autocrlf=false",
               "-c", "core.safecrlf=false", "-c", "core.symlinks=true", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
               "-c", "core.quotepath=off", "-c", "core.untrackedCache=false", "-c", "core.splitIndex=false",
               "-c", "core.trustctime=true", "-c", "core.checkStat=default", "-c", "core.filemode=true",
               # The store holds copies of the workspace's files: owner-only, whatever the umask.
               "-c", "core.sharedRepository=0600")
# info/attributes wins over every .gitattributes of the workspace: no line-ending or filter changes.
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"
# Build outputs a person may also keep files in: checkpointed, though grep skips them.
KEPT_OUTPUT_DIRS = frozenset({"build", "dist"})
# Above this many paths, one listing of the whole index beats pathspecs (git matches each one).
_PATHSPEC_BATCH = 100
# Above this many files to keep, their contents go into one pack rather than a file each.
_PACK_FROM = 32
_DIFF_LINES = 40  # lines of a conflict's diff shown before the question


class CheckpointError(Exception):
    pass


@dataclass(frozen=True)
class Version:
    """A path's content: git's mode and blob. `blob` "" means present but not kept (too big
    or unreadable)."""

    mode: str
    blob: str

    @property
    def kept(self) -> bool:
        return bool(self.blob)

    @property
    def regular(self) -> bool:
        return self.mode in ("100644", "100755")


UNKEPT = Version("", "")


@dataclass(frozen=True)
class Change:
    path: str
    before: Version | None  # None: the path did not exist
    after: Version | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "before": _encode(self.before), "after": _encode(self.after)}

    @staticmethod
    def from_json(rec: dict[str, Any]) -> Change:
        return Change(str(rec["path"]), _decode(rec["before"]), _decode(rec["after"]))


def _encode(v: Version | None) -> str | None:
    return None if v is None else (f"{v.mode} {v.blob}" if v.kept else "")


def _decode(s: Any) -> Version | None:
    if s is None:
        return None
    if not isinstance(s, str):
        raise ValueError("not a version")
    if not s:
        return UNKEPT
    mode, blob = s.split(" ", 1)
    return Version(mode, blob)


@dataclass(frozen=True)
class Scan:
    changes: tuple[Change, ...]
    too_big: tuple[str, ...] = ()  # present and not kept, first seen by this scan
    unreadable: tuple[str, ...] = ()


def store_dir(workspace: Path) -> Path:
    from nanohermes.session import project_key

    return data_home() / "checkpoints" / project_key(workspace)


def skipped_dirs(grep_skips: Iterable[str]) -> frozenset[str]:
    """The folders a checkpoint does not keep: grep's dependency and cache folders, not the
    build outputs people also write by hand."""
    return frozenset(grep_skips) - KEPT_OUTPUT_DIRS


# Sessions' indexes kept in a store; an older one is removed when a new session starts.
KEPT_INDEXES = 8


class Store:
    """The shadow repository of one workspace, and this session's index (its stat cache)."""

    def __init__(self, workspace: Path, limits: Limits, skip_dirs: frozenset[str], session: str = "default") -> None:
        self.workspace = workspace.resolve()
        self.limits = limits
        self.skip_dirs = skip_dirs
        self.root = store_dir(self.workspace)
        self.git_dir = self.root / "git"
        # A session's own index (its stat cache); a session not recorded gets one for this process.
        self.ephemeral = not session
        self.index = self.root / f"index-{_safe(session) if session else f'pid{os.getpid()}'}"
        # One git command at a time on the session's index, whichever thread asks.
        self.lock = threading.RLock()
        self._fresh = True
        # nanohermes's own data (this store, the sessions) when the workspace holds it ($HOME)
        own = data_home().resolve()
        self._own = own.relative_to(self.workspace).as_posix() if own.is_relative_to(self.workspace) \
            and own != self.workspace else None
        self.repository = repository(self.workspace)  # only read: its objects, and at first its index
        self.borrowed = str(self.repository.objects) if self.repository is not None else None
        self._prefix = str(self.workspace).rstrip(os.sep) + os.sep  # a path of the workspace, as a string
        self._root = os.geteuid() == 0  # reads every file
        self._unkept: dict[str, str] = {}  # present but not kept: path -> why
        self._folders: newfiles.Folders | None = None  # the workspace's folders as the last scan found them
        self._walking: _Aside[newfiles.Folders] | None = None  # the first listing of them, in the background
        self._seeding: _Aside[list[str] | None] | None = None  # the check of an index seeded from the repository's
        self._measured: int | None = None  # the store's bytes on disk when last measured
        self._grown = 0  # at most this many bytes kept since

    # -- git -------------------------------------------------------------------------------
    def git(self, *args: str, stdin: bytes | None = None, check: bool = True, index: Path | None = None,
            borrow: bool = False) -> bytes:
        p = self.run_git(*args, stdin=stdin, index=index, borrow=borrow)
        if check and p.returncode != 0:
            raise CheckpointError(f"git {args[0]} failed: {p.stderr.decode('utf-8', 'replace').strip()[:300]}")
        return p.stdout

    def text(self, *args: str, **kw: Any) -> str:
        return self.git(*args, **kw).decode("utf-8", "surrogateescape")

    def run_git(self, *args: str, stdin: bytes | None = None, index: Path | None = None,
                borrow: bool = False, users: bool = False) -> subprocess.CompletedProcess[bytes]:
        """Every git command of the store runs here. `borrow`: the user's repository's objects
        may be read too; `index`: another index than the session's; `users`: a question to
        the user's repository itself (what its config says), with the person's settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        if users:  # the person's global and system config apply, no program runs (GIT_OWN)
            env.update(GIT_TERMINAL_PROMPT="0")
            config = GIT_OWN
        else:  # none of the user's git settings apply (no GIT_* variable, no global or system config)
            env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.workspace),
                       GIT_INDEX_FILE=str(index or self.index), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                       GIT_LITERAL_PATHSPECS="1", GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="nanohermes",
                       GIT_AUTHOR_EMAIL="nanohermes@localhost", GIT_COMMITTER_NAME="nanohermes",
                       GIT_COMMITTER_EMAIL="nanohermes@localhost")
            if borrow and self.borrowed:
                env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = _quoted(self.borrowed)
            config = _GIT_CONFIG
        try:
            return subprocess.run([programs.git(), *config, *args], input=stdin, capture_output=True, env=env,
                                  cwd=self.workspace, timeout=600)
        except FileNotFoundError:
            raise CheckpointError("git was not found on PATH (checkpoints need it; install git)") from None
        except subprocess.TimeoutExpired:
            raise CheckpointError(f"git {args[0]} took more than 600 s") from None

    def _init(self) -> None:
        if (self.git_dir / "HEAD").exists():
            if self._fresh:
                self._fresh = False
                # Only this process uses this session's index (the transcript is locked), so a
                # lock file left by a process that was killed mid-scan is stale.
                self.index.with_name(self.index.name + ".lock").unlink(missing_ok=True)
                if not self.index.exists():
                    self._seed_index()
            return
        self._fresh = False
        private_dir(self.root)
        self.git("init", "-q", "--template=")
        write_private(private_dir(self.git_dir / "info") / "attributes", _ATTRIBUTES)
        self._seed_index()

    def _seed_index(self) -> None:
        """Start a new session's index from the newest one of this workspace: it is a stat
        cache, so the first scan hashes only what changed since (a `-p` run is a new
        session each time). Old sessions' indexes beyond a few are removed: a session that
        finds its own gone is seeded again. The first session of a workspace that is a
        repository's top folder starts from that repository's own index instead."""
        others = self._indexes()
        if others:
            # git replaces an index by renaming a finished file over it: a copy is never torn.
            with open_private(self.index, "wb", encoding=None) as f:
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
        this git cannot read as ours (a split one) is not used at all."""
        if self.converts():
            return
        try:
            data = index.read_bytes()
        except OSError:
            return
        with open_private(self.index, "wb", encoding=None) as f:
            f.write(data)
        # Looked for beside the first scan's listings (`_seeded`), which rarely need it.
        self._seeding = _Aside(self._seed_check)

    def _seed_check(self) -> list[str] | None:
        """What the seeded index holds that a scan would not, to drop; None when the index
        may not be used at all (its git converts some files, or it cannot be read as ours)."""
        p = self.run_git("ls-files", "-s", "-v", "-z", borrow=True)
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
        seeding, self._seeding = self._seeding, None
        if seeding is None:
            return False
        drop = seeding.result()
        if drop is None:
            self.index.unlink(missing_ok=True)
        elif drop:
            self.git("update-index", "-z", "--force-remove", "--stdin", stdin=_nul(drop))
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
        p = self.run_git("config", "--get-regexp", r"^core\.(autocrlf|attributesfile)$", users=True)
        if p.returncode not in (0, 1):  # 1: none set
            return True
        return any(line.lower() != b"core.autocrlf false" for line in p.stdout.splitlines() if line.strip())

    def _indexes(self) -> list[Path]:
        """The sessions' indexes of this workspace, oldest first."""
        def mtime(p: Path) -> int:
            try:
                return p.stat().st_mtime_ns
            except OSError:
                return 0
        return sorted((p for p in self.root.glob("index-*") if not p.name.endswith(".lock")), key=mtime)

    # -- scanning --------------------------------------------------------------------------
    def scan(self) -> Scan:
        """What changed in the workspace since this index's last scan; the new contents are
        kept (the index then describes the workspace as it is)."""
        with self.lock:
            return self._scan()

    def _scan(self) -> Scan:
        self._init()
        fresh = not self.index.exists()
        try:
            try:
                listed: tuple[dict[str, Version], list[str]] | None = self._listings(fresh)
            except CheckpointError:
                if self._seeding is None:
                    raise
                listed = None  # perhaps an index git cannot read as ours: the check says
            if self._seeded() or listed is None:
                fresh = not self.index.exists()
                listed = self._listings(fresh)
            old, new = listed
        except BaseException:
            self._folders = self._walking = None  # what it learned may not be in the index: listed afresh
            raise
        cap = self.limits.checkpoint_max_files
        if (len(new) if fresh else self._entries() + len(new)) > cap:
            raise CheckpointError(f"the workspace has more than {cap} files "
                                  "(limits.checkpoint_max_files); checkpoints are off for it")
        keep: list[str] = []
        gone: list[str] = []
        unkept: dict[str, str] = {}
        links: dict[str, bool] = {}
        grown = 0
        candidates = sorted({*old, *new, *self._unkept})
        for path in candidates:
            # git lists no new file behind a symbolic link; an indexed one may be now
            kind, size = self._kind(path, links if path in old or path in self._unkept else None)
            if kind == "keep":
                keep.append(path)
                grown += size
            elif kind == "gone":
                gone.append(path)
            else:
                unkept[path] = kind
        remove = [p for p in [*gone, *unkept] if p in old]
        if remove:
            self.git("update-index", "-z", "--force-remove", "--stdin", stdin=_nul(remove))
        now = self._add(keep, unkept) if keep else {}
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
        self._grown += grown
        return Scan(tuple(changes), tuple(p for p in fresh_unkept if unkept[p] == "too big"),
                    tuple(p for p in fresh_unkept if unkept[p] == "unreadable"))

    def _listings(self, fresh: bool) -> tuple[dict[str, Version], list[str]]:
        """The index's entries whose file changed (`_stat_changed`) and the files it does not
        hold yet. The first scan of this store's session asks git for the new files
        (`_untracked`), and then lists the workspace's folders in the background
        (`newfiles.Folders`); later scans list again only the folders whose time moved, and
        ask git about what appeared in them alone. Each runs beside the stat of the indexed
        files: a first scan costs what git status costs, a later one less."""
        started = time.time_ns()
        folders = self._listed()
        if folders is None:
            untracked = _Aside(self._untracked)
            old = {} if fresh else self._stat_changed()
            new = untracked.result()
            made = newfiles.Folders(str(self.workspace), self._skipped)
            # Whenever it runs, what it lists is judged by this scan's start: a folder that
            # changed since is listed again next time, every file in it a candidate.
            self._walking = _Aside(lambda: made.build(started))
            return old, new
        appeared = _Aside(lambda: folders.news(started))
        old = {} if fresh else self._stat_changed()
        candidates = appeared.result()
        if len(candidates) > 2 * _PATHSPEC_BATCH:  # a whole new tree: git walks it once
            return old, self._untracked()
        return old, self._untracked(candidates) if candidates else []

    def _listed(self) -> newfiles.Folders | None:
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
        out = self.git("diff-files", "-z", "--raw", "--no-renames").split(b"\0")
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
        args = ["ls-files", "-z", "-o", *(f"--exclude={_glob_escape(d)}/" for d in sorted(self.skip_dirs))]
        if self._own:
            args.append(f"--exclude=/{_glob_escape(self._own)}/")
        if among is not None:
            args += ["--", *among]
        return [p for p in self.text(*args).split("\0") if p and not p.endswith("/")]

    def _kind(self, path: str, links: dict[str, bool] | None) -> tuple[str, int]:
        """("keep", size), ("gone", 0) or (why it is not kept, 0). `links`: check that no
        folder on the way is a symbolic link (git does not follow one to a folder: nor do we)."""
        if links is not None and _beyond_link(self.workspace, path, links):
            return "gone", 0
        try:
            st = os.lstat(f"{self._prefix}{path}")
        except OSError:
            return "gone", 0
        if stat.S_ISLNK(st.st_mode):
            return "keep", 0
        if not stat.S_ISREG(st.st_mode):
            return "gone", 0  # a folder where the file was, a socket, a fifo
        if st.st_size > self.limits.checkpoint_file_max_bytes:
            return "too big", 0
        if not (self._root or _readable(st)):
            return "unreadable", 0
        return "keep", st.st_size

    def _add(self, paths: list[str], unkept: dict[str, str]) -> dict[str, Version]:
        """Hash these files into the index and keep their contents; returns their entries.
        A few are simply copied into the store. Many (a first scan, a checkout) are hashed
        "info only" first, and only the contents neither the store nor the user's repository
        holds are kept, written together into one pack (`gitpack`): their cost follows their
        bytes, not their number. Nothing is written to the user's repository, not even its
        objects' times. A file that became unreadable since it was looked at is left out,
        not the scan."""
        if len(paths) <= _PACK_FROM:
            return self._entries_of(self._update(paths, unkept))
        kept = self._update(paths, unkept, "--info-only")
        found = self._entries_of(kept)
        lost = self._missing(sorted({v.blob for v in found.values()}), borrow=True)
        if lost:
            wanted = {p: v for p, v in found.items() if v.blob in lost}
            packed = gitpack.write_blobs(self.git_dir / "objects" / "pack",
                                         ((v.blob, self._content(p, v)) for p, v in sorted(wanted.items())))
            # Changed again since git hashed it (or unreadable now): hashed and kept afresh.
            again = [p for p, v in wanted.items() if v.blob not in packed]
            if again:
                self.git("update-index", "-z", "--force-remove", "--stdin", stdin=_nul(again))  # or git keeps its hash
                found.update(self._entries_of(self._update(again, unkept)))
        return found

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
        if self.run_git(*args, stdin=_nul(paths)).returncode == 0:
            return paths
        kept: list[str] = []
        for path in paths:  # rare: find the one git could not read
            if self.run_git(*args, stdin=_nul([path])).returncode == 0:
                kept.append(path)
            else:
                unkept[path] = "unreadable"
        return kept

    def _entries(self) -> int:
        """How many entries the index holds (its header says)."""
        try:
            with open(self.index, "rb") as f:
                head = f.read(12)
        except OSError:
            return 0
        return int.from_bytes(head[8:12], "big") if head[:4] == b"DIRC" else 0

    def _entries_of(self, paths: list[str], index: Path | None = None) -> dict[str, Version]:
        if not paths:
            return {}
        want = set(paths)
        if len(paths) > 2 * _PATHSPEC_BATCH:
            out = self.git("ls-files", "-s", "-z", index=index)
        else:
            out = b"".join(self.git("ls-files", "-s", "-z", "--", *paths[i:i + _PATHSPEC_BATCH], index=index)
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
        with self.lock:
            wanted = sorted(set(paths))
            found = self._entries_of(wanted)
            return {p: found.get(p) or (UNKEPT if p in self._unkept else None) for p in wanted}

    # -- keeping ---------------------------------------------------------------------------
    def pin(self, changes: Iterable[Change], message: str) -> str:
        """Keep the contents of these changes in the store for good (until pruned): copied
        from the user's repository where only it has them, and held by a commit of their own.
        Returns the commit ("" when there was no content to keep)."""
        with self.lock:
            blobs = sorted({v.blob for c in changes for v in (c.before, c.after) if v is not None and v.kept})
            if not blobs:
                return ""
            lost = self._copy_in(blobs)
            blobs = [b for b in blobs if b not in lost]
            if not blobs:
                return ""
            # The tree and the commit holding them are written here, as git would: two
            # processes fewer a turn.
            objects = self.git_dir / "objects"
            tree = gitpack.write_object(objects, "tree", gitpack.tree_of_blobs(blobs))
            who = f"nanohermes <nanohermes@localhost> {int(time.time())} +0000"
            text = (message[:200] or "checkpoint").encode("utf-8", "replace").replace(b"\0", b"")
            commit = gitpack.write_object(objects, "commit", f"tree {tree}\nauthor {who}\ncommitter {who}\n\n".encode()
                                          + text + b"\n")
            self.git("update-ref", f"{REF_PREFIX}{time.time_ns():020d}-{commit}", commit)  # names sort oldest first
            return commit

    def _copy_in(self, blobs: list[str]) -> set[str]:
        """Copy into the store the blobs only the user's repository has; returns those found
        nowhere (the repository dropped them since they were seen: rare, and said on undo)."""
        missing = self._missing(blobs)
        if missing and self.borrowed:
            # Usually the user's repository has every one: copied at once. Only when that
            # fails is each looked for, and those it has copied.
            if self._copy(sorted(missing)):
                return set()
            there = sorted(missing - self._missing(sorted(missing), borrow=True))
            if there:
                self._copy(there)
            missing = self._missing(sorted(missing))
        return missing

    def _copy(self, blobs: list[str]) -> bool:
        """Copy these blobs from the user's repository into the store; False when one is not there."""
        p = self.run_git("pack-objects", "--stdout", "-q", "--window=0",
                         stdin="".join(f"{b}\n" for b in blobs).encode(), borrow=True)
        if p.returncode != 0:
            return False
        # Many are kept as the one pack they came in (a file each costs more than their
        # bytes); a few as files, so that packs do not pile up turn after turn.
        self.git(*(("index-pack", "--stdin") if len(blobs) > _PACK_FROM else ("unpack-objects", "-q")),
                 stdin=p.stdout)
        return True

    def _missing(self, blobs: list[str], *, borrow: bool = False) -> set[str]:
        if not blobs:
            return set()
        out = self.text("cat-file", "--batch-check", stdin="".join(f"{b}\n" for b in blobs).encode(), borrow=borrow)
        return {line.split(" ")[0] for line in out.splitlines() if line.endswith(" missing")}

    def read(self, version: Version) -> bytes:
        with self.lock:
            return self.git("cat-file", "blob", version.blob, borrow=True)

    def merge(self, mine: Version, base: Version, theirs: Version, labels: tuple[str, str, str]) -> tuple[Version, int] | None:
        """Three-way merge of text files (git merge-file): (the merged content, conflicts
        marked in it), or None when they cannot be merged (binary)."""
        with self.lock:
            with tempfile.TemporaryDirectory(dir=self.root) as tmp:
                names = []
                for name, v in zip(("mine", "base", "theirs"), (mine, base, theirs), strict=True):
                    path = Path(tmp) / name
                    with open_private(path, "wb", encoding=None) as f:
                        f.write(self.git("cat-file", "blob", v.blob, borrow=True))
                    names.append(str(path))
                p = self.run_git("merge-file", "-p", "-L", labels[0], "-L", labels[1], "-L", labels[2], *names)
            if not 0 <= p.returncode < 128:
                return None
            blob = self.text("hash-object", "-w", "--stdin", stdin=p.stdout).strip()
            self._grown += len(p.stdout)
            return Version(mine.mode, blob), p.returncode

    # -- putting back ----------------------------------------------------------------------
    def put(self, targets: dict[str, Version | None]) -> tuple[list[str], list[str]]:
        """Make these paths hold these contents (None: delete the file): (paths changed,
        notes on those left alone). Never through a symbolic link, never over a folder that
        holds something."""
        with self.lock:
            return self._put(targets)

    def _put(self, targets: dict[str, Version | None]) -> tuple[list[str], list[str]]:
        root = self.workspace
        done: list[str] = []
        notes: list[str] = []
        links: dict[str, bool] = {}
        writes: dict[str, Version] = {}
        for path, v in sorted(targets.items()):
            if _beyond_link(root, path, links):
                notes.append(f"{path} is behind a symbolic link now; left as it is")
                continue
            full = root / path
            if v is None:
                try:
                    st = os.lstat(full)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    notes.append(f"{path} is a folder now; left as it is")
                    continue
                try:
                    full.unlink()
                except OSError as e:
                    notes.append(f"could not delete {path}: {e.strerror}")
                    continue
                done.append(path)
                _remove_empty_parents(full.parent, root)
            elif not v.kept:
                notes.append(f"{path} was not kept (too big or unreadable); left as it is")
            else:
                writes[path] = v
        for path in list(writes):
            full = root / path
            blocker = next((p for p in reversed(full.parents) if p.is_relative_to(root) and p != root
                            and (p.is_symlink() or (p.exists() and not p.is_dir()))), None)
            if blocker is not None:
                notes.append(f"{path}: {blocker.relative_to(root)} is in the way now; left as it is")
                del writes[path]
            elif full.is_symlink():
                full.unlink()
            elif full.is_dir():
                if any(full.iterdir()):
                    notes.append(f"{path} is a folder now; left as it is")
                    del writes[path]
                else:
                    full.rmdir()
        lost = self._missing(sorted({v.blob for v in writes.values()}), borrow=True)
        for path in [p for p, v in writes.items() if v.blob in lost]:
            notes.append(f"the content of {path} to restore is no longer kept; left as it is")
            del writes[path]
        if writes:
            tmp = self.root / f"restore-{os.getpid()}-{threading.get_ident()}"
            try:
                listing = b"".join(f"{v.mode} {v.blob}\t".encode() + p.encode("utf-8", "surrogateescape") + b"\0"
                                   for p, v in writes.items())
                self.git("update-index", "-z", "--index-info", stdin=listing, index=tmp)
                self.git("checkout-index", "-a", "-f", index=tmp, borrow=True)
            finally:
                tmp.unlink(missing_ok=True)
            done += writes
        return sorted(done), notes

    # -- space -----------------------------------------------------------------------------
    def size(self) -> int:
        total = 0
        for folder, _, names in os.walk(self.git_dir / "objects"):
            for n in names:
                try:
                    total += os.lstat(os.path.join(folder, n)).st_size
                except OSError:
                    pass
        return total

    def refs(self) -> set[str]:
        """The commits of the checkpoints still kept (pruning drops the oldest)."""
        with self.lock:
            if not (self.git_dir / "HEAD").exists():
                return set()
            return set(self.text("for-each-ref", "--format=%(objectname)", REF_PREFIX).split())

    def prune(self) -> int:
        """Prune when the store is over its cap: measured once, then again only when what
        was kept since could have taken it over (a walk of its objects costs a stat each)."""
        with self.lock:
            cap = self.limits.checkpoint_store_bytes
            if self._measured is not None and self._measured + self._grown <= cap:
                return 0
            self._measured, self._grown = self.size(), 0
            if self._measured <= cap:
                return 0
            return self._prune()

    def _prune(self) -> int:
        """Drop the oldest checkpoints until the ones left fit the cap; returns how many went.

        What the kept checkpoints need is measured, not the folder: objects younger than a
        few minutes stay on disk after their refs are gone (another session of this
        workspace may be writing a scan whose objects no ref holds yet), so the folder
        stays over the cap for a while after any prune, and judging by it would drop every
        checkpoint but the newest. The newest is always kept. What the sessions' indexes
        name is kept too (their next turn's "before"), and counts against the cap."""
        cap = self.limits.checkpoint_store_bytes
        refs = [line.split() for line in self.text("for-each-ref", "--sort=refname",
                                                   "--format=%(refname) %(objectname)", REF_PREFIX).splitlines()]
        if len(refs) <= 1:
            return 0
        state = self._pin_state()
        sizes = self._object_sizes()
        base = [state] if state else []
        # The bytes of the newest k checkpoints grow with k: find the largest k that fits.
        lo, hi = 1, len(refs)
        while lo < hi:
            k = (lo + hi + 1) // 2
            if self._needs([*base, *(c for _, c in refs[-k:])], sizes) <= cap:
                lo = k
            else:
                hi = k - 1
        drop = refs[:len(refs) - lo]
        if not drop:
            return 0
        self.git("update-ref", "--stdin", stdin="".join(f"delete {ref}\n" for ref, _ in drop).encode())
        self.git("reflog", "expire", "--expire=now", "--all", check=False)
        self.git("gc", "-q", "--prune=10.minutes.ago", check=False)
        return len(drop)

    def _pin_state(self) -> str:
        """A commit holding every blob of the store that a session's index names, so a prune
        keeps the contents a next turn may change (the user's repository holds the rest)."""
        blobs: set[str] = set()
        for idx in self._indexes():
            p = self.run_git("ls-files", "-s", "-z", index=idx)
            if p.returncode == 0:
                blobs.update(rec.split(b" ")[1].decode("ascii") for rec in p.stdout.split(b"\0") if rec)
        own = sorted(blobs - self._missing(sorted(blobs)))
        if not own:
            self.git("update-ref", "-d", STATE_REF, check=False)
            return ""
        listing = b"".join(f"100644 blob {b}\t{b}".encode() + b"\0" for b in own)
        tree = self.text("mktree", "-z", stdin=listing).strip()
        commit = self.text("commit-tree", tree, "-m", "what the sessions' indexes name").strip()
        self.git("update-ref", STATE_REF, commit)
        return commit

    def _object_sizes(self) -> dict[str, int]:
        """Every object in the store and its size on disk (compressed, or its share of a pack)."""
        out = self.text("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize:disk)")
        return {name: int(size) for name, size in (line.split() for line in out.splitlines())}

    def _needs(self, commits: list[str], sizes: dict[str, int]) -> int:
        """The bytes on disk of what these checkpoints hold (objects they share count once)."""
        out = self.text("rev-list", "--objects", "--no-object-names", "--stdin", stdin="".join(
            f"{c}\n" for c in commits).encode())
        return sum(sizes.get(name, 0) for name in out.split())


# -- the session's records ------------------------------------------------------------------

@dataclass
class Turn:
    """One turn: its prompt and place in the conversation, and the files it changed."""

    turn: int
    prompt: str
    time: float
    history: int  # messages in the history before the turn's prompt
    mark: str  # a digest of the message before it: a compaction since then changes it
    commit: str = ""  # holds the contents of its changes
    changes: list[Change] | None = None  # None: not recorded (the session stopped during the turn)
    undone: bool = False  # its files were put back by /undo or /rewind
    # The session's tool state before the turn (`Session.mark`), put back with its
    # conversation; read back from disk, only what a transcript keeps of it (the todo list).
    # None: not recorded (an earlier version's checkpoint).
    state: dict[str, Any] | None = None

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes or ()]


@dataclass
class Undo:
    """An /undo or /rewind of files: the turns it took back and what it changed doing so."""

    id: int
    turns: list[int]
    commit: str
    changes: list[Change]
    redone: bool = False


Resolution = Literal["mine", "theirs", "merge"]


@dataclass(frozen=True)
class Conflict:
    """A path the person (or a later turn) changed since the step being taken back."""

    path: str
    step: str  # "turn 3", "the undo of turn 3"
    mine: Version | None  # what the file holds now
    base: Version | None  # what the step left
    theirs: Version | None  # what it had before the step (the checkpoint's)
    diff: str  # yours -> the checkpoint's, for text files (cut to a few lines)

    @property
    def mergeable(self) -> bool:
        return all(v is not None and v.kept and v.regular for v in (self.mine, self.base, self.theirs))


Resolver = Callable[[Conflict], Awaitable[Resolution]]


@dataclass(frozen=True)
class Listed:
    turn: Turn
    paths: list[str] | None  # None: not recorded
    pruned: bool


class Checkpoints:
    """Per session: a scan before and after each turn (an agent's TurnHooks), undo and redo."""

    def __init__(self, session: Session, store: Store, emit: Callable[[Event], None]) -> None:
        self.session = session
        self.store = store
        self.emit = emit
        self._turns: list[Turn] = []
        self._undos: list[Undo] = []
        self._session: str | None = None
        self._warned: set[str] = set()
        self._warming: threading.Thread | None = None
        self._pending: asyncio.Future[None] | None = None  # the scan before this turn, while it runs
        self._ending: asyncio.Future[None] | None = None  # the scan after the last turn, while it runs
        self._open: Turn | None = None  # the turn running now, once its scan before is taken
        self.disabled = ""  # why checkpoints stopped for this session
        self.rewound_prompt = ""  # the prompt of the turn the last conversation rewind took back
        self._startup: Startup | None = None  # the virtual environments' start-up files before this turn

    def start(self) -> None:
        """At session start, a first scan in a background thread: it fills the index's stat
        cache, so the scan before the first turn rarely has to hash anything (the store's
        lock makes that one wait for it)."""
        def warm() -> None:
            try:
                self.store.scan()
            except Exception:  # the first turn's scan reports it as a warning
                pass

        self._warming = threading.Thread(target=warm, name="checkpoint-warm", daemon=True)
        self._warming.start()

    async def aclose(self) -> None:
        """Let a scan still running finish, so no git command is cut off at exit."""
        await self.settled()
        if self._ending is not None:
            await asyncio.shield(self._ending)
        if self._warming is not None:
            await asyncio.to_thread(self._warming.join)
            self._warming = None
        if self.store.ephemeral:
            with self.store.lock:
                self.store.index.unlink(missing_ok=True)

    # -- the session's list ----------------------------------------------------------------
    def _file(self) -> Path | None:
        t = self.session.transcript  # an unrecorded session keeps its list in memory only
        return t.dir / "checkpoints.jsonl" if t is not None else None

    def turns(self) -> list[Turn]:
        """This session's turns, read from its folder when the session changed (/resume)."""
        self._loaded()
        return self._turns

    def _loaded(self) -> None:
        sid = self.session.id
        if sid != self._session:
            self._session = sid
            self._turns, self._undos = self._load()

    def _load(self) -> tuple[list[Turn], list[Undo]]:
        path = self._file()
        turns: list[Turn] = []
        undos: list[Undo] = []
        if path is None or not path.exists():
            return turns, undos
        by_number: dict[int, Turn] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                kind = rec.get("type")
                if kind == "truncate":
                    turns = turns[:int(rec["keep"])]
                    by_number = {t.turn: t for t in turns}
                elif kind == "turn":
                    saved = rec.get("state")
                    started = Turn(turn=int(rec["turn"]), prompt=str(rec["prompt"]), time=float(rec["time"]),
                                   history=int(rec["history"]), mark=str(rec["mark"]),
                                   state=state_of(saved) if isinstance(saved, dict) else None)
                    turns.append(started)
                    by_number[started.turn] = started
                elif kind == "ended" and (ended := by_number.get(int(rec["turn"]))) is not None:
                    ended.commit, ended.changes = str(rec["commit"]), [Change.from_json(c) for c in rec["changes"]]
                elif kind == "undo":
                    undos.append(Undo(int(rec["id"]), [int(n) for n in rec["turns"]], str(rec["commit"]),
                                      [Change.from_json(c) for c in rec["changes"]]))
                    for t in turns:
                        t.undone = t.undone or t.turn in rec["turns"]
                elif kind == "redo":
                    for u in undos:
                        if u.id == rec["undo"]:
                            u.redone = True
                            for t in turns:
                                t.undone = t.undone and t.turn not in u.turns
                elif kind == "undone":  # written by earlier versions
                    for t in turns:
                        t.undone = t.undone or t.turn == rec["turn"]
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        return turns, undos

    def _write(self, rec: dict[str, Any]) -> None:
        path = self._file()
        if path is None:
            return
        with open_private(path, "a") as f:  # 0600, in a 0700 session folder
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    # -- around each turn ------------------------------------------------------------------
    async def prompt_submitted(self, prompt: str) -> str | None:
        """Start the scan that takes in what changed since the last turn (the person's
        edits). It runs while the model thinks (nothing changes files before its answer
        arrives); `settled` waits for it before the first tool or Stop hook runs."""
        await self.settled()  # a cancelled turn's scan may still be finishing
        if self._ending is not None:
            await asyncio.shield(self._ending)
        if self.disabled:
            return prompt
        turns = self.turns()
        history = len(self.session.history)
        turn = Turn(turn=(turns[-1].turn + 1 if turns else 1), prompt=prompt[:200], time=time.time(),  # for the listing
                    history=history, mark=_mark(self.session.history, history), state=self.session.mark())
        # Shielded from the turn: cancelling the turn must not leave the scan half-taken.
        self._pending = asyncio.ensure_future(self._before(turn))
        return prompt

    async def settled(self) -> None:
        """The scan before the current turn is taken (or failed, and said so)."""
        if self._pending is not None:
            await asyncio.shield(self._pending)
            self._pending = None

    async def _before(self, turn: Turn) -> None:
        try:
            scan = await asyncio.to_thread(self.store.scan)
            self._startup = await asyncio.to_thread(self._look_startup)
        except (CheckpointError, OSError, subprocess.SubprocessError) as e:
            self._fail(e)
            return
        self._warn_incomplete(self._startup)
        self._warn_unkept(scan)
        self.turns().append(turn)
        self._write({"type": "turn", "turn": turn.turn, "prompt": turn.prompt, "time": turn.time,
                     "history": turn.history, "mark": turn.mark, "state": saved_state(turn.state or {})})
        self._open = turn

    async def stopping(self, answer: str) -> str | None:
        return None

    async def ended(self) -> None:
        """The turn is over (answered, stopped, failed or interrupted): the scan after it
        records what its tools and commands changed."""
        await self.settled()
        turn, self._open = self._open, None
        if turn is None:
            return
        self._ending = asyncio.ensure_future(self._after(turn))
        await asyncio.shield(self._ending)

    async def _after(self, turn: Turn) -> None:
        def work() -> tuple[Scan, str, int, tuple[str, ...]]:
            with self.store.lock:
                scan = self.store.scan()
                commit = self.store.pin(scan.changes, f"turn {turn.turn}: {turn.prompt[:120]}")
                pruned = self.store.prune()
            return scan, commit, pruned, self._runs_later(scan.changes) + self._startup_changed()

        try:
            scan, commit, pruned, later = await asyncio.to_thread(work)
        except (CheckpointError, OSError, subprocess.SubprocessError) as e:
            self._fail(e)
            return
        self._warn_unkept(scan)
        if pruned:
            self.emit(Notice(level="info", text=(
                f"checkpoints: pruned {plural(pruned, 'old checkpoint')} to keep the store under "
                f"{self.store.limits.checkpoint_store_bytes} bytes (limits.checkpoint_store_bytes)")))
        turn.commit, turn.changes = commit, list(scan.changes)
        self._write({"type": "ended", "turn": turn.turn, "commit": commit,
                     "changes": [c.to_json() for c in scan.changes]})
        later = tuple({w.split(": ", 1)[0]: w for w in later}.values())  # a venv the checkpoints keep, named once
        self.emit(FilesChanged(turn=turn.turn, paths=tuple(turn.paths), runs_later=later))
        if later:
            one = len(later) == 1
            self.emit(Notice(level="warning", text=(
                f"{plural(len(later), 'file')} this turn created or changed {'runs' if one else 'run'} code later "
                f"without anyone typing {'its' if one else 'their'} name; read {'it' if one else 'them'} before "
                "the next commit, push, build or test run: " + "; ".join(later))))

    def _runs_later(self, changes: Iterable[Change]) -> tuple[str, ...]:
        """`path: why` for each file the turn created or changed that runs code later. A file
        of which only a part runs code is named when that part changed (both contents read
        from the store), or when either content was too big to keep."""
        from nanohermes.gitmeta import hooks_folders
        from nanohermes.runs_later import runs_later

        changed = [c for c in changes if c.after is not None]  # a deleted file runs nothing
        if not changed:
            return ()
        root = self.store.workspace
        hooks = tuple(os.path.relpath(h, root) for h in hooks_folders(root) if h.is_relative_to(root))
        out = []
        for c in changed:
            if runs_later(c.path, hooks=hooks) is None:
                continue
            known = all(v is None or v.kept for v in (c.before, c.after))
            before, after = (None if v is None or not known else self.store.read(v) for v in (c.before, c.after))
            why = runs_later(c.path, before, after, contents_known=known, hooks=hooks)
            if why:
                out.append(f"{c.path}: {why}")
        return tuple(out)

    def _look_startup(self) -> Startup:
        from nanohermes.runs_later import startup_files

        return startup_files(self.store.workspace, self.store.limits.startup_scan_folders)

    def _startup_changed(self) -> tuple[str, ...]:
        """`path: why` for each start-up file of the workspace's virtual environments the turn
        created or changed: the checkpoints leave those folders out."""
        from nanohermes.runs_later import startup_changed

        if self._startup is None:
            return ()
        return tuple(startup_changed(self._startup, self._look_startup()))

    def _warn_incomplete(self, found: Startup | None) -> None:
        if found is not None and found.problem and found.problem not in self._warned:
            self._warned.add(found.problem)
            self.emit(Notice(level="warning", text=f"{found.problem}; a start-up file planted past it is not named"))

    def _fail(self, e: BaseException) -> None:
        self.disabled = str(e)
        self._open = None
        self.emit(Notice(level="warning", text=f"checkpoints: {e}; /rewind cannot undo this session's turns"))

    def _warn_unkept(self, scan: Scan) -> None:
        limit = self.store.limits.checkpoint_file_max_bytes
        for paths, why in ((scan.too_big, f"too big to keep (> {limit} bytes, limits.checkpoint_file_max_bytes)"),
                           (scan.unreadable, "unreadable, not kept")):
            if fresh := [p for p in paths if p not in self._warned]:
                self._warned.update(fresh)
                shown = ", ".join(fresh[:5]) + (f" and {len(fresh) - 5} more" if len(fresh) > 5 else "")
                self.emit(Notice(level="warning", text=(
                    f"checkpoints: {plural(len(fresh), 'file')} {why}: {shown}; "
                    "/rewind leaves them as they are")))

    # -- looking back ----------------------------------------------------------------------
    async def listing(self) -> list[Listed]:
        """Each turn and the paths it changed (its own, not the person's between turns)."""
        await self.settled()
        turns = list(self.turns())
        kept = await asyncio.to_thread(self.store.refs)
        return [Listed(t, None if t.changes is None else t.paths, bool(t.commit) and t.commit not in kept)
                for t in turns]

    async def rewind(self, turn: Turn, *, files: bool, conversation: bool, resolve: Resolver | None = None) -> list[str]:
        """Back to before `turn`: its files (and those of the turns after it), its
        conversation, or both. Returns what to show."""
        await self.settled()
        out: list[str] = []
        if conversation and not self.conversation_ok(turn):
            return [f"the conversation was compacted since turn {turn.turn}; only its files can be rewound "
                    f"(/rewind {turn.turn} files)"]
        restored: list[Path] = []
        if files:
            steps = [t for t in reversed(self.turns()) if t.turn >= turn.turn and not t.undone]
            lines = await self._undo_turns(steps, f"before turn {turn.turn}", resolve, restored)
            if lines is None:
                return [*out, f"the checkpoint of turn {turn.turn} was pruned (limits.checkpoint_store_bytes)"]
            out += lines
        if conversation:
            history = self.session.history
            asked = history[turn.history] if turn.history < len(history) else None
            self.rewound_prompt = (asked.content or "") if asked is not None and asked.role == "user" else ""
            self.session.rewind(turn.history, turn.state)
            turns = self.turns()
            keep = turns.index(turn)
            del turns[keep:]
            self._write({"type": "truncate", "keep": keep})
            out.append(f"conversation rewound to before turn {turn.turn} ({turn.prompt[:60]!r})")
        self.session.files_restored(restored)  # after the state went back: as they are now
        return out

    async def undo(self, resolve: Resolver | None = None) -> list[str]:
        """The files of the last turn that changed any and is not undone yet, back to before it."""
        await self.settled()
        todo = [t for t in self.turns() if not t.undone and (t.changes is None or t.changes)]
        if not todo:
            return ["nothing to undo"]
        turn = todo[-1]
        restored: list[Path] = []
        lines = await self._undo_turns([turn], f"before turn {turn.turn}", resolve, restored)
        if lines is None:
            return [f"the checkpoint of turn {turn.turn} was pruned (limits.checkpoint_store_bytes)"]
        self.session.files_restored(restored)
        return lines

    async def redo(self, resolve: Resolver | None = None) -> list[str]:
        """What the last /undo or /rewind of files replaced, back again."""
        await self.settled()
        self._loaded()
        undo = next((u for u in reversed(self._undos) if not u.redone), None)
        if undo is None:
            return ["nothing to redo"]
        what = ", ".join(f"turn {n}" for n in undo.turns)
        if undo.commit and undo.commit not in await asyncio.to_thread(self.store.refs):
            return [f"what the undo of {what} replaced was pruned (limits.checkpoint_store_bytes)"]
        result = await self._revert([(f"the undo of {what}", undo.changes)], resolve)
        if isinstance(result, str):
            return [result]
        changed, commit, lines = result
        self.session.files_restored([self.store.workspace / c.path for c in changed])
        undo.redone = True
        for t in self.turns():
            t.undone = t.undone and t.turn not in undo.turns
        self._write({"type": "redo", "undo": undo.id, "commit": commit, "changes": [c.to_json() for c in changed]})
        return [_restored(changed, f"as before the undo of {what}"), *lines]

    async def _undo_turns(self, steps: list[Turn], where: str, resolve: Resolver | None,
                          restored: list[Path]) -> list[str] | None:
        """Take back these turns' changes, newest first, as one undo; the paths it changed
        are added to `restored`. None: a checkpoint they need was pruned."""
        notes = [f"turn {t.turn}'s file changes were not recorded (the session stopped during it); "
                 "its files are left as they are" for t in steps if t.changes is None]
        steps = [t for t in steps if t.changes is not None]
        if not steps:
            return notes or ["nothing to restore: those turns are undone already"]
        kept = await asyncio.to_thread(self.store.refs)
        if any(t.commit and t.commit not in kept for t in steps):
            return None
        result = await self._revert([(f"turn {t.turn}", t.changes or []) for t in steps], resolve)
        if isinstance(result, str):
            return [result]
        changed, commit, lines = result
        restored += [self.store.workspace / c.path for c in changed]
        self._loaded()
        undo = Undo(id=max((u.id for u in self._undos), default=0) + 1, turns=[t.turn for t in steps],
                    commit=commit, changes=changed)
        self._undos.append(undo)
        for t in steps:
            t.undone = True
        self._write({"type": "undo", "id": undo.id, "turns": undo.turns, "commit": commit,
                     "changes": [c.to_json() for c in changed]})
        tail = ["/redo brings back what this replaced"] if changed else []
        return [_restored(changed, f"to {where}"), *notes, *lines, *tail]

    async def _revert(self, steps: list[tuple[str, list[Change]]],
                      resolve: Resolver | None) -> tuple[list[Change], str, list[str]] | str:
        """Take back each step's changes, in order, where the file still holds what the step
        left; a path changed since is a conflict for `resolve` (without one: kept as it is).
        Returns (what changed on disk, the commit keeping it, notes), or an error line. No
        other scan of this index runs meanwhile: undo runs between turns, in this session."""
        store = self.store
        try:
            await asyncio.to_thread(store.scan)  # the person's edits since: kept, and known
            current = await asyncio.to_thread(store.versions, {c.path for _, cs in steps for c in cs})
            targets, notes = await self._plan(steps, current, resolve)
            _, put_notes = await asyncio.to_thread(store.put, targets)
            after = await asyncio.to_thread(store.scan)
            changed = [c for c in after.changes if c.path in targets]
            commit = await asyncio.to_thread(store.pin, changed, f"undo: {steps[0][0]}")
        except (CheckpointError, OSError, subprocess.SubprocessError) as e:
            return f"could not restore the files: {e}"
        return changed, commit, [*notes, *put_notes]

    async def _plan(self, steps: list[tuple[str, list[Change]]], current: dict[str, Version | None],
                    resolve: Resolver | None) -> tuple[dict[str, Version | None], list[str]]:
        """What each path should hold once the steps are taken back, and the notes."""
        sim = dict(current)
        notes: list[str] = []
        for step, changes in steps:
            for c in changes:
                have = sim.get(c.path)
                if have == c.before:
                    continue  # already as it was
                if c.before is not None and not c.before.kept:
                    notes.append(f"{c.path} was not kept (too big or unreadable); left as it is")
                    continue
                if have == c.after and (have is None or have.kept):
                    sim[c.path] = c.before
                    continue
                conflict = Conflict(c.path, step, have, c.after, c.before, await self._diff(have, c.before))
                choice, merged = await self._resolve(conflict, resolve)
                if choice == "mine":
                    notes.append(f"{c.path} changed since {step}: kept yours")
                elif choice == "theirs":
                    sim[c.path] = c.before
                    notes.append(f"{c.path} changed since {step}: took the checkpoint's")
                elif merged is not None:
                    sim[c.path] = merged[0]
                    marked = f" ({plural(merged[1], 'conflict')} marked)" if merged[1] else ""
                    notes.append(f"{c.path} changed since {step}: merged{marked}")
        return {p: v for p, v in sim.items() if v != current.get(p)}, notes

    async def _resolve(self, conflict: Conflict,
                       resolve: Resolver | None) -> tuple[Resolution, tuple[Version, int] | None]:
        choice: Resolution = "mine" if resolve is None else await resolve(conflict)
        if choice != "merge":
            return choice, None
        if not conflict.mergeable:
            return "mine", None
        assert conflict.mine is not None and conflict.base is not None and conflict.theirs is not None
        merged = await asyncio.to_thread(self.store.merge, conflict.mine, conflict.base, conflict.theirs,
                                         ("yours", f"after {conflict.step}", f"before {conflict.step}"))
        return ("merge", merged) if merged is not None else ("mine", None)

    async def _diff(self, mine: Version | None, theirs: Version | None) -> str:
        """A few lines of unified diff from the file now to the checkpoint's, for text."""
        def text(v: Version | None) -> list[str] | None:
            if v is None:
                return []
            if not (v.kept and v.regular):
                return None
            data = self.store.read(v)
            if b"\0" in data[:8192]:
                return None
            return data.decode("utf-8", "replace").splitlines(keepends=True)

        def work() -> str:
            a, b = text(mine), text(theirs)
            if a is None or b is None:
                return ""
            lines = list(difflib.unified_diff(a, b, "yours", "checkpoint's", n=2))
            shown = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:_DIFF_LINES])
            return shown + (f"… {len(lines) - _DIFF_LINES} more lines\n" if len(lines) > _DIFF_LINES else "")

        try:
            return await asyncio.to_thread(work)
        except (CheckpointError, OSError, subprocess.SubprocessError):
            return ""

    def conversation_ok(self, turn: Turn) -> bool:
        history = self.session.history
        return turn.history <= len(history) and _mark(history, turn.history) == turn.mark


def _restored(changes: list[Change], where: str) -> str:
    paths = [c.path for c in changes]
    if not paths:
        return f"no files restored {where}"
    shown = ", ".join(paths[:10]) + (" …" if len(paths) > 10 else "")
    return f"restored {plural(len(paths), 'file')} {where}: {shown}"


def _mark(history: list[Message], upto: int) -> str:
    """A fingerprint of the history's first `upto` messages (its last one), to tell whether
    the conversation is still the one a checkpoint was taken in."""
    if upto == 0:
        return ""
    wire = json.dumps(history[upto - 1].to_wire(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(wire.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class Repository:
    top: Path  # the folder holding `.git`
    index: Path
    objects: Path


def repository(workspace: Path) -> Repository | None:
    """The git repository the workspace is in (a worktree's or a submodule's `.git` file
    followed), or None. Only read: its objects as a source of contents whose hash is known,
    and its index as a first stat cache."""
    for folder in (workspace, *workspace.parents):
        dot = folder / ".git"
        try:
            if dot.is_dir():
                gitdir = dot
            elif dot.is_file():
                with open(dot, encoding="utf-8", errors="replace") as f:
                    first = f.read(4096).strip()
                if not first.startswith("gitdir:"):
                    return None
                gitdir = (folder / first.removeprefix("gitdir:").strip()).resolve()
            else:
                continue
            common = gitdir
            if (gitdir / "commondir").is_file():
                with open(gitdir / "commondir", encoding="utf-8", errors="replace") as f:
                    common = (gitdir / f.read(4096).strip()).resolve()
            objects = common / "objects"
            if _may_move_work_tree(gitdir, common) and moved_work_tree(workspace):
                return None  # its index and objects describe files outside the workspace
            return Repository(folder, gitdir / "index", objects) if objects.is_dir() else None
        except OSError:
            return None
    return None


def _may_move_work_tree(gitdir: Path, common: Path) -> bool:
    """Whether a repository's own config could set its work tree (`core.worktree`, or an
    include that might): only then is git asked (`gitmeta.moved_work_tree`)."""
    for config in {gitdir / "config", common / "config", gitdir / "config.worktree"}:
        try:
            with open(config, "rb") as f:
                text = f.read(1 << 20).lower()
        except OSError:
            continue
        if b"worktree" in text or b"include" in text:
            return True
    return False


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


def _beyond_link(root: Path, path: str, cache: dict[str, bool]) -> bool:
    """Whether a folder on the way to `path` is a symbolic link."""
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


def _remove_empty_parents(folder: Path, root: Path) -> None:
    while folder != root and folder.is_relative_to(root) and folder.is_dir() and not folder.is_symlink():
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _glob_escape(name: str) -> str:
    return "".join("\\" + c if c in "*?[]\\!#" else c for c in name)


def _quoted(path: str) -> str:
    """A path as one entry of GIT_ALTERNATE_OBJECT_DIRECTORIES (colon-separated, C-quoted)."""
    if not any(c in path for c in ':"\\\n'):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Aside(Generic[T]):
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


def _nul(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80] or "default"
