"""Sub-agents end to end: a child with its own history and tools, permissions never wider than
the parent's, approvals through the parent's UI, the board, nesting, and cancellation."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nanohermes.turn.agent import Agent
from nanohermes.assemble import assemble_pool, build_agent, child_factory
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, ModelStarted, Notice, RecordingUI, SubagentEvent, TextDelta, ToolFinished
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.turn.session import Session
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply
from nanohermes.tools import subagents as subagent_tools
from nanohermes.tools.files import ListDir, ReadFile
from nanohermes.tools.subagents import SubagentManager
from tool_support import TinyWrite


AGENTS = {
    "explore": {"description": "Reads code", "prompt": "Only read; never change files.", "tools": ["read_file", "list_dir"]},
    "writer": {"description": "Writes files", "tools": ["write_file", "read_file"]},
}


@dataclass
class Family:
    parent: Agent
    manager: SubagentManager
    ui: RecordingUI
    child_llm: ScriptedLLM


def family(ws: Path, *, parent_script: list[Any] = (), child_script: list[Any] = (), mode: str = "default",
           limits: Limits | None = None, answers: list[Any] | None = None,  # type: ignore[assignment]
           agents: dict[str, Any] | None = None, folder: Path | None = None, child_model: str = "scripted") -> Family:
    ui = RecordingUI(answers=list(answers or []))
    # An endpoint that answers nothing (a closed port here): each window comes from the table
    # or the config, and a budget set in `limits` is the person's, as a config file sets it.
    settings: dict[str, Any] = {"subagents": agents or AGENTS, "base_url": "http://127.0.0.1:9/v1"}
    if limits is not None and limits.session_budget_chars != Limits().session_budget_chars:
        settings["session_budget_chars"] = limits.session_budget_chars
    config = Config.from_dict(settings)
    limits = limits or Limits()
    child_llm = ScriptedLLM(list(child_script), model=child_model)
    runtime = Runtime(tools=[], config=config, workspace=ws, ui=ui, policy=Policy(mode=mode), limits=limits,
                      session=Session(side_dir=folder))
    manager = SubagentManager(configs=config.subagents, make_llm=lambda model: child_llm, ui=ui, limits=limits,
                              system_prompt="parent prompt", max_turns=5, parent=runtime, build=child_factory(runtime))
    runtime.set_tools(assemble_pool([ReadFile(), ListDir(), TinyWrite()], subagent_tools.tools(manager)))
    parent = Agent(llm=ScriptedLLM(list(parent_script)), runtime=runtime, ui=ui, system_prompt="parent prompt")
    return Family(parent, manager, ui, child_llm)


def test_a_childs_budget_follows_its_own_models_window(workspace: Path) -> None:
    """A sub-agent on another model compacts at a share of that model's window, not at the
    parent's budget."""
    from nanohermes.turn.window import CHARS_PER_TOKEN, FAMILIES

    f = family(workspace, child_model="gpt-4o",
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "look", "wait": True})),
                              Reply(text="ok")],
               child_script=[Reply(text="looked")])
    asyncio.run(f.parent.ask("go"))
    [run] = f.manager.runs.values()
    assert run.agent is not None
    share = f.parent.runtime.config.compact_at_share
    expected = int(FAMILIES["gpt-4o"] * share) * CHARS_PER_TOKEN
    assert run.agent.runtime.limits.session_budget_chars == expected
    assert run.agent.compactor is not None and run.agent.compactor.limits.session_budget_chars == expected
    assert f.parent.runtime.limits.session_budget_chars != expected  # the parent's is its own


def tool_results(agent: Agent) -> list[str]:
    return [m.content or "" for m in agent.session.history if m.role == "tool"]


