"""redact(): known key values replaced wherever they appear, raw or JSON-escaped."""

from __future__ import annotations

import json
import secrets
import socket

from nanohermes.config import Config
from nanohermes.guard.redact import MIN_SECRET_CHARS, REDACTED, add_secrets, collect, redact


def fresh(prefix: str = "sk-") -> str:
    return prefix + secrets.token_hex(12)


def test_a_known_value_is_replaced_everywhere() -> None:
    key = fresh()
    add_secrets([key])
    assert redact(f"a {key} b {key}") == f"a {REDACTED} b {REDACTED}"


def test_json_escaped_forms_are_replaced_too() -> None:
    key = fresh('p"w\\') + "é"
    add_secrets([key])
    line = json.dumps({"content": f"key={key}"})
    assert key not in redact(line)
    assert json.loads(redact(line)) == {"content": f"key={REDACTED}"}
    ascii_line = json.dumps({"content": key}, ensure_ascii=True)
    assert json.loads(redact(ascii_line)) == {"content": REDACTED}


def test_short_values_are_not_secrets() -> None:
    short = secrets.token_hex(8)[: MIN_SECRET_CHARS - 1]
    long = secrets.token_hex(8)[:MIN_SECRET_CHARS]
    add_secrets([short, long])
    assert redact(f"{short} {long}") == f"{short} {REDACTED}"


def test_collect_takes_keys_from_env_and_config_but_not_names_or_file_lists() -> None:
    cfg = Config(api_key="from-config-123456", api_key_env="MY_KEY_VAR")
    env = {"MY_KEY_VAR": "named-by-config-1", "GITHUB_TOKEN": "ghp_token_value", "DB_PASSWORD": "hunter2hunter2",
           "HOME": "/home/someone", "TOKENIZERS_PARALLELISM": "false-or-true"}
    found = collect(cfg, env)
    assert set(found) == {"from-config-123456", "named-by-config-1", "ghp_token_value", "hunter2hunter2"}


def test_a_key_split_across_streamed_pieces_is_still_redacted() -> None:
    from nanohermes.guard.redact import StreamRedactor

    key = fresh()
    add_secrets([key])
    text = f"the key is {key}, and again {key}.\nbye"
    for a in range(len(text) + 1):
        for b in range(a, len(text) + 1, 7):
            stream = StreamRedactor()
            shown = [stream.feed(text[:a]), stream.feed(text[a:b]), stream.feed(text[b:]), stream.flush()]
            assert "".join(shown) == f"the key is {REDACTED}, and again {REDACTED}.\nbye", (a, b)
            assert not any(key[:MIN_SECRET_CHARS] in piece for piece in shown)


def test_only_what_may_begin_a_key_is_held_back() -> None:
    from nanohermes.guard.redact import StreamRedactor

    key = fresh("tok-")
    add_secrets([key])
    stream = StreamRedactor()
    assert stream.feed("plain words ") == "plain words "  # nothing like a key: shown at once
    assert stream.feed("then tok") == "then "  # "tok" may begin the key
    assert stream.feed("en ok") == "token ok"  # it did not
    assert stream.feed(key[:-1]) == ""
    assert stream.flush() == key[:-1]  # the text ended before the key did: not a key


def test_a_password_in_a_url_of_the_config_is_a_secret() -> None:
    cfg = Config.from_dict({"base_url": "http://me:url-pass-123456@127.0.0.1:9/v1",
                            "mcp": {"servers": {"s": {"url": "https://bot:mcp-pass-654321@mcp.example/x"}}}})
    assert {"url-pass-123456", "mcp-pass-654321"} <= set(collect(cfg, {}))
    assert collect(Config.from_dict({"base_url": "http://me@127.0.0.1:9/v1"}), {}) == []  # a user alone is no secret


def test_a_password_in_base_url_never_reaches_the_error_line(cli) -> None:
    with socket.socket() as s:  # a port nothing listens on: the endpoint cannot be reached
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = cli("-p", "hi", "--base-url", f"http://me:url-pass-123456@127.0.0.1:{port}/v1", "--model", "m",
            config={"max_retries": 0})
    assert r.code == 1 and "cannot reach" in r.err, r.err
    assert "url-pass-123456" not in r.err and "127.0.0.1" in r.err
    # A short password, in the retry warnings and the error, in every output format; and in
    # the error that refuses a base_url which is no usable URL.
    for fmt in ("text", "stream-json"):
        r = cli("-p", "hi", "--base-url", f"http://alice:s3cretPW9@127.0.0.1:{port}/v1", "--model", "m",
                "--output-format", fmt, config={"max_retries": 1})
        assert r.code == 1 and "cannot connect" in r.err and "cannot reach" in r.err + r.out, r.err
        assert "s3cretPW9" not in r.err + r.out
    for url in ("ftp://alice:s3cretPW9@127.0.0.1/v1", "http://alice:s3cretPW9@[::1/v1"):
        r = cli("-p", "hi", "--base-url", url, "--model", "m")
        assert r.code == 2 and "not a usable URL" in r.err and "s3cretPW9" not in r.err, r.err
