"""Tool-call execution: look up, parse, ask the gate, batch, run, clamp, budget, persist.

Every call in an assistant message gets exactly one result, in the model's order, whatever
happens: unknown tool, bad JSON, a missing field, a denial, a crash. Consecutive
concurrency-safe calls run together (bounded by `max_parallel`); any other call runs alone.
Whether a call may run, and how confined, is the gate's (`gate.py`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nanohermes.common.arguments import parse_arguments
from nanohermes.common.budget import Limits, clamp
from nanohermes.common.events import UI, ApprovalReply, ApprovalRequest, Notice, ToolFinished, ToolRunning, ToolStarted
from nanohermes.common.messages import Image, Message, ToolCall
from nanohermes.common.modes import Mode
from nanohermes.config import Config
from nanohermes.guard import programs
from nanohermes.guard.gate import DENIED, DENIED_PREFIX, Gate, Refusal, denied, writable_roots
from nanohermes.guard.ownreads import OwnReader
from nanohermes.guard.permissions import Policy, Rule, Target, blocked
from nanohermes.tools.base import Params, Tool, ToolContext, ToolError
from nanohermes.turn import persisted
from nanohermes.turn.session import Session

if TYPE_CHECKING:
    from nanohermes.hooks.hooks import Hooks

INTERRUPTED = "interrupted by user"
# After a result clamped by the aggregate budget when there is no session folder to keep it in.
UNSAVED_NOTE = "\n(cut to fit the per-message budget; not saved, the session is not recorded: narrow the call to see more)"

__all__ = ["DENIED", "DENIED_PREFIX", "INTERRUPTED", "UNSAVED_NOTE", "Runtime", "ToolConventions", "denied"]


def cut_off_error(call: ToolCall) -> str:
    """A call whose arguments the output token limit cut off: the next step is smaller calls,
    not the same call again."""
    return (f"this {call.name} call was cut off at the output token limit (finish_reason length) after "
            f"{len(call.arguments)} chars of arguments, so it did not run. Do not send it again as it was: split the "
            "content over several calls (write_file with the first part, then add the rest with edit_file), "
            "each well under the limit")


class AfterCall(Protocol):
    """What adds to a call's result once it ran well (the instruction files of a subfolder the
    call is the first to work in). Added after the result's own clamp, so nothing cuts it."""

    async def after(self, target: Target, call_id: str) -> str: ...

    def for_session(self, session: Session) -> AfterCall:
        """The same addition in another conversation (a sub-agent's), which keeps its own
        record of what it added."""
        ...


class ToolConventions(Protocol):
    """What the tool modules add to how a runtime offers its tools and reads calls, given by
    whoever builds it (`tools.registry.conventions()` for the built-ins), so the runtime
    imports no tool module. A runtime without them offers every tool its policy allows, up
    to `max_tools`, and reads each call as it came."""

    def offered(self, allowed: list[Tool], state: dict[str, Any], max_tools: int, limits: Limits,
                notice: Callable[[str], None]) -> list[Tool]:
        """The tools a request offers, in pool order, never more than `max_tools`; `notice`
        tells the person when what is left out changes."""
        ...

    def reread(self, call: ToolCall, names: Container[str]) -> tuple[ToolCall, str] | None:
        """The call `call` stands for among the tools `names`, and a note for the model (a
        patch sent through the shell is the apply_patch call); None: it is what it says."""
        ...


@dataclass
class _Call:
    """One tool call of a message on its way through the runtime: read, judged, then run."""

    call: ToolCall
    tool: Tool | None = None
    args: Params | None = None
    error: str | None = None  # set when the call cannot run at all
    safe: bool = False
    note: str = ""  # said after the result: how the call was read (a patch sent through the shell)


