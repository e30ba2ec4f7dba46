"""A TLS/plain-HTTP mix-up in base_url is deterministic: `-p` and the REPL say so at once, with
the scheme to use, instead of retrying it like a network fault. Against real loopback servers:
the fake (plain HTTP), a TLS server with a throwaway certificate, and one that hangs up."""

from __future__ import annotations

from typing import Any

from test_repl_pty import term  # noqa: F401  (the REPL-on-a-pty fixture)

from nanohermes.testing import FakeServer


def test_https_against_a_plain_http_server_fails_at_once_in_p(turn, server: FakeServer) -> None:
    url = server.base_url.replace("http://", "https://")
    r = turn("-p", "hi", "--base-url", url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 1
    assert "cannot reach " in r.err and f" {url} (" in r.err and "try http:// instead of https://" in r.err
    assert f"hint: set base_url to {server.base_url} " in r.err
    assert "retrying" not in r.err


def test_http_against_a_tls_server_fails_at_once_in_p(turn, tls_port: int) -> None:
    url = f"http://127.0.0.1:{tls_port}/v1"
    r = turn("-p", "hi", "--base-url", url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 1
    assert "cannot reach " in r.err and f" {url} (" in r.err and "use https:// instead of http://" in r.err
    assert f"hint: set base_url to https://127.0.0.1:{tls_port}/v1" in r.err
    assert "retrying" not in r.err


def test_a_plain_server_that_hangs_up_is_still_retried(turn, hang_up_port: int) -> None:
    # Not a TLS server: the probe finds no handshake, so this is a fault worth retrying.
    url = f"http://127.0.0.1:{hang_up_port}/v1"
    r = turn("-p", "hi", "--base-url", url, "--model", "fake-model", config={"max_retries": 1},
            env={"OPENAI_API_KEY": "k"})
    print(r.err)
    assert r.code == 1
    assert r.err.count(f" {url} hung up ") == 1  # retried once
    assert f" {url} closed the connection " in r.err
    assert "the server speaks TLS" not in r.err
    assert "hint: check base_url" in r.err


def test_https_against_a_plain_http_server_fails_at_once_in_the_repl(term: Any, server: FakeServer) -> None:
    url = server.base_url.replace("http://", "https://")
    t = term(args=("--base-url", url))
    t.prompt()
    t.type("hello")
    t.wait("the server seems to speak plain HTTP")  # the screen wraps the rest of the line
    t.wait(f"hint: set base_url to {server.base_url} ")
    t.leave()  # the REPL went on to the next prompt
    assert "retrying" not in t.text
    assert server.requests == []
