"""Loopback fake of an OpenAI-compatible server (chat completions and the Responses API), for tests.

This module is public and stable: users import it to test their own setups, hooks and scripts
against a fake endpoint (docs/testing.md shows how), and nanohermes's own tests use it the same
way. The names in `__all__` keep their meaning across versions; the rest is private.

This module owns `FakeServer` and its script vocabulary (`Reply`, `FakeToolCall`,
`Fault`, `Raw`). A test scripts the assistant's answers in order, points a client at
`server.base_url`, and afterwards inspects `server.requests`, `server.paths`,
`server.headers`, `server.asked` (every request, model calls or not) and `server.violations`.
The same `Reply` is played as chat-completion
chunks on `/v1/chat/completions` and as Responses events on `/v1/responses`, so one
scenario tests both wires; `Raw` sends exactly the bytes a test gives (a provider's
stream shape, an HTML page), on either route; `models_answer` does the same for `/v1/models`,
whose entries `model_fields` extends (a context window); `routes` answers a local server's
own paths (`/props`, `/api/show`, ...) with fixed JSON; `routes_asked` records every request that
is not a model call (those, `/v1/models`, and any path the server does not have).

Besides answering, the server checks the tool-calling protocol of every
conversation it receives (each assistant tool call answered by exactly one
contiguous tool message, no orphan tool messages, valid roles). Real providers
reject such conversations with a 400, so the fake does too, and records why.

`ScriptedLLM` plays the same script in-process, through the `LLM` protocol,
for tests of the loop that need no HTTP. `call()` and `tool_reply()` are
shorthands for scripting tool calls.

The server uses the standard library only; `ScriptedLLM` imports nanohermes's
message types lazily, so tests of any layer can use the server without pulling
in the code under test.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeServer", "FakeToolCall", "Fault", "Raw", "Reply", "ScriptItem", "ScriptedLLM", "call",
           "check_protocol", "check_responses_protocol", "sse", "tool_reply"]

VALID_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
EXHAUSTED_MESSAGE = "fake server script exhausted"
MODEL_CALLS = frozenset({("POST", "/v1/chat/completions"), ("POST", "/v1/responses")})


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


def _error_type(status: int) -> str:
    # Mirrors the "type" values OpenAI uses, so client error mapping sees realistic bodies.
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def _pieces(text: str, size: int, minimum: int = 1) -> list[str]:
    """Split text into pieces of at most `size` chars, padding with "" up to `minimum`."""
    if minimum > 1 and len(text) >= minimum:
        size = min(size, len(text) // minimum)  # force a real split, not just padding
    size = max(1, size)
    parts = [text[i : i + size] for i in range(0, len(text), size)]
    return parts + [""] * (minimum - len(parts))


def _role(msg: Any) -> Any:
    return msg.get("role") if isinstance(msg, dict) else None


def check_protocol(messages: Any) -> list[str]:
    """Return descriptions of tool-calling protocol violations in `messages`."""
    if not isinstance(messages, list) or not messages:
        return ["'messages' must be a non-empty list"]
    problems: list[str] = []
    i = 0
    while i < len(messages):
        msg, role = messages[i], _role(messages[i])
        start, i = i, i + 1
        if role not in VALID_ROLES:
            problems.append(f"messages[{start}] has invalid role {role!r}")
            continue
        if role == "tool":
            # Tool messages inside a valid block are consumed below; reaching one here
            # means it does not directly follow the assistant message that made the call.
            problems.append(
                f"messages[{start}] (tool) answers tool_call_id {msg.get('tool_call_id')!r} "
                "which is not a tool call of the immediately preceding assistant message"
            )
            continue
        calls = msg.get("tool_calls") if role == "assistant" else None
        if not calls:
            continue
        pending: list[str] = []
        for k, call in enumerate(calls):
            cid = call.get("id") if isinstance(call, dict) else None
            if isinstance(cid, str) and cid:
                pending.append(cid)
            else:
                problems.append(f"messages[{start}] (assistant) tool_calls[{k}] has no id")
        answered: set[str] = set()
        # The results must follow contiguously (in any order); consume that run of tool messages.
        while i < len(messages) and _role(messages[i]) == "tool":
            tid = messages[i].get("tool_call_id")
            if not isinstance(tid, str):
                problems.append(f"messages[{i}] (tool) has no tool_call_id")
            elif tid in pending:
                pending.remove(tid)
                answered.add(tid)
            elif tid in answered:
                problems.append(f"messages[{i}] (tool) answers tool_call_id {tid!r} a second time")
            else:
                problems.append(f"messages[{i}] (tool) answers unknown tool_call_id {tid!r}")
            i += 1
        if pending:
            where = f"before messages[{i}] ({_role(messages[i])})" if i < len(messages) else "at the end of the conversation"
            problems.append(f"messages[{start}] (assistant) tool call id(s) {pending} have no tool result {where}")
    return problems


def check_responses_protocol(items: Any) -> list[str]:
    """The Responses API's form of `check_protocol`: every function_call answered by exactly
    one function_call_output after it, no output without its call, no item ids (with
    store=false the server keeps no items to refer to)."""
    if not isinstance(items, list) or not items:
        return ["'input' must be a non-empty list"]
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"input[{k}] is not an object")
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") not in VALID_ROLES:
            problems.append(f"input[{k}] has invalid role {item.get('role')!r}")
        if item.get("id") and kind in ("reasoning", "message", "function_call"):
            problems.append(f"input[{k}] ({kind}) refers to item id {item['id']!r}, but items are not stored")
        if kind == "reasoning" and not item.get("encrypted_content"):
            problems.append(f"input[{k}] (reasoning) has no encrypted_content")
        cid = item.get("call_id")
        if kind == "function_call":
            if not isinstance(cid, str) or not cid:
                problems.append(f"input[{k}] (function_call) has no call_id")
            else:
                calls[cid] = k
        elif kind == "function_call_output":
            if cid not in calls:
                problems.append(f"input[{k}] (function_call_output) answers unknown call_id {cid!r}")
            elif cid in answered:
                problems.append(f"input[{k}] (function_call_output) answers call_id {cid!r} a second time")
            answered.add(str(cid))
    missing = [c for c in calls if c not in answered]
    if missing:
        problems.append(f"function call(s) {missing} have no function_call_output")
    return problems


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so chunked streaming is allowed; every response still closes its
    # connection, which keeps shutdown simple (no idle keep-alive threads).
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 30  # a stuck client must not pin a handler thread forever

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature, `format` included
        pass  # quiet: tests should not print access logs

    @property
    def fake(self) -> FakeServer:
        return self.server.fake

    # -- plumbing --------------------------------------------------------

    def _send_json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _send_error(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> None:
        error = {"message": message, "type": _error_type(status), "code": code}
        self._send_json(status, {"error": error}, headers)

    def _authorized(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._send_error(401, "Incorrect API key provided", "invalid_api_key")
        return False

    def _path(self) -> str:
        path = self.path
        if path.startswith(("http://", "https://")):  # absolute form: the client sent it through us as a proxy
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        return path.split("?", 1)[0].rstrip("/")

    def parse_request(self) -> bool:
        """The request line and headers read: every request is recorded, whatever it asks."""
        ok = super().parse_request()
        if ok:
            self.fake._record_asked(self.command, self._path())
        return ok

    # -- routes ----------------------------------------------------------

    def _other_route(self) -> bool:
        """A path of `FakeServer.routes` (a local server's own, such as /props): answered with
        its JSON; True when it was one."""
        path = self._path()
        if path not in self.fake.routes:
            return False
        self._send_json(200, self.fake.routes[path])
        return True

    def do_GET(self) -> None:
        answer = self.fake.models_answer
        if self._other_route():
            return
        if self._path() != "/v1/models":
            self._send_error(404, f"Unknown path {self.path}", "not_found")
        elif isinstance(answer, Raw):
            self._raw(answer)
        elif isinstance(answer, Fault):
            self._send_error(answer.status, answer.message, answer.code)
        elif self._authorized():
            data = [{"id": m, "object": "model", "created": 0, "owned_by": self.fake.owned_by, **self.fake.model_fields}
                    for m in self.fake.models]
            self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self._other_route():
            return
        route = self._path()
        if route not in ("/v1/chat/completions", "/v1/responses"):
            self._send_error(404, f"Unknown path {self.path}", "not_found")
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_error(400, "request body is not a JSON object")
            return
        # Recorded before auth so tests can inspect what a rejected client sent.
        self.fake._record(body, {k.lower(): v for k, v in self.headers.items()}, route)
        if not self._authorized():
            return
        responses = route == "/v1/responses"
        tools = body.get("tools") or []
        if self.fake.max_tools is not None and isinstance(tools, list) and len(tools) > self.fake.max_tools:
            # OpenAI's answer to too many functions; a client must never send such a request.
            message = (f"Invalid 'tools': array too long. Expected an array with maximum length "
                       f"{self.fake.max_tools}, but got an array with length {len(tools)} instead.")
            self.fake._violate([message])
            self._send_error(400, message, "array_above_max_length")
            return
        problems = check_responses_protocol(body.get("input")) if responses else check_protocol(body.get("messages"))
        if problems:
            # Not consuming a script item: the provider would reject before generating.
            self.fake._violate(problems)
            self._send_error(400, "; ".join(problems))
            return
        item = self.fake._next_item(body)
        if item is None:
            self._send_error(500, EXHAUSTED_MESSAGE)
            return
        if isinstance(item, Reply) and item.delay > 0:
            self.fake._stopping.wait(item.delay)  # interruptible so stop() is never slow
        if isinstance(item, Raw):
            self._raw(item)
        elif isinstance(item, Fault):
            extra = {} if item.retry_after is None else {"Retry-After": f"{item.retry_after:g}"}
            self._send_error(item.status, item.message, item.code, extra)
        elif responses:
            self._respond(body, item)
        elif body.get("stream"):
            self._stream(body, item)
        else:
            self._complete(body, item)

    def _raw(self, item: Raw) -> None:
        pieces = (item.body,) if isinstance(item.body, bytes) else item.body
        self.send_response(item.status)
        self.send_header("Content-Type", item.content_type)
        self.send_header("Content-Length", str(sum(len(p) for p in pieces)))
        self.send_header("Connection", "close")
        for key, value in item.headers:
            self.send_header(key, value)
        self.end_headers()
        self.close_connection = True
        for piece in pieces:
            self.wfile.write(piece)
            self.wfile.flush()

    # -- completions -----------------------------------------------------

    def _complete(self, body: dict[str, Any], reply: Reply) -> None:
        calls = self.fake._render_calls(reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or (None if calls else "")}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = calls
        payload: dict[str, Any] = {
            "id": self.fake._completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.fake.models[0],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        }
        if reply.usage is not None:
            payload["usage"] = _usage(reply.usage)
        self._send_json(200, payload)

    def _chunk(self, data: bytes) -> None:
        # One chunked-encoding frame per SSE event, flushed so the client sees it now.
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = {
            "id": self.fake._completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model") or self.fake.models[0],
        }

        def event(payload: dict[str, Any]) -> None:
            self._chunk(b"data: " + json.dumps({**base, **payload}).encode() + b"\n\n")

        def delta(d: dict[str, Any], finish: str | None = None) -> None:
            event({"choices": [{"index": 0, "delta": d, "finish_reason": finish}]})

        delta({"role": "assistant", "content": ""})
        for piece in _pieces(reply.reasoning, reply.chunk_size) if reply.reasoning else []:
            delta({"reasoning_content": piece})
        text = reply.text if reply.drop_after is None else reply.text[: reply.drop_after]
        sent = 0
        for piece in _pieces(text, reply.chunk_size) if text else []:
            if reply.stall_after is not None and sent <= reply.stall_after < sent + len(piece):
                head = reply.stall_after - sent
                if head:
                    delta({"content": piece[:head]})
                self.fake._stopping.wait(reply.stall_secs)  # a model that stops mid-answer
                delta({"content": piece[head:]})
            else:
                delta({"content": piece})
            sent += len(piece)
        if reply.drop_after is not None:
            # Abort mid-body: the chunked stream is left unterminated, like a dead upstream.
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        calls = self.fake._render_calls(reply)
        for d in _tool_call_deltas(calls, reply.chunk_size):
            delta({"tool_calls": [d]})
        delta({}, "tool_calls" if calls else "stop")
        options = body.get("stream_options") or {}
        if reply.usage is not None and isinstance(options, dict) and options.get("include_usage"):
            event({"choices": [], "usage": _usage(reply.usage)})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")  # zero-length frame terminates the chunked body


    # -- the Responses API -------------------------------------------------

    def _respond(self, body: dict[str, Any], reply: Reply) -> None:
        """`reply` as the Responses API answers it: streamed events, or one response object."""
        fake = self.fake
        rid = fake._completion_id().replace("chatcmpl", "resp")
        output: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        if reply.reasoning:
            item = {"type": "reasoning", "id": f"rs_{rid}", "summary": [{"type": "summary_text", "text": reply.reasoning}],
                    "encrypted_content": "enc:" + reply.reasoning[::-1]}  # opaque to the client, checkable by tests
            events.append({"type": "response.output_item.added", "output_index": len(output),
                           "item": {**item, "summary": []}})
            at = {"item_id": item["id"], "output_index": len(output), "summary_index": 0}
            events.append({"type": "response.reasoning_summary_part.added", **at, "part": {"type": "summary_text", "text": ""}})
            events += [{"type": "response.reasoning_summary_text.delta", **at, "delta": p}
                       for p in _pieces(reply.reasoning, reply.chunk_size)]
            events.append({"type": "response.reasoning_summary_text.done", **at, "text": reply.reasoning})
            events.append({"type": "response.reasoning_summary_part.done", **at,
                           "part": {"type": "summary_text", "text": reply.reasoning}})
            events.append({"type": "response.output_item.done", "output_index": len(output), "item": item})
            output.append(item)
        text = reply.text if reply.drop_after is None else reply.text[: reply.drop_after]
        if reply.text:
            msg = {"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
            events.append({"type": "response.output_item.added", "output_index": len(output),
                           "item": {**msg, "content": [], "status": "in_progress"}})
            at = {"item_id": msg["id"], "output_index": len(output), "content_index": 0}
            events.append({"type": "response.content_part.added", **at,
                           "part": {"type": "output_text", "text": "", "annotations": []}})
            events += [{"type": "response.output_text.delta", **at, "delta": p} for p in _pieces(text, reply.chunk_size)]
            if reply.drop_after is None:
                events.append({"type": "response.output_text.done", **at, "text": reply.text})
                events.append({"type": "response.content_part.done", **at, "part": msg["content"][0]})
                events.append({"type": "response.output_item.done", "output_index": len(output), "item": msg})
            output.append(msg)
        for n, call in enumerate(fake._render_calls(reply)):
            fc = {"type": "function_call", "id": f"fc_{rid}_{n}", "call_id": call.get("id", f"call_{rid}_{n}"),
                  "name": call["function"]["name"], "arguments": call["function"]["arguments"], "status": "completed"}
            events.append({"type": "response.output_item.added", "output_index": len(output),
                           "item": {**fc, "arguments": "", "status": "in_progress"}})
            events += [{"type": "response.function_call_arguments.delta", "item_id": fc["id"], "output_index": len(output),
                        "delta": p} for p in _pieces(fc["arguments"], reply.chunk_size, minimum=2)]
            events.append({"type": "response.function_call_arguments.done", "item_id": fc["id"],
                           "output_index": len(output), "arguments": fc["arguments"]})
            events.append({"type": "response.output_item.done", "output_index": len(output), "item": fc})
            output.append(fc)
        response: dict[str, Any] = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
                                    "model": body.get("model") or fake.models[0], "output": output}
        if reply.usage is not None:
            prompt, completion = reply.usage
            response["usage"] = {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}
        if not body.get("stream"):
            self._send_json(200, response)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        head = {**response, "status": "in_progress", "output": []}
        head.pop("usage", None)
        seq = itertools.count()

        def send(event: dict[str, Any]) -> None:
            event = {**event, "sequence_number": next(seq)}
            self._chunk(f"event: {event['type']}\ndata: ".encode() + json.dumps(event).encode() + b"\n\n")

        send({"type": "response.created", "response": head})
        for event in events:
            send(event)
        if reply.drop_after is not None:
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        send({"type": "response.completed", "response": response})
        self._chunk(b"")


def _usage(usage: tuple[int, int]) -> dict[str, int]:
    prompt, completion = usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _tool_call_deltas(calls: list[dict[str, Any]], chunk_size: int) -> Iterator[dict[str, Any]]:
    """Yield streaming deltas for `calls`, interleaving their argument pieces.

    Each call's header delta (index, id, type, name, empty arguments) precedes its
    own pieces, but pieces of different calls are interleaved round-robin, so a
    client only reassembles correctly if it keys on "index" (not "the last call").
    """
    queues: list[deque[dict[str, Any]]] = []
    for index, call in enumerate(calls):
        header: dict[str, Any] = {"index": index, "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
        if "id" in call:
            header["id"] = call["id"]
        pieces = _pieces(call["function"]["arguments"], chunk_size, minimum=2)
        queues.append(deque([header, *({"index": index, "function": {"arguments": p}} for p in pieces)]))
    while any(queues):
        for q in queues:
            if q:
                yield q.popleft()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-answer are expected in tests; stay quiet


class FakeServer:
    """A scripted OpenAI-compatible server on 127.0.0.1, run in a daemon thread."""

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        api_key: str | None = None,
        models: Sequence[str] = ("fake-model",),
        default: Reply | None = None,
        owned_by: str = "fake",  # what /v1/models says owns each model ("llamacpp", "vllm", "library" for Ollama)
        models_answer: Raw | Fault | None = None,  # what GET /v1/models answers instead of the list (a 404, a page)
        model_fields: dict[str, Any] | None = None,  # more fields of each /v1/models entry (context_length, ...)
        routes: dict[str, Any] | None = None,  # other paths (GET or POST) and the JSON they answer: /props, /api/show
        max_tools: int | None = None,  # refuse a request with more functions, as OpenAI's 128 are refused
    ) -> None:
        self.api_key = api_key
        self.max_tools = max_tools
        self.models_answer = models_answer
        self.model_fields = dict(model_fields or {})
        self.routes = dict(routes or {})
        self.routes_asked: list[str] = []  # "GET /v1/models", "GET /props", ...: every request but the model calls
        self.asked: list[str] = []  # every request, "METHOD /path", in order ("POST /v1/chat/completions", ...)
        self.models = tuple(models)
        self.owned_by = owned_by
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []  # the route of each request: /v1/chat/completions or /v1/responses
        self.violations: list[str] = []
        self._script: deque[ScriptItem] = deque(script)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)  # completion ids
        self._call_ids = itertools.count(1)  # "call_<n>", unique for the server's lifetime
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeServer is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return  # idempotent: never started or already stopped
        self._stopping.set()  # wakes handlers sleeping in a Reply.delay
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *items: ScriptItem) -> None:
        """Append items to the script (safe while the server is answering)."""
        with self._lock:
            self._script.extend(items)

    # -- used by the handler threads --------------------------------------

    def _record(self, body: dict[str, Any], headers: dict[str, str], path: str = "/v1/chat/completions") -> None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.paths.append(path)

    def _record_asked(self, method: str, path: str) -> None:
        with self._lock:
            self.asked.append(f"{method} {path}")
            if (method, path) not in MODEL_CALLS:
                self.routes_asked.append(f"{method} {path}")

    def _violate(self, problems: list[str]) -> None:
        with self._lock:
            self.violations.extend(problems)

    def _next_item(self, body: dict[str, Any]) -> Reply | Fault | Raw | None:
        with self._lock:
            item = self._script.popleft() if self._script else self.default
            if item is None:
                self.violations.append(f"{EXHAUSTED_MESSAGE} (request #{len(self.requests)})")
                return None
        if isinstance(item, (Reply, Fault, Raw)):
            return item
        try:
            return item(body)  # outside the lock, so a callable may itself call add()
        except Exception as exc:  # a broken script must fail the test, not hang the client
            self._violate([f"script callable raised {exc!r}"])
            return Fault(status=500, message=f"script callable raised {exc!r}")

    def _completion_id(self) -> str:
        with self._lock:
            return f"chatcmpl-fake-{next(self._ids)}"

    def _render_calls(self, reply: Reply) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        for call in reply.tool_calls:
            args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            rendered: dict[str, Any] = {"type": "function", "function": {"name": call.name, "arguments": args}}
            if call.id == "auto":
                with self._lock:
                    rendered["id"] = f"call_{next(self._call_ids)}"
            elif call.id is not None:
                rendered["id"] = call.id
            calls.append(rendered)
        return calls


def call(name: str, arguments: str | dict[str, Any] | None = None, *, id: str | None = "auto") -> FakeToolCall:
    """Shorthand: `call("read_file", {"path": "a.txt"})`."""
    return FakeToolCall(name=name, arguments={} if arguments is None else arguments, id=id)


def tool_reply(*calls: FakeToolCall, text: str = "") -> Reply:
    """Shorthand for an assistant answer that calls tools."""
    return Reply(text=text, tool_calls=tuple(calls))


class ScriptedLLM:
    """The same script vocabulary, played in-process through the `LLM` protocol.

    Records each request's wire messages and tool specs, checks the tool-calling protocol
    like the server does, and raises `EndpointError` for a `Fault`.
    """

    def __init__(self, script: Iterable[ScriptItem] = (), *, model: str = "scripted", default: Reply | None = None) -> None:
        self.model = model
        self.default = default
        self._script: deque[ScriptItem] = deque(script)
        self._call_ids = itertools.count(1)
        self.requests: list[dict[str, Any]] = []
        self.violations: list[str] = []

    def add(self, *items: ScriptItem) -> None:
        self._script.extend(items)

    async def complete(self, messages: Any, tools: Any, on_text: Callable[[str], None],
                       on_reasoning: Callable[[str], None] | None = None) -> Any:
        import asyncio

        from nanohermes.errors import ContextTooLongError, EndpointError
        from nanohermes.messages import Completion, Message, ToolCall, Usage

        body = {"model": self.model, "messages": [m.to_wire() for m in messages], "tools": list(tools)}
        self.requests.append(body)
        if problems := check_protocol(body["messages"]):
            self.violations.extend(problems)
            raise EndpointError("protocol violation: " + "; ".join(problems))
        item = self._script.popleft() if self._script else self.default
        if item is None:
            self.violations.append(EXHAUSTED_MESSAGE)
            raise EndpointError(EXHAUSTED_MESSAGE)
        reply = item if isinstance(item, (Reply, Fault, Raw)) else item(body)
        if isinstance(reply, Raw):
            raise EndpointError("ScriptedLLM cannot play Raw bytes; use FakeServer")
        if isinstance(reply, Fault):
            from nanohermes.llm.failures import overflowed

            # As the HTTP wire judges the same body (a 429 saying "too many tokens" is a rate limit).
            if overflowed(reply.status, f"{reply.code or ''} {_error_type(reply.status)}", reply.message):
                raise ContextTooLongError(f"the conversation no longer fits the model's context ({reply.message})")
            raise EndpointError(f"the model endpoint answered {reply.status}: {reply.message}")
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if on_reasoning is not None:
            for piece in _pieces(reply.reasoning, reply.chunk_size):
                if piece:
                    on_reasoning(piece)
        for piece in _pieces(reply.text, reply.chunk_size):
            if piece:
                on_text(piece)
        calls = tuple(
            ToolCall(
                id=c.id if c.id not in ("auto", None) else f"call_{next(self._call_ids)}",
                name=c.name,
                arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
            )
            for c in reply.tool_calls
        )
        message = Message("assistant", reply.text or None, calls, reasoning=reply.reasoning or None)
        usage = Usage(*reply.usage) if reply.usage else Usage()
        return Completion(message, usage, "tool_calls" if calls else "stop")
