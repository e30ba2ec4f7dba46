"""`nanohermes -p` end to end against the loopback fake server.

What the process itself does (its stdin, its exit status on a usage or endpoint error, its help
and version) runs the real process (`cli`); what the turn does (the wire, retries, the output
formats, refusals, sessions) runs the same command line in this process (`turn`), which the
last test holds equal to the process in exit status and output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import Fault, FakeServer, Reply, call, tool_reply
from nanohermes.turn.runtime import DENIED


def test_text_answer_on_stdout(cli, server: FakeServer) -> None:
    server.add(Reply(text="Hello from the model."))
    r = cli("-p", "say hi", server=server)
    assert r.code == 0, r.err
    assert r.out == "Hello from the model.\n"
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "say hi"}


def test_json_answer_is_one_object(turn, server: FakeServer) -> None:
    server.add(Reply(text="42", usage=(100, 7)))
    r = turn("-p", "answer", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    obj = r.json()
    assert obj["result"] == "42"
    assert obj["exit_reason"] == "completed"
    assert obj["turns"] == 1 and obj["tool_calls"] == 0
    assert obj["usage"]["prompt_tokens"] == 100 and obj["usage"]["completion_tokens"] == 7
    assert obj["session_id"]
    assert obj["is_error"] is False


def test_stream_json_one_event_per_line(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="done"))
    r = turn("-p", "read it", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    events = r.lines()
    types = [e["type"] for e in events]
    assert types[:2] == ["system", "model_started"]  # what the run works with comes first
    assert "tool_started" in types and "tool_finished" in types
    assert [t for t in types if t in ("assistant", "user", "result")] == ["assistant", "user", "assistant", "result"]
    finished = next(e for e in events if e["type"] == "tool_finished")
    assert finished["result"] == "1\talpha"
    result = next(e for e in events if e["type"] == "user")["message"]["content"][0]
    assert (result["type"], result["content"], result["is_error"]) == ("tool_result", "1\talpha", False)
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "done"


def test_piped_stdin_is_appended_to_the_prompt(cli, server: FakeServer) -> None:
    server.add(Reply(text="ok"))
    r = cli("-p", "summarise:", stdin="line one\nline two\n", server=server)
    assert r.code == 0, r.err
    assert server.requests[0]["messages"][-1]["content"] == "summarise:\n\nline one\nline two\n"


@pytest.mark.parametrize("args", [("-p",), ("-p", "-"), ("--print",), ("-p", "--output-format", "text"),
                                  ("--output-format", "text", "-p")])
def test_p_without_a_prompt_reads_it_from_stdin(cli, server: FakeServer, args: tuple[str, ...]) -> None:
    server.add(Reply(text="ok"))
    r = cli(*args, stdin="what is 2 + 2?\n", server=server)
    assert (r.code, r.out) == (0, "ok\n"), r.err
    assert server.requests[0]["messages"][-1]["content"] == "what is 2 + 2?\n"  # the prompt itself, no "-"


def test_p_with_an_empty_stdin_is_a_usage_error(cli, server: FakeServer) -> None:
    r = cli("-p", stdin="", server=server)
    assert r.code == 2 and "the prompt is empty" in r.err and server.requests == []


def test_tool_round_trip(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "notes.md").write_text("first\nsecond\n")
    server.add(tool_reply(call("read_file", {"path": "notes.md"}, id="c1")), Reply(text="It has two lines."))
    r = turn("-p", "how many lines?", server=server)
    assert r.code == 0, r.err
    assert r.out == "It has two lines.\n"
    msgs = server.requests[1]["messages"]
    assert msgs[-1] == {"role": "tool", "content": "1\tfirst\n2\tsecond", "tool_call_id": "c1"}


def test_bad_calls_each_get_one_error_and_the_turn_goes_on(turn, server: FakeServer) -> None:
    server.add(
        tool_reply(call("no_such_tool", {}, id="u"), call("read_file", '{"path": ', id="j"), call("read_file", {}, id="m")),
        Reply(text="recovered"),
    )
    r = turn("-p", "go", server=server)
    assert r.code == 0, r.err
    assert r.out == "recovered\n"
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    head, names = results["u"].split("available tools: ")
    assert head == "ERROR: unknown tool `no_such_tool`; "
    assert {"list_dir", "read_file"} <= set(names.split(", "))
    assert results["j"].startswith("ERROR: arguments for read_file are not valid JSON")
    assert results["m"] == "ERROR: read_file: missing string field `path`"


def test_retries_429_twice_then_succeeds(turn, server: FakeServer) -> None:
    server.add(Fault(status=429, retry_after=0), Fault(status=429, retry_after=0), Reply(text="finally"))
    r = turn("-p", "x", server=server)
    assert r.code == 0, r.err
    assert r.out == "finally\n"
    assert len(server.requests) == 3
    assert r.err.count("endpoint answered 429; retrying") == 2


@pytest.mark.parametrize("fmt", ["text", "json", "stream-json"])
def test_warnings_reach_stderr_in_every_format(turn, server: FakeServer, fmt: str) -> None:
    server.add(Fault(status=429, retry_after=0), Reply(text="finally"))
    r = turn("-p", "x", "--output-format", fmt, server=server)
    assert r.code == 0, r.err
    assert r.err.count("endpoint answered 429;") == 1, r.err
    if fmt == "stream-json":  # and, for the script, as an event of the stream
        notices = [e for e in map(json.loads, r.out.splitlines()) if e["type"] == "notice"]
        assert [n["level"] for n in notices] == ["warning"] and "429" in notices[0]["text"]


def test_an_error_text_from_the_endpoint_is_shown_without_its_invisible_characters(turn, server: FakeServer) -> None:
    server.add(Fault(status=400, message="bad \u202erequest\u2066 \x1b[2Khere"))
    r = turn("-p", "x", server=server)
    assert r.code == 1
    assert "bad ?request? ?[2Khere" in r.err, r.err
    assert not any(ch in r.err for ch in "\u202e\u2066\x1b")


def test_retries_500_then_succeeds(turn, server: FakeServer) -> None:
    server.add(Fault(status=500), Reply(text="fine"))
    r = turn("-p", "x", server=server)
    assert (r.code, r.out) == (0, "fine\n"), r.err
    assert "endpoint answered 500; retrying" in r.err


def test_dropped_stream_is_retried_without_duplicated_text(turn, server: FakeServer) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.add(Reply(text=text, drop_after=12), Reply(text=text))
    r = turn("-p", "x", server=server)
    assert r.code == 0, r.err
    assert r.out == text + "\n"
    assert "stream dropped; retrying" in r.err
    assert len(server.requests) == 2


def test_bad_key_exits_1_with_hint(cli, workspace: Path) -> None:
    with FakeServer(api_key="right-key") as s:
        r = cli("-p", "x", server=s, env={"OPENAI_API_KEY": "wrong-key"})
    assert r.code == 1
    assert "refused the API key (401" in r.err
    assert "hint: check the key" in r.err
    assert "Traceback" not in r.err


def test_unreachable_base_url_exits_1_with_hint(cli) -> None:
    r = cli("-p", "x", "--base-url", "http://127.0.0.1:9/v1", config={"max_retries": 0})
    assert r.code == 1
    assert "cannot reach " in r.err and " http://127.0.0.1:9/v1" in r.err
    assert "hint: check base_url" in r.err


def test_bad_config_exits_2_naming_file_and_key(cli, home: Path) -> None:
    r = cli("-p", "x", config={"max_turns": "many"})
    assert r.code == 2
    cfg = home / ".config" / "nanohermes" / "config.json"
    assert f"{cfg}: key `max_turns`" in r.err
    assert "hint:" in r.err


def test_unknown_config_keys_warn(turn, server: FakeServer) -> None:
    server.add(Reply(text="ok"))
    r = turn("-p", "x", server=server, config={"modle": "typo"})
    assert r.code == 0
    assert "unknown config keys ignored: modle" in r.err


def test_turn_limit_exits_3(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a").write_text("a")
    server.add(*[tool_reply(call("read_file", {"path": "a"})) for _ in range(2)])
    r = turn("-p", "loop", "--max-turns", "2", "--output-format", "json", server=server)
    assert r.code == 3
    assert r.json()["exit_reason"] == "max_turns"
    assert len(server.requests) == 2


def test_approval_without_tty_is_refused_with_denial_text(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "secret.txt").write_text("s3cret")
    server.add(tool_reply(call("read_file", {"path": "secret.txt"}, id="r")), Reply(text="ok"))
    r = turn("-p", "read", server=server, config={"permissions": {"ask": ["read_file"]}})
    assert r.code == 0, r.err
    result = server.requests[1]["messages"][-1]
    assert result["content"] == DENIED  # the person's no, as the runtime words it


def test_yes_approves_what_would_ask(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "secret.txt").write_text("s3cret")
    server.add(tool_reply(call("read_file", {"path": "secret.txt"})), Reply(text="ok"))
    r = turn("-p", "read", "--yes", server=server, config={"permissions": {"ask": ["read_file"]}})
    assert r.code == 0, r.err
    assert server.requests[1]["messages"][-1]["content"] == "1\ts3cret"


def test_clamp_note_exact_with_max_output_lowered_to_100(turn, server: FakeServer, workspace: Path) -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(118))
    (workspace / "f.txt").write_text(line + "\n")
    server.add(tool_reply(call("read_file", {"path": "f.txt"})), Reply(text="ok"))
    r = turn("-p", "read", server=server, config={"limits": {"max_output": 100}})  # the least max_output takes
    assert r.code == 0, r.err
    # "1\t" + 118 letters is 120 chars: keep 75 + 25, omit exactly 20.
    shown = "1\t" + line
    assert server.requests[1]["messages"][-1]["content"] == (
        shown[:75] + "\n… output truncated (20 chars omitted) …\n" + shown[-25:])


def test_plan_mode_sends_no_write_tools(turn, server: FakeServer) -> None:
    server.add(Reply(text="ok"))
    r = turn("-p", "x", "--mode", "plan", server=server)
    assert r.code == 0, r.err
    names = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert names and not names & {"write_file", "edit_file", "apply_patch", "run_command", "git_commit"}


def test_session_transcript_is_saved(turn, server: FakeServer, home: Path) -> None:
    server.add(Reply(text="saved"))
    r = turn("-p", "remember me", "--output-format", "json", server=server)
    sid = r.json()["session_id"]
    files = list((home / ".local/share/nanohermes/sessions").glob(f"*/{sid}.jsonl"))
    assert len(files) == 1
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    assert lines[0]["type"] == "meta"
    assert [line["message"]["role"] for line in lines[1:] if line["type"] == "message"] == ["user", "assistant"]


def test_empty_prompt_is_a_usage_error(cli) -> None:
    r = cli("-p", "   ")
    assert r.code == 2
    assert "the prompt is empty" in r.err


def test_version(cli) -> None:
    r = cli("--version")
    assert r.code == 0
    assert r.out.startswith("nanohermes ")


# -- -p prints the answer, and only the answer ----------------------------------------------

def _text_and_json(run, server: FakeServer, script: list, *args: str) -> tuple:  # type: ignore[no-untyped-def]
    server.add(*script)
    text = run("-p", "go", *args, server=server)
    server.add(*script)
    obj = run("-p", "go", "--output-format", "json", *args, server=server)
    return text, obj


def test_text_output_is_the_final_answer_alone_and_matches_json(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    script = [tool_reply(call("read_file", {"path": "calc.py"}), text="Let me look."),
              Reply(text="calc.py defines add.")]
    text, obj = _text_and_json(turn, server, script)
    assert (text.code, text.out) == (0, "calc.py defines add.\n"), text.err
    assert text.out == obj.json()["result"] + "\n"
    assert "Let me look." not in text.err  # progress and narration need --verbose without a terminal
    server.add(*script)
    verbose = turn("-p", "go", "--verbose", server=server)
    assert verbose.out == "calc.py defines add.\n"
    assert "Let me look.\n→ read_file calc.py\n" in verbose.err  # the narration on its own line


def test_a_turn_limit_run_prints_no_narration(turn, server: FakeServer) -> None:
    script = [tool_reply(call("list_dir", {}), text="again"), tool_reply(call("list_dir", {}), text="again")]
    text, obj = _text_and_json(turn, server, script, "--max-turns", "2")
    assert (text.code, text.out) == (3, "")
    assert obj.json()["result"] == "" and obj.json()["exit_reason"] == "max_turns"


def test_a_restarted_stream_prints_only_the_final_answer(turn, server: FakeServer) -> None:
    script = [Reply(text="Hello there, friend", drop_after=8), Reply(text="Goodbye, entirely.")]
    text, obj = _text_and_json(turn, server, script)
    assert (text.code, text.out) == (0, "Goodbye, entirely.\n"), text.err
    assert obj.json()["result"] == "Goodbye, entirely."


def test_a_refusal_without_a_terminal_is_said_on_stderr_and_listed(turn, server: FakeServer, workspace: Path) -> None:
    script = [tool_reply(call("run_command", {"command": "touch made"}, id="c1")), Reply(text="could not")]
    text, obj = _text_and_json(turn, server, script)
    line = "nanohermes: refused run_command `touch made`: needs approval; rerun with --yes or add an allow rule\n"
    assert text.err.count("refused run_command") == 1 and line in text.err
    assert text.out == "could not\n"
    denials = obj.json()["permission_denials"]
    assert [(d["tool"], d["target"]) for d in denials] == [("run_command", "touch made")]
    assert denials[0]["reason"].startswith("needs approval")
    assert not (workspace / "made").exists()
    server.add(*script)
    verbose = turn("-p", "go", "--verbose", server=server)
    assert "← run_command denied" in verbose.err and "← run_command ok" not in verbose.err
    server.add(Reply(text="nothing refused"))
    assert turn("-p", "go", "--output-format", "json", server=server).json()["permission_denials"] == []


def test_calls_refused_by_a_rule_or_the_mode_are_listed_too(turn, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "rm -rf build"}, id="c1"),
                          call("write_file", {"path": "x.txt", "content": "x"}, id="c2")), Reply(text="stopped"))
    r = turn("-p", "go", "--yes", "--mode", "debug", "--output-format", "json", server=server,
            config={"permissions": {"deny": ["run_command(rm *)"]}})
    assert r.code == 0, r.err
    denials = r.json()["permission_denials"]
    assert [(d["tool"], d["target"], d["answered_by"]) for d in denials] == [
        ("run_command", "rm -rf build", "rules"), ("write_file", "x.txt", "rules")]
    assert "rm *" in denials[0]["reason"] and "debug mode" in denials[1]["reason"]
    assert not (workspace / "x.txt").exists()
    server.add(tool_reply(call("run_command", {"command": "rm -rf build"}, id="c1")), Reply(text="stopped"))
    lines = turn("-p", "go", "--yes", "--output-format", "stream-json", server=server,
                config={"permissions": {"deny": ["run_command(rm *)"]}}).lines()
    assert [e["tool"] for e in lines if e["type"] == "permission_denied"] == ["run_command"]
    assert lines[-1]["permission_denials"][0]["tool"] == "run_command"


def test_stream_json_starts_with_an_init_event(turn, server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="hi"))
    r = turn("-p", "go", "--output-format", "stream-json", "--mode", "plan", server=server)
    init = r.lines()[0]
    assert (init["type"], init["subtype"], init["permissionMode"]) == ("system", "init", "plan")
    assert (init["model"], init["mode"], init["cwd"]) == ("fake-model", "plan", str(workspace.resolve()))
    assert init["session_id"] == r.lines()[-1]["session_id"]
    assert "read_file" in init["tools"] and "write_file" not in init["tools"]  # plan mode hides writes


def test_a_failed_run_is_not_saved_and_continue_takes_the_last_real_session(turn, server: FakeServer) -> None:
    server.add(Reply(text="remembered: 7"))
    good = turn("-p", "remember 7", "--output-format", "json", server=server).json()["session_id"]
    server.add(Fault(status=401, message="bad key"))
    assert turn("-p", "this fails", server=server).code == 1
    r = turn("-p", "x", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", config={"max_retries": 0})
    assert r.code == 1
    listed = [json.loads(x)["id"] for x in turn("sessions", "--json").out.splitlines()]
    assert listed == [good]
    server.add(Reply(text="it was 7"))
    again = turn("-p", "which number?", "--continue", "--output-format", "json", server=server).json()
    assert again["session_id"] == good


# -- the command line itself -----------------------------------------------------------------

def test_help_shows_no_bool_placeholder_for_plain_flags(cli) -> None:
    r = cli("--help", env={"COLUMNS": "120"})
    assert r.code == 0
    assert "<bool>" not in r.out
    assert "--yes" in r.out and "--verbose" in r.out


def test_a_flag_followed_by_false_or_true_is_read_as_its_value(turn, server: FakeServer, workspace: Path) -> None:
    script = [tool_reply(call("run_command", {"command": "touch made"})), Reply(text="done")]
    server.add(*script)
    off = turn("-p", "go", "--yes", "false", server=server)
    assert off.code == 0, off.err
    assert "No such command" not in off.err and not (workspace / "made").exists()
    server.add(*script)
    on = turn("-p", "go", "--yes", "true", server=server)
    assert on.code == 0, on.err
    assert (workspace / "made").exists()


def test_a_bare_prompt_without_a_terminal_says_to_use_p(cli, server: FakeServer) -> None:
    r = cli("fix it", server=server)
    assert r.code == 2
    assert "No such command" not in r.err
    assert "without -p opens the REPL" in r.err and "needs a terminal" in r.err
    assert 'hint: ' in r.err and '-p "fix it"' in r.err
    assert server.requests == []


def test_an_answer_cut_short_by_the_token_limit_says_so(turn, server: FakeServer) -> None:
    from nanohermes.testing import Raw, sse

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    server.add(Raw(body=sse(chunk({"role": "assistant", "content": "The three steps are: one, two"}), chunk({}, "length"))))
    r = turn("-p", "list the steps", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert r.json()["result"] == "The three steps are: one, two"
    assert "cut short" in r.err and "(finish_reason length)" in r.err
    server.add(Reply(text="whole"))
    assert "cut short" not in turn("-p", "again", server=server).err


def steady(out: str) -> list[Any]:
    """Output lines with what differs from run to run (ids, times) blanked."""
    def blank(v: Any, key: str = "") -> Any:
        if key in ("session_id", "uuid", "id", "call_id", "tool_use_id", "elapsed") or key.endswith("_ms"):
            return "_"
        if isinstance(v, dict):
            return {k: blank(x, k) for k, x in v.items()}
        return [blank(x) for x in v] if isinstance(v, list) else v

    lines: list[Any] = []
    for line in out.splitlines():
        try:
            lines.append(blank(json.loads(line)))
        except ValueError:
            lines.append(line)
    return lines


@pytest.mark.parametrize("args, script", [
    (("-p", "say hi"), [Reply(text="Hello.")]),
    (("-p", "read it", "--output-format", "stream-json"), [tool_reply(call("read_file", {"path": "a.txt"})),
                                                           Reply(text="done")]),
    (("-p", "go", "--max-turns", "1"), [tool_reply(call("read_file", {"path": "a.txt"}))]),
    (("-p", "go"), [Fault(status=401)]),
    (("-p", ""), []),
    (("-p", "hi", "--mode", "nonsense"), []),
    (("doctor", "--help"), []),
    (("sessions", "--json"), []),
], ids=["text", "stream-json", "turn-limit", "refused-key", "empty-prompt", "bad-mode", "doctor-help", "sessions"])
def test_a_run_in_this_process_ends_as_the_process_does(cli, turn, server: FakeServer, workspace: Path,
                                                        args: tuple[str, ...], script: list[Any]) -> None:
    # The tests whose subject is the turn run it in process (cli.run_line): for that to test
    # what a person's process does, both must end with the same status and print the same.
    (workspace / "a.txt").write_text("alpha\n")
    seen = []
    for runner in (cli, turn):
        server.add(*script)
        r = runner(*args, server=server)
        seen.append((r.code, steady(r.out), steady(r.err)))
    assert seen[0][0] in (0, 1, 2, 3)
    assert seen[0][1] or seen[0][2]
    assert seen[1] == seen[0]
