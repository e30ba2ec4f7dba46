"""The store of a workspace's checkpoints: its shadow repository (`shadow`), this session's
index of the workspace (`scan`), the contents kept for good under a commit of their own, and
pruning the oldest when the store outgrows `checkpoint_store_bytes`.

A scan keeps the contents it hashed in the store; `pin` copies in what only the user's
repository holds, so a checkpoint outlives it. Every git command runs through the shadow's
`run_git`; the objects written without one (many contents as one pack, a turn's tree and
commit) through `gitpack`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from nanohermes.common.budget import Limits
from nanohermes.turn.checkpoints.gitpack import blob_name, tree_of_blobs, write_blobs, write_object
from nanohermes.turn.checkpoints.repository import repository
from nanohermes.turn.checkpoints.scan import PACK_FROM, Scanner
from nanohermes.turn.checkpoints.shadow import Shadow
from nanohermes.turn.checkpoints.versions import Change, Scan, Version
from nanohermes.common.dirs import data_home
from nanohermes.turn.session import project_key

REF_PREFIX = "refs/nanohermes/turn/checkpoints/"
STATE_REF = "refs/nanohermes/state"  # the contents the sessions' indexes name, kept through a prune
# Build outputs a person may also keep files in: checkpointed, though grep skips them.
KEPT_OUTPUT_DIRS = frozenset({"build", "dist"})


def store_dir(workspace: Path) -> Path:
    return data_home() / "checkpoints" / project_key(workspace)


def skipped_dirs(grep_skips: Iterable[str]) -> frozenset[str]:
    """The folders a checkpoint does not keep: grep's dependency and cache folders, not the
    build outputs people also write by hand."""
    return frozenset(grep_skips) - KEPT_OUTPUT_DIRS


class Store:
    """The shadow repository of one workspace, and this session's index (its stat cache)."""

    def __init__(self, workspace: Path, limits: Limits, skip_dirs: frozenset[str], session: str = "default") -> None:
        self.workspace = workspace.resolve()
        self.limits = limits
        self.skip_dirs = skip_dirs
        self.root = store_dir(self.workspace)
        # A session's own index (its stat cache); a session not recorded gets one for this process.
        self.ephemeral = not session
        self.index = self.root / f"index-{_safe(session) if session else f'pid{os.getpid()}'}"
        # One git command at a time on the session's index, whichever thread asks.
        self.lock = threading.RLock()
        self._fresh = True
        self.repository = repository(self.workspace)  # only read: its objects, and at first its index
        borrowed = str(self.repository.objects) if self.repository is not None else None
        self.shadow = Shadow(self.root, self.workspace, self.index, borrowed)
        self.git_dir = self.shadow.git_dir
        self.scanner = Scanner(self.shadow, limits, skip_dirs, self.repository, self.grew)
        self._measured: int | None = None  # the store's bytes on disk when last measured
        self._grown = 0  # at most this many bytes kept since

    def _init(self) -> None:
        if self.shadow.exists():
            if self._fresh:
                self._fresh = False
                # Only this process uses this session's index (the transcript is locked), so a
                # lock file left by a process that was killed mid-scan is stale.
                self.index.with_name(self.index.name + ".lock").unlink(missing_ok=True)
                if not self.index.exists():
                    self.scanner.seed()
            return
        self._fresh = False
        self.shadow.create()
        self.scanner.seed()

    def converts(self) -> bool:
        """Whether the user's git may store a file otherwise than as its bytes (see `Scanner.converts`)."""
        return self.scanner.converts()

    def grew(self, kept: int) -> None:
        """At most `kept` more bytes were kept in the store (a prune measures it again past its cap)."""
        self._grown += kept

    # -- scanning --------------------------------------------------------------------------
    def scan(self) -> Scan:
        """What changed in the workspace since this index's last scan; the new contents are
        kept (the index then describes the workspace as it is)."""
        with self.lock:
            self._init()
            return self.scanner.scan()

    def versions(self, paths: Iterable[str]) -> dict[str, Version | None]:
        """What the index holds for these paths now (after a scan: the workspace's contents)."""
        with self.lock:
            return self.scanner.versions(paths)

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
            tree = write_object(objects, "tree", tree_of_blobs(blobs))
            who = f"nanohermes <nanohermes@localhost> {int(time.time())} +0000"
            text = (message[:200] or "checkpoint").encode("utf-8", "replace").replace(b"\0", b"")
            commit = write_object(objects, "commit", f"tree {tree}\nauthor {who}\ncommitter {who}\n\n".encode()
                                  + text + b"\n")
            self.shadow.add_ref(f"{REF_PREFIX}{time.time_ns():020d}-{commit}", commit)  # names sort oldest first
            return commit

    def _copy_in(self, blobs: list[str]) -> set[str]:
        """Copy into the store the blobs only the user's repository has; returns those found
        nowhere (the repository dropped them since they were seen: rare, and said on undo)."""
        missing = self.shadow.unheld(blobs)
        if missing and self.shadow.borrowed:
            missing = self._copy(sorted(missing))
        return missing

    def _copy(self, blobs: list[str]) -> set[str]:
        """Copy these blobs from the user's repository into the store, read in one `cat-file`;
        returns those it does not have either. Many are kept as one pack (a file each costs
        more than their bytes), a few as files, so that packs do not pile up turn after turn."""
        out = self.shadow.git("cat-file", "--batch", stdin="".join(f"{b}\n" for b in blobs).encode(), borrow=True)
        found: list[tuple[str, bytes]] = []
        at = 0
        while (end := out.find(b"\n", at)) != -1:
            head = out[at:end].decode("ascii", "replace").split(" ")
            at = end + 1
            if len(head) == 3 and head[2].isdigit():  # "<name> <type> <size>", then the content; or "<name> missing"
                size = int(head[2])
                if head[1] == "blob":
                    found.append((head[0], out[at:at + size]))
                at += size + 1
        if len(found) > PACK_FROM:
            kept = write_blobs(self.git_dir / "objects" / "pack", found)
        else:
            kept = {name for name, data in found if blob_name(data) == name
                    and write_object(self.git_dir / "objects", "blob", data) == name}
        return set(blobs) - kept

    def read(self, version: Version) -> bytes:
        with self.lock:
            return self.shadow.git("cat-file", "blob", version.blob, borrow=True)

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
            if not self.shadow.exists():
                return set()
            return set(self.shadow.text("for-each-ref", "--format=%(objectname)", REF_PREFIX).split())

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
        refs = [line.split() for line in self.shadow.text("for-each-ref", "--sort=refname",
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
        self.shadow.git("update-ref", "--stdin", stdin="".join(f"delete {ref}\n" for ref, _ in drop).encode())
        self.shadow.git("reflog", "expire", "--expire=now", "--all", check=False)
        self.shadow.git("gc", "-q", "--prune=10.minutes.ago", check=False)
        return len(drop)

    def _pin_state(self) -> str:
        """A commit holding every blob of the store that a session's index names, so a prune
        keeps the contents a next turn may change (the user's repository holds the rest)."""
        blobs: set[str] = set()
        for idx in self.shadow.indexes():
            p = self.shadow.run_git("ls-files", "-s", "-z", index=idx)
            if p.returncode == 0:
                blobs.update(rec.split(b" ")[1].decode("ascii") for rec in p.stdout.split(b"\0") if rec)
        own = sorted(blobs - self.shadow.missing(sorted(blobs)))
        if not own:
            self.shadow.git("update-ref", "-d", STATE_REF, check=False)
            return ""
        listing = b"".join(f"100644 blob {b}\t{b}".encode() + b"\0" for b in own)
        tree = self.shadow.text("mktree", "-z", stdin=listing).strip()
        commit = self.shadow.text("commit-tree", tree, "-m", "what the sessions' indexes name").strip()
        self.shadow.git("update-ref", STATE_REF, commit)
        return commit

    def _object_sizes(self) -> dict[str, int]:
        """Every object in the store and its size on disk (compressed, or its share of a pack)."""
        out = self.shadow.text("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize:disk)")
        return {name: int(size) for name, size in (line.split() for line in out.splitlines())}

    def _needs(self, commits: list[str], sizes: dict[str, int]) -> int:
        """The bytes on disk of what these checkpoints hold (objects they share count once)."""
        out = self.shadow.text("rev-list", "--objects", "--no-object-names", "--stdin", stdin="".join(
            f"{c}\n" for c in commits).encode())
        return sum(sizes.get(name, 0) for name in out.split())


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80] or "default"
