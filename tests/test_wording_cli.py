"""What the command line says on stderr, each message once: a `-p` run against the fake server,
in this process (`turn`). The other tests assert exit codes and what was sent; rewording a
message changes one row here."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from wording_support import said

from nanohermes.config import user_config_path
from nanohermes.turn.runtime import DENIED
from nanohermes.testing import FakeServer, Fault, Raw, Reply, call, sse, tool_reply


def test_an_unreachable_endpoint_says(turn) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    r = turn("-p", "x", "--base-url", url, config={"max_retries": 0})
    assert r.err == (f"nanohermes: error: cannot reach the model endpoint at {url} (ConnectError: All "
                     "connection attempts failed)\nhint: check base_url (--base-url, OPENAI_BASE_URL or config) and that "
                     "the server is running\n")


def test_a_retried_answer_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(Fault(status=429, retry_after=0), Reply(text="finally"))
    r = turn("-p", "x", server=server)
    assert r.err == "nanohermes: warning: endpoint answered 429; retrying in 0.0s (attempt 1 of 4)\n"


def test_an_answer_cut_short_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    server.add(Raw(body=sse(chunk({"content": "one, two"}), chunk({}, "length"))))
    r = turn("-p", "list", server=server)
    assert r.err == ("nanohermes: warning: the answer was cut short: it reached the output token limit (finish_reason "
                     "length)\n")


def test_a_prompt_without_p_off_a_terminal_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    r = turn("fix it", server=server)
    assert r.err == ("nanohermes: error: a prompt without -p opens the REPL, which needs a terminal\nhint: run it on a "
                     "terminal, or use -p \"fix it\" in scripts\n")


def test_an_unknown_key_in_a_section_that_must_be_right_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    r = turn("-p", "x", server=server, config={"permissions": {"dney": ["run_command"]}})
    assert r.err == (f"nanohermes: error: {user_config_path()}: unknown key `permissions.dney`; did you mean "
                     "`permissions.deny`?\nhint: fix its spelling: `permissions.deny` restricts what runs, and "
                     "nanohermes does not run with it left at its default; config.example.json lists every key\n")


def test_the_persons_no_reads() -> None:
    """What the model reads for a call a person refused (the runtime's `DENIED`)."""
    assert DENIED == "Denied by the user. Do not retry it; ask what to do instead."


NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             b"</center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n")

# (id, what the endpoint answers, max_retries, what stderr says)
ENDPOINTS: list[tuple[str, list[Raw | Fault], int, str]] = [
    ("html-not-a-stream", [Raw(body=b"<html><body>Sign in</body></html>", content_type="text/html; charset=utf-8")], 0,
     "nanohermes: error: the endpoint answered text/html, not an event stream; check base_url\nhint: {base} should be "
     "the API root of an OpenAI-compatible server (it usually ends in /v1), not a web page or proxy\n"),
    ("redirected", [Raw(body=b"", status=301, content_type="text/html",
                        headers=(("Location", "https://elsewhere.example/v1/chat/completions"),))], 0,
     "nanohermes: error: the endpoint redirected the request (301) to https://elsewhere.example/v1/chat/completions; "
     "check base_url\nhint: set base_url to the address the API really answers at\n"),
    ("gateway-failed", [Raw(body=NGINX_502, status=502, content_type="text/html")], 0,
     "nanohermes: error: the model endpoint answered 502 Bad Gateway: 502 Bad Gateway\nhint: a proxy or gateway in "
     "front of the model server failed (not retried: max_retries is 0); check that the server behind it is up, then "
     "try again\n"),
    ("overloaded", [Fault(status=503, message="no capacity")], 0,
     "nanohermes: error: the model endpoint answered 503: no capacity\nhint: the model server is overloaded or down "
     "for maintenance (not retried: max_retries is 0); try again later, or raise max_retries to wait longer\n"),
    ("gateway-timed-out", [Fault(status=504, message="upstream timed out")], 0,
     "nanohermes: error: the model endpoint answered 504: upstream timed out\nhint: a proxy or gateway in front of "
     "the model server timed out waiting for the model server (not retried: max_retries is 0); check that the server "
     "behind it is up, then try again\n"),
]


@pytest.mark.parametrize("answers,retries,text", [r[1:] for r in ENDPOINTS], ids=[r[0] for r in ENDPOINTS])
def test_an_endpoint_that_is_not_a_model_server_says(turn, server: FakeServer, answers: list[Raw | Fault], retries: int,  # type: ignore[no-untyped-def]
                                                     text: str) -> None:
    server.add(*answers)
    r = turn("-p", "hi", server=server, config={"max_retries": retries})
    assert r.err == text.replace("{base}", server.base_url)


def test_a_tool_call_written_as_text_says(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    text = '<tool_call>\n{"name": "delete_everything", "arguments": {"path": "."}}\n</tool_call>'
    server.add(Reply(text=text), Reply(text="Sorry."))
    turn("-p", "go", "--yes", server=server)
    [told] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "user"][1:]
    # {any}: the tools offered, which other tests list
    assert said(told, "ERROR: your answer holds what looks like a tool call written as text (Hermes <tool_call> JSON), "
                "and it could not be run: `delete_everything` is not a tool here (the tools are: apply_patch, {any}, "
                "write_file). Nothing was run. Call tools through the API's tool calls; if you write a call as text, "
                'write it whole, in this form:\n<tool_call>\n{{"name": "read_file", "arguments": {{"path": "a.py"}}}}\n'
                "</tool_call>"), told
    server.add(Reply(text='<tool_call>\n{"name": "list_dir", "arguments": {}}\n</tool_call>'), Reply(text="ok"))
    r = turn("-p", "go", "--yes", server=server)
    [result] = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert result.split("\n")[-1] == (
        "(this call was read from the text of your answer, where it was written as Hermes <tool_call> JSON; send tool "
        "calls through the API's tool calls)")
    assert [line for line in r.err.splitlines() if "list_dir" in line] == [
        "nanohermes: warning: the model wrote its tool call as text (Hermes <tool_call> JSON); read as a call to list_dir"]


