"""Each way a model endpoint fails is named for what happened, with its own hint: a stream
broken mid-answer, a server error, an overloaded server, a rate limit, a refused connection,
a server that says nothing in time, a refused key, a model the endpoint does not serve. Run
through `-p` against the loopback fake server (or a port nobody listens on), and at the
REPL's start, where an endpoint that cannot be reached is said before the first message."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from test_repl_pty import term  # noqa: F401  (the REPL-on-a-pty fixture)

from nanohermes.testing import FakeServer, Fault, Reply

LONG = "The quick brown fox jumps over the lazy dog, twice over."


@pytest.fixture
def closed_url() -> Iterator[str]:
    """The URL of a port bound by nobody's listener: a connection to it is refused (the port
    stays bound meanwhile, so no other test can take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


# case -> (script, config, the error's words, the hint's words)
CASES: dict[str, tuple[list[Any], dict[str, Any], str, str]] = {
    "stream broken mid-answer": (
        [Reply(text=LONG, drop_after=8)], {},
        "the model endpoint's answer broke off mid-stream",
        "hint: the server was reached, but its answer broke off (not retried: max_retries is 0); try again "
        "(in the REPL send `continue`; a script runs `nanohermes --continue -p continue`)"),
    "server error": (
        [Fault(status=500, message="CUDA error: an illegal memory access")], {},
        "the model endpoint answered 500: CUDA error: an illegal memory access",
        "hint: the model server failed while answering (not retried: max_retries is 0); its log says why"),
    "server overloaded": (
        [Fault(status=503, message="no capacity")], {},
        "the model endpoint answered 503: no capacity",
        "hint: the model server is overloaded"),  # the whole hint: tests/test_wording_cli.py
    "rate-limited": (
        [Fault(status=429, message="slow down")], {},
        "the model endpoint rate-limited the request (429: slow down)",
        "hint: the endpoint limits how many requests or tokens this key may send (not retried: max_retries is 0)"),
    "timeout before the answer": (
        [Reply(text="late", delay=4)], {"request_timeout": 0.3},
        "after taking the request",
        "hint: the server is reachable but did not answer in time (not retried: max_retries is 0); it may be "
        "overloaded, stuck or still loading the model: check it, or raise request_timeout (now 0.3 s)"),
    "timeout mid-answer": (
        [Reply(text=LONG, stall_after=8, stall_secs=4)], {"request_timeout": 0.3},
        "sent nothing for 0.3 s mid-answer",
        "hint: the server is reachable but did not answer in time"),
    "model not found": (
        [Fault(status=404, code="model_not_found", message="The model `fake-model` does not exist")], {},
        "the endpoint does not serve model `fake-model` (The model `fake-model` does not exist)",
        "hint: /model in the REPL (or `nanohermes doctor`) lists the models the endpoint serves"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_failure_says_what_happened_and_its_own_hint(turn, server: FakeServer, case: str) -> None:
    script, config, said, hint = CASES[case]
    server.add(*script)
    r = turn("-p", "hi", server=server, config={"max_retries": 0, **config})
    assert r.code == 1, r.err
    assert said in r.err and hint in r.err, r.err
    others = {h for c, (_, _, _, h) in CASES.items() if c != case and h not in hint and hint not in h}
    assert not [h for h in others if h in r.err]
    assert "cannot reach" not in r.err and "overloaded or rate-limited" not in r.err


def test_a_broken_stream_is_retried_and_then_named_as_broken(turn, server: FakeServer) -> None:
    server.add(Reply(text=LONG, drop_after=8), Reply(text=LONG, drop_after=8))
    r = turn("-p", "hi", server=server, config={"max_retries": 1})
    assert r.code == 1
    assert r.err.count("the response stream dropped; retrying") == 1
    assert "hint: " in r.err and " broke off (retried 1 time)" in r.err


def test_the_hint_of_a_broken_stream_works_for_a_script(turn, server: FakeServer) -> None:
    # The hint says `nanohermes --continue -p continue`: the run whose answer broke off is the
    # session that continues, with its prompt.
    server.add(Reply(text=LONG, drop_after=8), Reply(text="picked up"))
    r = turn("-p", "explain the cache", server=server, config={"max_retries": 0})
    assert r.code == 1 and "`nanohermes --continue -p continue`" in r.err
    again = turn("--continue", "-p", "continue", server=server)
    assert again.code == 0, again.err
    assert again.out == "picked up\n"
    prompts = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"]
    assert prompts == ["explain the cache", "continue"]


def test_a_refused_connection_says_to_check_base_url(turn, closed_url: str) -> None:
    r = turn("-p", "hi", "--base-url", closed_url, "--model", "m", config={"max_retries": 0},
             env={"OPENAI_API_KEY": "k"})
    assert r.code == 1
    assert "cannot reach " in r.err and f" {closed_url} (ConnectError" in r.err
    assert "hint: check base_url " in r.err


@pytest.mark.parametrize("where", ["environment", "config", "flag"])
def test_a_refused_key_says_to_check_the_key_where_it_comes_from(turn, where: str) -> None:
    # Setting the variable does nothing while a config file or --api-key gives the key: the hint
    # names the place the refused key came from.
    config = {"api_key": "wrong-key"} if where == "config" else None
    flags = ("--api-key", "wrong-key") if where == "flag" else ()
    with FakeServer(api_key="right-key") as s:
        r = turn("-p", "hi", *flags, server=s, config=config, env={"OPENAI_API_KEY": "wrong-key"})
    assert r.code == 1
    assert "the model endpoint refused the API key (401" in r.err
    if where == "environment":
        [hint] = [line for line in r.err.splitlines() if line.startswith("hint: check the key: ")]
        assert " $OPENAI_API_KEY;" in hint and "--api-key" in hint, hint
    else:
        [hint] = [line for line in r.err.splitlines() if line.startswith("hint: check the key: ")]
        assert " api_key from a config file or --api-key, " in hint and "$OPENAI_API_KEY" in hint, hint


def test_the_repl_says_at_start_that_the_endpoint_cannot_be_reached(term: Any, closed_url: str) -> None:
    t = term(args=("--base-url", closed_url))
    t.child.send("still typing")  # typed as it starts: the check runs behind the prompt
    t.wait(f"warning: cannot reach the model endpoint at {closed_url}")
    t.wait("check base_url")
    t.wait("still typing")
    t.child.send("\x03")
    t.leave()


def test_the_repl_says_at_start_that_the_key_is_refused(term: Any) -> None:
    with FakeServer(api_key="right-key") as s:
        t = term(args=("--base-url", s.base_url))  # the REPL's runs send "test-key"
        t.wait("warning: the model endpoint refused the API key (401")
        t.wait("check the key")
        t.leave()
        assert s.requests == []  # nothing was sent but the model list
