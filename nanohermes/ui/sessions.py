"""Showing saved sessions to people: the `nanohermes sessions` table and the resume picker."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TextIO

from nanohermes.turn.session import SessionInfo


def when(info: SessionInfo) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))


def format_sessions(sessions: Sequence[SessionInfo]) -> str:
    """One line per session, the most recent first: ID, last used, turns, title."""
    if not sessions:
        return "no saved sessions for this workspace"
    rows = [f"{'ID':<22}  {'LAST USED':<16}  {'TURNS':>5}  TITLE"]
    rows += [f"{s.id:<22}  {when(s):<16}  {s.turns:>5}  {s.title}" for s in sessions]
    return "\n".join(rows)


def pick_session(sessions: Sequence[SessionInfo], inp: TextIO, out: TextIO, *, shown: int = 20) -> SessionInfo | None:
    """A numbered list on `out`; the answer is read from `inp`. Enter picks the most recent."""
    if not sessions:
        return None
    for n, s in enumerate(sessions[:shown], 1):
        out.write(f"{n:>3}. {when(s)}  {s.turns:>3} turns  {s.title}\n")
    if len(sessions) > shown:
        out.write(f"     … {len(sessions) - shown} older sessions not shown (resume them by ID)\n")
    while True:
        out.write(f"Resume which session? [1-{min(len(sessions), shown)}, Enter = 1, q = cancel]: ")
        out.flush()
        answer = inp.readline()
        if not answer or answer.strip().lower() in ("q", "quit"):
            return None
        choice = answer.strip() or "1"
        if choice.isdigit() and 1 <= int(choice) <= min(len(sessions), shown):
            return sessions[int(choice) - 1]
        out.write(f"`{choice}` is not one of the numbers above\n")
