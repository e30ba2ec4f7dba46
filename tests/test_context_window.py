"""The context budget follows the model: its window read from each endpoint shape (a fake
server answering as OpenRouter, vLLM, llama.cpp, LM Studio and Ollama do), else the table of
known families, else the config; compaction at a share of it, in tokens when the endpoint
reports usage; the window and where it came from in `-p` json and /context; the override."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from nanohermes.assemble import build_agent
from nanohermes.common.budget import Limits
from nanohermes.turn.compact import SUMMARY_INSTRUCTIONS
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.turn.meters import format_context
from nanohermes.testing import FakeServer, Fault, Reply, ScriptedLLM, call, tool_reply
from nanohermes.ui.repl import toolbar
from nanohermes.llm.quirks import WindowField, entries
from nanohermes.turn.window import (
    CACHE_FILE, FAILED_SECS, PROVIDERS, READERS, Window, budget_for, cached, family_window, from_models_list, known_routes, recognised,
    said_nothing, store,
)

SHOW = {"parameters": "stop \"<|im_end|>\"\nnum_ctx 12288", "model_info": {"qwen2.context_length": 32768}}

SHAPES = {
    "openrouter": ({"model_fields": {"context_length": 1_048_576, "top_provider": {"context_length": 1_048_576}}},
                   1_048_576, "endpoint /models context_length"),
    "vllm": ({"owned_by": "vllm", "model_fields": {"max_model_len": 8192}}, 8192, "endpoint /models vLLM max_model_len"),
    "groq": ({"model_fields": {"context_window": 131_072}}, 131_072, "endpoint /models context_window"),
    "llamacpp-props": ({"owned_by": "llamacpp", "routes": {"/props": {"default_generation_settings": {"n_ctx": 4096},
                                                                      "total_slots": 1}}},
                       4096, "endpoint /props n_ctx (llama.cpp)"),
    "llamacpp-slots": ({"owned_by": "llamacpp", "routes": {"/slots": [{"id": 0, "n_ctx": 16384}]}},
                       16384, "endpoint /slots n_ctx (llama.cpp)"),
    "lmstudio-loaded": ({"owned_by": "organization_owner", "routes": {"/api/v0/models": {"data": [
        {"id": "fake-model", "max_context_length": 131072, "loaded_context_length": 16384, "state": "loaded"}]}}},
        16384, "endpoint /api/v0/models loaded_context_length (LM Studio)"),
    "lmstudio-not-loaded": ({"owned_by": "organization_owner", "routes": {"/api/v0/models": {"data": [
        {"id": "fake-model", "max_context_length": 32768, "state": "not-loaded"}]}}},
        32768, "endpoint /api/v0/models max_context_length (LM Studio)"),
    "ollama-ps": ({"owned_by": "library", "routes": {"/api/ps": {"models": [{"name": "fake-model", "context_length": 8192}]},
                                                     "/api/show": SHOW}},
                  8192, "endpoint /api/ps context_length (Ollama)"),
    "ollama-num-ctx": ({"owned_by": "library", "routes": {"/api/show": SHOW}}, 12288, "endpoint /api/show num_ctx (Ollama)"),
    "ollama-model-info": ({"owned_by": "library", "routes": {"/api/show": {"model_info": {"llama.context_length": 131072}}}},
                          131072, "endpoint /api/show llama.context_length (Ollama)"),
}


@pytest.mark.quirk("window.openrouter", "window.vllm", "window.groq", "window.llamacpp-props", "window.llamacpp-slots",
                   "window.lmstudio-loaded", "window.lmstudio-max", "window.ollama-ps", "window.ollama-num-ctx",
                   "window.ollama-model-info")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_window_is_read_from_each_endpoint_shape(turn, shape: str) -> None:
    options, tokens, source = SHAPES[shape]
    with FakeServer([Reply(text="hi")], **options) as server:
        r = turn("-p", "hello", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    window = r.json()["context"]["window"]
    assert (window["tokens"], window["source"]) == (tokens, source)
    assert window["compact_at_tokens"] == int(tokens * 0.8)
    assert r.json()["context"]["session_budget_chars"] == int(tokens * 0.8) * 4


@pytest.mark.parametrize("model,tokens,family", [
    ("gpt-4.1", 1_047_576, "gpt-4.1"), ("openai/gpt-4o-mini", 128_000, "gpt-4o"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", 262_144, "qwen3-coder"), ("qwen2.5-coder:7b", 32_768, "qwen2.5-coder"),
    ("deepseek-chat", 131_072, "deepseek-chat"), ("claude-sonnet-4", 200_000, "claude"),
])
def test_an_endpoint_that_says_nothing_gets_the_known_familys_window(turn, model: str, tokens: int, family: str) -> None:
    with FakeServer([Reply(text="hi")], models=(model,)) as server:
        r = turn("-p", "hello", "--output-format", "json", "--base-url", server.base_url, "--model", model,
                env={"OPENAI_API_KEY": "k"})
    assert r.code == 0, r.err
    window = r.json()["context"]["window"]
    assert (window["tokens"], window["source"]) == (tokens, f"known model family {family}")


def test_an_unknown_model_gets_the_configured_window(turn, server: FakeServer) -> None:
    server.add(Reply(text="hi"))
    window = turn("-p", "hello", "--output-format", "json", server=server,
                 config={"context_window_tokens": 20_000}).json()["context"]["window"]
    assert (window["tokens"], window["source"]) == (20_000, "config context_window_tokens")
    assert family_window("fake-model") is None


@pytest.mark.parametrize("answer", [
    {"models_answer": Fault(status=500, message="down")},
    {"model_fields": {"context_length": "lots"}},
    {"routes": {"/props": {"default_generation_settings": {"n_ctx": -1}}}},
], ids=["models-500", "not-a-number", "negative"])
def test_a_lookup_that_fails_never_fails_the_turn(turn, answer: dict[str, Any]) -> None:
    with FakeServer([Reply(text="fine")], **answer) as server:
        r = turn("-p", "hello", "--output-format", "json", server=server)
    assert r.code == 0 and r.json()["result"] == "fine", r.err
    assert r.json()["context"]["window"]["source"].startswith("default: neither the endpoint nor the table")


# -- compaction at a share of the window ----------------------------------------------------

def is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_INSTRUCTIONS


def test_compaction_starts_at_the_share_of_the_window_counted_in_reported_tokens(turn, workspace: Path) -> None:
    # vLLM says 10,000 tokens: compaction past 8,000. The endpoint counted 6,100 prompt tokens
    # at the second call, and its 12,000-char answer makes ~9,100: the third call is preceded by
    # a summary, though the history's 24,000 chars are under the 32,000 chars the window allows.
    script = [Reply(text="x" * 12_000, usage=(3000, 3000)), Reply(text="y" * 12_000, usage=(6100, 3000)),
              Reply(text="summary of it"), Reply(text="three", usage=(400, 10))]
    with FakeServer(script, model_fields={"max_model_len": 10_000}) as server:
        first = turn("-p", "first", "--output-format", "json", server=server).json()
        turn("--continue", "-p", "second", server=server)
        r = turn("--continue", "-p", "third", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    assert [is_summary(b) for b in server.requests] == [False, False, True, False]
    notices = [e["text"] for e in r.lines() if e.get("type") == "notice"]
    assert any("past 80% of the model's 10000-token window (endpoint /models vLLM max_model_len)" in n for n in notices)
    assert first["context"]["window"]["used_measured"] is True


def test_a_large_answer_is_a_small_share_of_a_large_window(turn) -> None:
    # 120 KB of history would have been "101%" of the old fixed budget: for a 1M-token model
    # it is about 3%, and nothing is compacted.
    big = "x" * 120_000
    script = [Reply(text=big, usage=(50, 30_000)), Reply(text="again", usage=(30_060, 2))]
    with FakeServer(script, model_fields={"context_length": 1_000_000}) as server:
        turn("-p", "write a lot", server=server)
        r = turn("--continue", "-p", "more", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert not any(is_summary(b) for b in server.requests)
    window = r.json()["context"]["window"]
    assert window["used_tokens"] == 30_060 + 2 and window["used_share"] == 0.0301


def test_without_reported_usage_the_chars_fallback_compacts(turn) -> None:
    # llama.cpp with 4096 tokens and no usage: compaction past 3276 tokens, in chars at 4 a token.
    script = [Reply(text="a" * 9000, usage=None), Reply(text="b" * 9000, usage=None), Reply(text="short summary", usage=None),
              Reply(text="ok", usage=None)]
    with FakeServer(script, owned_by="llamacpp", routes={"/props": {"default_generation_settings": {"n_ctx": 4096}}}) as s:
        turn("-p", "one", server=s)
        turn("--continue", "-p", "two", server=s)
        r = turn("--continue", "-p", "three", "--output-format", "stream-json", server=s)
    assert r.code == 0, r.err
    assert [is_summary(b) for b in s.requests] == [False, False, True, False]
    notices = [e["text"] for e in r.lines() if e.get("type") == "notice"]
    assert any(n.endswith("(history over the session budget of 13104 chars)") for n in notices), notices
    assert r.lines()[-1]["context"]["window"]["used_measured"] is False


def test_session_budget_chars_set_by_the_person_overrides_the_window(turn) -> None:
    script = [Reply(text="y" * 3000, usage=(10, 5)), Reply(text="summary"), Reply(text="ok")]
    with FakeServer(script, model_fields={"context_length": 1_000_000}) as server:
        turn("-p", "one", server=server, config={"session_budget_chars": 2000, "limits": {"compact_keep_chars": 100}})
        r = turn("--continue", "-p", "two", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert [is_summary(b) for b in server.requests] == [False, True, False]
    context = r.json()["context"]
    assert context["session_budget_chars"] == 2000
    assert context["window"]["session_budget_chars_override"] == 2000 and context["window"]["tokens"] == 1_000_000


# -- where it is shown --------------------------------------------------------------------

def report(**overrides: Any) -> dict[str, Any]:
    base = {"tokens": 1_047_576, "source": "known model family gpt-4.1", "compact_at_share": 0.8,
            "compact_at_tokens": 838_060, "session_budget_chars_override": None, "used_tokens": 31_427,
            "used_measured": True, "used_share": 0.03}
    return {**base, **overrides}


def test_the_toolbar_shows_the_share_of_the_window_and_its_source() -> None:
    from nanohermes.common.messages import Usage

    assert toolbar("gpt-4.1", "default", 120_000, 3_352_240, Usage(100, 20), None, report()) == (
        " gpt-4.1 · mode: default · context 3% of 1.0M window (family) · session 120 tokens")
    endpoint = report(tokens=8192, source="endpoint /props n_ctx (llama.cpp)", used_share=0.5)
    assert toolbar("q", "plan", 0, 26_212, Usage(), None, endpoint) == " q · mode: plan · context 50% of 8k window (endpoint)"
    # The person's own chars budget is shown in chars.
    assert toolbar("q", "plan", 1000, 2000, Usage(), None, report(session_budget_chars_override=2000)) == (
        " q · mode: plan · context 50% of 2k chars")


def test_context_names_the_window_its_source_and_where_compaction_starts() -> None:
    b = {"parts": {k: {"chars": 400, "tokens_est": 100} for k in ("system_prompt", "tool_specs", "history", "tool_results")},
         "total": {"chars": 1600, "tokens_est": 400}, "messages": 3, "session_budget_chars": 3_352_240,
         "history_used": 0.0, "window": report()}
    assert format_context(b).splitlines()[-3:] == [
        "context window 1,047,576 tokens (known model family gpt-4.1)",
        "in context now ~31,427 tokens, 3% of the window (the last request's prompt tokens as the endpoint counted "
        "them, plus the messages since at 4 chars a token): the toolbar's \"context 3%\"",
        "compacted past 80% of the window (838,060 tokens)"]
    assert not any(line.startswith("history is") for line in format_context(b).splitlines())  # one share, not two


# -- the lookup, the cache, the model switch ------------------------------------------------

def test_a_remote_endpoints_window_is_cached_per_base_url_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    url = "https://models.example.invalid/v1"
    store(url, "m1", Window(200_000, "endpoint /models context_length"))
    assert cached(url, "m1") == Window(200_000, "endpoint /models context_length (cached)")
    assert cached(url, "m2") is None and cached(url + "/", "m1") is not None
    assert cached(url, "m1", now=time.time() + 2 * 24 * 3600) is None  # a day old: asked again
    store(url, "m3", None)  # the endpoint named no window: not asked again within the day
    assert cached(url, "m3") is None and said_nothing(url, "m3") and not said_nothing(url, "m1")
    assert not said_nothing(url, "m3", now=time.time() + 2 * 24 * 3600)
    # A session on it starts with the cached window, before any request.
    budget = budget_for(Config(model="m1", base_url=url, api_key="k"), Limits())
    assert budget.window.source.endswith("(cached)") and budget.limits().session_budget_chars == 160_000 * 4
    # A local server's window too (asked afresh once a session, when it matters: below).
    store("http://127.0.0.1:8080/v1", "m1", Window(4096, "endpoint /props n_ctx (llama.cpp)"), ("/props", "/slots"))
    local = budget_for(Config(model="m1", base_url="http://127.0.0.1:8080/v1", api_key="k"), Limits())
    assert local.window == Window(4096, "endpoint /props n_ctx (llama.cpp) (cached)")
    assert known_routes("http://127.0.0.1:8080/v1") == ("/props", "/slots") and known_routes(url) is None
    assert known_routes("http://127.0.0.1:8080/v1", now=time.time() + 2 * 24 * 3600) is None
    assert json.loads((tmp_path / "nanohermes" / CACHE_FILE).read_text())


def test_a_small_history_never_waits_for_a_pending_lookup() -> None:
    async def go() -> None:
        never = asyncio.Event()

        async def lookup(model: str) -> Window | None:
            await never.wait()
            return None

        budget = budget_for(Config(model="fake-model", base_url="http://127.0.0.1:9/v1", api_key="k"), Limits())
        budget.lookup = lookup
        budget.start("fake-model")
        settle = budget.settle(500)
        with pytest.raises(StopIteration):
            settle.send(None)  # done without suspending once: nothing was awaited
        await budget.aclose()

    asyncio.run(go())


def test_switching_the_model_follows_the_new_models_window(workspace: Path) -> None:
    built = build_agent(Config(model="fake-model", base_url="http://127.0.0.1:9/v1", api_key="k"), workspace,
                        RecordingUI(), llm=ScriptedLLM(), save_session=False)
    agent = built.agent
    assert built.budget is not None and built.budget.window.tokens == 32_768
    agent.set_model("gpt-4o")
    assert (built.budget.window.tokens, built.budget.window.source) == (128_000, "known model family gpt-4o")
    assert agent.runtime.limits.session_budget_chars == 102_400 * 4  # the aggregate budget follows too
    assert agent.runtime.limits.aggregate_chars == 200_000


def test_a_models_list_entry_is_found_by_the_name_with_or_without_its_provider() -> None:
    listed = {"data": [{"id": "openai/gpt-4.1", "context_length": 1_047_576}, {"id": "qwen/qwq-32b", "context_length": 131_072}]}
    assert from_models_list(listed, "gpt-4.1") == Window(1_047_576, "endpoint /models context_length")
    assert from_models_list({"data": [{"id": "qwq-32b", "context_length": 131_072}, {"id": "x"}]}, "qwen/qwq-32b") == (
        Window(131_072, "endpoint /models context_length"))
    assert from_models_list(listed, "gpt-4o") is None  # two others listed: none of them is this one


# -- what a run asks the endpoint ------------------------------------------------------------

MODEL_CALL = "POST /v1/chat/completions"


@pytest.mark.parametrize("answer", [{}, {"models_answer": Fault(status=404, message="no such route")}],
                         ids=["models-list", "no-models-route"])
def test_a_p_run_asks_the_endpoint_only_what_the_turn_needs(turn, answer: dict[str, Any]) -> None:
    script = [Reply(text="one"), Reply(text="two"), tool_reply(call("list_dir", {})), Reply(text="three")]
    with FakeServer(script, **answer) as server:
        # The first run ever: its model call, and the one request that finds where (or
        # whether) this endpoint names windows, in the background.
        assert turn("-p", "hello", server=server).out == "one\n"
        assert sorted(server.asked) == sorted([MODEL_CALL, "GET /v1/models"])
        # Later runs: one request per model call, nothing else.
        for prompt, calls in (("again", 1), ("list the files", 2)):
            server.asked.clear()
            r = turn("-p", prompt, "--output-format", "json", server=server)
            assert r.code == 0, r.err
            assert server.asked == [MODEL_CALL] * calls
            window = r.json()["context"]["window"]
            assert window["tokens"] == 32768 and window["source"].startswith("default")
    assert server.violations == []


@pytest.mark.parametrize("status", [401, 429, 500, 503])
def test_an_endpoint_that_failed_to_answer_is_asked_again_only_after_an_hour(turn, home: Path, status: int) -> None:
    # A refused key, a rate limit or a failing server: asking again at every run would cost
    # each run a request (and a slow one its exit, which lets the lookup finish).
    with FakeServer(default=Reply(text="hi"), models_answer=Fault(status=status, message="busy")) as server:
        assert turn("-p", "hi", server=server).code == 0
        assert sorted(server.asked) == sorted([MODEL_CALL, "GET /v1/models"])
        for flags in ((), ("--output-format", "json"), ("--output-format", "stream-json")):
            server.asked.clear()
            assert turn("-p", "hi", *flags, server=server).code == 0
            assert server.asked == [MODEL_CALL]
        # An hour later it is asked again.
        cache = home / ".cache" / "nanohermes" / CACHE_FILE
        kept = json.loads(cache.read_text())
        cache.write_text(json.dumps({k: {**v, "at": v["at"] - FAILED_SECS - 1} for k, v in kept.items()}))
        server.asked.clear()
        assert turn("-p", "hi", server=server).code == 0
        assert sorted(server.asked) == sorted([MODEL_CALL, "GET /v1/models"])
    assert server.violations == []


# Where each provider's window is found: the routes the first run asks (after /models, which
# tells the server by its owners when it does not name the window itself).
ASKED = {
    "openrouter": [], "vllm": [], "groq": [], "llamacpp-props": ["GET /props"],
    "llamacpp-slots": ["GET /props", "GET /slots"], "lmstudio-loaded": ["GET /api/v0/models"],
    "lmstudio-not-loaded": ["GET /api/v0/models"], "ollama-ps": ["GET /api/ps"],
    "ollama-num-ctx": ["GET /api/ps", "POST /api/show"], "ollama-model-info": ["GET /api/ps", "POST /api/show"],
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_providers_window_is_found_in_the_background_then_remembered(turn, shape: str) -> None:
    options, tokens, source = SHAPES[shape]
    with FakeServer(default=Reply(text="hi"), **options) as server:
        r = turn("-p", "hello", "--output-format", "json", server=server)
        assert (r.json()["context"]["window"]["tokens"], r.json()["context"]["window"]["source"]) == (tokens, source)
        assert server.routes_asked == ["GET /v1/models", *ASKED[shape]]
        assert server.asked.count(MODEL_CALL) == 1
        server.asked.clear()
        r = turn("-p", "hello", "--output-format", "json", server=server)
        window = r.json()["context"]["window"]
        assert (window["tokens"], window["source"]) == (tokens, f"{source} (cached)")
        assert server.asked == [MODEL_CALL]
        # Another model on the same endpoint: only where this server names windows is asked.
        server.routes_asked.clear()
        r = turn("-p", "hello", "--base-url", server.base_url, "--model", "other-model", env={"OPENAI_API_KEY": "k"})
        assert r.code == 0, r.err
        where = ASKED[shape] or ["GET /v1/models"]
        assert server.routes_asked[:len(where)] == where


def test_a_local_servers_window_is_asked_afresh_once_a_session_when_it_starts_to_matter(turn) -> None:
    # llama.cpp with 4096 tokens: compaction past 3276, 13,104 chars of history; a window
    # remembered from an earlier session is asked afresh past half of that.
    props = {"default_generation_settings": {"n_ctx": 4096}}
    with FakeServer(default=Reply(text="a" * 7000, usage=None), owned_by="llamacpp", routes={"/props": props}) as server:
        assert turn("-p", "one", server=server).code == 0
        # The server restarts with a larger window: a small context does not ask.
        server.routes["/props"] = {"default_generation_settings": {"n_ctx": 8192}}
        server.asked.clear()
        r = turn("-p", "two", "--output-format", "json", server=server)
        assert server.asked == [MODEL_CALL]
        assert r.json()["context"]["window"]["tokens"] == 4096
        # Its 7,000-char answer makes the next session's history past half the budget.
        server.asked.clear()
        r = turn("--continue", "-p", "three", "--output-format", "json", server=server)
        assert server.asked == ["GET /props", MODEL_CALL]
        window = r.json()["context"]["window"]
        assert (window["tokens"], window["source"]) == (8192, "endpoint /props n_ctx (llama.cpp)")
    assert server.violations == []


def test_a_url_that_names_the_provider_spares_the_models_request(turn) -> None:
    # Through a proxy (the fake server), as the named hosts: a service whose /models names no
    # window is not asked at all; Ollama, told by its port, is asked its own route alone.
    ollama = {"/api/ps": {"models": [{"name": "fake-model", "context_length": 6144}]}}
    with FakeServer(default=Reply(text="hi"), routes=ollama) as server:
        proxy = {"HTTP_PROXY": server.base_url.rsplit("/v1", 1)[0], "NO_PROXY": "", "no_proxy": ""}
        proxy["http_proxy"] = proxy["HTTP_PROXY"]
        r = turn("-p", "hi", "--output-format", "json", "--base-url", "http://api.openai.com/v1", "--model", "gpt-4.1",
                 env={**proxy, "OPENAI_API_KEY": "k"})
        assert r.code == 0, r.err
        assert server.asked == [MODEL_CALL]
        assert r.json()["context"]["window"]["source"] == "known model family gpt-4.1"
        server.asked.clear()
        r = turn("-p", "hi", "--output-format", "json", "--base-url", "http://ollama.test:11434/v1", "--model",
                 "fake-model", env={**proxy, "OPENAI_API_KEY": "k"})
        assert r.code == 0, r.err
        assert sorted(server.asked) == sorted([MODEL_CALL, "GET /api/ps"])
        assert r.json()["context"]["window"]["tokens"] == 6144
    # A port is a guess: llama.cpp on Ollama's port is told by its /models answer, once.
    props = {"/props": {"default_generation_settings": {"n_ctx": 4096}}}
    with FakeServer(default=Reply(text="hi"), owned_by="llamacpp", routes=props) as server:
        proxy = {"HTTP_PROXY": server.base_url.rsplit("/v1", 1)[0], "NO_PROXY": "", "no_proxy": "",
                 "OPENAI_API_KEY": "k"}
        proxy["http_proxy"] = proxy["HTTP_PROXY"]
        url = "http://llama.test:11434/v1"
        r = turn("-p", "hi", "--output-format", "json", "--base-url", url, "--model", "fake-model", env=proxy)
        assert server.routes_asked == ["GET /api/ps", "POST /api/show", "GET /v1/models", "GET /props"]
        assert r.json()["context"]["window"]["tokens"] == 4096
        server.routes_asked.clear()
        r = turn("-p", "hi", "--output-format", "json", "--base-url", url, "--model", "other-model", env=proxy)
        assert server.routes_asked == ["GET /props"]  # the answer remembered, not the port's guess


def test_every_window_route_and_provider_of_the_quirk_table_is_known() -> None:
    assert {w.route for _, w in entries(WindowField)} == set(READERS)
    named = {p.name for p in PROVIDERS}
    assert {name for q, _ in entries(WindowField) for name in q.providers} <= named
    assert recognised("http://localhost:11434/v1").name == "Ollama"  # type: ignore[union-attr]
    assert recognised("https://openrouter.ai/api/v1").routes == ("/models",)  # type: ignore[union-attr]
    assert recognised("https://api.openai.com/v1").routes == ()  # type: ignore[union-attr]
    assert recognised("http://127.0.0.1:8080/v1") is None
