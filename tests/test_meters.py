"""Meters (tokens, cost, context) and the per-message aggregate budget across resume."""

from __future__ import annotations

import json
from pathlib import Path

from nanohermes.common.events import TurnEnded, UsageUpdate
from nanohermes.common.messages import Usage
from nanohermes.turn.meters import Meter, format_context, format_cost
from nanohermes.testing import FakeServer, Reply, call, tool_reply

PRICES = {"prices": {"fake-model": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}}}


def test_json_has_turn_and_session_usage_and_cost(turn, server: FakeServer) -> None:
    server.add(Reply(text="one", usage=(1000, 100)), tool_reply(call("list_dir"), text=""), Reply(text="two", usage=(3000, 50)))
    r1 = turn("-p", "first", "--output-format", "json", server=server, config=PRICES)
    assert r1.code == 0, r1.err
    r2 = turn("--continue", "-p", "second", "--output-format", "json", server=server, config=PRICES)
    obj = r2.json()
    # this turn: two model calls (10+5 from the tool call's default usage, then 3000+50)
    assert (obj["usage"]["prompt_tokens"], obj["usage"]["completion_tokens"]) == (3010, 55)
    cost = obj["cost"]
    assert cost["priced"] is True
    assert cost["turn"]["cost_usd"] == round((3010 * 2 + 55 * 10) / 1e6, 6)
    assert (cost["session"]["prompt_tokens"], cost["session"]["completion_tokens"]) == (4010, 155)
    assert cost["session"]["cost_usd"] == round((4010 * 2 + 155 * 10) / 1e6, 6)
    assert cost["session"]["estimated"] is False


def test_missing_usage_is_estimated_and_marked(turn, server: FakeServer) -> None:
    server.add(Reply(text="an answer of 27 characters.", usage=None))
    obj = turn("-p", "hello there", "--output-format", "json", server=server).json()
    sent = server.requests[0]["messages"]
    prompt = sum(len(m["content"]) for m in sent) // 4
    assert obj["usage"] == {"prompt_tokens": prompt, "completion_tokens": 27 // 4,
                            "total_tokens": obj["usage"]["total_tokens"], "estimated": True,
                            "input_tokens": prompt, "output_tokens": 27 // 4, "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0}
    assert obj["cost"]["priced"] is False and obj["cost"]["turn"]["cost_usd"] is None


def test_context_breakdown_in_json_matches_the_request(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "f.txt").write_text("hello\n")
    server.add(tool_reply(call("read_file", {"path": "f.txt"}, id="c1")), Reply(text="done"))
    obj = turn("-p", "read f", "--output-format", "json", server=server).json()
    req = server.requests[1]
    parts = obj["context"]["parts"]
    assert parts["system_prompt"]["chars"] == len(req["messages"][0]["content"])
    assert parts["tool_specs"]["chars"] == len(json.dumps(req["tools"], ensure_ascii=False))
    assert parts["tool_results"] == {"chars": len("1\thello"), "tokens_est": 2}
    call_chars = len("read_file") + len('{"path": "f.txt"}')
    assert parts["history"]["chars"] == len("read f") + call_chars + len("done")
    assert obj["context"]["messages"] == 4
    # fake-model is no known family and the fake server names no window: the configured default,
    # 80% of it in tokens, at 4 chars a token.
    window = obj["context"]["window"]
    assert window["tokens"] == 32_768 and window["source"].startswith("default: neither the endpoint nor the table")
    assert obj["context"]["session_budget_chars"] == 26_214 * 4


def test_meter_resets_per_turn_and_formats() -> None:
    m = Meter()
    m.on_event(UsageUpdate(usage=Usage(10, 1), total=Usage(10, 1), model="x"))
    m.on_event(TurnEnded(reason="completed", turns=1, tool_calls=0, text=""))
    m.on_event(UsageUpdate(usage=Usage(20, 2, estimated=True), total=Usage(30, 3, estimated=True), model="x"))
    assert (m.turn, m.session) == (Usage(20, 2, estimated=True), Usage(30, 3, estimated=True))
    from nanohermes.config import Config
    from nanohermes.turn.meters import cost_report

    assert m.turn_by_model == {"x": Usage(20, 2, estimated=True)}
    report = cost_report({"fake-model": m.turn}, {"fake-model": m.session}, Config.from_dict(PRICES), "fake-model")
    assert format_cost(report).splitlines()[:2] == ["this turn: 22 tokens (20 sent, 2 received) (estimated), $0.0001",
                                                    "session: 33 tokens (30 sent, 3 received) (estimated), $0.0001"]
    unpriced = cost_report({}, {}, Config(), "other")
    assert format_cost(unpriced).endswith("no price configured for other (config key `prices`)")
    mixed = cost_report({}, {"fake-model": Usage(10, 1), "y": Usage(5, 0), "z": Usage(1, 0)}, Config.from_dict(PRICES),
                        "fake-model")
    assert format_cost(mixed).splitlines()[1] == "session: 17 tokens (16 sent, 1 received)"
    assert format_cost(mixed).endswith("no price configured for y, z (config key `prices`)")


def test_format_context_rows() -> None:
    b = {"parts": {k: {"chars": 400, "tokens_est": 100} for k in ("system_prompt", "tool_specs", "history", "tool_results")},
         "total": {"chars": 1600, "tokens_est": 400}, "messages": 3, "session_budget_chars": 1000, "history_used": 0.8}
    lines = format_context(b).splitlines()
    assert lines[1].split() == ["system", "prompt", "400", "chars", "~", "100", "tokens"]
    assert lines[-1] == ("history is 80% of the session budget (1,000 chars; 3 messages); it is compacted past 100% "
                         "(the toolbar's \"context\" share)")


def test_bad_prices_config_names_the_key(workspace: Path, tmp_path: Path) -> None:
    import pytest

    from nanohermes.config import load_config
    from nanohermes.common.errors import ConfigError

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"prices": {"m": {"input_per_mtok": -1, "output_per_mtok": 1}}}))
    with pytest.raises(ConfigError, match=r"key `prices\.m\.input_per_mtok`: input should be greater than or equal to 0"):
        load_config(workspace, config_file=bad)


