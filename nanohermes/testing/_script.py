"""The script vocabulary of the fake endpoints: the answers a test plays (`Reply` and its
`FakeToolCall`s, `Fault`, `Raw` bytes and `sse` frames), the shorthands `call` and
`tool_reply`, and how an answer is cut into streamed pieces."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EXHAUSTED_MESSAGE = "fake server script exhausted"


@dataclass(frozen=True, kw_only=True)
class FakeToolCall:
    """One tool call the scripted assistant makes."""

    name: str
    # A dict is json.dumps'ed; a str is sent verbatim so tests can send malformed JSON.
    arguments: str | dict[str, Any]
    # "auto": the server assigns a unique "call_<n>"; None: the id field is omitted.
    id: str | None = "auto"


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted assistant answer."""

    text: str = ""
    tool_calls: tuple[FakeToolCall, ...] = ()
    usage: tuple[int, int] | None = (10, 5)  # (prompt, completion) tokens; None: no usage
    drop_after: int | None = None  # streaming only: abort the socket after this many text chars
    delay: float = 0.0  # seconds to wait before answering
    chunk_size: int = 4  # streamed text (and argument) piece size
    reasoning: str = ""  # the model's thinking: `reasoning_content` deltas, or a Responses reasoning item
    stall_after: int | None = None  # streaming only: after this many text chars, stall for `stall_secs`
    stall_secs: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Raw:
    """An answer of exactly these bytes: each element of `body` is written (and flushed) as
    one piece, so a test can replay a provider's stream as that provider sends it."""

    body: bytes | tuple[bytes, ...]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: tuple[tuple[str, str], ...] = ()


def sse(*events: Any, done: bool = True) -> tuple[bytes, ...]:
    """Server-sent-event frames: a dict is sent as `data: <json>`, bytes as they are;
    `data: [DONE]` ends the stream unless `done` is False."""
    frames = [e if isinstance(e, bytes) else b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    return tuple(frames + ([b"data: [DONE]\n\n"] if done else []))


@dataclass(frozen=True, kw_only=True)
class Fault:
    """An HTTP error answer instead of a completion."""

    status: int
    retry_after: float | None = None  # sent as the Retry-After header
    message: str = "injected fault"
    code: str | None = None  # e.g. "context_length_exceeded", "model_not_found"


ScriptItem = Reply | Fault | Raw | Callable[[dict[str, Any]], Reply | Fault | Raw]


def error_type(status: int) -> str:
    """The error "type" OpenAI gives a status, so client error mapping sees realistic bodies."""
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def text_pieces(text: str, size: int, minimum: int = 1) -> list[str]:
    """Split text into pieces of at most `size` chars, padding with "" up to `minimum`."""
    if minimum > 1 and len(text) >= minimum:
        size = min(size, len(text) // minimum)  # force a real split, not just padding
    size = max(1, size)
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return parts + [""] * (minimum - len(parts))


def call(name: str, arguments: str | dict[str, Any] | None = None, *, id: str | None = "auto") -> FakeToolCall:
    """Shorthand: `call("read_file", {"path": "a.txt"})`."""
    return FakeToolCall(name=name, arguments={} if arguments is None else arguments, id=id)


def tool_reply(*calls: FakeToolCall, text: str = "") -> Reply:
    """Shorthand for an assistant answer that calls tools."""
    return Reply(text=text, tool_calls=tuple(calls))
