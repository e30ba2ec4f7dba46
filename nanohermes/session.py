"""Transcripts: one append-only JSON-lines file per session.

The first line is the session's metadata; every later line is one message in its wire
form, written before the next model call so a crash loses at most the call in flight.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from nanohermes.config import data_home
from nanohermes.messages import Message
from nanohermes.redact import redact


def project_key(workspace: Path) -> str:
    """A folder name for the workspace: readable, and unique by its real path."""
    real = str(workspace.resolve())
    return f"{workspace.name or 'root'}-{hashlib.sha1(real.encode()).hexdigest()[:8]}"


def sessions_dir(workspace: Path) -> Path:
    return data_home() / "sessions" / project_key(workspace)


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


@dataclass
class Transcript:
    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    _f: IO[str] | None = field(default=None, init=False, repr=False)

    @property
    def id(self) -> str:
        return self.path.stem

    @property
    def dir(self) -> Path:
        """Side files of this session (persisted tool results)."""
        return self.path.with_suffix("")

    @classmethod
    def create(cls, workspace: Path, **meta: Any) -> Transcript:
        folder = sessions_dir(workspace)
        folder.mkdir(parents=True, exist_ok=True)
        t = cls(folder / f"{new_session_id()}.jsonl",
                {"workspace": str(workspace), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **meta})
        t._write({"type": "meta", **t.meta})
        return t

    def _write(self, obj: dict[str, Any]) -> None:
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")
        self._f.write(redact(json.dumps(obj, ensure_ascii=False)) + "\n")
        self._f.flush()

    def append(self, message: Message) -> None:
        self._write({"type": "message", "message": message.to_wire()})

    def sync(self) -> None:
        """End of a turn: make it durable."""
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self.sync()
            self._f.close()
            self._f = None
