"""`-p --output-format stream-json` and `json` in Claude Code's shapes, read by a parser of
Claude Code's stream-json schema (`claude_stream`), through the real CLI; and what a refusal
names (the path, the command line, the host), never a question nobody can answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from claude_stream import (
    AssistantMessage, ContentBlockDelta, ContentBlockStart, ContentBlockStop, MessageDelta, MessageStart, ResultError,
    ResultSuccess, StreamEvent, SystemInit, TextBlock, ThinkingDelta, ToolProgress, ToolResultBlock, ToolUseBlock,
    UserMessage, parse_line, parse_stream,
)
from claude_stream import TextDelta as TextDeltaEvent

from nanohermes.testing import FakeServer, Reply, call, tool_reply

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


def test_claude_codes_parser_reads_a_whole_run(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}, id="r"),
                          call("run_command", {"command": "rm -rf /tmp/x"}, id="d"),
                          call("mcp__demo__echo", {"text": "hi"}, id="m"), text="Looking."),
               tool_reply(call("run_command", {"command": "sleep 0.3; echo slow", "timeout_secs": 30}, id="s")),
               Reply(text="All done."))
    ran = turn("-p", "go", "--output-format", "stream-json", "--yes", server=server,
              config={"permissions": {"deny": ["run_command(rm *)"]},
                      "mcpServers": {"demo": {"command": sys.executable, "args": [DEMO]}}})
    assert ran.code == 0, ran.err
    messages, ours = parse_stream(ran.out)
    init, *middle, result = messages
    assert isinstance(init, SystemInit) and isinstance(result, ResultSuccess)
    assert init.cwd == str(workspace.resolve()) and init.model == "fake-model" and "read_file" in init.tools
    assert [s.model_dump() for s in init.mcp_servers] == [{"name": "demo", "status": "connected"}]
    assert init.session_id == result.session_id
    turns = [m for m in middle if isinstance(m, (AssistantMessage, UserMessage))]
    assert [type(m).__name__ for m in turns] == ["AssistantMessage", "UserMessage", "UserMessage", "UserMessage",
                                                 "AssistantMessage", "UserMessage", "AssistantMessage"]
    first = turns[0]
    assert isinstance(first, AssistantMessage)
    assert [type(b).__name__ for b in first.message.content] == ["TextBlock", "ToolUseBlock", "ToolUseBlock",
                                                                 "ToolUseBlock"]
    uses = [b for b in first.message.content if isinstance(b, ToolUseBlock)]
    assert [(u.id, u.name, u.input) for u in uses] == [("r", "read_file", {"path": "a.txt"}),
                                                       ("d", "run_command", {"command": "rm -rf /tmp/x"}),
                                                       ("m", "mcp__demo__echo", {"text": "hi"})]
    assert first.message.stop_reason == "tool_use" and first.message.usage.input_tokens > 0
    answers: dict[str, ToolResultBlock] = {}
    for m in turns:
        if isinstance(m, UserMessage):
            assert not isinstance(m.message.content, str)
            for b in m.message.content:
                assert isinstance(b, ToolResultBlock)
                answers[b.tool_use_id] = b
    assert answers["r"].content == "1\talpha" and answers["r"].is_error is False
    assert answers["d"].is_error is True and answers["m"].content == "echo: hi"
    last = turns[-1]
    assert isinstance(last, AssistantMessage) and last.message.stop_reason == "end_turn"
    assert last.message.content == [TextBlock(type="text", text="All done.")]
    assert result.result == "All done." and result.num_turns == 3 and result.is_error is False
    assert result.usage.input_tokens > 0 and result.duration_ms >= result.duration_api_ms >= 0
    (denial,) = result.permission_denials
    assert (denial.tool_name, denial.tool_use_id, denial.tool_input) == ("run_command", "d", {"command": "rm -rf /tmp/x"})
    progress = [m for m in middle if isinstance(m, ToolProgress)]  # a command's output lines, as they come
    assert [(m.tool_use_id, m.tool_name, getattr(m, "text", None)) for m in progress] == [("s", "run_command", "slow")]
    kinds = {o["type"] for o in ours}
    assert {"text_delta", "tool_started", "tool_finished", "permission_denied"} <= kinds


def test_a_run_cut_at_max_turns_is_an_error_result(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("list_dir", {})), tool_reply(call("list_dir", {})))
    ran = turn("-p", "loop", "--output-format", "stream-json", "--max-turns", "1", server=server)
    assert ran.code == 3
    result = parse_line(ran.out.splitlines()[-1])
    assert isinstance(result, ResultError) and result.subtype == "error_max_turns" and result.num_turns == 1


def test_json_output_is_claude_codes_result_message(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(Reply(text="42", usage=(100, 7)))
    ran = turn("-p", "answer", "--output-format", "json", server=server)
    result = parse_line(json.dumps(ran.json()))
    assert isinstance(result, ResultSuccess)
    assert (result.result, result.usage.input_tokens, result.usage.output_tokens) == ("42", 100, 7)


def test_without_a_terminal_stream_json_prints_the_refusal_not_a_question(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                         workspace: Path) -> None:
    (workspace / "a.txt").write_text("old\n")
    server.add(tool_reply(call("edit_file", {"path": "a.txt", "old_string": "old", "new_string": "new"}, id="e"),
                          call("write_file", {"path": "b.txt", "content": "B"}, id="w"),
                          call("run_command", {"command": "touch c.txt"}, id="c")), Reply(text="done"))
    ran = turn("-p", "change things", "--output-format", "stream-json", server=server)
    assert ran.code == 0, ran.err
    lines = [json.loads(line) for line in ran.out.splitlines()]
    assert not any(e["type"] == "approval_request" for e in lines)
    denied = [(e["tool"], e["target"], e["answered_by"]) for e in lines if e["type"] == "permission_denied"]
    assert denied == [("edit_file", "a.txt", "no terminal to ask"), ("write_file", "b.txt", "no terminal to ask"),
                      ("run_command", "touch c.txt", "no terminal to ask")]
    result = lines[-1]
    assert [d["target"] for d in result["permission_denials"]] == ["a.txt", "b.txt", "touch c.txt"]
    assert [d["tool_use_id"] for d in result["permission_denials"]] == ["e", "w", "c"]
    assert "refused edit_file `a.txt`: needs approval" in ran.err and "@@" not in ran.err
    assert (workspace / "a.txt").read_text() == "old\n"


def test_a_refused_fetch_names_its_host(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("web_fetch", {"url": "http://127.0.0.1:9/page?q=1"}, id="f")), Reply(text="done"))
    ran = turn("-p", "fetch", "--output-format", "json", server=server)
    assert ran.code == 0, ran.err
    (denial,) = ran.json()["permission_denials"]
    assert (denial["tool"], denial["target"]) == ("web_fetch", "127.0.0.1")


def assembled(events: list[StreamEvent]) -> list[dict[str, Any]]:
    """The messages a client of the Messages API builds from its raw stream events (as Claude
    Code's SDK consumers do): text and thinking from their deltas, a tool call's input from its
    partial JSON; each event checked against the one before (indices in order, a block started
    before its deltas and stopped once, one message at a time)."""
    built: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    open_block: int | None = None
    for wrapped in events:
        ev = wrapped.event
        if isinstance(ev, MessageStart):
            assert current is None, "a message started inside another"
            current = {"id": ev.message.id, "content": [], "stop_reason": None}
            continue
        assert current is not None, f"{ev.type} outside a message"
        blocks = current["content"]
        if isinstance(ev, ContentBlockStart):
            assert open_block is None and ev.index == len(blocks), "blocks start in order, one at a time"
            blocks.append({**ev.content_block.model_dump(), "json": ""})
            open_block = ev.index
        elif isinstance(ev, ContentBlockDelta):
            assert ev.index == open_block
            block, delta = blocks[ev.index], ev.delta
            if isinstance(delta, TextDeltaEvent):
                block["text"] += delta.text
            elif isinstance(delta, ThinkingDelta):
                block["thinking"] += delta.thinking
            else:
                block["json"] += delta.partial_json
        elif isinstance(ev, ContentBlockStop):
            assert ev.index == open_block
            open_block = None
        elif isinstance(ev, MessageDelta):
            assert open_block is None
            current["stop_reason"] = ev.delta.stop_reason
        else:
            assert open_block is None
            for block in current["content"]:
                if block["type"] == "tool_use":
                    block["input"] = json.loads(block["json"])
                del block["json"]
            built.append(current)
            current = None
    assert current is None, "every message stopped"
    return built


def test_partial_messages_stream_each_piece_as_claude_codes_stream_events(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                          workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}, id="r"), call("list_dir", {}, id="l"),
                          text="Let me look at the file first."),
               Reply(text="The file says alpha, and that is all of it.", reasoning="It holds one word."))
    ran = turn("-p", "go", "--output-format", "stream-json", "--include-partial-messages", server=server)
    assert ran.code == 0, ran.err
    messages, ours = parse_stream(ran.out)
    streamed = [m for m in messages if isinstance(m, StreamEvent)]
    whole = [m for m in messages if isinstance(m, AssistantMessage)]
    assert len(whole) == 2 and all(s.session_id == whole[0].session_id for s in streamed)
    deltas = [s for s in streamed if isinstance(s.event, ContentBlockDelta)]
    assert len(deltas) > 6  # the answer came in pieces, each its own line
    # What the pieces build is each whole message, under the same id.
    assert assembled(streamed) == [
        {"id": m.message.id, "stop_reason": m.message.stop_reason,
         "content": [b.model_dump() for b in m.message.content]} for m in whole]
    first, last = whole
    assert [b.type for b in first.message.content] == ["text", "tool_use", "tool_use"]
    assert [b.type for b in last.message.content] == ["thinking", "text"]
    # The pieces are not printed twice: nanohermes's own delta events stay out.
    assert not {"text_delta", "reasoning_delta"} & {o["type"] for o in ours}
    assert messages[-1].type == "result"


def test_partial_messages_need_stream_json_and_are_off_by_default(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    for fmt in ("text", "json"):
        ran = turn("-p", "go", "--output-format", fmt, "--include-partial-messages", server=server)
        assert ran.code == 2 and "--include-partial-messages" in ran.err and "stream-json" in ran.err
        assert ran.out == ""
    assert server.requests == []  # refused before anything was sent
    server.add(Reply(text="Hello there."))
    ran = turn("-p", "go", "--output-format", "stream-json", server=server)
    assert ran.code == 0, ran.err
    kinds = [json.loads(line)["type"] for line in ran.out.splitlines()]
    assert "stream_event" not in kinds and "text_delta" in kinds


def test_a_streamed_message_the_endpoint_cut_short_is_stopped_before_the_result(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(Reply(text="Hello there, this answer never ends", drop_after=8))
    ran = turn("-p", "go", "--output-format", "stream-json", "--include-partial-messages", server=server,
               config={"max_retries": 0})
    assert ran.code == 1
    messages, _ = parse_stream(ran.out)
    (cut,) = assembled([m for m in messages if isinstance(m, StreamEvent)])
    assert cut["stop_reason"] is None and [b["type"] for b in cut["content"]] == ["text"]
    assert "Hello there, this answer never ends".startswith(cut["content"][0]["text"].split("\n")[0])
    assert isinstance(messages[-1], ResultError) and messages[-1].is_error


# where the key is -> (the run's extra arguments, its environment, the user and project config files), apiKeySource
KEY_SOURCES: dict[str, tuple[tuple[str, ...], dict[str, str], dict[str, Any], dict[str, Any] | None]] = {
    "OPENAI_API_KEY": ((), {"OPENAI_API_KEY": "k-env"}, {}, None),
    "MY_KEY": ((), {"OPENAI_API_KEY": "", "MY_KEY": "k-mine"}, {"api_key_env": "MY_KEY"}, None),
    "user": ((), {"OPENAI_API_KEY": "k-env"}, {"api_key": "k-file"}, None),
    "project": ((), {"OPENAI_API_KEY": ""}, {"trusted_projects": ["WS"]}, {"api_key": "k-project"}),
    "--api-key": (("--api-key", "k-flag"), {"OPENAI_API_KEY": "k-env"}, {"api_key": "k-file"}, None),
    "none": ((), {"OPENAI_API_KEY": ""}, {}, None),
}


@pytest.mark.parametrize("source", list(KEY_SOURCES))
def test_init_names_where_the_key_came_from(turn, server: FakeServer, workspace: Path, source: str) -> None:  # type: ignore[no-untyped-def]
    args, env, user, project = KEY_SOURCES[source]
    if project is not None:
        (workspace / ".nanohermes").mkdir()
        (workspace / ".nanohermes" / "config.json").write_text(json.dumps(project))
    user = {k: [str(workspace) if p == "WS" else p for p in v] if k == "trusted_projects" else v for k, v in user.items()}
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", "--output-format", "stream-json", *args, server=server, config=user, env=env)
    assert r.code == 0, r.err
    assert r.lines()[0]["apiKeySource"] == source
    sent = {"OPENAI_API_KEY": "k-env", "MY_KEY": "k-mine", "user": "k-file", "project": "k-project",
            "--api-key": "k-flag", "none": "no-key-set"}[source]
    assert server.headers[0]["authorization"] == f"Bearer {sent}"  # the key named is the key used
