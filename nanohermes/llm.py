"""The model seam: one `LLM` protocol and the OpenAI-compatible streaming adapter.

The adapter streams chat completions, reassembles tool calls from deltas by index, captures
usage, and retries 429/5xx/connection failures and dropped streams with exponential backoff
and jitter (honouring Retry-After). Text already shown before a drop is not shown twice.
Failures that end the run become `errors.EndpointError` subclasses carrying a hint.
The `openai` SDK is imported on first use so the CLI starts fast.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from nanohermes.errors import AuthError, ContextTooLongError, EndpointError, ModelNotFoundError, UnreachableError
from nanohermes.messages import Completion, Message, ToolCall, Usage

TextSink = Callable[[str], None]
NoticeSink = Callable[[str], None]


class LLM(Protocol):
    model: str

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink) -> Completion: ...


class _Retry(Exception):
    def __init__(self, reason: str, final: EndpointError, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final
        self.retry_after = retry_after


def estimate_usage(messages: Sequence[Message], answer: Message) -> Usage:
    """4 chars a token, marked as estimated, for endpoints that report no usage."""
    prompt = sum(m.chars() for m in messages)
    return Usage(prompt // 4, answer.chars() // 4, estimated=True)


@dataclass
class _Shown:
    """Text already passed to the UI in this request, across retries."""

    text: str = ""
    replay: int = 0  # chars of the current attempt's stream still being matched against `text`
    diverged: bool = False


@dataclass
class OpenAIChat:
    model: str
    base_url: str
    api_key: str | None = None
    timeout: float = 600.0
    max_retries: int = 4
    on_notice: NoticeSink = lambda text: None
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    stream_usage: bool = True  # send stream_options.include_usage; dropped if the endpoint refuses it
    _client: Any = field(default=None, init=False, repr=False)

    def client(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI  # heavy: imported on first use

            self._client = AsyncOpenAI(
                api_key=self.api_key or "no-key-set", base_url=self.base_url, timeout=self.timeout, max_retries=0,
            )
        return self._client

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink) -> Completion:
        shown = _Shown()
        attempt = 0
        while True:
            try:
                return await self._once(messages, tools, on_text, shown)
            except _Retry as r:
                if attempt >= self.max_retries:
                    raise r.final from None
                delay = r.retry_after if r.retry_after is not None else min(self.backoff_cap, self.backoff_base * 2**attempt) * (0.5 + random.random())
                attempt += 1
                self.on_notice(f"{r.reason}; retrying in {delay:.1f}s (attempt {attempt} of {self.max_retries})")
                await asyncio.sleep(delay)

    async def _once(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink, shown: _Shown) -> Completion:
        import openai

        request: dict[str, Any] = {"model": self.model, "messages": [m.to_wire() for m in messages], "stream": True}
        if tools:
            request["tools"] = list(tools)
        if self.stream_usage:
            request["stream_options"] = {"include_usage": True}
        shown.replay, shown.diverged = 0, False
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: Usage | None = None
        finish: str | None = None
        try:
            stream = await self._post_stream(request)
            async for chunk in stream:
                if getattr(chunk, "usage", None):
                    u = chunk.usage
                    usage = Usage(u.prompt_tokens or 0, u.completion_tokens or 0)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        self._show(delta.content, on_text, shown)
                    for tc in (delta.tool_calls if delta is not None else None) or ():
                        slot = calls.setdefault(tc.index if tc.index is not None else len(calls), {"id": None, "name": "", "args": []})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["name"] += tc.function.name
                            if tc.function.arguments:
                                slot["args"].append(tc.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except openai.APIStatusError as e:
            raise self._classify_status(e) from None
        except openai.APIConnectionError as e:
            final = UnreachableError(
                f"cannot reach the model endpoint at {self.base_url} ({type(e).__name__}: {e})",
                hint="check base_url (--base-url, OPENAI_BASE_URL or config) and that the server is running",
            )
            if shown.text or text:
                raise _Retry("the response stream dropped", final) from None
            raise _Retry(f"cannot connect to {self.base_url}", final) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # a stream cut mid-way surfaces as a transport or decode error
            raise _Retry(f"the response stream failed ({type(e).__name__})", EndpointError(
                f"the response stream kept failing: {type(e).__name__}: {e}", hint="check the endpoint's health, then try again")) from None
        if finish is None:
            raise _Retry("the response stream ended early", EndpointError(
                "the response stream kept ending before the answer was complete", hint="check the endpoint's health, then try again"))
        tool_calls = tuple(
            ToolCall(id=slot["id"] or f"call_{uuid.uuid4().hex[:12]}", name=slot["name"], arguments="".join(slot["args"]))
            for _, slot in sorted(calls.items())
        )
        message = Message("assistant", "".join(text) or None, tool_calls)
        return Completion(message, usage or estimate_usage(messages, message), finish)

    async def _post_stream(self, request: dict[str, Any]) -> Any:
        """POST the request as it is. `chat.completions.create` walks every message through
        the SDK's typed transform on each call, which costs more CPU than the request
        itself once a history is long; our wire dicts are already in their final form."""
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return await self.client().post(
            "/chat/completions", body=request, cast_to=ChatCompletion, stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )

    @staticmethod
    def _show(piece: str, on_text: TextSink, shown: _Shown) -> None:
        """Pass new text to the UI, skipping what a dropped attempt already showed."""
        if not shown.diverged:
            remaining = shown.text[shown.replay:]
            if remaining:
                head = piece[: len(remaining)]
                if remaining.startswith(head):
                    shown.replay += len(head)
                    piece = piece[len(head):]
                else:  # the retry says something else: mark the break so the reader is not misled
                    shown.diverged = True
                    piece = "\n[response restarted]\n" + piece
        if piece:
            shown.text += piece
            if not shown.diverged:
                shown.replay = len(shown.text)
            on_text(piece)

    def _classify_status(self, e: Any) -> Exception:
        status = e.status_code
        body_msg = _error_message(e)
        retry_after = _retry_after(e)
        if status == 429 or status >= 500 or status in (408, 409):
            final = EndpointError(f"the model endpoint answered {status}: {body_msg}",
                                  hint="the service is overloaded or rate-limited; wait and retry, or raise max_retries")
            return _Retry(f"endpoint answered {status}", final, retry_after)
        if status in (401, 403):
            return AuthError(f"the model endpoint refused the API key ({status}: {body_msg})",
                             hint="check the key: set OPENAI_API_KEY, pass --api-key, or set api_key / api_key_env in config")
        code = str(getattr(e, "code", "") or "")
        low = body_msg.lower()
        if status == 404 and ("model" in low or code == "model_not_found"):
            return ModelNotFoundError(f"the endpoint does not serve model `{self.model}` ({body_msg})",
                                      hint="pick a listed model with --model or NANOHERMES_MODEL; `nanohermes doctor` lists them")
        if code == "context_length_exceeded" or "context length" in low or "maximum context" in low or "too many tokens" in low:
            return ContextTooLongError(f"the conversation no longer fits the model's context ({body_msg})",
                                       hint="start a new session or compact the conversation")
        if status == 400 and "stream_options" in low and self.stream_usage:
            self.stream_usage = False
            return _Retry("endpoint refused stream_options", EndpointError(body_msg), 0.0)
        if status == 404:
            return EndpointError(f"the endpoint answered 404 for chat completions at {self.base_url}",
                                 hint="check base_url: it usually ends in /v1")
        return EndpointError(f"the model endpoint answered {status}: {body_msg}", hint="check the model name and request settings")

    async def list_models(self) -> list[str]:
        page = await self.client().models.list()
        return sorted(m.id for m in page.data)


def _error_message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(e, "message", e))[:300]


def _retry_after(e: Any) -> float | None:
    try:
        value = e.response.headers.get("retry-after")
        return max(0.0, min(float(value), 120.0)) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None
