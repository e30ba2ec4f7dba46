"""What a checkpoint holds: a path's content as a `Version`, a `Change` of a path from one
version to another, what a `Scan` found, and the `CheckpointError` every part raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
