"""Tool-use summaries, against the loopback fake server and driven by `ScriptedLLM`: labels
arrive without delaying the loop, through the session's own model client factory."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from nanohermes.turn.agent import Agent
from nanohermes.assemble import build_agent
from nanohermes.config import Config
from nanohermes.common.events import ApprovalReply, ApprovalRequest, Event, Notice, ToolFinished, ToolStarted, TurnEnded
from nanohermes.llm import LLM, OpenAIChat, client_for
from nanohermes.common.messages import Usage
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import Fault, FakeServer, Reply, ScriptedLLM, ScriptItem, call, tool_reply
from nanohermes.tools.files import ListDir, ReadFile
from nanohermes.ui.summaries import INSTRUCTIONS, LABEL_TOKENS, LABEL_WIRE, BatchCall, BatchSummarizer, clean_label


class FeedUI:
    def __init__(self, summarizer: BatchSummarizer) -> None:
        self.summarizer = summarizer
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.summarizer.observe(event)

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        return ApprovalReply("deny")


def run_turn(server: FakeServer | None, ws: Path, labels: list[tuple[str, list[BatchCall]]],
             costs: list[tuple[Usage, str]] | None = None, *, labeller: LLM | None = None,
             agent_llm: LLM | None = None) -> Any:
    spent = costs if costs is not None else []

    async def go() -> Any:
        assert server is not None or (labeller is not None and agent_llm is not None)
        label_llm = labeller or OpenAIChat(model="labeller", base_url=server.base_url, api_key="k", max_retries=0)
        s = BatchSummarizer(llm=label_llm, on_label=lambda label, batch: labels.append((label, batch)),
                            on_usage=lambda usage, model: spent.append((usage, model)))
        ui = FeedUI(s)
        runtime = Runtime(tools=[ListDir(), ReadFile()], config=Config(), workspace=ws, ui=ui, policy=Policy())
        llm = agent_llm or OpenAIChat(model="fake-model", base_url=server.base_url, api_key="k", max_retries=0)
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


def test_the_summarizer_driven_by_scripted_llm(workspace: Path) -> None:
    (workspace / "notes.md").write_text("one\ntwo\n")
    labeller = ScriptedLLM([Reply(text="Read the notes and list the folder.", usage=(40, 7))], model="labeller")
    main = ScriptedLLM([tool_reply(call("read_file", {"path": "notes.md"}), call("list_dir")), Reply(text="Two lines.")])
    labels: list[tuple[str, list[BatchCall]]] = []
    costs: list[tuple[Usage, str]] = []
    result = run_turn(None, workspace, labels, costs, labeller=labeller, agent_llm=main)
    assert result.text == "Two lines."
    assert [(lbl, [c.name for c in batch]) for lbl, batch in labels] == [
        ("Read the notes and list the folder", ["read_file", "list_dir"])]
    assert costs == [(Usage(40, 7), "labeller")]
    (request,) = labeller.requests  # one batch, one label request, and no tools offered to the labeller
    assert request["tools"] == []
    assert request["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
    assert request["messages"][1]["role"] == "user"
    assert request["messages"][1]["content"].startswith("- read_file notes.md -> 1\tone ⏎ 2\ttwo")
    assert labeller.violations == [] and main.violations == []


def test_a_scripted_fault_means_no_label(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    labeller = ScriptedLLM([Fault(status=400, message="no such model")], model="labeller")
    main = ScriptedLLM([tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="done")])
    labels: list[tuple[str, list[BatchCall]]] = []
    costs: list[tuple[Usage, str]] = []
    result = run_turn(None, workspace, labels, costs, labeller=labeller, agent_llm=main)
    assert result.reason == "completed" and result.text == "done"
    assert [(lbl, len(batch)) for lbl, batch in labels] == [("", 1)]
    assert costs == []


def test_a_session_given_a_scripted_llm_labels_with_it(workspace: Path) -> None:
    """The label client comes from the session's factory: a session built on a ScriptedLLM
    (tests, embedders) labels with that same model, not a network client of its own."""
    scripted = ScriptedLLM()

    class Quiet:
        def emit(self, event: Event) -> None:
            pass

        async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
            return ApprovalReply("deny")

    built = build_agent(Config(checkpoints=False), workspace, Quiet(), llm=scripted, save_session=False)
    assert built.agent.llm is scripted
    assert built.make_llm("labeller", **LABEL_WIRE) is scripted
    assert built.make_llm() is scripted


def label_one_batch(s: BatchSummarizer) -> None:
    """One finished call, then the turn's end: the batch goes to the labeller."""
    s.observe(ToolStarted(call_id="c1", name="list_dir", arguments={}, summary="."))
    s.observe(ToolFinished(call_id="c1", name="list_dir", result="a.txt", is_error=False, elapsed=0.0))
    s.observe(TurnEnded(reason="completed", turns=1, tool_calls=1, text=""))


