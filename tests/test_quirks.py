"""The quirk table (`nanohermes.llm.quirks`) and the tests it owes: every entry has a fake-server
test tagged `@pytest.mark.quirk("<id>")` (here or where the behaviour is tested end to end), every
tag names an entry, and an entry whose behaviour is code names that code, which names it back.
Below those checks, the fake-server tests of the entries no other test covers: each error
wording in a provider's own words, each format of a call written as text, and the shapes and
fields that had none. They talk to the real wire over HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import json
import re
import textwrap
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nanohermes.common.errors import AuthError, ContextTooLongError, EndpointError, UnreachableError
from nanohermes.llm import make_llm
from nanohermes.llm.quirks import QUIRKS, Shape, TextFormat, Wording, data, pattern
from nanohermes.common.messages import Completion, Message
from nanohermes.testing import FakeServer, Raw, Reply, sse
from nanohermes.turn.window import endpoint_window

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
_ID = re.compile(r"[a-z0-9]+(?:[.-][a-z0-9]+)+")
_TAG = re.compile(r"\bquirk: ([^()]*)")


def tagged_tests() -> Iterator[tuple[str, str, Any]]:
    """(quirk id, test name, test function) for every `quirk` mark on a test of this suite,
    on the function or on one of its parameters."""
    for path in sorted(TESTS.glob("test_*.py")):
        if "mark.quirk" not in path.read_text(encoding="utf-8"):
            continue
        module = importlib.import_module(path.stem)
        for name, fn in vars(module).items():
            if not name.startswith("test_") or not callable(fn):
                continue
            for mark in getattr(fn, "pytestmark", ()):
                marks = [mark] if mark.name == "quirk" else []
                if mark.name == "parametrize":
                    marks += [getattr(m, "mark", m) for value in mark.args[1] for m in getattr(value, "marks", ())]
                for m in marks:
                    if m.name == "quirk":
                        for qid in m.args:
                            yield qid, f"{path.name}::{name}", fn


def test_every_entry_has_a_fake_server_test_and_every_tag_names_an_entry() -> None:
    tags: dict[str, list[str]] = {}
    for qid, test, _ in tagged_tests():
        tags.setdefault(qid, []).append(test)
    ids = {q.id for q in QUIRKS}
    untested = sorted(ids - set(tags))
    unknown = {qid: tags[qid] for qid in sorted(set(tags) - ids)}
    assert not untested, f"entries without a test tagged @pytest.mark.quirk(id): {untested}"
    assert not unknown, f"tags naming no entry of the quirk table: {unknown}"


def test_each_tagged_test_talks_to_the_fake_server() -> None:
    for qid, test, fn in tagged_tests():
        talks = "server" in inspect.signature(fn).parameters or "FakeServer" in inspect.getsource(fn)
        assert talks, f"{test} is tagged {qid} but uses no FakeServer"


def test_each_entry_says_whose_it_is_and_where_it_is_documented() -> None:
    ids = [q.id for q in QUIRKS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    for q in QUIRKS:
        assert _ID.fullmatch(q.id), q.id
        assert q.providers and all(p.strip() for p in q.providers), q.id
        assert q.wires and set(q.wires) <= {"chat", "responses"}, q.id
        assert q.what.strip(), q.id
        assert q.source.startswith("https://") or (REPO / q.source).is_file(), (q.id, q.source)
        if isinstance(q.data, Wording):
            re.compile(q.data.pattern)  # a pattern that does not compile fails here, not mid-answer


def _resolve(dotted: str) -> Any:
    """`package.module.Class.method` (or a function) from its dotted name."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(dotted)


def _tags(source: str) -> set[str]:
    """The ids the comments of `source` name (`# quirk: a, b`, text in brackets after them)."""
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(textwrap.dedent(source)).readline)
                if t.type == tokenize.COMMENT]
    return {qid.strip() for c in comments for found in _TAG.findall(c) for qid in found.split(",") if qid.strip()}


