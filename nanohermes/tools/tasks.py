"""Background tasks: the TaskManager, and task_output, task_list, task_kill.

One TaskManager per session lives in `ToolContext.state`. A task is a command in its own
process group whose stdout and stderr are both drained continuously into capped buffers,
so no pipe can fill whatever the task writes. A task ends when its command exits, at its
hard timeout, on task_kill, or when the session closes (`aclose`, called however
nanohermes exits): no task outlives nanohermes, and neither does anything it started
outside its group (setsid, double fork): those are swept and counted when it ends. A task
runs in the OS sandbox its run_command call was given. A notice is emitted when a task ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal


from nanohermes.guard import sandbox
from nanohermes.common.budget import Limits
from nanohermes.common.events import Event, Notice
from nanohermes.tools.base import Attempt, Approval, Params, ReadOnlyTool, Tool, ToolContext, ToolError
from nanohermes.tools.process import (
    Capture, Process, command_env, confinement_of, describe_exit, listed, programs_note, refusal_note, secret_values,
    secs, shares, shell_argv, spawn, strip_newline, without_values,
)

STATE_KEY = "tasks"
Status = Literal["running", "exited", "killed"]


@dataclass(eq=False)
class Task:
    id: str
    command: str
    proc: Process
    timeout: float
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    status: Status = "running"
    kill_reason: str = ""  # "task_kill", "timed out after 60s", "session ended"
    exit_code: int | None = None
    pipes_held: bool = False
    refused: list[sandbox.Refused] = field(default_factory=list)
    watcher: asyncio.Task[None] | None = None
    cwd: Path = field(default_factory=Path.cwd)

    def runtime(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    def state(self) -> str:
        if self.status == "running":
            return f"running for {elapsed(self.runtime())}"
        if self.status == "killed":
            return f"killed ({self.kill_reason}) after {elapsed(self.runtime())}"
        return f"exited after {elapsed(self.runtime())}"

    def end_notes(self) -> list[str]:
        """Once it has ended: what was swept after it, and what the sandbox refused."""
        if self.ended is None:
            return []
        out = []
        if self.proc.escaped:
            n = self.proc.escaped
            out.append(f"note: {n} process{'es' if n != 1 else ''} it started outside its process group "
                       f"(setsid, double fork) {'were' if n != 1 else 'was'} still running and killed when it ended")
        if self.refused:
            out.append(refusal_note(self.proc.confinement.policy, self.refused))
        if self.proc.programs_changed:
            out.append(programs_note(self.proc.programs_changed))
        return out

    def exit_text(self) -> str:
        if self.status == "running":
            return "none yet (still running)"
        if self.status == "killed":
            return f"killed ({self.kill_reason})"
        return describe_exit(self.exit_code)

    def streams(self) -> tuple[tuple[str, Capture], tuple[str, Capture]]:
        return ("stdout", self.proc.out), ("stderr", self.proc.err)


def elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s"


def first_line(command: str, width: int = 80) -> str:
    line = command.strip().splitlines()[0] if command.strip() else ""
    more = len(line) > width or "\n" in command.strip()
    return line[:width] + ("…" if more else "")


@dataclass(eq=False)
class TaskManager:
    """The session's background tasks. Bound to the event loop that started them."""

    limits: Limits
    emit: Callable[[Event], None] = lambda e: None
    tasks: dict[str, Task] = field(default_factory=dict)
    SWEEP_SECS: ClassVar[float] = 1.0  # how often a running task's plants are looked for

    async def start(self, command: str, *, cwd: Path, timeout: float, confinement: sandbox.Confinement) -> Task:
        cap = self.limits.task_capture_bytes
        proc = await spawn(shell_argv(command), cwd=cwd, env=command_env(), out_cap=cap, err_cap=cap,
                           confinement=confinement)
        task = Task(id=self._new_id(), command=command, proc=proc, timeout=timeout)
        task.cwd = cwd
        self.tasks[task.id] = task
        task.watcher = asyncio.get_running_loop().create_task(self._watch(task), name=f"task-{task.id}")
        return task

    def _new_id(self) -> str:
        while (tid := secrets.token_hex(3)) in self.tasks:
            pass
        return tid

    def get(self, task_id: str) -> Task:
        task = self.tasks.get(task_id.strip())
        if task is None:
            known = ", ".join(self.tasks) if self.tasks else "none started in this session"
            raise ToolError(f"no background task `{task_id}` (known tasks: {known}); see task_list")
        return task

    async def _watch(self, task: Task) -> None:
        proc = task.proc
        try:
            if not await self._wait_sweeping(task):
                if task.status == "running":
                    task.status, task.kill_reason = "killed", f"timed out after {secs(task.timeout)}"
                await proc.stop(self.limits.command_kill_grace_secs)
            task.pipes_held = await proc.settle(self.limits.command_pipe_grace_secs)
        finally:
            # Also reached when the event loop shuts down and cancels this watcher: the
            # group is killed here even if nobody called aclose().
            # Read before task_output takes the bytes away.
            task.refused = listed(proc.refusals(task.cwd), self.limits.sandbox_refusals_listed)
            with contextlib.suppress(Exception):  # a secret file that appeared since the last look was in its reach
                secret_values(proc.confinement, self.limits)
            proc.close()
            task.ended = time.monotonic()
            task.exit_code = proc.returncode
            if task.status == "running":
                task.status = "exited"
            code = f", exit code {task.exit_text()}" if task.status == "exited" else ""
            swept = f"; {proc.escaped} escaped process(es) killed" if proc.escaped else ""
            self.emit(Notice(level="info", text=f"background task {task.id} {task.state()}{code}{swept}: "
                                                f"{first_line(task.command)}"))

    async def _wait_sweeping(self, task: Task) -> bool:
        """Wait for the task's command until its timeout, taking away what it plants where
        it must not every second meanwhile (a `.git/commondir` must not wait for the task to
        end). True when the command exited."""
        deadline = task.started + task.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return task.proc.exited
            if await task.proc.wait(min(left, self.SWEEP_SECS)):
                return True
            for found in task.proc.sweep():
                self.emit(Notice(level="warning", text=f"background task {task.id}: {found}"))
            await asyncio.to_thread(task.proc.withhold_new, self.limits)

    async def kill(self, task: Task, reason: str = "task_kill") -> None:
        if task.ended is None and not task.proc.exited and task.status == "running":
            task.status, task.kill_reason = "killed", reason
            await task.proc.stop(self.limits.command_kill_grace_secs)
        if task.watcher is not None:
            await asyncio.wait({task.watcher})

    def busy(self) -> bool:
        """Whether a task still runs (the session's runtime asks: see `Runtime.busy`)."""
        return any(t.ended is None for t in self.tasks.values())

    async def aclose(self) -> None:
        """Kill every task still running and wait for them to be reaped: the session is over."""
        running = [t for t in self.tasks.values() if t.ended is None]
        await asyncio.gather(*(self.kill(t, "session ended") for t in running), return_exceptions=True)
        for t in running:
            t.proc.close()

    def read(self, task: Task, budget: int) -> tuple[list[tuple[str, str]], list[str]]:
        """Take what is new on both streams, sharing `budget` chars; leave the rest unread.

        Returns the sections and the notes (bytes left for the next call, bytes dropped)."""
        streams = task.streams()
        allow = shares([c.unread for _, c in streams], budget)
        sections: list[tuple[str, str]] = []
        notes: list[str] = []
        for (label, cap), n in zip(streams, allow, strict=True):
            text, dropped = cap.take(n)
            sections.append((label, strip_newline(text)))
            if cap.unread:
                notes.append(f"note: {cap.unread} more bytes of {label} not shown yet; call task_output again to read on")
            if dropped:
                notes.append(f"note: {dropped} bytes of {label} were dropped where marked, because {cap.cap} unread "
                             f"bytes were already buffered; call task_output more often")
        return sections, notes


