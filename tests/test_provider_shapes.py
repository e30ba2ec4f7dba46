"""Stream shapes real servers send, replayed byte for byte by the loopback server, each run
once through the real `nanohermes -p` command line with the answer printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Raw, Reply, call, sse, tool_reply


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def calls(*fragments: dict[str, Any]) -> list[dict[str, Any]]:
    """A stream of tool-call fragments, one chunk each, ended by finish_reason tool_calls."""
    return [chunk({"role": "assistant", "content": None}), *(chunk({"tool_calls": [f]}) for f in fragments),
            chunk({}, "tool_calls")]


def results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def assistant_calls(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for m in request["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]


@pytest.fixture
def files(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha contents\n")
    (workspace / "b.txt").write_text("beta contents\n")
    return workspace


def run(turn, server: FakeServer, *extra: str) -> Any:  # type: ignore[no-untyped-def]
    r = turn("-p", "read the files", *extra, server=server)
    print(r.out, r.err)
    return r


@pytest.mark.quirk("calls.parallel-whole-at-index-0")
def test_ollama_parallel_calls_reuse_index_0(turn, server: FakeServer, files: Path) -> None:
    # Ollama sends each parallel call whole, every one at index 0, each with its own id.
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
        {"index": 0, "id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b.txt"}'}},
    ))), Reply(text="both read"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "both read\n"), r.err
    sent = assistant_calls(server.requests[1])
    assert [(c["id"], c["function"]["name"]) for c in sent] == [("call_a", "read_file"), ("call_b", "read_file")]
    assert [json.loads(c["function"]["arguments"]) for c in sent] == [{"path": "a.txt"}, {"path": "b.txt"}]
    assert any("alpha contents" in t for t in results(server.requests[1]))
    assert any("beta contents" in t for t in results(server.requests[1]))


@pytest.mark.quirk("calls.parallel-streamed-at-index-0")
def test_sglang_streamed_parallel_calls_reuse_index_0(turn, server: FakeServer, files: Path) -> None:
    # SGLang streams each call in pieces, the second again at index 0 with a new id and name.
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"path": '}},
        {"index": 0, "function": {"arguments": '"a.txt"}'}},
        {"index": 0, "id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"path": "b.txt"}'}},
    ))), Reply(text="done"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "done\n"), r.err
    sent = assistant_calls(server.requests[1])
    assert [c["function"]["name"] for c in sent] == ["read_file", "read_file"]
    assert [json.loads(c["function"]["arguments"])["path"] for c in sent] == ["a.txt", "b.txt"]
    assert len(results(server.requests[1])) == 2


@pytest.mark.quirk("calls.new-id-on-every-fragment")
def test_lmstudio_new_id_on_every_fragment_is_one_call(turn, server: FakeServer, files: Path) -> None:
    # LM Studio: each fragment of one call carries an id of its own; only the first names the tool.
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "366241530", "type": "function", "function": {"name": "run_command", "arguments": ""}},
        {"index": 0, "id": "366241531", "type": "function", "function": {"arguments": '{"command":'}},
        {"index": 0, "id": "366241532", "type": "function", "function": {"arguments": ' "cat a.txt'}},
        {"index": 0, "id": "366241533", "type": "function", "function": {"arguments": ' b.txt"}'}},
    ))), Reply(text="ran once"))
    r = run(turn, server, "--yes")
    assert (r.code, r.out) == (0, "ran once\n"), r.err
    sent = assistant_calls(server.requests[1])
    assert [(c["id"], c["function"]["name"]) for c in sent] == [("366241530", "run_command")]
    assert json.loads(sent[0]["function"]["arguments"]) == {"command": "cat a.txt b.txt"}
    (result,) = results(server.requests[1])
    assert "alpha contents" in result and "beta contents" in result


@pytest.mark.quirk("calls.name-on-every-fragment")
def test_name_repeated_on_every_fragment_is_set_once(turn, server: FakeServer, files: Path) -> None:
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "call_r", "type": "function", "function": {"name": "read_file", "arguments": '{"pa'}},
        {"index": 0, "id": "call_r", "type": "function", "function": {"name": "read_file", "arguments": 'th": "a.txt"}'}},
        {"index": 0, "function": {"name": "read_file", "arguments": ""}},
    ))), Reply(text="read once"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "read once\n"), r.err
    sent = assistant_calls(server.requests[1])
    assert [c["function"]["name"] for c in sent] == ["read_file"]
    assert json.loads(sent[0]["function"]["arguments"]) == {"path": "a.txt"}


@pytest.mark.quirk("calls.no-index")
def test_gemini_index_less_fragments_form_one_call(turn, server: FakeServer, files: Path) -> None:
    server.add(Raw(body=sse(*calls(
        {"id": "g1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":'}},
        {"function": {"arguments": ' "a.txt"}'}},
    ))), Reply(text="one call"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "one call\n"), r.err
    sent = assistant_calls(server.requests[1])
    assert len(sent) == 1 and json.loads(sent[0]["function"]["arguments"]) == {"path": "a.txt"}
    assert "alpha contents" in results(server.requests[1])[0]


@pytest.mark.quirk("calls.provider-fields")
def test_gemini_thought_signature_is_echoed_on_the_tool_call(turn, server: FakeServer, files: Path) -> None:
    extra = {"google": {"thought_signature": "sig-123=="}}
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "g2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
         "extra_content": extra},
    ))), Reply(text="signed"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "signed\n"), r.err
    assert assistant_calls(server.requests[1])[0]["extra_content"] == extra


@pytest.mark.quirk("calls.object-arguments")
def test_llamacpp_object_arguments_are_serialised(turn, server: FakeServer, files: Path) -> None:
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "l1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "b.txt"}}},
    ))), Reply(text="object read"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "object read\n"), r.err
    assert "internal error" not in r.err
    assert json.loads(assistant_calls(server.requests[1])[0]["function"]["arguments"]) == {"path": "b.txt"}
    assert "beta contents" in results(server.requests[1])[0]


@pytest.mark.quirk("calls.prefixed-name")
def test_functions_prefix_is_stripped_for_a_known_tool(turn, server: FakeServer, files: Path) -> None:
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "k1", "type": "function", "function": {"name": "functions.read_file", "arguments": '{"path": "a.txt"}'}},
        {"index": 1, "id": "k2", "type": "function", "function": {"name": "functions.no_such_tool", "arguments": "{}"}},
    ))), Reply(text="prefixed"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "prefixed\n"), r.err
    assert [c["function"]["name"] for c in assistant_calls(server.requests[1])] == ["read_file", "functions.no_such_tool"]
    first, second = results(server.requests[1])
    assert "alpha contents" in first and second.startswith("ERROR:")


@pytest.mark.quirk("body.whole-json-answer")
def test_complete_json_answer_to_a_stream_request_is_used(turn, server: FakeServer) -> None:
    body = {"id": "x", "object": "chat.completion", "model": "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole answer"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 2, "total_tokens": 32}}
    server.add(Raw(body=json.dumps(body).encode(), content_type="application/json"))
    r = turn("-p", "hi", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    out = r.json()
    print(out["result"])
    assert out["result"] == "whole answer"
    assert len(server.requests) == 1
    assert "retrying" not in r.err


def test_html_page_from_a_proxy_fails_at_once(turn, server: FakeServer) -> None:
    server.add(Raw(body=b"<html><body>Sign in to the portal</body></html>", content_type="text/html; charset=utf-8"))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert " text/html, " in r.err and "check base_url" in r.err
    assert "retrying" not in r.err and len(server.requests) == 1


@pytest.mark.quirk("error.list-body")
def test_gemini_list_shaped_error_body_keeps_its_message(turn, server: FakeServer) -> None:
    body = [{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}}]
    server.add(Raw(body=json.dumps(body).encode(), status=400, content_type="application/json"))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert "API key not valid. Please pass a valid API key." in r.err
    assert "hint: check the key" in r.err


@pytest.mark.quirk("stream.comment-keepalive")
def test_openrouter_keepalive_comments_and_error_chunk(turn, server: FakeServer) -> None:
    server.add(Raw(body=sse(b": OPENROUTER PROCESSING\n\n", chunk({"content": "Hel"}), b": OPENROUTER PROCESSING\n\n",
                            chunk({"content": "lo"}, "stop"))))
    r = turn("-p", "hi", server=server)
    assert (r.code, r.out) == (0, "Hello\n"), r.err


def _json_error(status: int, error: dict[str, Any]) -> Raw:
    return Raw(body=json.dumps({"error": error}).encode(), status=status, content_type="application/json")


OVERFLOWS = {
    "openai": _json_error(400, {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                           "resulted in 9000 tokens.", "type": "invalid_request_error",
                                "code": "context_length_exceeded"}),
    "llamacpp_400": _json_error(400, {"code": 400, "message": "request (9000 tokens) exceeds the available context size "
                                      "(8192 tokens), try increasing it", "type": "exceed_context_size_error",
                                      "n_prompt_tokens": 9000, "n_ctx": 8192}),
    "llamacpp_in_stream": Raw(body=(b'error: {"code": 500, "message": "the request exceeds the available context size. '
                                    b'try increasing the context size or enable context shift", '
                                    b'"type": "exceed_context_size_error"}\n\n',)),
    "llamacpp_in_stream_data": Raw(body=sse({"error": {"code": 400, "message": "the request exceeds the available context "
                                                       "size", "type": "exceed_context_size_error"}}, done=False)),
    "vllm": _json_error(400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, "
                              "you requested 5000 tokens (4900 in the messages, 100 in the completion).",
                              "type": "BadRequestError", "code": 400}),
    "gemini": Raw(body=json.dumps([{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum "
                                              "number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}]).encode(),
                  status=400, content_type="application/json"),
    "anthropic_via_proxy": _json_error(400, {"type": "invalid_request_error",
                                             "message": "prompt is too long: 210000 tokens > 200000 maximum"}),
    "ollama": Raw(body=json.dumps({"error": "prompt too long; exceeded max context length by 120 tokens"}).encode(),
                  status=400, content_type="application/json"),
    # vLLM's input processor, byte for byte as it answers.
    "vllm_decoder_prompt": Raw(body=b'{"error":{"message":"The decoder prompt (length 9000) is longer than the maximum model '
                                    b'length of 8192. Make sure that max_model_len is no smaller than the number of text '
                                    b'tokens."}}', status=400, content_type="application/json"),
    "vllm_requested_tokens": _json_error(400, {"object": "error", "message": "This model's maximum context length is 8192 "
                                               "tokens. However, you requested 9000 tokens in the messages, Please reduce "
                                               "the length of the messages.", "type": "BadRequestError", "code": 400}),
    "vllm_input_prompt": _json_error(400, {"object": "error", "message": "Input prompt (9000 tokens) is too long and "
                                           "exceeds limit of 8192", "type": "BadRequestError", "code": 400}),
    "vllm_engine_prompt": _json_error(400, {"message": "The engine prompt length 9000 exceeds the max_model_len 8192. "
                                            "Please reduce prompt.", "type": "invalid_request_error", "code": 400}),
}


@pytest.mark.quirk("error.string-body", "error.list-body", "stream.error-line")
@pytest.mark.parametrize("provider", list(OVERFLOWS))
def test_context_overflow_in_each_wording_compacts(turn, server: FakeServer, workspace: Path, provider: str) -> None:
    (workspace / "big.txt").write_text(("z" * 99 + "\n") * 40)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})), OVERFLOWS[provider],
               Reply(text="SUMMARY: big.txt was read"), Reply(text="answered after compacting"))
    r = turn("-p", "read big.txt", "--verbose", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "answered after compacting\n"), r.err
    assert "the endpoint said the context is too long" in r.err
    assert "SUMMARY: big.txt was read" in server.requests[3]["messages"][1]["content"]
    assert len(server.requests) == 4


def test_an_error_body_cannot_send_terminal_escapes(turn, server: FakeServer) -> None:
    server.add(_json_error(400, {"message": "bad request \x1b]52;c;aGk=\x07\x1b[2J here"}))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert "\x1b" not in r.err and "\x07" not in r.err
    assert "bad request ?]52;c;aGk=??[2J here" in r.err


def test_a_redirect_is_not_followed_with_the_key(turn, server: FakeServer) -> None:
    server.add(Raw(body=b"", status=301, content_type="text/html",
                   headers=(("Location", "https://elsewhere.example/v1/chat/completions"),)))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert " (301) " in r.err and " https://elsewhere.example/v1/chat/completions;" in r.err and "base_url" in r.err
    assert len(server.requests) == 1


IN_STREAM = {
    "openai": {"message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"},
    "vllm": {"message": "The prompt (total length 9000) is too long to fit into the model (context length 8192).",
             "type": "BadRequestError", "code": 400},
    "gemini": {"message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
               "status": "INVALID_ARGUMENT", "code": 400},
    "anthropic_via_proxy": {"message": "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000"},
    "ollama": {"message": "the input length exceeds the context length"},
    "vllm_decoder_prompt": {"message": "The decoder prompt (length 9000) is longer than the maximum model length of 8192. "
                                       "Make sure that max_model_len is no smaller than the number of text tokens.",
                            "type": "BadRequestError", "code": 400},
}


@pytest.mark.parametrize("provider", list(IN_STREAM))
def test_context_overflow_inside_a_200_stream_compacts(turn, server: FakeServer, workspace: Path, provider: str) -> None:
    (workspace / "big.txt").write_text(("q" * 99 + "\n") * 40)
    server.add(tool_reply(call("read_file", {"path": "big.txt"})),
               Raw(body=sse(chunk({"role": "assistant", "content": ""}), {"error": IN_STREAM[provider]}, done=False)),
               Reply(text="SUMMARY"), Reply(text="fits again"))
    r = turn("-p", "read big.txt", "--verbose", server=server)
    print(r.out)
    assert (r.code, r.out) == (0, "fits again\n"), r.err
    assert "the endpoint said the context is too long" in r.err


@pytest.mark.quirk("stream.named-error-event")
def test_a_named_error_event_ends_the_stream_with_its_message(turn, server: FakeServer) -> None:
    # Anthropic-style proxies name the event instead of wrapping the body in "error".
    server.add(Raw(body=(b'event: error\ndata: {"type": "invalid_request_error", "message": "model is not allowed"}\n\n',)))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert ": model is not allowed" in r.err
    assert "retrying" not in r.err


@pytest.mark.quirk("body.json-labelled-as-stream")
def test_proxy_labelling_a_whole_json_answer_as_an_event_stream_is_used(turn, server: FakeServer) -> None:
    # Some proxies forward the upstream's complete answer under the stream's content type.
    body = {"id": "x", "object": "chat.completion", "model": "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole, as a stream"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}}
    server.add(Raw(body=b"\n" + json.dumps(body, indent=2).encode() + b"\n", content_type="text/event-stream"))
    r = turn("-p", "hi", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    out = r.json()
    print(out["result"])
    assert out["result"] == "whole, as a stream"
    assert (out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"]) == (30, 4)
    assert "retrying" not in r.err and len(server.requests) == 1


@pytest.mark.quirk("body.json-labelled-as-stream")
def test_proxy_labelling_a_json_error_as_an_event_stream_keeps_its_message(turn, server: FakeServer) -> None:
    server.add(Raw(body=b'{"error": {"message": "model is not allowed for this key", "type": "invalid_request_error"}}',
                   content_type="text/event-stream"))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert ": model is not allowed for this key" in r.err
    assert "retrying" not in r.err and len(server.requests) == 1


@pytest.mark.quirk("calls.empty-object-placeholder")
def test_empty_object_opening_fragment_then_text_arguments_is_one_object(turn, server: FakeServer, files: Path) -> None:
    # The opening fragment carries `"arguments": {}`, then the real arguments stream as text.
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "e1", "type": "function", "function": {"name": "read_file", "arguments": {}}},
        {"index": 0, "function": {"arguments": '{"path": '}},
        {"index": 0, "function": {"arguments": '"a.txt"}'}},
        {"index": 1, "id": "e2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        {"index": 1, "function": {"arguments": '{"path": "b.txt"}'}},
    ))), Reply(text="placeholders dropped"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "placeholders dropped\n"), r.err
    sent = assistant_calls(server.requests[1])
    assert [c["function"]["arguments"] for c in sent] == ['{"path": "a.txt"}', '{"path": "b.txt"}']
    first, second = results(server.requests[1])
    assert "alpha contents" in first and "beta contents" in second


def test_empty_object_arguments_sent_alone_stay_an_empty_object(turn, server: FakeServer) -> None:
    server.add(Raw(body=sse(*calls(
        {"index": 0, "id": "t1", "type": "function", "function": {"name": "todo_read", "arguments": {}}},
    ))), Reply(text="no arguments"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "no arguments\n"), r.err
    assert assistant_calls(server.requests[1])[0]["function"]["arguments"] == "{}"


@pytest.mark.quirk("stream.done-without-finish-reason")
def test_done_without_finish_reason_ends_the_answer(turn, server: FakeServer) -> None:
    # No chunk names a finish_reason; `data: [DONE]` is the only end.
    server.add(Raw(body=sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "finished "}),
                            chunk({"content": "by DONE"}))))
    r = turn("-p", "hi", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    out = r.json()
    print(out["result"])
    assert out["result"] == "finished by DONE"
    assert "retrying" not in r.err and len(server.requests) == 1


@pytest.mark.quirk("stream.done-without-finish-reason")
def test_done_without_finish_reason_after_tool_calls_runs_them(turn, server: FakeServer, files: Path) -> None:
    server.add(Raw(body=sse(chunk({"role": "assistant", "content": None}), chunk({"tool_calls": [
        {"index": 0, "id": "d1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]}))),
        Reply(text="read after DONE"))
    r = run(turn, server)
    assert (r.code, r.out) == (0, "read after DONE\n"), r.err
    assert "retrying" not in r.err
    assert "alpha contents" in results(server.requests[1])[0]


def test_a_stream_cut_before_done_and_finish_reason_is_still_retried(turn, server: FakeServer) -> None:
    server.add(Raw(body=sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "half"}), done=False)),
               Reply(text="half and the rest"))
    r = turn("-p", "hi", server=server)
    assert (r.code, r.out) == (0, "half and the rest\n"), r.err
    assert "the response stream ended early; retrying" in r.err


NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             b"</center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n")


def test_nginx_502_page_names_the_gateway(turn, server: FakeServer) -> None:
    server.add(*[Raw(body=NGINX_502, status=502, content_type="text/html")] * 3)
    r = turn("-p", "hi", server=server, config={"max_retries": 2})
    print(r.err)
    assert r.code == 1
    assert " 502 Bad Gateway: 502 Bad Gateway" in r.err  # the page's title, not its HTML
    assert "hint: " in r.err and " gateway " in r.err and "(retried 2 times)" in r.err
    assert r.err.count("endpoint answered 502; retrying") == 2 and len(server.requests) == 3
    assert "<" not in r.err


def test_cloudflare_504_page_is_shown_short_and_printable(turn, server: FakeServer) -> None:
    page = (b"<!DOCTYPE html><html><head><script>var x = '<b>';</script><title>api.example.com | 504: Gateway "
            b"time-out\x1b[2J &amp; more</title></head><body>" + b"<p>filler</p>" * 200 + b"</body></html>")
    server.add(Raw(body=page, status=504, content_type="text/html; charset=UTF-8"))
    r = turn("-p", "hi", server=server, config={"max_retries": 0})
    print(r.err)
    assert r.code == 1
    assert " 504 Gateway Timeout: api.example.com | " in r.err and "504: Gateway time-out?[2J & more" in r.err
    assert "hint: " in r.err and " timed out " in r.err and "(not retried: max_retries is 0)" in r.err
    assert "\x1b" not in r.err and "filler" not in r.err


def test_an_empty_error_body_says_the_reason_phrase(turn, server: FakeServer) -> None:
    server.add(Raw(body=b"", status=503, content_type="text/plain"))
    r = turn("-p", "hi", server=server, config={"max_retries": 0})
    print(r.err)
    assert r.code == 1
    assert " 503 Service Unavailable\n" in r.err


def test_nginx_plain_http_to_its_tls_port_fails_at_once(turn, server: FakeServer) -> None:
    page = (b"<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n"
            b"<center><h1>400 Bad Request</h1></center>\r\n</body>\r\n</html>\r\n")
    server.add(Raw(body=page, status=400, content_type="text/html"))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert "400 The plain HTTP request was sent to HTTPS port;" in r.err and "use https:// instead of http://" in r.err
    assert f"hint: set base_url to {server.base_url.replace('http://', 'https://')}" in r.err
    assert len(server.requests) == 1


def test_proxy_labelling_an_html_page_as_an_event_stream_fails_at_once(turn, server: FakeServer) -> None:
    server.add(Raw(body=b"<!DOCTYPE html>\n<html><body>Sign in to the portal</body></html>", content_type="text/event-stream"))
    r = turn("-p", "hi", server=server)
    print(r.err)
    assert r.code == 1
    assert " HTML page " in r.err and " text/event-stream, " in r.err and "check base_url" in r.err
    assert "retrying" not in r.err and len(server.requests) == 1
