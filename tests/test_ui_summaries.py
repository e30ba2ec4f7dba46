"""Tool-use summaries against the loopback fake server: labels arrive without delaying the loop."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from nanohermes.agent import Agent
from nanohermes.config import Config
from nanohermes.events import ApprovalReply, ApprovalRequest, Event
from nanohermes.llm import OpenAIChat
from nanohermes.messages import Usage
from nanohermes.permissions import Policy
from nanohermes.runtime import Runtime
from nanohermes.testing import Fault, FakeServer, Reply, ScriptItem, call, tool_reply
from nanohermes.tools.files import ListDir, ReadFile
from nanohermes.ui.summaries import INSTRUCTIONS, BatchCall, BatchSummarizer, clean_label


class FeedUI:
    def __init__(self, summarizer: BatchSummarizer) -> None:
        self.summarizer = summarizer
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.summarizer.observe(event)

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        return ApprovalReply("deny")


def run_turn(server: FakeServer, ws: Path, labels: list[tuple[str, list[BatchCall]]],
             costs: list[tuple[Usage, str]] | None = None) -> Any:
    spent = costs if costs is not None else []

    async def go() -> Any:
        s = BatchSummarizer(model="labeller", base_url=server.base_url, api_key="k",
                            on_label=lambda label, batch: labels.append((label, batch)),
                            on_usage=lambda usage, model: spent.append((usage, model)))
        ui = FeedUI(s)
        runtime = Runtime(tools=[ListDir(), ReadFile()], config=Config(), workspace=ws, ui=ui, policy=Policy())
        llm = OpenAIChat(model="fake-model", base_url=server.base_url, api_key="k", max_retries=0)
        agent = Agent(llm=llm, runtime=runtime, ui=ui, system_prompt="sys")
        result = await agent.ask("read the notes")
        await asyncio.wait_for(s.wait(), 30)
        await s.aclose()
        return result

    return asyncio.run(go())


def router(main: list[ScriptItem], label: Any) -> Any:
    queue = deque(main)

    def route(body: dict[str, Any]) -> Any:
        if body["model"] == "labeller":
            return label(body)
        item = queue.popleft()
        return item if isinstance(item, (Reply, Fault)) else item(body)

    return route


def test_label_arrives_while_the_next_model_call_runs(workspace: Path) -> None:
    (workspace / "notes.md").write_text("one\ntwo\n")
    second_call = threading.Event()
    seen: list[dict[str, Any]] = []

    def label(body: dict[str, Any]) -> Any:
        seen.append(body)
        # Answer only once the loop has made its next model call: had the summary delayed
        # that call, this would wait out its 30 s and the label would be missing.
        return (Reply(text='"Read the notes file."\nsecond line', usage=(70, 6)) if second_call.wait(30)
                else Fault(status=500))

    def answer(body: dict[str, Any]) -> Reply:
        second_call.set()
        return Reply(text="It has two lines.")

    labels: list[tuple[str, list[BatchCall]]] = []
    costs: list[tuple[Usage, str]] = []
    with FakeServer(default=router([tool_reply(call("read_file", {"path": "notes.md"}), call("list_dir")), answer],
                                   label)) as server:
        result = run_turn(server, workspace, labels, costs)
    assert costs == [(Usage(70, 6), "labeller")]  # metered with the session, at the label model's price
    assert result.text == "It has two lines."
    assert [(lbl, [c.name for c in batch]) for lbl, batch in labels] == [("Read the notes file", ["read_file", "list_dir"])]
    msgs = seen[0]["messages"]
    assert msgs[0] == {"role": "system", "content": INSTRUCTIONS}
    assert "- read_file notes.md -> 1\tone ⏎ 2\ttwo" in msgs[1]["content"]
    assert server.violations == []


def test_a_failed_label_is_ignored(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    labels: list[tuple[str, list[BatchCall]]] = []
    script = [tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="done")]
    with FakeServer(default=router(script, lambda body: Fault(status=500, message="summary model down"))) as server:
        result = run_turn(server, workspace, labels)
    assert result.reason == "completed" and result.text == "done"
    assert [(lbl, len(batch)) for lbl, batch in labels] == [("", 1)]  # the front end falls back to tool names


@pytest.mark.parametrize("raw, label", [
    ('"Read config and list the tests."', "Read config and list the tests"),
    ("\n\nLabel: Fix the parser\nbecause...", "Fix the parser"),
    ("`Add tests`", "Add tests"),
    ("x" * 80, "x" * 49 + "…"),
    ("", ""),
])
def test_clean_label_is_one_line_of_at_most_50_chars(raw: str, label: str) -> None:
    assert clean_label(raw) == label
    assert len(clean_label(raw)) <= 50