def test_waited_child_has_its_own_history_prompt_and_tools(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    f = family(workspace,
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "What is in a.txt?", "wait": True})),
                              Reply(text="It says alpha.")],
               child_script=[tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="a.txt holds alpha")])
    result = asyncio.run(f.parent.ask("look"))
    assert result.text == "It says alpha."
    head, answer = tool_results(f.parent)[0].split("\n")
    assert head.startswith("sub-agent agent-1 (explore) completed ") and answer == "a.txt holds alpha", head
    assert f.manager.runs["agent-1"].status == "completed"
    first = f.child_llm.requests[0]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]  # fresh history: only the task
    assert first["messages"][1]["content"] == "What is in a.txt?"
    assert first["messages"][0]["content"].startswith("parent prompt\n\n# Your role\n")
    assert "`explore`" in first["messages"][0]["content"].split("\n")[3]
    assert "Only read; never change files." in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["list_dir", "read_file"]
    assert f.child_llm.requests[1]["messages"][-1]["content"] == "1\talpha"
    assert f.child_llm.violations == [] and f.parent.llm.violations == []  # type: ignore[attr-defined]


def test_child_is_denied_a_tool_its_parent_has(workspace: Path) -> None:
    f = family(workspace, mode="accept-edits",
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "write x", "wait": True})),
                              Reply(text="ok")],
               child_script=[tool_reply(call("write_file", {"path": "x", "content": "no"})), Reply(text="could not")])
    asyncio.run(f.parent.ask("go"))
    assert "write_file" in [t["function"]["name"] for t in f.parent.llm.requests[0]["tools"]]  # type: ignore[attr-defined]
    assert "write_file" not in [t["function"]["name"] for t in f.child_llm.requests[0]["tools"]]
    refused = f.child_llm.requests[1]["messages"][-1]["content"]
    assert refused.startswith("ERROR: unknown tool `write_file`;") and refused.endswith(": list_dir, read_file")
    assert not (workspace / "x").exists()


def test_child_never_has_more_permission_than_the_parents_mode(workspace: Path) -> None:
    # writer lists write_file, but the parent is in plan mode: the child cannot write either.
    f = family(workspace, mode="plan",
               parent_script=[tool_reply(call("subagent", {"agent": "writer", "task": "write x", "wait": True})),
                              Reply(text="ok")],
               child_script=[tool_reply(call("write_file", {"path": "x", "content": "no"})), Reply(text="blocked")])
    asyncio.run(f.parent.ask("go"))
    assert [t["function"]["name"] for t in f.child_llm.requests[0]["tools"]] == ["read_file"]
    assert f.child_llm.requests[1]["messages"][-1]["content"].startswith("ERROR: unknown tool `write_file`")
    assert not (workspace / "x").exists()


def test_child_approvals_go_to_the_parents_ui_marked_with_its_name(workspace: Path) -> None:
    f = family(workspace, answers=["once"],
               parent_script=[tool_reply(call("subagent", {"agent": "writer", "task": "write x", "wait": True})),
                              Reply(text="ok")],
               child_script=[tool_reply(call("write_file", {"path": "x", "content": "yes"})), Reply(text="wrote it")])
    asyncio.run(f.parent.ask("go"))
    [request] = f.ui.of(ApprovalRequest)
    assert (request.tool, request.agent) == ("write_file", "writer agent-1")
    assert (workspace / "x").read_text() == "yes"


def test_child_events_reach_the_parent_nested(workspace: Path) -> None:
    f = family(workspace,
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "t", "wait": True})), Reply(text="P")],
               child_script=[tool_reply(call("list_dir", {})), Reply(text="child words")])
    asyncio.run(f.parent.ask("go"))
    nested = f.ui.of(SubagentEvent)
    assert {(e.agent_id, e.agent) for e in nested} == {("agent-1", "explore")}
    inner = [type(e.event).__name__ for e in nested if type(e.event).__name__ != "MessageAdded"]
    assert inner[0] == "ModelStarted" and "ToolFinished" in inner and inner[-1] == "TurnEnded"
    assert "".join(e.text for e in f.ui.of(TextDelta)) == "P"  # the child's text is never the parent's
    assert [e.name for e in f.ui.of(ToolFinished)] == ["subagent"]


