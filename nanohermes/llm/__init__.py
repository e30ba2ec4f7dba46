"""The model seam: one `LLM` protocol and the two OpenAI-compatible streaming wires.

`OpenAIChat` speaks chat completions, `OpenAIResponses` the Responses API; both stream over
httpx with the same retries, error mapping, usage and sinks (`nanohermes.llm.http`).
`make_llm` picks one by the config's `wire_api`; `client_for` is the one factory every
model client of a session comes from (the agent, sub-agents, the tool-use summarizer, doctor),
so retries, the endpoint checks and the settings are the same for all. Nothing here imports
the `openai` SDK, and the Responses wire is imported only by a session that uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nanohermes.llm.chat import OpenAIChat
from nanohermes.llm.connect import check_base_url
from nanohermes.llm.failures import is_context_overflow
from nanohermes.llm.http import NoticeSink, TextSink, estimate_usage
from nanohermes.common.messages import Completion, Message

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.llm.responses import OpenAIResponses

__all__ = ["LLM", "NoticeSink", "OpenAIChat", "OpenAIResponses", "TextSink", "check_base_url", "client_for",
           "estimate_usage", "is_context_overflow", "make_llm"]


class LLM(Protocol):
    model: str

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
                       on_reasoning: TextSink | None = None) -> Completion: ...


def make_llm(wire_api: str = "chat", **settings: Any) -> OpenAIChat | OpenAIResponses:
    """The client for `wire_api` ("chat" or "responses"), built from the same settings."""
    if wire_api == "responses":
        # the Responses wire: only for --wire-api responses
        from nanohermes.llm.responses import OpenAIResponses

        return OpenAIResponses(**settings)
    return OpenAIChat(**settings)


def client_for(config: Config, *, model: str | None = None, on_notice: NoticeSink | None = None,
               **overrides: Any) -> OpenAIChat | OpenAIResponses:
    """The model client for `config`'s endpoint and wire: `model` (default the configured
    one), and any wire setting in `overrides` (a shorter timeout, no retries, an answer cap)."""
    settings: dict[str, Any] = {
        "model": model or config.model, "base_url": config.base_url, "api_key": config.resolved_api_key(),
        "timeout": config.request_timeout, "max_retries": config.max_retries, "reasoning_effort": config.reasoning_effort,
        "key_hint": key_hint(config),
    }
    if on_notice is not None:
        settings["on_notice"] = on_notice
    settings.update(overrides)
    return make_llm(config.wire_api, **settings)


def key_hint(config: Config) -> str:
    """What to do when the endpoint refuses the key, said where the key sent comes from: a key
    in a config file or --api-key wins over the variable, so setting the variable would not help."""
    var = config.api_key_env
    if config.api_key:
        return (f"check the key: the one sent is api_key from a config file or --api-key, which wins over ${var}; "
                "fix or remove it there (`nanohermes doctor` names the file)")
    if config.resolved_api_key():
        return f"check the key: the one sent is ${var}; set a valid one there, or pass --api-key"
    return f"check the key: none was sent; set ${var}, or pass --api-key"


def __getattr__(name: str) -> Any:
    if name == "OpenAIResponses":  # `from nanohermes.llm import OpenAIResponses` still works
        # the Responses wire: only for --wire-api responses
        from nanohermes.llm.responses import OpenAIResponses

        return OpenAIResponses
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
