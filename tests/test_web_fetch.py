"""web_fetch against a real HTTP server on 127.0.0.1: every kind of page, every failure, exact notes."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localweb import LocalSite
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI, ToolProgress
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import Runtime
from nanohermes.tools.web import WebFetch

MiB = 1024 * 1024

PAGE = """<!doctype html>
<html><head><meta charset="iso-8859-1"><title>Caf\xe9   notes</title>
<style>body { color: red }</style><script>var secret = "script text";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About the navigation</a></nav>
<h1>Brewing</h1>
<p>A <a href="/beans">good bean</a> makes good coffee, caf\xe9 au lait included.</p>
<ul><li>grind</li><li>brew</li></ul>
<table><tr><th>step</th><th>minutes</th></tr><tr><td>bloom</td><td>1</td></tr></table>
</body></html>"""


@pytest.fixture
def site() -> Iterator[LocalSite]:
    s = LocalSite()
    s.static("/page.html", PAGE.encode("latin-1"), "text/html")
    s.static("/data.json", json.dumps({"name": "nanohermes", "tags": ["a", "b"], "n": 1}), "application/json")
    s.static("/notes.txt", "first line\nsecond line\n", "text/plain; charset=utf-8")
    s.static("/latin1.txt", "na\xefve r\xe9sum\xe9\n".encode("latin-1"), "text/plain; charset=iso-8859-1")
    s.static("/image.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 1000, "image/png")
    s.static("/blob", b"\x01\x02\x00\x03" * 100, "application/octet-stream")
    s.static("/empty", b"", "text/plain")
    s.static("/bad.json", '{"open": ', "application/json")
    for i in range(1, 8):
        s.static(f"/r/{i}", b"", None)
        s.routes[("GET", f"/r/{i}")] = (lambda n: lambda h: h.send(
            302, b"", "text/plain", {"Location": f"/r/{n - 1}" if n > 1 else "/notes.txt"}))(i)
    s.routes[("GET", "/to-ftp")] = lambda h: h.send(301, b"", "text/plain", {"Location": "ftp://127.0.0.1/x"})
    s.routes[("GET", "/boom")] = lambda h: h.send(500, b"database exploded while rendering the page", "text/plain")
    s.routes[("GET", "/private")] = lambda h: h.send(403, b"<h1>Forbidden</h1>", "text/html")

    @s.route("/big")
    def big(h: Any) -> None:  # 10 MB, chunked: only reading tells its size
        h.send_chunked(200, "text/plain", (b"x" * 65536 for _ in range(160)))

    @s.route("/slow")
    def slow(h: Any) -> None:
        h.server.site.stopping.wait(60)

    @s.route("/endless")
    def endless(h: Any) -> None:  # fast past any cap, then a trickle that never ends
        def chunks() -> Iterator[bytes]:
            yield b"y" * 4096
            while not h.server.site.stopping.wait(0.05):
                yield b"z" * 10
        h.send_chunked(200, "text/plain", chunks())

    with s:
        yield s


def parts(out: str) -> tuple[str, str]:
    """A page's header (URL, status, type, redirects, title) and what follows it."""
    head, _, body = out.partition("\n\n")
    return head, body


def fetch(workspace: Path, args: dict[str, Any] | str, *, limits: Limits | None = None,
          config: Config | None = None, ui: RecordingUI | None = None) -> str:
    """One web_fetch call through the real runtime, every host allowed by a rule (the
    question per host is tested on its own): what the model would see."""
    rt = Runtime(tools=[WebFetch()], config=config or Config(), workspace=workspace, ui=ui or RecordingUI(),
                 policy=Policy(allow=(Rule("web_fetch"),)), limits=limits or Limits())
    raw = args if isinstance(args, str) else json.dumps(args)
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c1", name="web_fetch", arguments=raw)]))
    return msg.content or ""


