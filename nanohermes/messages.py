"""Conversation values (Message, ToolCall, Usage) and their OpenAI wire form.

This is the only place that converts between our dataclasses and the chat-completions dicts;
the transcript on disk uses the same wire form, so a resumed history is what the model saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it; may be malformed

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ToolCall:
        fn = d.get("function") or {}
        return cls(id=str(d.get("id") or ""), name=str(fn.get("name") or ""), arguments=str(fn.get("arguments") or ""))


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool" only

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", text)

    @classmethod
    def tool(cls, call_id: str, text: str) -> Message:
        return cls("tool", text, tool_call_id=call_id)

    def to_wire(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_wire() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        return d

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Message:
        content = d.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return cls(
            role=d["role"],
            content=content,
            tool_calls=tuple(ToolCall.from_wire(c) for c in d.get("tool_calls") or ()),
            tool_call_id=d.get("tool_call_id"),
        )

    def chars(self) -> int:
        """Size as the session budget counts it: content plus tool-call arguments."""
        n = len(self.content or "")
        for c in self.tool_calls:
            n += len(c.name) + len(c.arguments)
        return n


@dataclass(frozen=True, slots=True)
class Usage:
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
