"""The chat-completions wire: `OpenAIChat`, and the one rule that assembles streamed tool calls.

Servers split a tool call into fragments in many ways: OpenAI sends an index with every
fragment and the id and name once; the others' shapes (parallel calls all at index 0, no index,
a name on every fragment, a new id on every fragment, object arguments, a `{}` placeholder, a
prefixed name) are entries of the quirk table (`nanohermes.llm.quirks`, `calls.*`), and
`CallAssembler` reads all of them by one rule (see `feed`). Reasoning comes in the fields the
table names (`reasoning.*`); it is collected beside the text and never mixed into it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nanohermes.common.errors import EndpointError
from nanohermes.llm.http import HttpWire, Retry, StreamParser, TextSink, estimate_usage
from nanohermes.llm.quirks import Reasoning, entries, pattern
from nanohermes.llm.quirks import data as quirk_data
from nanohermes.common.messages import Completion, Message, ToolCall, Usage, image_intro, with_images

_OWN_KEYS = frozenset({"index", "id", "type", "function"})
_PREFIX_SEPARATORS = (".", ":", "/")
# The text fields a delta's thinking comes in, the first that holds some wins; and the field
# of the structured details sent back as they came.
_THOUGHT_FIELDS = tuple(r.field for _, r in entries(Reasoning, "chat") if r.form == "text")
_DETAILS = next(r.field for _, r in entries(Reasoning, "chat") if r.form == "details")


def tool_names(tools: Sequence[dict[str, Any]]) -> frozenset[str]:
    names: set[str] = set()
    for spec in tools:
        fn = spec.get("function")
        fn = fn if isinstance(fn, dict) else spec
        if isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return frozenset(names)


def known_name(name: str, known: frozenset[str]) -> str:
    """`functions.read_file` (or `tools:read_file`, `default_api/read_file`) is `read_file` when
    that is a tool and the whole name is not; any other name is kept as sent."""
    # quirk: calls.prefixed-name
    if name in known or not known:
        return name
    for sep in _PREFIX_SEPARATORS:
        rest = name.rsplit(sep, 1)[-1]
        if rest != name and rest in known:
            return rest
    return name


def argument_text(value: Any) -> str:
    """Arguments as JSON text: an object some servers send is serialised, text kept as is."""
    # quirk: calls.object-arguments
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@dataclass
class _Call:
    """A tool call while its fragments stream in."""

    index: Any
    id: str | None = None
    name: str = ""
    args: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class CallAssembler:
    """Tool calls rebuilt from streamed fragments."""

    def __init__(self, known: frozenset[str] = frozenset()) -> None:
        self.known = known
        self.calls: list[_Call] = []
        self._at: dict[Any, _Call] = {}  # the latest call seen at each index
        self._current: _Call | None = None

    def feed(self, fragment: dict[str, Any]) -> None:
        """The rule: a fragment with a new id and a name starts a new call, even at an index
        already used; a fragment without a name continues the call at its index (or the
        current one when it has none), whatever id it carries (the first id is kept); a name
        is set once, never concatenated."""
        # quirk: calls.parallel-whole-at-index-0, calls.parallel-streamed-at-index-0, calls.no-index,
        # quirk: calls.name-on-every-fragment, calls.new-id-on-every-fragment, calls.provider-fields
        index = fragment.get("index")
        raw_fn = fragment.get("function")
        fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
        cid = fragment.get("id") or None
        name = fn.get("name") or None
        open_call = self._at.get(index) if index is not None else self._current
        if open_call is None and cid is None and name is None:
            open_call = self._current  # a bare continuation at an index not seen yet
        slot: _Call | None = None
        if cid is not None:
            slot = next((c for c in self.calls if c.id == cid), None)
            if slot is None and name is None and open_call is not None:
                slot = open_call  # the id came after the first fragment, or a new one on each (LM Studio)
                slot.id = slot.id or cid
        elif open_call is not None and (name is None or not open_call.name or open_call.name == name):
            slot = open_call
        if slot is None:
            slot = _Call(index=index, id=cid)
            self.calls.append(slot)
        if index is not None:
            self._at[index] = slot
        self._current = slot
        if name and not slot.name:
            slot.name = name
        if (args := argument_text(fn.get("arguments"))):
            slot.args.append(args)
        slot.extra.update({k: v for k, v in fragment.items() if k not in _OWN_KEYS and v is not None})

    def has_calls(self) -> bool:
        return any(c.name or c.args for c in self.calls)

    def result(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=c.id or f"call_{uuid.uuid4().hex[:12]}", name=known_name(c.name, self.known),
                     arguments=joined_arguments(c.args), extra=tuple(c.extra.items()))
            for c in self.calls if c.name or c.args
        )


def joined_arguments(pieces: Sequence[str]) -> str:
    """A call's argument pieces as one text. A first piece that is an empty object (`{}`, sent as
    an object or as text) and is followed by more is a placeholder some servers put in the
    call's opening fragment before streaming the real arguments: it is dropped, since `{}` with
    anything after it is never valid JSON. A whole object sent alone (llama.cpp) is kept."""
    # quirk: calls.empty-object-placeholder
    if len(pieces) > 1 and "".join(pieces[0].split()) == "{}" and "".join(pieces[1:]).strip():
        pieces = pieces[1:]
    return "".join(pieces)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts; quirk: stream.content-parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


class ChatParser:
    """One attempt's chunks (or a whole JSON completion) turned into a Completion."""

    def __init__(self, messages: Sequence[Message], known: frozenset[str], on_text: TextSink,
                 on_reasoning: TextSink | None) -> None:
        self.messages = messages
        self.on_text = on_text
        self.on_reasoning = on_reasoning
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = "reasoning_content"
        self.thinks = False  # a thinking field came, if only empty: the message carries one back
        self.details: list[dict[str, Any]] = []
        self.calls = CallAssembler(known)
        self.usage: Usage | None = None
        self.finish: str | None = None

    def event(self, name: str | None, data: Any) -> bool:
        if not isinstance(data, dict):
            return False
        self._usage(data.get("usage"))
        for choice in data.get("choices") or ():
            if isinstance(choice, dict):
                self._delta(choice.get("delta") or choice.get("message") or {})
                if choice.get("finish_reason"):
                    self.finish = str(choice["finish_reason"])
        return False  # the usage chunk may still follow the finish

    def whole(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise EndpointError("the endpoint answered JSON that is not a chat completion; check base_url",
                                hint="base_url should be the API root of an OpenAI-compatible server (usually .../v1)")
        self.event(None, body)
        self.finish = self.finish or "stop"

    def ended(self) -> None:
        if self.finish is None:  # quirk: stream.done-without-finish-reason (some servers never send one)
            self.finish = "tool_calls" if self.calls.has_calls() else "stop"

    def _usage(self, u: Any) -> None:
        if isinstance(u, dict):
            self.usage = Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))

    def _delta(self, delta: dict[str, Any]) -> None:
        if not isinstance(delta, dict):
            return
        thought = next(((k, delta[k]) for k in _THOUGHT_FIELDS if isinstance(delta.get(k), str) and delta[k]), None)
        self.thinks = self.thinks or any(isinstance(delta.get(k), str) for k in _THOUGHT_FIELDS)
        details = delta.get(_DETAILS)
        if isinstance(details, list):
            piece = self._merge_details(details)
            if thought is None and piece:
                thought = ("reasoning", piece)
        if thought is not None:
            self.reasoning_field = thought[0] if not self.reasoning else self.reasoning_field
            self.reasoning.append(thought[1])
            if self.on_reasoning is not None:
                self.on_reasoning(thought[1])
        if text := _text_of(delta.get("content")):
            self.text.append(text)
            self.on_text(text)
        for fragment in delta.get("tool_calls") or ():
            if isinstance(fragment, dict):
                self.calls.feed(fragment)

    def _merge_details(self, details: list[Any]) -> str:
        """OpenRouter streams each reasoning detail in pieces: join the pieces of one detail
        (same index and type) so it goes back whole, as the provider sent it."""
        # quirk: reasoning.details
        text = ""
        for d in details:
            if not isinstance(d, dict):
                continue
            key = (d.get("index"), d.get("type"))
            last = self.details[-1] if self.details else None
            if last is not None and (last.get("index"), last.get("type")) == key:
                for k, v in d.items():
                    if v is None:
                        continue
                    if k in ("text", "summary", "data") and isinstance(v, str) and isinstance(last.get(k), str):
                        last[k] += v
                    else:
                        last[k] = v
            else:
                self.details.append(dict(d))
            piece = d.get("text") if d.get("type") != "reasoning.summary" else d.get("summary")
            text += piece if isinstance(piece, str) else ""
        return text

    def result(self) -> Completion | None:
        if self.finish is None:
            return None
        message = Message("assistant", "".join(self.text) or None, self.calls.result(),
                          reasoning="".join(self.reasoning) or ("" if self.thinks else None),
                          reasoning_field=self.reasoning_field,
                          reasoning_details=tuple(self.details))
        return Completion(message, self.usage or estimate_usage(self.messages, message), self.finish)


