"""What compaction and cut results say, each message once. The other tests assert decisions and
state; rewording a message changes one row here (see tests/wording_support.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from exec_support import call
from wording_support import said

from nanohermes.turn import persisted
from nanohermes.turn.agent import Agent
from nanohermes.assemble import build_agent
from nanohermes.turn.compact import fit
from nanohermes.config import Config
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.common.messages import Message, ToolCall
from nanohermes.testing import Reply, ScriptedLLM

# -- compaction and cut results -------------------------------------------------------------------

def compacting(ws: Path, *replies: Reply, **limits: int) -> tuple[Agent, RecordingUI]:
    """An agent whose model answers `replies` (summaries among them), with `limits` lowered."""
    ui = RecordingUI()
    config = Config(model="fake-model", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0,
                    limits=dict(limits))
    return build_agent(config, ws, ui, llm=ScriptedLLM(list(replies))).agent, ui


def compacted(ws: Path) -> list[str]:
    """A manual compaction with a focus, a todo list in force: what the summariser was asked,
    and what the model reads in place of the turns."""
    agent, _ = compacting(ws, Reply(text="the summary"))
    call(agent.runtime, "todo_write", todos=[{"content": "write the parser", "status": "in_progress"}])
    agent.session.history = [Message.user("first"), Message("assistant", "a"), Message.user("second"),
                             Message("assistant", "b")]
    asyncio.run(agent.compactor.manual(agent.session, "the parser API"))  # type: ignore[union-attr]
    llm = agent.llm
    assert isinstance(llm, ScriptedLLM)
    return [llm.requests[0]["messages"][1]["content"].rsplit("\n", 1)[1], agent.session.history[0].content or ""]


def cut_told(ws: Path, *sizes: int) -> list[str]:
    """An overflow cutting recent results of `sizes` chars: the first cut result, and the notice."""
    agent, ui = compacting(ws, Reply(text="s"), compact_keep_chars=4000)
    names = [f"c{i}" for i in range(len(sizes))]
    agent.session.history = [Message.user("go"), Message("assistant", None, [ToolCall(n, "x", "{}") for n in names]),
                             *(Message.tool(n, "r" * size) for n, size in zip(names, sizes, strict=True))]
    asyncio.run(agent.compactor.on_too_long(agent.session))  # type: ignore[union-attr]
    return [agent.session.history[2].content or "", ui.of(Notice)[-1].text.replace(str(agent.session.folder), "{folder}")]


COMPACTION: list[tuple[str, Callable[[Path], str], str]] = [
    ("focus", lambda ws: compacted(ws)[0], "Summarise the conversation above. Focus especially on: the parser API"),
    ("summary", lambda ws: compacted(ws)[1],
     "<conversation-summary>\nThe earlier part of this conversation (3 messages) was compacted. Summary:\nthe summary\n"
     "</conversation-summary>\n\nCurrent todo list (kept from before compacting):\n[~] 1. write the parser"),
    ("nothing-to-compact", lambda ws: (lambda agent, ui: asyncio.run(agent.compactor.compact(agent.session)) or  # type: ignore[union-attr]
                                       ui.of(Notice)[-1].text)(*compacting(ws)),
     "cannot compact (requested): no older turns to summarise"),
    ("omitted-to-fit", lambda ws: fit(["GOAL", "1" * 100, "2" * 100, "3" * 100, "LAST"], 230).split("\n\n")[1],
     "[… 2 older messages omitted to fit the summary request …]"),
    ("one-result-cut", lambda ws: cut_told(ws, 5000)[1],
     "cut 1 recent tool result from 5000 to {any} chars (its first 500 chars, with a note) to fit the model's "
     "context; the whole result is saved in {folder}/tool-results"),
    ("results-cut", lambda ws: cut_told(ws, 5000, 5000, 5000)[1],
     "cut 3 recent tool results from 15000 to {any} chars (the first 500 chars of each, with a note) to fit the "
     "model's context; the whole results are saved in {folder}/tool-results"),
    ("saved-preview", lambda ws: persisted.cut("w" * 1000, "c1", ws, 10).replace(str(ws), "{folder}"),
     '<persisted-output path="{folder}/tool-results/c1.txt">\nwwwwwwwwww\n… 990 of 1000 chars cut to fit the model\'s '
     "context; the whole result is in the file above (read it in parts with read_file offset/limit)\n"
     "</persisted-output>"),
    ("unsaved-preview", lambda ws: persisted.cut("w" * 1000, "c1", None, 10),
     "<cut-output>\nwwwwwwwwww\n… 990 of 1000 chars cut to fit the model's context; not saved, the session is not "
     "recorded: narrow the call to see more\n</cut-output>"),
]


@pytest.mark.parametrize("scenario,text", [r[1:] for r in COMPACTION], ids=[r[0] for r in COMPACTION])
def test_compaction_says(workspace: Path, scenario: Callable[[Path], str], text: str) -> None:
    out = scenario(workspace)
    assert said(out, text.replace("{folder}", "{{folder}}")), out
