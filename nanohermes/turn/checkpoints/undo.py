"""Taking turns back: /undo, /rewind (files, conversation or both) and /redo.

Undoing puts back only the paths a turn changed: a path whose content changed since the turn
is the person's, and they choose (`Resolver`: keep theirs, take the checkpoint's, or merge
both with git's three-way merge); a file the turn did not create is never deleted. What an
undo replaced is recorded the same way as a turn, so /redo brings it back.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import stat
import subprocess
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nanohermes.common.budget import plural
from nanohermes.turn.checkpoints.journal import Journal, Turn, Undo, mark
from nanohermes.turn.checkpoints.scan import beyond_link
from nanohermes.turn.checkpoints.store import Store
from nanohermes.turn.checkpoints.versions import Change, CheckpointError, Version
from nanohermes.common.dirs import open_private

if TYPE_CHECKING:
    from nanohermes.turn.session import Session

_DIFF_LINES = 40  # lines of a conflict's diff shown before the question

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


class Restorer:
    """Takes back a session's turns in its files and its conversation, and brings back what
    an undo replaced. `rewound_prompt`: the prompt of the turn the last conversation rewind
    took back."""

    def __init__(self, store: Store, journal: Journal, session: Session) -> None:
        self.store = store
        self.journal = journal
        self.session = session
        self.rewound_prompt = ""

    async def rewind(self, turn: Turn, *, files: bool, conversation: bool, resolve: Resolver | None = None) -> list[str]:
        """Back to before `turn`: its files (and those of the turns after it), its
        conversation, or both. Returns what to show."""
        out: list[str] = []
        if conversation and not self.conversation_ok(turn):
            return [f"the conversation was compacted since turn {turn.turn}; only its files can be rewound "
                    f"(/rewind {turn.turn} files)"]
        restored: list[Path] = []
        if files:
            steps = [t for t in reversed(self.journal.turns()) if t.turn >= turn.turn and not t.undone]
            lines = await self._undo_turns(steps, f"before turn {turn.turn}", resolve, restored)
            if lines is None:
                return [*out, f"the checkpoint of turn {turn.turn} was pruned (limits.checkpoint_store_bytes)"]
            out += lines
        if conversation:
            history = self.session.history
            asked = history[turn.history] if turn.history < len(history) else None
            self.rewound_prompt = (asked.content or "") if asked is not None and asked.role == "user" else ""
            self.session.rewind(turn.history, turn.state)
            if turn.state is None:  # an earlier version's checkpoint: what the model saw is not known
                from nanohermes.tools.fileops import forget_seen  # the file tools' guard: loaded when it is used

                forget_seen(self.session.state)
            turns = self.journal.turns()
            keep = turns.index(turn)
            del turns[keep:]
            self.journal.write({"type": "truncate", "keep": keep})
            out.append(f"conversation rewound to before turn {turn.turn} ({turn.prompt[:60]!r})")
        self._files_restored(restored)  # after the state went back: as they are now
        return out

    async def undo(self, resolve: Resolver | None = None) -> list[str]:
        """The files of the last turn that changed any and is not undone yet, back to before it."""
        todo = [t for t in self.journal.turns() if not t.undone and (t.changes is None or t.changes)]
        if not todo:
            return ["nothing to undo"]
        turn = todo[-1]
        restored: list[Path] = []
        lines = await self._undo_turns([turn], f"before turn {turn.turn}", resolve, restored)
        if lines is None:
            return [f"the checkpoint of turn {turn.turn} was pruned (limits.checkpoint_store_bytes)"]
        self._files_restored(restored)
        return lines

    async def redo(self, resolve: Resolver | None = None) -> list[str]:
        """What the last /undo or /rewind of files replaced, back again."""
        undo = next((u for u in reversed(self.journal.undos()) if not u.redone), None)
        if undo is None:
            return ["nothing to redo"]
        what = ", ".join(f"turn {n}" for n in undo.turns)
        if undo.commit and undo.commit not in await asyncio.to_thread(self.store.refs):
            return [f"what the undo of {what} replaced was pruned (limits.checkpoint_store_bytes)"]
        result = await self._revert([(f"the undo of {what}", undo.changes)], resolve)
        if isinstance(result, str):
            return [result]
        changed, commit, lines = result
        self._files_restored([self.store.workspace / c.path for c in changed])
        undo.redone = True
        for t in self.journal.turns():
            t.undone = t.undone and t.turn not in undo.turns
        self.journal.write({"type": "redo", "undo": undo.id, "commit": commit, "changes": [c.to_json() for c in changed]})
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
        undos = self.journal.undos()
        undo = Undo(id=max((u.id for u in undos), default=0) + 1, turns=[t.turn for t in steps],
                    commit=commit, changes=changed)
        undos.append(undo)
        for t in steps:
            t.undone = True
        self.journal.write({"type": "undo", "id": undo.id, "turns": undo.turns, "commit": commit,
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
            _, put_notes = await asyncio.to_thread(put_back, store, targets)
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
        merged = await asyncio.to_thread(merge, self.store, conflict.mine, conflict.base, conflict.theirs,
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

    def _files_restored(self, paths: list[Path]) -> None:
        """nanohermes put these files back: each counts as seen as it is now, so the model may
        change it without reading it again (nothing of anyone's is lost: what it replaced is
        kept for /redo)."""
        from nanohermes.tools.fileops import remember  # the file tools' guard: loaded when it is used

        for path in paths:
            remember(self.session.state, Path(os.path.realpath(path)))

    def conversation_ok(self, turn: Turn) -> bool:
        history = self.session.history
        return turn.history <= len(history) and mark(history, turn.history) == turn.mark


def _restored(changes: list[Change], where: str) -> str:
    paths = [c.path for c in changes]
    if not paths:
        return f"no files restored {where}"
    shown = ", ".join(paths[:10]) + (" …" if len(paths) > 10 else "")
    return f"restored {plural(len(paths), 'file')} {where}: {shown}"


def put_back(store: Store, targets: dict[str, Version | None]) -> tuple[list[str], list[str]]:
    """Make these paths hold these contents (None: delete the file): (paths changed,
    notes on those left alone). Never through a symbolic link, never over a folder that
    holds something."""
    with store.lock:
        return _put(store, targets)


def _put(store: Store, targets: dict[str, Version | None]) -> tuple[list[str], list[str]]:
    root = store.workspace
    done: list[str] = []
    notes: list[str] = []
    links: dict[str, bool] = {}
    writes: dict[str, Version] = {}
    for path, v in sorted(targets.items()):
        if beyond_link(root, path, links):
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
    lost = store.shadow.missing(sorted({v.blob for v in writes.values()}), borrow=True)
    for path in [p for p, v in writes.items() if v.blob in lost]:
        notes.append(f"the content of {path} to restore is no longer kept; left as it is")
        del writes[path]
    if writes:
        tmp = store.root / f"restore-{os.getpid()}-{threading.get_ident()}"
        try:
            listing = b"".join(f"{v.mode} {v.blob}\t".encode() + p.encode("utf-8", "surrogateescape") + b"\0"
                               for p, v in writes.items())
            store.shadow.git("update-index", "-z", "--index-info", stdin=listing, index=tmp)
            store.shadow.git("checkout-index", "-a", "-f", index=tmp, borrow=True)
        finally:
            tmp.unlink(missing_ok=True)
        done += writes
    return sorted(done), notes


def merge(store: Store, mine: Version, base: Version, theirs: Version,
          labels: tuple[str, str, str]) -> tuple[Version, int] | None:
    """Three-way merge of text files (git merge-file): (the merged content, conflicts
    marked in it), or None when they cannot be merged (binary)."""
    with store.lock:
        with tempfile.TemporaryDirectory(dir=store.root) as tmp:
            names = []
            for name, v in zip(("mine", "base", "theirs"), (mine, base, theirs), strict=True):
                path = Path(tmp) / name
                with open_private(path, "wb", encoding=None) as f:
                    f.write(store.shadow.git("cat-file", "blob", v.blob, borrow=True))
                names.append(str(path))
            p = store.shadow.run_git("merge-file", "-p", "-L", labels[0], "-L", labels[1], "-L", labels[2], *names)
        if not 0 <= p.returncode < 128:
            return None
        blob = store.shadow.text("hash-object", "-w", "--stdin", stdin=p.stdout).strip()
        store.grew(len(p.stdout))
        return Version(mine.mode, blob), p.returncode


def _remove_empty_parents(folder: Path, root: Path) -> None:
    while folder != root and folder.is_relative_to(root) and folder.is_dir() and not folder.is_symlink():
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
