"""The model's context window and the compaction budget that follows it.

Where the window comes from, first that says: the endpoint, in the fields the quirk table
names (`nanohermes.llm.quirks`, `window.*`: `/models` fields such as vLLM's `max_model_len`;
for a local server, llama.cpp's `/props` or `/slots`, LM Studio's `/api/v0/models`, Ollama's
`/api/ps`, else its `/api/show`); else a table of known model families; else
`context_window_tokens` from the config. Compaction starts when the context passes
`compact_at_share` of the window, measured in tokens from the endpoint's last reported usage
(plus the messages since), in chars at 4 a token when it reports none. `session_budget_chars`, set by the person, overrides all of it.

The lookup never delays or fails a turn, and asks nothing the turn does not need. The window
known at start comes without a request: an earlier answer of the endpoint for this model
(kept in the cache folder for a day, per base_url and model), else the family table, else the
config. Only when no answer within the day is kept is the endpoint asked, in the background,
concurrently with the first model call (which waits for it only when the history is already
large), and only where its provider names windows: an earlier answer, or a URL that names the
provider (a service's host; a local server's own port, a guess an answer corrects), says
where, and a service whose `/models` names no window is not asked at all; else its `/models`
list is asked first, which names the window or tells the server by its owners (then that
server's own route is asked). An endpoint that failed to answer (an error status, or no
answer within the lookup's time) is not asked again for an hour: a slow one would hold every
run's exit, which lets a pending lookup finish so its answer is kept.
A local server's window changes when it restarts: a remembered one is asked afresh once a
session, when the context passes half the budget it gives (before that it does not matter).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from nanohermes.common.budget import Limits
from nanohermes.llm.quirks import WindowField, entries
from nanohermes.llm.quirks import data as quirk_data
from nanohermes.common.messages import CHARS_PER_TOKEN
from nanohermes.common.dirs import cache_home, write_private
from nanohermes.llm.http import import_httpx

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.turn.session import Session

DEFAULT_WINDOW_TOKENS = 32_768  # when nothing says: a window every served model has had for years
LOOKUP_SECS = 3.0  # the whole endpoint lookup
CACHE_SECS = 24 * 3600  # a remote endpoint's answer
FAILED_SECS = 3600  # an endpoint that failed to answer (an error status, or too slow) is not asked again meanwhile
CACHE_FILE = "context-windows.json"
WAIT_FROM_CHARS = CHARS_PER_TOKEN * 2048  # a history this large waits for a pending lookup


@dataclass(frozen=True)
class Window:
    """A context window in tokens, and where it came from."""

    tokens: int
    source: str  # where it came from, for people: "endpoint /props n_ctx", "known model family gpt-4.1", ...


# Known families' windows, by name prefix (the longest that matches wins), for endpoints that do not say.
FAMILIES: dict[str, int] = {
    "gpt-4.1": 1_047_576, "gpt-4o": 128_000, "gpt-4-turbo": 128_000, "gpt-4": 8_192, "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000, "gpt-oss": 131_072, "o1": 200_000, "o3": 200_000, "o4-mini": 200_000, "codex-mini": 200_000,
    "claude": 200_000, "gemini-1.5-pro": 2_097_152, "gemini-1.5-flash": 1_048_576, "gemini-2": 1_048_576,
    "gemini-3": 1_048_576, "deepseek-chat": 131_072, "deepseek-reasoner": 131_072, "deepseek-v3": 131_072,
    "deepseek-r1": 131_072, "deepseek-coder": 131_072, "qwen3-coder": 262_144, "qwen2.5-coder": 32_768,
    "qwen2.5": 32_768, "qwen3": 40_960, "qwq": 131_072, "llama-3.1": 131_072, "llama-3.2": 131_072,
    "llama-3.3": 131_072, "llama3.1": 131_072, "llama3.2": 131_072, "llama3.3": 131_072, "mistral-large": 131_072,
    "mistral-small": 32_768, "mistral-medium": 131_072, "codestral": 256_000, "devstral": 131_072,
    "kimi-k2": 131_072, "glm-4.5": 131_072, "glm-4.6": 202_752, "grok-3": 131_072, "grok-4": 256_000,
}


def family_window(model: str) -> Window | None:
    """The window of `model` from the table: its name without a provider or folder prefix
    (`openai/gpt-4.1`, `Qwen/Qwen3-Coder-30B`) and an Ollama tag (`:7b`), lowercased."""
    name = model.lower().rsplit("/", 1)[-1].split(":", 1)[0]
    best = max((k for k in FAMILIES if name.startswith(k)), key=len, default=None)
    return Window(FAMILIES[best], f"known model family {best}") if best else None


def fallback(model: str, configured: int | None) -> Window:
    """The window when the endpoint does not say: the table, else the config's value."""
    known = family_window(model)
    if known is not None:
        return known
    if configured is not None:
        return Window(configured, "config context_window_tokens")
    return Window(DEFAULT_WINDOW_TOKENS, "default: neither the endpoint nor the table of known model families gives "
                                         "this model's; set context_window_tokens to it")