def test_an_entry_and_the_code_that_handles_it_name_each_other() -> None:
    for q in QUIRKS:
        if isinstance(q.data, Shape):
            assert q.code, f"{q.id} is behaviour and names no code"
        if q.code:
            assert q.id in _tags(inspect.getsource(_resolve(q.code))), f"{q.code} carries no `# quirk: {q.id}`"
    ids = {q.id for q in QUIRKS}
    for path in sorted((REPO / "nanohermes").rglob("*.py")):
        stray = _tags(path.read_text(encoding="utf-8")) - ids
        assert not stray, f"{path.relative_to(REPO)} names quirks the table does not hold: {sorted(stray)}"


# -- the fake-server tests of entries no other test covers ------------------------------------

def _wire(server: FakeServer, kind: str = "chat", **settings: Any) -> Any:
    return make_llm(kind, model="fake-model", base_url=server.base_url, api_key="k", max_retries=1,
                    backoff_base=0.001, backoff_cap=0.001, **settings)


def _ask(llm: Any, messages: list[Message] | None = None, tools: list[dict[str, Any]] | None = None,
         shown: list[str] | None = None, thought: list[str] | None = None) -> Completion:
    async def go() -> Completion:
        try:
            return await llm.complete(messages or [Message.user("hi")], tools or [], (shown if shown is not None else []).append,
                                      (thought if thought is not None else []).append)
        finally:
            await llm.aclose()

    return asyncio.run(go())


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _in_stream(error: dict[str, Any]) -> Raw:
    return Raw(body=sse(_chunk({"role": "assistant", "content": ""}), {"error": error}, done=False))


def _status(status: int, error: dict[str, Any]) -> Raw:
    return Raw(body=json.dumps({"error": error}).encode(), status=status, content_type="application/json")


# Each wording in the provider's own words (a message, or the code/status/type word it sends).
SAID: dict[str, str] = {
    "overflow.openai": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    "overflow.responses": "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "overflow.context-length": "Input length 6491 exceeds context length 1500",
    "overflow.llamacpp": "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
    "overflow.vllm": "Input prompt (9000 tokens) is too long and exceeds limit of 8192",
    "overflow.gemini": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    "overflow.anthropic": "prompt is too long: 210000 tokens > 200000 maximum",
    "overflow.bedrock": "Input is too long for requested model.",
    "overflow.ollama": "the input length exceeds the context length",
    "overflow.mistral": "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    "overflow.reduce-messages": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens in "
                                "the messages, Please reduce the length of the messages.",
    "overflow.too-many-tokens": "llama_tokenize: too many tokens",
    "too-large.openai": "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, "
                        "Requested 50000. The input or output tokens must be reduced in order to run successfully.",
    "rate-limit.code": "rate_limit_exceeded",
    "rate-limit.class-name": "RateLimitError",
    "rate-limit.gemini": "RESOURCE_EXHAUSTED",
    "rate-limit.reason-phrase": "Too Many Requests",
    "rate-limit.openai-words": "Rate limit reached for gpt-4o in organization org-x on requests per min. Please try again in 1s.",
    "rate-limit.openai-tpm": "Limit 30000, Used 29500, Requested 900 (TPM). Please try again in 2s.",
    "failing.anthropic": "overloaded_error",
    "failing.openai": "server_error",
    "failing.gemini": "UNAVAILABLE",
    "failing.timeout": "Timeout",
    "key.openai": "invalid_api_key",
    "key.anthropic": "authentication_error",
    "key.gemini": "PERMISSION_DENIED",
    "key.gemini-400": "API key not valid. Please pass a valid API key.",
    "tls.nginx-plain-http": "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n"
                            "<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n</body>\r\n</html>\r\n",
    "request.stream-options-refused": "Unrecognized request argument supplied: stream_options",
    "request.encrypted-reasoning-refused": "Encrypted content is not supported with this model.",
}


