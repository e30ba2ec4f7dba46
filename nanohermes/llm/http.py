"""The HTTP side both wires share: one streamed POST, its retries, and what its failures mean.

`HttpWire` owns the httpx client, the retry loop (429, 5xx, connection errors and dropped
streams, with exponential backoff and jitter, honouring Retry-After), the server-sent-event
reader, the checks on a body that is not an event stream (a whole JSON answer is used, whatever
its label), and the mapping of every failure to an `errors.EndpointError` subclass with a hint
(a TLS/plain-HTTP mix-up in base_url is deterministic: it is said at once, never retried). What
an error's words mean, in each provider's wording, comes from the quirk table
(`nanohermes.llm.quirks`). An error inside a 200 answer is judged as a status is
(`rate_limited`, then `overflowed`), so a rate limit worded like an overflow is retried on both
wires. A wire (chat completions, Responses) only builds its request and turns events into a
`Completion` through a `StreamParser`. httpx is imported on first use so the CLI starts fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import types
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol
from urllib.parse import urlsplit

from nanohermes import controls
from nanohermes.errors import (
    AuthError,
    ConfigError,
    ContextTooLongError,
    EndpointError,
    ModelNotFoundError,
    RateLimitedError,
    ServerFailedError,
    StreamBrokenError,
    TimedOutError,
    UnreachableError,
)
from nanohermes.llm.quirks import matcher
from nanohermes.messages import Completion, Message, Usage

if TYPE_CHECKING:
    import httpx

TextSink = Callable[[str], None]
NoticeSink = Callable[[str], None]

BASE_URL_HINT = "check base_url (--base-url, OPENAI_BASE_URL or config) and that the server is running"
CONTEXT_HINT = "start a new session or compact the conversation"
KEY_HINT = "check the key: set OPENAI_API_KEY, pass --api-key, or set api_key / api_key_env in config"
MODEL_HINT = ("/model in the REPL (or `nanohermes doctor`) lists the models the endpoint serves; pick one with "
              "--model, NANOHERMES_MODEL or model in config")
# How a person carries on after an answer that never came whole: the prompt is in the history.
AGAIN = "in the REPL send `continue`; a script runs `nanohermes --continue -p continue`"

# What errors say in each provider's words (the context is full, a rate limit, a failing
# server, a refused key) is in the quirk table, one entry a provider's wording.
CONTEXT_OVERFLOW = matcher("overflow", "error")


def import_httpx() -> Any:
    """httpx, without its command-line client: the package's init imports `httpx._main` (click,
    rich, pygments: about 50 ms) only to offer `httpx.main`, which nothing here calls."""
    if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
        stub = types.ModuleType("httpx._main")

        def main() -> None:
            raise SystemExit("the httpx command-line client is not loaded in nanohermes")

        vars(stub)["main"] = main
        sys.modules["httpx._main"] = stub
    import httpx

    return httpx


def is_context_overflow(text: str) -> bool:
    return bool(CONTEXT_OVERFLOW.search(text))


def rate_limited(status: int, fields: str, message: str) -> bool:
    """A rate limit or quota, judged as both the status path and the in-stream path do: status
    429, a code/status/type that names one, or a message that does. Checked before the
    overflow wordings, since "too many tokens per minute" is a rate limit, not a full context."""
    return status == 429 or bool(matcher("rate limit", "fields").search(fields)
                                 or matcher("rate limit", "message").search(message))


def overflowed(status: int, fields: str, message: str) -> bool:
    """The request does not fit: an overflow wording in an error that is no rate limit and no
    refusal of the key or the route (llama.cpp once sent it as a 500), or a request too large
    for the rate limit itself."""
    if status in (401, 403, 404):
        return False
    return bool(matcher("too large", "message").search(message)) or (
        is_context_overflow(f"{message} {fields}") and not rate_limited(status, fields, message))


def tried(retries: int) -> str:
    from nanohermes.budget import plural

    return f"retried {plural(retries, 'time')}" if retries else "not retried: max_retries is 0"


def rate_hint(retries: int) -> str:
    """The hint once the retries of a rate limit ran out."""
    return (f"the endpoint limits how many requests or tokens this key may send ({tried(retries)}); wait a minute "
            "and try again, raise max_retries to wait longer, or check the account's quota")


def server_hint(status: int, retries: int, page: bool = False, fields: str = "") -> str:
    """The hint once the retries of a failing server ran out: a gateway's failure, a server
    overloaded or down for maintenance, or an error inside the server."""
    if status in (502, 504) or (page and status >= 500):
        failed = "timed out waiting for the model server" if status == 504 else "failed"
        return (f"a proxy or gateway in front of the model server {failed} ({tried(retries)}); check that the "
                "server behind it is up, then try again")
    if status in (503, 529) or re.search(r"overload|unavailable", fields, re.IGNORECASE):
        return (f"the model server is overloaded or down for maintenance ({tried(retries)}); try again later, or "
                "raise max_retries to wait longer")
    return (f"the model server failed while answering ({tried(retries)}); its log says why; try again, and if it "
            "keeps failing, try another model or server")


def broken_hint(retries: int) -> str:
    return (f"the server was reached, but its answer broke off ({tried(retries)}); try again ({AGAIN}); if it keeps "
            "breaking, check the server's log and the timeout of any proxy in front of it")


_CHAR_NAMES = {" ": "space", "\t": "tab", "\n": "newline", "\r": "carriage return", "\x0b": "vertical tab",
               "\x0c": "form feed", "\x00": "NUL character", "\x1b": "escape character", "\xa0": "no-break space",
               "\u200b": "zero-width space", "\ufeff": "byte order mark"}


def _stray_char(c: str) -> bool:
    """Whitespace or an invisible character: no URL holds one unescaped (a pasted line ending,
    an indent, a no-break space or byte order mark copied from a web page or editor)."""
    import unicodedata

    return c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zs", "Zl", "Zp")


def _char_name(c: str) -> str:
    import unicodedata

    known = _CHAR_NAMES.get(c)
    if known is not None:
        return known
    kind = "control character" if unicodedata.category(c) == "Cc" else "invisible character"
    return f"{kind} U+{ord(c):04X}" + (f" ({unicodedata.name(c).lower()})" if unicodedata.name(c, "") else "")


def _article(name: str) -> str:
    return ("an " if name[0] in "aeiou" else "a ") + name


def _stray_chars(url: str) -> str | None:
    """Why `url` cannot be used as typed because of whitespace or control characters, or None.
    urlsplit would hide them (it strips leading spaces and C0 controls and drops tabs and
    newlines), and httpx then fails each request in a way that looks like a network fault."""
    if url.isascii() and url.isprintable() and " " not in url:
        return None  # the usual case, decided without loading unicodedata
    stray = [_stray_char(c) for c in url]
    if not any(stray):
        return None
    if all(stray):
        return "it is blank (only whitespace or control characters)"
    lead = stray.index(False)
    tail = len(url) - stray[::-1].index(False)
    has = [f"a leading {_char_name(url[0])}"] if lead else []
    if tail < len(url):
        has.append(f"a trailing {_char_name(url[-1])}")
    inner = (c for c, bad in zip(url[lead:tail], stray[lead:tail], strict=True) if bad)
    contains = list(dict.fromkeys(_article(_char_name(c)) for c in inner))  # each kind once
    text = f"it has {' and '.join(has)}" if has else ""
    if contains:
        text += (" and contains " if text else "it contains ") + " and ".join(contains)
    return text


def _malformed(url: str) -> str | None:
    """Why `url` is no http(s) URL with a host and a valid port, or None."""
    try:
        parts = urlsplit(url)
    except ValueError as e:  # an unclosed IPv6 bracket
        return f"it is not a well-formed URL ({e})"
    if parts.scheme not in ("http", "https") and "://" not in url:
        return "it has no http:// or https:// scheme"
    if parts.scheme not in ("http", "https"):
        return f"its scheme {parts.scheme!r} is not http or https"
    if not parts.hostname:
        return "it names no host"
    host_port = parts.netloc.rpartition("@")[2]  # urlsplit's own `port` says only "invalid" or "out of range"
    if host_port.startswith("["):  # an IPv6 address: the port follows its bracket
        text = host_port.partition("]")[2].removeprefix(":")
    else:
        text = host_port.partition(":")[2]
    if text and not (text.isascii() and text.isdigit() and 0 < int(text) < 65536):
        return f"its port {text!r} is not a number from 1 to 65535"
    return None


def check_base_url(url: str) -> None:
    """Refuse a base_url no request could use (whitespace or control characters in it, no
    scheme, a typo in it, no host, a bad port or address), at once: each of these would
    otherwise be retried as if the network had failed."""
    why = _stray_chars(url) or _malformed(url)
    if why is not None:
        raise ConfigError(f"base_url {url!r} is not a usable URL: {why}",
                          hint="set it like http://127.0.0.1:8080/v1 or https://api.openai.com/v1 "
                               "(--base-url, OPENAI_BASE_URL or config)")


_TLS_REFUSED = ("wrong_version_number", "wrong version number", "record layer failure", "unknown protocol",
                "packet length too long", "http_request")


def _chain_text(exc: BaseException) -> str:
    """The text of an exception and of the ones it wraps (httpx keeps the ssl error as the cause)."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 4:
        parts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return " ".join(parts).lower()