# -- the per-message aggregate ---------------------------------------------------------------
def test_aggregate_lowered_preview_and_file_exact_and_identical_after_resume(turn, server: FakeServer, workspace: Path,
                                                                              home: Path) -> None:
    (workspace / "many").mkdir()
    for i in range(60):
        (workspace / "many" / f"entry{i:03}.txt").write_text("x" * i)
    (workspace / "few").mkdir()
    (workspace / "few" / "one.txt").write_text("1")
    (workspace / "r.txt").write_text("r" * 400 + "\n")
    server.add(tool_reply(call("list_dir", {"path": "many"}, id="big"), call("list_dir", {"path": "few"}, id="small"),
                          call("read_file", {"path": "r.txt"}, id="read")),
               Reply(text="listed"), Reply(text="still here"))
    config = {"limits": {"aggregate_budget_chars": 900, "persisted_preview_chars": 120}}
    r = turn("-p", "list", "--output-format", "stream-json", server=server, config=config)
    assert r.code == 0, r.err
    full = {e["call_id"]: e["result"] for e in r.lines() if e["type"] == "tool_finished"}
    sid = r.lines()[-1]["session_id"]
    path = next((home / ".local/share/nanohermes/sessions").glob(f"*/{sid}")) / "tool-results" / "big.txt"
    assert path.read_text() == full["big"]  # the file holds the whole result
    sent = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert sent["big"] == (
        f'<persisted-output path="{path}">\n{full["big"][:120]}\n'
        f"… {len(full['big'])} chars in all; the full output is in the file above (read it with read_file offset/limit)\n"
        "</persisted-output>")
    assert sent["small"] == full["small"]  # under budget once the largest was persisted
    assert sent["read"] == full["read"]  # read_file is never persisted, even though it is larger than "small"
    assert sum(map(len, full.values())) > 900 >= sum(map(len, sent.values()))
    assert len(full["big"]) > len(full["read"]) > len(full["small"])

    r2 = turn("--continue", "-p", "again", server=server, config=config)
    assert r2.code == 0, r2.err
    before = server.requests[1]["messages"]
    assert server.requests[2]["messages"][1:len(before)] == before[1:]  # previews included, byte for byte
    assert server.requests[2]["messages"][len(before)] == {"role": "assistant", "content": "listed"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["big.txt"]  # nothing persisted again on resume


def test_persisted_file_names_are_safe_and_never_overwritten(workspace: Path, tmp_path: Path) -> None:
    from nanohermes.config import Config
    from nanohermes.common.events import NullUI
    from nanohermes.guard.permissions import Policy
    from nanohermes.turn.runtime import Runtime
    from nanohermes.turn.session import Session

    rt = Runtime(tools=[], config=Config(), workspace=workspace, ui=NullUI(), policy=Policy(), session=Session(side_dir=tmp_path / "s"))
    folder = tmp_path / "s" / "tool-results"
    rt.persist("../../evil", "e" * 3000)
    rt.persist("call_0", "1" * 3000)
    second = rt.persist("call_0", "2" * 3000)  # some endpoints reuse ids in every message
    assert sorted(p.name for p in folder.iterdir()) == ["_.._evil.txt", "call_0-2.txt", "call_0.txt"]
    assert (folder / "call_0.txt").read_text() == "1" * 3000
    assert second.startswith(f'<persisted-output path="{folder / "call_0-2.txt"}">\n{"2" * 2000}\n')


def test_aggregate_without_a_session_folder_clamps_with_a_visible_note(workspace: Path) -> None:
    import asyncio

    from nanohermes.common.budget import Limits, truncation_note
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI, ToolFinished
    from nanohermes.common.messages import ToolCall
    from nanohermes.guard.permissions import Policy
    from nanohermes.turn.runtime import UNSAVED_NOTE, Runtime
    from nanohermes.tools.files import ListDir

    for i in range(30):
        (workspace / f"f{i:02}").write_text("")
    ui = RecordingUI()
    rt = Runtime(tools=[ListDir()], config=Config(), workspace=workspace, ui=ui, policy=Policy(),
                 limits=Limits(aggregate_budget_chars=100, persisted_preview_chars=40))
    calls = [ToolCall("a", "list_dir", "{}"), ToolCall("b", "list_dir", '{"path": "f00"}')]
    out = asyncio.run(rt.run_calls(calls))
    full = "\n".join(f"f{i:02}  0" for i in range(30))
    assert out[0].content == full[:30] + truncation_note(len(full) - 40) + full[-10:] + UNSAVED_NOTE
    small = next(e.result for e in ui.of(ToolFinished) if e.call_id == "b")
    assert out[1].content == small  # clamping it would not have made it shorter


def test_a_result_whose_preview_would_be_longer_is_not_persisted(workspace: Path, tmp_path: Path) -> None:
    from nanohermes.config import Config
    from nanohermes.common.events import NullUI
    from nanohermes.guard.permissions import Policy
    from nanohermes.turn.runtime import Runtime
    from nanohermes.turn.session import Session

    rt = Runtime(tools=[], config=Config(), workspace=workspace, ui=NullUI(), policy=Policy(), session=Session(side_dir=tmp_path / "s"))
    assert rt.persist("c1", "x" * 50) == "x" * 50
    assert not (tmp_path / "s" / "tool-results" / "c1.txt").exists()


def test_usage_between_turns_is_not_the_next_turns() -> None:
    from nanohermes.common.events import ModelStarted

    m = Meter()
    for event in (ModelStarted(turn=1, model="a"), UsageUpdate(usage=Usage(10, 5), total=Usage(10, 5), model="a"),
                  TurnEnded(reason="completed", turns=1, tool_calls=0, text=""),
                  UsageUpdate(usage=Usage(700, 50), total=Usage(710, 55), model="a")):  # /compact, between turns
        m.on_event(event)
    assert m.turn == Usage(700, 50)  # /cost right after /compact shows what it spent
    for event in (ModelStarted(turn=1, model="a"), UsageUpdate(usage=Usage(20, 1), total=Usage(730, 56), model="a"),
                  ModelStarted(turn=2, model="a"), UsageUpdate(usage=Usage(30, 2), total=Usage(760, 58), model="a")):
        m.on_event(event)
    assert (m.turn, m.calls, m.session) == (Usage(50, 3), 2, Usage(760, 58))
