"""What the REPL says of its session outside the turns: the welcome once the agent is built
(model, workspace, warnings, a missing key), the endpoint checked behind the first prompt, the
bottom toolbar, and the built-in label of a batch of calls in the compact view."""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.text import Text

from nanohermes.common.errors import AuthError, TimedOutError, UnreachableError
from nanohermes.common.modes import Mode
from nanohermes.guard.redact import redact
from nanohermes.ui.commands import GOAL_WARNING, MODEL_LIST_SECS

if TYPE_CHECKING:
    from nanohermes.assemble import Built
    from nanohermes.common.messages import Usage
    from nanohermes.config import Config
    from nanohermes.turn.agent import Agent
    from nanohermes.ui.summaries import BatchCall

STARTING = " nanohermes · starting…"  # the toolbar until the agent is built
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def no_key_hint(config: Config) -> str | None:
    """How to set up an endpoint, when the default one would be asked without a key."""
    if config.resolved_api_key() or config.base_url.rstrip("/") != DEFAULT_BASE_URL:
        return None
    return (f"no API key for {DEFAULT_BASE_URL}: set {config.api_key_env} (or pass --api-key), or point "
            f"--base-url / `base_url` in ~/.config/nanohermes/config.json at another endpoint "
            f"(a local one such as http://localhost:11434/v1 needs no key); nothing is sent until then")


def welcome(config: Config, workspace: Path, resume: Path | None, built: Built,
            warnings: Iterable[str]) -> list[RenderableType]:
    """What the REPL shows once the agent is built: the model and workspace, a resumed
    conversation, the warnings of the start, goal mode, and a missing key."""
    out: list[RenderableType] = [Text(f"model: {config.model} at {config.base_url}", style="dim"),
                                 Text(f"workspace: {workspace}", style="dim")]
    if resume is not None:
        # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
        from nanohermes.ui import render

        out.append(render.resumed(resume.stem, built.agent.session.history))
    out += [Text(f"warning: {w}", style="yellow") for w in warnings]
    if built.agent.runtime.policy.mode == Mode.GOAL:
        out.append(Text(f"warning: {GOAL_WARNING}", style="yellow"))
    if (hint := no_key_hint(config)) is not None:
        out.append(Text(hint, style="yellow"))
    return out


async def check_model(agent: Agent, out: Callable[[RenderableType], None], keyless: bool = False) -> None:
    """The endpoint, asked for its models at start behind the prompt: one that cannot be
    reached or refuses the key (unless the missing key was just said) is said at once, and
    a model it does not list is named, not at the first answer."""
    lister = getattr(agent.llm, "list_models", None)
    if lister is None:
        return
    model = agent.llm.model
    try:
        models = list(await asyncio.wait_for(lister(), MODEL_LIST_SECS))
    except (UnreachableError, TimedOutError, AuthError) as e:
        if not (keyless and isinstance(e, AuthError)):
            out(Text(f"warning: {redact(e.message)}", style="yellow"))
            out(Text(f"hint: {e.hint}", style="dim"))
        return
    except TimeoutError:
        where = getattr(agent.llm, "base_url", "the endpoint")
        out(Text(f"warning: the model endpoint at {where} did not list its models within "
                 f"{MODEL_LIST_SECS:g} s; it may be unreachable or busy (`nanohermes doctor` checks it)",
                 style="yellow"))
        return
    except Exception:  # a list that cannot be had says nothing more here (doctor tells why)
        return
    if models and model not in models:
        close = difflib.get_close_matches(model, models, n=3)
        out(Text(f"warning: the endpoint does not list the model {model!r}"
                 + (f"; did you mean {', '.join(close)}?" if close else "")
                 + " (/model lists the ones it serves and switches)", style="yellow"))


def toolbar(model: str, mode: str, history_chars: int, budget_chars: int, usage: Usage,
            cost: float | None = None, window: dict[str, Any] | None = None, last: Usage | None = None) -> str:
    """The bottom toolbar once the agent is built: model, mode, what the context holds now as
    a share of the model's window (and where the window came from; without one, of the
    session budget in chars, with the tokens the last request held when the endpoint reports
    them), every token sent and received over the session, and its cost (only when `prices`
    has the model). Plain text: prompt-toolkit draws it. docs/repl.md says what each counts."""
    tokens = f" · session {'~' if usage.estimated else ''}{usage.total_tokens:,} tokens" if usage.total_tokens else ""
    dollars = f" · ${cost:.4f}" if cost is not None else ""
    if window is not None and window["session_budget_chars_override"] is None:
        # the turn's modules load with the agent, behind the first prompt
        from nanohermes.turn.window import short_tokens

        source = re.split(r"\W", str(window["source"]), maxsplit=1)[0].replace("known", "family")
        used = f"context {round(100 * window['used_share'])}% of {short_tokens(window['tokens'])} window ({source})"
    else:
        share = 100 * history_chars / max(1, budget_chars)
        pct = "<1%" if 0 < share < 0.5 else f"{round(share)}%"  # as /context rounds it
        held = f" (last request {_size(last.total_tokens)} tokens)" if last is not None and last.total_tokens \
            and not last.estimated else ""
        used = f"context {pct} of {_size(budget_chars)} chars{held}"
    return f" {model} · mode: {mode} · {used}{tokens}{dollars}"


def agent_toolbar(agent: Agent, last: Usage | None) -> str:
    """The toolbar of a built agent (`last`: what the last request held, when counted)."""
    # the turn's modules load with the agent, behind the first prompt
    from nanohermes.turn.meters import cost_of

    chars = sum(m.chars() for m in agent.session.history)  # what the budget and /context count
    cost = cost_of(agent.session.usage_by_model, agent.runtime.config, agent.llm.model)  # None: no price
    compactor = agent.compactor
    window = compactor.budget.report(agent.session) if compactor is not None and compactor.budget else None
    return toolbar(agent.llm.model, agent.runtime.policy.mode, chars, agent.runtime.limits.session_budget_chars,
                   agent.session.usage, cost, window, last)


def _size(n: int) -> str:
    """512, 1.2k, 12k, 1.5M: a count the toolbar can show in a few characters."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


# How the built-in label counts calls of a few tools: (verb, noun) -> "read 3 files".
_LABEL_WORDS = {"read_file": ("read", "file"), "write_file": ("wrote", "file"), "edit_file": ("edited", "file"),
                "list_dir": ("listed", "folder"), "web_fetch": ("fetched", "page")}


def fallback_label(batch: list[BatchCall]) -> str:
    """`read 3 files, grep ×2`: the calls of a batch counted by tool, in their order."""
    counts: dict[str, int] = {}
    for c in batch:
        counts[c.name] = counts.get(c.name, 0) + 1
    parts = []
    for name, k in counts.items():
        if name in _LABEL_WORDS:
            verb, noun = _LABEL_WORDS[name]
            parts.append(f"{verb} {k} {noun}{'s' if k != 1 else ''}" if k > 1 else f"{verb} {noun}")
        else:
            parts.append(name + (f" ×{k}" if k > 1 else ""))
    return ", ".join(parts)
