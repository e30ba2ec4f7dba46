"""A base_url with whitespace or control characters in it (a pasted line ending, an indent, a
no-break space) is refused before any request, in `-p`, the REPL and `doctor`, with the value
shown escaped and the problem named, instead of being retried as a network fault. Each case
runs the real CLI with the loopback server's own address, so only the stray character is wrong."""

from __future__ import annotations

from typing import Any

import pytest
from test_repl_pty import term  # noqa: F401  (the REPL-on-a-pty fixture)

from nanohermes.testing import FakeServer

HINT = "hint: set it like http://127.0.0.1:8080/v1 or https://api.openai.com/v1 (--base-url, OPENAI_BASE_URL or config)"

# (how the address is spoiled, what the message names)
SPOILED = [
    (lambda u: " " + u, "it has a leading space"),
    (lambda u: u + " ", "it has a trailing space"),
    (lambda u: u + "\n", "it has a trailing newline"),
    (lambda u: "\t" + u, "it has a leading tab"),
    (lambda u: u + "\r\n", "it has a trailing newline"),
    (lambda u: u.replace("/v1", " /v1"), "it contains a space"),
    (lambda u: u.replace("/v1", "/\tv1"), "it contains a tab"),
    (lambda u: " " + u + "\n", "it has a leading space and a trailing newline"),
    (lambda u: u.replace("/v1", "/\x1bv1"), "it contains an escape character"),
    (lambda u: u + "\u00a0", "it has a trailing no-break space"),
    (lambda u: "\ufeff" + u, "it has a leading byte order mark"),
    (lambda u: u + "\u200b", "it has a trailing zero-width space"),
]
IDS = ["leading-space", "trailing-space", "trailing-newline", "leading-tab", "trailing-crlf", "inner-space", "inner-tab",
       "both-ends", "escape", "no-break-space", "bom", "zero-width-space"]


@pytest.mark.parametrize(("spoil", "why"), SPOILED, ids=IDS)
def test_a_p_run_refuses_it_at_once_with_exit_2(turn, server: FakeServer, spoil: Any, why: str) -> None:
    url = spoil(server.base_url)
    r = turn("-p", "hi", "--base-url", url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 2
    assert r.err.splitlines()[0] == f"nanohermes: error: base_url {url!r} is not a usable URL: {why}"
    assert HINT in r.err
    assert "retrying" not in r.err and "cannot reach" not in r.err
    assert server.requests == []


@pytest.mark.parametrize("url_of", [lambda u: " " + u, lambda u: u + "\n"], ids=["leading-space", "trailing-newline"])
def test_openai_base_url_with_it_is_refused_in_p(turn, server: FakeServer, url_of: Any) -> None:
    url = url_of(server.base_url)
    r = turn("-p", "hi", "--model", "fake-model", env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 2
    assert f"base_url {url!r} is not a usable URL: it has a " in r.err
    assert server.requests == []


def test_a_config_file_value_with_it_is_refused_in_p(turn, server: FakeServer) -> None:
    url = server.base_url + "\t"
    r = turn("-p", "hi", "--model", "fake-model", config={"base_url": url}, env={"OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 2
    assert "base_url 'http://127.0.0.1:" in r.err and "/v1\\t' is not a usable URL: it has a trailing tab" in r.err


@pytest.mark.parametrize(("spoil", "why"), SPOILED[:4], ids=IDS[:4])
def test_doctor_refuses_it_before_any_request(turn, server: FakeServer, spoil: Any, why: str) -> None:
    url = spoil(server.base_url)
    r = turn("doctor", "--base-url", url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    print(r.out)
    assert r.code == 2
    assert r.out.splitlines()[0] == f"[FAIL] endpoint: base_url {url!r} is not a usable URL: {why}"
    assert "fix: set it like http://127.0.0.1:8080/v1" in r.out
    assert "cannot reach" not in r.out and "checks:" not in r.out  # nothing else ran
    assert server.requests == []


def test_the_repl_refuses_it_before_the_first_prompt(term: Any, server: FakeServer) -> None:
    url = " " + server.base_url
    t = term(args=("--base-url", url))  # the later --base-url wins over the fixture's own
    t.wait(f"nanohermes: error: base_url {url!r} is not a usable URL: it has a leading space")
    t.wait("hint: set it like http://127.0.0.1:8080/v1")
    assert t.exit_code() == 2
    assert "mode:" not in t.text  # no prompt was drawn
    assert server.requests == []


def test_a_clean_address_still_works(turn, server: FakeServer) -> None:
    from nanohermes.testing import Reply

    server.add(Reply(text="fine"))
    r = turn("-p", "hi", server=server)
    assert (r.code, r.out) == (0, "fine\n"), r.err


@pytest.mark.parametrize(("url", "why"), [
    ("http://127.0.0.1:abc/v1", "its port 'abc' is not a number from 1 to 65535"),
    ("http://127.0.0.1:99999/v1", "its port '99999' is not a number from 1 to 65535"),
    ("http://127.0.0.1:8080:90/v1", "its port '8080:90' is not a number from 1 to 65535"),
    ("http://[::1]:x/v1", "its port 'x' is not a number from 1 to 65535"),
    ("http://[::1/v1", "it is not a well-formed URL (Invalid IPv6 URL)"),
])
@pytest.mark.parametrize("command", ["-p", "doctor"])
def test_a_bad_port_or_address_is_refused_before_any_request(turn, url: str, why: str, command: str) -> None:
    args = ("-p", "hi") if command == "-p" else ("doctor",)
    r = turn(*args, "--base-url", url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    print(r.out, r.err)
    assert r.code == 2
    assert f"base_url {url!r} is not a usable URL: {why}" in (r.err if command == "-p" else r.out)
    assert "retrying" not in r.err and "internal error" not in r.err


def test_an_ipv6_address_with_a_port_is_usable(turn) -> None:
    # Refused by the connection (nothing listens there), not by the up-front check.
    r = turn("-p", "hi", "--base-url", "http://[::1]:9/v1", "--model", "fake-model", config={"max_retries": 0},
            env={"OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 1
    assert "cannot reach " in r.err and " http://[::1]:9/v1 " in r.err and "not a usable URL" not in r.err
