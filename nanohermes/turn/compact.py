"""Compaction: when the history outgrows the session budget, summarise the older turns.

The `Compactor` runs around the turn loop, not inside it: the agent asks it to check the
history before each model call, and to compact when the endpoint says the context is too
long. One model call summarises the older messages (goal, decisions, files touched, open
todos, unresolved errors); the most recent messages stay verbatim, cut only where no tool
call is separated from its result. The system prompt (identity and project instructions) is
rebuilt for every request, so it survives compaction as is; the todo list is re-injected
into the summary. The summary request is fitted to the session budget before it is sent.

When the endpoint refuses a request as too long, the retried one must be smaller, whatever
made it large: the older turns are summarised, then the largest tool results of the
verbatim tail are cut to previews (each saved whole in the session's
results folder, see `persisted`) until the recent messages fit. Each refusal shrinks further;
when nothing is left to shrink the refusal stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nanohermes.turn import persisted
from nanohermes.common.budget import Limits, clamp, plural
from nanohermes.common.errors import ContextTooLongError
from nanohermes.common.events import UI, Notice
from nanohermes.llm import LLM
from nanohermes.llm.thinktags import visible
from nanohermes.common.messages import CHARS_PER_TOKEN, SUMMARY_TAG, Message, is_summary
from nanohermes.turn.session import Session

if TYPE_CHECKING:
    from nanohermes.hooks.hooks import Hooks
    from nanohermes.turn.window import ContextBudget

SUMMARY_INSTRUCTIONS = """You compact the conversation of a coding agent so that it can carry on in a fresh context.
Write a factual summary of the conversation below under these headings, and nothing else:
Goal: what the user asked for (quote the words that matter).
Decisions: what was decided and why.
Files touched: each path read, created or changed, and what changed.
Open todos: what is left to do.
Unresolved errors: failures not yet fixed, with their exact messages.
Be concise and concrete. Never invent what is not in the conversation."""


def history_chars(history: Sequence[Message]) -> int:
    return sum(m.chars() for m in history)


def choose_cut(history: Sequence[Message], keep_chars: int) -> int:
    """Where the verbatim tail starts: as much recent history as fits `keep_chars`, at a point
    that does not separate a tool call from its result. 0 means nothing can be summarised."""
    best = 0
    tail = 0
    for i in range(len(history) - 1, 0, -1):
        tail += history[i].chars()
        if history[i].role == "tool":
            continue  # a tool result stays with the assistant message that asked for it
        if tail > keep_chars and best:
            break
        best = i
    return best


def render(history: Sequence[Message], item_chars: int) -> list[str]:
    """The older messages as plain text for the summariser, each clamped."""
    out: list[str] = []
    for m in history:
        parts = [m.content or ""]
        parts += [f"-> calls {c.name}({c.arguments})" for c in m.tool_calls]
        who = f"tool result {m.tool_call_id}" if m.role == "tool" else m.role
        out.append(f"[{who}]\n" + clamp("\n".join(p for p in parts if p), item_chars))
    return out


def fit(items: list[str], budget_chars: int) -> str:
    """Join the rendered messages within the budget: the first (the goal) is always kept,
    the oldest of the rest are dropped first, and the count is said."""
    def note(n: int) -> str:
        return f"[… {n} older messages omitted to fit the summary request …]"

    total = sum(len(x) + 2 for x in items)
    dropped = 0
    while total + (len(note(dropped)) + 2 if dropped else 0) > budget_chars and len(items) - dropped > 2:
        dropped += 1
        total -= len(items[dropped]) + 2
    kept = items[:1] + ([note(dropped)] if dropped else []) + items[1 + dropped:]
    return clamp("\n\n".join(kept), budget_chars)


@dataclass
class Compactor:
    """Keeps a session's history inside its budget, with its own model client (usually the
    agent's) and the PreCompact hooks, if any."""

    llm: LLM
    limits: Limits
    ui: UI
    hooks: Hooks | None = None
    # The budget that follows the model's context window (None: `limits.session_budget_chars`
    # alone, in chars); it hands this compactor the limits it derives.
    budget: ContextBudget | None = None

    async def before_call(self, session: Session) -> None:
        history = session.history
        chars = history_chars(history)
        if self.budget is not None:
            # A window still being looked up matters for a large context, in chars or as counted.
            await self.budget.settle(max(chars, session.context_tokens()[0] * CHARS_PER_TOKEN))
            if not self.budget.over(session, chars):
                return
        elif chars <= self.limits.session_budget_chars:
            return
        # The latest messages alone fill the budget (a huge paste): summarising the little
        # before them would spend a model call and lose it, and gain nothing.
        older = history_chars(history[:choose_cut(history, self.limits.keep_chars)])
        if older < self.limits.keep_chars:
            self.ui.emit(Notice(level="warning", text=(
                f"not compacting: the older turns ({older} chars) are under the keep budget "
                f"({self.limits.keep_chars} chars); the latest messages alone fill the context")))
            return
        await self.compact(session, reason=self._over_reason(session))

    def _over_reason(self, session: Session) -> str:
        b = self.budget
        if b is None or b.explicit_chars is not None or not session.context_tokens()[1]:
            return f"history over the session budget of {self.limits.session_budget_chars} chars"
        return (f"context at ~{session.context_tokens()[0]} tokens, past {b.share:.0%} of the model's {b.window.tokens}-token "
                f"window ({b.window.source})")

    async def on_too_long(self, session: Session) -> bool:
        """The endpoint refused the request as too long: its window is smaller than the
        budget, so keep a quarter of what was sent (at most a quarter of the usual tail).
        True only when the history is now shorter than the refused one, so a caller that
        retries on every True stops: each refusal shrinks the history again."""
        refused = history_chars(session.history)
        keep = min(self.limits.keep_chars, refused) // 4
        history = session.history
        cut = choose_cut(history, keep)
        if cut and not (cut == 1 and is_summary(history[0])):
            await self.compact(session, reason="the endpoint said the context is too long", keep_chars=keep)
        # The summary cannot shrink what is kept verbatim: when that is what overflowed (one
        # large read), its largest results are cut too.
        self._cut_results(session, keep)
        if history_chars(session.history) < refused:
            return True
        self.ui.emit(Notice(level="warning", text=(
            f"cannot shrink the conversation ({refused} chars) any further: no older turns to summarise "
            "and no tool result left to cut")))
        return False

    def _cut_results(self, session: Session, keep: int) -> None:
        """Cut the largest tool results until the messages after the summary fit `keep`
        chars: each to a preview of at most `persisted_preview_chars` (half of `keep` when
        that is less), the whole result saved in the session folder. Says once what it cut."""
        history = session.history
        summary = history[0].chars() if history and is_summary(history[0]) else 0
        total = history_chars(history)
        n = min(self.limits.persisted_preview_chars, keep // 2)
        before = after = 0
        done = 0
        for i in sorted((i for i, m in enumerate(history) if m.role == "tool"), key=lambda i: -history[i].chars()):
            if total - summary <= keep:
                break
            m = history[i]
            text = m.content or ""
            shorter = persisted.cut(text, m.tool_call_id or "call", session.folder, n)
            if len(shorter) >= len(text):
                continue
            session.cut_result(i, replace(m, content=shorter))
            total -= len(text) - len(shorter)
            before, after, done = before + len(text), after + len(shorter), done + 1
        if not done:
            return
        where = (f"the whole {'result is' if done == 1 else 'results are'} saved in {session.folder / persisted.RESULTS_DIR}"
                 if session.folder is not None else "not saved: the session is not recorded")
        self.ui.emit(Notice(level="info", text=(
            f"cut {done} recent tool {'result' if done == 1 else 'results'} from {before} to {after} chars "
            f"({'its' if done == 1 else 'the'} first {n} chars{'' if done == 1 else ' of each'}, with a note) "
            f"{persisted.CONTEXT_NOTE}; {where}")))

    async def manual(self, session: Session, focus: str = "") -> str | None:
        """`/compact [focus]`: summarise everything but the latest exchange, now."""
        return await self.compact(session, focus=focus, reason="/compact", keep_chars=0)

    async def compact(self, session: Session, *, focus: str = "", reason: str = "requested",
                      keep_chars: int | None = None) -> str | None:
        """Summarise the older part of the history; returns the summary, or None if there was
        nothing old enough to summarise."""
        history = session.history
        cut = choose_cut(history, self.limits.keep_chars if keep_chars is None else keep_chars)
        if cut == 0 or (cut == 1 and is_summary(history[0])):  # summarising a summary alone gains nothing
            self.ui.emit(Notice(level="warning", text=f"cannot compact ({reason}): no older turns to summarise"))
            return None
        older, kept = history[:cut], len(history) - cut
        if self.hooks is not None and (
                blocked := await self.hooks.pre_compact("manual" if reason == "/compact" else "auto", focus)):
            self.ui.emit(Notice(level="warning", text=f"cannot compact ({reason}): a PreCompact hook blocks it: "
                                                      f"{blocked}"))
            return None
        summary = await self._summarise(session, older, focus)
        text = clamp(summary, self.limits.compact_summary_chars)
        body = (f"{SUMMARY_TAG}\nThe earlier part of this conversation ({len(older)} messages) was compacted. "
                f"Summary:\n{text}\n</conversation-summary>")
        for carried in session.carried():  # the todo list, say
            body += f"\n\n{carried}"
        session.compacted(Message.user(body), kept)
        self.ui.emit(Notice(level="info", text=(
            f"compacted {len(older)} older messages ({history_chars(older)} chars) into a {len(text)}-char summary; "
            f"kept {plural(kept, 'recent message')} verbatim ({reason})")))
        return text

    async def _summarise(self, session: Session, older: Sequence[Message], focus: str) -> str:
        ask = "Summarise the conversation above." + (f" Focus especially on: {focus}" if focus.strip() else "")
        budget = self.limits.session_budget_chars - len(SUMMARY_INSTRUCTIONS) - len(ask) - 8
        items = render(older, self.limits.compact_item_chars)
        for attempt in range(2):
            request = [Message.system(SUMMARY_INSTRUCTIONS), Message.user(fit(list(items), max(budget, 1000)) + "\n\n" + ask)]
            try:
                done = await self.llm.complete(request, [], lambda _: None)
            except ContextTooLongError:
                if attempt:
                    raise
                budget //= 2  # the endpoint's window is smaller than the budget: try once with half
                continue
            self.ui.emit(session.count_usage(done.usage, self.llm.model))
            # Thinking a model wrote into its text is no part of the summary.
            return visible(done.message.content or "") or "(the summary came back empty)"
        raise AssertionError("unreachable")
