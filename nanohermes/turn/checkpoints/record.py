"""Checkpoints of a session: a scan before and after each turn (an agent's `TurnHooks`), so a
turn records the paths it changed with both contents, and the way back (/undo, /rewind, /redo).

The scan before each turn takes in whatever the person did between turns. It is taken when
the turn is first about to run something that may change files (a write, a command, a
sub-agent), or at its start while a background task runs: until then nothing of the turn's has
changed any, and a turn that only answers or reads is recorded without a scan at all. The scan
after it is the turn's own changes, recorded with both contents (pinned in the store, so they
outlive the user's repository) in the session's `checkpoints.jsonl`. The scan after a turn
names the files it made that run code later (`runs_later`: git hooks, CI workflows, package
scripts, ...) in `FilesChanged.runs_later` and a warning, and so does a look at the start-up
files (`.pth`, `sitecustomize.py`) of the workspace's virtual environments, which the
checkpoints leave out. A Stop hook's changes count as the turn's when the turn ran something
that could change files, else as the person's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from nanohermes.common.budget import plural
from nanohermes.turn.checkpoints.journal import Journal, Listed, Turn, mark
from nanohermes.turn.checkpoints.store import Store
from nanohermes.turn.checkpoints.undo import Resolver, Restorer
from nanohermes.turn.checkpoints.versions import Change, CheckpointError, Scan
from nanohermes.common.events import Event, FilesChanged, Notice
from nanohermes.guard.gitmeta import hooks_folders
from nanohermes.guard.runs_later import gits_changed, runs_later, startup_changed, startup_files

if TYPE_CHECKING:
    from nanohermes.guard.runs_later import Startup
    from nanohermes.turn.session import Session


class Checkpoints:
    """Per session: a scan before and after each turn (an agent's TurnHooks), undo and redo."""

    def __init__(self, session: Session, store: Store, emit: Callable[[Event], None]) -> None:
        self.session = session
        self.store = store
        self.emit = emit
        self.journal = Journal(session)
        self.restorer = Restorer(store, self.journal, session)
        self._warned: set[str] = set()
        self._warming: threading.Thread | None = None
        self._waiting: Turn | None = None  # the turn running now, until something of it may change files
        self._pending: asyncio.Future[None] | None = None  # the scan before this turn, while it runs
        self._ending: asyncio.Future[None] | None = None  # the scan after the last turn, while it runs
        self._open: Turn | None = None  # the turn running now, once its scan before is taken
        self.disabled = ""  # why checkpoints stopped for this session
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

    @property
    def rewound_prompt(self) -> str:
        """The prompt of the turn the last conversation rewind took back."""
        return self.restorer.rewound_prompt

    def turns(self) -> list[Turn]:
        """This session's turns, read from its folder when the session changed (/resume)."""
        return self.journal.turns()

    # -- around each turn ------------------------------------------------------------------
    async def prompt_submitted(self, prompt: str) -> str | None:
        """The turn begins: the scan that takes in what changed since the last turn (the
        person's edits) waits until the turn is about to run something that may change files
        (`settled(changing=True)`), since nothing of the turn's changes any before that."""
        await self.settled()  # a cancelled turn's scan may still be finishing
        if self._ending is not None:
            await asyncio.shield(self._ending)
        if self.disabled:
            return prompt
        turns = self.turns()
        history = len(self.session.history)
        turn = Turn(turn=(turns[-1].turn + 1 if turns else 1), prompt=prompt[:200], time=time.time(),  # for the listing
                    history=history, mark=mark(self.session.history, history), state=self.session.mark())
        self._waiting = turn
        return prompt

    async def settled(self, changing: bool = False) -> None:
        """The scan before the current turn is taken (or failed, and said so), started first
        when what runs next may change files (`changing`) and it was not yet."""
        if changing and self._waiting is not None:
            turn, self._waiting = self._waiting, None
            # Shielded from the turn: cancelling the turn must not leave the scan half-taken.
            self._pending = asyncio.ensure_future(self._before(turn))
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
        self._write_turn(turn)
        self._open = turn

    async def stopping(self, answer: str) -> str | None:
        return None

    async def ended(self) -> None:
        """The turn is over (answered, stopped, failed or interrupted): the scan after it
        records what its tools and commands changed."""
        await self.settled()
        if (quiet := self._waiting) is not None:  # nothing of it could change files: no scan to take
            self._waiting = None
            self._record_quiet(quiet)
            return
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
        self.journal.write({"type": "ended", "turn": turn.turn, "commit": commit,
                     "changes": [c.to_json() for c in scan.changes]})
        later = tuple({w.split(": ", 1)[0]: w for w in later}.values())  # a venv the checkpoints keep, named once
        self.emit(FilesChanged(turn=turn.turn, paths=tuple(turn.paths), runs_later=later))
        if later:
            one = len(later) == 1
            self.emit(Notice(level="warning", text=(
                f"{plural(len(later), 'file')} this turn created or changed {'runs' if one else 'run'} code later "
                f"without anyone typing {'its' if one else 'their'} name; read {'it' if one else 'them'} before "
                "the next commit, push, build or test run: " + "; ".join(later))))

    def _record_quiet(self, turn: Turn) -> None:
        """A turn that ran nothing that could change files, kept (its place in the
        conversation, for /rewind) with no changes."""
        turn.changes = []
        self._write_turn(turn)
        self.journal.write({"type": "ended", "turn": turn.turn, "commit": "", "changes": []})
        self.emit(FilesChanged(turn=turn.turn, paths=()))

    def _write_turn(self, turn: Turn) -> None:
        self.turns().append(turn)
        self.journal.write({"type": "turn", "turn": turn.turn, "prompt": turn.prompt, "time": turn.time,
                            "history": turn.history, "mark": turn.mark,
                            "state": self.session.saved_state(turn.state or {})})

    def _runs_later(self, changes: Iterable[Change]) -> tuple[str, ...]:
        """`path: why` for each file the turn created or changed that runs code later. A file
        of which only a part runs code is named when that part changed (both contents read
        from the store), or when either content was too big to keep."""
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
        return startup_files(self.store.workspace, self.store.limits.startup_scan_folders)

    def _startup_changed(self) -> tuple[str, ...]:
        """`path: why` for each start-up file of the workspace's virtual environments, and each
        subfolder's `.git` leading to a planted repository, the turn created or changed: the
        checkpoints leave those out."""
        if self._startup is None:
            return ()
        after = self._look_startup()
        return (*startup_changed(self._startup, after), *gits_changed(self._startup, after, self.store.workspace))

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
        return await self.restorer.rewind(turn, files=files, conversation=conversation, resolve=resolve)

    async def undo(self, resolve: Resolver | None = None) -> list[str]:
        """The files of the last turn that changed any and is not undone yet, back to before it."""
        await self.settled()
        return await self.restorer.undo(resolve)

    async def redo(self, resolve: Resolver | None = None) -> list[str]:
        """What the last /undo or /rewind of files replaced, back again."""
        await self.settled()
        return await self.restorer.redo(resolve)

    def conversation_ok(self, turn: Turn) -> bool:
        """Whether the conversation is still the one `turn` was taken in (not compacted since)."""
        return self.restorer.conversation_ok(turn)
