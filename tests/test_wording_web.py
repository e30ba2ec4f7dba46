"""What web_fetch and web_search say, each message once, against a real HTTP server on 127.0.0.1.
The other tests assert decisions and state; rewording a message changes one row here (see
tests/wording_support.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from exec_support import call, make_runtime
from localweb import LocalSite
from wording_support import said

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools

# -- web_fetch ----------------------------------------------------------------------------------

@pytest.fixture
def site() -> Iterator[LocalSite]:
    s = LocalSite()
    s.static("/image.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png")
    s.static("/bad.json", '{"open": ', "application/json")
    s.routes[("GET", "/boom")] = lambda h: h.send(500, b"it broke", "text/plain")
    s.routes[("GET", "/private")] = lambda h: h.send(403, b"no", "text/plain")
    s.routes[("GET", "/to-ftp")] = lambda h: h.send(301, b"", "text/plain", {"Location": "ftp://127.0.0.1/x"})
    s.routes[("GET", "/away")] = lambda h: h.send(302, b"", "text/plain", {"Location": "http://denied.invalid:1/x"})
    for i in range(1, 3):
        s.routes[("GET", f"/r/{i}")] = (lambda n: lambda h: h.send(
            302, b"", "text/plain", {"Location": f"/r/{n - 1}" if n > 1 else "/image.png"}))(i)
    with s:
        yield s


WEB_FETCH: list[tuple[str, str, dict[str, object], str]] = [
    ("not-found", "/nowhere", {}, "ERROR: HTTP 404 Not Found from {base}/nowhere; check the URL\n"
                                  "# Not Found Nothing lives at /nowhere."),
    ("server-error", "/boom", {}, "ERROR: HTTP 500 Internal Server Error from {base}/boom; the server failed; try "
                                  "again later\nit broke"),
    ("forbidden", "/private", {}, "ERROR: HTTP 403 Forbidden from {base}/private; the page needs authorization "
                                  "nanohermes does not have\nno"),
    ("binary", "/image.png", {}, "ERROR: {base}/image.png is binary content (image/png, 108 bytes (Content-Length)); "
                                 "web_fetch returns only text, HTML and JSON"),
    ("invalid-json", "/bad.json", {}, "URL: {base}/bad.json (200, application/json)\n\n{{\"open\": \n\n"
                                      "[not valid JSON ({any}); shown as sent]"),
    ("too-many-redirects", "/r/2", {"max_redirects": 1},
     "ERROR: too many redirects (more than 1) from {base}/r/2; the last one pointed to {base}/image.png: fetch that "
     "URL directly if it is right"),
    ("redirect-elsewhere", "/to-ftp", {}, "ERROR: {base}/to-ftp redirects to an unusable location: url must use http "
                                          "or https, not ftp: (got 'ftp://127.0.0.1/x')"),
    ("denied-host", "/away", {"denied_hosts": ["denied.invalid"]},
     "ERROR: host denied.invalid is denied by config web_fetch.denied_hosts (denied.invalid); fetch another site "
     "(reached by a redirect from {base}/away)"),
    ("not-allowed-host", "/image.png", {"allowed_hosts": ["docs.python.org"]},
     "ERROR: host 127.0.0.1 is not in config web_fetch.allowed_hosts (docs.python.org); fetch one of those or ask "
     "the user to allow it"),
    ("tls-to-plain-http", "https:/image.png", {},
     "ERROR: TLS with 127.0.0.1 failed ({any}); the site does not serve https there or its certificate is not "
     "trusted: check the URL"),
    ("no-such-host", "http://no-such-host.invalid/page", {},
     "ERROR: cannot resolve host no-such-host.invalid (DNS lookup failed: {any}); check the URL's spelling"),
    ("no-scheme", "example.com/page", {}, "ERROR: web_fetch: url must start with http:// or https:// (got "
                                          "'example.com/page'); try https://example.com/page"),
    ("other-scheme", "file:///etc/passwd", {}, "ERROR: web_fetch: url must use http or https, not file: (got "
                                               "'file:///etc/passwd')"),
    ("no-host", "http://", {}, "ERROR: web_fetch: url has no host (got 'http://'); pass a full URL such as "
                               "https://example.com/page"),
    ("empty-url", "  ", {}, "ERROR: web_fetch: url must not be empty; pass a full http:// or https:// URL"),
]


@pytest.mark.parametrize("url,web_fetch,text", [r[1:] for r in WEB_FETCH], ids=[r[0] for r in WEB_FETCH])
def test_web_fetch_says(site: LocalSite, workspace: Path, url: str, web_fetch: dict[str, object], text: str) -> None:
    if url.startswith("/"):
        url = site.url(url)
    elif url.startswith("https:/"):
        url = site.url(url.removeprefix("https:")).replace("http://", "https://")
    config = {k: v for k, v in web_fetch.items() if k != "max_redirects"}
    limits = Limits(web_fetch_max_redirects=int(str(web_fetch.get("max_redirects", Limits().web_fetch_max_redirects))))
    rt = Runtime(tools=build_tools(), config=Config.from_dict({"web_fetch": config}), workspace=workspace,
                 ui=RecordingUI(), policy=Policy(allow=(Rule("web_fetch"),)), limits=limits)
    out = call(rt, "web_fetch", url=url)
    assert said(out, text, base=site.base), out


# -- web_search ---------------------------------------------------------------------------------

def closed_port() -> int:
    """A port nothing listens on: free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def searched(site: LocalSite, ws: Path, config: dict[str, object], query: str = "q") -> str:
    rt = Runtime(tools=build_tools(), config=Config.from_dict({"web_search": config}), workspace=ws, ui=RecordingUI(),
                 policy=Policy(mode="goal"), limits=Limits())
    return call(rt, "web_search", query=query)