def plain_http_answered(url: str, exc: BaseException) -> bool:
    """An https:// request whose handshake met bytes that are no TLS: the server speaks plain HTTP."""
    return url.startswith("https://") and any(w in _chain_text(exc) for w in _TLS_REFUSED)


def dropped_before_answer(url: str, exc: BaseException) -> bool:
    """A plain-HTTP request the server hung up on or answered with no HTTP status line: what a TLS
    server does with one (it may as well be a crash, so `speaks_tls` checks before anyone says so)."""
    low = str(exc).lower()
    return url.startswith("http://") and (type(exc).__name__ in ("ReadError", "RemoteProtocolError") or any(
        w in low for w in ("reset", "disconnected", "without sending", "illegal status")))


def exception_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def describe_connect_error(url: str, exc: BaseException) -> str:
    """One phrase for a failed connection, naming the usual TLS mix-ups."""
    text = exception_text(exc)
    if plain_http_answered(url, exc):
        return f"{text}; the server seems to speak plain HTTP: try http:// instead of https://"
    if dropped_before_answer(url, exc):
        return f"{text}; if the server speaks TLS, use https:// instead of http://"
    return text


async def speaks_tls(url: str, timeout: float = 3.0) -> bool:
    """Whether the server at `url`'s host and port completes a TLS handshake (the certificate is
    not checked: this only tells a TLS server from a plain one, and nothing is sent over it)."""
    import ssl  # already loaded with httpx

    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=ctx, server_hostname=host or None),
                                           timeout)
    except (OSError, ValueError):  # refused, timed out (TimeoutError) or no TLS (ssl.SSLError): all OSErrors
        return False
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), timeout)
    except OSError:
        pass
    return True


