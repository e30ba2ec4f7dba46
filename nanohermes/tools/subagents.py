"""Sub-agents: the `subagent` and `agent_list` tools, the board of runs, and the nested UI.

A sub-agent is a child `Agent` with its own history, its configured prompt and only its
listed tools (nanohermes's names, or Claude Code's as each tool declares them in
`claude_names`: an agent file's `Read, Grep` is read_file and grep). Its policy is the
parent's (mode, lists, rules) narrowed to those tools, so it never has more permission than
its parent, and never a command's allowed-tools grant (that is for the command's turn only).
Its `model` is looked up as a command file's is (`model_names`): a name the endpoint would
refuse is ignored with a note. Its events reach the parent's UI wrapped in
`SubagentEvent`; its approval prompts go to the parent's UI, marked with its name. It runs
in the background (the board in `agent_list` shows it) or, with `wait: true`, inside the
call. A child is cancelled when the turn that started it is interrupted, and at session end.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from nanohermes.common.budget import Limits, plural
from nanohermes.config import SubagentConfig
from nanohermes.common.dirs import private_dir, write_private
from nanohermes.common.events import UI, ApprovalReply, ApprovalRequest, Event, Notice, SubagentEvent, ToolStarted, UsageUpdate
from nanohermes.common.messages import Message, Usage
from nanohermes.guard.permissions import Policy, blocked, names_tool
from nanohermes.guard.permissions.rules import GRANT_ORIGIN
from nanohermes.guard.redact import redact
from nanohermes.llm.thinktags import visible
from nanohermes.tools.base import Attempt, Approval, Params, ReadOnlyTool, Tool, ToolContext, ToolError, about

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.llm import LLM
    from nanohermes.llm.model_names import Lister

class _Folder(Protocol):
    @property
    def folder(self) -> Path | None: ...


class Parent(Protocol):
    """What the manager uses of the parent agent's runtime (the turn's `Runtime` is one): its
    tools and policy, which a child's narrow, its config, its session's folder and the lock
    its questions take turns by. A protocol, so that this tool module imports no turn."""

    @property
    def tools(self) -> list[Tool]: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def config(self) -> Config: ...

    @property
    def session(self) -> _Folder: ...

    @property
    def confirm_lock(self) -> asyncio.Lock: ...


class _Ended(Protocol):
    @property
    def reason(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def turns(self) -> int: ...


class _History(Protocol):
    @property
    def history(self) -> list[Message]: ...


class _Closes(Protocol):
    async def close(self) -> None: ...


class ChildAgent(Protocol):
    """What the manager uses of a child's agent (the turn's `Agent` is one): a turn on its task,
    its history, and its runtime, closed when it ends."""

    async def ask(self, prompt: str) -> _Ended: ...

    @property
    def session(self) -> _History: ...

    @property
    def runtime(self) -> _Closes: ...


RunStatus = Literal["running", "completed", "max_turns", "failed", "cancelled"]
SUBAGENT_TOOLS = frozenset({"subagent", "agent_list"})


@dataclass
class Run:
    """One sub-agent run on the board."""

    id: str
    name: str
    task: str
    status: RunStatus = "running"
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    result: str = ""
    error: str = ""
    tool_calls: int = 0
    activity: str = ""  # the last tool it started, while running
    result_path: Path | None = None
    agent: ChildAgent | None = None
    task_handle: asyncio.Task[None] | None = None

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


@dataclass
class NestedUI:
    """The UI a child sees: events go to the parent's UI wrapped; approvals too, marked. Its
    model calls are also counted in the parent's session (`count_usage`)."""

    parent: UI
    run: Run
    lock: asyncio.Lock
    count_usage: Callable[[Usage, str], None] | None = None

    def emit(self, event: Event) -> None:
        if isinstance(event, ToolStarted):
            self.run.tool_calls += 1
            self.run.activity = f"{event.name} {event.summary}".strip()
        self.parent.emit(SubagentEvent(agent_id=self.run.id, agent=self.run.name, event=event))
        if isinstance(event, UsageUpdate) and self.count_usage is not None:
            self.count_usage(event.usage, event.model)

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        async with self.lock:  # the parent's prompt lock: one prompt at a time, parent or child
            reply = await self.parent.confirm(replace(request, agent=f"{self.run.name} {self.run.id}"))
        if reply.stop and self.run.task_handle is not None:
            # The person stopped this run at its question (Esc): it ends as a stopped turn does,
            # "cancelled" on the board, in the background as in the foreground.
            self.run.task_handle.cancel()
        return reply


