"""Background tasks with real processes: both pipes drained, caps, timeouts, kill, no orphans."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from exec_support import acall, group_members, make_runtime, marked_pids, no_leftover_processes, wait_until  # noqa: F401
from nanohermes.common.budget import KiB, Limits
from nanohermes.config import Config, load_config
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.turn.runtime import Runtime
from nanohermes.tools.tasks import STATE_KEY, TaskManager


def scenario(ws: Path, body: Callable[[Runtime, RecordingUI], Awaitable[Any]], **kw: Any) -> Any:
    """Run `body` in one event loop (tasks live on it), closing the session at the end."""
    ui = RecordingUI()
    rt = make_runtime(ws, ui=ui, **kw)

    async def go() -> Any:
        try:
            return await body(rt, ui)
        finally:
            await rt.close()

    return asyncio.run(go())


async def start(rt: Runtime, command: str, **kw: Any) -> str:
    out = await acall(rt, "run_command", command=command, background=True, **kw)
    m = re.match(r"started background task ([0-9a-f]{6}): ", out)
    assert m, out
    return m.group(1)


async def finished(ui: RecordingUI, task_id: str) -> Notice:
    """Wait (generously) for the notice that a task ended."""
    for _ in range(3000):
        for n in ui.of(Notice):
            if n.text.startswith(f"background task {task_id} "):
                return n
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} did not finish")


def manager(rt: Runtime) -> TaskManager:
    mgr = rt.session.state[STATE_KEY]
    assert isinstance(mgr, TaskManager)
    return mgr


def test_start_returns_an_id_and_how_to_follow_it(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        out = await acall(rt, "run_command", command="sleep 300", background=True)
        tid = out.split()[3].rstrip(":")
        first, follow = out.split("\n")
        assert first == f"started background task {tid}: sleep 300" and len(tid) == 6
        assert " 3600s " in follow and f'task_output(task_id="{tid}")' in follow and "task_kill" in follow

    scenario(workspace, body)


def test_a_megabyte_on_stderr_does_not_block_and_is_readable(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        tid = await start(rt, "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo done")
        notice = await finished(ui, tid)
        assert notice.level == "info" and ", exit code 0: head -c 1000000" in notice.text
        first = await acall(rt, "task_output", task_id=tid)
        assert first.startswith(f"task {tid}: exited after ")
        assert "\nexit code: 0\n" in first and "\nstdout (new since the last read):\ndone\n" in first
        reads = [first]
        while "more bytes of stderr not shown yet" in reads[-1]:
            reads.append(await acall(rt, "task_output", task_id=tid))
        sections = [out.split("stderr (new since the last read):\n", 1)[1].split("\n\nnote: ", 1)[0].rstrip("\n")
                    for out in reads]
        marker = "\n[… 475712 bytes dropped here …]\n"
        # The first half and the newest half of the buffer are kept; the middle is marked where it was.
        [gap_read] = [i for i, s in enumerate(sections) if marker in s]
        assert "note: 475712 bytes of stderr were dropped " in reads[gap_read]
        assert " 524288 unread bytes " in reads[gap_read]
        stderr = "".join(sections).replace(marker, "")
        assert stderr == "e" * (512 * KiB)  # everything the buffer kept was read, none lost
        assert "(nothing new)" in await acall(rt, "task_output", task_id=tid)

    scenario(workspace, body)


def test_reading_in_pieces_loses_nothing(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        tid = await start(rt, "seq 1 20000")
        await finished(ui, tid)
        got = []
        while True:
            out = await acall(rt, "task_output", task_id=tid)
            assert len(out) <= 3000
            got.append(out.split("stdout (new since the last read):\n", 1)[1].split("\n\nstderr", 1)[0])
            if "not shown yet" not in out:
                break
        assert len(got) > 5
        assert "\n".join(got) == "\n".join(str(i) for i in range(1, 20001))

    scenario(workspace, body, limits=Limits(max_output=3000))


def test_task_capture_lowered_to_3_bytes(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        tid = await start(rt, "printf abcdef; printf 12345 >&2")
        await finished(ui, tid)
        out = await acall(rt, "task_output", task_id=tid)
        assert out.endswith(
            "stdout (new since the last read):\na\n[… 3 bytes dropped here …]\nef\n\n"
            "stderr (new since the last read):\n1\n[… 2 bytes dropped here …]\n45\n\n"
            "note: 3 bytes of stdout were dropped where marked, because 3 unread bytes were already buffered; "
            "call task_output more often\n"
            "note: 2 bytes of stderr were dropped where marked, because 3 unread bytes were already buffered; "
            "call task_output more often"
        )

    scenario(workspace, body, limits=Limits(task_capture_bytes=3))


def test_task_timeout_lowered_kills_the_task(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        tid = await start(rt, "echo begun; sleep 300")
        notice = await finished(ui, tid)
        assert re.fullmatch(rf"background task {tid} killed \(timed out after 0\.5s\) after \d+\.\ds: echo begun; sleep 300",
                            notice.text), notice.text
        out = await acall(rt, "task_output", task_id=tid)
        assert "\nexit code: killed (timed out after 0.5s)\n" in out and "begun" in out

    scenario(workspace, body, limits=Limits(task_timeout_secs=0.5))


def test_explicit_timeout_secs_applies_to_a_background_task(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        tid = await start(rt, "sleep 300", timeout_secs=1)
        assert "killed (timed out after 1s)" in (await finished(ui, tid)).text

    scenario(workspace, body)


def test_task_timeout_is_a_config_key(workspace: Path, home: Path) -> None:
    cfg = home / "cfg.json"
    cfg.write_text('{"task_timeout_secs": 90}')
    assert load_config(workspace, config_file=cfg).config.build_limits().task_timeout_secs == 90
    assert Config(limits={"task_timeout_secs": 5}).build_limits().task_timeout_secs == 5
    assert Config().build_limits().task_timeout_secs == 3600


def test_task_kill_kills_the_whole_group(workspace: Path, no_leftover_processes: str) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        tid = await start(rt, "trap '' TERM; sleep 300 & sleep 301 & echo up; wait")
        pgid = manager(rt).tasks[tid].proc.pid

        def sleeping() -> int:  # the two sleeps, beside the shell (and, confined, the namespace's init and relay)
            found = 0
            for pid in group_members(pgid):
                try:
                    found += Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")
                except OSError:
                    continue
            return found

        assert await asyncio.to_thread(wait_until, lambda: sleeping() == 2)
        out = await acall(rt, "task_kill", task_id=tid)
        assert re.match(rf"task {tid}: killed \(task_kill\) after \d+\.\ds, ", out) and "task_output" in out, out
        assert await asyncio.to_thread(wait_until, lambda: not group_members(pgid))
        assert "up" in await acall(rt, "task_output", task_id=tid)
        again = await acall(rt, "task_kill", task_id=tid)
        assert again.startswith(f"task {tid} had already ended: killed (task_kill)")

    scenario(workspace, body, limits=Limits(command_kill_grace_secs=0.3))


def test_task_list(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        assert (await acall(rt, "task_list")).startswith("no background tasks")
        done = await start(rt, "exit 7")
        await finished(ui, done)
        running = await start(rt, "sleep 300\necho second line")
        rows = (await acall(rt, "task_list")).splitlines()
        assert re.split(r"\s{2,}", rows[0]) == ["id", "status", "runtime", "exit code", "command"]
        assert re.split(r"\s{2,}", rows[1])[:2] == [done, "exited"] and re.split(r"\s{2,}", rows[1])[3:] == ["7", "exit 7"]
        assert re.split(r"\s{2,}", rows[2])[:2] == [running, "running"] and re.split(r"\s{2,}", rows[2])[3:] == ["-", "sleep 300…"]

    scenario(workspace, body)


def test_unknown_task_id_names_the_known_ones(workspace: Path) -> None:
    async def body(rt: Runtime, ui: RecordingUI) -> None:
        out = await acall(rt, "task_output", task_id="nope")
        assert out.startswith("ERROR: no background task `nope` ") and "(known tasks: none" in out, out
        tid = await start(rt, "true")
        out = await acall(rt, "task_kill", task_id="zzz")
        assert out.startswith("ERROR: no background task `zzz` ") and f"(known tasks: {tid})" in out, out
        assert (await acall(rt, "task_output", task_id="")).startswith("ERROR: task_output: task_id ")

    scenario(workspace, body)


def test_closing_the_session_kills_every_running_task(workspace: Path, no_leftover_processes: str) -> None:
    ui = RecordingUI()
    rt = make_runtime(workspace, ui=ui)

    async def go() -> list[str]:
        ids = [await start(rt, "sleep 300"), await start(rt, "sleep 301 & sleep 302; wait")]
        await asyncio.to_thread(wait_until, lambda: len(marked_pids(no_leftover_processes)) >= 4)
        await rt.close()
        return ids

    ids = asyncio.run(go())
    assert not marked_pids(no_leftover_processes)
    texts = sorted(n.text for n in ui.of(Notice))
    assert [t.split(" killed (session ended) after ")[0] for t in texts] == sorted(f"background task {i}" for i in ids)


def test_a_loop_shutting_down_without_close_still_kills_its_tasks(workspace: Path, no_leftover_processes: str) -> None:
    rt = make_runtime(workspace)

    async def go() -> None:
        await start(rt, "sleep 300")
        await asyncio.to_thread(wait_until, lambda: len(marked_pids(no_leftover_processes)) >= 1)

    asyncio.run(go())  # asyncio.run cancels the task watchers on the way out
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


def test_task_tools_are_read_only_where_they_should_be(workspace: Path) -> None:
    rt = make_runtime(workspace, mode="plan")
    names = {t.name for t in rt.visible_tools()}
    # Reading tasks stays open in plan mode; stopping one changes things (the person has /tasks).
    assert {"task_output", "task_list"} <= names and not {"run_command", "task_kill"} & names


@pytest.mark.parametrize("name", ["task_output", "task_list"])
def test_reading_tools_never_ask(workspace: Path, name: str) -> None:
    from nanohermes.common.events import ApprovalRequest

    async def body(rt: Runtime, ui: RecordingUI) -> None:
        args = {"task_id": "x"} if name == "task_output" else {}
        await acall(rt, name, **args)
        assert ui.of(ApprovalRequest) == []

    scenario(workspace, body, mode="default")


def test_a_sub_agents_background_tasks_end_with_it(workspace: Path, no_leftover_processes: str) -> None:
    from nanohermes.turn.agent import Agent
    from nanohermes.assemble import assemble_pool, child_factory
    from nanohermes.guard.permissions import Policy
    from nanohermes.testing import Reply, ScriptedLLM, call, tool_reply
    from nanohermes.tools import build_tools
    from nanohermes.tools import subagents as subagent_tools
    from nanohermes.tools.subagents import SubagentManager

    ui = RecordingUI()
    config = Config.from_dict({"subagents": {"runner": {"description": "runs things", "tools": ["run_command"]}}})
    runtime = Runtime(tools=[], config=config, workspace=workspace, ui=ui, policy=Policy(mode="goal"), limits=Limits())
    child = ScriptedLLM([tool_reply(call("run_command", {"command": "sleep 300", "background": True})),
                         Reply(text="started it")])
    manager = SubagentManager(configs=config.subagents, make_llm=lambda model: child, ui=ui, limits=Limits(),
                              system_prompt="p", max_turns=5, parent=runtime, build=child_factory(runtime))
    runtime.set_tools(assemble_pool(build_tools(), subagent_tools.tools(manager)))
    parent = Agent(llm=ScriptedLLM([tool_reply(call("subagent", {"agent": "runner", "task": "start", "wait": True})),
                                    Reply(text="done")]), runtime=runtime, ui=ui, system_prompt="p")

    async def go() -> None:
        assert (await parent.ask("go")).text == "done"
        # The parent session goes on, but the child is over: its task is gone.
        assert await asyncio.to_thread(wait_until, lambda: not marked_pids(no_leftover_processes), 10)

    asyncio.run(go())