@dataclass
class OpenAIChat(HttpWire):
    """Streams chat completions over httpx (nothing from the `openai` SDK on this path)."""

    stream_usage: bool = True  # send stream_options.include_usage; dropped if the endpoint refuses it

    path: ClassVar[str] = "/chat/completions"
    what: ClassVar[str] = "chat completions"

    def build_request(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": chat_messages(messages), "stream": True}
        if tools:
            request["tools"] = list(tools)
        if self.stream_usage:
            request["stream_options"] = {"include_usage": True}
        if self.reasoning_effort:
            request["reasoning_effort"] = self.reasoning_effort
        if self.max_output_tokens is not None:
            request["max_tokens"] = self.max_output_tokens
        return request

    def parser(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
               on_reasoning: TextSink | None) -> StreamParser:
        return ChatParser(messages, tool_names(tools), on_text, on_reasoning)

    def refused(self, status: int, message: str) -> Exception | None:
        if self.stream_usage and pattern("request.stream-options-refused").search(message):
            self.stream_usage = False
            return Retry("endpoint refused stream_options", EndpointError(message), 0.0)
        return None


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The history in chat-completions form; a run of tool results that carried images is
    followed by a user message of image parts (a tool message holds only text there). Once
    the model has thought in `reasoning_content` (DeepSeek's thinking mode), every assistant
    message that made tool calls carries that field back, empty when it had no thinking: the
    endpoint refuses the request otherwise. An assistant message that said nothing and called
    nothing (a reply whose only call was in its thinking) is sent with empty text: OpenAI's
    API and others refuse one whose content is null without tool calls."""
    # quirk: reasoning.on-every-tool-call
    key = quirk_data("reasoning.reasoning-content", Reasoning).field
    thinks = any(m.role == "assistant" and m.reasoning is not None and m.reasoning_field == key for m in messages)
    out: list[dict[str, Any]] = []
    for m, images in with_images(messages):
        d = m.to_chat()
        if thinks and m.tool_calls and not any(k in d for k in _THOUGHT_FIELDS):
            d[key] = m.reasoning or ""
        if m.role == "assistant" and not m.tool_calls and d["content"] is None:
            d["content"] = ""
        out.append(d)
        if images:
            out.append({"role": "user", "content": [
                {"type": "text", "text": image_intro(images)},
                *({"type": "image_url", "image_url": {"url": f"data:{img.mime};base64,{img.data}"}} for _, img in images)]})
    return out
