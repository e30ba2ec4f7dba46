"""Thinking a model writes into its answer's text (`<think>...</think>`): shown as thinking by
`-p` (stream-json's `reasoning_delta`), never in its text answer or json's `result`, folded as
thinking in the REPL, and kept in the history as the model sent it. And a reply whose only call
is in its thinking but incomplete: the model is told what is missing, within
`limits.reasoning_call_retries`. Through the real command line, the REPL in a pty and the
loopback fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply, call
from test_repl_pty import term  # noqa: F401 (the fixture)

THOUGHT = "<think>\nThe user wants a number. 2+2 is 4.\n</think>\n\n"


@pytest.mark.parametrize("chunk", [2, 1000])
def test_a_think_block_is_no_part_of_the_answer(turn: Any, server: FakeServer, chunk: int) -> None:
    server.add(Reply(text=THOUGHT + "The answer is 4.", chunk_size=chunk), Reply(text="Still 4."))
    r = turn("-p", "what is 2+2", server=server)
    assert (r.code, r.out) == (0, "The answer is 4.\n"), r.err
    r = turn("-p", "sure?", "--continue", "--output-format", "json", server=server)
    assert r.json()["result"] == "Still 4."
    [kept] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert kept["content"] == THOUGHT + "The answer is 4."  # the history keeps what the model sent


def test_stream_json_streams_it_as_thinking(turn: Any, server: FakeServer) -> None:
    server.add(Reply(text=THOUGHT + "The answer is 4.", chunk_size=3))
    r = turn("-p", "what is 2+2", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    lines = r.lines()
    said = "".join(e["text"] for e in lines if e.get("type") == "text_delta")
    thought = "".join(e["text"] for e in lines if e.get("type") == "reasoning_delta")
    assert said == "The answer is 4." and thought == "\nThe user wants a number. 2+2 is 4.\n"
    assert lines[-1]["result"] == "The answer is 4."
    # Claude Code's assistant message: a thinking block, then the text.
    [message] = [e["message"] for e in lines if e.get("type") == "assistant"]
    assert [(b["type"], b.get("thinking", b.get("text"))) for b in message["content"]] == [
        ("thinking", "\nThe user wants a number. 2+2 is 4.\n"), ("text", "The answer is 4.")]


def test_a_mention_of_the_tag_in_prose_is_answer(turn: Any, server: FakeServer) -> None:
    text = "Wrap it in a `<think>` tag, as in <think>x</think>."
    server.add(Reply(text=text))
    r = turn("-p", "how", server=server)
    assert (r.code, r.out) == (0, text + "\n")


def test_the_repl_folds_it_as_thinking(term: Any, server: FakeServer) -> None:
    server.add(Reply(text=THOUGHT + "The answer is 4."))
    t = term()
    t.prompt()
    t.type("what is 2+2")
    t.wait("✻ thought for 1 line")
    t.wait("The answer is 4.")
    assert "2+2 is 4" not in t.text and "think>" not in t.text
    t.leave()


@pytest.mark.parametrize("reply", [
    Reply(reasoning='I will run <tool_call>\n{"name": "run_command", "arguments": {}}\n</tool_call>'),
    Reply(reasoning='Call {"name": "run_command", "parameters": {"cwd": "."}} now.'),
    Reply(text='<think>\n[TOOL_CALLS]run_command[ARGS]{}\n</think>\n\n'),
], ids=["hermes", "json", "think-tags"])
def test_an_incomplete_call_only_in_the_thinking_is_told_what_is_missing(turn: Any, server: FakeServer,
                                                                        workspace: Path, reply: Reply) -> None:
    server.add(reply, Reply(tool_calls=(call("run_command", {"command": "echo x >> ran.log"}),)), Reply(text="logged"))
    r = turn("-p", "go", "--yes", server=server)
    assert (r.code, r.out) == (0, "logged\n"), r.err
    assert (workspace / "ran.log").read_text() == "x\n"
    [told] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"][1:]
    assert told == ("ERROR: your reply has no answer and no tool call: it holds only a tool call in your thinking, "
                    "where calls are drafts and never run, and that call is incomplete (`run_command` needs "
                    "`command`). Nothing was run. If you meant to make it, send it now as a tool call with every "
                    "required argument; otherwise give your answer.")


@pytest.mark.parametrize("limit", [0, 2])
def test_telling_it_is_bounded_by_reasoning_call_retries(turn: Any, server: FakeServer, limit: int) -> None:
    draft = Reply(reasoning='{"name": "run_command", "parameters": {}}')
    server.add(*([draft] * (limit + 1)))
    r = turn("-p", "go", "--yes", "--output-format", "json", server=server,
             config={"limits": {"reasoning_call_retries": limit}})
    assert r.code == 0, r.err
    assert len(server.requests) == limit + 1
    assert json.loads(r.out)["result"] == ""
    assert (f"the reply's only tool call, incomplete (`run_command` needs `command`), was in its thinking, where "
            f"calls never run; the model was told {limit} times (limit reasoning_call_retries), so the turn ends "
            "with the answer as it is") in r.err


def test_a_summary_is_without_the_thinking_written_into_it(workspace: Path) -> None:
    """A compaction's summary (and a batch's label) is the answer of a model call: thinking it
    wrote into its text stays out of it."""
    import asyncio

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.common.messages import Message
    from nanohermes.testing import ScriptedLLM

    llm = ScriptedLLM([Reply(text="<think>\nWhat matters here?\n</think>\n\nthe summary")])
    config = Config(model="fake-model", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    agent = build_agent(config, workspace, RecordingUI(), llm=llm).agent
    agent.session.history = [Message.user("first"), Message("assistant", "a"), Message.user("second"),
                             Message("assistant", "b")]
    assert agent.compactor is not None
    assert asyncio.run(agent.compactor.manual(agent.session, "")) == "the summary"
    assert "What matters" not in (agent.session.history[0].content or "")
    agent.session.close()