# --------------------------------------------------------------------------------------
# what endpoints say


def is_local(base_url: str) -> bool:
    """A server on this machine or the local network (its window changes when it restarts)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "") or host.endswith(".localhost") or host.endswith(".local"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def _root(base_url: str) -> str:
    """The server's root, where local servers keep their own routes (`/props`, `/api/...`)."""
    base = base_url.rstrip("/")
    return re.sub(r"/(?:api/)?v\d+$", "", base)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _fields(route: str) -> list[WindowField]:
    """The fields an entry of `route`'s answer names the window in, first that says wins."""
    return [w for _, w in entries(WindowField) if w.route == route]


def _dig(entry: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of `entry` (None when a step is missing)."""
    value: Any = entry
    for step in path.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    return value


def _first(entry: dict[str, Any], route: str) -> Window | None:
    for w in _fields(route):
        if (n := _positive(_dig(entry, w.field))) is not None:
            return Window(n, w.source)
    return None


def from_models_list(body: Any, model: str) -> Window | None:
    """The window `/models` gives for `model` (OpenRouter, vLLM, Groq, Mistral, Together)."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    listed = [e for e in data if isinstance(e, dict)]
    entry = next((e for e in listed if e.get("id") == model), None)
    if entry is None:  # `openai/gpt-4.1` listed for `gpt-4.1`, or the other way round
        entry = next((e for e in listed if isinstance(e.get("id"), str) and
                      (e["id"].endswith("/" + model) or model.endswith("/" + e["id"]))), None)
    if entry is None and len(listed) == 1:
        entry = listed[0]  # a local server serving one model under another name
    return _first(entry, "/models") if entry is not None else None


def from_llamacpp(body: Any) -> Window | None:
    """llama.cpp's `/props` (`default_generation_settings.n_ctx`, or `n_ctx` at the top in older
    builds) or `/slots` (each slot's `n_ctx`)."""
    # quirk: window.llamacpp-props, window.llamacpp-slots
    if isinstance(body, dict):
        props = quirk_data("window.llamacpp-props", WindowField)
        group, _, key = props.field.rpartition(".")
        settings = body.get(group)
        n = _positive(settings.get(key)) if isinstance(settings, dict) else _positive(body.get(key))
        return Window(n, props.source) if n else None
    slots = quirk_data("window.llamacpp-slots", WindowField)
    if isinstance(body, list) and body and isinstance(body[0], dict) and (n := _positive(body[0].get(slots.field))):
        return Window(n, slots.source)
    return None


def from_lmstudio(body: Any, model: str) -> Window | None:
    """LM Studio's `/api/v0/models`: the loaded context if the model is loaded, else its maximum."""
    data = body.get("data") if isinstance(body, dict) else None
    listed = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else ([body] if isinstance(body, dict) else [])
    entry = next((e for e in listed if e.get("id") == model), None)
    return _first(entry, "/api/v0/models") if entry is not None else None


def from_ollama_ps(body: Any, model: str) -> Window | None:
    """Ollama's `/api/ps`: the context the loaded model really runs with."""
    # quirk: window.ollama-ps
    ps = quirk_data("window.ollama-ps", WindowField)
    group, _, key = ps.field.partition(".")
    loaded = body.get(group) if isinstance(body, dict) else None
    for m in loaded if isinstance(loaded, list) else ():
        if isinstance(m, dict) and model in (m.get("name"), m.get("model")) and (n := _positive(m.get(key))):
            return Window(n, ps.source)
    return None


def from_ollama_show(body: Any) -> Window | None:
    """Ollama's `/api/show`: `num_ctx` among the model's parameters (a text of `name value`
    lines), else its `*.context_length`."""
    # quirk: window.ollama-num-ctx, window.ollama-model-info
    if not isinstance(body, dict):
        return None
    num_ctx = quirk_data("window.ollama-num-ctx", WindowField)
    group, _, name = num_ctx.field.partition(".")
    params = body.get(group)
    if isinstance(params, str) and (m := re.search(rf"^\s*{re.escape(name)}\s+(\d+)\s*$", params, re.MULTILINE)):
        return Window(int(m.group(1)), num_ctx.source)
    model_info = quirk_data("window.ollama-model-info", WindowField)
    group, _, suffix = model_info.field.partition(".*")
    info = body.get(group)
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(suffix) and (n := _positive(value)) is not None:
                return Window(n, model_info.source.format(key=key))
    return None


# --------------------------------------------------------------------------------------
# which server an endpoint is, and where it names the window


@dataclass(frozen=True)
class Provider:
    """A server or service whose window has a known place, and how it is told: by its URL (a
    service's hosts, a server's own port) or by its /models answer (what it says owns each
    model). Where it names the window is the quirk table's (the `window.*` entries naming it):
    nowhere for a service whose /models lists no window (the family table knows its models)."""

    name: str
    owners: tuple[str, ...] = ()
    port: int | None = None
    hosts: tuple[str, ...] = ()

    @property
    def routes(self) -> tuple[str, ...]:
        """Where it names the window, in the quirk table's order (first that says wins)."""
        return tuple(dict.fromkeys(w.route for q, w in entries(WindowField) if self.name in q.providers))


PROVIDERS: tuple[Provider, ...] = (
    Provider("llama.cpp", owners=("llamacpp",)),
    Provider("LM Studio", owners=("organization_owner",), port=1234),
    Provider("Ollama", owners=("library", "ollama"), port=11434),
    Provider("vLLM", owners=("vllm",)),
    Provider("OpenRouter", hosts=("openrouter.ai",)),
    Provider("Groq", hosts=("api.groq.com",)),
    Provider("Mistral", hosts=("api.mistral.ai",)),
    Provider("Together", hosts=("api.together.xyz", "api.together.ai")),
    # Services whose /models names no window: nothing to ask.
    Provider("OpenAI", hosts=("api.openai.com",)),
    Provider("Anthropic", hosts=("api.anthropic.com",)),
    Provider("DeepSeek", hosts=("api.deepseek.com",)),
    Provider("Gemini", hosts=("generativelanguage.googleapis.com",)),
    Provider("xAI", hosts=("api.x.ai",)),
)


def recognised(base_url: str) -> Provider | None:
    """The provider an endpoint's URL names: a service by its host, a server by its own port."""
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return next((p for p in PROVIDERS if any(host == h or host.endswith("." + h) for h in p.hosts)
                 or (p.port is not None and port == p.port)), None)


def owned_by(body: Any) -> Provider | None:
    """The server a /models answer names by what it says owns its models."""
    data = body.get("data") if isinstance(body, dict) else None
    owners = {e.get("owned_by") for e in data if isinstance(e, dict)} if isinstance(data, list) else set()
    return next((p for p in PROVIDERS if owners & set(p.owners)), None)


def _no_model(read: Callable[[Any], Window | None]) -> Callable[[Any, str], Window | None]:
    return lambda body, model: read(body)


# How each route of the quirk table is asked, and its answer read for a model.
READERS: dict[str, tuple[str, Callable[[Any, str], Window | None]]] = {
    "/models": ("GET", from_models_list),
    "/props": ("GET", _no_model(from_llamacpp)),
    "/slots": ("GET", _no_model(from_llamacpp)),
    "/api/v0/models": ("GET", from_lmstudio),
    "/api/ps": ("GET", from_ollama_ps),
    "/api/show": ("POST", _no_model(from_ollama_show)),
}
# What an endpoint answers that is an answer (the route is not there, or not like this):
# asking again would only be told the same. Any other status (a refused key, a rate limit,
# a failing server) or no answer in time is a failure, asked again after FAILED_SECS.
_SAID = frozenset({200, 400, 404, 405, 422, 501})
_SLOW = 0  # the status of a request that got no answer within the lookup's time


@dataclass(frozen=True)
class Answer:
    """What asking an endpoint found: the window (None: named nowhere, or not reached); where
    the endpoint names windows, to ask there alone next time (() nowhere; None: not learned,
    or what was known is wrong now); whether it answered (else it is asked again); whether it
    `failed`: it was reached and answered with an error, or not in time (then it is not asked
    again for FAILED_SECS: each run would pay for it again; a server not reached costs nothing)."""

    window: Window | None
    routes: tuple[str, ...] | None
    answered: bool
    failed: bool = False


async def endpoint_window(base_url: str, model: str, api_key: str | None,
                          timeout: float = LOOKUP_SECS) -> tuple[Window | None, bool]:
    """What the endpoint says of `model`'s window (None: it says nothing, fails or is slow;
    never an error), and whether it answered at all: `ask_endpoint` with nothing known of it."""
    answer = await ask_endpoint(base_url, model, api_key, None, timeout)
    return answer.window, answer.answered


async def ask_endpoint(base_url: str, model: str, api_key: str | None, routes: tuple[str, ...] | None = None,
                       timeout: float = LOOKUP_SECS) -> Answer:
    """What the endpoint says of `model`'s window, never an error. `routes`: where it names
    windows, when its URL or an earlier answer said (each asked in turn until one names it);
    else its /models list is asked first, which names the window or tells the server by its
    owners, whose own routes are asked then. The whole lookup is bounded by `timeout`."""
    httpx = import_httpx()
    headers = {"Authorization": f"Bearer {api_key or 'no-key-set'}"}
    plain = base_url.startswith("http://")
    proxied = any(k.lower().endswith("_proxy") for k in os.environ)  # as the model calls go (llm/http.py)

    async def ask(client: Any, route: str) -> tuple[Any, int | None]:
        method, _ = READERS[route]
        url = (base_url.rstrip("/") if route == "/models" else _root(base_url)) + route
        try:
            r = await client.request(method, url, json={"model": model} if method == "POST" else None)
            return (r.json() if r.status_code == 200 else None), r.status_code
        except ValueError:  # not JSON
            return None, r.status_code
        except httpx.TimeoutException:
            return None, _SLOW
        except httpx.HTTPError:
            return None, None

    def failure(status: int | None) -> bool:
        return status is not None and status not in _SAID

    async def look(client: Any) -> Answer:
        learned, todo, said, failed = routes, routes or (), False, False
        if routes is None:
            body, status = await ask(client, "/models")
            if status not in _SAID:
                return Answer(None, None, False, failure(status))
            if (found := from_models_list(body, model)) is not None:
                return Answer(found, ("/models",), True)
            server = owned_by(body)
            learned = server.routes if server is not None else ()
            todo, said = tuple(r for r in learned if r != "/models"), True
        for route in todo:
            body, status = await ask(client, route)
            said, failed = said or status == 200, failed or failure(status)
            if (found := READERS[route][1](body, model)) is not None:
                return Answer(found, learned, True)
        # Known routes of which none answered: the server is another one now; learned afresh next time.
        return Answer(None, learned if said else None, said, failed and not said)

    try:
        async with asyncio.timeout(timeout), httpx.AsyncClient(
                headers=headers, timeout=timeout, follow_redirects=False, verify=not plain,
                trust_env=not plain or proxied) as client:
            return await look(client)
    except TimeoutError:  # the whole lookup took too long: as slow a server is next time
        return Answer(None, None, False, True)
    except (httpx.HTTPError, OSError, ValueError):
        return Answer(None, None, False)


# --------------------------------------------------------------------------------------
# the cache of endpoints' answers


def _cache_key(base_url: str, model: str) -> str:
    return hashlib.sha256(f"{base_url.rstrip('/')}\n{model}".encode()).hexdigest()[:32]


def _routes_key(base_url: str) -> str:
    return "routes " + hashlib.sha256(base_url.rstrip("/").encode()).hexdigest()[:32]


def _read() -> dict[str, Any]:
    try:
        data = json.loads((cache_home() / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _fresh(entry: Any, now: float | None, secs: float = CACHE_SECS) -> dict[str, Any] | None:
    """`entry` if it is a cache entry of the last `secs` (a day)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), (int, float)):
        return None
    return entry if (now if now is not None else time.time()) - entry["at"] <= secs else None


def _entry(base_url: str, model: str, now: float | None) -> dict[str, Any] | None:
    """The fresh cache entry of `model` on `base_url`: tokens 0 means the endpoint said nothing."""
    entry = _fresh(_read().get(_cache_key(base_url, model)), now)
    if entry is None or not isinstance(entry.get("tokens"), int) or entry["tokens"] < 0:
        return None
    return entry


def cached(base_url: str, model: str, now: float | None = None) -> Window | None:
    entry = _entry(base_url, model, now)
    if entry is None or not entry["tokens"]:
        return None
    return Window(entry["tokens"], f"{entry.get('source', 'endpoint')} (cached)")


def said_nothing(base_url: str, model: str, now: float | None = None) -> bool:
    """Did the endpoint, asked within the day, name no window for `model`? (Then it is not asked again.)"""
    entry = _entry(base_url, model, now)
    return entry is not None and entry["tokens"] == 0


def failed_lately(base_url: str, model: str, now: float | None = None) -> bool:
    """Did asking the endpoint about `model` fail (an error status, or no answer in time)
    within FAILED_SECS? (Then it is not asked again meanwhile.)"""
    entry = _fresh(_read().get(_cache_key(base_url, model)), now, FAILED_SECS)
    return entry is not None and entry.get("failed") is True


def known_routes(base_url: str, now: float | None = None) -> tuple[str, ...] | None:
    """Where the endpoint names windows, as an answer within the day showed (() nowhere), or None."""
    entry = _fresh(_read().get(_routes_key(base_url)), now)
    routes = entry.get("routes") if entry is not None else None
    if not isinstance(routes, list) or not all(isinstance(r, str) and r in READERS for r in routes):
        return None
    return tuple(routes)


def store(base_url: str, model: str, window: Window | None, routes: tuple[str, ...] | None = None) -> None:
    """Remember the endpoint's answer for a day: `model`'s window, or that it named none; and
    `routes`, where the endpoint names windows, when the answer showed it."""
    now = time.time()
    _write({_cache_key(base_url, model): {"tokens": window.tokens if window else 0,
                                          "source": window.source if window else "", "at": now},
            **({_routes_key(base_url): {"routes": list(routes), "at": now}} if routes is not None else {})})


def store_failure(base_url: str, model: str, forget: bool = False) -> None:
    """Remember for FAILED_SECS that asking the endpoint about `model` failed; `forget`: where
    it was remembered to name windows no longer answers (learned afresh next time)."""
    _write({_cache_key(base_url, model): {"tokens": -1, "failed": True, "at": time.time()}},
           drop=_routes_key(base_url) if forget else None)


def forget_routes(base_url: str) -> None:
    """Where the endpoint was remembered to name windows no longer answers: learned afresh next time."""
    _write({}, drop=_routes_key(base_url))


def _write(entries: dict[str, Any], drop: str | None = None) -> None:
    data = {k: v for k, v in _read().items() if k != drop}
    data.update(entries)
    try:
        write_private(cache_home() / CACHE_FILE, json.dumps(data))
    except OSError:
        pass  # a cache that cannot be written costs a lookup next time, nothing more


# --------------------------------------------------------------------------------------
# the budget compaction works to


class UsesLimits(Protocol):
    """What takes the limits a budget derives (a runtime, a compactor)."""

    limits: Limits


@dataclass
class ContextBudget:
    """The window in force and what it allows: compaction past `share` of it, in tokens when
    the endpoint reports usage, else in chars; or, with `explicit_chars` (session_budget_chars
    set by the person), that many chars of history whatever the window. Each of `users` is
    given the derived limits (the session budget in chars and what follows from it) as the
    window becomes known."""

    window: Window
    share: float
    base: Limits  # the configured limits, before the window's budget
    explicit_chars: int | None = None
    lookup: Callable[[str], Any] | None = None  # model -> awaitable of Window | None (the endpoint's answer)
    known: Callable[[str], Window] | None = None  # model -> the window known without asking (cache, table, config)
    # model -> awaitable of Window | None: the endpoint asked afresh, once a session, when the
    # window starts to matter (a local server's window changes when it restarts)
    recheck: Callable[[str], Any] | None = None
    users: list[UsesLimits] = field(default_factory=list)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _model: str = field(default="", init=False, repr=False)
    _rechecked: bool = field(default=False, init=False, repr=False)

    @property
    def trigger_tokens(self) -> int:
        return max(1, int(self.window.tokens * self.share))

    @property
    def budget_chars(self) -> int:
        if self.explicit_chars is not None:
            return self.explicit_chars
        return max(1000, self.trigger_tokens * CHARS_PER_TOKEN)

    def limits(self) -> Limits:
        return replace(self.base, session_budget_chars=self.budget_chars)

    def set_window(self, window: Window) -> None:
        self.window = window
        limits = self.limits()
        for user in self.users:
            user.limits = limits

    def start(self, model: str) -> None:
        """Ask the endpoint for `model`'s window, in the background (a running loop is needed)."""
        self._model, self._rechecked = model, False
        if self.lookup is not None:
            self._ask(self.lookup, model)

    def _ask(self, lookup: Callable[[str], Any], model: str) -> None:
        if self._task is not None:
            self._task.cancel()

        async def ask() -> None:
            try:
                found = await lookup(model)
            except Exception:  # a lookup that breaks knows nothing: the window stays as it is
                return
            if found is not None:
                self.set_window(found)

        self._task = asyncio.get_running_loop().create_task(ask())

    def follow(self, model: str) -> None:
        """Another model now (`/model`): its window as known at once, then as the endpoint says."""
        if self.known is not None:
            self.set_window(self.known(model))
        try:
            self.start(model)
        except RuntimeError:  # no running loop (a caller outside the session): the known window stands
            pass

    async def settle(self, size_chars: int) -> None:
        """Before a model call: wait for a pending lookup when the context (`size_chars`, its
        history or its counted tokens as chars) is large enough for the window to matter now,
        bounded by the lookup's own timeout. Past half the budget, a window remembered from
        an earlier session is asked afresh first (`recheck`, once a session)."""
        recheck = self.recheck is not None and not self._rechecked and self.explicit_chars is None \
            and size_chars >= self.budget_chars // 2
        task = self._task
        if task is not None and not task.done():
            if size_chars < WAIT_FROM_CHARS and not recheck:
                return
            await self._wait(task)
        if recheck and self.recheck is not None:
            self._rechecked = True
            self._ask(self.recheck, self._model)
            if self._task is not None:
                await self._wait(self._task)

    @staticmethod
    async def _wait(task: asyncio.Task[None]) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(task), LOOKUP_SECS + 1)
        except Exception:  # slow or failed: the window known now stands
            return

    async def known_now(self) -> None:
        """Wait for a pending lookup (bounded by its own timeout): before a report that states
        the window (`-p`'s json), so what it says does not depend on how quick the turn was."""
        task = self._task
        if task is not None and not task.done():
            await self._wait(task)

    async def aclose(self) -> None:
        """The session ends: a lookup still asking is let finish (bounded by its own timeout),
        so its answer is remembered and the next session need not ask; stopped at once when
        the session itself is being cancelled."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        current = asyncio.current_task()
        if current is None or not current.cancelling():
            await self._wait(task)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # its cancellation, not ours, is absorbed

    def over(self, session: Session, history_chars: int) -> bool:
        """Is the context past the budget?"""
        if self.explicit_chars is not None:
            return history_chars > self.explicit_chars
        tokens, measured = session.context_tokens()
        return tokens > self.trigger_tokens if measured else history_chars > self.budget_chars

    def report(self, session: Session) -> dict[str, Any]:
        """The window and the budget, for /context, the toolbar and `-p` json."""
        tokens, measured = session.context_tokens()
        return {"tokens": self.window.tokens, "source": self.window.source, "compact_at_share": self.share,
                "compact_at_tokens": None if self.explicit_chars is not None else self.trigger_tokens,
                "session_budget_chars_override": self.explicit_chars, "used_tokens": tokens, "used_measured": measured,
                "used_share": round(tokens / self.window.tokens, 4)}


def budget_for(config: Config, limits: Limits, model: str | None = None) -> ContextBudget:
    """The budget of a session on `config`'s endpoint and `model` (default the configured
    one): the window known now (an earlier answer of the endpoint, else the family table or
    the config), the endpoint asked when it starts (`ContextBudget.start`) only when nothing
    within the day answered for this model, and then only where its URL or an earlier answer
    says it names windows (else its /models list first)."""
    explicit = config.session_budget_chars if config.session_budget_chars is not None else \
        config.limits.get("session_budget_chars")
    base_url = config.base_url
    key = config.resolved_api_key()
    asked: set[str] = set()  # the models this session asked the endpoint about

    async def ask(model: str) -> Window | None:
        asked.add(model)
        # Where it names windows: as an earlier answer showed, else as its URL says (a port
        # is a guess an answer corrects), else its /models list tells.
        remembered = known_routes(base_url)
        by_url = recognised(base_url)
        routes = remembered if remembered is not None else by_url.routes if by_url is not None else None
        if routes == ():  # it names no window anywhere: nothing to ask
            return None
        answer = await ask_endpoint(base_url, model, key, routes)
        if routes is not None and answer.routes is None:  # none of them answered: another server than thought
            answer = await ask_endpoint(base_url, model, key, None)
        if answer.answered:  # what it said, or that it said nothing
            await asyncio.to_thread(store, base_url, model, answer.window, answer.routes)
        elif answer.failed:  # an error or a slow answer: not asked again for a while
            await asyncio.to_thread(store_failure, base_url, model, remembered is not None)
        elif remembered is not None:  # not reached (asked again next time, at no cost)
            await asyncio.to_thread(forget_routes, base_url)
        return answer.window

    async def lookup(model: str) -> Window | None:
        if cached(base_url, model) is not None or said_nothing(base_url, model) or failed_lately(base_url, model):
            return None  # the window known at start is that answer, or asking failed a moment ago
        return await ask(model)

    async def recheck(model: str) -> Window | None:
        return None if model in asked else await ask(model)

    def known(model: str) -> Window:
        return cached(base_url, model) or fallback(model, config.context_window_tokens)

    return ContextBudget(window=known(model or config.model), share=config.compact_at_share, base=limits,
                         explicit_chars=explicit if isinstance(explicit, int) else None, lookup=lookup, known=known,
                         recheck=recheck if is_local(base_url) else None)


def short_tokens(n: int) -> str:
    """1047576 -> 1.0M, 131072 -> 131k, 8192 -> 8k."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    return f"{round(n / 1000)}k"


__all__ = ["FAMILIES", "PROVIDERS", "READERS", "Answer", "ContextBudget", "Provider", "UsesLimits", "Window", "ask_endpoint",
           "budget_for", "cached",
           "endpoint_window", "failed_lately", "fallback", "family_window", "forget_routes", "from_llamacpp", "from_lmstudio",
           "from_models_list", "from_ollama_ps", "from_ollama_show", "is_local", "known_routes", "owned_by", "recognised",
           "said_nothing", "short_tokens", "store", "store_failure"]