@dataclass
class Runtime:
    """Runs a message's tool calls: parses, judges, batches, runs, clamps and persists them."""

    tools: list[Tool]  # the assembled pool, in pool order
    config: Config
    workspace: Path
    ui: UI
    policy: Policy
    limits: Limits = field(default_factory=Limits)
    # The conversation the calls run in: its tool state, and its folder, where over-budget
    # results are persisted. The agent running turns on this runtime shares it.
    session: Session = field(default_factory=Session)
    hooks: Hooks | None = None  # PreToolUse / PostToolUse commands of the user or a trusted project
    # The one reader of the files nanohermes puts into the prompt by itself (`@` mentions,
    # command files): None builds one with this runtime's policy, that asks nobody.
    reader: OwnReader | None = None
    after_calls: list[AfterCall] = field(default_factory=list)
    conventions: ToolConventions | None = None
    _after: dict[str, str] = field(default_factory=dict, init=False)  # by call id, until its message
    _confirm_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _images: dict[str, tuple[Image, ...]] = field(default_factory=dict, init=False)  # by call id, until its message
    _read: list[tuple[ToolCall, _Call]] = field(default_factory=list, init=False)  # read ahead (`foresee`)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}
        if self.reader is None:
            self.reader = OwnReader(self.workspace, policy=lambda: self.policy, limits=self.limits)
        self.gate = Gate(self)
        # The programs nanohermes starts for itself are found outside what this session may write.
        programs.settle(writable_roots(self.workspace, self.config))

    @property
    def own_reader(self) -> OwnReader:
        """The reader of the files nanohermes puts into the prompt by itself."""
        assert self.reader is not None  # made in __post_init__
        return self.reader

    async def confirm_own_read(self, request: ApprovalRequest) -> ApprovalReply:
        """The person's answer to a question of the reader, asked as tool calls are."""
        async with self.confirm_lock:
            return await self.ui.confirm(request)

    @property
    def confirm_lock(self) -> asyncio.Lock:
        """Held while an approval prompt is open; sub-agents asking through this runtime's UI
        take it too, so two prompts never share the terminal."""
        return self._confirm_lock

    def set_tools(self, tools: list[Tool]) -> None:
        """Replace the pool, e.g. when MCP servers have started and their tools are known."""
        self.tools = tools
        self._by_name = {t.name: t for t in tools}
        self._read = []  # read with the tools before: read again

    # -- what the model sees ---------------------------------------------------------------
    def visible_tools(self) -> list[Tool]:
        """What the model is offered: what the policy does not block, within the endpoint's
        function limit (past it, MCP tools are found with tool_search)."""
        allowed = [t for t in self.tools if blocked(self.policy, t.name, t.effect) is None]
        if self.conventions is None:
            return allowed[:self.config.max_tools]
        return self.conventions.offered(allowed, self.session.state, self.config.max_tools, self.limits,
                                        lambda text: self.ui.emit(Notice(level="info", text=text)))

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec(self.limits) for t in self.visible_tools()]

    def set_mode(self, mode: Mode) -> None:
        self.policy = replace(self.policy, mode=mode)

    def remember(self, rule: Rule, origin: str = "learned this session") -> None:
        """An "always" answer: allowed for the rest of the session, whatever the mode."""
        self.gate.remember(rule, origin)

    def remember_in_project(self, rules: Sequence[Rule]) -> None:
        """"Always for this project": remembered now and written to the project config."""
        self.gate.remember_in_project(rules)

    def permissions_report(self) -> list[str]:
        """The rules in force and where each came from (the /permissions listing), and what
        the OS sandbox confines here."""
        # the report and the sandbox's probe: only /permissions asks for them
        from nanohermes.guard.permissions import describe
        from nanohermes.guard.sandbox import describe_availability

        return [*describe(self.policy, [(t.name, t.effect) for t in self.tools]),
                *describe_availability(self.config.sandbox.mode)]

    # -- running calls ---------------------------------------------------------------------
    def foresee(self, calls: Sequence[ToolCall]) -> None:
        """The model's answer holds these calls, and the turn settles before running them (a
        checkpoint's scan): meanwhile each is read (its arguments parsed, its tool's code
        loaded), and what judging it needs that takes a while starts in the background
        (`Gate.foresee`). Reading changes nothing; `run_calls` then runs them as read."""
        for call in calls:  # first: the background work then overlaps the reading too
            if (tool := self._by_name.get(call.name)) is not None:
                self.gate.foresee(tool)
        self._read = [(call, self._prepare(call)) for call in calls]

    def busy(self) -> bool:
        """Whether something the session keeps works on its own now (a background task)."""
        return any(busy() for v in self.session.state.values() if callable(busy := getattr(v, "busy", None)))

    def may_change(self, calls: Sequence[ToolCall]) -> bool:
        """Whether running `calls` may change the workspace's files: a tool that does more than
        read (by its kind, not by the arguments: a command judged read-only may still write)."""
        return any((tool := self._by_name.get(c.name)) is not None and tool.effect != "read" for c in calls)

    async def run_calls(self, calls: Sequence[ToolCall], results: dict[str, Message] | None = None) -> list[Message]:
        """Run one assistant message's calls. `results` fills in as calls finish, so a
        caller that is cancelled mid-way knows which calls still need an answer."""
        done = results if results is not None else {}
        ahead, self._read = self._read, []
        if len(ahead) == len(calls) and all(seen is call for (seen, _), call in zip(ahead, calls, strict=True)):
            prepared = [p for _, p in ahead]
        else:
            prepared = [self._prepare(c) for c in calls]
        sem = asyncio.Semaphore(self.config.max_parallel_tools)  # batches run one after another

        async def one(p: _Call) -> None:
            async with sem:
                done[p.call.id] = await self._execute(p)

        i = 0
        while i < len(prepared):
            batch = [prepared[i]]
            if prepared[i].safe:
                while i + len(batch) < len(prepared) and prepared[i + len(batch)].safe:
                    batch.append(prepared[i + len(batch)])
            i += len(batch)
            if len(batch) == 1:
                done[batch[0].call.id] = await self._execute(batch[0])
            else:
                await asyncio.gather(*(one(p) for p in batch))
        out = [done[c.id] for c in calls]
        return self._apply_aggregate(prepared, out)

    def _prepare(self, call: ToolCall) -> _Call:
        p = _Call(call)
        if call.text_format:  # the model learns its call came as text, to send the next one as a call
            p.note = (f"(this call was read from the text of your answer, where it was written as {call.text_format}; "
                      "send tool calls through the API's tool calls)")
        if self.conventions is not None and (reread := self.conventions.reread(call, self._by_name)) is not None:
            patched, note = reread  # judged and approved as what it is
            p.call, p.note, call = patched, "\n".join(filter(None, (p.note, note))), patched
        tool = self._by_name.get(call.name)
        if tool is None:
            names = ", ".join(t.name for t in self.visible_tools())
            p.error = f"unknown tool `{call.name}`; available tools: {names}"
            return p
        p.tool = tool
        try:
            raw = parse_arguments(call.arguments, self.limits.tool_args_max_depth)
        except ValueError as e:
            p.error = cut_off_error(call) if call.cut_off else f"arguments for {call.name} {e}"
            return p
        try:
            p.args = tool.parse(raw)
        except ToolError as e:
            p.error = f"{call.name}: {e}"
            return p
        try:  # a predicate that raises means "unsafe"
            p.safe = bool(tool.concurrency_safe(p.args))
        except Exception:
            p.safe = False
        return p

    async def _execute(self, p: _Call) -> Message:
        started = time.monotonic()
        name = p.call.name
        args_view: dict[str, Any] | str = p.args.dump() if p.args else p.call.arguments
        summary = p.tool.summary(p.args) if p.tool and p.args else ""
        self.ui.emit(ToolStarted(call_id=p.call.id, name=name, arguments=args_view, summary=summary))
        display: str | None = None
        waited = 0.0
        if p.error is not None:
            text, is_error = "ERROR: " + p.error, True
        else:
            assert p.tool is not None and p.args is not None
            text, is_error, display, waited = await self._permitted_run(p.tool, p.args, p.call.id, summary)
        text = clamp(text + (f"\n{p.note}" if p.note else ""), self.limits.max_output) + self._after.pop(p.call.id, "")
        # The time shown is the tool's own: an approval prompt's wait is not counted.
        self.ui.emit(ToolFinished(call_id=p.call.id, name=name, result=text, is_error=is_error,
                                  elapsed=time.monotonic() - started - waited, display=display))
        images = self._images.pop(p.call.id, ())
        return Message.tool(p.call.id, text, images if self.config.images_to_model else (), display=display)

    async def _permitted_run(self, tool: Tool, args: Params, call_id: str,
                             summary: str) -> tuple[str, bool, str | None, float]:
        """(result text, is_error, display, seconds spent waiting for the person)."""
        ctx = ToolContext.of(self, call_id)
        verdict = await self.gate.judge(tool, args, ctx, summary)
        if isinstance(verdict, Refusal):
            text = self.hooks.with_context(call_id, str(verdict)) if self.hooks is not None else str(verdict)
            return text, verdict.is_error, None, verdict.waited
        self.ui.emit(ToolRunning(call_id=call_id, name=tool.name))
        ran = await self.gate.attempt(tool, verdict, ctx)
        if verdict.target.mapped:  # the model learns the path it wrote was read as another
            # only a path written the Windows way
            from nanohermes.guard.foreign_paths import note

            ran = replace(ran, text=f"{ran.text}\n{note(verdict.target.mapped)}")
        if ran.images:
            self._images[call_id] = ran.images
        text = ran.text
        if self.hooks is not None:  # the PostToolUse hooks of a success, then what the PreToolUse hooks added
            if not ran.is_error:
                text = await self.hooks.post_tool_use(tool, verdict.args, text, call_id)
            text = self.hooks.with_context(call_id, text)
        if not ran.is_error:
            self._after[call_id] = "".join([await a.after(verdict.target, call_id) for a in self.after_calls])
        if verdict.basis != "person":
            text = without_exposed(text)
        return text, ran.is_error, ran.display, ran.waited

    def halted(self) -> str | None:
        """Why a hook said the turn must not go on after the calls just run, or None."""
        return self.hooks.halted() if self.hooks is not None else None

    async def close(self) -> None:
        """End what tools keep in the session state (background tasks, ...): every value
        with an `aclose()` is closed. Called once when the session ends, however it ends."""
        for key, value in list(self.session.state.items()):
            aclose = getattr(value, "aclose", None)
            if aclose is None:
                continue
            try:
                await aclose()
            except Exception as e:  # one failing closer must not keep the others from running
                self.ui.emit(Notice(level="warning", text=f"closing {key} failed: {type(e).__name__}: {e}"))

    # -- the per-message aggregate ---------------------------------------------------------
    def _apply_aggregate(self, prepared: list[_Call], results: list[Message]) -> list[Message]:
        """Over the aggregate budget, persist the largest results to files, leaving previews.
        Without a session folder (--no-session) they are clamped to the preview size instead."""
        budget = self.limits.aggregate_chars
        total = sum(len(m.content or "") for m in results)
        if total <= budget:
            return results
        out = list(results)
        for i in sorted(range(len(out)), key=lambda i: len(out[i].content or ""), reverse=True):
            if total <= budget:
                break
            tool = prepared[i].tool
            if tool is not None and not tool.persist:
                continue
            text = out[i].content or ""
            if len(text) <= self.limits.persisted_preview_chars:
                continue  # its preview would be no shorter
            if self.session.folder is None:
                preview = clamp(text, self.limits.persisted_preview_chars) + UNSAVED_NOTE
            else:
                preview = self.persist(prepared[i].call.id, text)
            if len(preview) >= len(text):
                continue  # the wrapper would outweigh what it saves: keep the result as it is
            total -= len(text) - len(preview)
            out[i] = Message.tool(prepared[i].call.id, preview, display=out[i].display)
        return out

    def persist(self, call_id: str, text: str) -> str:
        """Save `text` in the session folder; returns the preview the model sees instead (or
        `text` itself when the preview would be no shorter: then nothing is saved)."""
        assert self.session.folder is not None

        path = persisted.free_path(self.session.folder, call_id)
        preview = persisted.aggregate_preview(path, text, self.limits.persisted_preview_chars)
        if len(preview) >= len(text):
            return text  # nothing gained: no file
        persisted.write(path, text)
        return preview


def without_exposed(text: str) -> str:
    """`text` without the values of secret files that a command no person approved could read
    before the sandbox withheld them (`withhold.exposed`), with a note when any was there: what
    such a command made of them (a copy read by another tool) reaches the model only through a
    call a person approves."""
    withhold = sys.modules.get("nanohermes.guard.withhold")  # not loaded: no command was confined, none exposed
    if withhold is None or not (values := withhold.exposed()):
        return text
    cleaned, n = withhold.redact_values(text, values)
    if not n:
        return text
    return (f"{cleaned}\nnote: {n} value{'s' if n != 1 else ''} of the workspace's secret files "
            f"(permissions.secret_files) {'were' if n != 1 else 'was'} replaced by {withhold.WITHHELD} in this result: "
            "the file appeared while a command no person approved ran, so its values reach the model only through a "
            "call a person approves")
