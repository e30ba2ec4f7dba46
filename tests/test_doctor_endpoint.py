"""`nanohermes doctor`'s endpoint checks: the key probed on chat itself, a real tool call in the
probe answer, dependent checks shown as skipped, base_url refused before any request, and a
TLS/plain-HTTP mix-up named. Each against a real loopback server."""

from __future__ import annotations

import re

import pytest

from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply


def doctor(turn, *args: str, **kw):  # type: ignore[no-untyped-def]
    r = turn("doctor", *args, **kw)
    print(r.out, r.err)
    return r


def checks(out: str) -> dict[str, tuple[str, str]]:
    """doctor's checks: name -> (status, detail), as its `[status] name: detail` lines say."""
    found = {}
    for line in out.splitlines():
        m = re.match(r"\[(ok|FAIL|skip|warn)\] +([^:]+): (.*)", line)
        if m:
            found[m[2]] = (m[1], m[3])
    return found


def test_a_key_models_accepts_but_chat_refuses_fails(turn, server: FakeServer) -> None:
    server.add(Fault(status=401, message="Invalid API key for chat", code="invalid_api_key"))
    r = doctor(turn, "--base-url", server.base_url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    assert r.code == 1
    assert "[ok]   api key" not in r.out
    found = checks(r.out)
    assert found["api key"][0] == "FAIL" and found["api key"][1].endswith(" (401: Invalid API key for chat)")
    assert found["chat"] == found["tool calls"] == ("skip", "skipped: chat refused the key")
    assert server.paths == ["/v1/chat/completions"]  # /models is not in paths: only POSTs are recorded


def test_an_endpoint_quoting_the_key_is_shown_redacted(cli, server: FakeServer) -> None:
    key = "sk-doctor-secret-0123456789"
    server.add(Fault(status=401, message=f"Incorrect API key provided: {key}", code="invalid_api_key"))
    r = doctor(cli, "--base-url", server.base_url, "--model", "fake-model", env={"OPENAI_API_KEY": key})
    assert r.code == 1
    status, detail = checks(r.out)["api key"]
    assert status == "FAIL" and detail.endswith(" (401: Incorrect API key provided: [REDACTED])"), detail
    assert key not in r.out + r.err


@pytest.mark.quirk("hint.llamacpp", "hint.vllm", "hint.ollama")
def test_a_text_answer_to_the_probe_fails_tool_calls_with_every_server_hint(turn, server: FakeServer) -> None:
    server.add(Reply(text="Sure! ok=true"))
    r = doctor(turn, "--base-url", server.base_url, "--model", "fake-model")
    assert r.code == 1
    found = checks(r.out)
    assert found["chat"][0] == "ok" and found["chat"][1].endswith(" (chat wire)")
    assert found["tool calls"][0] == "FAIL" and found["tool calls"][1].endswith(" ('Sure! ok=true')")
    assert "llama.cpp: " in r.out and " --jinja" in r.out
    assert "vllm: " in r.out and " --enable-auto-tool-choice --tool-call-parser" in r.out
    assert "ollama: use an Ollama model that supports tools" in r.out


@pytest.mark.quirk("hint.llamacpp", "hint.vllm", "hint.ollama")
@pytest.mark.parametrize(("owner", "hint", "not_hint"), [
    ("llamacpp", "fix: start llama-server with --jinja", "vLLM"),
    ("vllm", "fix: start vLLM with --enable-auto-tool-choice --tool-call-parser", "--jinja"),
    ("library", "fix: use an Ollama model that supports tools", "--jinja"),
])
def test_the_tool_call_hint_names_the_server_it_detects(turn, owner: str, hint: str, not_hint: str) -> None:
    with FakeServer(owned_by=owner) as s:
        s.add(Reply(text="I would call probe"))
        r = doctor(turn, "--base-url", s.base_url, "--model", "fake-model")
    assert r.code == 1
    assert hint in r.out and not_hint not in r.out.split("tool calls:")[1]


def test_a_call_of_another_tool_is_not_the_probe(turn, server: FakeServer) -> None:
    server.add(tool_reply(call("run_command", {"command": "true"})))
    r = doctor(turn, "--base-url", server.base_url, "--model", "fake-model")
    status, detail = checks(r.out)["tool calls"]
    assert status == "FAIL" and "'run_command'" in detail, detail


def test_endpoint_down_shows_the_dependent_checks_as_skipped(turn) -> None:
    r = doctor(turn, "--base-url", "http://127.0.0.1:9/v1", env={"OPENAI_API_KEY": "k"})
    assert r.code == 1
    found = checks(r.out)
    assert found["endpoint"][0] == "FAIL" and " http://127.0.0.1:9/v1" in found["endpoint"][1]
    assert {found[name] for name in ("api key", "model", "chat", "tool calls")} == {
        ("skip", "skipped: the endpoint is not reachable")}
    assert "4 skipped" in r.out
    assert "[ok]   git:" in r.out  # checks that do not need the endpoint still run


@pytest.mark.parametrize(("url", "why"), [
    ("127.0.0.1:8080/v1", "it has no http:// or https:// scheme"),
    ("localhost:11434/v1", "it has no http:// or https:// scheme"),
    ("htp://127.0.0.1:8080/v1", "its scheme 'htp' is not http or https"),
    ("http:///v1", "it names no host"),
])
def test_an_unusable_base_url_exits_2_before_any_request(turn, url: str, why: str) -> None:
    r = doctor(turn, "--base-url", url)
    assert r.code == 2
    status, detail = checks(r.out)["endpoint"]
    assert status == "FAIL" and f" {url!r} " in detail and detail.endswith(f": {why}"), detail
    assert "fix: set it like http://127.0.0.1:8080/v1" in r.out
    assert "checks:" not in r.out  # nothing else ran


def test_an_unusable_base_url_ends_a_p_run_with_exit_2(turn, server: FakeServer) -> None:
    r = turn("-p", "hi", "--base-url", "127.0.0.1:8080/v1")
    print(r.err)
    assert r.code == 2
    assert "base_url '127.0.0.1:8080/v1' " in r.err and ": it has no http:// or https:// scheme" in r.err
    assert "retrying" not in r.err


def test_https_against_a_plain_http_server_is_named(turn, server: FakeServer) -> None:
    url = server.base_url.replace("http://", "https://")
    r = doctor(turn, "--base-url", url)
    assert r.code == 1
    assert "try http:// instead of https://" in r.out
    assert f"fix: set base_url to {server.base_url} " in r.out
    r = turn("-p", "hi", "--base-url", url, "--model", "fake-model", config={"max_retries": 0})
    assert "try http:// instead of https://" in r.err


def test_plain_http_against_a_tls_server_is_named(turn, tls_port: int) -> None:
    r = doctor(turn, "--base-url", f"http://127.0.0.1:{tls_port}/v1")
    assert r.code == 1
    assert "[FAIL] endpoint: cannot reach" in r.out
    assert "use https:// instead of http://" in r.out
    assert f"fix: set base_url to https://127.0.0.1:{tls_port}/v1 " in r.out


def test_the_responses_wire_is_probed_on_its_own_route(turn, server: FakeServer) -> None:
    server.add(tool_reply(call("probe", {"ok": True})))
    r = doctor(turn, "--base-url", server.base_url, "--model", "fake-model", "--wire-api", "responses",
               env={"OPENAI_API_KEY": "k"})
    assert r.code == 0, r.out
    found = checks(r.out)
    assert found["chat"][0] == "ok" and found["chat"][1].endswith(" (responses wire)")
    assert found["tool calls"][0] == "ok"
    assert server.paths == ["/v1/responses"]


def checks_counted(out: str) -> int:
    """The total on doctor's last line ("13 checks: ...")."""
    return int(out.strip().splitlines()[-1].split()[0])


@pytest.mark.parametrize(("wire", "fault", "chat"), [
    ("chat", Fault(status=503, message="upstream is down"),
     "[FAIL] chat: the probe request failed: the model endpoint answered 503: upstream is down"),
    ("responses", Fault(status=404, message="no such route"),
     "[FAIL] chat: the probe request failed: the endpoint answered 404 for "),
])
def test_a_probe_failing_for_another_reason_lists_the_key_as_skipped(turn, server: FakeServer, wire: str, fault: Fault,
                                                                     chat: str) -> None:
    args = ("--base-url", server.base_url, "--model", "fake-model", "--wire-api", wire)
    server.add(tool_reply(call("probe", {"ok": True})))
    healthy = doctor(turn, *args, env={"OPENAI_API_KEY": "k"})
    assert healthy.code == 0, healthy.out
    server.add(fault)
    r = doctor(turn, *args, env={"OPENAI_API_KEY": "k"})
    assert r.code == 1
    lines = r.out.splitlines()
    key = lines.index("[skip] api key: skipped: the chat probe failed before the key could be judged")
    assert lines[key + 1].startswith(chat)
    assert "[skip] tool calls: skipped: chat failed" in lines
    assert checks_counted(r.out) == checks_counted(healthy.out)  # every check is listed, failed or not


def test_a_probe_refused_with_403_fails_the_key(turn, server: FakeServer) -> None:
    server.add(Fault(status=403, message="this key may not use chat"))
    r = doctor(turn, "--base-url", server.base_url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    assert r.code == 1
    found = checks(r.out)
    assert found["api key"][0] == "FAIL" and found["api key"][1].endswith(" (403: this key may not use chat)")
    assert found["chat"][0] == "skip"


def test_without_a_key_a_failed_probe_keeps_the_one_key_warning(turn, server: FakeServer) -> None:
    server.add(Fault(status=503, message="upstream is down"))
    r = doctor(turn, "--base-url", server.base_url, "--model", "fake-model", env={"OPENAI_API_KEY": ""})
    assert r.code == 1
    assert len([ln for ln in r.out.splitlines() if "api key:" in ln]) == 1  # one warning, not a second failure
    found = checks(r.out)
    assert found["api key"][0] == "warn" and "$OPENAI_API_KEY" in found["api key"][1]
    assert found["chat"][0] == "FAIL" and found["chat"][1].endswith(" 503: upstream is down")
