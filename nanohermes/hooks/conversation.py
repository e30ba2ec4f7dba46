"""What the hooks and the gate read of the session: its id, transcript, folder and history.

The turn's `Session` is a `Conversation`; naming what they read as a protocol keeps the hooks
and the safety core from importing the turn. `Unrecorded` is none yet (as a fresh `Session`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nanohermes.common.messages import Message


class Conversation(Protocol):
    """What hooks are told of the session: its id, transcript, folder and history (the turn's
    `Session` is one; the safety core names what it reads of it and imports no turn)."""

    @property
    def id(self) -> str: ...

    @property
    def path(self) -> Path | None: ...

    @property
    def folder(self) -> Path | None: ...

    @property
    def history(self) -> list[Message]: ...


@dataclass(frozen=True)
class Unrecorded:
    """No session yet: no id, transcript or folder, nothing said (as a fresh `Session` is)."""

    id: str = ""
    path: Path | None = None
    folder: Path | None = None
    history: list[Message] = field(default_factory=list)
