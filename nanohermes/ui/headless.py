"""The `-p` front ends: three sinks (text, json, stream-json) over the core's event stream.

stdout carries only the final answer (text), one JSON object (json) or one event per line
(stream-json). Both JSON formats speak Claude Code's shapes, so tools written for
`claude -p --output-format json|stream-json` read them unchanged: stream-json starts with a
`system` event of subtype `init`, prints each message whole as it joins the conversation (the
model's as `assistant`, with text, thinking and tool_use blocks; each tool's result as a `user`
message with a tool_result block) and ends with the `result` object, which is also json's one
object (`subtype`, `is_error`, `num_turns`, `duration_ms`, `total_cost_usd`, `usage`,
`session_id`, `permission_denials`, and nanohermes's own fields beside them). nanohermes's own
events (text and reasoning deltas, tool starts and finishes, notices, todo lists, approvals,
sandbox refusals, sub-agents' events) go out between them under names Claude Code does not use.
With --include-partial-messages the pieces of the main agent's messages go out instead as
Claude Code's `stream_event` lines (the Messages API's raw stream events).

JSON is written exactly, with the control characters it would leave raw (DEL, C1, bidi
controls) as JSON escapes, so it reads back the same and shows inert on a terminal; the text
format's stdout is escaped on a terminal only (see `visible.inert_output`).

Warnings and errors go to stderr in every format (in stream-json they are also `notice`
events), so a person watching a script sees them. The text of earlier steps (the model
narrating what it does next) and progress go to stderr, each on its own line, for text only
with --verbose or a terminal. Approvals: with a terminal on stdin the user is asked on stderr
(keys typed before the question are discarded: only a line typed after it answers);
without one (a script) every request is refused, never run silently and never waited on, and
one stderr line says so (stream-json then prints the refusal, never a question nobody can
answer). Every refusal is listed in the result's `permission_denials`, naming what the call
touched: its paths, its command line, its host.

A closed stdout (`| head -c1`) is no failure: the first write that meets it sends the rest of
the output to /dev/null, stops the turn if it is still running (through the hook the caller
set with `stop_turn_when_stdout_closes`; when stream-json's `init` line meets it, at the turn's
next event, so that the session has taken the prompt), and the run ends with `OutputClosed`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TextIO

from nanohermes import __version__
from nanohermes.common.arguments import parse_arguments
from nanohermes.common.budget import Limits
from nanohermes.common.controls import inert_json
from nanohermes.common.errors import OutputClosed
from nanohermes.common.events import (
    ApprovalReply,
    ApprovalRequest,
    Event,
    FilesChanged,
    MessageAdded,
    ModelStarted,
    Notice,
    PermissionDenied,
    ReasoningDelta,
    SandboxRefused,
    SubagentEvent,
    TextDelta,
    TextPending,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    UsageUpdate,
    event_to_dict,
)
from nanohermes.common.messages import Message, Usage
from nanohermes.common.modes import CLAUDE_MODES, Mode
from nanohermes.guard.redact import StreamRedactor, redact
from nanohermes.llm.thinktags import message_parts
from nanohermes.turn.meters import Meter
from nanohermes.ui.visible import escape_controls, status_of

# The process has one stdout: once its reader is gone, it is gone for every sink.
_closed = False
_stop_turn: Callable[[], None] | None = None


def stdout_closed() -> bool:
    """Has a write to stdout found its reader gone?"""
    return _closed


def stop_turn_when_stdout_closes(stop: Callable[[], None] | None) -> None:
    """What ends the running turn when stdout closes (None: nothing is running). Called
    from wherever the write happened, a loop callback included, so it only requests it."""
    global _stop_turn
    _stop_turn = stop


def _write_out(out: TextIO, text: str, *, last: bool = False) -> None:
    """Write and flush, quietly giving up once the reader has gone. `last`: nothing more
    would be written by this turn anyway, so it need not be stopped."""
    global _closed
    if not _closed:
        try:
            out.write(text)
            out.flush()
            return
        except BrokenPipeError:
            _closed = True
            try:  # what is still buffered, and the interpreter's flush at exit, go nowhere instead of failing again
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, out.fileno())
                os.close(devnull)
            except (OSError, ValueError, AttributeError):
                pass
    if not last and _stop_turn is not None:
        stop = _stop_turn
        stop_turn_when_stdout_closes(None)  # asked once
        stop()


def ask_on_terminal(request: ApprovalRequest, out: TextIO, guard_secs: float = 0.0) -> ApprovalReply:
    """A plain y/a/n prompt on stderr, reading the answer from stdin. Only a line typed after
    it appeared answers it: what was typed before is discarded, and so is every key that
    reaches it until the keyboard has been quiet for `guard_secs` since it showed (someone
    finishing a line, an Enter among it, must not answer it); only then is the answer asked for."""
    _discard_typed_ahead(sys.stdin)
    who = f"nanohermes (sub-agent {request.agent})" if request.agent else "nanohermes"
    # Escaped: what the person approves is what runs, not what the terminal makes of it.
    out.write(f"\n{who} wants to run {request.tool}: {escape_controls(request.summary, newlines=True)}\n")
    if request.detail and request.detail != request.summary:
        out.write(escape_controls(request.detail.rstrip()) + "\n")
    if request.reason:
        out.write(f"({escape_controls(request.reason, newlines=True)})\n")
    _settle(sys.stdin, guard_secs, out)
    # No rule: the call is asked every time (a protected write), so "always" is not offered.
    rule = escape_controls(request.rule, newlines=True)
    always = f" / [a]lways (remembers {rule}) / [p]roject (always, saved for this project)" if request.rule else ""
    out.write(f"Allow? [y]es once{always} / [n]o (Enter = yes): ")
    out.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer in ("", "y", "yes"):
        return ApprovalReply("once")
    if answer in ("a", "always") and request.rule:
        return ApprovalReply("always")
    if answer in ("p", "project") and request.rule:
        return ApprovalReply("project")
    note = answer[1:].strip(" :") if answer.startswith("n ") else ""
    return ApprovalReply("deny", note)


GUARD_HINT = "(a moment: keys typed now do not answer)"


def _settle(stream: TextIO, secs: float, out: TextIO) -> None:
    """On a terminal, and for `secs` > 0: wait until no key has reached `stream` for `secs`,
    discarding each one that does (read key by key, unechoed: a line being typed is not
    complete before its Enter), having said so on `out`."""
    try:
        # termios: only a terminal's typed-ahead keys (an ImportError where there is none)
        import select
        import termios

        fd = stream.fileno()
        if secs <= 0 or not stream.isatty():
            return
        saved = termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError):  # not a terminal after all, or a closed one
        return
    out.write(GUARD_HINT + "\n")
    out.flush()
    keys = [*saved[:6], list(saved[6])]
    keys[3] &= ~(termios.ICANON | termios.ECHO)  # each key readable as it comes; Ctrl-C still signals
    keys[6][termios.VMIN], keys[6][termios.VTIME] = 1, 0
    try:
        termios.tcsetattr(fd, termios.TCSANOW, keys)
        until = time.monotonic() + secs
        while (left := until - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                if not os.read(fd, 4096):
                    break  # the terminal has gone: the read that follows says so
                until = time.monotonic() + secs  # a key too early: the wait starts again
    except OSError:
        pass
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
            termios.tcflush(fd, termios.TCIFLUSH)
        except OSError:
            pass


def _discard_typed_ahead(stream: TextIO) -> None:
    """Drop the keys a terminal holds unread (a `y` typed while the model worked must not
    answer the question that comes next)."""
    try:
        # termios: only a terminal's typed-ahead keys
        import termios

        if stream.isatty():
            termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):  # not a terminal after all, or a closed one
        pass


@dataclass
class Sink:
    """What every `-p` sink shares: meters, the refusals for the result, redaction of streamed
    text, approvals, and the result object. Subclasses decide what reaches stdout."""

    verbose: bool = False
    interactive: bool = False  # may approvals be asked on the terminal?
    guard_secs: float = 0.0  # how long a question on the terminal takes no key (limits.approval_guard_secs)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    usage: Usage = field(default_factory=Usage)
    ended: TurnEnded | None = None
    meter: Meter = field(default_factory=Meter)
    sandbox_refusals: list[dict[str, Any]] = field(default_factory=list)  # for the json result
    # Each refusal: Claude Code's fields (tool_name, tool_use_id, tool_input) and ours (tool,
    # target, reason, answered_by).
    denials: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    api_secs: float = 0.0  # time spent waiting on the model (Claude Code's duration_api_ms)
    _asked_at: float | None = None
    _inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # the main agent's calls' input, by call id
    files_changed: list[str] | None = None  # what the turn's tools and commands changed (None: no checkpoints)
    runs_later: list[str] | None = None  # those of them that run code later, `path: why` (None: no checkpoints)
    _streams: dict[str, StreamRedactor] = field(default_factory=dict)  # by agent id, "" for the main one

    fmt: ClassVar[str]
    reports: ClassVar[bool] = True  # writes the run's result object (`finish`), with the session's meters

    def emit(self, event: Event) -> None:
        self.meter.on_event(event)
        if isinstance(event, ModelStarted):
            self._asked_at = time.monotonic()
        if isinstance(event, UsageUpdate):
            self.usage = event.total
            if self._asked_at is not None:
                self.api_secs += time.monotonic() - self._asked_at
                self._asked_at = None
        if isinstance(event, MessageAdded):  # a call's input as the model wrote it, for a refusal of it
            self._inputs.update({c.id: _input(c.arguments) for c in event.message.tool_calls})
        if isinstance(event, TurnEnded):
            self.ended = event
        if isinstance(event, FilesChanged):
            seen = self.files_changed or []
            self.files_changed = [*seen, *(p for p in event.paths if p not in seen)]
            self.runs_later = [*(self.runs_later or []), *(w for w in event.runs_later if w not in (self.runs_later or []))]
        if isinstance(event, SandboxRefused):
            self.sandbox_refusals.append({"tool": event.tool, "command": redact(event.summary), "sandbox": event.sandbox,
                                          "refused": [str(r) for r in event.refused], "rerun": event.rerun})
        if isinstance(event, PermissionDenied):
            self._deny(event.call_id, event.tool, event.target or event.summary, event.reason, "rules")
        for ev in self._settled(event):
            self._show(ev)

    def _deny(self, call_id: str, tool: str, target: str, reason: str, answered_by: str) -> dict[str, Any]:
        entry = {"tool_name": tool, "tool_use_id": call_id, "tool_input": self._inputs.get(call_id, {}),
                 "tool": tool, "target": escape_controls(redact(target), newlines=True), "reason": redact(reason),
                 "answered_by": answered_by}
        self.denials.append(entry)
        return entry

    def _settled(self, event: Event) -> list[Event]:
        """The event with its streamed text redacted: the end of a text piece that may begin
        a key waits for the next piece, or goes out before that agent's next other event."""
        nested = event if isinstance(event, SubagentEvent) else None
        inner = nested.event if nested is not None else event
        stream = self._streams.setdefault(nested.agent_id if nested is not None else "", StreamRedactor())

        def wrap(e: Event) -> Event:
            return replace(nested, event=e) if nested is not None else e

        if isinstance(inner, TextDelta):
            text = stream.feed(inner.text)
            return [wrap(replace(inner, text=text))] if text else []
        held = stream.flush()
        return [wrap(TextDelta(text=held)), event] if held else [event]

    def _show(self, event: Event) -> None:
        if isinstance(event, Notice) and event.level != "info":
            self.err.write(f"nanohermes: {event.level}: {redact(event.text)}\n")

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        if not self.interactive:
            self.refused(request)
            return ApprovalReply("deny")
        reply = await asyncio.to_thread(ask_on_terminal, request, self.err, self.guard_secs)
        if reply.choice == "deny":
            self._deny(request.call_id, request.tool, request.target or request.summary,
                       "refused by the user" + (f": {reply.note}" if reply.note else ""), "user")
        return reply

    def refused(self, request: ApprovalRequest) -> dict[str, Any]:
        """No terminal to ask: the request is refused, listed, and named on stderr by what the
        call touches (a path, a command line, a host; never an edit's diff)."""
        entry = self._deny(request.call_id, request.tool, request.target or request.summary,
                           f"needs approval ({request.reason})" if request.reason else "needs approval",
                           "no terminal to ask")
        why = (f"the sandbox ({request.sandbox}) refused {', '.join(map(str, request.refused))}; {request.hint}"
               if request.rerun else "needs approval; rerun with --yes or add an allow rule")
        self.err.write(f"nanohermes: refused {request.tool} `{entry['target']}`: {why}\n")
        self.err.flush()
        return entry

    def init_event(self, *, session_id: str | None, model: str, mode: Mode, tools: list[str], workspace: str,
                   mcp_servers: list[dict[str, str]] | None = None, api_key_source: str = "none") -> None:
        """What this run works with, once the session has started (stream-json's first line)."""

    def result_object(self, *, result: str, exit_reason: str, session_id: str | None, model: str, error: str | None = None,
                      extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Claude Code's result message with nanohermes's fields beside it. `usage` is this run's
        turn; `extra` adds the session meters (cost, context)."""
        ended = self.ended
        turn = self.meter.turn
        cost = ((extra or {}).get("cost") or {}).get("turn", {}).get("cost_usd")
        subtype = "error_max_turns" if exit_reason == "max_turns" else \
            "success" if exit_reason == "completed" and error is None else "error_during_execution"
        return {
            "type": "result",
            "subtype": subtype,
            "is_error": error is not None,
            "duration_ms": round((time.monotonic() - self.started) * 1000),
            "duration_api_ms": round(self.api_secs * 1000),
            "num_turns": ended.turns if ended else 0,
            "result": result,
            "session_id": session_id,
            "total_cost_usd": cost or 0.0,  # 0 without a price (see `cost.priced`)
            "usage": {"input_tokens": turn.prompt_tokens, "output_tokens": turn.completion_tokens,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, **turn.to_dict()},
            "permission_denials": list(self.denials),
            "uuid": str(uuid.uuid4()),
            "exit_reason": exit_reason,
            "error": error,
            "turns": ended.turns if ended else 0,
            "tool_calls": ended.tool_calls if ended else 0,
            "model": model,
            "sandbox_refusals": self.sandbox_refusals,
            "files_changed": self.files_changed,
            "runs_later": self.runs_later,
            **(extra or {}),
        }

    def finish(self, result: dict[str, Any]) -> None:
        """The run is over (answered, stopped, failed or interrupted): `result` is its object
        (one a sink that `reports` writes)."""


@dataclass
class TextSink(Sink):
    """stdout: the final answer and a newline. stderr, with --verbose or a terminal: what the
    model said between its tool calls and one line per call."""

    fmt: ClassVar[str] = "text"
    reports: ClassVar[bool] = False  # the answer alone: no result object, so no meters to work out for one
    _step: list[str] = field(default_factory=list)  # the current model call's text

    def _show(self, event: Event) -> None:
        super()._show(event)
        if isinstance(event, ModelStarted):
            self._step = []
        elif isinstance(event, TextDelta):
            self._step.append(event.text)  # the answer only once it is known to be the last step
        elif isinstance(event, TurnEnded):
            if event.text:
                _write_out(self.out, redact(event.text) + "\n", last=True)
        elif self.verbose or self.err.isatty():
            if isinstance(event, ToolStarted):
                self._narrate()
            self._progress(event)

    def _narrate(self) -> None:
        """The text the model wrote before calling tools: not the answer, so stderr."""
        said = "".join(self._step).strip()
        self._step = []
        if said:
            self.err.write(said + "\n")

    def _progress(self, event: Event, prefix: str = "") -> None:
        if isinstance(event, SubagentEvent):  # a sub-agent's tool calls, indented under its name
            self._progress(event.event, f"{prefix}  [{event.agent} {event.agent_id}] ")
        elif isinstance(event, ToolStarted):
            self.err.write(f"{prefix}→ {event.name} {event.summary}\n")
        elif isinstance(event, ToolFinished):
            status = status_of(event)
            self.err.write(f"{prefix}← {event.name} {status} ({len(event.result)} chars, {event.elapsed:.1f}s)\n")
        elif isinstance(event, Notice) and event.level == "info":
            self.err.write(f"nanohermes: {event.text}\n")


@dataclass
class JsonSink(Sink):
    """stdout: one JSON object when the run ends."""

    fmt: ClassVar[str] = "json"

    def finish(self, result: dict[str, Any]) -> None:
        _write_out(self.out, inert_json(redact(json.dumps(result, ensure_ascii=False, indent=2))) + "\n", last=True)
        if _closed:
            raise OutputClosed



@dataclass
class StreamJsonSink(Sink):
    """stdout: Claude Code's stream-json (see the module's docstring): `system`/`init`, each
    message whole, nanohermes's own events under its own names, then the `result` object."""

    fmt: ClassVar[str] = "stream-json"
    session_id: str | None = None
    model: str = ""
    partial: bool = False  # --include-partial-messages: the main agent's pieces as Claude Code's stream_event
    _failed: dict[str, bool] = field(default_factory=dict)  # is_error of each finished call, by call id
    _usage: Usage | None = None  # the last model call's, for its message
    _message_id: str = ""  # of the model's message being streamed ("" : none)
    _blocks: list[str] = field(default_factory=list)  # that message's content blocks so far, by kind
    _block_open: bool = False

    def _show(self, event: Event) -> None:
        super()._show(event)
        if isinstance(event, ToolFinished):
            self._failed[event.call_id] = event.is_error
        if isinstance(event, UsageUpdate):
            self._usage = event.usage
        if self.partial and isinstance(event, (TextDelta, ReasoningDelta)):
            self._piece(event)
            return
        if isinstance(event, TextPending) or isinstance(getattr(event, "event", None), TextPending):
            return  # a script reads the text once it is known as answer or thinking
        if isinstance(event, MessageAdded):
            usage, self._usage = self._usage, None
            message_id = None
            if self.partial and event.message.role == "assistant":
                message_id = self._message_end(event.message, usage)
            if (obj := self._message(event.message, usage, message_id)) is not None:
                # The model's answer without tool calls is the turn's last message.
                self._line(obj, last=obj["type"] == "assistant" and not event.message.tool_calls)
        elif isinstance(event, TurnEnded):
            return  # the result object says how the turn ended
        elif isinstance(event, ToolProgress):
            self._line(self._progress(event))
        elif isinstance(event, SubagentEvent):
            self._line(self._nested(event))
        else:
            self._line(event_to_dict(event))

    def _base(self) -> dict[str, Any]:
        return {"parent_tool_use_id": None, "session_id": self.session_id, "uuid": str(uuid.uuid4())}

    # -- --include-partial-messages: the Messages API's stream events, as Claude Code wraps them
    def _message_start(self) -> None:
        if not self._message_id:
            self._message_id = f"msg_{uuid.uuid4().hex}"
            self._blocks, self._block_open = [], False
            usage = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            self._stream_event({"type": "message_start", "message": {
                "id": self._message_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": usage}})

    def _stream_event(self, event: dict[str, Any], *, end: bool = False) -> None:
        if end and self._block_open:
            self._block_stop()
        self._line({"type": "stream_event", "event": event, **self._base()})
        if end:
            self._message_id = ""

    def _block(self, kind: str, start: dict[str, Any]) -> int:
        """The index of an open content block of `kind`, a new one started when needed."""
        if self._block_open and self._blocks and self._blocks[-1] == kind:
            return len(self._blocks) - 1
        if self._block_open:
            self._block_stop()
        self._blocks.append(kind)
        self._block_open = True
        self._stream_event({"type": "content_block_start", "index": len(self._blocks) - 1, "content_block": start})
        return len(self._blocks) - 1

    def _block_stop(self) -> None:
        self._block_open = False
        self._stream_event({"type": "content_block_stop", "index": len(self._blocks) - 1})

    def _piece(self, ev: TextDelta | ReasoningDelta) -> None:
        self._message_start()
        self._text("thinking" if isinstance(ev, ReasoningDelta) else "text", ev.text)

    def _text(self, kind: str, text: str) -> None:
        """A piece of text or thinking, in the open block of its kind or a new one."""
        i = self._block(kind, _EMPTY[kind])
        self._stream_event({"type": "content_block_delta", "index": i, "delta": {"type": f"{kind}_delta", kind: text}})

    def _message_end(self, m: Message, usage: Usage | None) -> str:
        """What the stream had not shown of the model's message (text that came whole, its
        tool calls), then its end: message_delta with the stop reason, message_stop. Returns
        the message's id."""
        self._message_start()
        for kind, text in zip(("thinking", "text"), message_parts(m), strict=True):
            if text and kind not in self._blocks:
                self._text(kind, text)
        for c in m.tool_calls:  # one block each (its kind names the call, so two never share one)
            i = self._block(f"tool_use {c.id}", {"type": "tool_use", "id": c.id, "name": c.name, "input": {}})
            self._stream_event({"type": "content_block_delta", "index": i,
                                "delta": {"type": "input_json_delta", "partial_json": c.arguments}})
        if self._block_open:
            self._block_stop()
        self._stream_event({"type": "message_delta", "delta": {
            "stop_reason": "tool_use" if m.tool_calls else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": (usage or Usage()).completion_tokens}})
        message_id = self._message_id
        self._stream_event({"type": "message_stop"}, end=True)
        return message_id

    def _message(self, m: Message, usage: Usage | None = None, message_id: str | None = None) -> dict[str, Any] | None:
        """A message of the conversation as Claude Code prints it (`usage`: the model call's
        that wrote it; `message_id`: the id its stream events carried); None for what it does
        not print (the prompt, the system prompt)."""
        if m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            thought, said = message_parts(m)
            if thought:
                blocks.append({"type": "thinking", "thinking": thought, "signature": ""})
            if said:
                blocks.append({"type": "text", "text": said})
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)})
            u = usage or Usage()
            return {"type": "assistant", "message": {
                "id": message_id or f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "model": self.model,
                "content": blocks, "stop_reason": "tool_use" if m.tool_calls else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}, **self._base()}
        if m.role == "tool":
            call_id = m.tool_call_id or ""
            return {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": m.content or "",
                 "is_error": self._failed.get(call_id, False)}]}, **self._base()}
        return None

    def _progress(self, ev: ToolProgress) -> dict[str, Any]:
        """Claude Code's tool_progress, with the progress text beside it."""
        return {"type": "tool_progress", "tool_use_id": ev.call_id, "tool_name": ev.name,
                "elapsed_time_seconds": ev.elapsed, "text": ev.text, **self._base()}

    def _nested(self, ev: SubagentEvent) -> dict[str, Any]:
        inner = ev.event
        if isinstance(inner, MessageAdded):
            shown = self._message(inner.message) or {"type": "message_added", "role": inner.message.role}
        elif isinstance(inner, SubagentEvent):
            shown = self._nested(inner)
        else:
            shown = event_to_dict(inner)
        return {"type": "subagent_event", "agent_id": ev.agent_id, "agent": ev.agent, "event": shown}

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        if not self.interactive:
            # Nobody can answer: the stream carries the refusal, never the question.
            entry = self.refused(request)
            self._line({"type": "permission_denied", "call_id": request.call_id, "tool": request.tool,
                        "summary": request.summary, "target": entry["target"], "reason": entry["reason"],
                        "answered_by": entry["answered_by"]})
            return ApprovalReply("deny")
        self.emit(request)
        return await super().confirm(request)

    def init_event(self, *, session_id: str | None, model: str, mode: Mode, tools: list[str], workspace: str,
                   mcp_servers: list[dict[str, str]] | None = None, api_key_source: str = "none") -> None:
        self.session_id, self.model = session_id, model
        # Not a reason to stop yet: the prompt is not in the session until the turn takes it.
        self._line({"type": "system", "subtype": "init", "cwd": workspace, "session_id": session_id, "tools": tools,
                    "mcp_servers": mcp_servers or [], "model": model, "permissionMode": CLAUDE_MODES.get(mode, "default"),
                    "slash_commands": [], "apiKeySource": api_key_source, "output_style": "default", "uuid": str(uuid.uuid4()),
                    "mode": mode, "workspace": workspace, "nanohermes_version": __version__}, last=True)

    def finish(self, result: dict[str, Any]) -> None:
        if self._message_id:  # a streamed message the run's end cut short (the endpoint failed, a signal)
            self._stream_event({"type": "message_stop"}, end=True)
        self._line(result, last=True)
        if _closed:
            raise OutputClosed

    def _line(self, obj: dict[str, Any], *, last: bool = False) -> None:
        _write_out(self.out, inert_json(redact(json.dumps(obj, ensure_ascii=False))) + "\n", last=last)


# How a content block of each kind starts in the Messages API's stream.
_EMPTY: dict[str, dict[str, Any]] = {"text": {"type": "text", "text": ""},
                                     "thinking": {"type": "thinking", "thinking": "", "signature": ""}}


def _input(arguments: str) -> dict[str, Any]:
    """A call's arguments as a tool_use block's `input` (an object), read as the runtime reads
    them (nesting bounded first), or the raw text under `arguments` when they are not an object
    (the call's result says what was wrong)."""
    try:
        return parse_arguments(arguments, Limits().tool_args_max_depth)
    except ValueError:
        return {"arguments": arguments}


SINKS: dict[str, type[Sink]] = {sink.fmt: sink for sink in (TextSink, JsonSink, StreamJsonSink)}


def make_sink(fmt: str, *, partial: bool = False, **options: Any) -> Sink:
    """The sink for an --output-format value (text, json or stream-json); `partial`:
    --include-partial-messages, which only stream-json has (the CLI refuses it elsewhere)."""
    if fmt == StreamJsonSink.fmt:
        options["partial"] = partial
    return SINKS[fmt](**options)
