"""The model's window on the web: web_fetch (one page as text) and web_search (providers).

web_fetch validates the URL before any I/O, checks every hop (redirects included) against
the configured allowed/denied hosts and, for a hop to another host, against the permission
rules (hosts compared in canonical form, with the addresses a name resolves to), keeps at most `web_fetch_body_bytes` of the body while
reading and discarding the rest, and turns HTML into Markdown with html-to-markdown. The
whole fetch, redirects included, has one deadline. Search providers: DuckDuckGo (keyless,
through ddgs), SearXNG (its JSON API), Brave and Tavily (keys from the environment).
httpx, html-to-markdown and ddgs are imported inside functions: importing this module is free.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import re
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urljoin, urlsplit

from nanohermes import __version__
from nanohermes.guard.hosts import LookupTimeout, canonical_host, canonical_ip, host_matches, plain_name, resolve
from nanohermes.guard.permissions import SubjectKind
from nanohermes.tools.base import Attempt, Params, ReadOnlyTool, Tool, ToolContext, ToolError

if TYPE_CHECKING:
    import httpx

    from nanohermes.config import Config

MAX_CHARS_FLOOR = 500
ERROR_EXCERPT_CHARS = 300  # of an error page's text, in an error message
ERROR_BODY_BYTES = 64 * 1024  # read of an error page, for that excerpt
PROGRESS_EVERY_BYTES = 512 * 1024

_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_APP_TYPES = {
    "application/xml", "application/javascript", "application/ecmascript", "application/x-javascript",
    "application/yaml", "application/x-yaml", "application/toml", "application/x-sh", "application/sql",
    "application/graphql", "application/x-ndjson", "application/x-www-form-urlencoded", "application/rss+xml",
    "application/atom+xml",
}
_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/", "model/")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_\-.]+)""")


# -- URL and host policy ---------------------------------------------------------------------

