"""The editor as nanohermes's front end: the `UI` an ACP session's agent talks to.

`EditorUI` turns the core's events into session updates (sent in order, by one sender task:
text and thinking as message and thought chunks, each call as a `tool_call` and its
`tool_call_update`, the todo list as a `plan`, warnings as a quoted line of the answer, every
mode switch as a `current_mode_update`) and answers the approval seam through
`session/request_permission` (allow once, allow always with the rule it learns, reject; a
cancelled request is a refusal), an MCP server's form through `elicitation/create` where the
client has it. `ClientFiles` is the file tools' `Buffers` over the client's `fs/*` methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp import schema as s

from nanohermes.common.events import (
    ApprovalReply, ApprovalRequest, ElicitationReply, ElicitationRequest, Event, Notice, ReasoningDelta,
    SubagentEvent, TextDelta, TextPending, TodoUpdated, ToolFinished, ToolProgress, ToolRunning, ToolStarted, TurnEnded,
)
from nanohermes.common.modes import Mode
from nanohermes.guard.redact import StreamRedactor, redact
from nanohermes.turn.runtime import INTERRUPTED
import nanohermes.ui.acp.updates as updates
from nanohermes.ui.visible import escape_controls

if TYPE_CHECKING:
    from acp.agent.connection import AgentSideConnection

    from nanohermes.tools import Tool

PROGRESS_LINES = 20  # the last lines of a running call's output shown while it runs
TERMINAL_SECS = 10.0  # how long the editor's terminal may take to show a finished command's output
# What the editor's terminal runs to show a command's output: our own interpreter (isolated:
# nothing of the workspace or the environment on its path) writing the text it is given, and
# nothing else. The command itself ran here, in the gate's confinement, never in the editor.
SHOW_OUTPUT = "import os, sys; sys.stdout.buffer.write(os.fsencode(sys.argv[1]))"


def log(text: str) -> None:
    """A line for the person reading the agent's stderr (the editor's log)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"nanohermes: {redact(text)}\n")
        sys.stderr.flush()


@dataclass
class _Call:
    acp_id: str
    tool: Tool | None
    name: str
    arguments: dict[str, Any] | str
    summary: str
    progress: list[str] = field(default_factory=list)


