"""Tool calls written as text in every current open-model format, end to end through the real
command line and the loopback fake server: the file on disk, the command actually run (each
appends a line to `ran.log`, so a command run twice shows), and what the model was sent next.
The bytes are those of the public parsers' tests and documentation (vLLM, SGLang, Ollama,
ms-swift, Google's Gemma guides), tool names changed to nanohermes's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def told(request: dict[str, Any]) -> list[str]:
    """The user messages of a request after the first: what nanohermes sent the model."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"][1:]


def log(workspace: Path) -> list[str]:
    path = workspace / "ran.log"
    return path.read_text().split() if path.exists() else []


def run(turn, server: FakeServer, text: str, *after: Reply, mode: str = "--yes") -> Any:  # type: ignore[no-untyped-def]
    server.add(Reply(text=text, chunk_size=5), *(after or (Reply(text="done"),)))
    r = turn("-p", "go", mode, server=server)
    assert r.code == 0, r.err
    return r


CMD = "echo {} >> ran.log"


def cmd(word: str) -> str:
    return CMD.format(word)


# -- each format: the call runs once, and its result says it was read from text -----------------

FORMATS = [
    pytest.param("text.glm4-0414", 'run_command\n{"command": "echo glm >> ran.log"}<|observation|>', ["glm"],
                 "GLM-4 name and JSON", marks=pytest.mark.quirk("text.glm4-0414"), id="glm4-0414"),
    pytest.param("text.glm4-0414", 'run_command\n{"command": "echo one >> ran.log"}<|assistant|>run_command\n'
                 '{"command": "echo two >> ran.log"}<|observation|>', ["one", "two"], "GLM-4 name and JSON",
                 marks=pytest.mark.quirk("text.glm4-0414"), id="glm4-0414-two"),
    pytest.param("text.kimi", '<|tool_call_section_begin|><|tool_call_begin|>functions.run_command:0'
                 '<|tool_call_argument_begin|>{"command": "echo kimi >> ran.log"}<|tool_call_end|>'
                 '<|tool_call_section_end|>', ["kimi"], "Kimi tool-call tokens",
                 marks=pytest.mark.quirk("text.kimi"), id="kimi-singular"),
    pytest.param("text.kimi-k3", '<|open|>response<|sep|>Running it.<|close|>response<|sep|><|open|>tools<|sep|>'
                 '<|open|>call tool="run_command" index="1"<|sep|><|open|>argument key="command" type="string"<|sep|>'
                 'echo k3 >> ran.log<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>', ["k3"],
                 "Kimi K3 tools channel", marks=pytest.mark.quirk("text.kimi-k3"), id="kimi-k3"),
    pytest.param("text.json", 'Let me log it.\n{"name": "run_command", "parameters": {"command": "echo json >> ran.log"}}',
                 ["json"], "JSON call", marks=pytest.mark.quirk("text.json"), id="llama-json-in-prose"),
    pytest.param("text.json", '{"name": "run_command", "parameters": {"command": "echo a >> ran.log"}}; '
                 '{"name": "run_command", "parameters": {"command": "echo b >> ran.log"}}', ["a", "b"], "JSON call",
                 marks=pytest.mark.quirk("text.json"), id="llama-json-semicolons"),
    pytest.param("text.json", 'Here is the result: {"name": "run_command", "parameters": {"command": "echo mid >> '
                 'ran.log"}} Would you like to know more?', ["mid"], "JSON call", marks=pytest.mark.quirk("text.json"),
                 id="llama-json-with-prose-after"),
    pytest.param("text.json", 'Logging: {"name": "run_command", "parameters": {"command": "echo a >> ran.log"}}; '
                 '{"name": "run_command", "parameters": {"command": "echo b >> ran.log"}} and then I will check.',
                 ["a", "b"], "JSON call", marks=pytest.mark.quirk("text.json"), id="llama-json-semicolons-in-prose"),
    pytest.param("text.json", '{"type": "function", "name": "run_command", "parameters": {"command": "echo t >> '
                 'ran.log"}}', ["t"], "JSON call", marks=pytest.mark.quirk("text.json"), id="llama-json-type-first"),
    pytest.param("text.json", 'Calling it.\n{"type": "function", "function": {"name": "run_command", "arguments": '
                 '"{\\"command\\": \\"echo api >> ran.log\\"}"}}', ["api"], "JSON call",
                 marks=pytest.mark.quirk("text.json"), id="the-apis-own-shape"),
    pytest.param("text.json", 'Done in a moment. {"name": "functions.run_command", "parameters": {"command": "echo ns >> '
                 'ran.log"}} Then I will look.', ["ns"], "JSON call", marks=pytest.mark.quirk("text.json"),
                 id="llama-json-namespaced-in-prose"),
    pytest.param("text.pythonic", "[run_command(command='echo py >> ran.log')]", ["py"], "pythonic call list",
                 marks=pytest.mark.quirk("text.pythonic"), id="pythonic"),
    pytest.param("text.pythonic", 'I will log two lines.\n[run_command(command="echo p1 >> ran.log"), '
                 'run_command(command="echo p2 >> ran.log")]', ["p1", "p2"], "pythonic call list",
                 marks=pytest.mark.quirk("text.pythonic"), id="pythonic-two-after-prose"),
    pytest.param("text.pythonic", '<|python_start|>[run_command(command="echo l4 >> ran.log")]<|python_end|>', ["l4"],
                 "pythonic call list", marks=pytest.mark.quirk("text.pythonic"), id="llama4-python-start"),
    pytest.param("text.tool-code", 'Let me check.\n```tool_code\nprint(default_api.run_command(command="echo tc >> '
                 'ran.log"))\n```', ["tc"], "tool_code block", marks=pytest.mark.quirk("text.tool-code"),
                 id="gemma-tool-code"),
    pytest.param("text.gemma4", '<|tool_call>call:run_command{command:<|"|>echo g4 >> ran.log<|"|>}<tool_call|>',
                 ["g4"], "Gemma 4 tool-call tokens", marks=pytest.mark.quirk("text.gemma4"), id="gemma4"),
    pytest.param("text.gemma4", '<|tool_call>:call:run_command{command:<|"|>echo g4 >> ran.log<|"|>}<turn|>', ["g4"],
                 "Gemma 4 tool-call tokens", marks=pytest.mark.quirk("text.gemma4"), id="gemma4-closed-by-turn-end"),
    pytest.param("text.gemma4-bare", '<|channel>thought\nI need to log it.\n<channel|>call:run_command{command:<|"|>echo '
                 'b1 >> ran.log<|"|>}\ncall:run_command{command:<|"|>echo b2 >> ran.log<|"|>,timeout_secs:30}',
                 ["b1", "b2"], "Gemma 4 call without its tokens", marks=pytest.mark.quirk("text.gemma4-bare"),
                 id="gemma4-without-its-tokens"),
    pytest.param("text.harmony", '<|start|>assistant to=functions.run_command<|channel|>commentary json<|message|>'
                 '{"command": "echo role >> ran.log"}<|call|>', ["role"], "gpt-oss harmony",
                 marks=pytest.mark.quirk("text.harmony"), id="harmony-recipient-in-role"),
    pytest.param("text.harmony", '<|channel|>commentary to=functions.run_command<|constrain|>json<|message|>'
                 '{"command": "echo chan >> ran.log"}<|call|>', ["chan"], "gpt-oss harmony",
                 marks=pytest.mark.quirk("text.harmony"), id="harmony-recipient-in-channel"),
    pytest.param("text.mistral", '[TOOL_CALLS]run_command[ARGS]{"command": "echo m1 >> ran.log"}'
                 '[TOOL_CALLS]run_command[ARGS]{"command": "echo m2 >> ran.log"}', ["m1", "m2"], "Mistral [TOOL_CALLS]",
                 marks=pytest.mark.quirk("text.mistral"), id="mistral-v11"),
]