def label_session_config(server: FakeServer, **extra: Any) -> Config:
    return Config(base_url=server.base_url, api_key="k", model="fake-model", reasoning_effort="high", **extra)


@pytest.mark.parametrize("wire, cap_key", [("chat", "max_tokens"), ("responses", "max_output_tokens")])
def test_the_label_request_is_capped_and_sent_on_the_session_s_wire(workspace: Path, wire: str, cap_key: str) -> None:
    seen: list[dict[str, Any]] = []

    def label(body: dict[str, Any]) -> Reply:
        seen.append(body)
        return Reply(text="Read a file", usage=(30, 3))

    with FakeServer(default=label) as server:
        cfg = label_session_config(server, wire_api=wire)

        async def go() -> list[str]:
            got: list[str] = []
            s = BatchSummarizer(llm=client_for(cfg, model="labeller", **LABEL_WIRE),
                                on_label=lambda label, batch: got.append(label))
            label_one_batch(s)
            await asyncio.wait_for(s.wait(), 30)
            await s.aclose()
            return got

        got = asyncio.run(go())
        paths = list(server.paths)
    assert got == ["Read a file"]
    assert paths == ["/v1/chat/completions" if wire == "chat" else "/v1/responses"]
    (body,) = seen
    assert body["model"] == "labeller" and body[cap_key] == LABEL_TOKENS
    assert "reasoning_effort" not in body and "reasoning" not in body  # the main model's effort is not the labeller's


def test_a_label_request_is_retried_like_the_agent_s_without_notices(workspace: Path) -> None:
    """Retries come from the session's config (max_retries); a retried label shows no warning."""
    answers: deque[Any] = deque([Fault(status=503, message="busy"), Reply(text="List the folder")])
    notices: list[Event] = []

    class Recording:
        def emit(self, event: Event) -> None:
            notices.append(event)

        async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
            return ApprovalReply("deny")

    with FakeServer(default=lambda body: answers.popleft()) as server:
        cfg = label_session_config(server, max_retries=2, checkpoints=False)

        async def go() -> list[str]:
            built = build_agent(cfg, workspace, Recording(), save_session=False)
            got: list[str] = []
            s = BatchSummarizer(llm=built.make_llm("labeller", **LABEL_WIRE), on_label=lambda label, batch: got.append(label))
            label_one_batch(s)
            await asyncio.wait_for(s.wait(), 30)
            await s.aclose()
            await built.agent.llm.aclose()  # type: ignore[attr-defined]
            return got

        got = asyncio.run(go())
        requests = len(server.requests)
    assert got == ["List the folder"]
    assert requests == 2  # the 503, then the retry that answered
    assert [e for e in notices if isinstance(e, Notice)] == []


def test_without_a_label_model_the_batch_gets_the_built_in_label_at_once() -> None:
    got: list[tuple[str, list[str]]] = []

    async def go() -> None:
        s = BatchSummarizer(llm=None, on_label=lambda label, batch: got.append((label, [c.name for c in batch])))
        label_one_batch(s)
        assert got == [("", ["list_dir"])]  # before any await: no request was made
        await s.aclose()

    asyncio.run(go())
    assert got == [("", ["list_dir"])]
