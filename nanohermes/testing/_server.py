"""`FakeServer`: a scripted OpenAI-compatible server on 127.0.0.1, run in a daemon thread, and
its request handler (chat completions as chunks, the Responses API as events, `/v1/models`,
a local server's own routes, faults and raw bytes), which checks the protocol of every
conversation it receives."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nanohermes.testing._protocol import check_protocol, check_responses_protocol
from nanohermes.testing._script import EXHAUSTED_MESSAGE, Fault, Raw, Reply, ScriptItem, error_type, text_pieces

MODEL_CALLS = frozenset({("POST", "/v1/chat/completions"), ("POST", "/v1/responses")})


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
        error = {"message": message, "type": error_type(status), "code": code}
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
        for piece in text_pieces(reply.reasoning, reply.chunk_size) if reply.reasoning else []:
            delta({"reasoning_content": piece})
        text = reply.text if reply.drop_after is None else reply.text[: reply.drop_after]
        sent = 0
        for piece in text_pieces(text, reply.chunk_size) if text else []:
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
                       for p in text_pieces(reply.reasoning, reply.chunk_size)]
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
            events += [{"type": "response.output_text.delta", **at, "delta": p} for p in text_pieces(text, reply.chunk_size)]
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
                        "delta": p} for p in text_pieces(fc["arguments"], reply.chunk_size, minimum=2)]
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
        pieces = text_pieces(call["function"]["arguments"], chunk_size, minimum=2)
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