@pytest.mark.parametrize("qid,text,ran,fmt", FORMATS)
def test_a_call_written_in_the_format_runs_once_and_says_it_came_as_text(turn, server: FakeServer, workspace: Path,
                                                                          qid: str, text: str, ran: list[str],
                                                                          fmt: str) -> None:
    r = run(turn, server, text)
    assert log(workspace) == ran  # each command once, in order
    assert len(server.requests) == 2 and r.out == "done\n"
    results = tool_results(server.requests[1])
    assert len(results) == len(ran)
    assert all(res.endswith(f"(this call was read from the text of your answer, where it was written as {fmt}; send "
                            "tool calls through the API's tool calls)") for res in results)
    [assistant] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["run_command"] * len(ran)


def test_a_harmony_call_whose_role_header_says_commentary_leaves_no_header_in_the_answer(
        turn, server: FakeServer, workspace: Path) -> None:
    run(turn, server, '<|channel|>analysis<|message|>Need to log.<|end|><|start|>commentary to=functions.run_command'
                      '<|channel|>commentary <|constrain|>json<|message|>{"command": "echo h >> ran.log"}<|call|>')
    assert log(workspace) == ["h"]
    [assistant] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == "<|channel|>analysis<|message|>Need to log.<|end|>"


def test_kimi_k3s_response_channel_is_the_answers_text(turn, server: FakeServer, workspace: Path) -> None:
    run(turn, server, FORMATS[3].values[1])
    [assistant] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == "Running it."


