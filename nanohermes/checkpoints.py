"""Checkpoints: the workspace's files recorded before each turn, so /rewind and /undo can put
them back, whatever changed them (the file tools or a command).

A shadow git repository per workspace lives in nanohermes's data folder
(`$XDG_DATA_HOME/nanohermes/checkpoints/<project>/`): git runs with its own GIT_DIR, its own
index per session and the workspace as GIT_WORK_TREE, with no global or system config, no
hooks and no attributes (so contents are kept and restored byte for byte). The user's `.git`,
index, stash and refs are never read or written. The file list is ours, not git's: every file
of the workspace, untracked and git-ignored ones too, except `.git` entries, the build and
cache folders grep skips, and files over `checkpoint_file_max_bytes` (named in a note, and
never deleted by a rewind). A snapshot whose tree did not change reuses the last commit; it
runs in a thread, off the event loop. Each session keeps its list of turns (prompt, time,
commit, history length) in `checkpoints.jsonl` in its folder, so `--resume` finds them; the
store is pruned, oldest checkpoints first, when it outgrows `checkpoint_store_bytes`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes import programs
from nanohermes.budget import Limits
from nanohermes.dirs import data_home, open_private, private_dir, write_private
from nanohermes.events import Event, Notice
from nanohermes.messages import Message
from nanohermes.programs import GIT_OWN

if TYPE_CHECKING:
    from nanohermes.session import Session

REF_PREFIX = "refs/nanohermes/checkpoints/"
_GIT_CONFIG = (*GIT_OWN, "-c", "core.autocrlf=false",
               "-c", "core.safecrlf=false", "-c", "core.symlinks=true", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
               "-c", "core.quotepath=off", "-c", "core.untrackedCache=false", "-c", "core.splitIndex=false",
               # The store holds copies of the workspace's files: owner-only, whatever the umask.
               "-c", "core.sharedRepository=0600")
# info/attributes wins over every .gitattributes of the workspace: no line-ending or filter changes.
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"


class CheckpointError(Exception):
    pass


@dataclass(frozen=True)
class Snapshot:
    commit: str
    too_big: tuple[str, ...] = ()  # paths present but not kept
    unreadable: tuple[str, ...] = ()  # paths present that could not be read: not kept either


@dataclass
class Turn:
    """One checkpoint: the workspace and the conversation before a turn."""

    turn: int
    prompt: str
    time: float
    commit: str
    history: int  # messages in the history before the turn's prompt
    mark: str  # a digest of the message before it: a compaction since then changes it
    too_big: list[str] = field(default_factory=list)
    undone: bool = False  # its files were restored by /undo

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))


def store_dir(workspace: Path) -> Path:
    from nanohermes.session import project_key

    return data_home() / "checkpoints" / project_key(workspace)


# Sessions' indexes kept in a store; an older one is removed when a new session starts.
KEPT_INDEXES = 8


class Store:
    """The shadow repository of one workspace."""

    def __init__(self, workspace: Path, limits: Limits, skip_dirs: frozenset[str], session: str = "default") -> None:
        self.workspace = workspace.resolve()
        self.limits = limits
        self.skip_dirs = skip_dirs
        self.root = store_dir(self.workspace)
        self.git_dir = self.root / "git"
        # A session's own index (its stat cache); a session not recorded gets one for this process.
        self.ephemeral = not session
        self.index = self.root / f"index-{_safe(session) if session else f'pid{os.getpid()}'}"
        self._last: tuple[str, str] | None = None  # (tree, commit) of the last snapshot
        # One git command at a time on the session's index, whichever thread asks.
        self.lock = threading.RLock()
        self._fresh = True
        # nanohermes's own data (this store, the sessions) when the workspace holds it ($HOME)
        own = data_home().resolve()
        self._own = str(own) if own.is_relative_to(self.workspace) else None

    # -- git -------------------------------------------------------------------------------
    def git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
        p = self._run(*args, stdin=stdin)
        if check and p.returncode != 0:
            raise CheckpointError(f"git {args[0]} failed: {p.stderr.decode('utf-8', 'replace').strip()[:300]}")
        return p.stdout.decode("utf-8", "surrogateescape")

    def _run(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        # None of the user's git settings apply (no GIT_* variable, no global or system config).
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.workspace), GIT_INDEX_FILE=str(self.index),
                   GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_LITERAL_PATHSPECS="1",
                   GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="nanohermes", GIT_AUTHOR_EMAIL="nanohermes@localhost",
                   GIT_COMMITTER_NAME="nanohermes", GIT_COMMITTER_EMAIL="nanohermes@localhost")
        try:
            return subprocess.run([programs.git(), *_GIT_CONFIG, *args], input=stdin, capture_output=True, env=env,
                                  cwd=self.workspace, timeout=600)
        except FileNotFoundError:
            raise CheckpointError("git was not found on PATH (checkpoints need it; install git)") from None

    def _init(self) -> None:
        if (self.git_dir / "HEAD").exists():
            if self._fresh:
                self._fresh = False
                # Only this process uses this session's index (the transcript is locked), so a
                # lock file left by a process that was killed mid-snapshot is stale.
                self.index.with_name(self.index.name + ".lock").unlink(missing_ok=True)
                if not self.index.exists():
                    self._seed_index()
            return
        self._fresh = False
        private_dir(self.root)
        self.git("init", "-q", "--template=")
        write_private(private_dir(self.git_dir / "info") / "attributes", _ATTRIBUTES)

    def _seed_index(self) -> None:
        """Start a new session's index from the newest one of this workspace: it is a stat
        cache, so the first snapshot hashes only what changed since (a `-p` run is a new
        session each time). Old sessions' indexes beyond a few are removed: a session that
        finds its own gone is seeded again."""
        others = sorted((p for p in self.root.glob("index-*") if not p.name.endswith(".lock")),
                        key=lambda p: p.stat().st_mtime_ns)
        if others:
            # git replaces an index by renaming a finished file over it: a copy is never torn.
            with open_private(self.index, "wb") as f:
                f.write(others[-1].read_bytes())
        for old in others[:-KEPT_INDEXES]:
            old.unlink(missing_ok=True)

    # -- snapshot --------------------------------------------------------------------------
    def files(self) -> tuple[list[str], list[str], list[str]]:
        """(paths to keep, too big to keep, unreadable), relative, sorted; raises CheckpointError
        when the workspace has more files than a checkpoint may hold."""
        keep: list[str] = []
        big: list[str] = []
        unreadable: list[str] = []
        cap = self.limits.checkpoint_max_files
        for folder, dirs, names in os.walk(self.workspace):
            links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]  # kept as links, not followed
            dirs[:] = sorted(d for d in dirs if d != ".git" and d not in self.skip_dirs and d not in links
                             and os.path.join(folder, d) != self._own)
            rel = os.path.relpath(folder, self.workspace)
            for name in sorted([*names, *links]):
                if name == ".git":
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                relpath = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
                if not (os.path.isfile(path) or os.path.islink(path)):
                    continue  # sockets, fifos
                if not os.path.islink(path) and st.st_size > self.limits.checkpoint_file_max_bytes:
                    big.append(relpath)
                    continue
                if not os.path.islink(path) and not os.access(path, os.R_OK):
                    unreadable.append(relpath)  # git could not read it; a rewind leaves it alone too
                    continue
                keep.append(relpath)
                if len(keep) > cap:
                    raise CheckpointError(f"the workspace has more than {cap} files "
                                          "(limits.checkpoint_max_files); checkpoints are off for it")
        return keep, big, unreadable

    def snapshot(self, message: str) -> Snapshot:
        with self.lock:
            return self._snapshot(message)

    def _snapshot(self, message: str) -> Snapshot:
        self._init()
        keep, big, unreadable = self.files()
        indexed = set(filter(None, self.git("ls-files", "-z").split("\0")))
        stale = indexed - set(keep)
        if stale:
            self.git("update-index", "-z", "--force-remove", "--stdin", stdin=_nul(sorted(stale)))
        if keep:
            self.git("update-index", "-z", "--add", "--remove", "--replace", "--stdin", stdin=_nul(keep))
        tree = self.git("write-tree").strip()
        if self._last is not None and self._last[0] == tree and self.exists(self._last[1]):
            return Snapshot(self._last[1], tuple(big), tuple(unreadable))
        # No parent: each checkpoint is reachable only from its own ref, so pruning a ref frees it.
        commit = self.git("commit-tree", tree, "-m", message[:200] or "checkpoint").strip()
        self.git("update-ref", f"{REF_PREFIX}{time.time_ns():020d}-{commit}", commit)  # names sort oldest first
        self._last = (tree, commit)
        return Snapshot(commit, tuple(big), tuple(unreadable))

    def exists(self, commit: str) -> bool:
        """Whether the checkpoint is still kept (its ref, which keeps its objects, was not pruned)."""
        if not commit or not (self.git_dir / "HEAD").exists():
            return False
        return bool(self.git("for-each-ref", "--format=%(objectname)", f"{REF_PREFIX}*-{commit}", check=False).strip())

    def changes(self, a: str, b: str) -> list[tuple[str, str]]:
        """(status A/M/D/T, path) from commit a to commit b."""
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", a, b).split("\0")
        return [(out[i], out[i + 1]) for i in range(0, len(out) - 1, 2) if out[i]]

    def restore(self, target: str, too_big: list[str]) -> tuple[list[str], list[str]]:
        """Put the files back as they were at `target`: (paths restored or deleted, notes)."""
        with self.lock:
            return self._restore(target, too_big)

    def _restore(self, target: str, too_big: list[str]) -> tuple[list[str], list[str]]:
        now = self._snapshot("before a rewind").commit
        changes = self.changes(now, target)
        keep_away = set(too_big)
        notes: list[str] = []
        touched: list[str] = []
        root = self.workspace
        for status, path in changes:
            if status != "D":
                continue
            if path in keep_away:
                notes.append(f"{path} was not kept (too big or unreadable); left as it is")
                continue
            full = root / path
            if not full.parent.resolve().is_relative_to(root):  # never through a symlinked folder
                notes.append(f"{path} is behind a symbolic link now; left as it is")
                continue
            try:
                full.unlink()
                touched.append(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                notes.append(f"could not delete {path}: {e.strerror}")
                continue
            parent = full.parent
            while parent != root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        back = [p for s, p in changes if s != "D"]
        if back:
            for path in back:  # a folder where the file was, or a symbolic link in its way, goes first
                full = root / path
                if full.is_symlink() or (full.is_dir() and not any(full.iterdir())):
                    full.unlink() if full.is_symlink() else full.rmdir()
            self.git("checkout", "-f", target, "--pathspec-from-file=-", "--pathspec-file-nul", stdin=_nul(back))
            touched += back
        self._last = None  # the index now holds the target's entries: next snapshot recomputes
        return sorted(touched), notes

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

    def prune(self) -> int:
        with self.lock:
            return self._prune()

    def _prune(self) -> int:
        """Drop the oldest checkpoints until the ones left fit the cap; returns how many went.

        What the kept checkpoints need is measured, not the folder: objects younger than a
        few minutes stay on disk after their refs are gone (another session of this
        workspace may be writing a snapshot whose objects no ref holds yet), so the folder
        stays over the cap for a while after any prune, and judging by it would drop every
        checkpoint but the newest. The newest is always kept."""
        cap = self.limits.checkpoint_store_bytes
        if self.size() <= cap:
            return 0
        refs = [line.split() for line in self.git("for-each-ref", "--sort=refname",
                                                  "--format=%(refname) %(objectname)", REF_PREFIX).splitlines()]
        if len(refs) <= 1:
            return 0
        sizes = self._object_sizes()
        # The bytes of the newest k checkpoints grow with k: find the largest k that fits.
        lo, hi = 1, len(refs)
        while lo < hi:
            k = (lo + hi + 1) // 2
            if self._needs([c for _, c in refs[-k:]], sizes) <= cap:
                lo = k
            else:
                hi = k - 1
        drop = refs[:len(refs) - lo]
        if not drop:
            return 0
        self.git("update-ref", "--stdin", stdin="".join(f"delete {ref}\n" for ref, _ in drop).encode())
        self.git("reflog", "expire", "--expire=now", "--all", check=False)
        self.git("gc", "-q", "--prune=10.minutes.ago", check=False)
        if self._last is not None and not self.exists(self._last[1]):
            self._last = None
        return len(drop)

    def _object_sizes(self) -> dict[str, int]:
        """Every object in the store and its size on disk (compressed, or its share of a pack)."""
        out = self.git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize:disk)")
        return {name: int(size) for name, size in (line.split() for line in out.splitlines())}

    def _needs(self, commits: list[str], sizes: dict[str, int]) -> int:
        """The bytes on disk of what these checkpoints hold (objects they share count once)."""
        out = self.git("rev-list", "--objects", "--no-object-names", "--stdin", stdin="".join(
            f"{c}\n" for c in commits).encode())
        return sum(sizes.get(name, 0) for name in out.split())


class Checkpoints:
    """Per session: a checkpoint before each turn (an agent's TurnHooks), and rewinding."""

    def __init__(self, session: Session, store: Store, emit: Callable[[Event], None]) -> None:
        self.session = session
        self.store = store
        self.emit = emit
        self._turns: list[Turn] = []
        self._session: str | None = None
        self._warned_big: set[str] = set()
        self._warming: threading.Thread | None = None
        self._pending: asyncio.Future[None] | None = None  # this turn's snapshot, while it is taken
        self.disabled = ""  # why checkpoints stopped for this session
        self.rewound_prompt = ""  # the prompt of the turn the last conversation rewind took back

    def start(self) -> None:
        """At session start, a first snapshot in a background thread: it fills the index's
        stat cache, so the checkpoint before the first turn rarely has to hash anything (the
        store's lock makes that one wait for it)."""
        def warm() -> None:
            try:
                self.store.snapshot("session start")
            except Exception:  # the first turn's snapshot reports it as a warning
                pass

        self._warming = threading.Thread(target=warm, name="checkpoint-warm", daemon=True)
        self._warming.start()

    async def aclose(self) -> None:
        """Let a snapshot still running finish, so no git command is cut off at exit."""
        await self.settled()
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
        """This session's checkpoints, read from its folder when the session changed (/resume)."""
        sid = self.session.id
        if sid != self._session:
            self._session = sid
            self._turns = self._load()
        return self._turns

    def _load(self) -> list[Turn]:
        path = self._file()
        if path is None or not path.exists():
            return []
        turns: list[Turn] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                if rec.get("type") == "truncate":
                    turns = turns[:int(rec["keep"])]
                elif rec.get("type") == "undone":
                    for t in turns:
                        t.undone = t.undone or t.turn == rec["turn"]
                else:
                    turns.append(Turn(**{k: v for k, v in rec.items() if k != "type"}))
            except (ValueError, KeyError, TypeError):
                continue
        return turns

    def _write(self, rec: dict[str, Any]) -> None:
        path = self._file()
        if path is None:
            return
        with open_private(path, "a") as f:  # 0600, in a 0700 session folder
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    # -- before each turn ------------------------------------------------------------------
    async def prompt_submitted(self, prompt: str) -> str | None:
        """Start the snapshot of the files as they are before the turn. It runs while the
        model thinks (nothing changes files before its answer arrives); `settled` waits
        for it before the first tool or Stop hook runs."""
        await self.settled()  # a cancelled turn's snapshot may still be finishing
        if self.disabled:
            return prompt
        turns = self.turns()
        history = len(self.session.history)
        turn = Turn(turn=(turns[-1].turn + 1 if turns else 1), prompt=prompt[:200], time=time.time(),  # for the listing
                    commit="", history=history, mark=_mark(self.session.history, history))
        # Shielded from the turn: cancelling the turn must not leave the snapshot half-taken.
        self._pending = asyncio.ensure_future(self._take(turn, prompt))
        return prompt

    async def settled(self) -> None:
        """The snapshot of the current turn is taken (or failed, and said so)."""
        if self._pending is not None:
            await asyncio.shield(self._pending)
            self._pending = None

    async def _take(self, turn: Turn, prompt: str) -> None:
        try:
            snap = await asyncio.to_thread(self.store.snapshot, f"before: {prompt[:120]}")
            pruned = await asyncio.to_thread(self.store.prune)
        except (CheckpointError, OSError, subprocess.SubprocessError) as e:
            self.disabled = str(e)
            self.emit(Notice(level="warning", text=f"checkpoints: {e}; /rewind cannot undo this session's turns"))
            return
        if pruned:
            self.emit(Notice(level="info", text=(
                f"checkpoints: pruned {pruned} old checkpoints to keep the store under "
                f"{self.store.limits.checkpoint_store_bytes} bytes (limits.checkpoint_store_bytes)")))
        if fresh := [p for p in snap.too_big if p not in self._warned_big]:
            self._warned_big.update(fresh)
            shown = ", ".join(fresh[:5]) + (f" and {len(fresh) - 5} more" if len(fresh) > 5 else "")
            self.emit(Notice(level="warning", text=(
                f"checkpoints: {len(fresh)} files too big to keep (> {self.store.limits.checkpoint_file_max_bytes} "
                f"bytes, limits.checkpoint_file_max_bytes): {shown}; /rewind leaves them as they are")))
        turn.commit, turn.too_big = snap.commit, [*snap.too_big, *snap.unreadable]
        self.turns().append(turn)
        self._write({"type": "turn", **asdict(turn)})

    async def stopping(self, answer: str) -> str | None:
        return None

    # -- looking back ----------------------------------------------------------------------
    async def changed(self) -> list[list[str]]:
        """The files each turn changed: from its checkpoint to the next one (or to now)."""
        await self.settled()
        turns = self.turns()
        if not turns:
            return []

        def work() -> list[list[str]]:
            with self.store.lock:
                return changes(self.store.snapshot("now").commit)

        def changes(now: str) -> list[list[str]]:
            ends = [t.commit for t in turns[1:]] + [now]
            out: list[list[str]] = []
            for t, end in zip(turns, ends, strict=True):
                if not self.store.exists(t.commit) or not self.store.exists(end):
                    out.append(["(pruned)"])
                    continue
                out.append([p for _, p in self.store.changes(t.commit, end)])
            return out

        return await asyncio.to_thread(work)

    async def rewind(self, turn: Turn, *, files: bool, conversation: bool) -> list[str]:
        """Back to before `turn`: its files, its conversation, or both. Returns what to show."""
        await self.settled()
        out: list[str] = []
        if conversation and not self.conversation_ok(turn):
            return [f"the conversation was compacted since turn {turn.turn}; only its files can be rewound "
                    f"(/rewind {turn.turn} files)"]
        if files:
            if not await asyncio.to_thread(self.store.exists, turn.commit):
                return [f"the checkpoint of turn {turn.turn} was pruned (limits.checkpoint_store_bytes)"]
            try:
                touched, notes = await asyncio.to_thread(self.store.restore, turn.commit, turn.too_big)
            except (CheckpointError, OSError, subprocess.SubprocessError) as e:
                return [f"could not restore the files of turn {turn.turn}: {e}"]
            out.append(f"restored {len(touched)} files to before turn {turn.turn}" +
                       (": " + ", ".join(touched[:10]) + (" …" if len(touched) > 10 else "") if touched else ""))
            out += notes
        if conversation:
            history = self.session.history
            asked = history[turn.history] if turn.history < len(history) else None
            self.rewound_prompt = (asked.content or "") if asked is not None and asked.role == "user" else ""
            self.session.rewind(turn.history)
            turns = self.turns()
            keep = turns.index(turn)
            del turns[keep:]
            self._write({"type": "truncate", "keep": keep})
            out.append(f"conversation rewound to before turn {turn.turn} ({turn.prompt[:60]!r})")
        return out

    async def undo(self) -> list[str]:
        """The files of the last turn not undone yet, back to before it."""
        await self.settled()
        todo = [t for t in self.turns() if not t.undone]
        if not todo:
            return ["nothing to undo"]
        turn = todo[-1]
        out = await self.rewind(turn, files=True, conversation=False)
        if out and out[0].startswith("restored"):
            turn.undone = True
            self._write({"type": "undone", "turn": turn.turn})
        return out

    def conversation_ok(self, turn: Turn) -> bool:
        history = self.session.history
        return turn.history <= len(history) and _mark(history, turn.history) == turn.mark


def _mark(history: list[Message], upto: int) -> str:
    """A fingerprint of the history's first `upto` messages (its last one), to tell whether
    the conversation is still the one a checkpoint was taken in."""
    if upto == 0:
        return ""
    wire = json.dumps(history[upto - 1].to_wire(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(wire.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _nul(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80] or "default"
