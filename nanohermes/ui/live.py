"""What the REPL shows while a turn runs, and the UI object the agent talks to.

`TurnView` draws one turn's events: finished output (Markdown blocks of the answer, one line
per tool call, notices) scrolls, and a transient live area below it shows the unfinished
answer and a spinner with what is running and for how long. `ReplUI` is the `events.UI` the
agent gets: events go to the view (and the batch summarizer), approvals to the `Approver`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from nanohermes.common.events import (
    ApprovalReply, ApprovalRequest, ElicitationReply, ElicitationRequest, Event, MessageAdded, ModelStarted,
    ReasoningDelta, SubagentEvent, TextDelta, TextPending, TodoUpdated, ToolFinished, ToolProgress, ToolRunning, ToolStarted, TurnEnded,
    UsageUpdate,
)
from nanohermes.turn.meters import Meter
from nanohermes.ui import render
from nanohermes.ui.approval import Approver
from nanohermes.ui.summaries import BatchSummarizer


STOP_HINT = "esc or ctrl-c to interrupt"
FRAME_SECS = 1 / 8  # how often the live area (the spinner and the elapsed times) is redrawn


@dataclass
class _Running:
    name: str
    summary: str
    started: float
    progress: str = ""


class TurnView:
    """Draws one turn's events: finished output scrolls, a transient live area below it shows
    the unfinished answer and a spinner with what is running and for how long."""

    def __init__(self, console: Console, *, view: Callable[[], str], typed_ahead: Callable[[], int],
                 thinking: Callable[[], bool] = lambda: False) -> None:
        self.console = console
        self.view = view
        self.typed_ahead = typed_ahead
        self.thinking = thinking  # show the model's reasoning whole (`/thinking on`) instead of folded
        self.reasoning = ""  # the current model call's thinking, until its answer or tool calls begin
        self.pending = ""  # the reply's first text while not yet known to be answer or thinking
        self.blocks = render.MarkdownBlocks()
        self.running: dict[str, _Running] = {}
        self.summaries: dict[str, str] = {}
        self.waiting_since: float | None = None
        self.model = ""
        self._live: Any = None
        self._frame: asyncio.TimerHandle | None = None  # the next redraw of the live area
        self._spinner: Any = None
        self._blocks_shown = 0
        self._held: list[RenderableType] | None = None
        self.diff_shown: set[str] = set()  # calls whose diff the approval prompt showed: not again
        self._todo_shown = False  # the list a todo call just printed: its result would repeat it
        self.out: Callable[[RenderableType], None] = console.print  # the REPL routes it around its prompt

    # lifecycle
    def start(self) -> None:
        # rich's spinners: only once a turn shows one
        from rich.spinner import Spinner

        self._spinner = Spinner("dots", style="cyan")
        self._start_live()

    def _start_live(self) -> None:
        # A fresh Live each time: a stopped one remembers the height it had and would move
        # the cursor over lines printed since. It is redrawn from the event loop, the thread
        # every line is printed from, never from a refresh thread of its own: that thread's
        # redraw could land between a print's erasing of the live area and its drawing, with
        # the area's height changed meanwhile, leaving a spinner line behind (seen under load).
        from rich.live import Live

        self._live = Live(get_renderable=self._render, console=self.console, transient=True, auto_refresh=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start()
        self._next_frame()

    def _next_frame(self) -> None:
        try:
            self._frame = asyncio.get_running_loop().call_later(FRAME_SECS, self._redraw)
        except RuntimeError:  # no event loop (a view driven directly): redrawn as lines are printed
            self._frame = None

    def _redraw(self) -> None:
        if self._live is not None and self._held is None:
            self._live.refresh()
            self._next_frame()

    def _stop_live(self) -> None:
        if self._frame is not None:
            self._frame.cancel()
            self._frame = None
        if self._live is not None:
            self._live.stop()

    def stop(self) -> None:
        self._flush_text()
        self.running.clear()
        self.waiting_since = None
        self._stop_live()
        self._live = None

    def pause(self) -> None:
        """An approval prompt takes the screen: output of calls still running waits."""
        self._flush_text()
        self._stop_live()
        self._held = []

    def resume(self) -> None:
        held, self._held = self._held or [], None
        for renderable in held:
            self.console.print(renderable)
        if self._live is not None:
            self._start_live()

    def print(self, renderable: RenderableType) -> None:
        if self._held is not None:
            self._held.append(renderable)
            return
        if self._live is not None:
            self._live.refresh()  # the live area as it is now (a finished call's line gone) goes below the line
        self.out(renderable)

    # events
    def handle(self, ev: Event) -> None:
        if isinstance(ev, ModelStarted):
            self._flush_text()
            self.model = ev.model
            self.waiting_since = time.monotonic()
        elif isinstance(ev, TextPending):
            self.waiting_since = None
            self.pending += ev.text
        elif isinstance(ev, ReasoningDelta):
            self.pending = ""  # known now: it comes again as what it is
            self.reasoning += ev.text
        elif isinstance(ev, TextDelta):
            self.pending = ""
            self._flush_reasoning()
            self.waiting_since = None
            for block in self.blocks.feed(ev.text):
                self._print_block(block)
        elif isinstance(ev, ToolStarted):
            self._flush_text()
            self.waiting_since = None
            self.summaries[ev.call_id] = ev.summary
            self.running[ev.call_id] = _Running(ev.name, ev.summary, time.monotonic())
        elif isinstance(ev, ToolProgress):
            if r := self.running.get(ev.call_id):
                r.progress = ev.text
        elif isinstance(ev, ToolFinished):
            self.running.pop(ev.call_id, None)
            summary = self.summaries.pop(ev.call_id, "")
            status = render.status_of(ev)
            if ev.call_id in self.diff_shown:
                self.diff_shown.discard(ev.call_id)
                ev = replace(ev, display=None)
            if self._todo_shown and status == "ok":
                self._todo_shown = False
                self.print(render.tool_line(ev.name, summary, status, ev.elapsed))
            elif self.view() == "full" or status in ("error", "failed"):
                self.print(render.tool_finished(ev, summary))
        elif isinstance(ev, (UsageUpdate, MessageAdded, ToolRunning)) or isinstance(getattr(ev, "event", None), ToolRunning):
            pass  # the toolbar shows the usage; the stream and the tool lines showed the message; the live area the call
        elif isinstance(ev, SubagentEvent):
            key = f"{ev.agent_id}/{getattr(ev.event, 'call_id', '')}"
            if isinstance(ev.event, ToolStarted):
                self.summaries[key] = ev.event.summary
            elif (out := render.subagent(ev, self.summaries.pop(key, ""))) is not None:
                self.print(out)
        else:
            self._flush_text()
            if isinstance(ev, TurnEnded) and ev.reason == "interrupted":
                self._interrupted_lines()
            self._todo_shown = isinstance(ev, TodoUpdated)
            if (out := render.event(ev)) is not None:
                self.print(out)

    def _interrupted_lines(self) -> None:
        """Calls cut off by Ctrl-C keep their line in the scrollback, marked interrupted."""
        now = time.monotonic()
        for call_id, r in list(self.running.items()):
            self.summaries.pop(call_id, None)
            self.print(render.tool_line(r.name, r.summary, "interrupted", now - r.started))
        self.running.clear()

    def _print_block(self, block: str) -> None:
        if self._blocks_shown:
            self.print("")  # Markdown's own spacing between blocks printed one by one
        self._blocks_shown += 1
        self.print(render.answer(block))

    def _flush_reasoning(self) -> None:
        """The finished thinking goes above the answer, dimmed (folded unless asked for)."""
        text, self.reasoning = self.reasoning, ""
        if (out := render.reasoning(text, shown=self.thinking())) is not None:
            self.print(out)

    def _flush_text(self) -> None:
        self.pending = ""  # whatever of it was known came as text or thinking before this
        self._flush_reasoning()
        rest = self.blocks.flush()
        if rest.strip():
            self._print_block(rest)
        self._blocks_shown = 0

    def _render(self) -> RenderableType:
        # rich's spinners: only once a turn shows one
        from rich.spinner import Spinner

        parts: list[RenderableType] = []
        if self.reasoning.strip():
            parts.append(render.reasoning_live(self.reasoning))
        if self.blocks.pending.strip():
            parts.append(render.answer(self.blocks.pending, streaming=True))
        if self.pending.strip():  # its last lines, as the answer streams: it may yet turn out to be thinking
            rows = max(3, self.console.size.height // 2)
            parts.append(render.answer("\n".join(self.pending.rstrip().split("\n")[-rows:]), streaming=True))
        now = time.monotonic()
        lines: list[RenderableType] = []
        if self.waiting_since is not None:
            lines.append(Text(f"waiting for {self.model} · {render.elapsed(now - self.waiting_since)}", style="dim"))
        for r in list(self.running.values()):
            lines.append(render.tool_running(r.name, r.summary, now - r.started, r.progress))
        typed = self.typed_ahead()
        if typed:
            lines.append(Text(f"{typed} chars typed ahead: sent when the turn ends", style="dim"))
        lines.append(Text(STOP_HINT, style="dim"))  # while anything runs, how to stop it
        assert isinstance(self._spinner, Spinner)
        self._spinner.update(text=Group(*lines))
        parts.append(self._spinner)
        return Group(*parts)


@dataclass
class ReplUI:
    view: TurnView
    approver: Approver
    summarizer: BatchSummarizer | None = None
    meter: Meter = field(default_factory=Meter)  # the last turn's and the session's usage

    def emit(self, event: Event) -> None:
        self.meter.on_event(event)
        self.view.handle(event)
        if self.summarizer is not None:
            self.summarizer.observe(event)

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        """An MCP server's question, put to the person."""
        return await self.approver.elicit(request)

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        reply = await self.approver.confirm(request)
        if reply.choice != "deny" and render.looks_like_diff(request.detail.strip("\n")):
            self.view.diff_shown.add(request.call_id)  # the prompt showed it; the result line will not
        return reply
