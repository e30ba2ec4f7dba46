"""todo_write / todo_read: replace semantics, the item limit, the in_progress warning, the event."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from nanohermes.turn.agent import Agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI, TodoItem, TodoUpdated, event_to_dict
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply
from nanohermes.tools import todo


def runtime(workspace: Path, *, limits: Limits | None = None, mode: str = "default") -> tuple[Runtime, RecordingUI]:
    ui = RecordingUI()
    rt = Runtime(tools=todo.tools(), config=Config(), workspace=workspace, ui=ui, policy=Policy(mode=mode),
                 limits=limits or Limits())
    return rt, ui


def run(rt: Runtime, name: str, args: dict[str, Any]) -> str:
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="t", name=name, arguments=json.dumps(args))]))
    return msg.content or ""


def items(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"content": c, "status": s} for c, s in pairs]


def test_write_replaces_the_whole_list(workspace: Path) -> None:
    rt, _ui = runtime(workspace)
    run(rt, "todo_write", {"todos": items(("read the code", "completed"), ("fix the bug", "in_progress"),
                                          ("add a test", "pending"))})
    out = run(rt, "todo_write", {"todos": items(("add a test", "in_progress"), ("update the docs", "pending"))})
    head, *rows = out.split("\n")
    assert head.startswith("Todo list saved (2 items: ") and rows == ["[~] 1. add a test", "[ ] 2. update the docs"]
    assert todo.current(rt.session.state) == (TodoItem(content="add a test", status="in_progress"),
                                      TodoItem(content="update the docs", status="pending"))
    head, *rows = run(rt, "todo_read", {}).split("\n")
    assert head.startswith("Todo list (2 items: ") and rows == ["[~] 1. add a test", "[ ] 2. update the docs"]


def test_each_write_emits_the_new_list(workspace: Path) -> None:
    rt, ui = runtime(workspace)
    run(rt, "todo_write", {"todos": items(("a", "pending"))})
    run(rt, "todo_write", {"todos": []})
    events = ui.of(TodoUpdated)
    assert [e.items for e in events] == [(TodoItem(content="a", status="pending"),), ()]
    assert json.loads(json.dumps(event_to_dict(events[0]))) == {"type": "todo_updated", "items": [{"content": "a", "status": "pending"}]}


def test_empty_list_clears(workspace: Path) -> None:
    rt, _ = runtime(workspace)
    run(rt, "todo_write", {"todos": items(("a", "pending"))})
    assert run(rt, "todo_write", {"todos": []}) == "Todo list cleared."
    assert run(rt, "todo_read", {}) == "No todo list yet; create one with todo_write."


def test_more_than_the_limit_is_rejected_and_the_list_kept(workspace: Path) -> None:
    rt, ui = runtime(workspace, limits=Limits(todo_items=3))
    run(rt, "todo_write", {"todos": items(("keep me", "pending"))})
    out = run(rt, "todo_write", {"todos": items(*[(f"step {i}", "pending") for i in range(4)])})
    assert out == ("ERROR: todo_write got 4 items (> 3); the list was not changed. Send at most 3: merge small "
                   "steps or drop completed ones")
    assert todo.current(rt.session.state) == (TodoItem(content="keep me", status="pending"),)
    assert len(ui.of(TodoUpdated)) == 1
    assert run(rt, "todo_write", {"todos": items(*[(f"step {i}", "pending") for i in range(3)])}).startswith(
        "Todo list saved (3 items")


def test_default_limit_is_fifty(workspace: Path) -> None:
    rt, _ = runtime(workspace)
    assert run(rt, "todo_write", {"todos": items(*[(f"s{i}", "pending") for i in range(50)])}).startswith(
        "Todo list saved (50 items")
    assert run(rt, "todo_write", {"todos": items(*[(f"s{i}", "pending") for i in range(51)])}).startswith(
        "ERROR: todo_write got 51 items (> 50)")


def test_more_than_one_in_progress_gets_a_warning(workspace: Path) -> None:
    rt, _ = runtime(workspace)
    out = run(rt, "todo_write", {"todos": items(("a", "in_progress"), ("b", "pending"), ("c", "in_progress"))})
    assert out.split("\n\n")[-1].startswith("warning: 2 items are in_progress (1, 3);"), out
    assert len(todo.current(rt.session.state)) == 3  # saved all the same


def test_bad_items_name_the_problem(workspace: Path) -> None:
    rt, _ = runtime(workspace)
    out = run(rt, "todo_write", {"todos": items(("a", "done"))})
    assert out.startswith("ERROR: todo_write: field `todos.0.status`: ") and "'completed'" in out, out
    assert run(rt, "todo_write", {"todos": items(("  ", "pending"))}).startswith("ERROR: todo_write: todo content ")
    assert run(rt, "todo_write", {}) == "ERROR: todo_write: missing array field `todos`"


def test_plan_mode_allows_both(workspace: Path) -> None:
    rt, _ = runtime(workspace, mode="plan")
    assert [t["function"]["name"] for t in rt.specs()] == ["todo_read", "todo_write"]
    assert run(rt, "todo_write", {"todos": items(("plan it", "in_progress"))}).startswith("Todo list saved")


def test_list_lives_for_the_session_across_turns(workspace: Path) -> None:
    llm = ScriptedLLM([
        tool_reply(call("todo_write", {"todos": items(("first", "in_progress"))})), Reply(text="planned"),
        tool_reply(call("todo_read")), Reply(text="read"),
    ])
    rt, _ = runtime(workspace)
    agent = Agent(llm=llm, runtime=rt, ui=rt.ui, system_prompt="s")
    asyncio.run(agent.ask("plan"))
    asyncio.run(agent.ask("what is the plan?"))
    last_tool = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert last_tool["content"].split("\n")[1:] == ["[~] 1. first"]


def test_restore_puts_a_saved_list_back(workspace: Path) -> None:
    rt, _ = runtime(workspace)
    todo.restore(rt.session.state, [TodoItem(content="resumed", status="completed")])
    head, *rows = run(rt, "todo_read", {}).split("\n")
    assert rows == ["[x] 1. resumed"] and "1 completed" in head


def test_stream_json_shows_the_list_when_it_changes(cli, server: FakeServer) -> None:
    server.add(tool_reply(call("todo_write", {"todos": items(("ship it", "in_progress"))})), Reply(text="ok"))
    r = cli("-p", "plan", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    updates = [e for e in r.lines() if e["type"] == "todo_updated"]
    assert updates == [{"type": "todo_updated", "items": [{"content": "ship it", "status": "in_progress"}]}]
