"""What a model named in a command or agent file means at this endpoint.

Files written for Claude Code name Claude's models: an alias (`sonnet`, `opus`, `haiku`,
`opusplan`) or a full id (`claude-sonnet-4-0`, `claude-3-5-haiku-20241022`). An endpoint that
serves other models would refuse them and fail the run, so a name is looked up in order:

1. `model_aliases` (config) has it, compared without case: its value;
2. the endpoint lists it (`GET /models`): the name as written;
3. it is a Claude name and `model_aliases` has its family (`sonnet` for `claude-sonnet-4-0`):
   that value;
4. it is a Claude name and the endpoint lists models of its family (a proxy serving Claude's
   models under its own ids, `anthropic/claude-sonnet-4.5`): that one, or of several the last
   by name (the newest, as Claude's ids go), said in a note that names the others;

and the model found must be one the endpoint lists (when it can list them). Otherwise the name
is ignored with a note saying why and what to set, and the configured model is used: a name in
a file never fails the run. `inherit` (Claude Code's word for "the session's model") is no
name at all. When the endpoint cannot list its models, an alias the person configured is
trusted, a Claude name with no alias is ignored, and any other name is used as written (the
file names this endpoint's own models); if the endpoint then refuses it, `OrConfigured` goes on
with the configured model.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from nanohermes.common.errors import ModelNotFoundError

if TYPE_CHECKING:
    from nanohermes.llm import LLM, TextSink
    from nanohermes.common.messages import Completion, Message

FAMILIES = ("opus", "sonnet", "haiku")
# Words that name no model: the session's is used, with nothing to say.
INHERIT = ("inherit", "default")
LIST_SECS = 10.0  # how long a lookup waits for the endpoint's model list
_FAMILY = re.compile(r"(opus|sonnet|haiku)")
Lister = Callable[[], Awaitable[tuple[list[str] | None, str]]]


@dataclass(frozen=True)
class Choice:
    """The model to use (None: the configured one) and, when the name was not used, why."""

    model: str | None
    note: str = ""


def family(name: str) -> str | None:
    """The Claude family a name belongs to (`sonnet` for `claude-sonnet-4-0` or
    `us.anthropic.claude-3-5-sonnet-20241022-v2:0`), or None for a name that is not Claude's."""
    lowered = re.sub(r"\[[^\]]*\]$", "", name.strip().lower())  # `sonnet[1m]`: a context size, not a model
    if lowered in FAMILIES:
        return lowered
    if lowered == "opusplan":
        return "opus"
    if "claude" not in lowered:
        return None
    found = _FAMILY.search(lowered)
    return found.group(1) if found else None


def endpoint_lister(llm: Any) -> Lister:
    """The endpoint's model ids, or None and why they could not be listed (an LLM without
    `list_models`, an endpoint without `/models`)."""

    async def listed() -> tuple[list[str] | None, str]:
        lister = getattr(llm, "list_models", None)
        if lister is None:
            return None, "this endpoint type cannot list its models"
        try:
            return list(await asyncio.wait_for(lister(), LIST_SECS)), ""
        except asyncio.CancelledError:
            raise
        except Exception as e:
            return None, getattr(e, "message", None) or f"{type(e).__name__}: {e}"

    return listed


def _alias(aliases: Mapping[str, str], key: str) -> str | None:
    lowered = key.strip().lower()
    return next((v for k, v in aliases.items() if k.strip().lower() == lowered and v.strip()), None)


async def choose(named: str | None, *, aliases: Mapping[str, str], listed: Lister, current: str) -> Choice:
    """The model `named` (in a file's `model:`) means here; `current` is the one used instead."""
    name = (named or "").strip()
    if not name or name.lower() in INHERIT:
        return Choice(None)
    kin = family(name)
    mapped = _alias(aliases, name) or None
    models, why = await listed()
    if mapped is None and models is not None and name in models:
        return Choice(name)
    if mapped is None and kin is not None:
        mapped = _alias(aliases, kin)
    instead = f"; {current} is used instead"
    if mapped is not None:
        if models is None or mapped in models:
            return Choice(mapped)
        return Choice(None, f"model {name!r} ignored: model_aliases maps it to {mapped!r}, which the endpoint does "
                            f"not list{instead}")
    if kin is not None and models is not None and (kindred := sorted(m for m in models if family(m) == kin)):
        if len(kindred) == 1:
            return Choice(kindred[0])
        return Choice(kindred[-1], f"model {name!r} is {kindred[-1]!r} here, the last by name of the endpoint's "
                                   f"{kin} models ({', '.join(kindred)}); model_aliases chooses another")
    if kin is not None:
        where = "which the endpoint does not list" if models is not None else \
            f"and the endpoint could not say which models it serves ({why})"
        return Choice(None, f"model {name!r} ignored: it is a Claude model, {where}, and model_aliases has no entry "
                            f'for {kin!r} (set model_aliases, e.g. {{"{kin}": "<a model of this endpoint>"}}){instead}')
    if models is None:
        return Choice(name)  # this endpoint's own naming, unchecked: the file's author knew it
    return Choice(None, f"model {name!r} ignored: the endpoint does not list it (/model lists the ones it serves; "
                        f"model_aliases maps a name to one of them){instead}")


class OrConfigured:
    """A model client running on the model a file named: when the endpoint answers that it does
    not serve that model (one it could not list, so it was taken as written), the call is made
    again on `configured`, said once through `note`, and the rest of the run stays on it. A
    name in a file never fails a run."""

    def __init__(self, inner: LLM, configured: str, note: Callable[[str], None]) -> None:
        self.inner, self.configured, self.note = inner, configured, note

    @property
    def model(self) -> str:
        return self.inner.model

    @model.setter
    def model(self, value: str) -> None:
        self.inner.model = value

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
                       on_reasoning: TextSink | None = None) -> Completion:
        try:
            return await self.inner.complete(messages, tools, on_text, on_reasoning)
        except ModelNotFoundError as e:
            if self.inner.model == self.configured:
                raise
            self.note(f"{e.message}; {self.configured} is used instead")
            self.inner.model = self.configured
            return await self.inner.complete(messages, tools, on_text, on_reasoning)

    def __getattr__(self, name: str) -> Any:  # the client's other parts (list_models, ...)
        return getattr(self.inner, name)
