"""Reasoning models: thinking kept out of the answer, shown apart, and passed back to the
providers that need it; `reasoning_effort` sent only when set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from nanohermes.common.events import ModelStarted, ReasoningDelta, TextDelta
from nanohermes.testing import FakeServer, Raw, Reply, call, sse


@pytest.fixture
def files(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha contents\n")
    return workspace


@pytest.mark.quirk("reasoning.reasoning-content")
def test_deepseek_reasoning_content_is_passed_back_with_tool_calls(turn, server: FakeServer, files: Path) -> None:
    server.add(Reply(reasoning="I should read a.txt first.", tool_calls=(call("read_file", {"path": "a.txt"}),)),
               Reply(reasoning="It says alpha.", text="The file says alpha."))
    r = turn("-p", "what is in a.txt?", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "The file says alpha.\n"), r.err
    assert "I should read" not in r.out + r.err and "It says alpha" not in r.out
    assistant = next(m for m in server.requests[1]["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "I should read a.txt first."
    assert assistant["tool_calls"][0]["function"]["name"] == "read_file"


def test_stream_json_has_reasoning_events_and_the_result_has_none(turn, server: FakeServer) -> None:
    server.add(Reply(reasoning="Thinking hard.", text="42"))
    r = turn("-p", "answer", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    events = r.lines()
    thought = "".join(e["text"] for e in events if e["type"] == "reasoning_delta")
    assert thought == "Thinking hard."
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "42"
    assert events[-1]["result"] == "42"
    print(events[-1]["result"])


@pytest.mark.quirk("reasoning.details")
def test_openrouter_reasoning_details_are_joined_and_echoed(turn, server: FakeServer, files: Path) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    detail = {"type": "reasoning.text", "index": 0, "format": "anthropic-claude-v1"}
    server.add(Raw(body=sse(
        chunk({"role": "assistant", "reasoning": "Let me ", "reasoning_details": [{**detail, "text": "Let me "}]}),
        chunk({"reasoning": "look.", "reasoning_details": [{**detail, "text": "look.", "signature": "sig"}]}),
        chunk({"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                               "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]}),
        chunk({}, "tool_calls"),
    )), Reply(text="looked"))
    r = turn("-p", "look", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "looked\n"), r.err
    assistant = next(m for m in server.requests[1]["messages"] if m["role"] == "assistant")
    assert assistant["reasoning"] == "Let me look."
    assert assistant["reasoning_details"] == [{**detail, "text": "Let me look.", "signature": "sig"}]


@pytest.mark.quirk("reasoning.reasoning-content")
def test_reasoning_only_deltas_never_reach_the_text_answer(turn, server: FakeServer) -> None:
    # vLLM and llama.cpp stream `reasoning_content` with empty content first.
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    server.add(Raw(body=sse(chunk({"role": "assistant", "content": "", "reasoning_content": "hmm"}),
                            chunk({"content": None, "reasoning_content": " more"}), chunk({"content": "Done."}, "stop"))))
    r = turn("-p", "x", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert r.json()["result"] == "Done."
    print(r.json()["result"])


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_reasoning_effort_is_sent_only_when_set(turn, server: FakeServer, wire: str) -> None:
    server.add(Reply(text="a"), Reply(text="b"))
    assert turn("-p", "x", "--wire-api", wire, server=server).code == 0
    r = turn("-p", "x", "--wire-api", wire, "--reasoning-effort", "high", server=server)
    assert (r.code, r.out) == (0, "b\n"), r.err
    plain, effort = server.requests
    if wire == "chat":
        assert "reasoning_effort" not in plain and effort["reasoning_effort"] == "high"
    else:
        assert "reasoning" not in plain and effort["reasoning"]["effort"] == "high"


def test_reasoning_effort_from_config(turn, server: FakeServer) -> None:
    server.add(Reply(text="ok"))
    r = turn("-p", "x", server=server, config={"reasoning_effort": "low"})
    assert r.code == 0, r.err
    assert server.requests[0]["reasoning_effort"] == "low"


@pytest.mark.quirk("reasoning.encrypted-items")
def test_responses_reasoning_items_are_carried_across_turns(turn, server: FakeServer, files: Path) -> None:
    server.add(Reply(reasoning="Need the file.", tool_calls=(call("read_file", {"path": "a.txt"}),)),
               Reply(reasoning="Got it.", text="alpha it is"))
    r = turn("-p", "read a.txt", "--wire-api", "responses", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "alpha it is\n"), r.err
    assert "Need the file" not in r.out
    first, second = server.requests
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    items = second["input"]
    kinds = [i.get("type", "message") for i in items]
    reasoning = items[kinds.index("reasoning")]
    assert reasoning["encrypted_content"] == "enc:" + "Need the file."[::-1]
    assert "id" not in reasoning  # store=false: nothing on the server to refer to
    assert kinds.index("reasoning") < kinds.index("function_call") < kinds.index("function_call_output")
    assert server.violations == []
    # The next session resumes with the items too.
    server.add(Reply(text="again"))
    r = turn("--continue", "-p", "more", "--wire-api", "responses", server=server)
    assert (r.code, r.out) == (0, "again\n"), r.err
    assert next(i for i in server.requests[2]["input"] if i.get("type") == "reasoning") == reasoning


def test_repl_view_folds_reasoning_and_shows_it_when_asked() -> None:
    from nanohermes.ui.live import TurnView

    def draw(shown: bool) -> str:
        console = Console(width=80, record=True, force_terminal=False, color_system=None)
        view = TurnView(console, view=lambda: "full", typed_ahead=lambda: 0, thinking=lambda: shown)
        view.handle(ModelStarted(turn=1, model="m"))
        for piece in ("First I", " check.\nThen I", " answer."):
            view.handle(ReasoningDelta(text=piece))
        view.handle(TextDelta(text="The answer."))
        view._flush_text()
        return console.export_text()

    folded, shown = draw(False), draw(True)
    print(folded, shown)
    assert "✻ thought for 2 lines (/thinking on shows it)" in folded
    assert "check." not in folded and "The answer." in folded
    assert "First I check.\nThen I answer." in shown and "The answer." in shown
    assert shown.index("Then I answer.") < shown.index("The answer.")


def test_thinking_command_toggles_the_setting() -> None:
    from nanohermes.ui.commands import CommandContext, load_commands

    registry = load_commands()
    printed: list[Any] = []
    ctx = CommandContext(agent=None, config=None, workspace=Path("."), print=printed.append,  # type: ignore[arg-type]
                         registry=registry)
    found = registry.resolve("/thinking on")
    assert found.command is not None and found.arg == "on"
    found.command.handler(ctx, found.arg)
    assert ctx.state["thinking"] is True
    found.command.handler(ctx, "")
    assert ctx.state["thinking"] is False
    assert "thinking: folded" in str(printed[-1])


@pytest.mark.quirk("reasoning.reasoning-content", "reasoning.summary-events")
@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_the_agent_emits_reasoning_events_apart_from_text(server: FakeServer, workspace: Path, wire: str) -> None:
    import asyncio

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI, TurnEnded
    from nanohermes.testing import ScriptedLLM

    for llm in (None, ScriptedLLM([Reply(reasoning="weighing it", text="decided")])):
        server.add(Reply(reasoning="weighing it", text="decided"))
        ui = RecordingUI()
        config = Config(model="fake-model", base_url=server.base_url, api_key="k", max_retries=0, wire_api=wire)
        agent = build_agent(config, workspace, ui, llm=llm, save_session=False).agent
        result = asyncio.run(agent.ask("decide"))
        assert result.text == "decided"
        assert "".join(e.text for e in ui.of(ReasoningDelta)) == "weighing it"
        assert "".join(e.text for e in ui.of(TextDelta)) == "decided"
        assert ui.of(TurnEnded)[0].text == "decided"
        assert agent.session.history[-1].reasoning == "weighing it"


def test_reasoning_cannot_send_terminal_escapes() -> None:
    from nanohermes.ui import render

    console = Console(width=80, record=True, force_terminal=True, color_system="standard")
    console.print(render.reasoning("evil \x1b]52;c;aGk=\x07 \x1b[2J done", shown=True))
    console.print(render.reasoning_live("\x1b[2Jlive"))
    out = console.export_text(styles=False)
    assert "\x1b" not in out and "evil ?]52;c;aGk=? ?[2J done" in out and "?[2Jlive" in out


@pytest.mark.quirk("reasoning.on-every-tool-call")
def test_deepseek_gets_reasoning_content_back_on_every_tool_call_message_an_empty_one_too(
        turn, server: FakeServer, files: Path) -> None:
    # DeepSeek's thinking mode answers 400 ("Missing `reasoning_content` field in the assistant
    # message at message index N") unless every message that made tool calls carries the field.
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
    server.add(Raw(body=sse(chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
                            chunk({"tool_calls": [first]}), chunk({}, "tool_calls"))),
               Reply(tool_calls=(call("read_file", {"path": "a.txt"}),)),  # no thinking field at all
               Reply(reasoning="Both read.", text="alpha twice"))
    r = turn("-p", "read a.txt twice", server=server)
    assert (r.code, r.out) == (0, "alpha twice\n"), r.err
    for request, calls in ((server.requests[1], 1), (server.requests[2], 2)):
        made = [m for m in request["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
        assert [m.get("reasoning_content") for m in made] == [""] * calls


def test_an_endpoint_that_never_thinks_gets_no_reasoning_field(turn, server: FakeServer, files: Path) -> None:
    server.add(Reply(tool_calls=(call("read_file", {"path": "a.txt"}),)), Reply(text="alpha"))
    r = turn("-p", "read a.txt", server=server)
    assert (r.code, r.out) == (0, "alpha\n"), r.err
    [assistant] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert "reasoning_content" not in assistant and "reasoning" not in assistant