def _params(table: dict[str, Any]) -> list[Any]:
    return [pytest.param(qid, marks=pytest.mark.quirk(qid), id=qid) for qid in table]


@pytest.mark.parametrize("qid", _params(SAID))
def test_each_wording_is_read_as_what_it_means(server: FakeServer, qid: str) -> None:
    words, said = data(qid, Wording), SAID[qid]
    assert pattern(qid).search(said), "the sample is not in the entry's words"
    notices: list[str] = []
    llm = _wire(server, "responses" if qid == "request.encrypted-reasoning-refused" else "chat", on_notice=notices.append)
    if words.means in ("overflow", "too large"):  # as a status and inside a 200 answer alike
        for refusal in (_status(429 if words.means == "too large" else 400, {"message": said}), _in_stream({"message": said})):
            server.add(refusal)
            with pytest.raises(ContextTooLongError):
                _ask(llm)
    elif words.means in ("rate limit", "failing"):  # retried with the usual backoff, then answered
        error = {"message": said} if words.looks_at == "message" else {"message": "slow down", "type": said}
        server.add(_in_stream(error), Reply(text="after the wait"))
        assert _ask(llm).message.content == "after the wait"
        what = "a rate limit" if words.means == "rate limit" else "an error"
        assert notices == [f"the endpoint reported {what} mid-answer; retrying in 0.0s (attempt 1 of 1)"]
    elif words.means == "refused key":
        server.add(_status(400, {"message": said}) if words.looks_at == "message" else _in_stream({"message": "no", "type": said}))
        with pytest.raises(AuthError):
            _ask(llm)
    elif words.means == "plain http to tls":
        server.add(Raw(body=said.encode(), status=400, content_type="text/html"))
        with pytest.raises(UnreachableError, match="the server speaks TLS: use https://"):
            _ask(llm)
    else:  # an option refused: sent once more without it
        server.add(_status(400, {"message": said}), Reply(text="without it"))
        assert _ask(llm).message.content == "without it"
        option = "stream_options" if qid == "request.stream-options-refused" else "include"
        assert [option in r for r in server.requests] == [True, False]
    # Each refusal asked once: nothing judged final was retried, nothing retried was judged final.
    assert len(server.requests) == (1 if words.means in ("refused key", "plain http to tls") else 2)


