"""The `-p` front ends: three sinks (text, json, stream-json) over the core's event stream.

stdout carries only the final answer (text), one JSON object (json) or one event per line
(stream-json, an `init` event first). Warnings and errors go to stderr in every format (in
stream-json they are also `notice` events), so a person watching a script sees them. The text of earlier steps (the model narrating what it
does next) and progress go to stderr, each on its own line, for text only with --verbose or a
terminal. Approvals: with a terminal on stdin the user is asked on stderr; without one (a
script) every request is refused, never run silently and never waited on, and one stderr
line says so. Every refusal is listed in the result's `permission_denials`.

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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TextIO

from nanohermes.errors import OutputClosed

from nanohermes.events import (
    ApprovalReply, ApprovalRequest, Event, ModelStarted, Notice, PermissionDenied, SandboxRefused, TextDelta,
    ToolFinished, ToolStarted, TurnEnded, UsageUpdate, event_to_dict,
)
from nanohermes.events import SubagentEvent
from nanohermes.messages import Usage
from nanohermes.meters import Meter
from nanohermes.redact import StreamRedactor, redact
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


def ask_on_terminal(request: ApprovalRequest, out: TextIO) -> ApprovalReply:
    """A plain y/a/n prompt on stderr, reading the answer from stdin."""
    who = f"nanohermes (sub-agent {request.agent})" if request.agent else "nanohermes"
    # Escaped: what the person approves is what runs, not what the terminal makes of it.
    out.write(f"\n{who} wants to run {request.tool}: {escape_controls(request.summary, newlines=True)}\n")
    if request.detail and request.detail != request.summary:
        out.write(escape_controls(request.detail.rstrip()) + "\n")
    if request.reason:
        out.write(f"({escape_controls(request.reason, newlines=True)})\n")
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


@dataclass
class Sink:
    """What every `-p` sink shares: meters, the refusals for the result, redaction of streamed
    text, approvals, and the result object. Subclasses decide what reaches stdout."""

    verbose: bool = False
    interactive: bool = False  # may approvals be asked on the terminal?
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    usage: Usage = field(default_factory=Usage)
    ended: TurnEnded | None = None
    meter: Meter = field(default_factory=Meter)
    sandbox_refusals: list[dict[str, Any]] = field(default_factory=list)  # for the json result
    denials: list[dict[str, str]] = field(default_factory=list)  # tool, target, reason of each refusal
    _streams: dict[str, StreamRedactor] = field(default_factory=dict)  # by agent id, "" for the main one

    fmt: ClassVar[str]

    def emit(self, event: Event) -> None:
        self.meter.on_event(event)
        if isinstance(event, UsageUpdate):
            self.usage = event.total
        if isinstance(event, TurnEnded):
            self.ended = event
        if isinstance(event, SandboxRefused):
            self.sandbox_refusals.append({"tool": event.tool, "command": redact(event.summary), "sandbox": event.sandbox,
                                          "refused": list(event.refused), "rerun": event.rerun})
        if isinstance(event, PermissionDenied):
            self.denials.append({"tool": event.tool, "target": escape_controls(redact(event.summary), newlines=True),
                                 "reason": redact(event.reason), "answered_by": "rules"})
        for ev in self._settled(event):
            self._show(ev)

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
        target = escape_controls(request.detail or request.summary, newlines=True)
        if not self.interactive:
            self.denials.append({"tool": request.tool, "target": target,
                                 "reason": f"needs approval ({request.reason})" if request.reason else "needs approval",
                                 "answered_by": "no terminal to ask"})
            why = (f"{request.reason.removesuffix('; run it again outside the sandbox?')}; {request.hint}"
                   if request.rerun else "needs approval; rerun with --yes or add an allow rule")
            self.err.write(f"nanohermes: refused {request.tool} `{target}`: {why}\n")
            self.err.flush()
            return ApprovalReply("deny")
        reply = await asyncio.to_thread(ask_on_terminal, request, self.err)
        if reply.choice == "deny":
            self.denials.append({"tool": request.tool, "target": target,
                                 "reason": "refused by the user" + (f": {reply.note}" if reply.note else ""),
                                 "answered_by": "user"})
        return reply

    def init_event(self, *, session_id: str | None, model: str, mode: str, tools: list[str],
                   workspace: str) -> None:
        """What this run works with, once the session has started (stream-json's first line)."""

    def result_object(self, *, result: str, exit_reason: str, session_id: str | None, model: str, error: str | None = None,
                      extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """`usage` is this run's turn; `extra` adds the session meters (cost, context)."""
        ended = self.ended
        return {
            "type": "result",
            "result": result,
            "exit_reason": exit_reason,
            "is_error": error is not None,
            "error": error,
            "turns": ended.turns if ended else 0,
            "tool_calls": ended.tool_calls if ended else 0,
            "usage": self.meter.turn.to_dict(),
            "session_id": session_id,
            "model": model,
            "sandbox_refusals": self.sandbox_refusals,
            "permission_denials": list(self.denials),
            **(extra or {}),
        }

    def finish(self, result: dict[str, Any]) -> None:
        """The run is over (answered, stopped, failed or interrupted): `result` is its object."""


@dataclass
class TextSink(Sink):
    """stdout: the final answer and a newline. stderr, with --verbose or a terminal: what the
    model said between its tool calls and one line per call."""

    fmt: ClassVar[str] = "text"
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
        _write_out(self.out, redact(json.dumps(result, ensure_ascii=False, indent=2)) + "\n", last=True)
        if _closed:
            raise OutputClosed


@dataclass
class StreamJsonSink(Sink):
    """stdout: an `init` line, one line per event as it happens, then the result object."""

    fmt: ClassVar[str] = "stream-json"

    def _show(self, event: Event) -> None:
        super()._show(event)
        self._line(event_to_dict(event))

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        self.emit(request)
        return await super().confirm(request)

    def init_event(self, *, session_id: str | None, model: str, mode: str, tools: list[str],
                   workspace: str) -> None:
        # Not a reason to stop yet: the prompt is not in the session until the turn takes it.
        self._line({"type": "init", "session_id": session_id, "model": model, "mode": mode, "tools": tools,
                    "workspace": workspace}, last=True)

    def finish(self, result: dict[str, Any]) -> None:
        self._line(result, last=True)
        if _closed:
            raise OutputClosed

    def _line(self, obj: dict[str, Any], *, last: bool = False) -> None:
        _write_out(self.out, redact(json.dumps(obj, ensure_ascii=False)) + "\n", last=last or obj.get("type") == "turn_ended")


SINKS: dict[str, type[Sink]] = {sink.fmt: sink for sink in (TextSink, JsonSink, StreamJsonSink)}


def make_sink(fmt: str, **options: Any) -> Sink:
    """The sink for an --output-format value (text, json or stream-json)."""
    return SINKS[fmt](**options)
