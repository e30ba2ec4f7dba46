"""The tool runtime in-process: batching, order, permissions at call time, errors, clamping."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from nanohermes.turn.agent import Agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI, ToolFinished, ToolStarted
from nanohermes.common.messages import Message, ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import INTERRUPTED, Runtime
from nanohermes.turn.session import Session
from nanohermes.testing import Reply, ScriptedLLM, call, tool_reply
from nanohermes.tools import Attempt, Approval, Params, Tool, ToolContext, ToolError
from nanohermes.tools.files import ListDir, ReadFile
from tool_support import TinyWrite


@dataclass(frozen=True, kw_only=True)
class SlowParams(Params):
    seconds: float = 0.05


@dataclass(frozen=True, kw_only=True)
class Crashy(Tool):
    name: ClassVar[str] = "crashy"
    description: ClassVar[str] = "always crashes"
    params: ClassVar[type[Params]] = SlowParams
    approval: ClassVar[Approval] = "never"

    async def run(self, args: Params, ctx: ToolContext, attempt: Attempt) -> str:
        raise RuntimeError("boom")


@dataclass(frozen=True, kw_only=True)
class Sleeper(Tool):
    name: ClassVar[str] = "sleeper"
    description: ClassVar[str] = "sleeps"
    params: ClassVar[type[Params]] = SlowParams
    approval: ClassVar[Approval] = "never"

    async def run(self, args: Params, ctx: ToolContext, attempt: Attempt) -> str:
        assert isinstance(args, SlowParams)
        await asyncio.sleep(args.seconds)
        if args.seconds < 0:
            raise ToolError("negative")
        return "slept"


def make_runtime(ws: Path, ui: RecordingUI, *, mode: str = "default", limits: Limits | None = None,
                 tools: list[Tool] | None = None, folder: Path | None = None) -> Runtime:
    return Runtime(tools=tools or [ListDir(), ReadFile(), TinyWrite(), Crashy(), Sleeper()], config=Config(),
                   workspace=ws, ui=ui, policy=Policy(mode=mode), limits=limits or Limits(), session=Session(side_dir=folder))


def run_calls(rt: Runtime, *calls: ToolCall) -> list[Message]:
    return asyncio.run(rt.run_calls(calls))


def tc(id: str, name: str, args: str) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=args)


def test_parallel_read_only_calls_overlap_and_keep_call_order(workspace: Path) -> None:
    (workspace / "a").write_text("A")
    (workspace / "b").write_text("B")
    ui = RecordingUI()
    out = run_calls(make_runtime(workspace, ui), tc("1", "read_file", '{"path":"a"}'), tc("2", "read_file", '{"path":"b"}'))
    assert [m.content for m in out] == ["1\tA", "1\tB"]
    kinds = [(type(e).__name__, e.call_id) for e in ui.events if isinstance(e, (ToolStarted, ToolFinished))]
    # Both started before either finished: they ran in one batch.
    assert [k for k, _ in kinds[:2]] == ["ToolStarted", "ToolStarted"]


def test_unsafe_calls_run_alone_in_order(workspace: Path) -> None:
    ui = RecordingUI(answers=["once", "once"])
    out = run_calls(make_runtime(workspace, ui), tc("1", "write_file", '{"path":"x","content":"1"}'),
                    tc("2", "write_file", '{"path":"x","content":"2"}'))
    assert [m.tool_call_id for m in out] == ["1", "2"]
    assert (workspace / "x").read_text() == "2"
    kinds = [type(e).__name__ for e in ui.events if isinstance(e, (ToolStarted, ToolFinished))]
    assert kinds == ["ToolStarted", "ToolFinished", "ToolStarted", "ToolFinished"]


def test_plan_mode_hides_write_tools_and_refuses_a_replayed_call(workspace: Path) -> None:
    ui = RecordingUI()
    rt = make_runtime(workspace, ui, mode="plan")
    assert "write_file" not in [s["function"]["name"] for s in rt.specs()]
    out = run_calls(rt, tc("w", "write_file", '{"path":"x","content":"no"}'))
    assert out[0].content == "ERROR: write_file is not available in plan mode"
    assert not (workspace / "x").exists()


def test_denied_approval_returns_denial_text_with_note(workspace: Path) -> None:
    from nanohermes.common.events import ApprovalReply

    ui = RecordingUI(answers=[ApprovalReply("deny", "use a temp dir")])
    out = run_calls(make_runtime(workspace, ui), tc("w", "write_file", '{"path":"x"}'))
    # The note is the instruction: the result does not also say "ask what to do instead".
    denied = out[0].content or ""
    assert denied.split("\n")[0].endswith(": use a temp dir") and "ask what to do instead" not in denied, denied
    assert not (workspace / "x").exists()


def test_always_is_remembered_for_the_session(workspace: Path) -> None:
    ui = RecordingUI(answers=["always"])
    rt = make_runtime(workspace, ui)
    run_calls(rt, tc("1", "write_file", '{"path":"x"}'))
    run_calls(rt, tc("2", "write_file", '{"path":"y"}'))
    assert (workspace / "y").exists()
    assert len([e for e in ui.events if type(e).__name__ == "ApprovalRequest"]) == 1


def test_accept_edits_does_not_ask_for_edits(workspace: Path) -> None:
    ui = RecordingUI()
    out = run_calls(make_runtime(workspace, ui, mode="accept-edits"), tc("1", "write_file", '{"path":"x"}'))
    assert out[0].content == "wrote x"


def test_tool_crash_becomes_error_result(workspace: Path) -> None:
    out = run_calls(make_runtime(workspace, RecordingUI()), tc("c", "crashy", "{}"))
    assert (out[0].content or "").startswith("ERROR: crashy ") and (out[0].content or "").endswith(": RuntimeError: boom")


def test_wrong_type_and_unknown_field_name_the_field(workspace: Path) -> None:
    out = run_calls(make_runtime(workspace, RecordingUI()), tc("1", "read_file", '{"path": 3}'),
                    tc("2", "read_file", '{"path": "a", "bogus": 1}'), tc("3", "read_file", '[1]'))
    said = [m.content or "" for m in out]
    assert said[0].startswith("ERROR: read_file: field `path` ") and " a string, not an integer" in said[0]
    assert said[1].startswith("ERROR: read_file: ") and said[1].endswith(" `bogus`")
    assert said[2].startswith("ERROR: arguments for read_file ") and said[2].endswith(" got list")


def test_empty_required_string_fails_before_io(workspace: Path) -> None:
    out = run_calls(make_runtime(workspace, RecordingUI()), tc("1", "read_file", '{"path": "  "}'))
    assert out[0].content == "ERROR: read_file: path must not be empty"


def test_errors_are_clamped_too(workspace: Path) -> None:
    rt = make_runtime(workspace, RecordingUI(), limits=Limits(max_output=3))
    out = run_calls(rt, tc("1", "crashy", "{}"))
    full = "ERROR: crashy failed unexpectedly: RuntimeError: boom"
    assert out[0].content == f"ER\n… output truncated ({len(full) - 3} chars omitted) …\nm"


def test_aggregate_budget_persists_largest_results(workspace: Path, tmp_path: Path) -> None:
    (workspace / "big").write_text("x" * 50)
    (workspace / "d").mkdir()
    for i in range(40):
        (workspace / "d" / f"file{i:02}").write_text("")
    session = tmp_path / "session"
    rt = make_runtime(workspace, RecordingUI(), limits=Limits(aggregate_budget_chars=300, persisted_preview_chars=10),
                      folder=session)
    out = run_calls(rt, tc("r", "read_file", '{"path":"big"}'), tc("l", "list_dir", '{"path":"d"}'))
    assert out[0].content == "1\t" + "x" * 50  # read_file is never persisted
    listing = (session / "tool-results" / "l.txt").read_text()
    assert listing.startswith("file00  0\nfile01  0")
    assert out[1].content == (
        f'<persisted-output path="{session / "tool-results" / "l.txt"}">\n{listing[:10]}\n'
        f"… {len(listing)} chars in all; the full output is in the file above (read it with read_file offset/limit)\n"
        "</persisted-output>"
    )


def test_agent_cancel_answers_every_pending_call(workspace: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("sleeper", {"seconds": 0}, id="a"), call("sleeper", {"seconds": 30}, id="b"))])
    ui = RecordingUI()
    agent = Agent(llm=llm, runtime=make_runtime(workspace, ui), ui=ui, system_prompt="sys")

    async def go() -> None:
        task = asyncio.create_task(agent.ask("go"))
        while not any(isinstance(e, ToolStarted) and e.call_id == "b" for e in ui.events):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    tools = [m for m in agent.session.history if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tools] == [("a", "slept"), ("b", INTERRUPTED)]
    assert ui.events[-1].reason == "interrupted"  # type: ignore[union-attr]


def test_scripted_loop_ends_on_plain_answer(workspace: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("list_dir")), Reply(text="empty dir")])
    ui = RecordingUI()
    agent = Agent(llm=llm, runtime=make_runtime(workspace, ui), ui=ui, system_prompt="sys")
    result = asyncio.run(agent.ask("what is here?"))
    assert (result.reason, result.text, result.turns, result.tool_calls) == ("completed", "empty dir", 2, 1)
    assert llm.violations == []
    assert [m.role for m in agent.session.history] == ["user", "assistant", "tool", "assistant"]


def test_calls_read_ahead_run_as_read_and_are_read_again_after_the_pool_changed(workspace: Path) -> None:
    """The agent has the runtime read a message's calls while the turn settles before them
    (`foresee`); the run then uses that reading, unless the pool changed meanwhile (an MCP
    server's tools came or went): then the calls are read with the pool in force."""
    (workspace / "a.txt").write_text("alpha\n")
    ui = RecordingUI()
    rt = make_runtime(workspace, ui)
    first = (tc("1", "read_file", '{"path": "a.txt"}'), tc("2", "sleeper", '{"seconds": "x"}'))
    rt.foresee(first)
    out = asyncio.run(rt.run_calls(first))
    assert "alpha" in (out[0].content or "") and (out[1].content or "").startswith("ERROR: sleeper: ")

    second = (tc("3", "read_file", '{"path": "a.txt"}'),)
    rt.foresee(second)
    rt.set_tools([ListDir(), TinyWrite()])
    out = asyncio.run(rt.run_calls(second))
    assert (out[0].content or "").startswith("ERROR: unknown tool `read_file`")
