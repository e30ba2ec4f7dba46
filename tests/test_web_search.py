"""web_search against local stand-ins speaking SearXNG's, Brave's and Tavily's real JSON formats."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localweb import LocalSite
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools.web import OTHER_PROVIDERS, WebSearch


def searxng_result(i: int, content: str = "") -> dict[str, Any]:
    """One result exactly as SearXNG's /search?format=json returns it."""
    url = f"https://example.org/page{i}"
    return {
        "url": url, "title": f"Result number {i}", "content": content or f"Snippet of result {i}.",
        "publishedDate": None, "thumbnail": "", "engine": "duckduckgo", "template": "default.html",
        "parsed_url": ["https", "example.org", f"/page{i}", "", "", ""], "img_src": "", "priority": "",
        "engines": ["duckduckgo", "brave"], "positions": [i, i + 1], "score": 2.0 / i, "category": "general",
    }


def searxng_answer(query: str, results: list[dict[str, Any]], unresponsive: list[list[str]] | None = None) -> dict[str, Any]:
    return {"query": query, "number_of_results": 0, "results": results, "answers": [], "corrections": [],
            "infoboxes": [], "suggestions": [f"{query} tutorial"], "unresponsive_engines": unresponsive or []}


@pytest.fixture
def site() -> Iterator[LocalSite]:
    with LocalSite() as s:
        yield s


def search(workspace: Path, args: dict[str, Any], config: Config, limits: Limits | None = None) -> str:
    rt = Runtime(tools=[WebSearch()], config=config, workspace=workspace, ui=RecordingUI(), policy=Policy(),
                 limits=limits or Limits())
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="s1", name="web_search", arguments=json.dumps(args))]))
    return msg.content or ""


def searxng(site: LocalSite) -> Config:
    return Config.from_dict({"web_search": {"provider": "searxng", "searxng_url": site.base + "/"}})


def hits(out: str) -> list[tuple[str, str, str]]:
    """The numbered results of a search's answer: (title, URL, snippet), in order."""
    lines = out.split("\n")
    found = []
    for i, line in enumerate(lines):
        number, dot, title = line.partition(". ")
        if dot and number.isdigit() and i + 2 < len(lines):
            assert number == str(len(found) + 1), out
            found.append((title, lines[i + 1].removeprefix("   "), lines[i + 2].removeprefix("   ")))
    return found


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_searxng_results_are_numbered_with_title_url_and_snippet(site: LocalSite, workspace: Path) -> None:
    site.json("/search", searxng_answer("asyncio", [searxng_result(i) for i in range(1, 13)]))
    out = search(workspace, {"query": "asyncio timeout"}, searxng(site))
    assert out.split("\n")[0] == 'Results for "asyncio timeout" (searxng):'
    assert hits(out) == [(f"Result number {i}", f"https://example.org/page{i}", f"Snippet of result {i}.")
                         for i in range(1, 6)]
    assert "web_fetch" in out.split("\n")[-1]
    req = site.requests[0]
    assert req["path"] == "/search?q=asyncio+timeout&format=json"


def test_snippet_limit_lowered(site: LocalSite, workspace: Path) -> None:
    site.json("/search", searxng_answer("q", [searxng_result(1, "word " * 40)]))
    out = search(workspace, {"query": "q", "count": 1}, searxng(site), Limits(web_search_snippet_chars=12))
    assert out.splitlines()[2:5] == ["1. Result numb…", "   https://example.org/page1", "   word word w…"]


@pytest.mark.parametrize("count,shown,note", [(50, 10, "(count 50 was clamped to 10)"), (0, 1, "(count 0 was clamped to 1)")])
def test_count_is_clamped_to_1_10(site: LocalSite, workspace: Path, count: int, shown: int, note: str) -> None:
    site.json("/search", searxng_answer("q", [searxng_result(i) for i in range(1, 13)]))
    out = search(workspace, {"query": "q", "count": count}, searxng(site))
    assert f"\n{shown}. Result number {shown}\n" in out and f"\n{shown + 1}. " not in out
    assert f"\n\n{note}\n\n" in out and len(hits(out)) == shown