@dataclass(frozen=True, kw_only=True)
class Child:
    """What a sub-agent is made of, as the manager decides it: its model client and UI, its
    tools and policy (the parent's, narrowed), its limits, where its side files go, and its
    prompt. Whoever builds the session turns it into an `Agent` (`SubagentManager.build`: the
    same factory as the session's own agent)."""

    llm: LLM
    ui: UI
    tools: list[Tool]
    policy: Policy
    limits: Limits
    side_dir: Path | None
    system_prompt: str
    max_turns: int


def _child_prompt(base: str, name: str, cfg: SubagentConfig) -> str:
    role = f"# Your role\nYou are the sub-agent `{name}`, working on a task handed to you by another agent."
    if cfg.prompt.strip():
        role += "\n" + cfg.prompt.strip()
    role += ("\nThe other agent sees only your final answer, not your tool calls: end with a complete, "
             "self-contained report of what you found or did.")
    return f"{base}\n\n{role}"


@dataclass
class SubagentManager:
    """Starts children, keeps the board, and stops them."""

    configs: dict[str, SubagentConfig]
    make_llm: Callable[[str | None], LLM]
    ui: UI
    limits: Limits
    system_prompt: str
    max_turns: int
    parent: Parent  # the parent agent's: children narrow its tools and policy, and ask through it
    build: Callable[[Child], ChildAgent]  # makes a child's agent (`assemble.child_factory`)
    count_usage: Callable[[Usage, str], None] | None = None  # the parent agent's meter
    models: Lister | None = None  # the endpoint's model list, to check a sub-agent's model against
    runs: dict[str, Run] = field(default_factory=dict)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _results_dir: Path | None = None

    def names(self) -> str:
        return ", ".join(self.configs) or "none"

    def check(self, pool: list[Tool]) -> list[str]:
        """Warnings for listed tools that do not exist in the pool."""
        out = []
        for agent, cfg in self.configs.items():
            unknown = [n for n in cfg.tools or [] if not any(lists(n, t) for t in pool)]
            if unknown:
                out.append(f"sub-agent {agent} lists tools that do not exist: {', '.join(unknown)}; "
                           f"they are ignored (see /tools)")
        return out

    def child_tools(self, name: str) -> tuple[list[Tool], Policy]:
        """The child's tools and policy: the parent's, narrowed to the tools it lists."""

        parent = self.parent
        cfg = self.configs[name]
        pool = [t for t in parent.tools if t.name not in SUBAGENT_TOOLS]
        listed = cfg.tools if cfg.tools is not None else [t.name for t in pool]
        allowed = [t for t in pool if any(lists(n, t) for n in listed)
                   and blocked(parent.policy, t.name, t.effect) is None]
        # An empty allowed_tools means "no restriction" to the policy, so a child with no tools
        # also gets no tools in its pool.
        policy = replace(parent.policy, allowed_tools=tuple(t.name for t in allowed) or parent.policy.allowed_tools,
                         allow=tuple(r for r in parent.policy.allow if not r.origin.startswith(GRANT_ORIGIN)))
        return allowed, policy

    async def model_of(self, name: str) -> str | None:
        """The model a sub-agent runs on (None: the configured one); a name the endpoint would
        refuse is said and left out."""
        # only a sub-agent naming its model looks models up
        from nanohermes.llm.model_names import choose

        cfg = self.configs[name]
        if not cfg.model:
            return None

        async def unlisted() -> tuple[list[str] | None, str]:
            return None, "no model list here"

        config = self.parent.config
        choice = await choose(cfg.model, aliases=config.model_aliases, listed=self.models or unlisted,
                              current=config.model)
        if choice.note:
            self.ui.emit(Notice(level="warning", text=f"sub-agent {name}: {choice.note}"))
        return choice.model

    def spawn(self, name: str, task: str, model: str | None) -> Run:
        """Start sub-agent `name` on `task`, on `model` (None: the session's configured one;
        `model_of` says which)."""
        if name not in self.configs:
            raise ToolError(f"unknown sub-agent `{name}`; configured: {self.names()}")
        cfg = self.configs[name]
        run = Run(id=f"agent-{next(self._ids)}", name=name, task=task)
        ui = NestedUI(self.ui, run, self.parent.confirm_lock, self.count_usage)
        llm = self.make_llm(model)
        if model is not None:  # a model its file names: one the endpoint refuses falls back to the configured
            # only a sub-agent naming its model looks models up
            from nanohermes.llm.model_names import OrConfigured

            llm = OrConfigured(llm, self.parent.config.model, lambda text: self.ui.emit(
                Notice(level="warning", text=f"sub-agent {name}: {text}")))  # told as model_of tells its note
        tools, policy = self.child_tools(name)
        folder = self.parent.session.folder
        # Its own conversation, its budget following its own model's window, as the parent's does.
        run.agent = self.build(Child(llm=llm, ui=ui, tools=tools, policy=policy, limits=self.limits,
                                     side_dir=folder / "agents" / run.id if folder else None,
                                     system_prompt=_child_prompt(self.system_prompt, name, cfg),
                                     max_turns=cfg.max_turns or self.max_turns))
        self.runs[run.id] = run
        run.task_handle = asyncio.create_task(self._drive(run), name=f"subagent-{run.id}")
        run.task_handle.add_done_callback(lambda _: self._settle(run))
        starter = asyncio.current_task()
        if starter is not None:  # interrupting the turn that started it stops it too
            starter.add_done_callback(lambda t: self._starter_done(t, run))
        return run

    def _settle(self, run: Run) -> None:
        """A task cancelled before its first step never ran `_drive`: still put it on the board."""
        if run.status == "running":
            run.status, run.ended = "cancelled", time.monotonic()

    def _starter_done(self, starter: asyncio.Task[Any], run: Run) -> None:
        if starter.cancelled() and run.task_handle is not None and not run.task_handle.done():
            run.task_handle.cancel()

    async def _drive(self, run: Run) -> None:
        agent = run.agent
        assert agent is not None
        try:
            result = await agent.ask(run.task)
            if result.reason == "completed":
                run.status, run.result = "completed", result.text
            else:
                # what it said last, without the thinking written into it, as a finished answer is
                last = next((said for m in reversed(agent.session.history) if m.role == "assistant"
                             and (said := visible(m.content or "")).strip()), "")
                run.status = "max_turns"
                run.result = (last or "") + f"\n[stopped after {plural(result.turns, 'model call')} (max_turns)]"
        except asyncio.CancelledError:
            run.status = "cancelled"
            raise
        except Exception as e:  # an endpoint failure ends the child, never the parent
            run.status = "failed"
            run.error = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
        finally:
            # The board, the saved file and the parent's answer all read these: no key in them.
            run.result, run.error = redact(run.result), redact(run.error)
            run.ended = time.monotonic()
            run.activity = ""
            self._save(run)
            self.ui.emit(Notice(level="info", text=f"sub-agent {run.id} ({run.name}) {run.status} "
                                                   f"after {run.elapsed:.1f}s"))
            await agent.runtime.close()  # its background tasks end with it: no one else can read them

    def _save(self, run: Run) -> None:
        """The full result goes to a file, so a board preview never loses anything."""
        if not run.result:
            return
        try:
            if (parent := self.parent.session.folder) is not None:
                folder = parent / "agents"
            else:
                if self._results_dir is None:
                    self._results_dir = Path(tempfile.mkdtemp(prefix="nanohermes-agents-"))
                folder = self._results_dir
            private_dir(folder)
            run.result_path = folder / f"{run.id}.md"
            write_private(run.result_path, redact(run.result))
        except OSError:
            run.result_path = None

    async def wait(self, run: Run) -> Run:
        assert run.task_handle is not None
        await asyncio.gather(run.task_handle, return_exceptions=True)
        return run

    async def cancel_all(self) -> int:
        """Cancel every running child and wait for them; returns how many were running."""
        running = [r.task_handle for r in self.runs.values() if r.task_handle is not None and not r.task_handle.done()]
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        return len(running)

    async def aclose(self) -> None:
        n = await self.cancel_all()
        if n:
            self.ui.emit(Notice(level="warning", text=f"cancelled {n} running sub-agent{'s' if n > 1 else ''} at exit"))
        if self._results_dir is not None:  # a session not saved keeps its children's results until it ends
            shutil.rmtree(self._results_dir, ignore_errors=True)
            self._results_dir = None

    def board(self) -> str:
        if not self.runs:
            return f"no sub-agents started yet; configured: {self.names()}"
        cap = self.limits.agent_preview_chars
        rows = []
        for r in self.runs.values():
            head = f"{r.id}  {r.name}  {r.status}  {r.elapsed:.1f}s  {plural(r.tool_calls, 'tool call')}"
            if r.status == "running":
                rows.append(head + (f"\n  now: {r.activity}" if r.activity else ""))
                continue
            text = redact(r.error if r.status == "failed" else " ".join(r.result.split()))
            preview = text[:cap]
            if len(text) > cap:
                where = f"; full result: {r.result_path} (read it with read_file)" if r.result_path else ""
                preview += f"… ({len(text)} chars, showing the first {cap}{where})"
            rows.append(head + f"\n  {'error' if r.status == 'failed' else 'result'}: {preview or '(empty)'}")
        return "\n".join(rows)