def swap_scheme(url: str) -> str:
    return "http://" + url[len("https://"):] if url.startswith("https://") else "https://" + url.removeprefix("http://")


async def scheme_mismatch(url: str, exc: BaseException) -> UnreachableError | None:
    """The failure as a TLS/plain-HTTP mix-up when it surely is one, else None. A mix-up is
    deterministic, so it is said at once instead of being retried."""
    if plain_http_answered(url, exc):
        detail = describe_connect_error(url, exc)
    elif dropped_before_answer(url, exc) and await speaks_tls(url):
        detail = f"{exception_text(exc)}; the server speaks TLS: use https:// instead of http://"
    else:
        return None
    return UnreachableError(f"cannot reach the model endpoint at {url} ({detail})",
                            hint=f"set base_url to {swap_scheme(url)} (--base-url, OPENAI_BASE_URL or config); "
                                 "a TLS/plain-HTTP mix-up is not retried")


def estimate_usage(messages: Sequence[Message], answer: Message) -> Usage:
    """4 chars a token, marked as estimated, for endpoints that report no usage."""
    prompt = sum(m.chars() for m in messages)
    return Usage(prompt // 4, answer.chars() // 4, estimated=True)


def cut_at_limit(done: Completion) -> Completion:
    """An answer that stopped at the output token limit (finish_reason length) stopped while
    its last tool call was being written: that call is marked, so a cut-off call is named as
    such rather than as malformed JSON."""
    calls = done.message.tool_calls
    if done.finish_reason != "length" or not calls:
        return done
    marked = (*calls[:-1], replace(calls[-1], cut_off=True))
    return replace(done, message=replace(done.message, tool_calls=marked))


class Retry(Exception):
    """This attempt failed in a way worth trying again; `final` is raised once retries run out."""

    def __init__(self, reason: str, final: EndpointError, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final
        self.retry_after = retry_after


@dataclass
class Shown:
    """Text already passed to the UI in this request, across retries."""

    text: str = ""
    replay: int = 0  # chars of the current attempt's stream still being matched against `text`
    diverged: bool = False

    def show(self, piece: str, on_text: TextSink) -> None:
        """Pass new text to the UI, skipping what a dropped attempt already showed."""
        if not self.diverged:
            remaining = self.text[self.replay:]
            if remaining:
                head = piece[: len(remaining)]
                if remaining.startswith(head):
                    self.replay += len(head)
                    piece = piece[len(head):]
                else:  # the retry says something else: mark the break so the reader is not misled
                    self.diverged = True
                    piece = "\n[response restarted]\n" + piece
        if piece:
            self.text += piece
            if not self.diverged:
                self.replay = len(self.text)
            on_text(piece)


class StreamParser(Protocol):
    """Turns one attempt's events into a Completion (one instance per attempt)."""

    def event(self, name: str | None, data: Any) -> bool:
        """Take one event; True when the answer is complete."""
        ...

    def whole(self, body: Any) -> None:
        """Take a complete JSON answer sent instead of an event stream."""
        ...

    def ended(self) -> None:
        """The stream said it is over (`data: [DONE]`): what was received is the whole answer."""
        ...

    def result(self) -> Completion | None:
        """The answer, or None when the stream ended before it was complete."""
        ...


# What no person should be shown raw (`nanohermes.controls`): server text here, everything in `ui.visible`.
CONTROL = controls.CONTROL


def printable(text: str, limit: int = 300) -> str:
    """Server-sent text made safe for a terminal line: control characters (escape sequences a
    hostile endpoint could send) become "?", and the length is capped."""
    return CONTROL.sub("?", text[:limit])


def error_message(body: Any, fallback: str = "") -> str:
    return printable(_error_message(body, fallback))


def _error_message(body: Any, fallback: str = "") -> str:
    """The message of an error body in any of the shapes servers use: {"error": {...}},
    {"error": "text"}, [{"error": {...}}] (Gemini), {"message": ...} or {"detail": ...}."""
    if isinstance(body, list) and body:  # quirk: error.list-body
        body = body[0]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, str) and err:  # quirk: error.string-body
            return err[:300]
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):  # quirk: error.detail-body
                value = err.get(key)
                if isinstance(value, str) and value:
                    return value[:300]
        if isinstance(body.get("detail"), str):
            return str(body["detail"])[:300]
    return fallback[:300]


