"""The system prompt: who the agent is, where it works, and the facts of its environment."""

from __future__ import annotations

import platform
import time
from pathlib import Path

IDENTITY = """You are nanohermes, a coding agent working in the user's repository through tools.
Work carefully and concretely: read before you edit, keep changes small and correct, and run
checks when they exist. Tool results may be truncated; when a result says so, follow its note
(offset/limit, a narrower pattern) instead of guessing. When a tool returns ERROR, read the
message and adjust; do not repeat the same failing call. When a call is denied by the user,
do not retry it: ask what to do instead. Answer concisely when you are done."""


def environment_facts(workspace: Path) -> str:
    return "\n".join([
        f"Workspace: {workspace}",
        f"Platform: {platform.system()} {platform.release()} ({platform.machine()})",
        f"Date: {time.strftime('%Y-%m-%d')}",
    ])


def system_prompt(workspace: Path, *, extra: list[str] | None = None) -> str:
    parts = [IDENTITY, environment_facts(workspace), *(extra or [])]
    return "\n\n".join(p for p in parts if p)
