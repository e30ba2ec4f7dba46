"""What an endpoint's failures mean and what to do next: the hints, the judgements of an
error (a rate limit, a context overflow) in each provider's wording (the quirk table,
`nanohermes.llm.quirks`), the shapes of error bodies, and a gateway's HTML page read as one
short printable line. Both wires and the fake server judge errors with these."""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

from nanohermes.common import controls
from nanohermes.common.budget import plural
from nanohermes.llm.quirks import matcher

BASE_URL_HINT = "check base_url (--base-url, OPENAI_BASE_URL or config) and that the server is running"
CONTEXT_HINT = "start a new session or compact the conversation"
KEY_HINT = "check the key: set OPENAI_API_KEY, pass --api-key, or set api_key / api_key_env in config"
MODEL_HINT = ("/model in the REPL (or `nanohermes doctor`) lists the models the endpoint serves; pick one with "
              "--model, NANOHERMES_MODEL or model in config")
# How a person carries on after an answer that never came whole: the prompt is in the history.
AGAIN = "in the REPL send `continue`; a script runs `nanohermes --continue -p continue`"

# What errors say in each provider's words (the context is full, a rate limit, a failing
# server, a refused key) is in the quirk table, one entry a provider's wording; each pattern
# is compiled the first time an error is read (`matcher` keeps it), never by an answer.


def is_context_overflow(text: str) -> bool:
    return bool(matcher("overflow", "error").search(text))


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


# What no person should be shown raw (`nanohermes.common.controls`): server text here, everything in `ui.visible`.
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


def reason_phrase(status: int) -> str:
    """The standard reason phrase of a status ("Bad Gateway"), or "" for one outside the standard."""

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
    # html: only an error page to read
    import html

    found = _TITLE.search(page) or _HEADING.search(page)
    text = found.group(1) if found else _TAG.sub(" ", _SKIPPED.sub(" ", page))
    text = " ".join(_TAG.sub(" ", html.unescape(text)).split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return printable(text, limit)