def error_fields(body: Any) -> tuple[str, str, str]:
    """(code, status, type) of an error body, as text ('' when absent). Gemini sends both a
    numeric code and a status word (429, "RESOURCE_EXHAUSTED"): each may say what it is."""
    if isinstance(body, list) and body:  # quirk: error.list-body
        body = body[0]
    err = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return "", "", ""

    def text(key: str) -> str:
        value = err.get(key)
        return "" if value is None else str(value)

    return text("code"), text("status"), text("type")


def error_status(code: str, status: str) -> int:
    """The HTTP status an error inside a 200 answer stands for (its numeric code or status), else 0."""
    return next((int(v) for v in (code, status) if v.isdigit() and 100 <= int(v) < 600), 0)


def is_error_body(data: Any) -> bool:
    """An event or a 200 body that carries an error instead of an answer."""
    if isinstance(data, list):  # quirk: error.list-body
        return bool(data) and isinstance(data[0], dict) and "error" in data[0]
    return isinstance(data, dict) and (data.get("error") not in (None, "", {})
                                       or data.get("object") == "error")  # quirk: error.object-body


@dataclass
class HttpWire:
    """The transport and retry policy one wire builds on; subclasses set `path` and implement
    `build_request` and `parser`."""

    model: str
    base_url: str
    api_key: str | None = None
    timeout: float = 600.0
    max_retries: int = 4
    on_notice: NoticeSink = lambda text: None
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    reasoning_effort: str | None = None  # sent only when set
    max_output_tokens: int | None = None  # a cap on the answer's tokens, sent only when set
    key_hint: str = KEY_HINT  # what to do when the key is refused (`llm.key_hint`: where it comes from)
    _client: Any = field(default=None, init=False, repr=False)

    path: ClassVar[str] = "/chat/completions"
    what: ClassVar[str] = "chat completions"

    def __post_init__(self) -> None:
        check_base_url(self.base_url)

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            hx = import_httpx()  # on first use: `--version` and the REPL's first prompt skip it
            from nanohermes import __version__

            headers = {"Authorization": f"Bearer {self.api_key or 'no-key-set'}", "User-Agent": f"nanohermes/{__version__}"}
            # Loading the CA bundle costs tens of milliseconds; a plain-HTTP endpoint (a local
            # server) never uses it, since redirects are not followed to another scheme.
            plain = self.base_url.startswith("http://")
            # Reading the environment costs a scan of urllib's proxy settings; it matters only
            # for TLS (SSL_CERT_FILE) or when a proxy variable is set.
            proxied = any(k.lower().endswith("_proxy") for k in os.environ)
            self._client = hx.AsyncClient(
                headers=headers, timeout=hx.Timeout(self.timeout, connect=min(self.timeout, 30.0)),
                limits=hx.Limits(max_keepalive_connections=4), follow_redirects=False, verify=not plain,
                trust_env=not plain or proxied)
        client: httpx.AsyncClient = self._client
        return client

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    # -- the retry loop ----------------------------------------------------

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
                       on_reasoning: TextSink | None = None) -> Completion:
        shown = Shown()
        attempt = 0
        while True:
            try:
                return await self._once(messages, tools, on_text, on_reasoning, shown)
            except Retry as r:
                if attempt >= self.max_retries:
                    raise r.final from None
                delay = r.retry_after
                if delay is None:
                    delay = min(self.backoff_cap, self.backoff_base * 2**attempt) * (0.5 + random.random())
                attempt += 1
                self.on_notice(f"{r.reason}; retrying in {delay:.1f}s (attempt {attempt} of {self.max_retries})")
                await asyncio.sleep(delay)

    def build_request(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def parser(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
               on_reasoning: TextSink | None) -> StreamParser:
        raise NotImplementedError

    def refused(self, status: int, message: str) -> Exception | None:
        """A wire's own reading of a 400 (for example a request option it can drop); None: none."""
        return None

    async def _once(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], on_text: TextSink,
                    on_reasoning: TextSink | None, shown: Shown) -> Completion:
        httpx = import_httpx()

        shown.replay, shown.diverged = 0, False
        def shown_text(piece: str) -> None:  # a sink that skips replayed text
            shown.show(piece, on_text)

        hold = None
        if tools:  # a call the model writes as text is held back, not shown as the answer
            from nanohermes.llm.textcalls import TextHold

            hold = TextHold(shown_text)
        parser = self.parser(messages, tools, hold.feed if hold is not None else shown_text, on_reasoning)
        request = self.build_request(messages, tools)
        started = False
        try:
            async with self.client().stream("POST", self.url(self.path), json=request,
                                            headers={"Accept": "text/event-stream"}) as response:
                started = True
                if response.status_code >= 400:
                    raw = await response.aread()
                    raise self.classify_status(response.status_code, raw, response.headers.get("retry-after"))
                if 300 <= response.status_code < 400:  # not followed: the key must not travel to another address
                    where = printable(response.headers.get("location", "another address"), 200)
                    raise EndpointError(f"the endpoint redirected the request ({response.status_code}) to {where}; "
                                        "check base_url", hint="set base_url to the address the API really answers at")
                ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if ctype in ("text/event-stream", ""):  # no type at all: read it as a stream
                    lines = response.aiter_lines()
                    first = await _first_line(lines)
                    lead = first.lstrip(" \t")[:1] if first is not None else ""
                    if lead in ("{", "["):  # quirk: body.json-labelled-as-stream
                        # A whole JSON answer labelled as a stream (some proxies do): no event
                        # line starts with a brace, so it is read as the answer itself.
                        rest = [line async for line in lines]
                        self._whole(parser, "\n".join([first or "", *rest]).encode())
                    elif lead == "<":  # a web page under the stream's label: no retry makes it an answer
                        raise EndpointError(_not_a_stream(f"an HTML page labelled {ctype or 'with no type'}"),
                                            hint=_not_a_stream_hint(self.base_url))
                    else:
                        await self._events(parser, _prepend(first, lines))
                elif ctype == "application/json" or ctype.endswith("+json"):  # quirk: body.whole-json-answer
                    self._whole(parser, await response.aread())
                else:
                    raise EndpointError(_not_a_stream(ctype), hint=_not_a_stream_hint(self.base_url))
        except (Retry, EndpointError):
            raise
        except (httpx.TimeoutException, httpx.TransportError) as e:
            # Before an answer began, the failure may be a TLS/plain-HTTP mix-up: said at once.
            if not started and (mismatch := await scheme_mismatch(self.base_url, e)) is not None:
                raise mismatch from None
            raise self.transport_failure(e, started=started or bool(shown.text)) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # a stream cut mid-way can surface as a decode error
            raise Retry(f"the response stream failed ({type(e).__name__})", StreamBrokenError(
                f"the model endpoint's answer kept breaking off mid-stream ({exception_text(e)})",
                hint=broken_hint(self.max_retries))) from None
        done = parser.result()
        if done is None:
            raise Retry("the response stream ended early", StreamBrokenError(
                "the model endpoint's answer kept ending before it was complete (the stream closed with no end "
                "of answer)", hint=broken_hint(self.max_retries)))
        return cut_at_limit(self._text_calls(done, tools, hold) if hold is not None else done)

    def transport_failure(self, e: BaseException, *, started: bool) -> Retry:
        """A failure of the connection, named for what happened: no connection at all, a
        server that took the request and hung up or said nothing in time, or an answer whose
        stream broke off (`started`). Each is retried; `final` says it once they run out."""
        httpx = import_httpx()
        url = self.base_url
        if isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError)):
            # A hang-up was just probed for TLS and is none: no guess about TLS then.
            detail = exception_text(e) if dropped_before_answer(url, e) else describe_connect_error(url, e)
            final: EndpointError = UnreachableError(f"cannot reach the model endpoint at {url} ({detail})",
                                                    hint=BASE_URL_HINT)
            return Retry(f"cannot connect to {url}", final)
        if isinstance(e, httpx.TimeoutException):
            secs = f"{self.timeout:g}"
            where = "mid-answer" if started else "after taking the request"
            final = TimedOutError(f"the model endpoint at {url} sent nothing for {secs} s {where} ({exception_text(e)})",
                                  hint=f"the server is reachable but did not answer in time ({tried(self.max_retries)}); "
                                       "it may be overloaded, stuck or still loading the model: check it, or raise "
                                       f"request_timeout (now {secs} s) for a slow model")
            return Retry(f"nothing came from the endpoint for {secs} s", final)
        if started:
            final = StreamBrokenError(f"the model endpoint's answer broke off mid-stream ({exception_text(e)})",
                                      hint=broken_hint(self.max_retries))
            return Retry("the response stream dropped", final)
        # It took the connection, then hung up before answering (a TLS server was ruled out).
        final = UnreachableError(f"the model endpoint at {url} closed the connection without answering "
                                 f"({exception_text(e)})",
                                 hint="check base_url (that port may be another program's) and the server's log: it "
                                      "may have crashed on the request")
        return Retry(f"the endpoint at {url} hung up without answering", final)

    def _text_calls(self, done: Completion, tools: Sequence[dict[str, Any]], hold: Any) -> Completion:
        """An answer without tool calls whose text writes out whole calls of offered tools:
        taken as those calls (the text as it came is kept on the message for the transcript);
        anything else keeps its text, which is now shown."""
        from nanohermes.llm.textcalls import as_tool_calls, recover

        found = recover(done.message.content or "", tools) if not done.message.tool_calls else None
        if found is None or not found.calls or found.format is None:
            hold.release()
            return done
        hold.taken(found.text)
        calls = as_tool_calls(found)
        self.on_notice(f"the model wrote its tool call{'s' if len(calls) > 1 else ''} as text ({found.format.name}); "
                       f"read as a call to {', '.join(c.name for c in calls)}")
        message = replace(done.message, content=found.text or None, tool_calls=calls,
                          recovered=(found.format.name, done.message.content or ""))
        return replace(done, message=message, finish_reason="tool_calls" if done.finish_reason != "length" else "length")

    async def _events(self, parser: StreamParser, lines: AsyncIterator[str]) -> None:
        async for name, data in sse_events(lines):
            if data == "[DONE]":
                parser.ended()  # the end of a stream, even one whose last chunk named no finish_reason
                return
            if is_error_body(data):
                raise self.classify_error_event(data)
            if name == "error" and isinstance(data, dict):  # quirk: stream.named-error-event
                raise self.classify_error_event({"error": data})
            if parser.event(name, data):
                return

    def _whole(self, parser: StreamParser, raw: bytes) -> None:
        """A complete JSON body (an answer or an error) read as the whole reply."""
        body = _json_or_none(raw)
        if body is None:
            raise Retry("the endpoint sent malformed JSON", EndpointError(
                "the endpoint kept sending malformed JSON", hint="check the endpoint's health, then try again"))
        if is_error_body(body):
            raise self.classify_error_event(body)
        parser.whole(body)

    # -- what failures mean ------------------------------------------------

    def classify_status(self, status: int, raw: bytes, retry_after: str | None = None) -> Exception:
        body = _json_or_none(raw)
        text = raw.decode("utf-8-sig", "replace").strip()  # a leading byte order mark dropped: a page starts with "<"
        page = body is None and text.startswith("<")  # a web page, from a proxy or gateway more often than not
        body_msg = error_message(body, page_text(text) if page else text)
        # Without a message of the server's own, the status's reason phrase says what it means.
        said = f"{status} {_reason(status)}".strip() if page or not body_msg else str(status)
        answered = f"{said}: {body_msg}" if body_msg else said
        body_msg = body_msg or said
        code, state, kind = error_fields(body)
        fields = f"{code} {state} {kind}"
        wait = _retry_after(retry_after)
        if overflowed(status, fields, body_msg):
            return ContextTooLongError(f"the conversation no longer fits the model's context ({body_msg})", hint=CONTEXT_HINT)
        if matcher("plain http to tls", "body").search(text):
            return UnreachableError(f"the model endpoint answered {answered}; the server speaks TLS: use https:// "
                                    "instead of http://", hint=f"set base_url to {swap_scheme(self.base_url)} "
                                                              "(--base-url, OPENAI_BASE_URL or config)")
        if status == 429 or status >= 500 or status in (408, 409):
            final: EndpointError = ServerFailedError(f"the model endpoint answered {answered}",
                                                     hint=server_hint(status, self.max_retries, page, fields))
            if rate_limited(status, fields, body_msg):
                final = RateLimitedError(f"the model endpoint rate-limited the request ({answered})",
                                         hint=rate_hint(self.max_retries))
            return Retry(f"endpoint answered {status}", final, wait)
        if status in (401, 403):
            return AuthError(f"the model endpoint refused the API key ({status}: {body_msg})", hint=self.key_hint)
        if self.no_such_model(status, code, body_msg):
            return ModelNotFoundError(f"the endpoint does not serve model `{self.model}` ({body_msg})", hint=MODEL_HINT)
        if status == 400 and (own := self.refused(status, body_msg)) is not None:
            return own
        if status == 404:
            return EndpointError(f"the endpoint answered 404 for {self.what} at {self.base_url}",
                                 hint="check base_url: it usually ends in /v1")
        if status == 400 and matcher("refused key", "message").search(body_msg):
            return AuthError(f"the model endpoint refused the API key ({status}: {body_msg})", hint=self.key_hint)
        return EndpointError(f"the model endpoint answered {answered}", hint="check the model name and request settings")

    def no_such_model(self, status: int, code: str, message: str) -> bool:
        """The endpoint says it does not serve the model: a 404 naming a model, or the code
        OpenAI gives it (some servers send it with 400)."""
        return code == "model_not_found" or (status == 404 and "model" in message.lower())

    def classify_error_event(self, data: Any) -> Exception:
        """An error sent inside a 200 answer (an event of the stream, or the whole body), judged
        as `classify_status` judges a status: its code, status and type first (a rate limit or
        a failing server is retried with the same backoff), an overflow wording only then."""
        msg = error_message(data, "unknown error")
        code, state, kind = error_fields(data)
        fields = f"{code} {state} {kind}"
        status = error_status(code, state)
        if overflowed(status, fields, msg):
            return ContextTooLongError(f"the conversation no longer fits the model's context ({msg})", hint=CONTEXT_HINT)
        if rate_limited(status, fields, msg):
            return Retry("the endpoint reported a rate limit mid-answer", RateLimitedError(
                f"the model endpoint rate-limited the request mid-answer: {msg}", hint=rate_hint(self.max_retries)))
        if status >= 500 or status in (408, 409) or matcher("failing", "fields").search(fields):
            return Retry("the endpoint reported an error mid-answer", ServerFailedError(
                f"the model endpoint kept failing mid-answer: {msg}", hint=server_hint(status, self.max_retries, False, fields)))
        if status in (401, 403) or matcher("refused key", "fields").search(fields):
            return AuthError(f"the model endpoint refused the API key ({msg})", hint=self.key_hint)
        if self.no_such_model(status, code, msg):
            return ModelNotFoundError(f"the endpoint does not serve model `{self.model}` ({msg})", hint=MODEL_HINT)
        return EndpointError(f"the model endpoint reported an error: {msg}", hint="check the model name and request settings")

    async def list_models(self) -> list[str]:
        httpx = import_httpx()
        try:
            response = await self.client().get(self.url("/models"))
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise await scheme_mismatch(self.base_url, e) or self.transport_failure(e, started=False).final from None
        if response.status_code >= 400:
            raise self.classify_status(response.status_code, response.content)
        body = _json_or_none(response.content)  # a page, a redirect or another shape lists nothing
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            what = f"redirected ({response.status_code})" if 300 <= response.status_code < 400 else \
                'not JSON' if body is None else 'JSON without a "data" list'
            raise EndpointError(f"the endpoint's model list is {what}", hint="check base_url: it usually ends in /v1")
        return sorted(str(m.get("id")) for m in data if isinstance(m, dict))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _reason(status: int) -> str:
    """The standard reason phrase of a status ("Bad Gateway"), or "" for one outside the standard."""
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HEADING = re.compile(r"<h1[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_SKIPPED = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def page_text(page: str, limit: int = 120) -> str:
    """A short, printable line from an HTML page: its <title>, else its first heading, else its
    text without tags. What a gateway's error page says is mostly in those."""
    import html

    found = _TITLE.search(page) or _HEADING.search(page)
    text = found.group(1) if found else _TAG.sub(" ", _SKIPPED.sub(" ", page))
    text = " ".join(_TAG.sub(" ", html.unescape(text)).split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return printable(text, limit)


def _not_a_stream(ctype: str) -> str:
    return f"the endpoint answered {printable(ctype, 80)}, not an event stream; check base_url"


def _not_a_stream_hint(base_url: str) -> str:
    return f"{base_url} should be the API root of an OpenAI-compatible server (it usually ends in /v1), not a web page or proxy"


async def _first_line(lines: AsyncIterator[str]) -> str | None:
    """The first line that is not blank, or None when the body ends first. One byte order mark
    at the very start of the body is dropped, as the event-stream format says: left in, it
    would turn the first `data:` line into an unknown field and lose that event."""
    start = True
    async for line in lines:
        if start:
            line, start = line.removeprefix("\ufeff"), False
        if line.strip():
            return line
    return None


async def _prepend(first: str | None, lines: AsyncIterator[str]) -> AsyncIterator[str]:
    if first is not None:
        yield first
        async for line in lines:
            yield line


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, min(float(value), 120.0)) if value is not None else None
    except (TypeError, ValueError):
        return None


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, Any]]:
    """Server-sent events as (event name, parsed data); "[DONE]" comes through as the string.
    llama.cpp reports a failure mid-stream on an `error:` line, read here as an error event."""
    name: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield name, _event_data("\n".join(data))
            name, data = None, []
            continue
        if line.startswith(":"):
            continue  # quirk: stream.comment-keepalive (OpenRouter's ": OPENROUTER PROCESSING")
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "data":
            data.append(value)
        elif key == "event":
            name = value
        elif key == "error":  # quirk: stream.error-line
            parsed = _json_or_none(value.encode())
            yield "error", parsed if is_error_body(parsed) else {"error": parsed if isinstance(parsed, dict) else {"message": value}}
    if data:
        yield name, _event_data("\n".join(data))


def _event_data(text: str) -> Any:
    if text.strip() == "[DONE]":
        return "[DONE]"
    return json.loads(text)