def test_gemma4_strings_keep_their_quotes_and_lines(turn, server: FakeServer, workspace: Path) -> None:
    text = ('<|tool_call>call:write_file{path:<|"|>notes.txt<|"|>,content:<|"|>say "hello", then: bye\n'
            'line two\n<|"|>}<tool_call|>')
    run(turn, server, text)
    assert (workspace / "notes.txt").read_text() == 'say "hello", then: bye\nline two\n'


def test_a_pythonic_write_creates_the_file(turn, server: FakeServer, workspace: Path) -> None:
    run(turn, server, '[write_file(path="a.txt", content="b")]')
    assert (workspace / "a.txt").read_text() == "b"


# -- prose that shows a call is not one: the rule, both sides --------------------------------

# The rule: a call with no marker of its own counts where it ends the answer and names an offered
# tool; inside prose, only a JSON call of an offered tool with a complete argument object counts.
@pytest.mark.parametrize("text", [
    'A weather tool takes {"name": "get_weather", "parameters": {"city": "Paris"}} and answers in degrees.',
    'To log, call {"name": "run_command", "parameters": {"timeout_secs": 5}} with your command and read the file.',
    'Example:\n```\n{"name": "run_command", "parameters": {"command": "echo no >> ran.log"}}\n```\nThat is the shape.',
    'Inline: `{"name": "run_command", "parameters": {"command": "echo no >> ran.log"}}` is the shape.',
    "You could run [run_command(command='echo no >> ran.log')] later, if you like.",
    'The answer ends with an object that is no call: {"name": "Ada", "age": 36}',
    'The record is {"name": "Ada"}',
    'result\n{"count": 3}',
], ids=["json-naming-no-tool-here", "json-missing-arguments", "json-in-a-fence", "json-in-inline-code",
        "pythonic-mid-prose", "a-json-object", "a-name-alone", "a-name-line-and-json"])
def test_prose_showing_a_call_is_the_answer_and_nothing_runs(turn, server: FakeServer, workspace: Path,
                                                             text: str) -> None:
    server.add(Reply(text=text))
    r = turn("-p", "go", "--yes", server=server)
    assert (r.code, r.out) == (0, text + "\n"), r.err
    assert len(server.requests) == 1 and log(workspace) == []


@pytest.mark.parametrize("text,problem,fmt", [
    ('Reading it.\n{"name": "read_file", "parameters": {"file": "a.txt"}}',
     "its arguments do not fit the tool: `read_file` needs `path`", "JSON call"),
    ("[read_file(path='a.txt', lines=3)]", "its arguments do not fit the tool: `read_file` has no parameter `lines`",
     "pythonic call list"),
    ("```tool_code\nimport numpy as np\nprint(np.zeros(3))\n```", "holds Python that is not a call of a tool",
     "tool_code block"),
    ('<|tool_call>call:read_file{path:<|"|>a.txt}<tool_call|>', "the arguments of `read_file` cannot be read",
     "Gemma 4 tool-call tokens"),
    ("<|open|>tools<|sep|><|open|>call tool=\"read_file\" index=\"1\"<|sep|>", "is not closed", "Kimi K3 tools channel"),
    ("[read_file(path=b'a.txt')]", "the argument `path` of `read_file` is a bytes value, which no tool takes",
     "pythonic call list"),
    ("[read_file('a.txt')]", "the arguments of `read_file` must be given by name", "pythonic call list"),
    ('{"name": "get_weather", "parameters": {"city": "Paris"}}', "`get_weather` is not a tool here (the tools are: ",
     "JSON call"),
    ("```tool_code\nread_file(path='a.txt', offset=1e999)\n```", "the argument `offset` of `read_file` is an infinite "
     "number", "tool_code block"),
], ids=["json-missing-field", "pythonic-unknown-field", "tool-code-not-a-call", "gemma4-unclosed-string", "k3-cut-off",
        "pythonic-bytes", "pythonic-by-position", "json-naming-no-tool-here", "tool-code-infinite"])