def test_background_run_and_the_board_with_a_lowered_preview(workspace: Path, tmp_path: Path) -> None:
    f = family(workspace, limits=Limits(agent_preview_chars=5), child_script=[Reply(text="abcdefghijkl")],
               folder=tmp_path / "session")

    async def go() -> tuple[str, str]:
        [started] = await f.parent.runtime.run_calls([ToolCall("1", "subagent", '{"agent": "explore", "task": "t"}')])
        await f.manager.wait(f.manager.runs["agent-1"])
        [board] = await f.parent.runtime.run_calls([ToolCall("2", "agent_list", "{}")])
        return started.content or "", board.content or ""

    started, board = asyncio.run(go())
    assert started.startswith("started sub-agent explore as agent-1;") and "agent_list" in started
    path = tmp_path / "session" / "agents" / "agent-1.md"
    head, result = board.split("\n")
    name, agent, status, took, calls = re.split(r"\s{2,}", head)
    assert (name, agent, status, calls) == ("agent-1", "explore", "completed", "0 tool calls") and took.endswith("s")
    assert result.startswith("  result: abcde… (12 chars, ") and " the first 5;" in result and f" {path} " in result
    assert path.read_text() == "abcdefghijkl"
    assert any(isinstance(e, Notice) and e.text.startswith("sub-agent agent-1 (explore) completed") for e in f.ui.events)


def test_unknown_subagent_lists_the_configured_ones(workspace: Path) -> None:
    f = family(workspace)
    out = asyncio.run(f.parent.runtime.run_calls([ToolCall("1", "subagent", '{"agent": "nope", "task": "t"}')]))
    refused = out[0].content or ""
    assert refused.startswith("ERROR: unknown sub-agent `nope`;") and refused.endswith(": explore, writer")
    assert f.manager.runs == {} and f.manager.board().endswith(": explore, writer")


def test_children_are_cancelled_with_their_parent(workspace: Path) -> None:
    f = family(workspace,
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "bg"}),
                                         call("subagent", {"agent": "explore", "task": "fg", "wait": True}))],
               child_script=[Reply(text="slow", delay=60), Reply(text="slow", delay=60)])

    async def go() -> None:
        task = asyncio.create_task(f.parent.ask("go"))
        while len([e for e in f.ui.of(SubagentEvent) if isinstance(e.event, ModelStarted)]) < 2:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # let the done-callbacks run
        for run in f.manager.runs.values():
            assert run.task_handle is not None
            await asyncio.gather(run.task_handle, return_exceptions=True)

    asyncio.run(go())
    assert [(r.id, r.status) for r in f.manager.runs.values()] == [("agent-1", "cancelled"), ("agent-2", "cancelled")]
    assert tool_results(f.parent)[1] == "interrupted by user"


def test_session_end_cancels_running_children(workspace: Path) -> None:
    f = family(workspace, child_script=[Reply(text="slow", delay=60)])

    async def go() -> None:
        await f.parent.runtime.run_calls([ToolCall("1", "subagent", '{"agent": "explore", "task": "t"}')])
        await f.manager.aclose()

    asyncio.run(go())
    assert f.manager.runs["agent-1"].status == "cancelled"
    assert any(isinstance(e, Notice) and e.text == "cancelled 1 running sub-agent at exit" for e in f.ui.events)


def test_waited_result_is_clamped_like_any_tool(workspace: Path) -> None:
    f = family(workspace, limits=Limits(max_output=40),
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "t", "wait": True})), Reply(text="ok")],
               child_script=[Reply(text="z" * 500)])
    asyncio.run(f.parent.ask("go"))
    assert "… output truncated (" in tool_results(f.parent)[0]


def test_tools_only_when_subagents_are_configured(workspace: Path) -> None:
    plain = build_agent(Config(), workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    assert {"subagent", "agent_list"}.isdisjoint(t.name for t in plain.agent.runtime.tools)
    cfg = Config.from_dict({"subagents": AGENTS})
    built = build_agent(cfg, workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    spec = next(t.spec() for t in built.agent.runtime.tools if t.name == "subagent")["function"]
    assert spec["parameters"]["properties"]["agent"]["enum"] == ["explore", "writer"]
    assert spec["description"].endswith(": explore: Reads code; writer: Writes files.")


def test_cli_end_to_end_with_the_fake_server(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("subagent", {"agent": "explore", "task": "read a.txt", "wait": True})),
               tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="child: alpha"), Reply(text="parent: done"))
    r = turn("-p", "go", "--output-format", "stream-json", server=server, config={"subagents": AGENTS})
    assert r.code == 0, r.err
    events = r.lines()
    nested = [e for e in events if e["type"] == "subagent_event"]
    assert nested and {e["agent"] for e in nested} == {"explore"}
    assert [e["event"]["type"] for e in nested if e["event"]["type"] in ("tool_started", "tool_finished")] == [
        "tool_started", "tool_finished"]
    assert events[-1]["result"] == "parent: done"
    child_request = server.requests[1]
    assert [t["function"]["name"] for t in child_request["tools"]] == ["list_dir", "read_file"]
    assert server.requests[3]["messages"][-1]["content"].endswith("child: alpha")