def searxng_answers(site: LocalSite, results: list[dict[str, str]], unresponsive: list[list[str]]) -> dict[str, object]:
    site.json("/search", {"query": "q", "results": results, "unresponsive_engines": unresponsive})
    return {"provider": "searxng", "searxng_url": site.base}


OTHERS = ("try again later, or set another provider in config web_search.provider: duckduckgo (no key), searxng "
          "(with web_search.searxng_url), brave (BRAVE_API_KEY) or tavily (TAVILY_API_KEY)")
WEB_SEARCH: list[tuple[str, Callable[[LocalSite], dict[str, object]], str]] = [
    ("results", lambda s: searxng_answers(s, [{"title": "One", "url": "https://example.org/1", "content": "First."},
                                              {"title": "Two", "url": "https://example.org/2", "content": "Second."}], []),
     'Results for "q" (searxng):\n\n1. One\n   https://example.org/1\n   First.\n\n2. Two\n   https://example.org/2\n'
     "   Second.\n\nFollow up with web_fetch on a URL to read the page."),
    ("no-results", lambda s: searxng_answers(s, [], []), 'No results for "q" from searxng; try other words.'),
    ("engines-did-not-answer", lambda s: searxng_answers(s, [], [["google", "timeout"]]),
     "ERROR: web_search provider searxng found nothing because its engines did not answer: google (timeout); "
     + OTHERS),
    ("no-json", lambda s: s.static("/search", "no", "text/html", status=403) or {
        "provider": "searxng", "searxng_url": s.base},
     "ERROR: web_search provider searxng at {base}/search refused the JSON format (403); add json to search.formats "
     f"in the instance's settings.yml; {OTHERS}"),
    ("searxng-needs-its-url", lambda s: {"provider": "searxng"},
     "ERROR: web_search provider searxng needs web_search.searxng_url (e.g. http://localhost:8888); set it, or "
     + OTHERS.removeprefix("try again later, or ")),
    ("brave-needs-a-key", lambda s: {"provider": "brave", "brave_api_key_env": "NANOHERMES_NO_SUCH_KEY"},
     "ERROR: web_search provider brave needs an API key in $NANOHERMES_NO_SUCH_KEY; export it, or "
     + OTHERS.removeprefix("try again later, or ")),
    ("tavily-needs-a-key", lambda s: {"provider": "tavily", "tavily_api_key_env": "NANOHERMES_NO_SUCH_KEY"},
     "ERROR: web_search provider tavily needs an API key in $NANOHERMES_NO_SUCH_KEY; export it, or "
     + OTHERS.removeprefix("try again later, or ")),
    ("brave-rejects-the-key", lambda s: s.static("/brave", "{}", "application/json", status=401) or {
        "provider": "brave", "brave_api_key_env": "HOME", "brave_url": s.url("/brave")},
     "ERROR: web_search provider brave rejected the key in $HOME (401: {{}}); " + OTHERS),
    ("unreachable", lambda s: {"provider": "searxng", "searxng_url": f"http://127.0.0.1:{closed_port()}"},
     "ERROR: web_search provider searxng is unreachable at {searxng_url}/search (ConnectError: {any}); " + OTHERS),
]


@pytest.mark.parametrize("configure,text", [r[1:] for r in WEB_SEARCH], ids=[r[0] for r in WEB_SEARCH])
def test_web_search_says(site: LocalSite, workspace: Path, configure: Callable[[LocalSite], dict[str, object]],
                         text: str) -> None:
    config = configure(site)
    out = searched(site, workspace, config)
    assert said(out, text, base=site.base, **{k: str(v) for k, v in config.items()}), out


def test_an_empty_search_says_what_to_send(workspace: Path) -> None:
    rt = make_runtime(workspace)
    assert call(rt, "web_search", query=" ") == "ERROR: web_search: query must not be empty; pass the words to search for"


def test_a_host_judged_by_rules_says(site: LocalSite, workspace: Path) -> None:
    target = site.url("/image.png").replace("127.0.0.1", "localhost")
    site.routes[("GET", "/hop")] = lambda h: h.send(302, b"", "text/plain", {"Location": target})

    def fetched(policy: Policy, config: dict[str, object] | None = None, url: str = site.url("/hop")) -> str:
        rt = Runtime(tools=build_tools(), config=Config.from_dict({"web_fetch": config or {}}), workspace=workspace,
                     ui=RecordingUI(), policy=policy, limits=Limits())
        return call(rt, "web_fetch", url=url)

    assert fetched(Policy(allow=(Rule("web_fetch", "domain:127.0.0.1"),))) == (
        f"ERROR: {site.url('/hop')} redirects to {target}, on host localhost, which this fetch may not reach: it needs "
        "approval (fetches from localhost, a host no rule allows yet); fetch that URL directly if it is needed")
    assert fetched(Policy(mode="goal", deny=(Rule("web_fetch", "domain:localhost"),))) == (
        f"ERROR: {site.url('/hop')} redirects to {target}, on host localhost, which this fetch may not reach: denied "
        "by rule web_fetch(domain:localhost); fetch that URL directly if it is needed")
    assert fetched(Policy(mode="goal"), {"denied_hosts": ["0x7f.0.0.1"]}, target) == (
        "ERROR: host localhost (it resolves to 127.0.0.1) is denied by config web_fetch.denied_hosts (0x7f.0.0.1); "
        "fetch another site")
