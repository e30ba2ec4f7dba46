"""Thinking a model writes into its answer's text (`<think>...</think>`, or a lone `</think>`
after thinking whose opening tag the template put in the prompt): shown as thinking by `-p`
(stream-json's `reasoning_delta`, while it streams too), never in its text answer or json's
`result`, folded as thinking in the REPL (live and when a session is taken up again), apart from
the answer in /export, and kept in the history as the model sent it. And a reply whose only call
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


@pytest.mark.parametrize("opening", ["<think>\n", ""], ids=["block", "lone-closing-tag"])
def test_a_summary_is_without_the_thinking_written_into_it(workspace: Path, opening: str) -> None:
    """A compaction's summary (and a batch's label) is the answer of a model call: thinking it
    wrote into its text stays out of it."""
    import asyncio

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.common.messages import Message
    from nanohermes.testing import ScriptedLLM

    llm = ScriptedLLM([Reply(text=opening + "What matters here?\n</think>\n\nthe summary")])
    config = Config(model="fake-model", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    agent = build_agent(config, workspace, RecordingUI(), llm=llm).agent
    agent.session.history = [Message.user("first"), Message("assistant", "a"), Message.user("second"),
                             Message("assistant", "b")]
    assert agent.compactor is not None
    assert asyncio.run(agent.compactor.manual(agent.session, "")) == "the summary"
    assert "What matters" not in (agent.session.history[0].content or "")
    agent.session.close()


# A template that put the opening tag in the prompt: the reply starts inside the block and only
# its closing tag comes (DeepSeek-R1's distills, Qwen3's thinking templates).
# A model whose template may put the opening tag in the prompt: its first reply waits until
# its thinking is known (`thinktags.TEMPLATE_THINKERS`).
THINKER = "qwen3-32b"


def thinker(server: FakeServer) -> list[str]:
    """The command line's endpoint and model for `THINKER` (the `turn` fixture's `server=` names
    another model)."""
    return ["--base-url", server.base_url, "--model", THINKER]


LONE_THINKING = "The user wants a number.\nSo 2+2 is 4, nothing to run.\n"
LONE = LONE_THINKING + "</think>\n\nThe answer is 4."


@pytest.mark.parametrize("chunk", [1, 4, 1000])
def test_a_lone_closing_tag_ends_thinking_begun_in_the_prompt(turn: Any, server: FakeServer, chunk: int) -> None:
    server.add(Reply(text=LONE, chunk_size=chunk), Reply(text="Still 4.", chunk_size=chunk))
    r = turn("-p", "what is 2+2", server=server)
    assert (r.code, r.out) == (0, "The answer is 4.\n"), r.err
    r = turn("-p", "sure?", "--continue", "--output-format", "json", server=server)
    assert r.json()["result"] == "Still 4."
    [kept] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert kept["content"] == LONE  # the history keeps what the model sent


@pytest.mark.parametrize("closing", ["</seed:think>", "</thinking>", "[/THINK]", "<channel|>"])
def test_each_kind_of_thinking_tag_may_close_alone(turn: Any, server: FakeServer, closing: str) -> None:
    server.add(Reply(text=f"Thinking it over.\n{closing}\n\nDone.", chunk_size=2))
    r = turn("-p", "go", "--output-format", "stream-json", *thinker(server))
    lines = r.lines()
    said = "".join(e["text"] for e in lines if e.get("type") == "text_delta")
    thought = "".join(e["text"] for e in lines if e.get("type") == "reasoning_delta")
    assert (r.code, said, thought, lines[-1]["result"]) == (0, "Done.", "Thinking it over.\n", "Done."), r.err


@pytest.mark.parametrize("partial", [False, True], ids=["events", "partial-messages"])
def test_stream_json_never_streams_it_as_answer(turn: Any, server: FakeServer, partial: bool) -> None:
    server.add(Reply(text=LONE, chunk_size=3))
    r = turn("-p", "what is 2+2", "--output-format", "stream-json", *(["--include-partial-messages"] * partial),
             *thinker(server))
    assert r.code == 0, r.err
    lines = r.lines()
    if partial:
        deltas = [e["event"]["delta"] for e in lines if e.get("type") == "stream_event"
                  and e["event"]["type"] == "content_block_delta"]
        said = "".join(d.get("text", "") for d in deltas)
        thought = "".join(d.get("thinking", "") for d in deltas)
    else:
        said = "".join(e["text"] for e in lines if e.get("type") == "text_delta")
        thought = "".join(e["text"] for e in lines if e.get("type") == "reasoning_delta")
    assert (said, thought) == ("The answer is 4.", LONE_THINKING)
    assert not [e for e in lines if e.get("type") == "text_pending"]
    [message] = [e["message"] for e in lines if e.get("type") == "assistant"]
    assert [(b["type"], b.get("thinking", b.get("text"))) for b in message["content"]] == [
        ("thinking", LONE_THINKING), ("text", "The answer is 4.")]
    assert lines[-1]["result"] == "The answer is 4."


@pytest.mark.parametrize("text", [
    "Close the block with </think> and go on.",  # text after it on its line: prose
    "Close it with `</think>`\nas here.",  # in a backtick span
    "Like this:\n```\nreasoning\n</think>\n```\ndone",  # in a code fence
    "<think>\nfirst\n</think>\n\nThen `</think>` alone:\n</think>\nstays",  # a block opened first
    "Plain answer with no tags at all.",
], ids=["prose", "span", "fence", "opened", "none"])
def test_a_closing_tag_anywhere_else_is_answer(turn: Any, server: FakeServer, text: str) -> None:
    server.add(Reply(text=text, chunk_size=2))
    r = turn("-p", "how", "--output-format", "stream-json", server=server)
    lines = r.lines()
    said = "".join(e["text"] for e in lines if e.get("type") == "text_delta")
    expected = text.split("</think>\n\n", 1)[1] if text.startswith("<think>") else text
    assert (r.code, said, lines[-1]["result"]) == (0, expected, expected), r.err


def test_a_call_in_thinking_begun_in_the_prompt_never_runs(turn: Any, server: FakeServer, workspace: Path) -> None:
    thinking = 'Maybe {"name": "run_command", "arguments": {"command": "touch ran.txt"}}\n</think>\n\nNothing to run.'
    server.add(Reply(text=thinking))
    r = turn("-p", "go", "--yes", server=server)
    assert (r.code, r.out) == (0, "Nothing to run.\n"), r.err
    assert not (workspace / "ran.txt").exists() and len(server.requests) == 1


def test_the_repl_folds_thinking_begun_in_the_prompt(term: Any, server: FakeServer) -> None:
    server.add(Reply(text=LONE))
    t = term(args=("--model", THINKER))
    t.prompt()
    t.type("what is 2+2")
    t.wait("✻ thought for 2 lines")
    t.wait("The answer is 4.")
    folded = t.text[t.text.index("✻ thought for"):]  # what was held showed only in the live area, erased since
    assert "nothing to run" not in folded and "think>" not in t.text
    t.leave()


def test_an_editor_gets_thinking_begun_in_the_prompt_as_thought(workspace: Path, server: FakeServer,
                                                               tmp_path: Path) -> None:
    import asyncio

    from acp_support import Editor, agent

    server.add(Reply(text="small sum\n</think>\n\nIt is 4.", chunk_size=3))
    live, replayed = Editor(), Editor()

    async def scenario() -> None:
        async with agent(live, workspace, server, "--model", THINKER, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            assert await a.ask(sid, "2+2?") == "end_turn"
        async with agent(replayed, workspace, server, stderr=tmp_path / "err2") as a:
            await a.conn.initialize(protocol_version=1)
            await a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])

    asyncio.run(scenario())
    for editor in (live, replayed):
        assert (editor.said(), editor.thought()) == ("It is 4.", "small sum\n")


def test_a_subagent_hands_back_its_answer_without_such_thinking(turn: Any, server: FakeServer) -> None:
    server.add(Reply(tool_calls=(call("subagent", {"agent": "looker", "task": "look", "wait": True}),)),
               Reply(text="I should look.\n</think>\n\nlooked"), Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server,
             config={"subagents": {"looker": {"description": "Looks", "tools": ["read_file"]}}})
    assert (r.code, r.out) == (0, "done\n"), r.err
    [result] = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert result.split("\n")[1:] == ["looked"]


def test_a_reply_is_held_only_while_the_conversation_allows_thinking_begun_in_the_prompt() -> None:
    """The conversation's latest answer tells whether the model writes such thinking: the text
    of a reply that follows one without it streams as it comes."""
    from nanohermes.common.messages import Message
    from nanohermes.llm.thinktags import may_open_in_prompt

    asked = [Message.user("hi")]
    assert may_open_in_prompt(asked, "qwen3-32b")  # nothing known yet
    assert may_open_in_prompt([*asked, Message("assistant", LONE), Message.user("more")], "qwen3-32b")
    assert not may_open_in_prompt([*asked, Message("assistant", "Hello."), Message.user("more")], "qwen3-32b")
    assert not may_open_in_prompt([*asked, Message("assistant", "", reasoning="hm"), Message.user("more")], "qwen3-32b")
    assert not may_open_in_prompt([*asked, Message("assistant", THOUGHT + "4"), Message.user("more")], "qwen3-32b")
    for hosted in ("gpt-4o", "openai/gpt-4.1-mini", "o3", "o4-mini", "claude-sonnet-4-5", "gemini-2.5-pro"):
        assert not may_open_in_prompt(asked, hosted), hosted
    for thinker in ("qwen3-30b-a3b", "Qwen/QwQ-32B", "deepseek-r1-distill-qwen-32b", "kimi-k2-thinking", "phi-4-reasoning"):
        assert may_open_in_prompt(asked, thinker), thinker
    for other in ("gpt-oss-20b", "fake-model", "llama3.1:8b", "mistral-small", "openai/o3-thinking"):
        assert not may_open_in_prompt(asked, other), other


@pytest.mark.parametrize("model,pieces", [("gpt-4o", "many"), ("llama3.1:8b", "many"), ("qwen3-32b", "one")])
def test_only_a_thinking_models_first_reply_waits_for_its_thinking_to_be_known(turn: Any, server: FakeServer,
                                                                               model: str, pieces: str) -> None:
    """A model whose template may put the opening tag in the prompt has its first text held until
    it is known; any other's reply (a hosted one's, a local one of another make) streams as it
    comes."""
    server.add(Reply(text="Four, as two and two make.", chunk_size=3))
    r = turn("-p", "what is 2+2", "--base-url", server.base_url, "--model", model, "--output-format", "stream-json",
             "--include-partial-messages")
    assert r.code == 0, r.err
    deltas = [e["event"]["delta"]["text"] for e in r.lines() if e.get("type") == "stream_event"
              and e["event"]["type"] == "content_block_delta"]
    assert "".join(deltas) == "Four, as two and two make."
    assert (len(deltas) > 1) == (pieces == "many"), deltas


def test_export_shows_thinking_folded_apart_from_the_answer(turn: Any, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text=THOUGHT + "The answer is 4."), Reply(text=LONE.replace("4.", "four.")),
               Reply(reasoning="In its own field.", text="Third."))
    for prompt in ("what is 2+2", "again", "once more"):
        assert turn("-p", prompt, *(["--continue"] if prompt != "what is 2+2" else []), server=server).code == 0
    r = turn("-p", "/export chat.md", "--continue", server=server)
    assert r.code == 0, r.err
    text = (workspace / "chat.md").read_text()
    answers = text.split("## nanohermes\n\n")[1:]
    assert [a.split("</details>\n\n")[1].split("\n\n## ")[0].strip() for a in answers] == ["The answer is 4.", "The answer is four.",
                                                                        "Third."]
    assert [a.split("\n\n")[0] for a in answers] == ["<details><summary>Thinking</summary>"] * 3
    assert "think>" not in text and "2+2 is 4" in answers[0] and "In its own field." in answers[2]
    assert len(server.requests) == 3  # no model call for an export
    [kept, *_] = [m for m in server.requests[2]["messages"] if m["role"] == "assistant"]
    assert kept["content"] == THOUGHT + "The answer is 4."  # the history keeps what the model sent


def test_a_thinking_block_cannot_close_the_folded_section_early(workspace: Path) -> None:
    from nanohermes.common.messages import Message
    from nanohermes.turn.export import conversation_markdown

    text = conversation_markdown([Message.user("q"), Message("assistant", "<think>\na </details> b\n</think>\nok")])
    assert text.count("</details>") == 1 and text.rstrip().endswith("</details>\n\nok")


def test_a_resumed_repl_shows_thinking_folded(term: Any, server: FakeServer, turn: Any) -> None:
    server.add(Reply(text=LONE), Reply(text="again"))
    assert turn("-p", "what is 2+2", server=server).code == 0
    t = term(args=("--continue",))
    t.wait("✻ thought for 2 lines")
    t.wait("The answer is 4.")
    assert "nothing to run" not in t.text and "think>" not in t.text
    t.child.send("\x04")
    assert t.exit_code() == 0


def test_export_as_json_keeps_thinking_apart(turn: Any, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text=LONE), Reply(tool_calls=(call("read_file", {"path": "a.txt"}, id="r"),)),
               Reply(text=THOUGHT + "Done."))
    (workspace / "a.txt").write_text("a\n")
    assert turn("-p", "what is 2+2", server=server).code == 0
    assert turn("-p", "read a.txt", "--continue", "--yes", server=server).code == 0
    r = turn("-p", "/export out/chat.json", "--continue", server=server)
    assert r.code == 0, r.err
    messages = json.loads((workspace / "out" / "chat.json").read_text())["messages"]
    assert [(m["role"], m["content"], m.get("thinking")) for m in messages if m["role"] != "tool"] == [
        ("user", "what is 2+2", None), ("assistant", "The answer is 4.", LONE_THINKING),
        ("user", "read a.txt", None), ("assistant", "", None),
        ("assistant", "Done.", "\nThe user wants a number. 2+2 is 4.\n")]
    [result] = [m for m in messages if m["role"] == "tool"]
    assert result["tool_call_id"] == "r" and messages[3]["tool_calls"][0]["name"] == "read_file"
