"""Hooks: the person's own commands, run at points of a session.

Events: PreToolUse and PostToolUse around each tool call, UserPromptSubmit and Stop around a
turn, SessionStart and SessionEnd, PreCompact, and Notification whenever nanohermes waits for
the person. Only the user's config or a trusted project defines hooks (the config loader drops an
untrusted project's), so they carry the person's approval: they run outside the command
sandbox, with one JSON object on stdin. A trusted project's own hooks run in the workspace;
the person's own (user config) run outside it, where nothing the project holds changes which
code they run (`programs.person_start`); both find the workspace in CLAUDE_PROJECT_DIR.

Every hook speaks Claude Code's language, so one written for Claude Code works unchanged: a
tool call is told as the call Claude Code's tool of that purpose would make (`Tool.claude_calls`:
`tool_name` Bash, `tool_input` with its field names, `tool_response` in its shape; ours under
`nanohermes`), one name a call, so a call fires each matching group once; matchers and `if`
conditions read as Claude Code reads them (`claude_vocab`); `transcript_path` is a transcript
in Claude Code's shape (`claude_transcript`), current whenever a hook runs; a SessionStart hook
may export variables for later commands and hooks through `$CLAUDE_ENV_FILE` (`envfile`).

Exit 0 goes on, and stdout may be a JSON object with a decision (read on any exit code); exit
2 blocks, with stderr as the reason; any other exit, a timeout or a failure to start is a
warning and the session goes on. After every hook its whole process group is killed, so
nothing it started outlives it. A hook's decisions can only make a call safer than the
permission rules would: "allow" answers an approval question, it never lifts a deny rule, and
rewritten arguments are checked by the rules again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.common.budget import Limits, clamp
from nanohermes.common.dirs import open_private, private_dir, state_home
from nanohermes.common.events import UI, ApprovalReply, ApprovalRequest, Event, Notice, TurnEnded
from nanohermes.common.modes import CLAUDE_MODES, Mode
from nanohermes.config import HOOK_EVENTS
from nanohermes.guard import programs
from nanohermes.guard.redact import configured_env, set_session_env
from nanohermes.hooks.claude_vocab import (
    TOOL_EVENTS,
    Condition,
    call_names,
    claude_response,
    exec_line,
    matcher_matches,
    output_text,
)
from nanohermes.hooks.conversation import Conversation, Unrecorded
from nanohermes.tools.base import ClaudeCall, ToolError

if TYPE_CHECKING:
    from nanohermes.config import HooksConfig
    from nanohermes.guard.permissions import Verdict
    from nanohermes.hooks.claude_transcript import ClaudeTranscript
    from nanohermes.tools.base import Params, Tool

BLOCK_EXIT = 2
_PIPE_GRACE_SECS = 2.0  # after the group is killed, for output still in the pipes
# PreToolUse's older spelling of its decision: {"decision": "approve" | "block"}.
_OLD_DECISIONS = {"approve": "allow", "block": "deny"}
ENV_FILE = "claude-env.sh"  # where SessionStart hooks write their exports, in the session's folder
TRANSCRIPT_FILE = "claude-transcript.jsonl"  # the transcript in Claude Code's shape, in the same folder


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str  # tool names, or a regular expression searched in the subject; "" or "*": all
    command: str
    timeout_secs: float
    origin: str  # the config file that defined it
    condition: str = ""  # Claude Code's `if`: a permission rule a tool call must match
    project_own: bool = False  # defined by a (trusted) project's file: it runs in the workspace

    def matches(self, subject: str | None, aliases: tuple[str, ...] = ()) -> bool:
        """`aliases`: other names of the subject (Claude Code's names of a tool)."""
        return subject is None or matcher_matches(self.matcher, (subject, *aliases))


@dataclass(frozen=True)
class HookRun:
    """What one hook did: its exit code (None: timed out or could not start) and output."""

    hook: Hook
    code: int | None
    stdout: str
    stderr: str

    def output(self) -> dict[str, Any]:
        """Its stdout as a JSON object (Claude Code's `hookSpecificOutput` merged in), or {}:
        read whatever the exit code, as Claude Code reads it."""
        text = self.stdout.strip()
        if self.code is None or not text.startswith("{"):
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return {}
        if not isinstance(data, dict):
            return {}
        specific = data.get("hookSpecificOutput")
        return {**data, **specific} if isinstance(specific, dict) else data


@dataclass(frozen=True)
class Outcome:
    """The hooks of one event together: why they block (empty: they do not), the context
    they add for the model, why one stopped the turn (`continue: false`), and a replacement
    of the tool's output (PostToolUse's `updatedToolOutput`)."""

    blocks: tuple[str, ...] = ()
    context: str = ""
    halt: str | None = None
    output: Any = None


@dataclass(frozen=True)
class PreToolUse:
    """What the PreToolUse hooks decided about one call."""

    args: Params  # the arguments to run with: the model's, or a hook's updatedInput re-validated
    refusal: str | None = None  # the call must not run: the result the model gets
    decision: str | None = None  # "allow" or "ask", applied on top of the permission verdict
    reason: str = ""

    def adjust(self, verdict: Verdict) -> Verdict:
        """The permission verdict with the hooks' decision applied: "allow" answers the
        question the rules would ask, "ask" asks even what the rules allow; a denial stays."""

        if verdict.decision == "deny" or self.decision is None or self.decision == verdict.decision:
            return verdict
        why = f": {self.reason}" if self.reason else ""
        if self.decision == "allow":
            return replace(verdict, decision="allow", reason=f"allowed by a PreToolUse hook{why}", basis="hook")
        return replace(verdict, decision="ask", reason=f"a PreToolUse hook asks{why}", suggest=None)


@dataclass
class Hooks:
    """The hooks in force for one session, and the code that runs them."""

    hooks: list[Hook]
    workspace: Path
    limits: Limits = field(default_factory=Limits)
    emit: Callable[[Event], None] = lambda e: None
    # The session whose id and transcript a hook is told (/clear and /resume change them).
    session: Conversation = field(default_factory=Unrecorded)
    mode: Callable[[], Mode] = lambda: Mode.DEFAULT  # the permission mode at the time a hook runs
    tools: Callable[[], Sequence[Tool]] = lambda: ()  # the session's tools, to name the calls of the transcript
    model: Callable[[], str] = lambda: ""  # the model answering, for the transcript
    entrypoint: str = "cli"  # $CLAUDE_CODE_ENTRYPOINT: cli in the REPL, sdk-cli for a script
    blocked: str = ""  # why a UserPromptSubmit hook blocked the last prompt ("" when it went out)
    _stop_active: bool = False
    _background: set[asyncio.Task[Any]] = field(default_factory=set)
    _context: dict[str, list[str]] = field(default_factory=dict)  # a call's PreToolUse context, by call id
    _halt: str | None = None  # why a hook said `continue: false`, until the turn stops
    _exports: dict[str, str] = field(default_factory=dict)  # what SessionStart hooks exported
    _transcript: ClaudeTranscript | None = None
    _own_id: str = field(default_factory=lambda: str(uuid.uuid4()))  # the id of a session not recorded
    _scratch: Path | None = None  # the folder of a session not recorded

    @classmethod
    def from_config(cls, config: HooksConfig, workspace: Path, limits: Limits, emit: Callable[[Event], None], *,
                    session: Conversation | None = None, mode: Callable[[], Mode] = lambda: Mode.DEFAULT,
                    **more: Any) -> Hooks:
        """`more`: `tools`, `model` and `entrypoint` (see the fields)."""
        hooks = [Hook(event, group.matcher, exec_line(h.command, h.args, workspace), h.timeout, group.origin,
                      h.condition.strip(), group.project_own)
                 for event in HOOK_EVENTS for group in config.groups(event) for h in group.hooks]
        return cls(hooks, workspace, limits, emit, session or Unrecorded(), mode, **more)

    def of(self, event: str, subject: str | None = None, aliases: tuple[str, ...] = ()) -> list[Hook]:
        """The hooks of `event` whose matcher matches; one with an `if` never runs outside a
        tool event, as in Claude Code. A command in several matching groups runs once."""
        return _once(self._matching(event, subject, aliases))

    def _matching(self, event: str, subject: str | None, aliases: tuple[str, ...]) -> list[Hook]:
        return [h for h in self.hooks if h.event == event and h.matches(subject, aliases)
                and (not h.condition or event in TOOL_EVENTS)]

    def for_call(self, event: str, tool: Tool, call: ClaudeCall) -> list[Hook]:
        """The hooks of a tool event that run for `call` (one of `tool.claude_calls`): the matcher
        names it by Claude Code's name or ours, and its `if` holds. A command in several matching
        groups (`Edit` and `Edit|Write`; the person's and a project's) runs once, as in Claude Code."""
        return _once([h for h in self._matching(event, call.name, call_names(call.name, tool.name)[1:])
                      if self._condition_holds(h, tool, call)])

    def _condition_holds(self, hook: Hook, tool: Tool, call: ClaudeCall) -> bool:
        if not hook.condition:
            return True
        try:
            condition = Condition.parse(hook.condition)
        except ValueError:
            return True  # named by `problems`; a guard that cannot be narrowed runs on every call
        return condition.holds(call, tool.name, self.workspace)

    def problems(self) -> list[str]:
        """What is wrong with the hooks as configured: an `if` that is no rule, or one on an
        event without tool calls (whose hook then never runs)."""
        out: list[str] = []
        for h in self.hooks:
            if not h.condition:
                continue
            where = f"{h.event} hook `{_short(h.command)}` ({h.origin or 'config'})"
            if h.event not in TOOL_EVENTS:
                out.append(f"{where} never runs: `if` applies to PreToolUse and PostToolUse only; remove it")
                continue
            try:
                Condition.parse(h.condition)
            except ValueError as e:
                out.append(f"{where}: {e}; until then it runs on every call its matcher matches")
        return out

    def lines(self, tools: dict[str, tuple[str, ...]] | None = None, servers: tuple[str, ...] = ()) -> list[str]:
        """For `/hooks`: each hook in force, with its matcher, timeout and origin, then a warning
        for each tool matcher that matches none of `tools` (name -> Claude Code's names)."""
        if not self.hooks:
            return ["no hooks configured (config key hooks; see docs/hooks.md)"]
        out = [f"{h.event:<16} {(h.matcher or '*'):<20} {h.command}" + (f"  if {h.condition}" if h.condition else "")
               + f"  (timeout {h.timeout_secs:g}s; {h.origin or 'config'})" for h in self.hooks]
        warned = [*self.problems(), *(unmatched(self.hooks, tools, servers) if tools is not None else [])]
        return out + [f"warning: {w}" for w in warned]

    # -- what every hook is told ---------------------------------------------------------------
    @property
    def session_id(self) -> str:
        return self.session.id or self._own_id

    def folder(self) -> Path:
        """The session's folder for the files hooks are given; for a session not recorded, one
        of its own in nanohermes's state folder, which the sandbox and the file tools withhold
        as they withhold the sessions, removed when it ends."""
        if self.session.folder is not None:
            return self.session.folder
        if self._scratch is None:
            self._scratch = private_dir(state_home() / "hooks" / self._own_id)
        return self._scratch

    def transcript_path(self) -> str:
        """The transcript in Claude Code's shape, brought up to date ("" if it cannot be written)."""
        # only a hook that reads a transcript
        from nanohermes.hooks.claude_transcript import ClaudeTranscript, describer

        path = self.folder() / TRANSCRIPT_FILE
        if self._transcript is None or self._transcript.path != path:
            self._transcript = ClaudeTranscript(path, session_id=self.session_id, cwd=self.workspace,
                                                describe=describer(self.tools, self.limits, self.workspace),
                                                model=self.model)
        try:
            self._transcript.sync(self.session.history)
        except OSError as e:
            self.emit(Notice(level="warning", text=f"the transcript for hooks could not be written to {path}: "
                                                   f"{e.strerror or e}; hooks are told no transcript_path"))
            return ""
        return str(path)

    def payload(self, event: str, ours: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """A hook's input: Claude Code's fields, and under `nanohermes` ours where they differ
        (our name of the permission mode, our own transcript, our tool's name and arguments)."""
        mode = self.mode()
        return {"session_id": self.session_id, "transcript_path": self.transcript_path(), "cwd": str(self.workspace),
                "permission_mode": CLAUDE_MODES.get(mode, str(mode)), "hook_event_name": event, **extra,
                "nanohermes": {"permission_mode": str(mode), "transcript_path": str(self.session.path or ""),
                               **(ours or {})}}

    def environment(self, more: dict[str, str] | None = None) -> dict[str, str]:
        """What a hook's environment sets over the person's: the config's `env`, what
        SessionStart hooks exported, and the variables Claude Code sets for its hooks."""
        exports = dict(self._exports)
        if "PATH" in exports:  # never a program a sandboxed command wrote, by name
            exports["PATH"] = programs.outside_path(exports["PATH"])
        return {**configured_env(), **exports, "CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": self.entrypoint,
                **(more or {})}

    # -- running ---------------------------------------------------------------------------
    async def run(self, hook: Hook, payload: dict[str, Any], env: dict[str, str] | None = None) -> HookRun:
        """Run one hook to its end or its timeout; then kill whatever is left of its group. Where
        it starts and what it finds by name is `programs.person_start`'s: a person's hook in a
        folder of its own, a trusted project's own in the workspace."""
        cwd, env = programs.person_start({"PATH": os.defpath, **os.environ}, self.environment(env), cwd=None,
                                         workspace=self.workspace, project_own=hook.project_own)
        try:
            proc = await programs.started(asyncio.create_subprocess_shell(
                hook.command, cwd=cwd, env=env, start_new_session=True, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE), _stop_start)
        except OSError as e:
            self._warn(hook, f"could not start: {e.strerror or e}")
            return HookRun(hook, None, "", "")
        cap = self.limits.hook_output_bytes
        assert proc.stdout is not None and proc.stderr is not None
        readers = [asyncio.ensure_future(_read_capped(proc.stdout, cap)),
                   asyncio.ensure_future(_read_capped(proc.stderr, cap))]
        code: int | None = None
        try:
            # Feeding stdin counts against the timeout too: a hook may never read it.
            code = await asyncio.wait_for(_feed_and_wait(proc, json.dumps(payload, ensure_ascii=False).encode()),
                                          hook.timeout_secs)
        except TimeoutError:
            self._warn(hook, f"timed out after {hook.timeout_secs:g}s; its process group was killed")
        finally:
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError, asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), _PIPE_GRACE_SECS)
            done, pending = await asyncio.wait(readers, timeout=_PIPE_GRACE_SECS)
            for task in pending:  # a descendant that left the group still holds a pipe
                task.cancel()
        (out, out_dropped), (err, err_dropped) = [t.result() if t in done and not t.cancelled() else (b"", 0)
                                                  for t in readers]
        for name, dropped in (("stdout", out_dropped), ("stderr", err_dropped)):
            if dropped:
                self._warn(hook, f"{name} cut at {cap} bytes ({dropped} bytes omitted)")
        run = HookRun(hook, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
        if code is not None and code not in (0, BLOCK_EXIT) and not run.output():
            last = run.stderr.strip().splitlines()[-1:]  # a crash's last line names the exception
            self._warn(hook, f"exited with {code}" + (f": {last[0][:200]}" if last else "") + "; going on")
        return run

    def _said(self, hook: Hook, out: dict[str, Any]) -> str | None:
        """What every event reads of a hook's JSON: `systemMessage` shown to the person, and
        `continue: false`, whose `stopReason` is returned (the turn stops). `suppressOutput`
        changes nothing: a hook's output is never shown anyway."""
        if isinstance(msg := out.get("systemMessage"), str) and msg.strip():
            self.emit(Notice(level="warning", text=f"{hook.event} hook `{_short(hook.command)}`: "
                                                   f"{clamp(msg.strip(), self.limits.hook_context_chars)}"))
        if out.get("continue") is False:
            why = out.get("stopReason")
            return clamp(why.strip(), self.limits.hook_context_chars) if isinstance(why, str) and why.strip() \
                else f"hook `{_short(hook.command)}` said not to continue"
        return None

    async def fire(self, event: str, subject: str | None = None, aliases: tuple[str, ...] = (), *,
                   hooks: list[Hook] | None = None, ours: dict[str, Any] | None = None,
                   env: dict[str, str] | None = None, **extra: Any) -> Outcome:
        """Run the hooks of `event` matching `subject` (or one of its `aliases`), or `hooks`,
        in order, and sum up what they said."""
        blocks: list[str] = []
        context: list[str] = []
        halt: str | None = None
        output: Any = None
        for hook in self.of(event, subject, aliases) if hooks is None else hooks:
            run = await self.run(hook, self.payload(event, ours, **extra), env)
            out = run.output()
            halt = self._said(hook, out) or halt
            reason = str(out.get("reason") or "") if out.get("decision") == "block" else ""
            if run.code == BLOCK_EXIT or reason or out.get("decision") == "block":
                blocks.append(reason or (run.stderr.strip() if run.code == BLOCK_EXIT else "")
                              or f"blocked by hook `{_short(hook.command)}`")
            if run.code == BLOCK_EXIT:
                continue
            if isinstance(out.get("additionalContext"), str):
                context.append(out["additionalContext"])
            elif run.code == 0 and not out and event in ("UserPromptSubmit", "SessionStart") and run.stdout.strip():
                context.append(run.stdout.strip())  # plain text on stdout is context too
            for key in ("updatedToolOutput", "updatedMCPToolOutput"):
                output = out[key] if key in out else output
        limit = self.limits.hook_context_chars
        return Outcome(tuple(clamp(b, limit) for b in blocks), clamp("\n\n".join(context), limit), halt, output)

    # -- the tool-call points (the gate and the runtime) -----------------------------------
    def claude_calls(self, tool: Tool, args: Params) -> list[ClaudeCall]:
        try:
            return tool.claude_calls(args, self.workspace)
        except Exception:  # a tool whose description of itself fails: told under its own name

            return [ClaudeCall(tool.name, args.dump())]

    async def pre_tool_use(self, tool: Tool, args: Params, call_id: str = "") -> PreToolUse | None:
        """None when no hook runs for this call."""
        calls = self.claude_calls(tool, args)
        if not any(self.for_call("PreToolUse", tool, c) for c in calls):
            return None
        rewritten = False
        decision: str | None = None
        reasons: list[str] = []
        for index in range(len(calls)):
            for hook in self.for_call("PreToolUse", tool, calls[index]):
                call = calls[index]
                run = await self.run(hook, self.payload(
                    "PreToolUse", {"tool_name": tool.name, "tool_input": args.dump()},
                    tool_name=call.name, tool_input=call.input, tool_use_id=call_id))
                out = run.output()
                if (halt := self._said(hook, out)) is not None:
                    self._halt = halt
                    return PreToolUse(args, refusal=f"ERROR: a PreToolUse hook stopped the turn: {halt}")
                said = out.get("permissionDecision") or _OLD_DECISIONS.get(str(out.get("decision")))
                reason = str(out.get("permissionDecisionReason") or out.get("reason") or "")
                if run.code == BLOCK_EXIT or said == "deny":  # exit 2: the JSON's reason, else stderr
                    blocked = run.code == BLOCK_EXIT and not (said == "deny" and reason)
                    return PreToolUse(args, refusal=self._refusal(run.stderr.strip() if blocked else reason, hook))
                if isinstance(out.get("additionalContext"), str) and out["additionalContext"].strip():
                    self._context.setdefault(call_id, []).append(out["additionalContext"].strip())
                if isinstance(out.get("updatedInput"), dict):
                    got = self._rewritten(tool, args, calls, call, out["updatedInput"])
                    if isinstance(got, str):
                        return PreToolUse(args, refusal=got)
                    args, rewritten = got, True
                    calls = self.claude_calls(tool, args)  # what the next hooks are shown
                if said in ("ask", "allow"):
                    if said == "ask" or decision is None:
                        decision = said
                        reasons.append(reason)
                elif said == "defer":
                    self._warn(hook, "answered defer, which nanohermes does not do; the call goes through the "
                                     "permission rules")
                elif said is not None:
                    self._warn(hook, f"unknown permissionDecision {str(said)[:40]!r} ignored (allow, deny or ask)")
        if rewritten:
            self.emit(Notice(level="info", text=f"a PreToolUse hook rewrote the arguments of {tool.name}"))
        return PreToolUse(args, decision=decision, reason="; ".join(r for r in reasons if r))

    def _rewritten(self, tool: Tool, args: Params, calls: list[ClaudeCall], call: ClaudeCall,
                   updated: dict[str, Any]) -> Params | str:
        """The arguments a hook's `updatedInput` (in Claude Code's names or ours) gives, or the
        refusal when there are none."""
        if len(calls) > 1:  # one file's input of several: there is no one call to rewrite it into
            return (f"ERROR: a PreToolUse hook rewrote the input of one of the {len(calls)} files or steps "
                    f"{tool.name} does at once; such a call cannot be rewritten, so it was refused")
        try:
            rewritten: Params = tool.parse(args.from_claude(updated, call.input))
            return rewritten
        except (ToolError, ValueError) as e:
            return f"ERROR: a PreToolUse hook rewrote the arguments of {tool.name} into invalid ones: {e}"

    async def post_tool_use(self, tool: Tool, args: Params, result: str, call_id: str = "") -> str:
        """The result the model gets: the hooks' output in place of the tool's if one gave
        some, with their block reasons and context added."""
        notes: list[str] = []
        text = result
        for call in self.claude_calls(tool, args):
            hooks = self.for_call("PostToolUse", tool, call)
            if not hooks:
                continue
            o = await self.fire("PostToolUse", hooks=hooks, ours={"tool_name": tool.name, "tool_input": args.dump(),
                                                                  "tool_response": result},
                                tool_name=call.name, tool_input=call.input, tool_response=claude_response(call, result),
                                tool_use_id=call_id)
            notes += [f"PostToolUse hook: {b}" for b in o.blocks] + ([o.context] if o.context else [])
            if (replaced := output_text(o.output)) is not None:
                text = clamp(replaced, self.limits.max_output)
            self._halt = o.halt or self._halt
        return text + "".join("\n\n" + n for n in notes)

    def with_context(self, call_id: str, text: str) -> str:
        """A call's result with what its PreToolUse hooks added for the model."""
        added = self._context.pop(call_id, [])
        return text + "".join(f"\n\nPreToolUse hook: {clamp(c, self.limits.hook_context_chars)}" for c in added)

    def halted(self) -> str | None:
        """Why a hook said `continue: false` since the last time this was asked (the turn stops
        after the calls in flight), or None."""
        halt, self._halt = self._halt, None
        return halt

    def _refusal(self, reason: str, hook: Hook) -> str:
        why = clamp(reason, self.limits.hook_context_chars) if reason else f"hook `{_short(hook.command)}` said no"
        return f"ERROR: blocked by a PreToolUse hook: {why}"

    # -- around a turn (the agent's TurnHooks) ---------------------------------------------
    async def prompt_submitted(self, prompt: str) -> str | None:
        """The prompt to send, with the hooks' context added; None when a hook blocks it."""
        self._stop_active = False
        self.blocked = ""
        self._halt = None
        if not self.of("UserPromptSubmit"):
            return prompt
        o = await self.fire("UserPromptSubmit", prompt=prompt)
        if o.blocks or o.halt is not None:
            why = [*o.blocks, *([o.halt] if o.halt is not None else [])]
            self.blocked = "prompt blocked by a UserPromptSubmit hook: " + "; ".join(why)
            self.emit(Notice(level="warning", text=self.blocked))
            return None
        return prompt + (f"\n\n<hook-context>\n{o.context}\n</hook-context>" if o.context else "")

    async def settled(self, changing: bool = False) -> None:
        return None  # the prompt hooks run to their end before the prompt goes out

    async def ended(self) -> None:
        return None

    async def stopping(self, answer: str) -> str | None:
        """A reason to keep working, when a Stop hook blocks the end of the turn or gives
        feedback; `continue: false` ends it whatever the others said."""
        if not self.of("Stop"):
            return None
        o = await self.fire("Stop", stop_hook_active=self._stop_active, last_assistant_message=answer)
        if o.halt is not None:
            self.emit(Notice(level="warning", text=f"a Stop hook ended the turn: {o.halt}"))
            return None
        if not o.blocks and not o.context:
            return None
        self._stop_active = True  # the next Stop hook knows it already sent the model back once
        parts = ["A Stop hook asks you to go on before ending the turn:\n" + "\n".join(o.blocks)] if o.blocks else []
        return "\n\n".join(parts + ([f"Stop hook feedback:\n{o.context}"] if o.context else []))

    # -- the session ----------------------------------------------------------------------
    async def session_start(self, source: str) -> str:
        """The context SessionStart hooks add to the system prompt ("" for none). What they
        export through `$CLAUDE_ENV_FILE` reaches the later commands and hooks."""
        hooks = self.of("SessionStart", source)
        if not hooks:
            return ""
        env_file = self.folder() / ENV_FILE

        try:
            open_private(env_file, "w").close()  # each start begins with no exports
        except OSError as e:
            self.emit(Notice(level="warning", text=f"$CLAUDE_ENV_FILE could not be made at {env_file}: "
                                                   f"{e.strerror or e}"))
        o = await self.fire("SessionStart", hooks=hooks, env={"CLAUDE_ENV_FILE": str(env_file)}, source=source)
        self._read_exports(env_file)
        return o.context

    def _read_exports(self, env_file: Path) -> None:
        # only a hook that writes an env file
        from nanohermes.hooks.envfile import load_exports

        self._exports, problems = load_exports(env_file, self.limits.hook_output_bytes, self._exports)
        if left := set_session_env(self._exports):
            problems.append(f"{', '.join(left)} not passed to commands: named like a credential; list in "
                            "shell_env.keep to pass")
        for problem in problems:
            self.emit(Notice(level="warning", text=f"$CLAUDE_ENV_FILE: {problem}"))

    async def session_end(self, reason: str) -> None:
        await self.drain()
        if self.of("SessionEnd", reason):
            await self.fire("SessionEnd", reason, reason=reason)

    async def pre_compact(self, trigger: str, instructions: str) -> str | None:
        """Why a PreCompact hook blocks the compaction, or None."""
        if not self.of("PreCompact", trigger):
            return None
        o = await self.fire("PreCompact", trigger, trigger=trigger, custom_instructions=instructions)
        return "; ".join(o.blocks) or None

    def notify(self, message: str, kind: str = "") -> None:
        """Notification hooks, in the background: a slow one must not delay the prompt. `kind`
        is Claude Code's `notification_type` (permission_prompt, idle_prompt), their matcher."""
        if not self.of("Notification", kind):
            return
        task = asyncio.get_running_loop().create_task(
            self.fire("Notification", kind, message=message, notification_type=kind))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for the Notification hooks still running."""
        if self._background:
            await asyncio.wait(set(self._background))

    def close(self) -> None:
        """The session is over: a folder made for a session not recorded goes."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _warn(self, hook: Hook, text: str) -> None:
        self.emit(Notice(level="warning", text=f"{hook.event} hook `{_short(hook.command)}` {text}"))


class NotifyingUI:
    """A UI that fires the Notification hooks whenever the person is waited on (an approval
    prompt; with `idle`, a finished turn), then delegates everything to the front end's UI."""

    def __init__(self, inner: UI, hooks: Hooks, *, approvals: bool = True, idle: bool = False) -> None:
        self.inner, self.hooks, self.approvals, self.idle = inner, hooks, approvals, idle

    def emit(self, event: Event) -> None:
        self.inner.emit(event)
        if self.idle and isinstance(event, TurnEnded):
            self.hooks.notify("nanohermes is waiting for your input", "idle_prompt")

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        if self.approvals:
            self.hooks.notify(f"nanohermes needs your permission to use {request.tool}: {request.summary}"[:500],
                              "permission_prompt")
        return await self.inner.confirm(request)

    def __getattr__(self, name: str) -> Any:  # the front end's own attributes (meter, view, ...)
        return getattr(self.inner, name)


def missing_program(command: str, workspace: Path) -> str | None:
    """Why the program a hook's command line starts cannot be found (for `doctor`), or None.
    Leading `NAME=value` words are environment assignments; a shell construct that is not
    a plain command (a pipeline's later stages, `$(...)`) is not looked into."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        return f"cannot parse the command line: {e}"
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)] or [""]
    program = words[0]
    if not program:
        return "the command line is empty"
    if "/" in program:
        for var in ("NANOHERMES_PROJECT_DIR", "CLAUDE_PROJECT_DIR"):
            program = program.replace("${" + var + "}", str(workspace)).replace("$" + var, str(workspace))
        path = Path(os.path.expanduser(os.path.expandvars(program)))
        path = path if path.is_absolute() else workspace / path
        if not path.is_file():
            return f"{program}: no such file"
        if not os.access(path, os.X_OK):
            return f"{program}: not executable (chmod +x it)"
        return None
    if shutil.which(program) is None and program not in _SHELL_WORDS:
        return f"{program}: not found on PATH"
    return None


_SHELL_WORDS = {"cd", "echo", "exit", "test", "[", "true", "false", "printf", "read", "exec", "if", "for", "while",
                "case", "{", "(", "!", ".", ":", "export", "set"}


async def _feed_and_wait(proc: asyncio.subprocess.Process, data: bytes) -> int:
    await _feed(proc, data)
    return await proc.wait()


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # a hook that does not read its input is fine
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    """Up to `cap` bytes, and how many more were read and discarded (memory stays flat)."""
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(64 * 1024):
        room = max(0, cap - len(kept))
        kept += chunk[:room]
        dropped += len(chunk) - min(room, len(chunk))
    return bytes(kept), dropped


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _stop_start(proc: asyncio.subprocess.Process) -> None:
    """End a hook whose start was cancelled: its group killed, its end awaited (bounded)."""
    _kill_group(proc.pid)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), _PIPE_GRACE_SECS)


def _once(hooks: list[Hook]) -> list[Hook]:
    """Each command line once, the first of its entries (the person's own before a project's)."""
    first = {h.command: h for h in reversed(hooks)}  # the first entry of each command is written last
    return [h for h in hooks if first[h.command] is h]


def _short(command: str) -> str:
    line = command.strip().splitlines()[0] if command.strip() else command
    return line if len(line) <= 60 else line[:57] + "…"


def unmatched(hooks: list[Hook], tools: dict[str, tuple[str, ...]], servers: tuple[str, ...] = ()) -> list[str]:
    """One line per PreToolUse/PostToolUse matcher that matches none of `tools` (name -> Claude
    Code's names), so a guard that never fires is seen. A matcher naming a configured MCP
    server (`mcp__github__.*`) counts as matching: its tools are known only once it runs."""
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for h in hooks:
        if h.event not in ("PreToolUse", "PostToolUse") or h.matcher in ("", "*") or (h.event, h.matcher) in seen:
            continue
        seen.add((h.event, h.matcher))
        if any(h.matches(name, tuple(n for c in names for n in call_names(c, name))) for name, names in tools.items()):
            continue
        if any(f"mcp__{server}" in h.matcher for server in servers):
            continue
        out.append(f"{h.event} matcher {h.matcher!r} ({h.origin or 'config'}) matches no tool, so its hook never "
                   f"runs; tools are named as /tools lists them, or by Claude Code's names (Bash, Read, Write, "
                   f"Edit, Glob, Grep, WebFetch, mcp__server__tool, ...)")
    return out
