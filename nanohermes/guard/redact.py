"""Keeping API keys and tokens out of everything nanohermes writes down.

One process-wide set of secret values (the configured API key, the key variable it names,
any `*_API_KEY` / `*_TOKEN` / `*_SECRET` / `*_PASSWORD` variable in the environment, and
string config values under such names) and one function, `redact()`, that the transcript
writer, the `-p` outputs, the REPL's screen and error messages pass their text through. A
value is replaced wherever it appears, also in its JSON-escaped form. Streamed text (an answer
arriving in pieces) goes through a `StreamRedactor`, so a key split across pieces is caught.

It also decides which variables of nanohermes's environment its child processes (commands,
background tasks, git, MCP servers) inherit: none of its own key variables and none named
like a credential, unless the user's `shell_env.keep` lists them.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import re
import select
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 10  # shorter values would blot out ordinary words (and are no real keys)
# Names that end like a credential: OPENAI_API_KEY, GITHUB_TOKEN, api_key, DB_PASSWORD.
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|SECRET_?KEY|ACCESS_?KEY|PRIVATE_?KEY|PASSWORD|PASSWD|CREDENTIALS?)$",
                          re.I)

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None
_forms: tuple[str, ...] = ()  # _values, readable without the lock


def add_secrets(values: Iterable[str | None]) -> None:
    """Remember values that must never be written out."""
    global _pattern, _forms
    with _lock:
        fresh = {v.strip() for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS}
        forms = set()
        for v in fresh:
            forms.add(v)
            forms.add(json.dumps(v, ensure_ascii=False)[1:-1])
            forms.add(json.dumps(v)[1:-1])
        if not forms - _values:
            return
        _values.update(forms)
        _forms = tuple(_values)
        # Longest first, so a value containing another is replaced whole.
        _pattern = re.compile("|".join(re.escape(v) for v in sorted(_values, key=len, reverse=True)))


def secret_names(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


_URL_PASSWORD = re.compile(r"://([^/@:]*):([^/@]*)@")


def collect(config: Any = None, environ: dict[str, str] | None = None) -> list[str]:
    """The secret values visible to this process: from the environment and the config."""
    env = os.environ if environ is None else environ
    found = [v for k, v in env.items() if secret_names(k)]
    if config is not None:
        key_env = getattr(config, "api_key_env", "")
        if key_env and env.get(key_env):
            found.append(env[key_env])

        def walk(node: Any, name: str = "") -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(v, str(k))
            elif isinstance(node, list):
                for v in node:
                    walk(v, name)
            elif isinstance(node, str) and secret_names(name):
                found.append(node)
            elif isinstance(node, str) and "://" in node and "@" in node:
                found.extend(_url_credentials(node))
            elif dataclasses.is_dataclass(node) and not isinstance(node, type):
                # A config section, read key by key (its init fields: the rest is bookkeeping
                # such as where each rule came from).
                for f in dataclasses.fields(node):
                    if f.init:
                        walk(getattr(node, f.name), f.name)

        walk(config)
    return found


def _url_credentials(url: str) -> list[str]:
    """The password of a URL with credentials in it (base_url, an MCP server's url), alone and
    as written with its user ("alice:pw@"): a key like any other, wherever the URL is shown (a
    short password is no secret alone, but the credential in the URL always is). None found:
    []."""

    try:
        parts = urlsplit(url.strip())
        password = parts.password
    except ValueError:  # not a well-formed URL (an unclosed IPv6 bracket): its text still is shown
        m = _URL_PASSWORD.search(url)
        password = m.group(2) if m else None
    if not password:
        return []
    user = url.partition("://")[2].partition("@")[0]
    return [password, user + "@"]


def protect(config: Any = None) -> None:
    """Collect and remember every secret this run knows of; call once the config is loaded."""
    add_secrets(collect(config))


# -- the environment of child processes --------------------------------------------------------
# Variables nanohermes reads keys from whatever they are called; the configured ones are added.
_OWN_KEY_VARS = ("OPENAI_API_KEY",)
_env_lock = threading.Lock()
_own_vars: frozenset[str] = frozenset(_OWN_KEY_VARS)
_kept: frozenset[str] = frozenset()
_set: dict[str, str] = {}
_session: dict[str, str] = {}  # what the session's SessionStart hooks exported (set_session_env)


def set_child_env_policy(*, own_vars: Iterable[str] = (), keep: Iterable[str] = (),
                         extra: dict[str, str] | None = None) -> None:
    """From the loaded config: the variables holding nanohermes's keys (api_key_env, the search
    providers' key variables), `shell_env.keep`, the secret-looking ones children still get,
    and `env`, the variables the person set for every child."""
    global _own_vars, _kept, _set, _session
    with _env_lock:
        _own_vars = frozenset({*_OWN_KEY_VARS, *(v for v in own_vars if v)})
        _kept = frozenset(keep)
        _set = dict(extra or {})
        _session = {}  # a new session's hooks have exported nothing yet


def set_session_env(values: dict[str, str]) -> list[str]:
    """The variables a SessionStart hook exported for later commands (`$CLAUDE_ENV_FILE`),
    replacing those of the session before: they join every command's environment after the
    config's `env`, but a variable named like a credential only if `shell_env.keep` names it
    (its value is redacted like any secret). Returns the names left out."""
    global _session
    with _env_lock:
        kept = _kept
    left_out = sorted(k for k in values if secret_names(k) and k not in kept)
    add_secrets(v for k, v in values.items() if secret_names(k))
    with _env_lock:
        _session = {k: v for k, v in values.items() if k not in left_out}
    return left_out


def configured_env() -> dict[str, str]:
    """The variables the config's `env` sets for every child (commands, hooks, MCP servers)."""
    return dict(_set)


def child_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) without nanohermes's key variables and without
    any variable named like a credential (*_API_KEY, *_TOKEN, *_SECRET, *_PASSWORD, ...),
    except those `shell_env.keep` names."""
    env = dict(os.environ if environ is None else environ)
    own, kept = _own_vars, _kept
    # What the config's `env` sets was written for them by the person: it is kept as set.
    return {**{k: v for k, v in env.items() if k in kept or not (k in own or secret_names(k))}, **_set, **_session}


def redact(text: str) -> str:
    """`text` with every known secret value replaced by [REDACTED]."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(REDACTED, text)


