"""Errors sent inside a 200 answer are judged as a status is: their code, status and type
first, so a rate limit whose message sounds like an overflow ("too many tokens per minute")
is retried with the usual backoff and notices, never compacted, on both wires; a real
overflow still compacts. Each shape is sent byte for byte by the loopback server to the real
`nanohermes -p`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Fault, Raw, Reply, call, sse, tool_reply

TPM = "Rate limit exceeded: too many tokens per minute, retry shortly"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def named(*events: dict[str, Any]) -> tuple[bytes, ...]:
    """Responses API events, each under its `event:` name."""
    return tuple(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


CREATED = {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}}


def error_chunk(error: dict[str, Any]) -> Raw:
    """A chat stream that begins, then carries `{"error": ...}` as a data event (either wire reads it)."""
    return Raw(body=sse(chunk({"role": "assistant", "content": ""}), {"error": error}, done=False))


# Rate limits in the words of each server, every one of which also says "too many tokens".
RATE_LIMITS: dict[str, tuple[str, Raw]] = {
    "openai_code_429": ("chat", error_chunk({"code": 429, "message": TPM})),
    "code_429_as_text": ("chat", error_chunk({"code": "429", "message": TPM, "type": "invalid_request_error"})),
    "openai_rate_limit_code": ("chat", error_chunk({"code": "rate_limit_exceeded", "type": "tokens",
                                                   "message": "Too many tokens: limit 30000 per request window"})),
    "anthropic_type": ("chat", error_chunk({"type": "rate_limit_error", "message": "too many tokens, slow down"})),
    "gemini_status": ("chat", error_chunk({"code": 429, "status": "RESOURCE_EXHAUSTED",
                                          "message": "Too many tokens in this minute for the input token count quota"})),
    "message_only": ("chat", error_chunk({"message": "too many tokens per minute (TPM): limit 10000"})),
    "llamacpp_error_line": ("chat", Raw(body=(b'error: {"code": 429, "message": "too many tokens queued, rate limited"}\n\n',))),
    "responses_error_event": ("responses", Raw(body=named(CREATED, {
        "type": "error", "code": "rate_limit_exceeded", "param": None,
        "message": "Rate limit reached on tokens per min (TPM): too many tokens. Please try again in 20ms."}))),
    "responses_failed_event": ("responses", Raw(body=named(CREATED, {
        "type": "response.failed", "response": {"id": "r1", "status": "failed", "output": [], "error": {
            "code": "rate_limit_exceeded", "message": "Too many tokens per minute for this organization."}}}))),
    "responses_data_error": ("responses", error_chunk({"code": 429, "message": TPM})),
}


def last_user_texts(wire: str, request: dict[str, Any]) -> list[str]:
    items = request["messages"] if wire == "chat" else request["input"]
    return [json.dumps(i) for i in items]


@pytest.mark.parametrize("shape", list(RATE_LIMITS))
def test_an_in_stream_rate_limit_is_retried_not_compacted(turn, server: FakeServer, workspace: Path, shape: str) -> None:
    wire, limited = RATE_LIMITS[shape]
    (workspace / "big.txt").write_text("x" * 3000)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})), limited, Reply(text="answered after the wait"))
    r = turn("-p", "read big.txt", "--verbose", "--wire-api", wire, server=server)
    print(r.out, r.err)
    assert (r.code, r.out) == (0, "answered after the wait\n"), r.err
    assert r.err.count(" rate limit mid-answer; retrying ") == 1, r.err
    assert "(attempt 1 of 4)" in r.err
    assert "compacted" not in r.err and "context is too long" not in r.err
    assert len(server.requests) == 3  # the tool turn, the limited one, the same request again
    assert last_user_texts(wire, server.requests[2]) == last_user_texts(wire, server.requests[1])  # nothing compacted


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_an_in_stream_rate_limit_that_outlasts_the_retries_says_so(turn, server: FakeServer, wire: str) -> None:
    server.add(error_chunk({"code": 429, "message": TPM}), error_chunk({"code": 429, "message": TPM}))
    r = turn("-p", "hi", "--wire-api", wire, server=server, config={"max_retries": 1})
    print(r.err)
    assert r.code == 1
    [error] = [line for line in r.err.splitlines() if line.startswith("nanohermes: error: ")]
    assert error.endswith(f" mid-answer: {TPM}"), error
    # The same hint as a 429 status gives once its retries are spent.
    [hint] = [line for line in r.err.splitlines() if line.startswith("hint: ")]
    assert "(retried 1 time)" in hint and "max_retries" in hint, hint
    assert len(server.requests) == 2


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_the_same_body_as_a_429_status_is_retried_too(turn, server: FakeServer, wire: str) -> None:
    server.add(Fault(status=429, retry_after=0.1, message=TPM), Reply(text="after the status"))
    r = turn("-p", "hi", "--wire-api", wire, server=server)
    assert (r.code, r.out) == (0, "after the status\n"), r.err
    assert "endpoint answered 429; retrying" in r.err and "compacted" not in r.err


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_an_in_stream_server_failure_with_its_status_word_is_retried(turn, server: FakeServer, wire: str) -> None:
    server.add(error_chunk({"code": 503, "status": "UNAVAILABLE", "message": "The model is overloaded."}),
               Reply(text="served"))
    r = turn("-p", "hi", "--wire-api", wire, server=server)
    assert (r.code, r.out) == (0, "served\n"), r.err
    assert " error mid-answer; retrying" in r.err


OVERFLOWS: dict[str, tuple[str, Raw]] = {
    "chat_code_400": ("chat", error_chunk({"code": 400, "message": "request (9000 tokens) exceeds the available context "
                                                                   "size (8192 tokens)", "type": "exceed_context_size_error"})),
    "chat_too_many_tokens": ("chat", error_chunk({"code": 400, "message": "too many tokens in the prompt for this model"})),
    "llamacpp_500": ("chat", Raw(body=(b'error: {"code": 500, "message": "the request exceeds the available context size",'
                                       b' "type": "exceed_context_size_error"}\n\n',))),
    "gemini": ("chat", error_chunk({"code": 400, "status": "INVALID_ARGUMENT", "message": "The input token count (1200000) "
                                    "exceeds the maximum number of tokens allowed (1048576)."})),
    "responses_error_event": ("responses", Raw(body=named(CREATED, {
        "type": "error", "code": "context_length_exceeded", "param": "input",
        "message": "Your input exceeds the context window of this model."}))),
    "responses_vllm_data_error": ("responses", error_chunk({
        "code": 400, "type": "BadRequestError",
        "message": "The prompt (total length 9000) is too long to fit into the model (context length 8192)."})),
}


@pytest.mark.parametrize("shape", list(OVERFLOWS))
def test_an_in_stream_overflow_that_is_no_rate_limit_still_compacts(turn, server: FakeServer, workspace: Path,
                                                                   shape: str) -> None:
    wire, overflow = OVERFLOWS[shape]
    (workspace / "big.txt").write_text(("z" * 99 + "\n") * 40)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})), overflow, Reply(text="SUMMARY: read"),
               Reply(text="fits now"))
    r = turn("-p", "read big.txt", "--verbose", "--wire-api", wire, server=server)
    print(r.out, r.err)
    assert (r.code, r.out) == (0, "fits now\n"), r.err
    assert "the endpoint said the context is too long" in r.err
    assert "retrying" not in r.err
    assert len(server.requests) == 4


@pytest.mark.parametrize("how", ["status", "in-stream"])
def test_a_request_too_large_for_the_rate_limit_compacts_instead_of_waiting(turn, server: FakeServer,
                                                                           workspace: Path, how: str) -> None:
    """No wait lets it through (it alone exceeds the per-minute limit): a shorter one may."""
    message = ("Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested "
               "50000. The input or output tokens must be reduced in order to run successfully.")
    refusal = (Fault(status=429, code="rate_limit_exceeded", message=message, retry_after=0) if how == "status"
               else error_chunk({"code": "rate_limit_exceeded", "type": "tokens", "message": message}))
    (workspace / "big.txt").write_text(("z" * 99 + "\n") * 40)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})), refusal, Reply(text="SUMMARY: read"),
               Reply(text="fits now"))
    r = turn("-p", "read big.txt", "--verbose", server=server)
    assert (r.code, r.out) == (0, "fits now\n"), r.err
    assert "the endpoint said the context is too long" in r.err and "retrying" not in r.err
    assert len(server.requests) == 4
