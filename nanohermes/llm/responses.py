"""The Responses API wire (`/v1/responses`): `OpenAIResponses`, for models served only there.

The history is sent as input items (the first system message as `instructions`), with
`store: false`: nothing is kept on the server, so each request carries the whole
conversation. Reasoning items come back with their encrypted content and are stored on the
assistant message, then sent back ahead of its function calls on later requests, which is what
lets a reasoning model carry its thinking across tool calls. The same retries, errors, usage,
sinks and transcripts as the chat wire apply (`nanohermes.llm.http`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from nanohermes.common.errors import EndpointError
from nanohermes.llm.chat import known_name, tool_names
from nanohermes.llm.http import HttpWire, Retry, StreamParser, TextSink, estimate_usage
from nanohermes.llm.quirks import Reasoning, entries, pattern
from nanohermes.llm.quirks import data as quirk_data
from nanohermes.common.messages import Completion, Message, ToolCall, Usage, image_intro, with_images

# The events whose delta is thinking (a summary, or the raw text some servers stream).
_REASONING_EVENTS = frozenset(r.field for _, r in entries(Reasoning, "responses") if r.form == "event")
# The encrypted field of a reasoning item, asked for and sent back; the fields of an item worth
# sending back beside it; its id is not: with store=false the server keeps no item to refer to,
# and refuses one named by id.
_ENCRYPTED = quirk_data("reasoning.encrypted-items", Reasoning).field
_REASONING_KEYS = ("type", "summary", "content", _ENCRYPTED)


def to_input(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """(instructions, input items) for a history."""
    instructions: str | None = None
    items: list[dict[str, Any]] = []
    for i, (m, images) in enumerate(with_images(messages)):
        if m.role == "system":
            if i == 0:
                instructions = m.content or ""
            else:
                items.append({"role": "developer", "content": m.content or ""})
        elif m.role == "user":
            items.append({"role": "user", "content": m.content or ""})
        elif m.role == "assistant":
            items.extend(dict(r) for r in m.reasoning_items if isinstance(r, dict))
            if m.content:
                items.append({"role": "assistant", "content": m.content})
            items.extend({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                         for c in m.tool_calls)
        elif m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id or "", "output": m.content or ""})
        if images:  # after the run of tool results that carried them, as the chat wire sends them
            items.append({"role": "user", "content": [
                {"type": "input_text", "text": image_intro(images)},
                *({"type": "input_image", "image_url": f"data:{img.mime};base64,{img.data}"} for _, img in images)]})
    return instructions, items


def to_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat tool specs in the Responses form. Not strict: strict mode would need every schema
    closed and every property required, which tools do not promise."""
    out: list[dict[str, Any]] = []
    for spec in tools:
        fn = spec.get("function")
        fn = fn if isinstance(fn, dict) else spec
        out.append({"type": "function", "name": fn.get("name"), "description": fn.get("description", ""),
                    "parameters": fn.get("parameters") or {"type": "object", "properties": {}}, "strict": False})
    return out


