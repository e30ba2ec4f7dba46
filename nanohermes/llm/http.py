"""The HTTP side both wires share: one streamed POST, its retries, and what its failures mean.

`HttpWire` owns the httpx client, the retry loop (429, 5xx, connection errors and dropped
streams, with exponential backoff and jitter, honouring Retry-After), the checks on a body
that is not an event stream (a whole JSON answer is used, whatever its label; events are read
by `sse`), and the mapping of every failure to an `errors.EndpointError` subclass with a hint
(`failures`: the hints and judgements; `connect`: a base_url no request could use, and a
TLS/plain-HTTP mix-up, deterministic: said at once, never retried). What an error's words
mean, in each provider's wording, comes from the quirk table (`nanohermes.llm.quirks`). An
error inside a 200 answer is judged as a status is (`rate_limited`, then `overflowed`), so a
rate limit worded like an overflow is retried on both wires. A wire (chat completions,
Responses) only builds its request and turns events into a `Completion` through a
`StreamParser`. httpx is imported on first use so the CLI starts fast.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import types
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from nanohermes import __version__
from nanohermes.common.errors import (
    AuthError,
    ContextTooLongError,
    EndpointError,
    ModelNotFoundError,
    RateLimitedError,
    ServerFailedError,
    StreamBrokenError,
    TimedOutError,
    UnreachableError,
)
from nanohermes.common.messages import Completion, Message, Usage
from nanohermes.llm.connect import (
    check_base_url,
    describe_connect_error,
    dropped_before_answer,
    exception_text,
    scheme_mismatch,
    swap_scheme,
)
from nanohermes.llm.failures import (
    BASE_URL_HINT,
    CONTEXT_HINT,
    KEY_HINT,
    MODEL_HINT,
    broken_hint,
    error_fields,
    error_message,
    error_status,
    is_error_body,
    overflowed,
    page_text,
    printable,
    rate_hint,
    rate_limited,
    reason_phrase,
    server_hint,
    tried,
)
from nanohermes.llm.quirks import matcher
from nanohermes.llm.sse import first_line, json_or_none, prepend, sse_events
from nanohermes.llm.textcalls import TextHold, as_tool_calls, recover
from nanohermes.llm.thinktags import ThinkSplit

if TYPE_CHECKING:
    import httpx

TextSink = Callable[[str], None]
NoticeSink = Callable[[str], None]


def import_httpx() -> Any:
    """httpx, without its command-line client: the package's init imports `httpx._main` (click,
    rich, pygments: about 50 ms) only to offer `httpx.main`, which nothing here calls."""
    if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
        stub = types.ModuleType("httpx._main")

        def main() -> None:
            raise SystemExit("the httpx command-line client is not loaded in nanohermes")

        vars(stub)["main"] = main
        sys.modules["httpx._main"] = stub
    # the one import of httpx, after its command-line client is stubbed out
    import httpx

    return httpx


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
        split = ThinkSplit(on_text, on_reasoning)  # thinking written into the answer is shown as thinking
        attempt = 0
        while True:
            try:
                done = await self._once(messages, tools, split.feed, on_reasoning, shown)
                split.flush()
                return done
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
                    first = await first_line(lines)
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
                        await self._events(parser, prepend(first, lines))
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
        body = json_or_none(raw)
        if body is None:
            raise Retry("the endpoint sent malformed JSON", EndpointError(
                "the endpoint kept sending malformed JSON", hint="check the endpoint's health, then try again"))
        if is_error_body(body):
            raise self.classify_error_event(body)
        parser.whole(body)

    # -- what failures mean ------------------------------------------------

    def classify_status(self, status: int, raw: bytes, retry_after: str | None = None) -> Exception:
        body = json_or_none(raw)
        text = raw.decode("utf-8-sig", "replace").strip()  # a leading byte order mark dropped: a page starts with "<"
        page = body is None and text.startswith("<")  # a web page, from a proxy or gateway more often than not
        body_msg = error_message(body, page_text(text) if page else text)
        # Without a message of the server's own, the status's reason phrase says what it means.
        said = f"{status} {reason_phrase(status)}".strip() if page or not body_msg else str(status)
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
        body = json_or_none(response.content)  # a page, a redirect or another shape lists nothing
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


def _not_a_stream(ctype: str) -> str:
    return f"the endpoint answered {printable(ctype, 80)}, not an event stream; check base_url"


def _not_a_stream_hint(base_url: str) -> str:
    return f"{base_url} should be the API root of an OpenAI-compatible server (it usually ends in /v1), not a web page or proxy"


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, min(float(value), 120.0)) if value is not None else None
    except (TypeError, ValueError):
        return None


