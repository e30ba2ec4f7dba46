"""The session's record of its checkpoints: each `Turn` (its prompt, its place in the
conversation, the files it changed) and each `Undo`, kept in `checkpoints.jsonl` in the
session's folder (an unrecorded session keeps its list in memory only), and read back when
the session changes (/resume)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.turn.checkpoints.versions import Change
from nanohermes.common.dirs import open_private
from nanohermes.common.messages import Message

if TYPE_CHECKING:
    from nanohermes.turn.session import Session


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


@dataclass(frozen=True)
class Listed:
    turn: Turn
    paths: list[str] | None  # None: not recorded
    pruned: bool


class Journal:
    """This session's turns and undos, as its `checkpoints.jsonl` holds them."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._turns: list[Turn] = []
        self._undos: list[Undo] = []
        self._session: str | None = None

    def _file(self) -> Path | None:
        t = self.session.transcript  # an unrecorded session keeps its list in memory only
        return t.dir / "checkpoints.jsonl" if t is not None else None

    def turns(self) -> list[Turn]:
        """This session's turns, read from its folder when the session changed (/resume)."""
        self._loaded()
        return self._turns

    def undos(self) -> list[Undo]:
        """This session's undos, read as its turns are."""
        self._loaded()
        return self._undos

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
                                   state=self.session.state_of(saved) if isinstance(saved, dict) else None)
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

    def write(self, rec: dict[str, Any]) -> None:
        path = self._file()
        if path is None:
            return
        with open_private(path, "a") as f:  # 0600, in a 0700 session folder
            # A path that is not UTF-8 holds an escaped byte (surrogateescape): JSON's \u escape
            # keeps it, and reading it back gives the same path.
            f.write(json.dumps(rec) + "\n")


def mark(history: list[Message], upto: int) -> str:
    """A fingerprint of the history's first `upto` messages (its last one), to tell whether
    the conversation is still the one a checkpoint was taken in."""
    if upto == 0:
        return ""
    wire = json.dumps(history[upto - 1].to_wire(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(wire.encode("utf-8", "surrogatepass")).hexdigest()[:16]