def test_html_becomes_markdown_with_header_title_and_charset(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/page.html")})
    head, body = out.split("\n\n", 1)
    assert head == f"URL: {site.url('/page.html')} (200, text/html)\nTitle: Café notes"
    assert "# Brewing" in body
    assert f"[good bean]({site.url('/beans')})" in body  # absolute: fetchable as it stands
    assert "café au lait" in body  # the document's own charset (iso-8859-1) was used
    assert "- grind" in body and "| bloom | 1 |" in body
    assert "script text" not in body and "color: red" not in body and "About the navigation" not in body


def test_json_is_pretty_printed(site: LocalSite, workspace: Path) -> None:
    head, body = parts(fetch(workspace, {"url": site.url("/data.json")}))
    assert head == f"URL: {site.url('/data.json')} (200, application/json)"
    assert body == json.dumps({"name": "nanohermes", "tags": ["a", "b"], "n": 1}, indent=2)


def test_invalid_json_is_shown_as_sent_with_a_note(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/bad.json")})
    assert out.startswith(f"URL: {site.url('/bad.json')} (200, application/json)\n\n{{\"open\": \n\n")
    assert out.endswith("; shown as sent]")


def test_plain_text_passes_through(site: LocalSite, workspace: Path) -> None:
    head, body = parts(fetch(workspace, {"url": site.url("/notes.txt")}))
    assert head == f"URL: {site.url('/notes.txt')} (200, text/plain)"
    assert body == "first line\nsecond line\n"


def test_charset_from_the_header(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/latin1.txt")})
    assert out.endswith("\n\nnaïve résumé\n")


def test_empty_body_says_so(site: LocalSite, workspace: Path) -> None:
    assert fetch(workspace, {"url": site.url("/empty")}).endswith("\n\n(empty page)")


def test_redirect_chain_reports_the_final_url(site: LocalSite, workspace: Path) -> None:
    head, body = parts(fetch(workspace, {"url": site.url("/r/3")}))
    final, came = head.split("\n")
    assert final.startswith(f"URL: {site.url('/notes.txt')} ") and body == "first line\nsecond line\n"
    assert came.startswith("Redirected from ") and came.endswith(f" {site.url('/r/3')} (3 redirects)")


def test_more_than_five_redirects_is_an_error(site: LocalSite, workspace: Path) -> None:
    assert fetch(workspace, {"url": site.url("/r/5")}).startswith(f"URL: {site.url('/notes.txt')}")
    out = fetch(workspace, {"url": site.url("/r/6")})
    assert out.startswith("ERROR: too many redirects (more than 5) ") and site.url("/notes.txt") in out, out


def test_redirect_limit_lowered(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/r/2")}, limits=Limits(web_fetch_max_redirects=1))
    assert out == (f"ERROR: too many redirects (more than 1) from {site.url('/r/2')}; the last one pointed to "
                   f"{site.url('/notes.txt')}: fetch that URL directly if it is right")


def test_redirect_to_another_scheme_is_refused(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/to-ftp")})
    assert out.startswith(f"ERROR: {site.url('/to-ftp')} redirects ") and "ftp:" in out, out


def test_ten_megabyte_body_keeps_two_mib_and_counts_what_was_read(site: LocalSite, workspace: Path) -> None:
    ui = RecordingUI()
    out = fetch(workspace, {"url": site.url("/big")}, ui=ui)
    lines = out.splitlines()
    assert lines[0] == f"URL: {site.url('/big')} (200, text/plain)"
    assert lines[-2] == f"[response truncated at {2 * MiB} bytes; {10 * MiB} bytes received in all]"
    body = out.split("\n\n")[1]
    assert set(body) == {"x"}
    assert lines[-1] == f"[showing the first {len(body)} of {2 * MiB} chars]"
    assert len(out) <= 20_000  # the tool fitted itself: the exit clamp had nothing to cut
    assert "output truncated" not in out
    assert any("MiB" in e.text for e in ui.of(ToolProgress))


def test_body_cap_lowered_to_three_bytes(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/notes.txt")}, limits=Limits(web_fetch_body_bytes=3))
    assert out == (f"URL: {site.url('/notes.txt')} (200, text/plain)\n\nfir\n\n"
                   "[response truncated at 3 bytes; 23 bytes received in all]")


def test_endless_body_stops_draining_at_the_deadline_and_keeps_the_page(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/endless")},
                limits=Limits(web_fetch_body_bytes=1000, web_fetch_timeout_secs=1.0))
    assert out.startswith(f"URL: {site.url('/endless')} (200, text/plain)\n\n" + "y" * 1000 + "\n\n")
    assert re.fullmatch(r"\[response truncated at 1000 bytes; stopped reading after \d+ bytes at the timeout\]",
                        out.splitlines()[-1])


def test_binary_is_refused_with_type_and_size(site: LocalSite, workspace: Path) -> None:
    out = fetch(workspace, {"url": site.url("/image.png")})
    assert out.startswith(f"ERROR: {site.url('/image.png')} ") and "(image/png, 1008 bytes (Content-Length))" in out
    out = fetch(workspace, {"url": site.url("/blob")})
    assert out.startswith(f"ERROR: {site.url('/blob')} ") and "(application/octet-stream, 400 bytes)" in out


def test_slow_response_times_out_with_the_limit_named(site: LocalSite, workspace: Path) -> None:
    started = time.monotonic()
    out = fetch(workspace, {"url": site.url("/slow")}, limits=Limits(web_fetch_timeout_secs=0.5))
    assert out == (f"ERROR: timed out after 0.5 s fetching {site.url('/slow')} (web_fetch_timeout_secs); "
                   "the server is slow or stuck: try again later or another URL")
    assert time.monotonic() - started < 30  # generous: only proves it did not wait the server's 60 s


def test_404_gives_status_and_excerpt(site: LocalSite, workspace: Path) -> None:
    status, excerpt = fetch(workspace, {"url": site.url("/nowhere")}).split("\n")
    assert status.startswith(f"ERROR: HTTP 404 Not Found from {site.url('/nowhere')};")
    assert excerpt == "# Not Found Nothing lives at /nowhere."


def test_500_gives_status_and_excerpt(site: LocalSite, workspace: Path) -> None:
    status, excerpt = fetch(workspace, {"url": site.url("/boom")}).split("\n")
    assert status.startswith(f"ERROR: HTTP 500 Internal Server Error from {site.url('/boom')};")
    assert excerpt == "database exploded while rendering the page"


def test_403_says_authorization(site: LocalSite, workspace: Path) -> None:
    status, excerpt = fetch(workspace, {"url": site.url("/private")}).split("\n")
    assert status.startswith(f"ERROR: HTTP 403 Forbidden from {site.url('/private')};") and "authorization" in status
    assert excerpt == "# Forbidden"


def test_refused_connection(workspace: Path) -> None:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = fetch(workspace, {"url": f"http://127.0.0.1:{port}/x"})
    assert out.startswith(f"ERROR: cannot connect to 127.0.0.1:{port} "), out


def test_dns_failure(workspace: Path) -> None:
    # .invalid never resolves (RFC 6761), so no request can leave the machine.
    out = fetch(workspace, {"url": "http://no-such-host.invalid/page"})
    assert out.startswith("ERROR: cannot resolve host no-such-host.invalid "), out


@pytest.mark.parametrize("url,named", [
    ("example.com/page", "https://example.com/page"),  # what to try instead
    ("ftp://example.com/f", "'ftp://example.com/f'"),
    ("file:///etc/passwd", "'file:///etc/passwd'"),
    ("http://", "'http://'"),
    ("  ", "empty"),
])
def test_bad_urls_fail_before_any_io(site: LocalSite, workspace: Path, url: str, named: str) -> None:
    out = fetch(workspace, {"url": url})
    assert out.startswith("ERROR: web_fetch: url ") and named in out, out
    assert site.requests == []


def test_max_chars_is_clamped_to_500_and_says_how_to_see_more(site: LocalSite, workspace: Path) -> None:
    site.static("/long.txt", "a" * 3000, "text/plain")
    out = fetch(workspace, {"url": site.url("/long.txt"), "max_chars": 10})
    assert out == (f"URL: {site.url('/long.txt')} (200, text/plain)\n\n" + "a" * 500 + "\n\n"
                   "[showing the first 500 of 3000 chars; pass a larger max_chars (up to 20000) to see more]")


def test_max_chars_above_the_exit_budget_is_clamped_to_it(site: LocalSite, workspace: Path) -> None:
    site.static("/long.txt", "b" * 5000, "text/plain")
    out = fetch(workspace, {"url": site.url("/long.txt"), "max_chars": 200_000}, limits=Limits(max_output=1000))
    assert len(out) <= 1000 and "output truncated" not in out
    assert out.endswith(f"\n\n[showing the first {out.count('b')} of 5000 chars]")


def test_denied_and_allowed_hosts(site: LocalSite, workspace: Path) -> None:
    denied = Config.from_dict({"web_fetch": {"denied_hosts": ["127.0.0.1"]}})
    out = fetch(workspace, {"url": site.url("/notes.txt")}, config=denied)
    assert out.startswith("ERROR: host 127.0.0.1 ") and "web_fetch.denied_hosts (127.0.0.1)" in out, out
    assert site.requests == []  # refused before any I/O
    only = Config.from_dict({"web_fetch": {"allowed_hosts": ["docs.python.org"]}})
    out = fetch(workspace, {"url": site.url("/notes.txt")}, config=only)
    assert out.startswith("ERROR: host 127.0.0.1 ") and "web_fetch.allowed_hosts (docs.python.org)" in out, out
    assert site.requests == []


def test_a_redirect_to_a_denied_host_is_refused(site: LocalSite, workspace: Path) -> None:
    site.routes[("GET", "/away")] = lambda h: h.send(302, b"", "text/plain", {"Location": "http://denied.invalid:1/x"})
    # Not `localhost`: a denied name denies the addresses it resolves to, the site's own too.
    cfg = Config.from_dict({"web_fetch": {"denied_hosts": ["denied.invalid"]}})
    out = fetch(workspace, {"url": site.url("/away")}, config=cfg)
    assert out.startswith("ERROR: host denied.invalid ") and "web_fetch.denied_hosts (denied.invalid)" in out, out
    assert out.endswith(f" {site.url('/away')})") and [r["path"] for r in site.requests] == ["/away"]


def test_flags_and_rule_subject() -> None:
    tool = WebFetch()
    args = tool.parse({"url": "https://Docs.Python.org/3/"})
    assert tool.read_only(args) and tool.concurrency_safe(args) and tool.approval_for(args) == "never"
    assert tool.rule_subject(args) == "docs.python.org"


def test_plan_mode_allows_it(site: LocalSite, workspace: Path) -> None:
    rt = Runtime(tools=[WebFetch()], config=Config(), workspace=workspace, ui=RecordingUI(),
                 policy=Policy(mode="plan"), limits=Limits())
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name="web_fetch", arguments=json.dumps({"url": site.url("/notes.txt")}))]))
    assert (msg.content or "").endswith("first line\nsecond line\n")


def test_https_to_a_plain_http_server_is_a_clear_error(site: LocalSite, workspace: Path) -> None:
    url = site.url("/notes.txt").replace("http://", "https://")
    out = fetch(workspace, {"url": url})
    assert out.startswith("ERROR: TLS with 127.0.0.1 failed "), out
