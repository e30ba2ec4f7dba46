"""Conversation values (Message, ToolCall, Usage) and their OpenAI wire form.

This is the only place that converts between our dataclasses and the chat-completions dicts;
the transcript on disk uses the same wire form, so a resumed history is what the model saw.
`Message.to_chat()` is what a chat-completions request carries: the transcript form less the
fields only another wire reads (the Responses API's reasoning items).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]

# Keys of a tool-call dict that are ours to build; any other key a provider sent on the call
# (Gemini's `extra_content.google.thought_signature`) is echoed back unchanged.
_CALL_KEYS = frozenset({"id", "type", "function", "index"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call of an assistant message: its id, the tool's name and the arguments as the model wrote them."""

    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it; may be malformed
    extra: tuple[tuple[str, Any], ...] = ()  # provider fields sent on the call, echoed back as they came
    # The answer stopped at the output token limit while this call was written (finish_reason
    # length): its arguments may be cut off. Not sent on the wire.
    cut_off: bool = False
    # The format the model wrote this call in as text, read back as a call (`llm.textcalls`);
    # "" for a call the API carried. Not sent on the wire.
    text_format: str = ""

    def to_wire(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}
        d.update(self.extra)
        return d

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ToolCall:
        fn = d.get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, (dict, list)):  # some servers send the arguments as an object
            args = json.dumps(args, ensure_ascii=False)
        return cls(id=str(d.get("id") or ""), name=str(fn.get("name") or ""), arguments=str(args or ""),
                   extra=tuple((k, v) for k, v in d.items() if k not in _CALL_KEYS))


@dataclass(frozen=True, slots=True)
class Image:
    """An image a tool returned, for a model that takes images: its type, its bytes in base64,
    and the file it was saved to (what the model is told when it cannot see it)."""

    mime: str
    data: str
    path: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation, in the chat completions shape the endpoints take."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool" only
    # The model's thinking (assistant only): shown dimmed, never part of the answer. Some
    # providers (DeepSeek) refuse the next request unless it comes back on a message with
    # tool calls, under the key it arrived in (`reasoning_field`).
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    reasoning_details: tuple[Any, ...] = ()  # OpenRouter's structured reasoning, echoed as it came
    reasoning_items: tuple[Any, ...] = ()  # the Responses API's reasoning items (encrypted), for that wire only
    # The calls were written as text in the answer and read back (`llm.textcalls`): the format
    # and the text as it came. Kept in the transcript, never sent.
    recovered: tuple[str, str] | None = None
    # A tool result's images, sent as image parts after the results (see `with_images`).
    images: tuple[Image, ...] = ()
    # A tool result's diff as people saw it (an edit's): kept in the transcript, never sent, so a
    # session taken up again (an editor's `session/load`) shows the edit as it was shown live.
    display: str | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", text)

    @classmethod
    def tool(cls, call_id: str, text: str, images: tuple[Image, ...] = (), display: str | None = None) -> Message:
        return cls("tool", text, tool_call_id=call_id, images=images, display=display)

    def to_chat(self) -> dict[str, Any]:
        """The chat-completions form. Reasoning goes back only with tool calls: that is where
        providers need it, and elsewhere it would only cost prompt tokens."""
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_wire() for c in self.tool_calls]
            if self.reasoning:
                d[self.reasoning_field] = self.reasoning
            if self.reasoning_details:
                d["reasoning_details"] = list(self.reasoning_details)
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        return d

    def to_wire(self) -> dict[str, Any]:
        """The transcript form: the chat form plus what another wire needs to resume."""
        d = self.to_chat()
        if self.reasoning is not None and self.reasoning_field not in d:  # an empty one came too: kept
            d[self.reasoning_field] = self.reasoning
        if self.reasoning_details:
            d["reasoning_details"] = list(self.reasoning_details)
        if self.reasoning_items:
            d["reasoning_items"] = list(self.reasoning_items)
        if self.recovered is not None:
            d["recovered_from_text"] = {"format": self.recovered[0], "text": self.recovered[1]}
        if self.images:
            d["images"] = [{"mime": i.mime, "data": i.data, "path": i.path} for i in self.images]
        if self.display:
            d["display"] = self.display
        return d

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Message:
        content = d.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        field_name = next((k for k in ("reasoning_content", "reasoning") if isinstance(d.get(k), str) and d.get(k)),
                          "reasoning_content")
        thought = d.get(field_name)  # an empty one is kept: it goes back (see `llm.chat.chat_messages`)
        return cls(
            role=d["role"],
            content=content,
            tool_calls=tuple(ToolCall.from_wire(c) for c in d.get("tool_calls") or ()),
            tool_call_id=d.get("tool_call_id"),
            reasoning=thought if isinstance(thought, str) else None,
            reasoning_field=field_name,
            reasoning_details=tuple(d.get("reasoning_details") or ()),
            reasoning_items=tuple(d.get("reasoning_items") or ()),
            recovered=_recovered(d.get("recovered_from_text")),
            images=tuple(Image(str(i.get("mime", "")), str(i.get("data", "")), str(i.get("path", "")))
                         for i in d.get("images") or () if isinstance(i, dict)),
            display=d["display"] if isinstance(d.get("display"), str) else None,
        )

    def chars(self) -> int:
        """Size as the session budget counts it: content plus tool-call arguments, and the
        reasoning that goes back with tool calls (see `to_chat`)."""
        n = len(self.content or "")
        for c in self.tool_calls:
            n += len(c.name) + len(c.arguments)
        if self.tool_calls and self.reasoning:
            n += len(self.reasoning)
        return n


