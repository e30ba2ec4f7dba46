"""`nanohermes doctor` lists the same endpoint checks, each once and in the same order, however
the endpoint fails: down, the key refused on either route, a 404, 500, redirect, web page or
odd JSON on `/models`, any failure of the chat probe. A check that cannot run is `[skip]`
with the reason, never missing. Each case against the real CLI and a loopback server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Fault, Raw, Reply, call, tool_reply

ENDPOINT = ["endpoint", "model", "api key", "chat", "tool calls"]
PAGE = b"<!DOCTYPE html><html><head><title>Welcome</title></head><body>a web page</body></html>"
PROBE_OK = tool_reply(call("probe", {"ok": True}))


def check_lines(out: str) -> list[tuple[str, str, str]]:
    """(mark, name, detail) of each check line, in order."""
    rows = []
    for line in out.splitlines():
        if line.startswith("[") and "] " in line:
            mark, rest = line.split("]", 1)
            name, _, detail = rest.strip().partition(": ")
            rows.append((mark.strip("[ ").lower(), name, detail))
    return rows


def endpoint_lines(out: str) -> dict[str, tuple[str, str]]:
    rows = [r for r in check_lines(out) if r[1] in ENDPOINT]
    assert [r[1] for r in rows] == ENDPOINT, out  # every endpoint check, once each, in order
    return {name: (mark, detail) for mark, name, detail in rows}


def counted(out: str) -> int:
    """The total on doctor's last line ("13 checks: ..."), which must match the lines shown."""
    total = int(out.strip().splitlines()[-1].split()[0])
    assert total == len(check_lines(out)), out
    return total


_HEALTHY: list[int] = []


