"""Meters: tokens per turn and per session, cost, and what fills the context.

`Meter` follows the event stream (any front end can feed it); `cost_usd` prices a `Usage`
when the config has prices for the model; `context_breakdown` sizes what the next request
will carry. Sizes are in chars with tokens estimated at 4 chars a token; usage reported by
the endpoint is used as is, and estimated usage is marked as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nanohermes.common.events import Event, ModelStarted, TurnEnded, UsageUpdate
from nanohermes.common.messages import CHARS_PER_TOKEN, Usage, est_tokens

if TYPE_CHECKING:
    from nanohermes.turn.agent import Agent
    from nanohermes.config import Config, Price

__all__ = ["CHARS_PER_TOKEN", "Meter", "context_breakdown", "cost_of", "cost_report", "cost_usd", "est_tokens",
           "format_context", "format_cost", "price_for", "window_lines"]


@dataclass
class Meter:
    """Usage of the current (or last) turn and of the whole session, from UsageUpdate events."""

    turn: Usage = field(default_factory=Usage)
    turn_by_model: dict[str, Usage] = field(default_factory=dict)
    session: Usage = field(default_factory=Usage)
    calls: int = 0  # model calls this turn
    last: Usage = field(default_factory=Usage)  # the last model call's: what its context held
    _fresh: bool = True  # the next UsageUpdate starts a new turn

    def on_event(self, event: Event) -> None:
        if isinstance(event, ModelStarted) and event.turn == 1:
            # A turn starts: what was spent between turns (/compact) was not this turn's.
            self.turn, self.turn_by_model, self.calls, self._fresh = Usage(), {}, 0, False
        elif isinstance(event, UsageUpdate):
            if self._fresh:
                self.turn, self.turn_by_model, self.calls, self._fresh = Usage(), {}, 0, False
            self.turn = self.turn + event.usage
            self.turn_by_model[event.model] = self.turn_by_model.get(event.model, Usage()) + event.usage
            self.session = event.total
            self.last = event.usage
            self.calls += 1
        elif isinstance(event, TurnEnded):
            self._fresh = True

    def reset(self) -> None:
        """Another conversation is now in force (/clear, /resume): no turn of it yet."""
        self.turn, self.turn_by_model, self.session, self.calls, self._fresh = Usage(), {}, Usage(), 0, True
        self.last = Usage()


def price_for(config: Config, model: str) -> Price | None:
    return config.prices.get(model)


def cost_usd(usage: Usage, price: Price | None) -> float | None:
    """Dollars for `usage` at `price` (per million tokens), or None without a price."""
    if price is None:
        return None
    return (usage.prompt_tokens * price.input_per_mtok + usage.completion_tokens * price.output_per_mtok) / 1_000_000


def cost_of(by_model: dict[str, Usage], config: Config, model: str) -> float | None:
    """Dollars for usage spread over models (sub-agents may use others), or None when one of
    them has no price. With no usage yet it is $0 if `model` (the current one) has a price."""
    costs = [cost_usd(u, price_for(config, m)) for m, u in (by_model or {model: Usage()}).items()]
    return None if None in costs else sum(c for c in costs if c is not None)


def cost_report(turn: dict[str, Usage], session: dict[str, Usage], config: Config, model: str) -> dict[str, Any]:
    """The `/cost` numbers, also put in `-p --output-format json`: usage per model, as the
    agent and the meter keep it, priced per model."""
    unpriced = sorted(m for m in {*turn, *session} or {model} if price_for(config, m) is None)

    def priced(by_model: dict[str, Usage]) -> dict[str, Any]:
        c = cost_of(by_model, config, model)
        return {**sum(by_model.values(), Usage()).to_dict(), "cost_usd": None if c is None else round(c, 6)}

    return {"model": model, "turn": priced(turn), "session": priced(session), "priced": not unpriced,
            "unpriced_models": unpriced}


# What /cost's figures count, said once under them (the toolbar's "session N tokens" is its last).
COST_NOTE = ("tokens sent and received by every model call (sub-agents' and compaction's too); each call sends the "
             "whole conversation again, so they add up faster than the context grows (/context shows that)")


def format_cost(report: dict[str, Any]) -> str:
    def line(label: str, d: dict[str, Any]) -> str:
        est = " (estimated)" if d["estimated"] else ""
        cost = f", ${d['cost_usd']:.4f}" if d["cost_usd"] is not None else ""
        total = d["prompt_tokens"] + d["completion_tokens"]
        return f"{label}: {total:,} tokens ({d['prompt_tokens']:,} sent, {d['completion_tokens']:,} received){est}{cost}"

    unpriced = ", ".join(report["unpriced_models"])
    tail = "" if report["priced"] else f"\nno price configured for {unpriced} (config key `prices`)"
    return "\n".join([line("this turn", report["turn"]), line("session", report["session"]), COST_NOTE]) + tail


def context_breakdown(agent: Agent) -> dict[str, Any]:
    """What the next request carries, by part, in chars and estimated tokens."""
    system = len(agent.full_prompt())
    tools = len(json.dumps(agent.runtime.specs(), ensure_ascii=False))
    results = sum(m.chars() for m in agent.session.history if m.role == "tool")
    history = sum(m.chars() for m in agent.session.history) - results
    parts = {"system_prompt": system, "tool_specs": tools, "history": history, "tool_results": results}
    budget = agent.runtime.limits.session_budget_chars
    window = agent.compactor.budget if agent.compactor is not None else None
    return {
        "parts": {k: {"chars": v, "tokens_est": est_tokens(v)} for k, v in parts.items()},
        "total": {"chars": sum(parts.values()), "tokens_est": est_tokens(sum(parts.values()))},
        "messages": len(agent.session.history),
        "session_budget_chars": budget,
        "history_used": round((history + results) / budget, 4) if budget else None,
        # The model's context window, where it came from, and what the context holds of it.
        "window": window.report(agent.session) if window is not None else None,
    }


def format_context(b: dict[str, Any]) -> str:
    labels = {"system_prompt": "system prompt", "tool_specs": "tool specs", "history": "history", "tool_results": "tool results"}
    rows = ["what the next request carries (tokens estimated at 4 chars a token):"]
    rows += [f"{labels[k]:<14}{v['chars']:>10,} chars  ~{v['tokens_est']:>8,} tokens" for k, v in b["parts"].items()]
    t = b["total"]
    rows.append(f"{'total':<14}{t['chars']:>10,} chars  ~{t['tokens_est']:>8,} tokens")
    w = b.get("window")
    # With a window the budget in chars only stands in for its tokens: one share is shown, the window's.
    if b["history_used"] is not None and (w is None or w["session_budget_chars_override"] is not None):
        rows.append(f"history is {b['history_used']:.0%} of the session budget ({b['session_budget_chars']:,} chars; "
                    f"{b['messages']} messages); it is compacted past 100% (the toolbar's \"context\" share)")
    if w is not None:
        rows += window_lines(w)
    return "\n".join(rows)


def window_lines(w: dict[str, Any]) -> list[str]:
    """The context window and where it came from, what the context holds of it now (the
    toolbar's "context N%"), and where compaction starts."""
    how = ("the last request's prompt tokens as the endpoint counted them, plus the messages since at 4 chars a "
           "token" if w["used_measured"] else "the whole history at 4 chars a token: the endpoint counted none yet")
    share = f"{w['used_share']:.0%}"
    rows = [f"context window {w['tokens']:,} tokens ({w['source']})"]
    if w["session_budget_chars_override"] is not None:
        rows.append(f"compacted past {w['session_budget_chars_override']:,} chars of history (session_budget_chars)")
        rows.append(f"in context now ~{w['used_tokens']:,} tokens, {share} of the window ({how})")
    else:
        rows.append(f"in context now ~{w['used_tokens']:,} tokens, {share} of the window ({how}): the toolbar's "
                    f"\"context {share}\"")
        rows.append(f"compacted past {w['compact_at_share']:.0%} of the window ({w['compact_at_tokens']:,} tokens)")
    return rows