def test_count_clamp_lowered_to_three(site: LocalSite, workspace: Path) -> None:
    site.json("/search", searxng_answer("q", [searxng_result(i) for i in range(1, 13)]))
    out = search(workspace, {"query": "q", "count": 5}, searxng(site), Limits(web_search_max_results=3))
    assert "\n3. Result number 3\n" in out and "\n4. " not in out
    assert out.endswith("\n\n(count 5 was clamped to 3)\n\nFollow up with web_fetch on a URL to read the page.")
    assert "`count` is 1..3." in WebSearch().spec(Limits(web_search_max_results=3))["function"]["description"]


def test_no_results(site: LocalSite, workspace: Path) -> None:
    site.json("/search", searxng_answer("zzz", []))
    out = search(workspace, {"query": "zzz"}, searxng(site))
    assert out.startswith('No results for "zzz" from searxng') and hits(out) == []


def test_searxng_engines_that_did_not_answer_are_named(site: LocalSite, workspace: Path) -> None:
    site.json("/search", searxng_answer("q", [], [["google", "timeout"], ["brave", "Suspended: too many requests"]]))
    out = search(workspace, {"query": "q"}, searxng(site))
    assert out.startswith("ERROR: web_search provider searxng ") and out.endswith(OTHER_PROVIDERS), out
    assert ": google (timeout), " in out and ", brave (Suspended: too many requests);" in out


def test_searxng_without_json_format_enabled(site: LocalSite, workspace: Path) -> None:
    site.static("/search", "<h1>403 Forbidden</h1>", "text/html", status=403)
    out = search(workspace, {"query": "q"}, searxng(site))
    assert out.startswith("ERROR: web_search provider searxng ") and f" {site.base}/search " in out, out
    assert "(403)" in out
    assert "search.formats" in out and out.endswith(OTHER_PROVIDERS)


def test_searxng_unreachable_names_provider_and_the_way_out(workspace: Path) -> None:
    port = closed_port()
    cfg = Config.from_dict({"web_search": {"provider": "searxng", "searxng_url": f"http://127.0.0.1:{port}"}})
    out = search(workspace, {"query": "q"}, cfg)
    assert out.startswith("ERROR: web_search provider searxng ") and out.endswith(OTHER_PROVIDERS), out
    assert f" http://127.0.0.1:{port}/search (ConnectError" in out


def test_searxng_needs_its_url(workspace: Path) -> None:
    cfg = Config.from_dict({"web_search": {"provider": "searxng"}})
    out = search(workspace, {"query": "q"}, cfg)
    assert out.startswith("ERROR: web_search provider searxng ") and " web_search.searxng_url " in out, out
    assert out.endswith(OTHER_PROVIDERS)


