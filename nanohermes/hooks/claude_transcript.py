"""The conversation as Claude Code writes its transcript, for hooks that read `transcript_path`
(a Stop hook looking for the last assistant message, a logger, a loop plugin).

One JSON object a line, as Claude Code writes them: a prompt is a `user` entry whose
`message.content` is the text; each block of an answer (thinking, text, each tool call) is an
`assistant` entry of its own whose `message` is an Anthropic message holding that block, the
tool calls under Claude Code's names and field names (`Tool.claude_calls`); each result is a
`user` entry holding one `tool_result` block. Every entry has its `uuid`, the `parentUuid` of
the one before, `sessionId`, `timestamp`, `cwd` and `type`. The JSON is compact, as
Claude Code's is, so `grep '"role":"assistant"'` finds the answers.

nanohermes's own transcript stays what it is; this file is written beside it (in the
session's folder) and only when hooks are configured, brought up to date before each hook
runs. A history that changed other than by growing (compacted, rewound, cut) is written out
again whole. Secrets are redacted as in every file nanohermes writes.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes import __version__
from nanohermes.common.arguments import parse_arguments
from nanohermes.common.messages import Message, ToolCall, is_summary
from nanohermes.common.dirs import open_private
from nanohermes.guard.redact import redact
from nanohermes.llm.thinktags import message_parts

if TYPE_CHECKING:
    from nanohermes.common.budget import Limits
    from nanohermes.tools.base import Tool

# A tool call as Claude Code's tool would have been called: (name, input).
Describe = Callable[[ToolCall], tuple[str, dict[str, Any]]]


def describer(tools: Callable[[], Sequence[Tool]], limits: Limits, workspace: Path) -> Describe:
    """How a call of the history is written: as Claude Code's tool would have been called (the
    first of its calls when it stands for several), or as the model wrote it when its tool or
    its arguments are not known."""

    def describe(call: ToolCall) -> tuple[str, dict[str, Any]]:
        try:
            raw = parse_arguments(call.arguments, limits.tool_args_max_depth)
        except ValueError:
            return call.name, {}
        tool = next((t for t in tools() if t.name == call.name), None)
        try:
            calls = tool.claude_calls(tool.parse(raw), workspace) if tool is not None else []
        except Exception:  # arguments the tool refused
            calls = []
        return (calls[0].name, calls[0].input) if calls else (call.name, raw)

    return describe


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class ClaudeTranscript:
    """The JSON-lines file at `path`, kept equal to a session's history."""

    def __init__(self, path: Path, *, session_id: str, cwd: Path, describe: Describe,
                 model: Callable[[], str] = lambda: "") -> None:
        self.path, self.session_id, self.cwd = path, session_id, cwd
        self.describe, self.model = describe, model
        self._written: list[Message] = []  # the history messages the file holds, in order
        self._parent: str | None = None

    def sync(self, history: list[Message]) -> None:
        """Write what `history` holds beyond what the file holds; the whole history again
        when it no longer begins with what was written."""
        n = len(self._written)
        grown = len(history) >= n and all(a is b for a, b in zip(history, self._written, strict=False))
        if grown and n == len(history) and self.path.exists():
            return
        start = n if grown and self.path.exists() else 0
        if start == 0:
            self._written, self._parent = [], None
        lines: list[str] = []
        for message in history[start:]:
            lines += self._entries(message)
            self._written.append(message)
        with open_private(self.path, "a" if start else "w") as f:
            f.write("".join(line + "\n" for line in lines))

    # -- the entries ---------------------------------------------------------------------------
    def _entry(self, kind: str, message: dict[str, Any], **extra: Any) -> str:
        me = str(uuid.uuid4())
        entry = {"parentUuid": self._parent, "isSidechain": False, "userType": "external", "cwd": str(self.cwd),
                 "sessionId": self.session_id, "version": __version__, "type": kind, "message": message,
                 "uuid": me, "timestamp": _now(), **extra}
        self._parent = me
        return redact(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))

    def _entries(self, m: Message) -> list[str]:
        if m.role == "user":
            extra = {"isCompactSummary": True} if is_summary(m) else {}
            return [self._entry("user", {"role": "user", "content": m.content or ""}, **extra)]
        if m.role == "tool":
            text = m.content or ""
            block = {"tool_use_id": m.tool_call_id, "type": "tool_result", "content": text,
                     "is_error": text.startswith("ERROR:")}
            return [self._entry("user", {"role": "user", "content": [block]}, toolUseResult=text)]
        if m.role != "assistant":
            return []
        blocks: list[dict[str, Any]] = []
        thinking, said = message_parts(m)  # thinking written into the text is a thinking block too, as it streamed
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": ""})
        if said or not m.tool_calls:
            blocks.append({"type": "text", "text": said})
        for call in m.tool_calls:
            name, given = self.describe(call)
            blocks.append({"type": "tool_use", "id": call.id, "name": name, "input": given})
        msg_id = "msg_" + uuid.uuid4().hex[:24]
        stop = "tool_use" if m.tool_calls else "end_turn"
        return [self._entry("assistant", {"id": msg_id, "type": "message", "role": "assistant", "model": self.model(),
                                          "content": [block], "stop_reason": stop, "stop_sequence": None,
                                          "usage": {"input_tokens": 0, "output_tokens": 0}},
                            requestId="req_" + uuid.uuid4().hex[:24])
                for block in blocks]

    def remove(self) -> None:
        """Delete the file (a session that keeps nothing)."""
        try:
            os.unlink(self.path)
        except OSError:
            pass
