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

from nanohermes.testing._protocol import check_protocol, check_responses_protocol
from nanohermes.testing._script import FakeToolCall, Fault, Raw, Reply, ScriptItem, call, sse, tool_reply
from nanohermes.testing._scripted import ScriptedLLM
from nanohermes.testing._server import FakeServer

__all__ = ["FakeServer", "FakeToolCall", "Fault", "Raw", "Reply", "ScriptItem", "ScriptedLLM", "call",
           "check_protocol", "check_responses_protocol", "sse", "tool_reply"]