def test_brave_without_key(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    cfg = Config.from_dict({"web_search": {"provider": "brave"}})
    out = search(workspace, {"query": "q"}, cfg)
    assert out.startswith("ERROR: web_search provider brave ") and " $BRAVE_API_KEY;" in out, out
    assert out.endswith(OTHER_PROVIDERS)


def test_brave_with_key_against_a_stand_in(site: LocalSite, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_BRAVE", "bk-1")
    site.json("/res/v1/web/search", {"type": "search", "query": {"original": "rust"}, "web": {"type": "search", "results": [
        {"title": "The Rust Language", "url": "https://www.rust-lang.org/", "description": "A language empowering everyone.",
         "is_source_local": False, "language": "en", "profile": {"name": "Rust"}}]}})
    cfg = Config.from_dict({"web_search": {"provider": "brave", "brave_api_key_env": "MY_BRAVE",
                                                "brave_url": site.url("/res/v1/web/search")}})
    out = search(workspace, {"query": "rust", "count": 3}, cfg)
    assert out.startswith('Results for "rust" (brave):\n')
    assert hits(out) == [("The Rust Language", "https://www.rust-lang.org/", "A language empowering everyone.")]
    assert site.requests[0]["headers"]["X-Subscription-Token"] == "bk-1"
    assert site.requests[0]["path"] == "/res/v1/web/search?q=rust&count=3"


def test_brave_rejected_key(site: LocalSite, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", "wrong")
    site.static("/brave", json.dumps({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}),
                "application/json", status=401)
    cfg = Config.from_dict({"web_search": {"provider": "brave", "brave_url": site.url("/brave")}})
    out = search(workspace, {"query": "q"}, cfg)
    assert out.startswith("ERROR: web_search provider brave ") and " $BRAVE_API_KEY (401: " in out, out


def test_tavily_without_key(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    cfg = Config.from_dict({"web_search": {"provider": "tavily"}})
    out = search(workspace, {"query": "q"}, cfg)
    assert out.startswith("ERROR: web_search provider tavily ") and " $TAVILY_API_KEY;" in out, out
    assert out.endswith(OTHER_PROVIDERS)


def test_tavily_with_key_against_a_stand_in(site: LocalSite, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-1")
    site.json("/search", {"query": "uv", "answer": None, "images": [], "response_time": 0.5, "results": [
        {"title": "uv docs", "url": "https://docs.astral.sh/uv/", "content": "An extremely fast package manager.",
         "score": 0.9, "raw_content": None}]}, method="POST")
    cfg = Config.from_dict({"web_search": {"provider": "tavily", "tavily_url": site.url("/search")}})
    out = search(workspace, {"query": "uv"}, cfg)
    assert out.startswith('Results for "uv" (tavily):\n')
    assert hits(out) == [("uv docs", "https://docs.astral.sh/uv/", "An extremely fast package manager.")]
    req = site.requests[0]
    assert req["headers"]["Authorization"] == "Bearer tvly-1"
    assert json.loads(req["body"]) == {"query": "uv", "max_results": 5}


def test_duckduckgo_unreachable_names_provider_and_the_way_out(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The keyless default goes through ddgs; its proxy setting points it at a closed local
    # port, so the request fails here without ever leaving the machine.
    monkeypatch.setenv("DDGS_PROXY", f"http://127.0.0.1:{closed_port()}")
    out = search(workspace, {"query": "python asyncio"}, Config())
    assert out.startswith("ERROR: web_search provider duckduckgo ") and out.endswith(OTHER_PROVIDERS), out


def test_empty_query_fails_before_any_io(workspace: Path) -> None:
    out = search(workspace, {"query": " "}, Config())
    assert out.startswith("ERROR: web_search: query ") and "empty" in out, out


def test_description_points_to_web_fetch() -> None:
    assert "follow up with web_fetch" in WebSearch.description.lower()


def test_provider_from_config_through_the_cli(turn, server: FakeServer, site: LocalSite) -> None:
    site.json("/search", searxng_answer("pytest fixtures", [searxng_result(1)]))
    server.add(tool_reply(call("web_search", {"query": "pytest fixtures", "count": 1}, id="w")), Reply(text="found"))
    r = turn("-p", "search", server=server,
            config={"web_search": {"provider": "searxng", "searxng_url": site.base}})
    assert r.code == 0, r.err
    tool_msg = server.requests[1]["messages"][-1]
    assert tool_msg["tool_call_id"] == "w"
    assert tool_msg["content"].startswith('Results for "pytest fixtures" (searxng):\n')
    assert [title for title, _, _ in hits(tool_msg["content"])] == ["Result number 1"]


def test_search_timeout_lowered(workspace: Path, site: LocalSite) -> None:
    @site.route("/search")
    def slow(h: Any) -> None:
        h.server.site.stopping.wait(10)

    out = search(workspace, {"query": "slow"}, searxng(site), Limits(web_search_timeout_secs=0.3))
    assert out.startswith(f"ERROR: web_search provider searxng timed out after 0.3 s at {site.base}/search")