@dataclass
class EditorUI:
    """What an ACP session's agent emits to and asks of: the editor on the other end."""

    conn: AgentSideConnection
    session_id: str
    workspace: Path
    client: s.ClientCapabilities
    tools: Callable[[], list[Tool]] = lambda: []  # the session's tool pool, once the agent is built
    mode: Callable[[], Mode] = lambda: Mode.DEFAULT  # the mode the session's runtime is in
    shown_mode: Mode | None = None  # the last mode the editor was told
    _queue: asyncio.Queue[updates.Update | Callable[[], Awaitable[None]] | None] = field(
        default_factory=asyncio.Queue)
    _sender: asyncio.Task[None] | None = None
    _calls: dict[tuple[str, str], _Call] = field(default_factory=dict)  # (agent id, call id) -> the call shown
    _seq: int = 0
    # A key split across streamed pieces is whole in neither: each stream holds back what may begin one.
    _text: StreamRedactor = field(default_factory=StreamRedactor)
    _thought: StreamRedactor = field(default_factory=StreamRedactor)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: int = 0  # the event loop's thread

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._sender = self._loop.create_task(self._send_all())

    # -- sending, in order ---------------------------------------------------------------------
    def send(self, update: updates.Update | Callable[[], Awaitable[None]]) -> None:
        """Queue an update (or a step that sends its own, in its turn); safe from any thread."""
        loop = self._loop
        if loop is None:
            return
        try:
            if threading.get_ident() == self._thread:
                self._queue.put_nowait(update)
            else:
                loop.call_soon_threadsafe(self._queue.put_nowait, update)
        except RuntimeError:  # the loop is closed: the session is over
            pass

    async def _send_all(self) -> None:
        while True:
            update = await self._queue.get()
            try:
                if update is None:
                    return
                if callable(update):
                    await update()
                else:
                    await self.conn.session_update(session_id=self.session_id, update=update)
            except (ConnectionError, OSError):
                pass  # nobody reads any more: the updates have nowhere to go
            except Exception as e:  # one update the client refused must not stop the rest
                log(f"a session update could not be sent: {type(e).__name__}: {e}")
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Every update queued so far has been written (before an answer or a request)."""
        if self._loop is None:
            return
        self._settle_streams()
        self.check_mode()
        await self._queue.join()

    async def aclose(self) -> None:
        if self._sender is not None and not self._sender.done():
            self._queue.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._sender), 2)
            self._sender.cancel()

    def _settle_streams(self) -> None:
        """What the streams held back goes out, before anything that is not more of them."""
        if (held := self._thought.flush()):
            self.send(updates.thought_chunk(held))
        if (held := self._text.flush()):
            self.send(updates.message_chunk(held))

    def check_mode(self) -> None:
        """Tell the editor the mode, whenever it is not the one it was last told."""
        mode = self.mode()
        if mode != self.shown_mode:
            self.shown_mode = mode
            self.send(updates.mode_update(mode))

    # -- the core's events -------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        if self._loop is not None and threading.get_ident() != self._thread:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self.emit, event)
            return
        if isinstance(event, TextDelta):
            if (held := self._thought.flush()):
                self.send(updates.thought_chunk(held))
            if piece := self._text.feed(event.text):
                self.send(updates.message_chunk(piece))
            return
        if isinstance(event, TextPending):
            return  # an editor gets the text once it is known as answer or thinking (chunks are never taken back)
        if isinstance(event, ReasoningDelta):
            if (held := self._text.flush()):
                self.send(updates.message_chunk(held))
            if piece := self._thought.feed(event.text):
                self.send(updates.thought_chunk(piece))
            return
        self._settle_streams()
        if isinstance(event, ToolStarted):
            self._started("", event, "")
        elif isinstance(event, ToolRunning):
            self._running("", event)
        elif isinstance(event, ToolProgress):
            self._progress("", event)
        elif isinstance(event, ToolFinished):
            self._finished("", event)
        elif isinstance(event, TodoUpdated):
            self.send(updates.plan(event.items))
        elif isinstance(event, Notice):
            log(f"{event.level}: {event.text}")
            if event.level != "info":
                self.send(updates.message_chunk(f"\n\n> **{event.level}:** {escape_controls(redact(event.text))}\n\n"))
        elif isinstance(event, SubagentEvent):
            self._nested(event)
        elif isinstance(event, TurnEnded) and event.reason == "interrupted":
            self._cut_off()
        self.check_mode()

    def _cut_off(self) -> None:
        """The calls a cancel stopped mid-run never finish: the editor is told they failed."""
        for call in self._calls.values():
            self.send(s.ToolCallProgress(session_update="tool_call_update", tool_call_id=call.acp_id, status="failed",
                                         content=[s.ContentToolCallContent(type="content",
                                                                           content=updates.text(INTERRUPTED))]))
        self._calls.clear()

    def _nested(self, event: SubagentEvent) -> None:
        inner = event.event
        label = f"[{event.agent} {event.agent_id}] "
        if isinstance(inner, ToolStarted):
            self._started(event.agent_id, inner, label)
        elif isinstance(inner, ToolRunning):
            self._running(event.agent_id, inner)
        elif isinstance(inner, ToolProgress):
            self._progress(event.agent_id, inner)
        elif isinstance(inner, ToolFinished):
            self._finished(event.agent_id, inner)

    def _tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools() if t.name == name), None)

    def _new_id(self, call_id: str) -> str:
        self._seq += 1
        return f"{call_id or 'call'}@{self._seq}"

    def _started(self, agent: str, ev: ToolStarted, label: str) -> None:
        tool = self._tool(ev.name)
        call = _Call(self._new_id(ev.call_id), tool, ev.name, ev.arguments, ev.summary)
        self._calls[(agent, ev.call_id)] = call
        start = updates.tool_start(call.acp_id, tool, ev.name, ev.arguments, ev.summary, self.workspace)
        if label:
            start.title = label + start.title
        self.send(start)

    def _running(self, agent: str, ev: ToolRunning) -> None:
        """The call was allowed or approved and runs: pending no more."""
        call = self._calls.get((agent, ev.call_id))
        if call is not None:
            self.send(s.ToolCallProgress(session_update="tool_call_update", tool_call_id=call.acp_id,
                                         status="in_progress"))

    def _progress(self, agent: str, ev: ToolProgress) -> None:
        call = self._calls.get((agent, ev.call_id))
        if call is None:
            return
        call.progress = [*call.progress, escape_controls(ev.text)][-PROGRESS_LINES:]
        self.send(s.ToolCallProgress(session_update="tool_call_update", tool_call_id=call.acp_id, status="in_progress",
                                     content=[s.ContentToolCallContent(type="content", content=updates.text(
                                         "\n".join(call.progress)))]))

    def _finished(self, agent: str, ev: ToolFinished) -> None:
        call = self._calls.pop((agent, ev.call_id), None)
        if call is None:
            return
        if self.client.terminal and updates.kind_of(call.tool) == "execute":
            self.send(lambda: self._in_terminal(call.acp_id, ev))
            return
        self.send(updates.tool_end(call.acp_id, ev, self.workspace))

    async def _in_terminal(self, acp_id: str, ev: ToolFinished) -> None:
        """A finished command's output shown in a terminal of the editor (a `terminal` block
        before the result), released once the call's update holds it."""
        terminal = None
        try:
            made = await self.conn.create_terminal(session_id=self.session_id, command=sys.executable,
                                                   args=["-I", "-c", SHOW_OUTPUT, escape_controls(ev.result)],
                                                   cwd=str(self.workspace))
            terminal = made.terminal_id
            await asyncio.wait_for(self.conn.wait_for_terminal_exit(session_id=self.session_id, terminal_id=terminal),
                                   TERMINAL_SECS)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the result is still shown as text
            log(f"the editor's terminal could not show a command's output ({type(e).__name__}: {e})")
        extra: list[updates.Content] = [s.TerminalToolCallContent(type="terminal", terminal_id=terminal)] \
            if terminal is not None else []
        await self.conn.session_update(session_id=self.session_id,
                                       update=updates.tool_end(acp_id, ev, self.workspace, extra))
        if terminal is not None:
            with contextlib.suppress(Exception):
                await self.conn.release_terminal(session_id=self.session_id, terminal_id=terminal)

    # -- the approval seam -------------------------------------------------------------------
    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        await self.flush()
        agent = request.agent.rsplit(" ", 1)[-1] if request.agent else ""
        call = self._calls.get((agent, request.call_id))
        acp_id = call.acp_id if call is not None else self._new_id(request.call_id)
        options = [s.PermissionOption(option_id="once", name="Run it again outside the sandbox" if request.rerun
                                      else request.yes or "Allow once", kind="allow_once")]
        if request.rule and not request.rerun:
            options.append(s.PermissionOption(option_id="always", kind="allow_always", name=(
                f"Always allow {escape_controls(request.rule, newlines=True)} (this session)")))
        options.append(s.PermissionOption(option_id="deny", name="Reject", kind="reject_once"))
        tool_call = self._asked_call(acp_id, call, request)
        try:
            answer = await self.conn.request_permission(session_id=self.session_id, tool_call=tool_call,
                                                        options=options)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # no answer is a refusal, never a yes
            log(f"the permission request for {request.tool} failed ({type(e).__name__}: {e}); refused")
            return ApprovalReply("deny")
        outcome = answer.outcome
        picked = outcome.option_id if isinstance(outcome, s.AllowedOutcome) else "deny"
        if picked == "always" and request.rule:
            return ApprovalReply("always")
        if picked == "once":  # the call's `in_progress` follows as it starts (ToolRunning)
            return ApprovalReply("once")
        return ApprovalReply("deny")

    def _asked_call(self, acp_id: str, call: _Call | None, request: ApprovalRequest) -> s.ToolCallUpdate:
        """The call as the editor shows it while asking: what it touches, and the diff of an
        edit or the whole command line, with why it is asked."""
        detail = request.detail.strip("\n")
        # The diff whole: its last line keeps its newline, as the file will.
        content: list[updates.Content] = list(updates.diffs(request.detail, self.workspace)) if detail else []
        said = [escape_controls(request.summary)] if not content else []
        if detail and not content and detail != request.summary:
            said.append(escape_controls(detail))
        if request.reason:
            said.append(f"({escape_controls(request.reason)})")
        if request.agent:
            said.append(f"(asked by the sub-agent {escape_controls(request.agent, newlines=True)})")
        if said:
            content.append(s.ContentToolCallContent(type="content", content=updates.text("\n\n".join(said))))
        tool = call.tool if call is not None else self._tool(request.tool)
        args = call.arguments if call is not None else {}
        return s.ToolCallUpdate(tool_call_id=acp_id, title=updates.title(request.tool, request.summary),
                                kind=updates.kind_of(tool, args, self.workspace), status="pending", content=content,
                                locations=updates.locations(tool, args, self.workspace) or None)

    async def ask_yes_no(self, title: str, body: str, yes: str, no: str, *, yes_kind: str = "allow_once") -> bool | None:
        """A question of nanohermes's own (trust, a form it cannot show), as a permission
        request on a call of kind `other`: True, False, or None when it was cancelled."""
        await self.flush()
        acp_id = self._new_id("question")
        self.send(s.ToolCallStart(session_update="tool_call", tool_call_id=acp_id, title=title, kind="other",
                                  status="pending",
                                  content=[s.ContentToolCallContent(type="content", content=updates.text(body))]))
        await self.flush()
        options = [s.PermissionOption(option_id="yes", name=yes, kind=yes_kind),  # type: ignore[arg-type]  # a kind word
                   s.PermissionOption(option_id="no", name=no, kind="reject_once")]
        answer: bool | None = None
        try:
            reply = await self.conn.request_permission(session_id=self.session_id, options=options,
                                                       tool_call=s.ToolCallUpdate(tool_call_id=acp_id, title=title,
                                                                                  kind="other", status="pending"))
            if isinstance(reply.outcome, s.AllowedOutcome):
                answer = reply.outcome.option_id == "yes"
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log(f"the question {title!r} could not be asked ({type(e).__name__}: {e})")
        self.send(s.ToolCallProgress(session_update="tool_call_update", tool_call_id=acp_id,
                                     status="completed" if answer else "failed"))
        return answer

    # -- an MCP server's questions -------------------------------------------------------------
    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        """A form where the client shows forms (`elicitation/create`); otherwise a yes/no that
        sends the form's defaults, when it needs nothing more, or a page to visit."""
        caps = self.client.elicitation
        server = escape_controls(request.server, newlines=True)
        if request.url:
            done = await self.ask_yes_no(f"{server} asks you to open a page", f"{escape_controls(request.message)}\n\n"
                                         f"{escape_controls(request.url)}", "Done there", "Decline")
            return ElicitationReply("accept" if done else "decline" if done is False else "cancel")
        if caps is not None and caps.form is not None:
            return await self._form(request)
        # only an MCP server's elicitation
        from nanohermes.turn.elicitation import fields

        wanted = fields(request.schema)
        if any(f.required and f.default is None for f in wanted):
            self.emit(Notice(level="warning", text=f"the MCP server {server} asked for a form this editor cannot "
                                                   f"show ({request.message}); it was declined"))
            return ElicitationReply("decline")
        listed = "\n".join(f"- {f.title}: {f.default_text() or '(empty)'}" for f in wanted)
        ok = await self.ask_yes_no(f"{server} asks for input", f"{escape_controls(request.message)}\n\n{listed}",
                                   "Send these values", "Decline")
        if ok is None:
            return ElicitationReply("cancel")
        content = {f.name: f.default for f in wanted if f.default is not None}
        return ElicitationReply("accept", content) if ok else ElicitationReply("decline")

    async def _form(self, request: ElicitationRequest) -> ElicitationReply:
        await self.flush()
        try:
            mode = s.ElicitationFormSessionMode(session_id=self.session_id,
                                                requested_schema=s.ElicitationSchema.model_validate(request.schema))
            reply = await self.conn.create_elicitation(
                message=f"{request.server}: {request.message}", mode=mode)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log(f"the form of the MCP server {request.server} could not be shown ({type(e).__name__}: {e})")
            return ElicitationReply("decline")
        action = getattr(reply, "action", "cancel")
        if action == "accept":
            content = getattr(reply, "content", None) or {}
            return ElicitationReply("accept", {k: getattr(v, "root", v) for k, v in dict(content).items()})
        return ElicitationReply("decline" if action == "decline" else "cancel")