def test_a_call_that_cannot_run_goes_back_with_what_was_wrong(turn, server: FakeServer, workspace: Path, text: str,
                                                               problem: str, fmt: str) -> None:
    r = run(turn, server, text, Reply(text="sorry"))
    assert r.out == "sorry\n" and len(server.requests) == 2
    [error] = told(server.requests[1])
    assert error.startswith(f"ERROR: your answer holds what looks like a tool call written as text ({fmt}), and it "
                            "could not be run: ")
    assert problem in error and "Nothing was run." in error


# -- thinking never runs ---------------------------------------------------------------------

DRAFTS = [
    ("<think>I could run <tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo draft >> ran.log\"}}"
     "\n</tool_call> but let me be sure.</think>\n<tool_call>\n{\"name\": \"run_command\", \"arguments\": "
     "{\"command\": \"echo real >> ran.log\"}}\n</tool_call>"),
    ("<seed:think>First <seed:tool_call><function=run_command><parameter=command>echo draft >> ran.log</parameter>"
     "</function></seed:tool_call> maybe.</seed:think><seed:tool_call>\n<function=run_command>\n<parameter=command>\n"
     "echo real >> ran.log\n</parameter>\n</function>\n</seed:tool_call>"),
    ('[THINK]Plan: [TOOL_CALLS]run_command[ARGS]{"command": "echo draft >> ran.log"}[/THINK]'
     '[TOOL_CALLS]run_command[ARGS]{"command": "echo real >> ran.log"}'),
    ('<|channel|>analysis<|message|>Need to log. Use to=functions.run_command <|message|>{"command": "echo draft >> '
     'ran.log"}<|end|><|start|>assistant<|channel|>commentary to=functions.run_command <|constrain|>json<|message|>'
     '{"command": "echo real >> ran.log"}<|call|>'),
    ('<|channel>thought\nI will call <|tool_call>call:run_command{command:<|"|>echo draft >> ran.log<|"|>}<tool_call|>'
     '<channel|><|tool_call>call:run_command{command:<|"|>echo real >> ran.log<|"|>}<tool_call|>'),
    ('I thought about {"name": "run_command", "parameters": {"command": "echo draft >> ran.log"}} first.</think>\n'
     '{"name": "run_command", "parameters": {"command": "echo real >> ran.log"}}'),
]


@pytest.mark.quirk("reasoning.think-tags")
@pytest.mark.parametrize("text", DRAFTS, ids=["think", "seed-think", "mistral-think", "harmony-analysis",
                                              "gemma4-thought", "closing-tag-only"])
def test_a_draft_in_the_thinking_never_runs_and_the_real_call_runs_once(turn, server: FakeServer, workspace: Path,
                                                                        text: str) -> None:
    run(turn, server, text)
    assert log(workspace) == ["real"]
    assert len(tool_results(server.requests[1])) == 1