def _recovered(value: Any) -> tuple[str, str] | None:
    if isinstance(value, dict) and isinstance(value.get("format"), str) and isinstance(value.get("text"), str):
        return value["format"], value["text"]
    return None


# Tokens estimated from text where no endpoint counted them: 4 chars a token.
CHARS_PER_TOKEN = 4


def est_tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens a model call used, as the endpoint reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # True when counted at 4 chars a token because the endpoint sent none

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "estimated": self.estimated,
        }


@dataclass(frozen=True, slots=True)
class Completion:
    """One assistant answer as the LLM adapter returns it."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"


def with_images(messages: Sequence[Message]) -> list[tuple[Message, list[tuple[str, Image]]]]:
    """Each message, and after the last of a run of tool results, the images those results
    carried (with the call each came from): a tool message holds only text on every wire, so
    the images follow the results as one user message of image parts. A prompt's images
    (from an editor) follow the prompt the same way, with no call ("")."""
    out: list[tuple[Message, list[tuple[str, Image]]]] = []
    pending: list[tuple[str, Image]] = []
    for i, m in enumerate(messages):
        if m.role == "user" and m.images:  # a prompt's own images follow it the same way
            out.append((m, [("", img) for img in m.images]))
            continue
        pending += [(m.tool_call_id or "", img) for img in m.images] if m.role == "tool" else []
        last_of_run = m.role == "tool" and (i + 1 == len(messages) or messages[i + 1].role != "tool")
        out.append((m, pending if last_of_run else []))
        if last_of_run:
            pending = []
    return out


def image_intro(images: list[tuple[str, Image]]) -> str:
    calls = ", ".join(dict.fromkeys(call for call, _ in images if call))
    if not calls:
        return f"The image{'s' if len(images) > 1 else ''} attached to the prompt above:"
    return f"The image{'s' if len(images) > 1 else ''} returned by tool call {calls}:"


SUMMARY_TAG = "<conversation-summary>"  # opens the message a compaction puts in place of what it took out


def is_summary(m: Message) -> bool:
    """Whether `m` is a compaction's summary (the session, the compactor, exports and hooks' transcript read it)."""
    return m.role == "user" and (m.content or "").startswith(SUMMARY_TAG)
