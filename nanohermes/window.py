"""The model's context window and the compaction budget that follows it.

Where the window comes from, first that says: the endpoint, in the fields the quirk table
names (`nanohermes.llm.quirks`, `window.*`: `/models` fields such as vLLM's `max_model_len`;
for a local server, llama.cpp's `/props` or `/slots`, LM Studio's `/api/v0/models`, Ollama's
`/api/ps`, else its `/api/show`); else a table of known model families; else
`context_window_tokens` from the config. Compaction starts when the context passes
`compact_at_share` of the window, measured in tokens from the endpoint's last reported usage
(plus the messages since), in chars at 4 a token when it reports none. `session_budget_chars`, set by the person, overrides all of it.

The lookup never delays or fails a turn: a remote endpoint's answer is cached per base_url
and model in the cache folder for a day; a local server (loopback or a private address, whose
window changes when it restarts) is asked afresh, concurrently with the first model call, and
the first call waits for it only when the history is already large.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from nanohermes.budget import Limits
from nanohermes.llm.quirks import WindowField, entries
from nanohermes.llm.quirks import data as quirk_data
from nanohermes.messages import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.session import Session

DEFAULT_WINDOW_TOKENS = 32_768  # when nothing says: a window every served model has had for years
LOOKUP_SECS = 3.0  # the whole endpoint lookup
CACHE_SECS = 24 * 3600  # a remote endpoint's answer
CACHE_FILE = "context-windows.json"
WAIT_FROM_CHARS = CHARS_PER_TOKEN * 2048  # a history this large waits for a pending lookup


@dataclass(frozen=True)
class Window:
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


async def endpoint_window(base_url: str, model: str, api_key: str | None,
                          timeout: float = LOOKUP_SECS) -> tuple[Window | None, bool]:
    """What the endpoint says of `model`'s window, or None (it says nothing, or fails, or is
    slow: never an error), and whether it answered at all (its /models list came)."""
    from nanohermes.llm.http import import_httpx

    httpx = import_httpx()
    headers = {"Authorization": f"Bearer {api_key or 'no-key-set'}"}
    plain = base_url.startswith("http://")
    try:
        async with httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False, verify=not plain,
                                     trust_env=not plain) as client:
            async def get(url: str, method: str = "GET", body: Any = None) -> Any:
                try:
                    r = await client.request(method, url, json=body)
                    return r.json() if r.status_code == 200 else None
                except (httpx.HTTPError, ValueError):
                    return None

            models = await get(base_url.rstrip("/") + "/models")
            listed = from_models_list(models, model)
            if listed is not None or not is_local(base_url):
                return listed, models is not None
            root = _root(base_url)
            props, slots, lms, ps, show = await asyncio.gather(
                get(root + "/props"), get(root + "/slots"), get(root + "/api/v0/models"), get(root + "/api/ps"),
                get(root + "/api/show", "POST", {"model": model}))
            return (from_llamacpp(props) or from_llamacpp(slots) or from_lmstudio(lms, model)
                    or from_ollama_ps(ps, model) or from_ollama_show(show)), True
    except (httpx.HTTPError, OSError, ValueError):
        return None, False


# --------------------------------------------------------------------------------------
# the cache of remote endpoints' answers


def _cache_key(base_url: str, model: str) -> str:
    return hashlib.sha256(f"{base_url.rstrip('/')}\n{model}".encode()).hexdigest()[:32]


def _entry(base_url: str, model: str, now: float | None) -> dict[str, Any] | None:
    """The fresh cache entry of `model` on `base_url`: tokens 0 means the endpoint said nothing."""
    from nanohermes.dirs import cache_home

    try:
        entry = json.loads((cache_home() / CACHE_FILE).read_text(encoding="utf-8")).get(_cache_key(base_url, model))
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), (int, float)) or \
            not isinstance(entry.get("tokens"), int) or entry["tokens"] < 0:
        return None
    if (now if now is not None else time.time()) - entry["at"] > CACHE_SECS:
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


def store(base_url: str, model: str, window: Window | None) -> None:
    """Remember the endpoint's answer for a day: its window, or that it named none."""
    from nanohermes.dirs import cache_home, write_private

    path = cache_home() / CACHE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[_cache_key(base_url, model)] = {"tokens": window.tokens if window else 0,
                                         "source": window.source if window else "", "at": time.time()}
    try:
        write_private(path, json.dumps(data))
    except OSError:
        pass  # a cache that cannot be written costs a lookup next time, nothing more


# --------------------------------------------------------------------------------------
# the budget compaction works to


@dataclass
class ContextBudget:
    """The window in force and what it allows: compaction past `share` of it, in tokens when
    the endpoint reports usage, else in chars; or, with `explicit_chars` (session_budget_chars
    set by the person), that many chars of history whatever the window. `apply` hands the
    derived limits (the session budget in chars and what follows from it) to whoever uses them."""

    window: Window
    share: float
    base: Limits  # the configured limits, before the window's budget
    explicit_chars: int | None = None
    lookup: Callable[[str], Any] | None = None  # model -> awaitable of Window | None (the endpoint's answer)
    known: Callable[[str], Window] | None = None  # model -> the window known without asking (cache, table, config)
    apply: list[Callable[[Limits], None]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

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
        for hand in self.apply:
            hand(limits)

    def start(self, model: str) -> None:
        """Ask the endpoint for `model`'s window, in the background (a running loop is needed)."""
        if self.lookup is None:
            return
        if self._task is not None:
            self._task.cancel()
        lookup = self.lookup

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
        bounded by the lookup's own timeout."""
        task = self._task
        if task is None or task.done() or size_chars < WAIT_FROM_CHARS:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), LOOKUP_SECS + 1)
        except Exception:  # slow or failed: the window known now stands
            return

    async def known_now(self) -> None:
        """Wait for a pending lookup (bounded by its own timeout): before a report that states
        the window (`-p`'s json), so what it says does not depend on how quick the turn was."""
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), LOOKUP_SECS + 1)
        except Exception:  # slow or failed: the window known now stands
            return

    async def aclose(self) -> None:
        """Stop a lookup still running (the session ends: its answer no longer matters)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
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
    one): the cached or fallback window now, the endpoint asked when it starts
    (`ContextBudget.start`)."""
    explicit = config.session_budget_chars if config.session_budget_chars is not None else \
        config.limits.get("session_budget_chars")
    base_url = config.base_url
    key = config.resolved_api_key()

    async def lookup(model: str) -> Window | None:
        if is_local(base_url):
            return (await endpoint_window(base_url, model, key))[0]
        remembered = cached(base_url, model)
        if remembered is not None or said_nothing(base_url, model):
            return remembered
        found, answered = await endpoint_window(base_url, model, key)
        if answered:  # what it said, or that it said nothing; a failed request is asked again next time
            await asyncio.to_thread(store, base_url, model, found)
        return found

    def known(model: str) -> Window:
        return (None if is_local(base_url) else cached(base_url, model)) or fallback(model, config.context_window_tokens)

    return ContextBudget(window=known(model or config.model), share=config.compact_at_share, base=limits,
                         explicit_chars=explicit if isinstance(explicit, int) else None, lookup=lookup, known=known)


def short_tokens(n: int) -> str:
    """1047576 -> 1.0M, 131072 -> 131k, 8192 -> 8k."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    return f"{round(n / 1000)}k"


__all__ = ["FAMILIES", "ContextBudget", "Window", "budget_for", "cached", "endpoint_window", "fallback", "family_window",
           "from_llamacpp", "from_lmstudio", "from_models_list", "from_ollama_ps", "from_ollama_show", "is_local",
           "said_nothing", "short_tokens", "store"]
