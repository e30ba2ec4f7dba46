"""run_command: the tool, its working folder and its progress lines; the process machinery it
runs on is process.py, shared with background tasks (tasks.py) and the git tools (git.py).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanohermes.guard import sandbox
from nanohermes.guard.gitmeta import moved_work_tree
from nanohermes.guard.pathrules import PathProblem
from nanohermes.guard.pathrules import resolve_cwd as resolve
from nanohermes.guard.permissions import Effect, Rule, SubjectKind, escape_pattern, suggest_command_rule
from nanohermes.guard.shellparse import ParseError, split
from nanohermes.tools.base import Approval, Attempt, Params, Tool, ToolContext, ToolError, ToolResult, about
from nanohermes.tools.process import (
    command_env,
    confinement_of,
    decode,
    format_command,
    run_capped,
    secret_values,
    shell_argv,
)

# `git` as a word of a command line (`/usr/bin/git`, `sh -c 'git diff'`), not `.gitignore` or `git-lfs`.
_RUNS_GIT = re.compile(r"(?<![\w.-])git(?![\w.-])")


class _ProgressLines:
    """Turns a command's output into a few progress lines per tick: the UI needs the
    gist as it happens, not every line of a flood (only each chunk's tail is looked at)."""

    TICK_SECS = 0.2
    LINES_PER_TICK = 5
    LINE_CHARS = 200
    TAIL_BYTES = 4096

    def __init__(self, ctx: ToolContext, name: str) -> None:
        self.ctx = ctx
        self.name = name
        self.partial: dict[int, bytes] = {1: b"", 2: b""}
        self.lines: deque[str] = deque(maxlen=self.LINES_PER_TICK)
        self._handle: asyncio.TimerHandle | None = None

    def feed(self, fd: int, data: bytes) -> None:
        if len(data) > self.TAIL_BYTES:
            parts = data[-self.TAIL_BYTES:].split(b"\n")[1:]  # the first piece is a partial line
            if not parts:
                return
        else:
            parts = (self.partial[fd] + data).split(b"\n")
        *complete, rest = parts
        self.partial[fd] = rest[-self.TAIL_BYTES:]
        for line in complete[-self.LINES_PER_TICK:]:
            self._add(line)
        if complete and self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(self.TICK_SECS, self.flush)

    def _add(self, raw: bytes) -> None:
        line = decode(raw.rstrip(b"\r").rsplit(b"\r", 1)[-1]).rstrip()
        if line:
            self.lines.append(line[: self.LINE_CHARS])

    def flush(self) -> None:
        self._handle = None
        while self.lines:
            self.ctx.progress(self.name, self.lines.popleft())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        for fd in (1, 2):
            if self.partial[fd]:
                self._add(self.partial[fd])
        self.flush()


def resolve_cwd(ctx: ToolContext, cwd: str | None) -> Path:
    """The directory to run in: the workspace, or a directory inside it."""

    try:
        return resolve(ctx.workspace, cwd)
    except PathProblem as e:
        raise ToolError(str(e)) from None


def timeout_in_secs(value: int, max_secs: int) -> tuple[int, str]:
    """A timeout as seconds, and a note when it was read otherwise: a value over the most
    seconds allowed but within it as milliseconds can only be milliseconds (other agents'
    shell tools take their timeout in ms, and a model sends 120000 meaning two minutes)."""
    if max_secs < value <= max_secs * 1000:
        secs = max(1, -(-value // 1000))
        return secs, (f"\n(timeout_secs {value} is over the limit of {max_secs} seconds, so it was read as "
                      f"milliseconds: {secs} s)")
    return value, ""


# -- the tool ------------------------------------------------------------------------------

_DEFAULT_TIMEOUT_SECS = 120


@dataclass(frozen=True, kw_only=True)
class RunCommandParams(Params):
    command: str
    cwd: str | None = None
    # None: not given (a background task then keeps its own timeout); `timeout` is the value in force.
    timeout_secs: int | None = field(default=None, metadata=about(shown_default=_DEFAULT_TIMEOUT_SECS))
    background: bool = False

    non_empty: ClassVar[dict[str, str]] = {"command": "pass the command line to run"}
    claude_fields: ClassVar[dict[str, str]] = {"background": "run_in_background"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.timeout_secs is not None and self.timeout_secs < 1:
            # Raised to 1 rather than refused (frozen, hence object.__setattr__); the upper
            # clamp is a limit (run_command_max_timeout_secs), applied when it runs.
            object.__setattr__(self, "timeout_secs", 1)

    @property
    def timeout(self) -> int:
        return _DEFAULT_TIMEOUT_SECS if self.timeout_secs is None else self.timeout_secs

    def claude_input(self, workspace: Path) -> dict[str, Any]:
        # Claude Code's Bash takes its timeout in milliseconds.
        return {**super().claude_input(workspace), "timeout": self.timeout * 1000}

    def from_claude(self, updated: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
        ms = updated.get("timeout")
        if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms != sent.get("timeout"):
            updated = {**updated, "timeout_secs": max(1, -(-int(ms) // 1000))}
        return super().from_claude({k: v for k, v in updated.items() if k != "timeout"},
                                   {k: v for k, v in sent.items() if k != "timeout"})


@dataclass(frozen=True, kw_only=True)
class RunCommand(Tool[RunCommandParams]):
    name: ClassVar[str] = "run_command"
    claude_names: ClassVar[tuple[str, ...]] = ("Bash",)
    group: ClassVar[str] = "execution"
    description: ClassVar[str] = (
        "Run a shell command (bash -c) in the workspace or `cwd`; returns exit code, stdout and stderr. "
        "stdin is empty; pagers and colours are off. Killed after `timeout_secs` seconds "
        "(1..{run_command_max_timeout_secs}; a larger value is read as milliseconds). Each stream keeps its first and last halves of "
        "{run_command_capture_bytes}. Processes it leaves running are killed: use background=true for "
        "long tasks (servers, watchers), then poll task_output. Prefer read_file, grep, glob and the "
        "git_* tools over the shell."
    )
    params: ClassVar[type[Params]] = RunCommandParams
    approval: ClassVar[Approval] = "always"
    kind: ClassVar[SubjectKind] = "command"
    effect: ClassVar[Effect] = "run"

    def rule_subject(self, args: RunCommandParams) -> str | None:
        return args.command

    def base_dir(self, args: RunCommandParams) -> str | None:
        return args.cwd

    def suggest_rule(self, args: RunCommandParams) -> Rule:
        """The command analysis's narrow rule (`git log --oneline <args>`); the exact line when the line is
        not one plain simple command, since a prefix would allow more than was approved."""
        command = args.command.strip()
        try:
            commands = split(command)
        except ParseError:
            commands = []
        if len(commands) == 1:
            return suggest_command_rule(commands[0], self.name)
        return Rule(self.name, escape_pattern(command))

    def needs_person(self, args: RunCommandParams, ctx: ToolContext) -> str | None:
        """A line that runs git where git's work tree is outside the workspace (a repository's
        `core.worktree`) would read the files there as the repository's, as the git tools
        refuse to: only a person's yes lets it run. git is looked for in the line's words and
        in the text of what it runs (`sh -c '...'`, `xargs git`)."""
        if not _RUNS_GIT.search(args.command):
            return None

        if not (moved := moved_work_tree(ctx.workspace)):
            return None
        return (f"{moved}, and this line runs git there. If that folder is meant to be the work tree, start "
                "nanohermes there; otherwise remove the setting (`git config --unset core.worktree`)")

    def approval_detail(self, args: RunCommandParams, ctx: ToolContext, attempt: Attempt) -> str:
        return args.command

    def output_limit(self) -> str:
        return "run_command_capture_bytes per stream, max_output"

    async def run(self, args: RunCommandParams, ctx: ToolContext, attempt: Attempt) -> str | ToolResult:
        cwd = self.resolved(args, ctx, attempt).cwd or resolve_cwd(ctx, args.cwd)  # the folder that was judged
        lim = ctx.limits
        timeout, note = timeout_in_secs(args.timeout, lim.run_command_max_timeout_secs)
        clamped = min(timeout, lim.run_command_max_timeout_secs)
        note += (f"\n(timeout_secs {timeout} was clamped to {clamped}, limit run_command_max_timeout_secs)"
                 if clamped != timeout else "")
        if args.background:
            # the task manager: only a call that starts a background task
            from nanohermes.tools.tasks import start_task

            limit = lim.task_timeout_secs if args.timeout_secs is None else min(lim.task_timeout_secs, clamped)
            return await start_task(ctx, attempt, args.command, cwd=cwd, timeout=limit) + note
        progress = _ProgressLines(ctx, self.name)
        conf = confinement_of(ctx, attempt)
        try:
            fin = await run_capped(shell_argv(args.command), cwd=cwd, env=command_env(), limits=lim,
                                   timeout=clamped, out_cap=lim.run_command_capture_bytes,
                                   err_cap=lim.run_command_capture_bytes, on_data=progress.feed, confinement=conf)
        except sandbox.SandboxError as e:
            raise ToolError(f"{e}; the command did not run. `nanohermes doctor` shows what the sandbox needs") from None
        except OSError as e:
            raise ToolError(f"cannot start the shell: {e.strerror or e}; check that bash or sh is installed") from None
        finally:
            progress.close()
        secrets = await asyncio.to_thread(secret_values, conf, lim)
        return ToolResult(text=format_command(fin, lim, secrets) + note, refused=fin.refused)


def tools() -> list[Tool]:
    return [RunCommand()]
