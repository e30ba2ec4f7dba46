"""Both wires (chat completions and the Responses API) on the same turn scenarios, through the
real `nanohermes -p` against the loopback server, which answers each route in its own form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply

WIRES = ["chat", "responses"]
ROUTE = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


def outputs(wire: str, request: dict[str, Any]) -> list[str]:
    """The tool results a request carries, in the wire's own form."""
    if wire == "chat":
        return [m["content"] for m in request["messages"] if m["role"] == "tool"]
    return [i["output"] for i in request["input"] if i.get("type") == "function_call_output"]


def last_user(wire: str, request: dict[str, Any]) -> str:
    items = request["messages"] if wire == "chat" else request["input"]
    return [i["content"] for i in items if i.get("role") == "user"][-1]


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(turn, server: FakeServer, wire: str, *args: str, **kw: Any) -> Any:  # type: ignore[no-untyped-def]
    r = turn(*args, "--wire-api", wire, server=server, **kw)
    print(r.out)
    return r


def test_plain_answer(turn, server: FakeServer, wire: str) -> None:
    server.add(Reply(text="Hello over the wire.", chunk_size=3))
    r = run(turn, server, wire, "-p", "say hello")
    assert (r.code, r.out) == (0, "Hello over the wire.\n"), r.err
    assert server.paths == [ROUTE[wire]]
    assert server.requests[0]["stream"] is True
    assert last_user(wire, server.requests[0]) == "say hello"
    if wire == "responses":
        assert server.requests[0]["store"] is False
        assert server.requests[0]["instructions"]  # the system prompt


def test_tool_round_trip_with_parallel_calls(turn, server: FakeServer, wire: str, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"}), call("read_file", {"path": "b.txt"}), text="Reading."),
               Reply(text="read both"))
    r = run(turn, server, wire, "-p", "read a and b")
    assert (r.code, r.out) == (0, "read both\n"), r.err  # the answer only: "Reading." was narration
    results = outputs(wire, server.requests[1])
    assert len(results) == 2 and "alpha" in results[0] and "beta" in results[1]
    assert server.violations == []


def test_usage_is_metered(turn, server: FakeServer, wire: str) -> None:
    server.add(Reply(text="counted", usage=(123, 45)))
    r = run(turn, server, wire, "-p", "count", "--output-format", "json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["result"] == "counted"
    assert (out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"]) == (123, 45)


def test_429_is_retried(turn, server: FakeServer, wire: str) -> None:
    server.add(Fault(status=429, retry_after=0), Reply(text="after the wait"))
    r = run(turn, server, wire, "-p", "x")
    assert (r.code, r.out) == (0, "after the wait\n"), r.err
    assert "endpoint answered 429; retrying" in r.err
    assert len(server.requests) == 2


def test_dropped_stream_is_retried_without_duplicated_text(turn, server: FakeServer, wire: str) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.add(Reply(text=text, drop_after=12), Reply(text=text))
    r = run(turn, server, wire, "-p", "x")
    assert (r.code, r.out) == (0, text + "\n"), r.err
    assert "stream dropped; retrying" in r.err


def test_refused_key(turn, wire: str) -> None:
    with FakeServer(api_key="right") as s:
        r = run(turn, s, wire, "-p", "x", env={"OPENAI_API_KEY": "wrong"})
    assert r.code == 1
    assert "refused the API key (401" in r.err and "hint: check the key" in r.err


def test_context_overflow_compacts(turn, server: FakeServer, wire: str, workspace: Path) -> None:
    (workspace / "big.txt").write_text(("z" * 99 + "\n") * 40)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})),
               Fault(status=400, code="context_length_exceeded", message="Your input exceeds the context window"),
               Reply(text="SUMMARY: read"), Reply(text="compacted answer"))
    r = run(turn, server, wire, "-p", "read big.txt")
    assert (r.code, r.out) == (0, "compacted answer\n"), r.err
    assert len(server.requests) == 4


def test_stream_json_events_and_transcript_resume(turn, server: FakeServer, wire: str, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="first"))
    r = run(turn, server, wire, "-p", "one", "--output-format", "stream-json")
    assert r.code == 0, r.err
    kinds = [e["type"] for e in r.lines()]
    assert "tool_started" in kinds and "tool_finished" in kinds and kinds.count("usage_update") == 2
    server.add(Reply(text="second"))
    r = run(turn, server, wire, "--continue", "-p", "two")
    assert (r.code, r.out) == (0, "second\n"), r.err
    assert "alpha" in outputs(wire, server.requests[2])[0]  # the resumed history went out in the wire's form
    assert server.violations == []