def test_child_tokens_count_in_the_session_priced_by_their_model(turn) -> None:  # type: ignore[no-untyped-def]
    with FakeServer(models=("fake-model", "cheap-model")) as server:  # the endpoint serves the child's model
        child_tokens_count_in_the_session_priced_by_their_model(turn, server)


def child_tokens_count_in_the_session_priced_by_their_model(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    agents = {"explore": {**AGENTS["explore"], "model": "cheap-model"}}
    prices = {"fake-model": {"input_per_mtok": 2.0, "output_per_mtok": 10.0},
              "cheap-model": {"input_per_mtok": 0.5, "output_per_mtok": 1.0}}
    hand_over = call("subagent", {"agent": "explore", "task": "look around", "wait": True})
    server.add(Reply(tool_calls=(hand_over,), usage=(1000, 100)), Reply(text="child: done", usage=(200, 20)),
               Reply(text="parent: done", usage=(3000, 50)))
    r = turn("-p", "go", "--output-format", "json", server=server, config={"subagents": agents, "prices": prices})
    assert r.code == 0, r.err
    assert server.requests[1]["model"] == "cheap-model"
    obj = r.json()
    assert (obj["usage"]["prompt_tokens"], obj["usage"]["completion_tokens"]) == (4200, 170)
    cost = obj["cost"]
    assert cost["priced"] is True and cost["unpriced_models"] == []
    assert cost["turn"]["cost_usd"] == round((4000 * 2 + 150 * 10 + 200 * 0.5 + 20 * 1) / 1e6, 6)
    assert cost["session"] == cost["turn"]

    # The session keeps them (per model) across --continue; a model without a price is named.
    server.add(Reply(text="again", usage=(10, 1)))
    again = turn("--continue", "-p", "once more", "--output-format", "json", server=server,
                config={"subagents": agents, "prices": {"fake-model": prices["fake-model"]}}).json()["cost"]
    assert (again["session"]["prompt_tokens"], again["session"]["completion_tokens"]) == (4210, 171)
    assert again["priced"] is False and again["unpriced_models"] == ["cheap-model"]
    assert again["session"]["cost_usd"] is None
    assert again["turn"]["cost_usd"] == round((10 * 2 + 1 * 10) / 1e6, 6)


def test_cli_text_mode_prints_only_the_parents_answer(turn, server: FakeServer) -> None:
    server.add(tool_reply(call("subagent", {"agent": "explore", "task": "say something", "wait": True})),
               Reply(text="child words"), Reply(text="parent words"))
    r = turn("-p", "go", server=server, config={"subagents": AGENTS})
    assert r.code == 0, r.err
    assert r.out == "parent words\n"


def test_unknown_tools_in_a_subagent_config_are_warned_about(workspace: Path) -> None:
    cfg = Config.from_dict({"subagents": {"x": {"description": "d", "tools": ["read_file", "no_such_tool"]}}})
    ui = RecordingUI()
    built = build_agent(cfg, workspace, ui, llm=ScriptedLLM(), save_session=False)
    asyncio.run(built.start())
    [warned] = [e.text for e in ui.of(Notice)]
    assert warned.startswith("sub-agent x ") and ": no_such_tool;" in warned, warned


def test_terminal_prompt_names_the_asking_sub_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from nanohermes.ui.headless import ask_on_terminal

    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    out = io.StringIO()
    reply = ask_on_terminal(ApprovalRequest(call_id="1", tool="write_file", summary="x", agent="writer agent-1"), out)
    assert reply.choice == "deny"
    asked = out.getvalue().split("\n")[1]
    assert "(sub-agent writer agent-1)" in asked and asked.endswith(" write_file: x"), asked


def test_verbose_progress_shows_child_calls_indented(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    server.add(tool_reply(call("subagent", {"agent": "explore", "task": "read", "wait": True})),
               tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="c"), Reply(text="p"))
    r = turn("-p", "go", "--verbose", server=server, config={"subagents": AGENTS})
    assert r.code == 0, r.err
    assert "  [explore agent-1] → read_file a.txt\n" in r.err
    assert r.err.index("→ subagent") < r.err.index("  [explore agent-1] → read_file")


def test_parent_and_child_prompts_never_overlap(workspace: Path) -> None:
    spans: list[tuple[str, float, float]] = []

    class SlowUI(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> Any:
            start = asyncio.get_running_loop().time()
            await asyncio.sleep(0.2)  # a person reading the prompt
            spans.append((request.agent or "parent", start, asyncio.get_running_loop().time()))
            return await super().confirm(request)

    f = family(workspace,
               parent_script=[tool_reply(call("subagent", {"agent": "writer", "task": "write c"}),
                                         call("write_file", {"path": "p", "content": "parent"})), Reply(text="ok")],
               child_script=[tool_reply(call("write_file", {"path": "c", "content": "child"})), Reply(text="done")])
    ui = SlowUI(answers=["once", "once"])
    f.parent.ui = f.parent.runtime.ui = f.manager.ui = ui

    async def go() -> None:
        await f.parent.ask("go")
        await f.manager.wait(f.manager.runs["agent-1"])

    asyncio.run(go())
    assert sorted(who for who, _, _ in spans) == ["parent", "writer agent-1"]
    (_, _, first_end), (_, second_start, _) = sorted(spans, key=lambda s: s[1])
    assert first_end <= second_start
    assert (workspace / "p").read_text() == "parent" and (workspace / "c").read_text() == "child"


@pytest.mark.parametrize("text", ["looking around", "<think>\nwhere?\n</think>\nlooking around",
                                  "where?\n</think>\nlooking around"], ids=["said", "think-block", "lone-closing-tag"])
def test_child_stopped_at_its_max_turns_reports_what_it_had(workspace: Path, text: str) -> None:
    agents = {"brief": {"description": "d", "tools": ["list_dir"], "max_turns": 1}}
    f = family(workspace, agents=agents,
               parent_script=[tool_reply(call("subagent", {"agent": "brief", "task": "t", "wait": True})), Reply(text="ok")],
               child_script=[tool_reply(call("list_dir", {}), text=text)])
    asyncio.run(f.parent.ask("go"))
    head, said, stopped = tool_results(f.parent)[0].split("\n")
    assert head.startswith("sub-agent agent-1 (brief) max_turns ") and said == "looking around"
    assert stopped.startswith("[stopped after 1 model call ")
    assert f.manager.runs["agent-1"].status == "max_turns"


def test_failed_child_is_an_error_for_the_waiting_parent_and_on_the_board(workspace: Path) -> None:
    f = family(workspace,
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "t", "wait": True})), Reply(text="ok")],
               child_script=[])  # the child's model has nothing to say: its endpoint fails
    asyncio.run(f.parent.ask("go"))
    failed = tool_results(f.parent)[0]
    assert failed.startswith("ERROR: sub-agent agent-1 (explore) ") and failed.endswith(": fake server script exhausted")
    assert f.manager.runs["agent-1"].status == "failed"
    assert f.manager.board().endswith("\n  error: fake server script exhausted")
    assert f.parent.llm.violations == []  # type: ignore[attr-defined]  # the parent went on