@pytest.mark.parametrize("reply", [
    Reply(reasoning='I will run <tool_call>\n{"name": "run_command", "arguments": {"command": "echo x >> ran.log"}}\n'
                    "</tool_call>"),
    Reply(reasoning='Call {"name": "run_command", "parameters": {"command": "echo x >> ran.log"}} now.'),
    Reply(text='<think>\n[TOOL_CALLS]run_command[ARGS]{"command": "echo x >> ran.log"}\n</think>\n\n'),
    Reply(text='<|start|>assistant<|channel|>analysis to=functions.run_command <|constrain|>json<|message|>'
               '{"command": "echo x >> ran.log"}<|call|>'),
], ids=["reasoning-content-hermes", "reasoning-content-json", "think-tags-only", "harmony-analysis-call"])
def test_a_reply_whose_only_call_is_in_its_thinking_is_told_to_send_it(turn, server: FakeServer, workspace: Path,
                                                                       reply: Reply) -> None:
    from nanohermes.testing import call

    server.add(reply, Reply(tool_calls=(call("run_command", {"command": "echo x >> ran.log"}),)), Reply(text="logged"))
    r = turn("-p", "go", "--yes", server=server)
    assert (r.code, r.out) == (0, "logged\n"), r.err
    assert log(workspace) == ["x"]  # the draft never ran; the call sent after the reminder ran once
    [reminder] = told(server.requests[1])
    # The reply goes back as it was, an empty one as empty text: OpenAI's API refuses a null content
    # without tool calls.
    [draft] = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert draft["content"] == (reply.text or "") and "tool_calls" not in draft
    assert reminder == ("ERROR: your reply has no answer and no tool call: its only call, to `run_command`, is in your "
                        "thinking, where calls are drafts and never run. Nothing was run. If you meant to make it, send "
                        "it now as tool call; otherwise give your answer.")


def test_thinking_beside_an_answer_is_not_sent_back(turn, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(reasoning='{"name": "run_command", "parameters": {"command": "echo x >> ran.log"}}',
                     text="No need to run anything."))
    r = turn("-p", "go", "--yes", server=server)
    assert (r.code, r.out) == (0, "No need to run anything.\n")
    assert len(server.requests) == 1 and log(workspace) == []


@pytest.mark.parametrize("limit", [0, 1])
def test_the_reminder_is_bounded_by_reasoning_call_retries(turn, server: FakeServer, workspace: Path,
                                                          limit: int) -> None:
    draft = Reply(reasoning='{"name": "run_command", "parameters": {"command": "echo x >> ran.log"}}')
    server.add(*([draft] * (limit + 1)))
    r = turn("-p", "go", "--yes", server=server, config={"limits": {"reasoning_call_retries": limit}})
    assert (r.code, r.out) == (0, ""), r.err
    assert len(server.requests) == limit + 1 and log(workspace) == []
    times = f"{limit} time{'s' if limit != 1 else ''}"
    assert (f"the reply's only tool call (`run_command`) was in its thinking, where calls never run; the model was "
            f"told {times} (limit reasoning_call_retries), so the turn ends with the answer as it is") in r.err


@pytest.mark.parametrize("call_text", [
    '[run_command(command="echo s >> ran.log")]',
    '{"name": "run_command", "parameters": {"command": "echo s >> ran.log"}} and I will check it.',
    '<|python_start|>[run_command(command="echo s >> ran.log")]<|python_end|>',
    '<|start|>assistant to=functions.run_command<|channel|>commentary json<|message|>{"command": "echo s >> ran.log"}',
    '<|assistant|>run_command\n{"command": "echo s >> ran.log"}<|observation|>',
], ids=["pythonic", "json-in-prose", "llama4-python-start", "harmony-role-header", "glm4-0414"])
def test_a_held_call_is_not_shown_and_prose_before_it_is(turn, server: FakeServer, workspace: Path,
                                                         call_text: str) -> None:
    server.add(Reply(text="Logging now. " + call_text, chunk_size=3), Reply(text="done"))
    r = turn("-p", "go", "--yes", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    assert log(workspace) == ["s"]
    streamed = "".join(e.get("text", "") for e in r.lines() if e.get("type") == "text_delta")
    after = "and I will check it." if call_text.endswith("check it.") else ""  # prose after the call is shown
    assert streamed == f"Logging now. {after}done"
    assert json.loads(r.out.strip().split("\n")[-1])["result"] == "done"


def test_a_long_line_that_cannot_begin_a_call_streams_on_and_is_not_held() -> None:
    """A name is at most 64 chars: a longer word at the end of what came is handed on as it
    arrives (a 120,000-char line held whole was scanned again with every piece)."""
    from nanohermes.llm.textcalls import TextHold

    out: list[str] = []
    hold = TextHold(out.append)
    for _ in range(100):
        hold.feed("x" * 50)
    assert len("".join(out)) == 5000 and not hold.holding
    hold.feed("\nread_file")  # a name alone on a line may be GLM's call beginning: held
    assert "".join(out) == "x" * 5000 + "\n"
    hold.release()
    assert "".join(out) == "x" * 5000 + "\nread_file"