def task_manager(ctx: ToolContext) -> TaskManager:
    mgr = ctx.state.get(STATE_KEY)
    if not isinstance(mgr, TaskManager):
        mgr = ctx.state[STATE_KEY] = TaskManager(limits=ctx.limits, emit=ctx.emit)
    return mgr


async def start_task(ctx: ToolContext, attempt: Attempt, command: str, *, cwd: Path, timeout: float) -> str:
    """run_command with background=true: start the task and say how to follow it."""
    # A task outlives its call: what it must not plant is made impossible from the start, not
    # swept afterwards (see Confinement.background).
    confinement = dataclasses.replace(confinement_of(ctx, attempt), background=True)
    try:
        task = await task_manager(ctx).start(command, cwd=cwd, timeout=timeout, confinement=confinement)
    except sandbox.SandboxError as e:
        raise ToolError(f"{e}; the task did not start. `nanohermes doctor` shows what the sandbox needs") from None
    except OSError as e:
        raise ToolError(f"cannot start the shell: {e.strerror or e}; check that bash or sh is installed") from None
    return (f"started background task {task.id}: {first_line(command)}\n"
            f"It is killed after {secs(timeout)} or when nanohermes exits. Read its output with "
            f'task_output(task_id="{task.id}"); stop it with task_kill.')


@dataclass(frozen=True, kw_only=True)
class TaskIdParams(Params):
    task_id: str

    non_empty: ClassVar[dict[str, str]] = {"task_id": "task_list shows the ids"}


