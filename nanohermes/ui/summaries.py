"""Tool-use summaries: a small model labels each finished batch of tool calls.

A consumer of the event stream, not part of the turn loop. The calls answering one assistant
message form a batch; when the next model call starts (or the turn ends) the batch is sent to
`summary_model` on the same endpoint in a background task, and the label (a commit subject of
at most 50 chars) is handed to `on_label` ("" when it failed, or at once when no model is set:
the front end then shows its built-in label). The request never delays the
next model call, and a failure only means no label: it is presentation only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable

from nanohermes.events import Event, ModelStarted, ToolFinished, ToolStarted, TurnEnded
from nanohermes.messages import Usage

LABEL_CHARS = 50  # the longest label shown
RESULT_HEAD_CHARS = 300  # of each result, sent to the summary model
REQUEST_CHARS = 4000  # the whole batch description sent to the summary model
TIMEOUT_SECS = 20.0

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
    model: str
    base_url: str
    api_key: str | None
    on_label: Callable[[str, list[BatchCall]], None]  # (label, the batch); label "" when labelling failed
    on_usage: Callable[[Usage, str], None] | None = None  # what each label cost, to meter it with the session
    timeout: float = TIMEOUT_SECS
    _started: dict[str, tuple[int, str]] = field(default_factory=dict)  # call id -> (order, summary)
    _batch: list[tuple[int, BatchCall]] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _client: Any = None

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
            if not self.model:  # no summary_model: the front end's built-in label, at once
                self.on_label("", batch)
                return
            task = asyncio.get_running_loop().create_task(self._label(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _label(self, batch: list[BatchCall]) -> None:
        try:
            text = await asyncio.wait_for(self._request(describe(batch)), self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception:  # presentation only: the front end falls back to the tool names
            text = ""
        self.on_label(clean_label(text), batch)

    async def _request(self, description: str) -> str:
        if self._client is None:
            from openai import AsyncOpenAI  # heavy: imported on first use

            self._client = AsyncOpenAI(api_key=self.api_key or "no-key-set", base_url=self.base_url,
                                       timeout=self.timeout, max_retries=0)
        resp = await self._client.chat.completions.create(
            model=self.model, max_tokens=30, stream=False,
            messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": description}],
        )
        if resp.usage is not None and self.on_usage is not None:
            self.on_usage(Usage(resp.usage.prompt_tokens, resp.usage.completion_tokens), self.model)
        return resp.choices[0].message.content or ""

    async def wait(self) -> None:
        """Wait for the labels in flight (tests, and a clean exit)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await self.wait()
        if self._client is not None:
            await self._client.close()
            self._client = None
