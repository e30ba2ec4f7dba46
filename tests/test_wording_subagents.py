"""What sub-agents make nanohermes say, each message once: a real parent and child agent with
scripted models. The other tests assert each run's status, history and tools; rewording a
message changes one row here."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import pytest
from test_subagents import family, tool_results
from wording_support import said

from nanohermes.assemble import build_agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, Notice, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply
from nanohermes.ui.headless import ask_on_terminal


def test_a_waited_childs_result_says(workspace: Path) -> None:
    f = family(workspace, parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "t", "wait": True})),
                                         Reply(text="ok")], child_script=[Reply(text="found it")])
    asyncio.run(f.parent.ask("go"))
    assert said(tool_results(f.parent)[0], "sub-agent agent-1 (explore) completed after {any}s:\nfound it")


def test_a_child_stopped_at_its_max_turns_says(workspace: Path) -> None:
    f = family(workspace, agents={"brief": {"description": "d", "tools": ["list_dir"], "max_turns": 1}},
               parent_script=[tool_reply(call("subagent", {"agent": "brief", "task": "t", "wait": True})), Reply(text="ok")],
               child_script=[tool_reply(call("list_dir", {}), text="looking")])
    asyncio.run(f.parent.ask("go"))
    assert said(tool_results(f.parent)[0],
                "sub-agent agent-1 (brief) max_turns after {any}s:\nlooking\n[stopped after 1 model call (max_turns)]")


def test_a_failed_child_says(workspace: Path) -> None:
    f = family(workspace, parent_script=[tool_reply(call("subagent", {"agent": "explore", "task": "t", "wait": True})),
                                         Reply(text="ok")])
    asyncio.run(f.parent.ask("go"))
    assert tool_results(f.parent)[0] == "ERROR: sub-agent agent-1 (explore) failed: fake server script exhausted"


def test_a_background_child_and_the_board_say(workspace: Path, tmp_path: Path) -> None:
    f = family(workspace, limits=Limits(agent_preview_chars=5), child_script=[Reply(text="abcdefghijkl")],
               folder=tmp_path / "session")
    assert f.manager.board() == "no sub-agents started yet; configured: explore, writer"

    async def go() -> list[str]:
        [started] = await f.parent.runtime.run_calls([ToolCall("1", "subagent", '{"agent": "explore", "task": "t"}')])
        await f.manager.wait(f.manager.runs["agent-1"])
        [board] = await f.parent.runtime.run_calls([ToolCall("2", "agent_list", "{}")])
        [unknown] = await f.parent.runtime.run_calls([ToolCall("3", "subagent", '{"agent": "nope", "task": "t"}')])
        return [started.content or "", board.content or "", unknown.content or ""]

    started, board, unknown = asyncio.run(go())
    assert started == ("started sub-agent explore as agent-1; it works in the background. Check agent_list for its "
                       "status and result.")
    assert said(board, "agent-1  explore  completed  {any}s  0 tool calls\n  result: abcde… (12 chars, showing the "
                       "first 5; full result: {path} (read it with read_file))",
                path=str(tmp_path / "session" / "agents" / "agent-1.md"))
    assert unknown == "ERROR: unknown sub-agent `nope`; configured: explore, writer"


def test_a_sub_agent_naming_unknown_tools_says(workspace: Path) -> None:
    ui = RecordingUI()
    cfg = Config.from_dict({"subagents": {"x": {"description": "d", "tools": ["read_file", "no_such_tool"]}}})
    asyncio.run(build_agent(cfg, workspace, ui, llm=ScriptedLLM(), save_session=False).start())
    assert [e.text for e in ui.of(Notice)] == [
        "sub-agent x lists tools that do not exist: no_such_tool; they are ignored (see /tools)"]


def test_a_childs_question_to_the_person_says_whose_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    out = io.StringIO()
    ask_on_terminal(ApprovalRequest(call_id="1", tool="write_file", summary="x", agent="writer agent-1"), out)
    assert out.getvalue().split("\n")[1] == "nanohermes (sub-agent writer agent-1) wants to run write_file: x"


def test_agent_files_not_offered_say_why(turn, server: FakeServer, workspace: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    agents = home / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "odd.md").write_text("---\nname: odd\nthis is no key\n---\nBody.")
    (agents / "bad name.md").write_text("---\nname: bad name\ndescription: x\n---\nBody.")
    (agents / "explore.md").write_text("---\ndescription: From the file\n---\nFile.")
    (workspace / ".claude" / "agents").mkdir(parents=True)
    (workspace / ".claude" / "agents" / "reader.md").write_text("---\nname: reader\ndescription: Reads\n---\nRead.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "go", server=server, config={"subagents": {"explore": {"description": "From the config"}}})
    assert sorted(line for line in ran.err.splitlines() if "not offered" in line) == sorted([
        f"nanohermes: warning: {agents / 'odd.md'}: sub-agent not offered: its front matter cannot be read (front "
        "matter line 3 is not `key: value`: 'this is no key')",
        f"nanohermes: warning: {agents / 'bad name.md'}: sub-agent name 'bad name' must be 1-40 letters, digits, - or "
        "single _; not offered",
        f"nanohermes: warning: {agents / 'explore.md'}: sub-agent explore is also defined in the config (subagents), "
        "which wins; not offered",
        f"nanohermes: warning: {workspace / '.claude' / 'agents'}: sub-agents not offered (reader): a project's agent "
        f"files are used only in a trusted project; to allow them, add \"{workspace.resolve()}\" to trusted_projects "
        "in your config"])


def test_a_sub_agents_model_the_endpoint_does_not_serve_says(turn, home: Path) -> None:  # type: ignore[no-untyped-def]
    from typing import Any

    from nanohermes.testing import Fault

    (home / ".claude" / "agents").mkdir(parents=True)
    (home / ".claude" / "agents" / "helper.md").write_text("---\ndescription: Helps\nmodel: gpt-4o-mini\n---\nHelp.")

    def serve(body: dict[str, Any]) -> Any:
        if body["model"] != "fake-model":
            return Fault(status=404, message=f"The model `{body['model']}` does not exist", code="model_not_found")
        return script.pop(0)

    script = [tool_reply(call("subagent", {"agent": "helper", "task": "help", "wait": True})),
              Reply(text="child: helped"), Reply(text="parent: done")]
    with FakeServer([serve] * 4, models_answer=Fault(status=404)) as server:
        ran = turn("-p", "go", server=server)
    assert [line for line in ran.err.splitlines() if "sub-agent helper" in line] == [
        "nanohermes: warning: sub-agent helper: the endpoint does not serve model `gpt-4o-mini` (The model "
        "`gpt-4o-mini` does not exist); fake-model is used instead"]