@pytest.mark.quirk("body.whole-json-answer", "body.json-labelled-as-stream")
@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
def test_non_streamed_answer_is_read(turn, server: FakeServer, wire: str, content_type: str) -> None:
    # A proxy that ignores `stream` and sends the whole answer as JSON, with its own content
    # type or still the stream's.
    from nanohermes.testing import Raw

    if wire == "chat":
        body = {"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
                                                          "message": {"role": "assistant", "content": "whole"}}]}
    else:
        body = {"object": "response", "status": "completed", "usage": {"input_tokens": 3, "output_tokens": 1},
                "output": [{"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": "whole", "annotations": []}]}]}
    server.add(Raw(body=json.dumps(body).encode(), content_type=content_type))
    r = run(turn, server, wire, "-p", "x")
    assert (r.code, r.out) == (0, "whole\n"), r.err
    assert "retrying" not in r.err and len(server.requests) == 1


def _events(*events: dict[str, Any]) -> tuple[bytes, ...]:
    return tuple(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_responses_failed_event_with_context_overflow_compacts(turn, server: FakeServer, workspace: Path) -> None:
    from nanohermes.testing import Raw

    (workspace / "big.txt").write_text("y" * 3000)
    failed = {"type": "response.failed", "response": {"id": "r1", "status": "failed", "output": [], "error": {
        "code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}
    server.add(tool_reply(call("read_file", {"path": "big.txt"})),
               Raw(body=_events({"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}, failed)),
               Reply(text="SUMMARY"), Reply(text="fits now"))
    r = run(turn, server, "responses", "-p", "read big.txt", "--verbose")
    assert (r.code, r.out) == (0, "fits now\n"), r.err
    assert "the endpoint said the context is too long" in r.err


def test_responses_error_event_mid_stream_is_retried(turn, server: FakeServer) -> None:
    from nanohermes.testing import Raw

    server.add(Raw(body=_events({"type": "response.output_text.delta", "item_id": "m", "delta": "par"},
                                {"type": "error", "code": "server_error", "message": "The server had an error"})),
               Reply(text="partial then whole"))
    r = run(turn, server, "responses", "-p", "x")
    assert (r.code, r.out) == (0, "partial then whole\n"), r.err  # "par" already shown is not shown twice
    assert "the endpoint reported an error mid-answer; retrying" in r.err


@pytest.mark.quirk("request.stream-options-refused", "request.encrypted-reasoning-refused")
@pytest.mark.parametrize(("wire", "message", "option"), [
    ("chat", "Unrecognized request argument supplied: stream_options", "stream_options"),
    ("responses", "Encrypted content is not supported with this model.", "include"),
])
def test_an_option_the_endpoint_refuses_is_dropped_once(turn, server: FakeServer, wire: str, message: str,
                                                       option: str) -> None:
    server.add(Fault(status=400, message=message), Reply(text="without it"))
    r = run(turn, server, wire, "-p", "x")
    assert (r.code, r.out) == (0, "without it\n"), r.err
    first, second = server.requests
    assert option in first and option not in second


def test_requests_say_who_sends_them_and_carry_the_key(turn, server: FakeServer, wire: str) -> None:
    server.add(Reply(text="ok"))
    r = run(turn, server, wire, "-p", "x", env={"OPENAI_API_KEY": "sk-wire-key"})
    assert r.code == 0, r.err
    headers = server.headers[0]
    assert headers["authorization"] == "Bearer sk-wire-key"
    assert headers["user-agent"].startswith("nanohermes/") and headers["accept"] == "text/event-stream"


def test_a_proxy_variable_is_honoured_for_a_plain_http_endpoint(turn, server: FakeServer) -> None:
    # The loopback server answers as the proxy: the request reaches it for a host that does not exist.
    server.add(Reply(text="through the proxy"))
    r = turn("-p", "x", "--base-url", "http://model.invalid/v1", "--model", "fake-model",
            env={"HTTP_PROXY": server.base_url.removesuffix("/v1"), "OPENAI_API_KEY": "k", "NO_PROXY": ""})
    print(r.out)
    assert (r.code, r.out) == (0, "through the proxy\n"), r.err
    assert server.headers[0]["host"] == "model.invalid"


def test_json_that_is_no_answer_fails_at_once(turn, server: FakeServer, wire: str) -> None:
    from nanohermes.testing import Raw

    server.add(Raw(body=b'{"status": "ok", "service": "gateway"}', content_type="application/json"))
    r = run(turn, server, wire, "-p", "x")
    print(r.err)
    assert r.code == 1
    assert "the endpoint answered JSON that is not" in r.err and "check base_url" in r.err
    assert len(server.requests) == 1


@pytest.mark.quirk("stream.done-on-responses")
def test_responses_stream_ended_by_done_before_completed_is_finished(turn, server: FakeServer) -> None:
    from nanohermes.testing import Raw

    msg = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    server.add(Raw(body=(*_events({"type": "response.output_item.added", "output_index": 0, "item": msg},
                                  {"type": "response.output_text.delta", "item_id": "m1", "delta": "said, "},
                                  {"type": "response.output_text.delta", "item_id": "m1", "delta": "then DONE"}),
                         b"data: [DONE]\n\n")))
    r = run(turn, server, "responses", "-p", "x")
    assert (r.code, r.out) == (0, "said, then DONE\n"), r.err
    assert "retrying" not in r.err and len(server.requests) == 1