class ClientFiles:
    """The file tools' `Buffers` through the client's `fs/read_text_file` and
    `fs/write_text_file`: a file is read as the editor holds it (unsaved edits included) and
    an approved write goes through the editor. Called from tool threads; a call from the
    event loop's own thread (which cannot wait for the answer) reads and writes the disk."""

    def __init__(self, conn: AgentSideConnection, session_id: str, loop: asyncio.AbstractEventLoop, *,
                 read: bool, write: bool) -> None:
        self.conn, self.session_id, self.loop = conn, session_id, loop
        self.can_read, self.can_write = read, write
        self.loop_thread = threading.get_ident()  # made on the loop's thread

    def _waits(self) -> bool:
        return threading.get_ident() != self.loop_thread and not self.loop.is_closed()

    def read(self, real: Path) -> str | None:
        if not (self.can_read and self._waits()):
            return None
        try:
            reply = asyncio.run_coroutine_threadsafe(
                self.conn.read_text_file(session_id=self.session_id, path=str(real)), self.loop).result()
        except RequestError as e:  # the editor cannot read it (a file it does not have open may be on disk)
            log(f"the editor could not read {real} ({e}); read from the disk")
            return None
        except Exception as e:
            raise OSError(errno.EIO, f"the editor did not answer a read of it ({type(e).__name__})") from e
        return reply.content

    def write(self, real: Path, text: str) -> bool:
        if not (self.can_write and self._waits()):
            return False
        try:
            asyncio.run_coroutine_threadsafe(
                self.conn.write_text_file(session_id=self.session_id, path=str(real), content=text), self.loop).result()
        except Exception as e:
            raise OSError(errno.EIO, f"the editor refused the write ({e})") from e
        return True

    async def aclose(self) -> None:
        """Nothing to close; it marks the buffers as a resource of the session, kept across
        a new conversation in it."""