def test_a_long_child_task_is_compacted_inside_the_budget(workspace: Path) -> None:
    (workspace / "big.txt").write_text("b" * 5000)
    f = family(workspace, limits=Limits(session_budget_chars=1000, compact_keep_chars=10),
               parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "read big.txt", "wait": True})),
                              Reply(text="ok")],
               child_script=[tool_reply(call("read_file", {"path": "big.txt"})), Reply(text="Goal: read big.txt"),
                             Reply(text="it is all b")])
    asyncio.run(f.parent.ask("go"))
    assert tool_results(f.parent)[0].endswith("\nit is all b")
    assert f.child_llm.requests[1]["messages"][0]["content"].startswith("You compact the conversation")
    compacted = [e.event.text for e in f.ui.of(SubagentEvent) if isinstance(e.event, Notice)]
    assert any(t.startswith("compacted 1 older messages") for t in compacted)


def test_a_session_not_saved_leaves_no_results_folder_behind(cli, server: FakeServer, tmp_path: Path) -> None:
    # Without a session folder the children's whole results go to a temporary folder, read
    # while the session lasts and removed when it ends.
    temp = tmp_path / "temp"
    temp.mkdir()
    server.add(tool_reply(call("subagent", {"agent": "explore", "task": "look", "wait": True})),
               Reply(text="child: " + "found it " * 50), Reply(text="parent: done"))
    r = cli("-p", "go", "--no-session", server=server, config={"subagents": AGENTS}, env={"TMPDIR": str(temp)})
    assert (r.code, r.out) == (0, "parent: done\n"), r.err
    assert "child: found it" in server.requests[2]["messages"][-1]["content"]
    assert list(temp.iterdir()) == []