def test_a_global_memory_nobody_may_approve_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("memory_save", {"text": "Tabs.", "scope": "global"})), Reply(text="ok"))
    turn("-p", "remember", "--yes", server=server)
    [result] = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert result == (
        "ERROR: a global memory reaches every project's sessions, and it comes from a project you have not trusted "
        "(trusted_projects); save it from the REPL, or trust the project; only a person's yes lets it run, and this "
        "run asks nobody (--yes or goal mode), so it is refused")


def test_a_skill_without_a_description_says(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    bad = workspace / ".nanohermes" / "skills" / "bad" / "SKILL.md"
    bad.parent.mkdir(parents=True)
    bad.write_text("---\nname: bad\n---\nbody\n")
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    assert [line for line in r.err.splitlines() if str(bad) in line] == [
        f"nanohermes: warning: {bad}: front matter needs a non-empty string `description`; skill skipped"]


@pytest.mark.parametrize("where,hint", [
    ("environment", "hint: check the key: the one sent is $OPENAI_API_KEY; set a valid one there, or pass --api-key"),
    ("config", "hint: check the key: the one sent is api_key from a config file or --api-key, which wins over "
               "$OPENAI_API_KEY; fix or remove it there (`nanohermes doctor` names the file)"),
])
def test_a_refused_key_says_where_it_came_from(turn, where: str, hint: str) -> None:  # type: ignore[no-untyped-def]
    config = {"api_key": "wrong-key"} if where == "config" else None
    with FakeServer(api_key="right-key") as s:
        r = turn("-p", "hi", server=s, config=config, env={"OPENAI_API_KEY": "wrong-key"})
    assert r.err.splitlines()[-1] == hint


def test_allowed_hosts_with_nothing_in_common_say(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    project = workspace / ".nanohermes" / "config.json"
    project.parent.mkdir()
    project.write_text('{"web_fetch": {"allowed_hosts": ["evil.org"]}}')
    server.add(Reply(text="done"))
    r = turn("-p", "hi", server=server, config={"web_fetch": {"allowed_hosts": ["127.0.0.1"]},
                                                "trusted_projects": [str(workspace)]})
    assert [line for line in r.err.splitlines() if "allowed_hosts" in line] == [
        f"nanohermes: warning: {project}: web_fetch.allowed_hosts share no host with the user's (127.0.0.1): web_fetch "
        "reaches no host"]


def test_a_rate_limit_mid_answer_says(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    from test_wire_errors import TPM, error_chunk

    server.add(error_chunk({"code": 429, "message": TPM}), error_chunk({"code": 429, "message": TPM}))
    r = turn("-p", "hi", server=server, config={"max_retries": 1})
    assert said(r.err, "nanohermes: warning: the endpoint reported a rate limit mid-answer; retrying in {any}s (attempt 1 "
                       "of 1)\nnanohermes: error: the model endpoint rate-limited the request mid-answer: {tpm}\nhint: "
                       "the endpoint limits how many requests or tokens this key may send (retried 1 time); wait a "
                       "minute and try again, raise max_retries to wait longer, or check the account's quota\n",
                tpm=TPM), r.err


def test_a_scheme_mix_up_and_a_hang_up_say(turn, server: FakeServer, tls_port: int, hang_up_port: int) -> None:  # type: ignore[no-untyped-def]
    https = server.base_url.replace("http://", "https://")
    r = turn("-p", "hi", "--base-url", https, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    assert said(r.err, "nanohermes: error: cannot reach the model endpoint at {https} ({any}; the server seems to speak "
                       "plain HTTP: try http:// instead of https://)\nhint: set base_url to {http} (--base-url, "
                       "OPENAI_BASE_URL or config); a TLS/plain-HTTP mix-up is not retried\n",
                https=https, http=server.base_url), r.err
    http = f"http://127.0.0.1:{tls_port}/v1"
    r = turn("-p", "hi", "--base-url", http, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    assert said(r.err, "nanohermes: error: cannot reach the model endpoint at {http} ({any}; the server speaks TLS: use "
                       "https:// instead of http://)\nhint: set base_url to {https} (--base-url, OPENAI_BASE_URL or "
                       "config); a TLS/plain-HTTP mix-up is not retried\n",
                http=http, https=http.replace("http://", "https://")), r.err
    hung = f"http://127.0.0.1:{hang_up_port}/v1"
    r = turn("-p", "hi", "--base-url", hung, "--model", "fake-model", config={"max_retries": 1},
             env={"OPENAI_API_KEY": "k"})
    assert said(r.err, "nanohermes: warning: the endpoint at {url} hung up without answering; retrying in {any}s "
                       "(attempt 1 of 1)\nnanohermes: error: the model endpoint at {url} closed the connection without "
                       "answering ({any})\nhint: check base_url (that port may be another program's) and the server's "
                       "log: it may have crashed on the request\n", url=hung), r.err
