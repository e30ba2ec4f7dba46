"""`ScriptedLLM`: the fakes' script played in-process through the `LLM` protocol, for tests of
the loop that need no HTTP. nanohermes's own types are imported when it answers, so tests of
any layer can use the fakes without pulling in the code under test."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from nanohermes.common.errors import ContextTooLongError, EndpointError
from nanohermes.common.messages import Completion, Message, ToolCall, Usage
from nanohermes.llm.failures import overflowed
from nanohermes.testing._protocol import check_protocol
from nanohermes.testing._script import EXHAUSTED_MESSAGE, Fault, Raw, Reply, ScriptItem, error_type, text_pieces


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
            # As the HTTP wire judges the same body (a 429 saying "too many tokens" is a rate limit).
            if overflowed(reply.status, f"{reply.code or ''} {error_type(reply.status)}", reply.message):
                raise ContextTooLongError(f"the conversation no longer fits the model's context ({reply.message})")
            raise EndpointError(f"the model endpoint answered {reply.status}: {reply.message}")
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if on_reasoning is not None:
            for piece in text_pieces(reply.reasoning, reply.chunk_size):
                if piece:
                    on_reasoning(piece)
        for piece in text_pieces(reply.text, reply.chunk_size):
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