READ_FILE = {"type": "function", "function": {"name": "read_file", "description": "Reads a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["path"]}}}

# Each format as a model writes it when no parser catches the call: (the answer's text, its arguments).
WRITTEN: dict[str, tuple[str, dict[str, Any]]] = {
    "text.deepseek": ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file\n```json\n'
                      '{"path": "src/app.py"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', {"path": "src/app.py"}),
    "text.kimi": ('<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>'
                  '{"path": "src/app.py"}<|tool_call_end|>\n<|tool_calls_section_end|>', {"path": "src/app.py"}),
    "text.hermes": ('<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>',
                    {"path": "src/app.py"}),
    "text.qwen3-coder": ("<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
                         "<parameter=offset>\n40\n</parameter>\n</function>\n</tool_call>", {"path": "src/app.py", "offset": 40}),
    "text.invoke": ('<invoke name="read_file">\n<parameter name="path">src/app.py</parameter>\n</invoke>',
                    {"path": "src/app.py"}),
    "text.mistral": ('[TOOL_CALLS]read_file[ARGS]{"path": "src/app.py"}', {"path": "src/app.py"}),
    "text.llama": ('<|python_tag|>{"name": "read_file", "parameters": {"path": "src/app.py"}}<|eom_id|>',
                   {"path": "src/app.py"}),
    "text.granite": ('<|tool_call|>[{"name": "read_file", "arguments": {"path": "src/app.py"}}]', {"path": "src/app.py"}),
    "text.command-r": ('<|START_ACTION|>[{"tool_name": "read_file", "parameters": {"path": "src/app.py"}}]<|END_ACTION|>',
                       {"path": "src/app.py"}),
    "text.harmony": ('<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>'
                     '{"path":"src/app.py"}<|call|>', {"path": "src/app.py"}),
    "text.glm": ("<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>src/app.py</arg_value>\n</tool_call>",
                 {"path": "src/app.py"}),
    "text.functionary": ('<function=read_file>{"path": "src/app.py"}</function>', {"path": "src/app.py"}),
    # Kimi K3's XTML tools channel (vLLM's kimi_k3 parser), its string argument raw, the other typed.
    "text.kimi-k3": ('<|open|>tools<|sep|><|open|>call tool="read_file" index="1"<|sep|><|open|>argument key="path" '
                     'type="string"<|sep|>src/app.py<|close|>argument<|sep|><|open|>argument key="offset" type="integer"'
                     '<|sep|>40<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>',
                     {"path": "src/app.py", "offset": 40}),
    # Gemma 4's call tokens (Ollama's parser tests): bare keys, strings between <|"|>.
    "text.gemma4": ('<|tool_call>call:read_file{path:<|"|>src/app.py<|"|>,offset:40}<tool_call|>',
                    {"path": "src/app.py", "offset": 40}),
    "text.tool-code": ('```tool_code\nread_file(path="src/app.py")\n```', {"path": "src/app.py"}),
    # No marker: each ends the answer, after the prose.
    "text.json": ('{"name": "read_file", "parameters": {"path": "src/app.py"}}', {"path": "src/app.py"}),
    "text.pythonic": ("[read_file(path='src/app.py', offset=40)]", {"path": "src/app.py", "offset": 40}),
    "text.glm4-0414": ('read_file\n{"path": "src/app.py"}<|observation|>', {"path": "src/app.py"}),
}


@pytest.mark.parametrize("qid", _params(WRITTEN))
def test_each_text_call_format_is_read_back_as_the_call(server: FakeServer, qid: str) -> None:
    text, arguments = WRITTEN[qid]
    server.add(Reply(text=f"Let me look.\n{text}", chunk_size=3))
    shown: list[str] = []
    done = _ask(_wire(server), tools=[READ_FILE], shown=shown)
    assert [(c.name, json.loads(c.arguments)) for c in done.message.tool_calls] == [("read_file", arguments)]
    assert done.message.recovered is not None and done.message.recovered[0] == data(qid, TextFormat).name
    assert done.finish_reason == "tool_calls" and done.message.content == "Let me look."
    seen = "".join(shown)  # the call itself is held back while it streams, never shown as the answer
    assert seen.startswith("Let me look.\n") and "read_file" not in seen and "src/app.py" not in seen


@pytest.mark.parametrize(("qid", "fields", "source"), [
    pytest.param("window.mistral", {"max_context_length": 32768}, "endpoint /models max_context_length",
                 marks=pytest.mark.quirk("window.mistral"), id="mistral"),
    pytest.param("window.openrouter-top-provider", {"top_provider": {"context_length": 200000, "max_completion_tokens": 8}},
                 "endpoint /models top_provider context_length", marks=pytest.mark.quirk("window.openrouter-top-provider"),
                 id="openrouter-top-provider"),
])
def test_a_window_named_only_there_is_read(qid: str, fields: dict[str, Any], source: str) -> None:
    with FakeServer([], model_fields=fields) as server:
        window, answered = asyncio.run(endpoint_window(server.base_url, "fake-model", "k"))
    assert answered and window is not None
    tokens = fields.get("max_context_length") or fields["top_provider"]["context_length"]
    assert (window.tokens, window.source) == (tokens, source)


@pytest.mark.quirk("error.object-body")
def test_a_top_level_object_error_is_read_as_the_error(server: FakeServer) -> None:
    vllm = {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested "
                                          "5000 tokens.", "type": "BadRequestError", "param": None, "code": 400}
    server.add(Raw(body=json.dumps(vllm).encode(), status=400, content_type="application/json"),
               Raw(body=sse(_chunk({"role": "assistant", "content": ""}), vllm, done=False)))
    for _ in range(2):  # as a status, and inside a 200 stream (where, unmarked, it would be read as a chunk)
        with pytest.raises(ContextTooLongError, match="maximum context length is 4096"):
            _ask(_wire(server))
    assert len(server.requests) == 2


@pytest.mark.quirk("error.detail-body")
@pytest.mark.parametrize("body", [{"detail": "Model fake-model is not served here"},
                                  {"error": {"msg": "Model fake-model is not served here", "code": 40001}}])
def test_an_error_in_fastapis_words_keeps_its_message(server: FakeServer, body: dict[str, Any]) -> None:
    server.add(Raw(body=json.dumps(body).encode(), status=400, content_type="application/json"))
    with pytest.raises(EndpointError, match="the model endpoint answered 400: Model fake-model is not served here"):
        _ask(_wire(server))


@pytest.mark.quirk("reasoning.reasoning")
def test_thinking_in_reasoning_is_kept_apart_and_sent_back_under_that_name(server: FakeServer) -> None:
    # vLLM 0.11 and later stream `delta.reasoning` (no reasoning_content, no details).
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    server.add(Raw(body=sse(_chunk({"role": "assistant", "content": "", "reasoning": "First I "}),
                            _chunk({"content": None, "reasoning": "read a."}), _chunk({"tool_calls": [call]}),
                            _chunk({}, "tool_calls"))), Reply(text="read"))
    thought: list[str] = []
    done = _ask(_wire(server), tools=[READ_FILE], thought=thought)
    assert ("".join(thought), done.message.content, done.message.reasoning) == ("First I read a.", None, "First I read a.")
    _ask(_wire(server), [Message.user("hi"), done.message, Message.tool("c1", "contents")], [READ_FILE])
    [assistant] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant["reasoning"] == "First I read a." and "reasoning_content" not in assistant


def _named(*events: dict[str, Any]) -> tuple[bytes, ...]:
    return tuple(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.quirk("reasoning.text-events")
def test_raw_reasoning_events_on_the_responses_wire_are_thinking_not_answer(server: FakeServer) -> None:
    # gpt-oss behind vLLM or LM Studio streams its raw chain of thought as reasoning_text deltas.
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": ""}]}
    server.add(Raw(body=_named(
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.reasoning_text.delta", "item_id": "rs_1", "output_index": 0, "content_index": 0, "delta": "The user "},
        {"type": "response.reasoning_text.delta", "item_id": "rs_1", "output_index": 0, "content_index": 0, "delta": "greets."},
        {"type": "response.output_text.delta", "item_id": "m1", "output_index": 1, "content_index": 0, "delta": "Hello!"},
        {"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": [],
                                                    "usage": {"input_tokens": 5, "output_tokens": 4}}})))
    thought: list[str] = []
    shown: list[str] = []
    done = _ask(_wire(server, "responses"), shown=shown, thought=thought)
    assert ("".join(thought), "".join(shown), done.message.content) == ("The user greets.", "Hello!", "Hello!")
    assert done.message.reasoning == "The user greets."


@pytest.mark.quirk("stream.content-parts")
def test_content_sent_as_parts_is_the_answer_without_the_thinking_parts(server: FakeServer) -> None:
    # Mistral's reasoning models stream content as a list of chunks, thinking ones among them.
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Greet back."}]}
    server.add(Raw(body=sse(_chunk({"role": "assistant", "content": [thinking]}),
                            _chunk({"content": [{"type": "text", "text": "Hel"}]}),
                            _chunk({"content": [{"type": "text", "text": "lo"}]}, "stop"))))
    shown: list[str] = []
    done = _ask(_wire(server), shown=shown)
    assert (done.message.content, "".join(shown)) == ("Hello", "Hello")