@dataclass(frozen=True, kw_only=True)
class TaskOutputParams(TaskIdParams):
    claude_fields: ClassVar[dict[str, str]] = {"task_id": "bash_id"}  # Claude Code's BashOutput calls it so


@dataclass(frozen=True, kw_only=True)
class TaskKillParams(TaskIdParams):
    claude_fields: ClassVar[dict[str, str]] = {"task_id": "shell_id"}  # and its KillShell so


@dataclass(frozen=True, kw_only=True)
class NoParams(Params):
    pass


@dataclass(frozen=True, kw_only=True)
class TaskOutput(Tool[TaskOutputParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "task_output"
    claude_names: ClassVar[tuple[str, ...]] = ("BashOutput",)
    group: ClassVar[str] = "execution"
    description: ClassVar[str] = (
        "Read what a background task wrote since the last call (stdout and stderr labelled), with its "
        "status and exit code. Unread output keeps up to {task_capture_bytes} per stream (its start and "
        "newest bytes). Call again to read on; task_list lists tasks."
    )
    params: ClassVar[type[Params]] = TaskOutputParams
    approval: ClassVar[Approval] = "never"
    effect = "read"

    def read_only(self, args: TaskOutputParams) -> bool:
        return True

    def output_limit(self) -> str:
        return "task_capture_bytes per stream, max_output"

    async def run(self, args: TaskOutputParams, ctx: ToolContext, attempt: Attempt) -> str:
        mgr = task_manager(ctx)
        task = mgr.get(args.task_id)
        await asyncio.to_thread(task.proc.withhold_new, ctx.limits)  # a secret file that appeared is covered now
        head = (f"task {task.id}: {task.state()}\nexit code: {task.exit_text()}\n"
                f"command: {first_line(task.command, 200)}\n")
        # Room for the labels, the notes (at most four short lines) and a margin; a floor so
        # that even a tiny max_output makes progress through the buffer.
        budget = max(ctx.limits.max_output - len(head) - 600, 256)
        sections, notes = mgr.read(task, budget)
        secrets = await asyncio.to_thread(secret_values, task.proc.confinement, ctx.limits)
        texts, withheld = without_values([text for _, text in sections], secrets)
        notes += [withheld] if withheld else []
        body = "".join(f"\n{label} (new since the last read):\n{text or '(nothing new)'}\n"
                       for (label, _), text in zip(sections, texts, strict=True))
        return head + body + "".join(f"\n{n}" for n in notes + task.end_notes())


@dataclass(frozen=True, kw_only=True)
class TaskList(ReadOnlyTool[NoParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "task_list"
    group: ClassVar[str] = "execution"
    description: ClassVar[str] = (
        "List this session's background tasks: id, status, runtime, exit code, command. See task_output "
        "and task_kill."
    )
    params: ClassVar[type[Params]] = NoParams

    async def run(self, args: NoParams, ctx: ToolContext, attempt: Attempt) -> str:
        tasks = list(task_manager(ctx).tasks.values())
        if not tasks:
            return "no background tasks; start one with run_command(background=true)"
        rows = [("id", "status", "runtime", "exit code", "command")]
        for t in tasks:
            code = "-" if t.status == "running" else (describe_exit(t.exit_code) if t.status == "exited" else "killed")
            status = t.status if t.status != "killed" else f"killed ({t.kill_reason})"
            rows.append((t.id, status, elapsed(t.runtime()), code, first_line(t.command)))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows)


@dataclass(frozen=True, kw_only=True)
class TaskKill(Tool[TaskKillParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "task_kill"
    claude_names: ClassVar[tuple[str, ...]] = ("KillShell", "KillBash")
    group: ClassVar[str] = "execution"
    description: ClassVar[str] = (
        "Stop a background task (its whole process group) and return its final status; task_output still "
        "reads its output."
    )
    params: ClassVar[type[Params]] = TaskKillParams
    approval: ClassVar[Approval] = "never"  # it only stops what this session started
    effect = "run"  # it acts on processes: plan mode changes nothing

    async def run(self, args: TaskKillParams, ctx: ToolContext, attempt: Attempt) -> str:
        mgr = task_manager(ctx)
        task = mgr.get(args.task_id)
        if task.ended is not None:
            return f"task {task.id} had already ended: {task.state()}, exit code {task.exit_text()}; nothing to kill"
        await mgr.kill(task)
        notes = "".join(f"\n{n}" for n in task.end_notes())
        return f"task {task.id}: {task.state()}, exit code {task.exit_text()}; read what it wrote with task_output{notes}"


def tools() -> list[Tool]:
    return [TaskKill(), TaskList(), TaskOutput()]
