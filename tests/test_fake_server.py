"""Tests for nanohermes.testing.FakeServer, driven by the real openai SDK and raw httpx."""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nanohermes.testing import FakeServer, FakeToolCall, Fault, Reply


class _OnFirstUse:
    """The openai SDK, imported when a test first uses it: every test process imports every
    test module, and the SDK (half a second of CPU) is needed by this file alone."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pytest looks for its own marks on every name of a test module
            raise AttributeError(name)
        return getattr(importlib.import_module("openai"), name)


openai = _OnFirstUse()

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def client(srv: FakeServer, api_key: str = "sk-test") -> openai.OpenAI:
    # max_retries=0: faults must surface immediately instead of being retried.
    return openai.OpenAI(base_url=srv.base_url, api_key=api_key, max_retries=0)


def test_streaming_text_reassembled_by_async_sdk(server: FakeServer) -> None:
    server.add(Reply(text="Hello, streaming world!", chunk_size=3))

    async def run() -> list[str]:
        aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        stream = await aclient.chat.completions.create(model="fake-model", messages=USER, stream=True)
        pieces = [chunk.choices[0].delta.content or "" async for chunk in stream]
        await aclient.close()
        return pieces

    pieces = asyncio.run(run())
    assert "".join(pieces) == "Hello, streaming world!"
    assert len([p for p in pieces if p]) > 1  # really chunked, not one blob
    assert server.requests[0]["stream"] is True
    assert server.violations == []


def test_streamed_parallel_tool_calls_reassembled_by_index(server: FakeServer) -> None:
    server.add(
        Reply(
            text="Let me look.",
            tool_calls=(
                FakeToolCall(name="read_file", arguments={"path": "a.py"}),
                FakeToolCall(name="grep", arguments={"pattern": "def main", "path": "."}, id="call_custom"),
            ),
        )
    )
    # The SDK's stream helper accumulates deltas by "index", exactly what an agent must do.
    with client(server).chat.completions.stream(model="fake-model", messages=USER) as stream:
        raw = [event.chunk for event in stream if event.type == "chunk"]
        final = stream.get_final_completion()

    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    calls = choice.message.tool_calls or []
    assert [c.id for c in calls] == ["call_1", "call_custom"]
    assert [c.function.name for c in calls] == ["read_file", "grep"]
    assert json.loads(calls[0].function.arguments) == {"path": "a.py"}
    assert json.loads(calls[1].function.arguments) == {"pattern": "def main", "path": "."}
    # Each call's arguments arrive in 2+ pieces, and the calls are interleaved.
    arg_deltas = [
        tc.index
        for chunk in raw
        if chunk.choices
        for tc in chunk.choices[0].delta.tool_calls or []
        if tc.function and tc.function.arguments
    ]
    assert arg_deltas.count(0) >= 2 and arg_deltas.count(1) >= 2
    assert arg_deltas != sorted(arg_deltas)


def test_auto_ids_are_unique_across_turns(server: FakeServer) -> None:
    call = FakeToolCall(name="ls", arguments={})
    server.add(Reply(tool_calls=(call,)), Reply(tool_calls=(call,)))
    sdk = client(server)
    first = sdk.chat.completions.create(model="fake-model", messages=USER)
    second = sdk.chat.completions.create(model="fake-model", messages=USER)
    assert first.choices[0].message.tool_calls[0].id != second.choices[0].message.tool_calls[0].id  # type: ignore[index]


def sse_events(response: httpx.Response) -> list[Any]:
    """Parse an SSE body into JSON payloads (and the literal "[DONE]")."""
    events: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_missing_id_is_omitted_from_stream(server: FakeServer) -> None:
    server.add(Reply(tool_calls=(FakeToolCall(name="ls", arguments="{bad json", id=None),)))
    body = {"model": "fake-model", "messages": USER, "stream": True}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    assert events[-1] == "[DONE]"
    deltas = [tc for e in events[:-1] for tc in e["choices"][0]["delta"].get("tool_calls", [])]
    assert deltas[0]["function"]["name"] == "ls"
    assert all("id" not in d for d in deltas)
    # Malformed arguments are sent verbatim, split across deltas.
    assert "".join(d["function"]["arguments"] for d in deltas) == "{bad json"
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_usage_chunk_only_when_requested(server: FakeServer) -> None:
    server.add(Reply(text="ok", usage=(7, 3)), Reply(text="ok", usage=(7, 3)))
    sdk = client(server)
    with_usage = list(
        sdk.chat.completions.create(
            model="fake-model", messages=USER, stream=True, stream_options={"include_usage": True}
        )
    )
    last = with_usage[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (7, 3, 10)
    without = list(sdk.chat.completions.create(model="fake-model", messages=USER, stream=True))
    assert all(chunk.usage is None for chunk in without)


def test_non_streaming_reply(server: FakeServer) -> None:
    server.add(Reply(text="plain answer", usage=(12, 4)))
    completion = client(server).chat.completions.create(model="other-model", messages=USER)
    assert completion.object == "chat.completion"
    assert completion.model == "other-model"
    assert completion.choices[0].message.content == "plain answer"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == 16


def test_non_streaming_tool_call_has_null_content(server: FakeServer) -> None:
    server.add(Reply(tool_calls=(FakeToolCall(name="ls", arguments={"path": "/"}),)))
    message = client(server).chat.completions.create(model="fake-model", messages=USER).choices[0].message
    assert message.content is None
    assert message.tool_calls is not None and message.tool_calls[0].function.arguments == '{"path": "/"}'


def test_fault_429_with_retry_after(server: FakeServer) -> None:
    server.add(Fault(status=429, retry_after=2.5, message="slow down"), Fault(status=429, code="rate_limit_exceeded"))
    response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": USER})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2.5"
    assert response.json() == {"error": {"message": "slow down", "type": "rate_limit_error", "code": None}}
    with pytest.raises(openai.RateLimitError) as info:
        client(server).chat.completions.create(model="m", messages=USER)
    assert info.value.code == "rate_limit_exceeded"
    assert "retry-after" not in info.value.response.headers


def test_callable_script_item_sees_request(server: FakeServer) -> None:
    def echo(body: dict[str, Any]) -> Reply | Fault:
        if body["model"] == "missing":
            return Fault(status=404, code="model_not_found", message="no such model")
        return Reply(text=f"you said {body['messages'][-1]['content']}")

    server.add(echo, echo)
    sdk = client(server)
    assert sdk.chat.completions.create(model="m", messages=USER).choices[0].message.content == "you said hi"
    with pytest.raises(openai.NotFoundError) as info:
        sdk.chat.completions.create(model="missing", messages=USER)
    assert info.value.code == "model_not_found"


def test_api_key_enforced_on_chat_and_models() -> None:
    with FakeServer([Reply(text="secret ok")], api_key="sk-right") as srv:
        with pytest.raises(openai.AuthenticationError) as info:
            client(srv, api_key="sk-wrong").chat.completions.create(model="m", messages=USER)
        assert info.value.code == "invalid_api_key"
        assert info.value.body == {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
        assert httpx.get(f"{srv.base_url}/models").status_code == 401
        # The rejected request is still recorded, with its headers, and no script item was used.
        assert srv.headers[0]["authorization"] == "Bearer sk-wrong"
        reply = client(srv, api_key="sk-right").chat.completions.create(model="m", messages=USER)
        assert reply.choices[0].message.content == "secret ok"


def test_models_endpoint_and_unknown_path() -> None:
    with FakeServer(models=("alpha", "beta")) as srv:
        assert [m.id for m in client(srv).models.list()] == ["alpha", "beta"]
        response = httpx.get(f"{srv.base_url}/nope")
        assert response.status_code == 404
        assert "error" in response.json()


@pytest.mark.parametrize("use_async", [False, True])
def test_drop_after_raises_connection_error(server: FakeServer, use_async: bool) -> None:
    server.add(Reply(text="abcdefghijklmnopqrstuvwxyz", drop_after=6))
    received: list[str] = []

    async def consume_async() -> None:
        aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        stream = await aclient.chat.completions.create(model="m", messages=USER, stream=True)
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")

    def consume_sync() -> None:
        for chunk in client(server).chat.completions.create(model="m", messages=USER, stream=True):
            received.append(chunk.choices[0].delta.content or "")

    # The chunked body is left unterminated, so the SDK raises rather than ending quietly.
    with pytest.raises(openai.APIConnectionError) as info:
        asyncio.run(consume_async()) if use_async else consume_sync()
    assert type(info.value.__cause__).__name__ == "RemoteProtocolError"
    assert "".join(received) == "abcdef"


def test_violation_recorded_and_answered_400(server: FakeServer) -> None:
    server.add(Reply(text="never sent"))
    messages = [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {"role": "user", "content": "hello?"},  # the tool result for call_a is missing
    ]
    with pytest.raises(openai.BadRequestError) as info:
        client(server).chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert len(server.requests) == 1
    assert server.violations == ["messages[1] (assistant) tool call id(s) ['call_a'] have no tool result before messages[2] (user)"]
    assert server.violations[0] in info.value.message
    # The rejected request did not consume the scripted reply.
    assert client(server).chat.completions.create(model="m", messages=USER).choices[0].message.content == "never sent"


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "tool", "tool_call_id": "x", "content": "?"}], "not a tool call of the immediately preceding"),
        ([{"role": "robot", "content": "beep"}], "invalid role 'robot'"),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "2"},
            ],
            "a second time",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "b", "content": "1"},
            ],
            "unknown tool_call_id 'b'",
        ),
    ],
)
def test_other_violations(server: FakeServer, messages: list[dict[str, Any]], fragment: str) -> None:
    response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": messages})
    assert response.status_code == 400
    assert fragment in response.json()["error"]["message"]
    assert any(fragment in v for v in server.violations)


def test_valid_tool_round_trip_has_no_violation(server: FakeServer) -> None:
    server.add(Reply(text="done"))
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "b.py"},  # order within the block is free
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "user", "content": "thanks"},
    ]
    assert client(server).chat.completions.create(model="m", messages=messages).choices[0].message.content == "done"  # type: ignore[arg-type]
    assert server.violations == []


def test_script_exhausted_and_default(server: FakeServer) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        client(server).chat.completions.create(model="m", messages=USER)
    assert "fake server script exhausted" in info.value.message
    assert server.violations and "script exhausted" in server.violations[0]
    with FakeServer(default=Reply(text="again")) as srv:
        sdk = client(srv)
        texts = [sdk.chat.completions.create(model="m", messages=USER).choices[0].message.content for _ in range(3)]
        assert texts == ["again"] * 3 and srv.violations == []


def test_stop_is_idempotent_and_quick_despite_delay() -> None:
    srv = FakeServer([Reply(text="late", delay=30)]).start()
    url = srv.base_url
    srv.stop()
    srv.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models")
    # A handler sleeping in a delay is woken by stop() instead of holding it up.
    srv = FakeServer([Reply(text="late", delay=30)]).start()
    sdk = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        sdk.chat.completions.create(model="m", messages=USER)
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 15  # not the reply's 30 s delay, however loaded the machine


def test_responses_route_is_read_by_the_sdk(server: FakeServer) -> None:
    # The Responses fake must be what the real SDK parses: text, reasoning and a function call.
    server.add(Reply(text="Hi there.", reasoning="Think first.",
                     tool_calls=(FakeToolCall(name="read_file", arguments={"path": "a.py"}),), usage=(9, 4)))
    sdk = client(server)
    with sdk.responses.stream(model="fake-model", input=[{"role": "user", "content": "hi"}], store=False) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.reasoning_summary_text.delta" in kinds and "response.function_call_arguments.delta" in kinds
    assert final.output_text == "Hi there."
    calls = [o for o in final.output if o.type == "function_call"]
    assert calls[0].name == "read_file" and json.loads(calls[0].arguments) == {"path": "a.py"}
    reasoning = next(o for o in final.output if o.type == "reasoning")
    assert reasoning.encrypted_content == "enc:" + "Think first."[::-1]
    assert final.usage is not None and (final.usage.input_tokens, final.usage.output_tokens) == (9, 4)
    assert server.paths == ["/v1/responses"]


def test_responses_protocol_violations_are_refused(server: FakeServer) -> None:
    body = {"model": "m", "stream": False, "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "nope", "output": "x"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]}
    response = httpx.post(f"{server.base_url}/responses", json=body)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "answers unknown call_id 'nope'" in message
    assert "refers to item id 'rs_1'" in message and "has no encrypted_content" in message
    server.violations.clear()


def test_raw_sends_exactly_its_bytes(server: FakeServer) -> None:
    from nanohermes.testing import Raw

    server.add(Raw(body=(b"data: {\"a\": 1}\n\n", b": comment\n\n"), content_type="text/event-stream"))
    response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": USER, "stream": True})
    assert response.content == b"data: {\"a\": 1}\n\n: comment\n\n"
    assert response.headers["content-type"] == "text/event-stream"
