"""The model seam: one `LLM` protocol and the two OpenAI-compatible streaming wires.

`OpenAIChat` speaks chat completions, `OpenAIResponses` the Responses API; both stream over
httpx with the same retries, error mapping, usage and sinks (`nanohermes.llm.http`).
`make_llm` picks one by the config's `wire_api`. Nothing here imports the `openai` SDK, and
the Responses wire is imported only by a session that uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nanohermes.llm.chat import OpenAIChat
from nanohermes.llm.http import NoticeSink, TextSink, check_base_url, estimate_usage, is_context_overflow
from nanohermes.messages import Completion, Message

if TYPE_CHECKING:
    from nanohermes.llm.responses import OpenAIResponses

__all__ = ["LLM", "NoticeSink", "OpenAIChat", "OpenAIResponses", "TextSink", "check_base_url", "estimate_usage",
           "is_context_overflow", "make_llm"]

WIRES = ("chat", "responses")


class LLM(Protocol):
    model: str

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
                       on_reasoning: TextSink | None = None) -> Completion: ...


def make_llm(wire_api: str = "chat", **settings: Any) -> OpenAIChat | OpenAIResponses:
    """The client for `wire_api` ("chat" or "responses"), built from the same settings."""
    if wire_api == "responses":
        from nanohermes.llm.responses import OpenAIResponses

        return OpenAIResponses(**settings)
    return OpenAIChat(**settings)


def __getattr__(name: str) -> Any:
    if name == "OpenAIResponses":  # `from nanohermes.llm import OpenAIResponses` still works
        from nanohermes.llm.responses import OpenAIResponses

        return OpenAIResponses
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
