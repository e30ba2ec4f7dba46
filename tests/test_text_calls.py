"""Tool calls written as text: what Ollama, LM Studio, llama.cpp and vLLM send when a chat
template or parser misfires, read back as calls only when they are whole and name an offered
tool, through the same validation and approval as any call; anything else that looks like a
call goes back to the model as an error naming the format. The inputs are real model outputs
from servers' parser tests and bug threads (tool names changed to nanohermes's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.llm.textcalls import TextHold, attempted, recover
from nanohermes.testing import FakeServer, Reply
from nanohermes.tools import build_tools

TOOLS = [t.spec() for t in build_tools()]
NAMES = [t["function"]["name"] for t in TOOLS]

# (format, the answer's text, the calls it holds, the text left around them)
WRITTEN = [
    ("qwen3-coder", "<tool_call>\n<function=write_file>\n<parameter=path>\nq.txt\n</parameter>\n<parameter=content>\n"
                    "hello\nworld\n</parameter>\n</function>\n</tool_call>",
     [("write_file", {"path": "q.txt", "content": "hello\nworld"})], ""),
    ("qwen3-coder-windows-path", "<tool_call>\n<function=read_file>\n<parameter=path>\nT:\\Code\\Apps\\Tars\\talk_cpp.py\n"
                                 "</parameter>\n</function>\n</tool_call>",
     [("read_file", {"path": "T:\\Code\\Apps\\Tars\\talk_cpp.py"})], ""),
    ("qwen3-coder-typed-and-unwrapped", "I'll read the middle.\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n"
                                        "<parameter=offset>\n10\n</parameter>\n</function>",
     [("read_file", {"path": "a.py", "offset": 10})], "I'll read the middle."),
    ("hermes", 'Let me check.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "README.md"}}\n</tool_call>',
     [("read_file", {"path": "README.md"})], "Let me check."),
    ("hermes-two-and-twice-encoded", '<tool_call>\n{"name": "list_dir", "arguments": {"path": "src"}}\n</tool_call>\n'
                                     '<tool_call>\n{"name": "grep", "arguments": "{\\"pattern\\": \\"TODO\\"}"}\n</tool_call>',
     [("list_dir", {"path": "src"}), ("grep", {"pattern": "TODO"})], ""),
    ("deepseek-v3", 'Let me help you with that.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file\n'
                    '```json\n{"path": "a.py"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
     [("read_file", {"path": "a.py"})], "Let me help you with that."),
    ("deepseek-v3.1", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>run_command<｜tool▁sep｜>{"command": "ls -la"}'
                      '<｜tool▁call▁end｜><｜tool▁calls▁end｜>', [("run_command", {"command": "ls -la"})], ""),
    ("kimi-k2", 'Let me help you with that.\n<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.grep:0'
                '<|tool_call_argument_begin|>{"pattern": "TODO"}<|tool_call_end|>\n<|tool_calls_section_end|>',
     [("grep", {"pattern": "TODO"})], "Let me help you with that."),
    ("glm-4.5", "Let me search for configuration files in the backend directory to help locate this information: "
                "<tool_call>list_dir <arg_key>path</arg_key> <arg_value>backend</arg_value> </tool_call>",
     [("list_dir", {"path": "backend"})],
     "Let me search for configuration files in the backend directory to help locate this information:"),
    ("mistral", '[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "a.py"}}]', [("read_file", {"path": "a.py"})], ""),
    ("mistral-v11", '[TOOL_CALLS]read_file[ARGS]{"path": "a.py"}', [("read_file", {"path": "a.py"})], ""),
    ("llama-python-tag", '<|python_tag|>{"name": "glob", "parameters": {"pattern": "*.py"}}',
     [("glob", {"pattern": "*.py"})], ""),
    ("llama-bare-json", '{"name": "read_file", "parameters": {"path": "README.md"}}', [("read_file", {"path": "README.md"})], ""),
    ("llama-python-tag-semicolons", '<|python_tag|>{"name": "glob", "parameters": {"pattern": "*.py"}}; '
                                    '{"name": "grep", "parameters": {"pattern": "TODO"}}<|eom_id|>',
     [("glob", {"pattern": "*.py"}), ("grep", {"pattern": "TODO"})], ""),
    ("tool-code-list", '```tool_code\n[glob(pattern="*.py"), grep(pattern="TODO")]\n```',
     [("glob", {"pattern": "*.py"}), ("grep", {"pattern": "TODO"})], ""),
    ("functionary", '<function=read_file>{"path": "a.py"}</function>', [("read_file", {"path": "a.py"})], ""),
    ("gpt-oss-harmony", '<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>{"path":"a.py"}<|call|>',
     [("read_file", {"path": "a.py"})], ""),
    ("granite", '<|tool_call|>[{"name": "read_file", "arguments": {"path": "a.py"}}]', [("read_file", {"path": "a.py"})], ""),
    ("command-r", '<|START_ACTION|>[{"tool_name": "read_file", "parameters": {"path": "a.py"}}]<|END_ACTION|>',
     [("read_file", {"path": "a.py"})], ""),
    ("invoke-xml", '<invoke name="read_file">\n<parameter name="path">a.py</parameter>\n</invoke>',
     [("read_file", {"path": "a.py"})], ""),
]


@pytest.mark.parametrize("text,calls,rest", [w[1:] for w in WRITTEN], ids=[w[0] for w in WRITTEN])
def test_each_documented_format_gives_its_calls_and_the_text_around_them(text: str, calls: list[Any], rest: str) -> None:
    found = recover(text, TOOLS)
    assert (found.calls, found.text, found.problem) == (calls, rest, "")


@pytest.mark.parametrize("text", [
    'Here is the format:\n```\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>\n```\n',
    "Models emit `<tool_call>` tags, or `[TOOL_CALLS]` for Mistral.",
    "No call here at all.",
], ids=["fenced-example", "inline-code", "prose"])
def test_examples_and_prose_are_not_calls(text: str) -> None:
    found = recover(text, TOOLS)
    assert (found.calls, found.format, found.text) == ([], None, text)
    assert attempted(text, NAMES) is None


def test_nothing_is_read_when_the_request_offered_no_tools() -> None:
    assert recover(WRITTEN[3][1], []).calls == []
    assert attempted(WRITTEN[3][1], []) is None


@pytest.mark.parametrize("text,format_name,problem", [
    ('<tool_call>\n{"name": "Apply tags to a document", "arguments": {"document_id": "doc-17"}}\n</tool_call>',
     "Hermes <tool_call> JSON", "`Apply tags to a document` is not a tool here"),
    ('<tool_call>\n{"name": "write_file", "arguments": {"path": "a", "content": "x', "Hermes <tool_call> JSON",
     "the `<tool_call>` block is not closed"),
    ("<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'a'}}\n</tool_call>", "Hermes <tool_call> JSON",
     "the call is not valid JSON"),
    ("<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n", "Qwen3-Coder XML",
     "has no closing `</function>`"),
    ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "a.py"}', "DeepSeek tool-call tokens",
     "do not hold a whole call"),
], ids=["unknown-tool", "cut-off", "single-quoted-json", "qwen-unclosed", "deepseek-unclosed"])
def test_what_looks_like_a_call_but_cannot_run_is_an_error_naming_the_format(text: str, format_name: str,
                                                                             problem: str) -> None:
    assert recover(text, TOOLS).calls == []
    error = attempted(text, NAMES)
    assert error is not None and error.startswith("ERROR: your answer holds ") and f" ({format_name}), " in error
    assert problem in error and "Nothing was run" in error and "write it whole, in this form:\n" in error


def test_the_hold_passes_text_before_a_marker_and_keeps_the_rest_even_split_mid_marker() -> None:
    shown: list[str] = []
    hold = TextHold(shown.append)
    for piece in ["Let me look.\n<to", "ol_ca", 'll>\n{"name": "read_file"', "}\n</tool_call>"]:
        hold.feed(piece)
    assert "".join(shown) == "Let me look.\n"
    hold.release()
    assert "".join(shown).endswith("</tool_call>")
    shown.clear()
    hold = TextHold(shown.append)
    for piece in ["a < b and ", "c > d"]:
        hold.feed(piece)
    hold.release()
    assert "".join(shown) == "a < b and c > d"


# -- through the real `nanohermes -p` ----------------------------------------------------

def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def transcript(home: Path, session_id: str) -> list[dict[str, Any]]:
    [path] = (home / ".local" / "share" / "nanohermes" / "sessions").glob(f"*/{session_id}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_qwen_xml_write_runs_as_the_call_and_the_transcript_records_it(turn, server: FakeServer, workspace: Path,
                                                                        home: Path) -> None:
    server.add(Reply(text=WRITTEN[0][1], chunk_size=3), Reply(text="Wrote q.txt."))
    r = turn("-p", "write q.txt", "--mode", "accept-edits", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    out = r.json()
    assert out["result"] == "Wrote q.txt."
    assert (workspace / "q.txt").read_text() == "hello\nworld"
    # The next request carries the call as a structured call, answered by its result.
    [assistant] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant["content"] is None
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["write_file"]
    [result] = tool_results(server.requests[1])
    done, note = result.split("\n")
    assert done == "created q.txt (11 bytes, 2 lines)" and " Qwen3-Coder XML;" in note, note
    assert "recovered" not in json.dumps(server.requests[1])
    records = [rec["message"] for rec in transcript(home, out["session_id"]) if rec["type"] == "message"]
    recovered = [m for m in records if m.get("recovered_from_text")]
    assert recovered and recovered[0]["recovered_from_text"] == {"format": "Qwen3-Coder XML", "text": WRITTEN[0][1]}
    assert "(Qwen3-Coder XML); " in r.err and " write_file" in r.err


def test_a_hermes_call_streams_no_markup_and_the_command_runs(turn, server: FakeServer, workspace: Path) -> None:
    text = 'I will list the files.\n<tool_call>\n{"name": "run_command", "arguments": {"command": "ls"}}\n</tool_call>'
    (workspace / "marker.txt").write_text("x")
    server.add(Reply(text=text, chunk_size=5), Reply(text="There is marker.txt."))
    r = turn("-p", "list", "--yes", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    lines = r.lines()
    streamed = "".join(e.get("text", "") for e in lines if e.get("type") == "text_delta")
    assert "I will list the files." in streamed and "<tool_call>" not in streamed
    assert any(e.get("type") == "tool_started" and e.get("name") == "run_command" for e in lines)
    assert "marker.txt" in tool_results(server.requests[1])[0]
    assert lines[-1]["result"] == "There is marker.txt."


def test_a_recovered_call_still_needs_approval(turn, server: FakeServer, workspace: Path) -> None:
    # Default mode and no terminal: the write is refused as any write would be, never run.
    server.add(Reply(text=WRITTEN[0][1]), Reply(text="It was refused."))
    r = turn("-p", "write q.txt", server=server)
    assert (r.code, r.out) == (0, "It was refused.\n"), r.err
    assert tool_results(server.requests[1])[0].startswith("Denied by the user")
    assert not (workspace / "q.txt").exists()


def test_a_text_call_for_a_tool_that_does_not_exist_is_not_run_and_the_model_is_told(turn, server: FakeServer,
                                                                                     workspace: Path) -> None:
    text = '<tool_call>\n{"name": "delete_everything", "arguments": {"path": "."}}\n</tool_call>'
    server.add(Reply(text=text), Reply(text="Sorry, no such tool."))
    r = turn("-p", "go", "--yes", server=server)
    assert (r.code, r.out) == (0, "Sorry, no such tool.\n"), r.err
    [told] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"][1:]
    assert told.startswith("ERROR: your answer holds ") and " (Hermes <tool_call> JSON), " in told
    assert ": `delete_everything` is not a tool here" in told
    assert sorted(p.name for p in workspace.iterdir()) == []


def test_a_malformed_attempt_is_sent_back_once_per_retry_then_the_turn_ends_with_a_warning(
        turn, server: FakeServer) -> None:
    bad = "<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n"
    server.add(Reply(text=bad), Reply(text=bad))
    r = turn("-p", "read it", server=server, config={"limits": {"text_call_retries": 1}})
    assert r.code == 0, r.err
    assert len(server.requests) == 2
    told = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"][1]
    assert "(Qwen3-Coder XML)" in told and "<function=read_file>\n<parameter=path>\na.py\n" in told
    assert " 1 time (limit text_call_retries)" in r.err
    assert "<tool_call>" in r.out  # the answer stands as it came, and is shown


def test_with_no_tools_offered_a_call_written_as_text_is_the_answer(turn, server: FakeServer) -> None:
    server.add(Reply(text=WRITTEN[3][1]))
    r = turn("-p", "go", server=server, config={"allowed_tools": ["no_such_tool"]})
    assert r.code == 0, r.err
    assert "tools" not in server.requests[0]
    assert r.out == WRITTEN[3][1] + "\n" and len(server.requests) == 1