def _partial_tail(text: str) -> int:
    """Length of the longest end of `text` that begins a secret without completing it."""
    best = 0
    for v in _forms:
        for k in range(min(len(v) - 1, len(text)), best, -1):
            if text[-k] == v[0] and text.endswith(v[:k]):
                best = k
                break
    return best


def settle(text: str) -> tuple[str, str]:
    """(the redacted part of `text` that can be shown now, the raw end held back because it
    may be the start of a secret that the next piece completes)."""
    pattern = _pattern
    if pattern is None or not text:
        return text, ""
    cut = len(text) - _partial_tail(text)
    for m in pattern.finditer(text):  # never cut through a secret that is already whole
        if m.start() < cut < m.end():
            cut = m.end()
    return pattern.sub(REDACTED, text[:cut]), text[cut:]


class StreamRedactor:
    """Redacts text that arrives in pieces: what could begin a secret waits for the next
    piece, or for `flush()` when the text ends."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        shown, self._held = settle(self._held + piece)
        return shown

    def flush(self) -> str:
        held, self._held = self._held, ""
        return redact(held)


def kept_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables `shell_env.keep` names that are set here, and those the config's `env`
    sets (for MCP servers, which otherwise start with only the SDK's few safe variables and
    their own configured `env`)."""
    env = os.environ if environ is None else environ
    return {**{k: env[k] for k in sorted(_kept) if k in env}, **_set}


class RedactingPipe:
    """A pipe whose reading end is copied, redacted, into `out` (a child's stderr log: the
    child writes into `writer`, a thread copies what arrives). `drain()` copies what is
    already in the pipe now, so a log read right after the child died is complete."""

    def __init__(self, out: Any) -> None:
        self._out = out
        r, w = os.pipe()
        os.set_blocking(r, False)
        self._r = r
        self.writer = os.fdopen(w, "w", encoding="utf-8")  # hand this to the child as its stderr
        self._lock = threading.Lock()
        self._redactor = StreamRedactor()
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        self._closed = False
        threading.Thread(target=self._pump, name="redacting-pipe", daemon=True).start()

    def _copy(self) -> bool:
        """Copy what the pipe holds (caller has the lock); False at its end."""
        while True:
            try:
                chunk = os.read(self._r, 65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            self._out.write(self._redactor.feed(self._decode(chunk)))
            self._out.flush()

    def _pump(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                r = self._r
            try:
                select.select([r], [], [], 0.5)
            except (OSError, ValueError):  # closed meanwhile
                return
            with self._lock:
                if self._closed or not self._copy():
                    return

    def drain(self) -> None:
        """Copy everything written so far, the held-back end included (the writer is done)."""
        with self._lock:
            if not self._closed:
                self._copy()
                self._out.write(self._redactor.flush())
                self._out.flush()

    def close(self) -> None:
        """Close our end of the writer, copy what is left, and close the log."""
        self.writer.close()
        with self._lock:
            if self._closed:
                return
            self._copy()
            self._out.write(self._redactor.flush())
            self._closed = True
            os.close(self._r)
            self._out.close()
