"""A base_url and the connection to it: a base_url no request could use, refused at once, and
what a failed connection says, naming the TLS/plain-HTTP mix-ups (deterministic: said at
once, never retried)."""

from __future__ import annotations

import asyncio
import ssl
import unicodedata
from urllib.parse import urlsplit

from nanohermes.common.errors import ConfigError, UnreachableError

_CHAR_NAMES = {" ": "space", "\t": "tab", "\n": "newline", "\r": "carriage return", "\x0b": "vertical tab",
               "\x0c": "form feed", "\x00": "NUL character", "\x1b": "escape character", "\xa0": "no-break space",
               "\u200b": "zero-width space", "\ufeff": "byte order mark"}


def _stray_char(c: str) -> bool:
    """Whitespace or an invisible character: no URL holds one unescaped (a pasted line ending,
    an indent, a no-break space or byte order mark copied from a web page or editor)."""

    return c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zs", "Zl", "Zp")


def _char_name(c: str) -> str:
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