def healthy_count(turn: Any) -> int:
    """How many checks a healthy set-up lists here (the same config: no MCP servers, no hooks)."""
    if not _HEALTHY:
        with FakeServer([PROBE_OK]) as s:
            r = turn("doctor", "--base-url", s.base_url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
        assert r.code == 0, r.out
        _HEALTHY.append(counted(r.out))
    return _HEALTHY[0]


def doctor(turn: Any, server: FakeServer | None, *, key: str = "k", url: str | None = None) -> Any:
    base = url or (server.base_url if server else "")
    r = turn("doctor", "--base-url", base, "--model", "fake-model", env={"OPENAI_API_KEY": key})
    print(r.out)
    return r


# What /v1/models answers -> (the endpoint line, the reason the model line is skipped).
MODELS_FAILURES: dict[str, tuple[Raw | Fault, str, str]] = {
    "404": (Fault(status=404, message="no such route"), "warn", "listing models gave 404"),
    "500": (Fault(status=500, message="boom"), "warn", "listing models gave 500"),
    "503_page": (Raw(body=PAGE, status=503, content_type="text/html"), "warn", "listing models gave 503"),
    "html_200": (Raw(body=PAGE, content_type="text/html"), "warn", "the model list is an HTML page"),
    "json_labelled_page": (Raw(body=PAGE, content_type="application/json"), "warn", "the model list is an HTML page"),
    "not_json": (Raw(body=b"models: fake-model", content_type="text/plain"), "warn", "the model list is not JSON"),
    "ollama_tags_shape": (Raw(body=json.dumps({"models": [{"name": "fake-model"}]}).encode(),
                              content_type="application/json"), "warn", 'the model list has no "data" list'),
    "list_body": (Raw(body=json.dumps([{"id": "fake-model"}]).encode(), content_type="application/json"), "warn",
                  'the model list has no "data" list'),
    "redirect": (Raw(body=b"", status=302, content_type="text/html",
                     headers=(("Location", "https://login.example/sso"),)), "warn", "listing models was redirected (302)"),
}


@pytest.mark.parametrize("case", list(MODELS_FAILURES))
def test_a_models_route_that_lists_nothing_skips_the_model_check(turn, case: str) -> None:
    answer, mark, why = MODELS_FAILURES[case]
    with FakeServer([PROBE_OK], models_answer=answer) as s:
        r = doctor(turn, s)
    lines = endpoint_lines(r.out)
    assert lines["endpoint"][0] == mark
    assert lines["model"] == ("skip", f"skipped: {why}")
    # The chat probe does not need the list: it still runs, and passes.
    assert lines["api key"] == ("ok", "accepted by chat")
    assert lines["chat"][0] == "ok" and lines["tool calls"][0] == "ok"
    assert counted(r.out) == healthy_count(turn)
    assert r.code == 0
    assert "1 skipped" in r.out


def test_a_redirected_model_list_names_where_it_points(turn) -> None:
    answer = Raw(body=b"", status=302, content_type="text/html", headers=(("Location", "https://login.example/sso"),))
    with FakeServer([PROBE_OK], models_answer=answer) as s:
        r = doctor(turn, s)
        url = s.base_url
    [warned] = [line for line in r.out.splitlines() if line.startswith(f"[warn] endpoint: {url} ")]
    assert "(302) to https://login.example/sso" in warned and "fix: set base_url " in r.out, warned


@pytest.mark.parametrize("case", ["404", "500", "html_200"])
def test_both_routes_failing_still_lists_every_check(turn, case: str) -> None:
    answer, _, why = MODELS_FAILURES[case]
    probe = Raw(body=PAGE, content_type="text/html") if case == "html_200" else answer
    with FakeServer([probe], models_answer=answer) as s:
        r = doctor(turn, s)
    lines = endpoint_lines(r.out)
    assert lines["model"] == ("skip", f"skipped: {why}")
    assert lines["api key"][0] == "skip" and "chat probe failed" in lines["api key"][1]
    assert lines["chat"][0] == "fail" and lines["chat"][1].startswith("the probe request failed: ")
    assert lines["tool calls"] == ("skip", "skipped: chat failed")
    assert counted(r.out) == healthy_count(turn)
    assert r.code == 1


# What the chat probe gets (with /models healthy) -> (api key line, chat line's mark).
PROBE_FAILURES: dict[str, tuple[Raw | Fault | Reply, tuple[str, str], str]] = {
    "401": (Fault(status=401, message="Invalid API key for chat", code="invalid_api_key"),
            ("fail", "chat refused it: the model endpoint refused the API key (401: Invalid API key for chat)"), "skip"),
    "403": (Fault(status=403, message="no chat for this key"),
            ("fail", "chat refused it: the model endpoint refused the API key (403: no chat for this key)"), "skip"),
    "404": (Fault(status=404, message="no such route"),
            ("skip", "skipped: the chat probe failed before the key could be judged"), "fail"),
    "500": (Fault(status=500, message="boom"),
            ("skip", "skipped: the chat probe failed before the key could be judged"), "fail"),
    "html_200": (Raw(body=PAGE, content_type="text/html"),
                 ("skip", "skipped: the chat probe failed before the key could be judged"), "fail"),
    "html_502": (Raw(body=PAGE, status=502, content_type="text/html"),
                 ("skip", "skipped: the chat probe failed before the key could be judged"), "fail"),
    "text_answer": (Reply(text="I would call probe"), ("ok", "accepted by chat"), "ok"),
}


@pytest.mark.parametrize("case", list(PROBE_FAILURES))
def test_each_failure_of_the_chat_probe_lists_every_check(turn, case: str) -> None:
    answer, key_line, chat_mark = PROBE_FAILURES[case]
    with FakeServer([answer]) as s:
        r = doctor(turn, s)
    lines = endpoint_lines(r.out)
    assert lines["endpoint"][0] == "ok" and lines["model"] == ("ok", "fake-model is listed")
    assert lines["api key"] == key_line
    assert lines["chat"][0] == chat_mark
    if chat_mark == "skip":
        assert lines["chat"] == lines["tool calls"] == ("skip", "skipped: chat refused the key")
    elif chat_mark == "fail":
        assert lines["tool calls"] == ("skip", "skipped: chat failed")
    else:
        assert lines["tool calls"][0] == "fail"
    assert counted(r.out) == healthy_count(turn)
    assert r.code == 1


def test_a_key_refused_on_models_skips_the_rest(turn) -> None:
    with FakeServer(api_key="right") as s:
        r = doctor(turn, s, key="wrong")
        url = s.base_url
    lines = endpoint_lines(r.out)
    assert lines["endpoint"] == ("ok", f"{url} answers")
    assert lines["api key"] == ("fail", "refused (401)")
    for name in ("model", "chat", "tool calls"):
        assert lines[name] == ("skip", "skipped: the key was refused")
    assert counted(r.out) == healthy_count(turn)


@pytest.mark.parametrize("route", ["models", "chat"])
def test_without_a_key_a_refusal_is_one_key_line(turn, route: str) -> None:
    # The missing key and its refusal are one finding, not two lines of the same check.
    if route == "models":
        server = FakeServer(api_key="right")
    else:
        server = FakeServer([Fault(status=401, message="You didn't provide an API key.")])
    with server as s:
        r = doctor(turn, s, key="")
    lines = endpoint_lines(r.out)
    mark, detail = lines["api key"]
    assert mark == "fail"
    assert detail.endswith(" ($OPENAI_API_KEY is empty, no api_key in config)"), detail
    assert detail.startswith("refused (401)" if route == "models" else "chat refused it: ")
    assert counted(r.out) == healthy_count(turn)


def test_without_a_key_a_healthy_endpoint_keeps_the_warning_in_its_place(turn) -> None:
    with FakeServer([PROBE_OK]) as s:
        r = doctor(turn, s, key="")
    lines = endpoint_lines(r.out)
    assert lines["api key"][0] == "warn" and "$OPENAI_API_KEY" in lines["api key"][1]
    assert counted(r.out) == healthy_count(turn)
    assert r.code == 0


@pytest.mark.parametrize("key", ["k", ""])
def test_an_endpoint_that_is_down_lists_every_check(turn, key: str) -> None:
    r = doctor(turn, None, key=key, url="http://127.0.0.1:9/v1")
    lines = endpoint_lines(r.out)
    assert lines["endpoint"][0] == "fail"
    for name in ("model", "chat", "tool calls"):
        assert lines[name] == ("skip", "skipped: the endpoint is not reachable")
    assert lines["api key"][0] == ("skip" if key else "warn")
    assert counted(r.out) == healthy_count(turn)


def test_a_config_that_does_not_load_skips_the_endpoint_checks(turn, workspace: Any) -> None:
    # Its endpoint, key and model are unknown: nothing is sent, not even to the default endpoint.
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text('{"max_turns": -1}')
    with FakeServer() as s:
        r = doctor(turn, s)
        assert s.requests == []
    lines = endpoint_lines(r.out)
    assert all(lines[name] == ("skip", "skipped: the config did not load") for name in ENDPOINT)
    assert "api.openai.com" not in r.out
    assert counted(r.out) == healthy_count(turn)
    assert r.code == 1