def check_url(url: str) -> str:
    """The URL if it is http(s) with a host, else a ValueError that says how to fix it."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https"):
        if not parts.scheme or "." in parts.scheme or (parts.scheme and not parts.netloc and parts.path[:1].isdigit()):
            raise ValueError(f"url must start with http:// or https:// (got {url!r}); try https://{url.strip()}")
        raise ValueError(f"url must use http or https, not {parts.scheme}: (got {url!r})")
    if not parts.hostname:
        raise ValueError(f"url has no host (got {url!r}); pass a full URL such as https://example.com/page")
    return url.strip()


def host_refusal(host: str, config: Config, addresses: tuple[str, ...] | None = None,
                 lookup_secs: float | None = None) -> str | None:
    """Why config refuses this host, or None. Denied wins over allowed. Both lists compare
    canonical forms (`127.1` is `127.0.0.1`); a denied address also denies every name that
    resolves to it (`addresses`, looked up here when not given), and a denied name denies the
    addresses it resolves to (`localhost` denies `127.0.0.1`). Only the name itself, or the
    IP literal, can be allowed. A lookup slower than `lookup_secs` refuses the host."""
    host = canonical_host(host)
    wf = config.web_fetch
    try:
        if wf.denied_hosts and addresses is None:
            addresses = resolve(host, lookup_secs)
        mine = set(addresses or ()) | ({host} if canonical_ip(host) else set())
        for pattern in wf.denied_hosts:
            if host_matches(host, addresses or (), pattern, by_address=True):
                via = "" if host_matches(host, (), pattern, by_address=False) else \
                    f" (it resolves to {', '.join(addresses or ())})"
                return f"host {host}{via} is denied by config web_fetch.denied_hosts ({pattern}); fetch another site"
            if mine and plain_name(pattern) and (shared := mine & set(resolve(pattern, lookup_secs))):
                return (f"host {host} is denied by config web_fetch.denied_hosts ({pattern}, which resolves to "
                        f"{', '.join(sorted(shared))}); fetch another site")
    except LookupTimeout as e:
        return f"{e} (web_fetch_timeout_secs), so host {host} cannot be checked against web_fetch.denied_hosts; " \
               "try again later"
    if wf.allowed_hosts and not any(host_matches(host, (), p, by_address=False) for p in wf.allowed_hosts):
        return (f"host {host} is not in config web_fetch.allowed_hosts ({', '.join(wf.allowed_hosts)}); "
                "fetch one of those or ask the user to allow it")
    return None


# -- content ---------------------------------------------------------------------------------

def kind_of(mime: str, head: bytes) -> str:
    """html | json | text | binary, from the Content-Type and, when that is vague, the bytes."""
    if mime in _HTML_TYPES:
        return "html"
    if mime == "application/json" or mime.endswith("+json") or mime == "text/json":
        return "json"
    if mime.startswith(_BINARY_PREFIXES) or mime in ("application/pdf", "application/zip", "application/gzip"):
        return "binary"
    if mime.startswith("text/") or mime in _TEXT_APP_TYPES or mime.endswith("+xml"):
        return "text"
    # Missing, octet-stream or unknown: decide from the bytes.
    if b"\x00" in head[:8192]:
        return "binary"
    start = head[:512].lstrip().lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html"
    return "text"


def charset_of(header_charset: str | None, body: bytes, kind: str) -> str:
    """The header's charset, else a BOM, else the document's own declaration, else UTF-8."""
    candidates: list[str] = []
    if header_charset:
        candidates.append(header_charset)
    if body.startswith(codecs.BOM_UTF8):
        candidates.append("utf-8-sig")
    elif body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        candidates.append("utf-16")
    if kind == "html" and (m := _META_CHARSET.search(body[:4096])):
        candidates.append(m.group(1).decode("ascii", "replace"))
    if m := _XML_ENCODING.search(body[:200]):
        candidates.append(m.group(1).decode("ascii", "replace"))
    for name in candidates:
        try:
            return codecs.lookup(name).name
        except LookupError:
            continue
    return "utf-8"


def html_to_markdown(html: str, base_url: str | None = None) -> tuple[str, str | None]:
    """(Markdown, title) of an HTML page, scripts, styles and navigation left out. Relative
    links are made absolute against `base_url` so the model can fetch them as they stand."""
    # only a fetched HTML page is converted
    import html_to_markdown as h2m

    options = h2m.ConversionOptions(
        extract_metadata=True,  # for the title; the front matter it adds is cut below
        compact_tables=True,  # padded tables can be larger than the HTML they came from
        inline_data_media="drop_element",  # data: images are kilobytes of base64
        exclude_selectors=["script", "style", "noscript", "template", "svg", "nav", "iframe"],
        base_url=base_url,
    )
    result = h2m.convert(html, options)
    text: str = result.content or ""
    if text.startswith("---\n") and (end := text.find("\n---\n", 4)) != -1:
        text = text[end + 5:]
    title = result.metadata.document.title if result.metadata and result.metadata.document else None
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return text, (" ".join(title.split()) if title else None)


def _to_text(raw: bytes, kind: str, charset: str, url: str | None = None) -> tuple[str, str | None, str | None]:
    """(text, title, a note) for a body already known not to be binary."""
    decoded = raw.decode(charset, errors="replace")
    if kind == "html":
        try:
            text, title = html_to_markdown(decoded, url)
        except Exception as e:  # a converter failure must not lose the page
            return decoded, None, f"[the HTML could not be converted ({type(e).__name__}); shown as sent]"
        return text, title, None
    if kind == "json":
        try:
            return json.dumps(json.loads(decoded), indent=2, ensure_ascii=False), None, None
        except ValueError as e:
            return decoded, None, f"[not valid JSON ({e}); shown as sent]"
    return decoded, None, None


def _excerpt(raw: bytes, mime: str, header_charset: str | None) -> str:
    kind = kind_of(mime, raw)
    if kind == "binary" or not raw.strip():
        return ""
    text, _, _ = _to_text(raw, kind, charset_of(header_charset, raw, kind))
    text = " ".join(text.split())
    return text[:ERROR_EXCERPT_CHARS] + ("…" if len(text) > ERROR_EXCERPT_CHARS else "")


# -- fetching --------------------------------------------------------------------------------

@dataclass
class _Body:
    kept: bytes
    received: int  # bytes actually read, kept or not
    drained: bool  # read to the end (False: the deadline stopped the draining)


@dataclass
class _Page:
    url: str  # the final URL, after redirects
    status: int
    mime: str
    charset: str | None  # from the Content-Type header
    hops: list[str]  # the URLs that redirected, in order
    kind: str = "text"
    body: _Body | None = None
    size: str = ""  # of a binary body, for the refusal


def _connect_error(e: Exception, url: str) -> ToolError:
    host = urlsplit(url).hostname
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return ToolError(f"cannot resolve host {host} (DNS lookup failed: {cause.strerror}); check the URL's spelling")
        if isinstance(cause, ssl.SSLError):
            return ToolError(f"TLS with {host} failed ({cause}); the site does not serve https there or its "
                             "certificate is not trusted: check the URL")
        cause = cause.__cause__ or cause.__context__
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return ToolError(f"cannot connect to {parts.hostname}:{port} (connection refused or unreachable: {e}); "
                     "check the URL and that the server is up")


@dataclass(frozen=True, kw_only=True)
class WebFetchParams(Params):
    url: str
    max_chars: int = 20_000

    non_empty: ClassVar[dict[str, str]] = {"url": "pass a full http:// or https:// URL"}

    def __post_init__(self) -> None:
        super().__post_init__()
        # http(s) only, kept as checked: without the blanks around it (frozen, hence object.__setattr__).
        object.__setattr__(self, "url", check_url(self.url))


@dataclass(frozen=True, kw_only=True)
class WebFetch(ReadOnlyTool[WebFetchParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "web_fetch"
    claude_names: ClassVar[tuple[str, ...]] = ("WebFetch",)
    group: ClassVar[str] = "web"
    description: ClassVar[str] = (
        "Fetch one http(s) URL as text: HTML becomes Markdown, JSON is pretty-printed; binary files are "
        "refused. Follows up to {web_fetch_max_redirects} redirects; returns at most `max_chars` "
        "(500..{max_output}); bodies over {web_fetch_body_bytes} are cut; times out after "
        "{web_fetch_timeout_secs} s. Use web_search to find pages."
    )
    params: ClassVar[type[Params]] = WebFetchParams
    kind: ClassVar[SubjectKind] = "host"

    def rule_subject(self, args: WebFetchParams) -> str | None:
        return canonical_host(urlsplit(args.url).hostname or "") or None

    def output_limit(self) -> str:
        return "max_chars (500..max_output) chars, web_fetch_body_bytes"

    async def run(self, args: WebFetchParams, ctx: ToolContext, attempt: Attempt) -> str:
        limits = ctx.limits
        max_chars = max(MAX_CHARS_FLOOR, min(args.max_chars, limits.max_output))
        seconds = limits.web_fetch_timeout_secs
        deadline = asyncio.get_running_loop().time() + seconds
        try:
            async with asyncio.timeout_at(deadline):
                page = await self._fetch(args.url, ctx, attempt, deadline)
        except TimeoutError:
            raise ToolError(f"timed out after {seconds:g} s fetching {args.url} (web_fetch_timeout_secs); "
                            "the server is slow or stuck: try again later or another URL") from None
        text: str = await self.in_thread(self._render, page, ctx, max_chars)
        return text

    async def _fetch(self, url: str, ctx: ToolContext, attempt: Attempt, deadline: float) -> _Page:
        # after llm.http.import_httpx loaded it (no command-line client); never first here
        import httpx

        limits = ctx.limits
        headers = {"User-Agent": f"nanohermes/{__version__} (web_fetch)",
                   "Accept": "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5"}
        hops: list[str] = []
        timeout = httpx.Timeout(limits.web_fetch_timeout_secs)
        judged = attempt.target.subjects if attempt.target is not None and attempt.target.kind == "host" else ()
        async with httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False) as client:
            while True:
                host = canonical_host(urlsplit(url).hostname or "")
                if attempt.target is not None and not hops and host in judged:
                    hop = attempt.target  # the first hop: the Target the call was judged on
                else:
                    hop = await self.in_thread(self.target, self.parse({"url": url}), ctx)
                if why := host_refusal(host, ctx.config, hop.addresses, limits.web_fetch_timeout_secs):
                    raise ToolError(why + (f" (reached by a redirect from {hops[0]})" if hops else ""))
                if hops and host not in judged and attempt.redirect is not None and (why := attempt.redirect(hop)):
                    # Another host than the one approved: its own rules decide, and a
                    # question cannot be asked mid-fetch, so the model fetches it itself.
                    raise ToolError(f"{hops[0]} redirects to {url}, on host {host}, which this fetch may not reach: "
                                    f"{why}; fetch that URL directly if it is needed")
                try:
                    resp = await self._send(client, url, hop.addresses)
                except httpx.ConnectError as e:
                    raise _connect_error(e, url) from None
                except httpx.TimeoutException:
                    raise TimeoutError from None
                except httpx.HTTPError as e:
                    raise ToolError(f"fetching {url} failed: {type(e).__name__}: {e}") from None
                try:
                    if resp.is_redirect and "location" in resp.headers:
                        target = urljoin(url, resp.headers["location"])
                        if len(hops) >= limits.web_fetch_max_redirects:
                            raise ToolError(
                                f"too many redirects (more than {limits.web_fetch_max_redirects}) from {hops[0]}; "
                                f"the last one pointed to {target}: fetch that URL directly if it is right")
                        try:
                            check_url(target)
                        except ValueError as e:
                            raise ToolError(f"{url} redirects to an unusable location: {e}") from None
                        hops.append(url)
                        url = target
                        continue
                    return await self._read(resp, url, hops, ctx, deadline)
                finally:
                    await resp.aclose()

    @staticmethod
    async def _send(client: httpx.AsyncClient, url: str, addresses: tuple[str, ...]) -> httpx.Response:
        """GET `url` from one of the addresses its host was checked with: the name is not
        looked up again, so a resolver that answers differently the second time (DNS
        rebinding) cannot steer the request to an address the checks never saw. The Host
        header and TLS (server name and certificate) still use the name."""
        # after llm.http.import_httpx loaded it (no command-line client); never first here
        import httpx

        parts = httpx.URL(url)
        if not addresses or canonical_ip(parts.host):
            return await client.send(client.build_request("GET", url), stream=True)
        failure: httpx.ConnectError | None = None
        for address in addresses:
            request = client.build_request(
                "GET", parts.copy_with(host=address), headers={"Host": parts.netloc.decode("ascii")},
                extensions={"sni_hostname": parts.host} if parts.scheme == "https" else {})
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as e:  # the next address, as a connect by name would
                failure = e
        assert failure is not None
        raise failure

    async def _read(self, resp: httpx.Response, url: str, hops: list[str], ctx: ToolContext,
                    deadline: float) -> _Page:
        # after llm.http.import_httpx loaded it (no command-line client); never first here
        import httpx

        mime = (resp.headers.get("content-type") or "").split(";")[0].strip().lower()
        page = _Page(url=str(httpx.URL(url)), status=resp.status_code, mime=mime, charset=resp.charset_encoding, hops=hops)
        cap = ctx.limits.web_fetch_body_bytes
        if resp.status_code >= 400:
            try:
                body = await self._body(resp, ERROR_BODY_BYTES, ctx, None)
            except httpx.HTTPError:
                body = _Body(b"", 0, drained=False)  # the status says enough
            excerpt = await self.in_thread(_excerpt, body.kept, mime, resp.charset_encoding)
            reason = f" {resp.reason_phrase}" if resp.reason_phrase else ""
            hint = ("check the URL" if resp.status_code in (404, 410) else
                    "the page needs authorization nanohermes does not have" if resp.status_code in (401, 403) else
                    "the server failed; try again later" if resp.status_code >= 500 else "check the URL")
            raise ToolError(f"HTTP {resp.status_code}{reason} from {url}; {hint}" + (f"\n{excerpt}" if excerpt else ""))
        if mime and kind_of(mime, b"") == "binary" and "content-length" in resp.headers:
            page.kind, page.size = "binary", f"{resp.headers['content-length']} bytes (Content-Length)"
            return page
        try:
            body = await self._body(resp, cap, ctx, deadline)
        except httpx.TimeoutException:
            raise TimeoutError from None
        except httpx.HTTPError as e:
            raise ToolError(f"reading {url} failed: {type(e).__name__}: {e}") from None
        page.kind, page.body = kind_of(mime, body.kept), body
        if page.kind == "binary":
            page.size = f"{body.received} bytes" if body.drained else f"more than {body.received} bytes"
        return page

    async def _body(self, resp: httpx.Response, cap: int, ctx: ToolContext, deadline: float | None) -> _Body:
        """Keep `cap` bytes. With a deadline, read and discard the rest to the end, or until
        just before the deadline (the kept part is complete, so the page is still useful);
        without one, stop at the cap."""
        kept = bytearray()
        received = 0
        next_progress = PROGRESS_EVERY_BYTES
        chunks = resp.aiter_bytes()
        async for chunk in chunks:
            received += len(chunk)
            kept += chunk[: cap - len(kept)]
            if len(kept) >= cap:
                break
            if received >= next_progress:
                ctx.progress("web_fetch", f"{received / 1_048_576:.1f} MiB so far")
                next_progress = received + PROGRESS_EVERY_BYTES
        if deadline is None or len(kept) < cap:
            return _Body(bytes(kept), received, drained=True)
        # Stop draining a moment before the fetch deadline, which would discard the page.
        margin = min(0.25, ctx.limits.web_fetch_timeout_secs * 0.05)
        try:
            async with asyncio.timeout_at(deadline - margin):
                async for chunk in chunks:
                    received += len(chunk)
                    if received >= next_progress:
                        ctx.progress("web_fetch", f"{received / 1_048_576:.1f} MiB read, {cap} bytes kept")
                        next_progress = received + PROGRESS_EVERY_BYTES
        except TimeoutError:
            return _Body(bytes(kept), received, drained=False)
        return _Body(bytes(kept), received, drained=True)

    def _render(self, page: _Page, ctx: ToolContext, max_chars: int) -> str:
        mime = page.mime or "no content-type"
        header = f"URL: {page.url} ({page.status}, {mime})"
        if page.hops:
            n = len(page.hops)
            header += f"\nRedirected from {page.hops[0]} ({n} redirect{'s' if n != 1 else ''})"
        if page.kind == "binary":
            raise ToolError(f"{page.url} is binary content ({mime}, {page.size}); web_fetch returns only "
                            "text, HTML and JSON")
        body = page.body
        assert body is not None
        charset = charset_of(page.charset, body.kept, page.kind)
        text, title, note = _to_text(body.kept, page.kind, charset, page.url)
        if title:
            header += f"\nTitle: {title}"
        notes: list[str] = []
        if note:
            notes.append(note)
        cap = ctx.limits.web_fetch_body_bytes
        if body.received > cap:
            notes.append(f"[response truncated at {cap} bytes; {body.received} bytes received in all]" if body.drained
                         else f"[response truncated at {cap} bytes; stopped reading after {body.received} bytes at "
                              "the timeout]")
        if not text.strip():
            text = "(empty page)" if not body.kept else "(no readable text in this page)"
        # The page text gets what is left of max_output after the header and the notes, so
        # the exit clamp never has to cut this result (and the notes stay last).
        limit = ctx.limits.max_output
        notes_len = sum(len(n) + 1 for n in notes)
        shown = len(text)
        if len(text) > max_chars or len(header) + len(text) + notes_len + 4 > limit:
            more = f"; pass a larger max_chars (up to {limit}) to see more" if max_chars < limit else ""
            room = limit - len(header) - notes_len - 4 - len(more) - 60  # 60: the note's own words
            shown = max(0, min(max_chars, room))
            notes.append(f"[showing the first {shown} of {len(text)} chars{more}]")
        out = header + "\n\n" + text[:shown]
        if notes:
            out += "\n\n" + "\n".join(notes)
        return out


# -- web_search ------------------------------------------------------------------------------

OTHER_PROVIDERS = ("set another provider in config web_search.provider: duckduckgo (no key), "
                   "searxng (with web_search.searxng_url), brave (BRAVE_API_KEY) or tavily (TAVILY_API_KEY)")


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, kw_only=True)
class WebSearchParams(Params):
    query: str
    count: int = 5

    non_empty: ClassVar[dict[str, str]] = {"query": "pass the words to search for"}


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


def _provider_error(provider: str, what: str) -> ToolError:
    return ToolError(f"web_search provider {provider} {what}; try again later, or {OTHER_PROVIDERS}")


async def _http_json(provider: str, method: str, url: str, timeout: float, **kw: Any) -> tuple[int, Any, str]:
    """(status, parsed JSON or None, a text excerpt) from one provider request."""
    # after llm.http.import_httpx loaded it (no command-line client); never first here
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=True) as client:
            resp = await client.request(method, url, **kw)
    except httpx.TimeoutException:
        raise _provider_error(provider, f"timed out after {timeout:g} s at {url}") from None
    except httpx.HTTPError as e:
        raise _provider_error(provider, f"is unreachable at {url} ({type(e).__name__}: {e})") from None
    try:
        data = resp.json()
    except ValueError:
        data = None
    return resp.status_code, data, " ".join(resp.text.split())[:200]


async def search_searxng(query: str, count: int, config: Config, timeout: float) -> list[SearchHit]:
    base = config.web_search.searxng_url
    if not base:
        raise ToolError("web_search provider searxng needs web_search.searxng_url (e.g. http://localhost:8888); "
                        f"set it, or {OTHER_PROVIDERS}")
    url = base.rstrip("/") + "/search"
    status, data, excerpt = await _http_json("searxng", "GET", url, timeout,
                                             params={"q": query, "format": "json"},
                                             headers={"Accept": "application/json"})
    if status == 403:
        raise _provider_error("searxng", f"at {url} refused the JSON format (403); add json to search.formats "
                              "in the instance's settings.yml")
    if status >= 400 or not isinstance(data, dict):
        raise _provider_error("searxng", f"at {url} answered {status}: {excerpt}")
    hits = [SearchHit(r.get("title") or r.get("url", ""), r.get("url", ""), r.get("content") or "")
            for r in data.get("results", []) if isinstance(r, dict) and r.get("url")]
    if not hits and data.get("unresponsive_engines"):
        names = ", ".join(f"{e[0]} ({e[1]})" if isinstance(e, list) and len(e) > 1 else str(e)
                          for e in data["unresponsive_engines"])
        raise _provider_error("searxng", f"found nothing because its engines did not answer: {names}")
    return hits[:count]


async def search_brave(query: str, count: int, config: Config, timeout: float) -> list[SearchHit]:
    ws = config.web_search
    key = os.environ.get(ws.brave_api_key_env)
    if not key:
        raise ToolError(f"web_search provider brave needs an API key in ${ws.brave_api_key_env}; export it, "
                        f"or {OTHER_PROVIDERS}")
    status, data, excerpt = await _http_json(
        "brave", "GET", ws.brave_url, timeout, params={"q": query, "count": count},
        headers={"Accept": "application/json", "X-Subscription-Token": key})
    if status in (401, 403):
        raise _provider_error("brave", f"rejected the key in ${ws.brave_api_key_env} ({status}: {excerpt})")
    if status >= 400 or not isinstance(data, dict):
        raise _provider_error("brave", f"at {ws.brave_url} answered {status}: {excerpt}")
    results = (data.get("web") or {}).get("results", [])
    return [SearchHit(r.get("title", ""), r.get("url", ""), r.get("description") or "")
            for r in results if isinstance(r, dict) and r.get("url")][:count]


async def search_tavily(query: str, count: int, config: Config, timeout: float) -> list[SearchHit]:
    ws = config.web_search
    key = os.environ.get(ws.tavily_api_key_env)
    if not key:
        raise ToolError(f"web_search provider tavily needs an API key in ${ws.tavily_api_key_env}; export it, "
                        f"or {OTHER_PROVIDERS}")
    status, data, excerpt = await _http_json(
        "tavily", "POST", ws.tavily_url, timeout, json={"query": query, "max_results": count},
        headers={"Authorization": f"Bearer {key}"})
    if status in (401, 403):
        raise _provider_error("tavily", f"rejected the key in ${ws.tavily_api_key_env} ({status}: {excerpt})")
    if status >= 400 or not isinstance(data, dict):
        raise _provider_error("tavily", f"at {ws.tavily_url} answered {status}: {excerpt}")
    return [SearchHit(r.get("title", ""), r.get("url", ""), r.get("content") or "")
            for r in data.get("results", []) if isinstance(r, dict) and r.get("url")][:count]


def search_duckduckgo_sync(query: str, count: int, timeout: float) -> list[SearchHit]:
    try:
        # ddgs: only the DuckDuckGo search provider
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
    except ImportError:
        raise ToolError("web_search provider duckduckgo needs the ddgs package (pip install 'ddgs>=9,<10'); "
                        f"install it, or {OTHER_PROVIDERS}") from None
    try:
        rows = DDGS(timeout=max(1, round(timeout))).text(query, max_results=count, backend="duckduckgo")
    except RatelimitException:
        raise _provider_error("duckduckgo", "is rate-limiting this machine") from None
    except TimeoutException:
        raise _provider_error("duckduckgo", f"timed out after {timeout:g} s") from None
    except DDGSException as e:
        if str(e) == "No results found.":  # ddgs's way of saying an empty page of results
            return []
        raise _provider_error("duckduckgo", f"is unreachable or failed ({_clip(str(e), 200)})") from None
    return [SearchHit(r.get("title", ""), r.get("href", ""), r.get("body") or "") for r in rows or []][:count]


@dataclass(frozen=True, kw_only=True)
class WebSearch(ReadOnlyTool[WebSearchParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "web_search"
    claude_names: ClassVar[tuple[str, ...]] = ("WebSearch",)
    group: ClassVar[str] = "web"
    description: ClassVar[str] = (
        "Search the web: numbered results with title, URL and a short snippet; `count` is "
        "1..{web_search_max_results}. Follow up with web_fetch to read a page."
    )
    params: ClassVar[type[Params]] = WebSearchParams

    def output_limit(self) -> str:
        return "web_search_max_results results, web_search_snippet_chars chars each"

    async def run(self, args: WebSearchParams, ctx: ToolContext, attempt: Attempt) -> str:
        count = max(1, min(args.count, ctx.limits.web_search_max_results))
        provider = ctx.config.web_search.provider
        timeout = ctx.limits.web_search_timeout_secs
        try:
            async with asyncio.timeout(timeout + 5):  # a provider client that ignores its own timeout
                if provider == "searxng":
                    hits = await search_searxng(args.query, count, ctx.config, timeout)
                elif provider == "brave":
                    hits = await search_brave(args.query, count, ctx.config, timeout)
                elif provider == "tavily":
                    hits = await search_tavily(args.query, count, ctx.config, timeout)
                else:
                    hits = await self.in_thread(search_duckduckgo_sync, args.query, count, timeout)
        except TimeoutError:
            raise _provider_error(provider, f"did not answer within {timeout:g} s") from None
        if not hits:
            return f'No results for "{args.query}" from {provider}; try other words.'
        n = ctx.limits.web_search_snippet_chars
        lines = [f'Results for "{args.query}" ({provider}):']
        for i, h in enumerate(hits, 1):
            lines.append(f"\n{i}. {_clip(h.title, n) or '(no title)'}\n   {h.url}")
            if h.snippet.strip():
                lines.append(f"   {_clip(h.snippet, n)}")
        if args.count != count:
            lines.append(f"\n(count {args.count} was clamped to {count})")
        lines.append("\nFollow up with web_fetch on a URL to read the page.")
        return "\n".join(lines)


def tools() -> list[Tool]:
    return [WebFetch(), WebSearch()]