@dataclass(frozen=True, kw_only=True)
class SubagentParams(Params):
    agent: str = field(metadata=about("Which configured sub-agent to start."))
    task: str = field(metadata=about("The task, complete and self-contained: the sub-agent sees nothing else."))
    wait: bool = field(default=False, metadata=about("Wait for it to finish and return its answer (default: run in "
                                                     "the background and return its id)."))

    non_empty: ClassVar[dict[str, str]] = {"agent": "", "task": "describe the work to hand over"}
    claude_fields: ClassVar[dict[str, str]] = {"agent": "subagent_type", "task": "prompt"}


@dataclass(frozen=True, kw_only=True)
class SubagentTool(Tool[SubagentParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "subagent"
    claude_names: ClassVar[tuple[str, ...]] = ("Task",)
    group: ClassVar[str] = "agents"
    description: ClassVar[str] = (
        "Hand a task to a sub-agent: a helper with its own fresh history and a limited set of tools, never "
        "more permission than yours. By default it runs in the background and this returns its id at once; "
        "check agent_list for its status and result, and do other work meanwhile. With wait=true it returns "
        "the sub-agent's final answer instead. Give the task in full: it sees nothing of this conversation."
    )
    params: ClassVar[type[Params]] = SubagentParams
    # Starting a child asks nothing: each of its own calls is checked and asked like yours.
    approval: ClassVar[Approval] = "never"
    effect = "state"
    manager: SubagentManager = field(repr=False, compare=False)

    def summary(self, args: SubagentParams) -> str:
        return f"{args.agent}: {args.task.splitlines()[0][:150]}"

    def spec(self, limits: Limits | None = None) -> dict[str, Any]:
        spec = super().spec(limits)
        fn = spec["function"]
        fn["parameters"]["properties"]["agent"]["enum"] = list(self.manager.configs)
        # Agent files often carry long descriptions (examples of when to use them): each is
        # cut, so that many of them do not fill every request.
        cap = (limits or Limits()).agent_description_chars
        fn["description"] += " Sub-agents: " + "; ".join(
            f"{n}: {_cut(c.description, cap)}" for n, c in self.manager.configs.items()) + "."
        return spec

    async def run(self, args: SubagentParams, ctx: ToolContext, attempt: Attempt) -> str:
        name = args.agent.strip()
        if name not in self.manager.configs:
            raise ToolError(f"unknown sub-agent `{name}`; configured: {self.manager.names()}")
        model = await self.manager.model_of(name)
        run = self.manager.spawn(name, args.task, model)
        if not args.wait:
            return (f"started sub-agent {run.name} as {run.id}; it works in the background. "
                    f"Check agent_list for its status and result.")
        await self.manager.wait(run)
        if run.status == "failed":
            raise ToolError(f"sub-agent {run.id} ({run.name}) failed: {run.error}")
        if run.status == "cancelled":
            raise ToolError(f"sub-agent {run.id} ({run.name}) was cancelled")
        return f"sub-agent {run.id} ({run.name}) {run.status} after {run.elapsed:.1f}s:\n{run.result or '(no answer)'}"


@dataclass(frozen=True, kw_only=True)
class AgentListParams(Params):
    pass


@dataclass(frozen=True, kw_only=True)
class AgentListTool(ReadOnlyTool[AgentListParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "agent_list"
    group: ClassVar[str] = "agents"
    description: ClassVar[str] = (
        "Show the sub-agents started in this session: id, name, status (running, completed, max_turns, failed, "
        "cancelled), elapsed time, and the first 500 chars of each result (the full result is in a file "
        "named there). Start one with subagent."
    )
    params: ClassVar[type[Params]] = AgentListParams
    manager: SubagentManager = field(repr=False, compare=False)

    def output_limit(self) -> str:
        return "agent_preview_chars chars per result"

    async def run(self, args: AgentListParams, ctx: ToolContext, attempt: Attempt) -> str:
        return self.manager.board()


def _cut(text: str, cap: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= cap else text[:cap].rstrip() + f"… ({len(text) - cap} more chars)"


def lists(name: str, tool: Tool) -> bool:
    """Does a sub-agent's tool list entry name this tool: its name (or a rule naming it, as
    `mcp__server` names each tool of the server), or one of Claude Code's names of it?"""
    return names_tool([name], tool.name) or name in tool.claude_names


def tools(manager: SubagentManager | None) -> list[Tool]:
    """`subagent` and `agent_list`, only when sub-agents are configured."""
    if manager is None or not manager.configs:
        return []
    return [SubagentTool(manager=manager), AgentListTool(manager=manager)]
