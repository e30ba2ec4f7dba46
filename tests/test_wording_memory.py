"""What memory_save and memory_search say, each message once, over a real SQLite file. The other
tests assert what the store holds, the rows found and their order; rewording a message changes
one row here."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from exec_support import call, make_runtime

from nanohermes.common.dirs import data_home


def saved(*texts: str) -> Callable[[Path], object]:
    def save(ws: Path) -> None:
        for text in texts:
            call(make_runtime(ws), "memory_save", text=text)
    return save


def corrupt(ws: Path) -> None:
    (data_home() / "memory.db").parent.mkdir(parents=True, exist_ok=True)
    (data_home() / "memory.db").write_bytes(b"not sqlite" * 100)


# (id, what the store holds first, the call, the exact text: {today}, {db} filled in)
MEMORY: list[tuple[str, Callable[[Path], object], str, dict[str, str], str]] = [
    ("saved", saved(), "memory_save", {"text": "Deploys go\nthrough CI only."},
     "Remembered (#1, project): Deploys go through CI only."),
    ("already", saved("Use ruff."), "memory_save", {"text": "use Ruff"},
     "Already remembered (#1, {today}, project): Use ruff.\nNot saved again."),
    ("found", saved("Use ruff for linting."), "memory_search", {"query": "linting"},
     '1 memories match "linting", best first:\n1. [{today}, project, #1] Use ruff for linting.'),
    ("none-found", saved("Alpha."), "memory_search", {"query": "zebra"},
     'No memories match "zebra" (1 memories in this project and global); try other words'),
    ("empty-text", saved(), "memory_save", {"text": " "},
     "ERROR: memory_save: text must not be empty; write the fact to remember as one sentence"),
    ("empty-query", saved(), "memory_search", {"query": ""},
     "ERROR: memory_search: query must not be empty; pass the words to look for"),
    ("corrupt", corrupt, "memory_save", {"text": "anything"},
     "ERROR: memory database {db} is corrupt (file is not a database); move it away (mv {db} {db}.bak) and a new one "
     "is started on the next call"),
]


@pytest.mark.parametrize("before,tool,args,text", [r[1:] for r in MEMORY], ids=[r[0] for r in MEMORY])
def test_memory_says(workspace: Path, before: Callable[[Path], object], tool: str, args: dict[str, str],
                     text: str) -> None:
    before(workspace)
    out = call(make_runtime(workspace), tool, **args)
    assert out == text.format(today=datetime.now(UTC).date().isoformat(), db=data_home() / "memory.db")
