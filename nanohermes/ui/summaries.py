"""Tool-use summaries: a small model labels each finished batch of tool calls.

A consumer of the event stream, not part of the turn loop. The calls answering one assistant
message form a batch; when the next model call starts (or the turn ends) the batch is sent to
`summary_model` in a background task, and the label (a commit subject of at most 50 chars) is
handed to `on_label` ("" when it failed, or at once when no model is set: the front end then
shows its built-in label). The request goes through the `LLM` protocol, from the session's
own client factory (`Built.make_llm(summary_model, **LABEL_WIRE)`): the same endpoint, wire
and retries as the agent's, or the `ScriptedLLM` a test gives the session. It never delays
the next model call, and a failure only means no label: it is presentation only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nanohermes.common.events import Event, ModelStarted, ToolFinished, ToolStarted, TurnEnded
from nanohermes.common.messages import Message, Usage
from nanohermes.llm.thinktags import visible

if TYPE_CHECKING:
    from nanohermes.llm import LLM

LABEL_CHARS = 50  # the longest label shown
RESULT_HEAD_CHARS = 300  # of each result, sent to the summary model
REQUEST_CHARS = 4000  # the whole batch description sent to the summary model
TIMEOUT_SECS = 20.0
LABEL_TOKENS = 30  # the answer cap sent with a label request: a label is one short line

# The wire settings a label client is built with: a short answer within the timeout, without
# the main model's reasoning effort, and retries without notices (a label is presentation only).
LABEL_WIRE: dict[str, Any] = {"max_output_tokens": LABEL_TOKENS, "timeout": TIMEOUT_SECS, "reasoning_effort": None,
                              "on_notice": lambda text: None}

INSTRUCTIONS = (
    "You label what a coding agent's batch of tool calls did, like a git commit subject: "
    "imperative mood, at most 50 characters, no quotes, no trailing period. Answer with the label only."
)


def clean_label(text: str) -> str:
    """The first non-empty line, unquoted, without a trailing period, at most 50 chars."""
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    line = line.strip("\"'`*").rstrip(".").strip()
    if line.lower().startswith("label:"):
        line = line[6:].strip()
    return line if len(line) <= LABEL_CHARS else line[: LABEL_CHARS - 1].rstrip() + "…"


@dataclass(frozen=True)
class BatchCall:
    name: str
    summary: str
    result: str
    is_error: bool


def describe(calls: list[BatchCall]) -> str:
    lines = []
    for c in calls:
        head = c.result[:RESULT_HEAD_CHARS].replace("\n", " ⏎ ")
        lines.append(f"- {c.name} {c.summary} -> {'ERROR ' if c.is_error else ''}{head}")
    text = "\n".join(lines)
    return text if len(text) <= REQUEST_CHARS else text[:REQUEST_CHARS] + "\n(more calls omitted)"


@dataclass
class BatchSummarizer:
    llm: LLM | None  # the label model's client; None: no summary_model, the built-in label
    on_label: Callable[[str, list[BatchCall]], None]  # (label, the batch); label "" when labelling failed
    on_usage: Callable[[Usage, str], None] | None = None  # what each label cost, to meter it with the session
    timeout: float = TIMEOUT_SECS
    _started: dict[str, tuple[int, str]] = field(default_factory=dict)  # call id -> (order, summary)
    _batch: list[tuple[int, BatchCall]] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def observe(self, event: Event) -> None:
        """Feed every event; must be called from the event loop's thread."""
        if isinstance(event, ToolStarted):
            self._started[event.call_id] = (len(self._started), event.summary)
        elif isinstance(event, ToolFinished):
            order, summary = self._started.get(event.call_id, (len(self._started), ""))
            self._batch.append((order, BatchCall(event.name, summary, event.result, event.is_error)))
        elif isinstance(event, (ModelStarted, TurnEnded)) and self._batch:
            batch = [c for _, c in sorted(self._batch, key=lambda p: p[0])]  # the model's call order
            self._batch, self._started = [], {}
            if self.llm is None:  # no summary_model: the front end's built-in label, at once
                self.on_label("", batch)
                return
            task = asyncio.get_running_loop().create_task(self._label(self.llm, batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _label(self, llm: LLM, batch: list[BatchCall]) -> None:
        try:
            text = await asyncio.wait_for(self._request(llm, describe(batch)), self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception:  # presentation only: the front end falls back to the tool names
            text = ""
        self.on_label(clean_label(text), batch)

    async def _request(self, llm: LLM, description: str) -> str:
        done = await llm.complete([Message.system(INSTRUCTIONS), Message.user(description)], [], lambda piece: None)
        if self.on_usage is not None:
            self.on_usage(done.usage, llm.model)

        return visible(done.message.content or "")  # thinking written into the text is no part of the label

    async def wait(self) -> None:
        """Wait for the labels in flight (tests, and a clean exit)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await self.wait()
        close = getattr(self.llm, "aclose", None)  # an HTTP wire holds a connection pool
        if close is not None:
            await close()
