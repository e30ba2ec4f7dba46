"""What run_command and the background-task tools say, each message once, with real processes.
The other tests assert exit codes, what was kept, the ids and the processes left; rewording a
message changes one row here."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from exec_support import acall, make_runtime
from wording_support import said

from nanohermes.turn.runtime import Runtime


async def started(rt: Runtime) -> str:
    return await acall(rt, "run_command", command="sleep 300", background=True)


async def killed(rt: Runtime) -> str:
    tid = (await started(rt)).split()[3].rstrip(":")
    return (await acall(rt, "task_kill", task_id=tid)).replace(tid, "{tid}")


async def unknown(rt: Runtime) -> str:
    return await acall(rt, "task_output", task_id="nope")


# (id, the calls, the exact text of the last: {tid} stands for the task's id, {any} for a time)
SHELL: list[tuple[str, Callable[[Runtime], Awaitable[str]], str]] = [
    ("empty-command", lambda rt: acall(rt, "run_command", command=" "),
     "ERROR: run_command: command must not be empty; pass the command line to run"),
    ("started", lambda rt: started(rt),
     "started background task {any}: sleep 300\nIt is killed after 3600s or when nanohermes exits. Read its output "
     'with task_output(task_id="{any}"); stop it with task_kill.'),
    ("killed", killed, "task {{tid}}: killed (task_kill) after {any}s, exit code killed (task_kill); read what it wrote "
                       "with task_output"),
    ("no-tasks", lambda rt: acall(rt, "task_list"), "no background tasks; start one with run_command(background=true)"),
    ("unknown-task", unknown,
     "ERROR: no background task `nope` (known tasks: none started in this session); see task_list"),
    ("empty-task-id", lambda rt: acall(rt, "task_output", task_id=""),
     "ERROR: task_output: task_id must not be empty; task_list shows the ids"),
]


@pytest.mark.parametrize("calls,text", [r[1:] for r in SHELL], ids=[r[0] for r in SHELL])
def test_the_shell_says(workspace: Path, calls: Callable[[Runtime], Awaitable[str]], text: str) -> None:
    rt = make_runtime(workspace)

    async def go() -> str:
        try:
            return await calls(rt)
        finally:
            await rt.close()

    out = asyncio.run(go())
    assert said(out, text), out
