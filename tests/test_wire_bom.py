"""A UTF-8 byte order mark before the first event: the event-stream format says one leading
BOM is ignored, so no event is lost, on both wires and in every body the reader tells apart
(events, a whole JSON answer, an `error:` line, a web page). Byte for byte from the loopback
server to the real `nanohermes -p`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Raw, Reply, call, sse, tool_reply

BOM = b"\xef\xbb\xbf"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def with_bom(frames: tuple[bytes, ...]) -> tuple[bytes, ...]:
    return (BOM + frames[0], *frames[1:])


def named(*events: dict[str, Any]) -> tuple[bytes, ...]:
    return tuple(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_chat_stream_keeps_its_first_event(turn, server: FakeServer) -> None:
    server.add(Raw(body=with_bom(sse(chunk({"role": "assistant", "content": "HEL"}), chunk({"content": "LO"}),
                                     chunk({}, "stop"))), content_type="text/event-stream; charset=utf-8"))
    r = turn("-p", "hi", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "HELLO\n"), r.err
    assert "retrying" not in r.err and len(server.requests) == 1


def test_chat_stream_whose_first_event_opens_a_tool_call(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha contents\n")
    opening = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    rest = {"index": 0, "function": {"arguments": json.dumps({"path": "a.txt"})}}
    server.add(Raw(body=with_bom(sse(chunk({"role": "assistant", "tool_calls": [opening]}), chunk({"tool_calls": [rest]}),
                                     chunk({}, "tool_calls")))),
               Reply(text="read it"))
    r = turn("-p", "read a.txt", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "read it\n"), r.err
    tool = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool) == 1 and "alpha contents" in tool[0]["content"]


def test_responses_stream_keeps_its_first_event(turn, server: FakeServer) -> None:
    msg = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    body = named({"type": "response.output_item.added", "output_index": 0, "item": msg},
                 {"type": "response.output_text.delta", "item_id": "m1", "delta": "first "},
                 {"type": "response.output_text.delta", "item_id": "m1", "delta": "and second"},
                 {"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": []}})
    # The first events come as bare `data:` lines (as some compatible servers send them), the
    # first of them behind the mark: the event's type is then only in its data.
    first = sse({"type": "response.output_text.delta", "item_id": "m1", "delta": "HEL"},
                {"type": "response.output_text.delta", "item_id": "m1", "delta": "LO "}, done=False)
    body = (*with_bom(first), *body)
    server.add(Raw(body=body))
    r = turn("-p", "hi", "--wire-api", "responses", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "HELLO first and second\n"), r.err


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
def test_a_whole_json_answer_after_a_bom_is_read(turn, server: FakeServer, content_type: str) -> None:
    body = {"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": "whole"}}]}
    server.add(Raw(body=BOM + json.dumps(body).encode(), content_type=content_type))
    r = turn("-p", "hi", server=server)
    assert (r.code, r.out) == (0, "whole\n"), r.err
    assert "retrying" not in r.err


def test_an_error_line_after_a_bom_is_read_as_the_error(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "big.txt").write_text(("z" * 99 + "\n") * 40)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})),
               Raw(body=(BOM + b'error: {"code": 400, "message": "the request exceeds the available context size", '
                               b'"type": "exceed_context_size_error"}\n\n',)),
               Reply(text="SUMMARY"), Reply(text="fits"))
    r = turn("-p", "read big.txt", "--verbose", server=server)
    assert (r.code, r.out) == (0, "fits\n"), r.err
    assert "the endpoint said the context is too long" in r.err


def test_an_html_page_after_a_bom_fails_at_once(turn, server: FakeServer) -> None:
    server.add(Raw(body=BOM + b"<!DOCTYPE html><html><title>Sign in</title></html>"))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert "the endpoint answered an HTML page labelled text/event-stream, not an event stream; check base_url" in r.err
    assert len(server.requests) == 1


def test_an_html_error_page_after_a_bom_is_named_by_its_title(turn, server: FakeServer) -> None:
    page = BOM + b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    server.add(Raw(body=page, status=502, content_type="text/html"))
    r = turn("-p", "hi", server=server, config={"max_retries": 0})
    print(r.err)
    assert r.code == 1
    assert "the model endpoint answered 502 Bad Gateway: 502 Bad Gateway" in r.err
    assert "hint: a proxy or gateway in front of the model server failed" in r.err  # the whole: test_wording_cli.py
    assert "<" not in r.err


def test_only_one_leading_bom_is_dropped(turn, server: FakeServer) -> None:
    # A mark later in the stream is no part of the format: that line is an unknown field.
    frames = sse(chunk({"role": "assistant", "content": "kept"}), chunk({"content": " lost"}), chunk({}, "stop"))
    server.add(Raw(body=(BOM + frames[0], BOM + frames[1], *frames[2:])))
    r = turn("-p", "hi", server=server)
    assert (r.code, r.out) == (0, "kept\n"), r.err
