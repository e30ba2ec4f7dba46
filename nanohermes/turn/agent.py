"""The turn loop: ask the model, run the tools it calls, feed results back, repeat.

It ends when the model answers without tool calls, or at `max_turns`. Everything else
(permissions, batching, clamping, rendering, persistence) plugs in around this loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from nanohermes.common.budget import plural
from nanohermes.common.errors import ContextTooLongError
from nanohermes.common.events import (
    UI, MessageAdded, ModelStarted, Notice, ReasoningDelta, TextDelta, TextPending, TurnEnded,
)
from nanohermes.llm import LLM
from nanohermes.llm.thinktags import ThinkSplit, may_open_in_prompt, visible
from nanohermes.common.messages import Completion, Image, Message, ToolCall, Usage
from nanohermes.turn.runtime import INTERRUPTED, Runtime
from nanohermes.turn.session import Session

if TYPE_CHECKING:
    from nanohermes.turn.window import ContextBudget

Reason = Literal["completed", "max_turns", "interrupted", "error"]


class HistoryKeeper(Protocol):
    """What keeps the history inside the session budget (compact.Compactor, which works on
    the session: declared here so the loop does not depend on the compactor's module)."""

    async def before_call(self, session: Session) -> None: ...

    async def on_too_long(self, session: Session) -> bool:
        """True when the history was made shorter and the call may be retried (strictly
        shorter each time, so retrying on every True ends)."""
        ...

    async def manual(self, session: Session, focus: str = "") -> str | None: ...

    @property
    def budget(self) -> ContextBudget | None:
        """The budget it keeps the history in, when it follows the model's window."""
        ...


class TurnHooks(Protocol):
    """What runs around a turn (the UserPromptSubmit and Stop hooks)."""

    async def prompt_submitted(self, prompt: str) -> str | None:
        """The prompt to send (context may be added); None: blocked, the turn does not run."""

    async def stopping(self, answer: str) -> str | None:
        """A reason to keep working instead of ending the turn; None: the turn ends."""

    async def settled(self, changing: bool = False) -> None:
        """What `prompt_submitted` started or put off (a checkpoint's scan) is done: awaited
        before each batch of the turn's tool calls (`changing`: one of them may change files)
        and before its Stop hooks."""

    async def ended(self) -> None:
        """The turn that took the prompt is over, however it ended (a checkpoint records what
        it changed)."""


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended, its answer, and how many model and tool calls it took."""

    reason: Reason
    text: str
    turns: int
    tool_calls: int
    cut: str = ""  # the final answer's finish_reason when it stopped short (a CUT_SHORT key), else ""


# A final answer that stopped for one of these did not end where the model meant it to.
CUT_SHORT = {"length": "it reached the output token limit", "content_filter": "the endpoint's content filter stopped it"}


@dataclass
class Agent:
    """Runs turns in its runtime's session (`session`): the history, transcript and meters
    live there, the tools and the policy in the runtime, the model client here."""

    llm: LLM
    runtime: Runtime
    ui: UI
    system_prompt: str
    max_turns: int = 50
    compactor: HistoryKeeper | None = None  # keeps the history inside the session budget
    turn_hooks: list[TurnHooks] = field(default_factory=list)  # in order: hooks, then checkpoints
    # Parts added to the system prompt after start-up (MCP servers' instructions, what the
    # SessionStart hooks said), by name: setting one again replaces it.
    prompt_parts: dict[str, str] = field(default_factory=dict)
    _partial: list[str] = field(default_factory=list, init=False, repr=False)  # this call's text so far

    @property
    def session(self) -> Session:
        return self.runtime.session

    def full_prompt(self) -> str:
        return "".join([self.system_prompt, *(f"\n\n{part}" for part in self.prompt_parts.values() if part)])

    def set_prompt_part(self, name: str, text: str) -> None:
        self.prompt_parts[name] = text

    def set_model(self, model: str) -> None:
        """The model of the next calls (`/model`); the session meters each model apart, and the
        context budget follows the new model's window."""
        self.llm.model = model
        budget = self.compactor.budget if self.compactor is not None else None
        if budget is not None:
            budget.follow(model)

    def messages(self) -> list[Message]:
        return [Message.system(self.full_prompt()), *self.session.history]

    async def ask(self, prompt: str, images: tuple[Image, ...] = ()) -> TurnResult:
        """One turn on `prompt` (and `images` sent with it, for a model that takes them)."""
        hooked = await self._prompt_hooks(prompt)
        if hooked is None:
            return self._end("error", 0, 0, "")
        self._append(Message("user", hooked, images=images))
        if self.runtime.busy():  # a background task may change files while the model answers
            await self._settle(changing=True)
        turns = calls = 0
        pending: tuple[ToolCall, ...] = ()
        results: dict[str, Message] = {}
        try:
            while turns < self.max_turns:
                turns += 1
                self.ui.emit(ModelStarted(turn=turns, model=self.llm.model))
                self._partial = []
                done = await self._call_model()
                self._partial = []
                self.count_usage(done.usage)
                self._append(done.message)
                if not done.message.tool_calls:
                    if why := CUT_SHORT.get(done.finish_reason):
                        self.ui.emit(Notice(level="warning", text=f"the answer was cut short: {why} (finish_reason {done.finish_reason})"))
                    if (more := await self._stop_hooks(done.message)) is None:
                        ended = await self._finish("completed", turns, calls, visible(done.message.content or ""))
                        return replace(ended, cut=done.finish_reason if why else "")
                    self._append(Message.user(more))
                    continue
                pending, results = done.message.tool_calls, {}
                calls += len(pending)
                self.runtime.foresee(pending)  # while the turn settles
                await self._settle(changing=self.runtime.may_change(pending))
                for result in await self.runtime.run_calls(pending, results):
                    self._append(result)
                pending = ()
                if (why := self.runtime.halted()) is not None:  # a hook's `continue: false`
                    self.ui.emit(Notice(level="warning", text=f"a hook stopped the turn: {why}"))
                    return await self._finish("completed", turns, calls, "")
            self.ui.emit(Notice(level="warning", text=f"stopped after {plural(self.max_turns, 'model call')} (max_turns)"))
            return await self._finish("max_turns", turns, calls, "")
        except asyncio.CancelledError:
            if "".join(self._partial).strip():  # what the person saw stays in the history
                self._append(Message("assistant", "".join(self._partial)))
            await self._finish("interrupted", turns, calls, "", self._answer_pending(pending, results))
            raise
        except Exception:
            await self._ended()
            raise

    async def _prompt_hooks(self, prompt: str) -> str | None:
        text: str | None = prompt
        for hooks in self.turn_hooks:
            if text is None:
                break  # blocked: later ones (a checkpoint) have nothing to do
            text = await hooks.prompt_submitted(text)
        return text

    async def _settle(self, changing: bool = False) -> None:
        for hooks in self.turn_hooks:
            await hooks.settled(changing)

    async def _stop_hooks(self, answer: Message) -> str | None:
        await self._settle()
        for hooks in self.turn_hooks:
            if (reason := await hooks.stopping(answer.content or "")) is not None:
                return reason
        return None

    async def _call_model(self) -> Completion:
        """One model call, with the history compacted first when it outgrew the budget, and
        shrunk again (then retried) each time the endpoint still finds it too long, until
        nothing is left to shrink."""
        if self.compactor is not None:
            await self.compactor.before_call(self.session)
        while True:
            # A reply may begin inside thinking whose opening tag the template put in the prompt
            # (`llm.thinktags`): its first text waits (shown for now) until that is known.
            messages = self.messages()
            split = ThinkSplit(self._on_text, self._on_reasoning, lone=may_open_in_prompt(messages, self.llm.model),
                               held=lambda piece: self.ui.emit(TextPending(text=piece)))
            try:
                return await self.llm.complete(messages, self.runtime.specs(), split.feed, split.apart)
            except ContextTooLongError:
                if self.compactor is None or not await self.compactor.on_too_long(self.session):
                    raise
            finally:
                split.flush()  # the text held goes out as it is, however the call ended: nothing is lost

    def _on_text(self, piece: str) -> None:
        self._partial.append(piece)
        self.ui.emit(TextDelta(text=piece))

    def _on_reasoning(self, piece: str) -> None:
        self.ui.emit(ReasoningDelta(text=piece))

    def count_usage(self, usage: Usage, model: str | None = None) -> None:
        """Meter one model call: this agent's (`model` None: its own model, whose prompt is the
        context) or a sub-agent's."""
        self.ui.emit(self.session.count_usage(usage, model or self.llm.model, context=model is None))

    def add_context(self, text: str) -> None:
        """Something the person did outside a turn (a `!command` and its output), as a user
        message the model sees with the next prompt."""
        self._append(Message.user(text))

    def _append(self, message: Message) -> None:
        self.session.append(message)
        self.ui.emit(MessageAdded(message=message))

    def _answer_pending(self, calls: tuple[ToolCall, ...], results: dict[str, Message]) -> int:
        """Keep the history valid after a cancel: every call of the last assistant message
        gets exactly one result (ids such as call_0 repeat across messages, so only the
        results after that message count). Returns how many were answered "interrupted"."""
        history = self.session.history
        last = max((i for i, m in enumerate(history) if m.role == "assistant" and m.tool_calls), default=-1)
        answered = {m.tool_call_id for m in history[last + 1:] if m.role == "tool"}
        cut = 0
        for call in calls:
            if call.id not in answered:
                result = results.get(call.id)
                cut += result is None
                self._append(result or Message.tool(call.id, INTERRUPTED))
        return cut

    async def _ended(self) -> None:
        for hooks in self.turn_hooks:
            await hooks.ended()

    async def _finish(self, reason: Reason, turns: int, calls: int, text: str, interrupted: int = 0) -> TurnResult:
        await self._ended()  # what they record (a checkpoint's files) comes before the turn's end
        return self._end(reason, turns, calls, text, interrupted)

    def _end(self, reason: Reason, turns: int, calls: int, text: str, interrupted: int = 0) -> TurnResult:
        self.session.end_turn()
        self.ui.emit(TurnEnded(reason=reason, turns=turns, tool_calls=calls, text=text, interrupted_calls=interrupted))
        return TurnResult(reason, text, turns, calls)