class ResponsesParser:
    def __init__(self, messages: Sequence[Message], known: frozenset[str], on_text: TextSink,
                 on_reasoning: TextSink | None, fail: Callable[[Any], Exception]) -> None:
        self.messages = messages
        self.known = known
        self.on_text = on_text
        self.on_reasoning = on_reasoning
        self.fail = fail
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_items: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}  # by item id, in the order they began
        self.usage: Usage | None = None
        self.finish: str | None = None

    def event(self, name: str | None, data: Any) -> bool:
        if not isinstance(data, dict):
            return False
        kind = str(data.get("type") or name or "")
        if kind == "response.output_text.delta":
            self._text(str(data.get("delta") or ""))
        elif kind in _REASONING_EVENTS:
            self._reason(str(data.get("delta") or ""))
        elif kind == "response.reasoning_summary_part.added" and self.reasoning:
            self._reason("\n\n")
        elif kind == "response.output_item.added":
            self._item(data.get("item"), done=False)
        elif kind == "response.function_call_arguments.delta":
            call = self.calls.get(str(data.get("item_id")))
            if call is not None:
                call["args"].append(str(data.get("delta") or ""))
        elif kind == "response.function_call_arguments.done":
            call = self.calls.get(str(data.get("item_id")))
            if call is not None and isinstance(data.get("arguments"), str):
                call["args"] = [data["arguments"]]
        elif kind == "response.output_item.done":
            self._item(data.get("item"), done=True)
        elif kind in ("response.completed", "response.incomplete"):
            self._finish(data.get("response") or {}, "length" if kind == "response.incomplete" else None)
            return True
        elif kind == "response.failed":
            err = (data.get("response") or {}).get("error") or {"message": "the response failed"}
            raise self.fail({"error": err})
        elif kind == "error":
            raise self.fail({"error": {k: v for k, v in data.items() if k != "type"}})
        return False

    def whole(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("output"), list):
            raise EndpointError("the endpoint answered JSON that is not a response of the Responses API; check base_url",
                                hint="use wire_api \"chat\" unless the server offers /v1/responses")
        for item in body["output"]:
            self._item(item, done=True)
        self._finish(body, None)

    def ended(self) -> None:
        if self.finish is None:  # quirk: stream.done-on-responses (a `[DONE]` before response.completed)
            self._finish({}, None)

    def _text(self, piece: str) -> None:
        if piece:
            self.text.append(piece)
            self.on_text(piece)

    def _reason(self, piece: str) -> None:
        if piece:
            self.reasoning.append(piece)
            if self.on_reasoning is not None:
                self.on_reasoning(piece)

    def _item(self, item: Any, *, done: bool) -> None:
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        key = str(item.get("id") or item.get("call_id") or len(self.calls))
        if kind == "function_call":
            call = self.calls.setdefault(key, {"call_id": None, "name": "", "args": []})
            call["call_id"] = item.get("call_id") or call["call_id"]
            call["name"] = call["name"] or str(item.get("name") or "")
            if done and isinstance(item.get("arguments"), str):
                call["args"] = [item["arguments"]]
            elif not call["args"] and isinstance(item.get("arguments"), str) and item["arguments"]:
                call["args"] = [item["arguments"]]
        elif kind == "reasoning" and done:
            self.reasoning_items.append({k: item[k] for k in _REASONING_KEYS if k in item})
            if not self.reasoning:  # a whole answer, or a stream that sent no reasoning deltas
                for part in item.get("summary") or ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        self._reason(part["text"])
        elif kind == "message" and done and not self.text:
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    self._text(str(part.get("text") or ""))

    def _finish(self, response: dict[str, Any], finish: str | None) -> None:
        u = response.get("usage")
        if isinstance(u, dict):
            self.usage = Usage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0))
        self.finish = finish or ("tool_calls" if self.calls else "stop")

    def result(self) -> Completion | None:
        if self.finish is None:
            return None
        calls = tuple(ToolCall(id=str(c["call_id"] or key), name=known_name(c["name"], self.known),
                               arguments="".join(c["args"])) for key, c in self.calls.items())
        message = Message("assistant", "".join(self.text) or None, calls, reasoning="".join(self.reasoning) or None,
                          reasoning_items=tuple(self.reasoning_items))
        return Completion(message, self.usage or estimate_usage(self.messages, message), self.finish)


@dataclass
class OpenAIResponses(HttpWire):
    """Streams the Responses API over httpx."""

    encrypted_reasoning: bool = True  # ask for reasoning items' encrypted content; dropped if the model refuses it

    path: ClassVar[str] = "/responses"
    what: ClassVar[str] = "the Responses API"

    def build_request(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        instructions, items = to_input(messages)
        request: dict[str, Any] = {"model": self.model, "input": items, "stream": True, "store": False}
        if instructions is not None:
            request["instructions"] = instructions
        if tools:
            request["tools"] = to_tools(tools)
        if self.encrypted_reasoning:  # quirk: reasoning.encrypted-items
            request["include"] = [f"reasoning.{_ENCRYPTED}"]
        if self.reasoning_effort:
            request["reasoning"] = {"effort": self.reasoning_effort, "summary": "auto"}
        if self.max_output_tokens is not None:
            request["max_output_tokens"] = self.max_output_tokens
        return request

    def parser(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
               on_reasoning: TextSink | None) -> StreamParser:
        return ResponsesParser(messages, tool_names(tools), on_text, on_reasoning, self.classify_error_event)

    def refused(self, status: int, message: str) -> Exception | None:
        if self.encrypted_reasoning and pattern("request.encrypted-reasoning-refused").search(message):
            self.encrypted_reasoning = False  # a model without reasoning items
            return Retry("endpoint refused encrypted reasoning", EndpointError(message), 0.0)
        return None