# -- a child is built as the session's own agent is: the same wiring reaches it ------------

PATCH = """apply_patch <<'EOF'
*** Begin Patch
*** Update File: app.py
@@
-x = 1
+x = 2
*** End Patch
EOF
"""


def test_a_child_reads_a_patch_sent_through_the_shell_as_the_session_does(turn, server: FakeServer,
                                                                          workspace: Path) -> None:
    """How a session's runtime reads calls reaches its children: a child whose tools are
    run_command and apply_patch, in accept-edits (a command would be asked, and refused
    without a terminal), has the patch it sends through the shell applied as an edit."""
    (workspace / "app.py").write_text("x = 1\n")
    agents = {"patcher": {"description": "Patches", "tools": ["read_file", "run_command", "apply_patch"]}}
    server.add(tool_reply(call("subagent", {"agent": "patcher", "task": "set x to 2", "wait": True})),
               tool_reply(call("read_file", {"path": "app.py"})), tool_reply(call("run_command", {"command": PATCH})),
               Reply(text="child: patched"), Reply(text="parent: done"))
    r = turn("-p", "go", "--mode", "accept-edits", server=server, config={"subagents": agents})
    assert (r.code, r.out) == (0, "parent: done\n"), r.err
    assert (workspace / "app.py").read_text() == "x = 2\n"
    child_result = [m for m in server.requests[3]["messages"] if m["role"] == "tool"][-1]["content"]
    assert child_result.startswith("patched app.py")


def test_a_childs_compaction_keeps_its_own_todo_list_as_the_sessions_does(workspace: Path) -> None:
    """The parts of the tool state a session keeps reach its children: a child's compaction
    repeats the child's todo list (not the parent's, which it never had)."""
    (workspace / "big.txt").write_text("b" * 5000)
    todos = [{"content": "read big.txt", "status": "in_progress"}]
    llm = ScriptedLLM([tool_reply(call("subagent", {"agent": "planner", "task": "read big.txt", "wait": True})),
                       tool_reply(call("todo_write", {"todos": todos})), tool_reply(call("read_file", {"path": "big.txt"})),
                       Reply(text="Goal: read big.txt"), Reply(text="it is all b"), Reply(text="ok")])
    config = Config.from_dict({"subagents": {"planner": {"description": "Plans", "tools": ["todo_write", "read_file"]}},
                               "session_budget_chars": 1000, "limits": {"compact_keep_chars": 10},
                               "permission_mode": "goal"})
    built = build_agent(config, workspace, RecordingUI(), llm=llm, save_session=False)
    asyncio.run(built.agent.ask("go"))
    summary_request = next(i for i, r in enumerate(llm.requests)
                           if r["messages"][0]["content"].startswith("You compact the conversation"))
    after = llm.requests[summary_request + 1]["messages"]
    assert after[1]["content"].endswith(":\n[~] 1. read big.txt")
    assert built.agent.session.saved_state() == {"todos": []}  # the parent's list was never written
