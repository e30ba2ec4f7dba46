"""Hooks: the person's own commands, run at points of a session.

Events: PreToolUse and PostToolUse around each tool call, UserPromptSubmit and Stop around a
turn, SessionStart and SessionEnd, PreCompact, and Notification whenever nanohermes waits for
the person. Only the user's config or a trusted project defines hooks (the config loader drops an
untrusted project's), so they carry the person's approval: they run outside the command
sandbox, with one JSON object on stdin. A trusted project's own hooks run in the workspace;
the person's own (user config) run outside it, where nothing the project holds changes which
code they run (`programs.person_start`); both find the workspace in CLAUDE_PROJECT_DIR.

Exit 0 goes on, and stdout may be a JSON object with a decision; exit 2 blocks, with stderr
as the reason; any other exit, a timeout or a failure to start is a warning and the session
goes on. After every hook its whole process group is killed, so nothing it started outlives
it. A hook's decisions can only make a call safer than the permission rules would: "allow"
answers an approval question, it never lifts a deny rule, and rewritten arguments are checked
by the rules again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes import programs
from nanohermes.budget import Limits, clamp
from nanohermes.events import UI, ApprovalReply, ApprovalRequest, Event, Notice, TurnEnded
from nanohermes.modes import Mode
from nanohermes.session import Session

if TYPE_CHECKING:
    from nanohermes.config import HooksConfig
    from nanohermes.permissions import Verdict
    from nanohermes.tools import Params, Tool

BLOCK_EXIT = 2
_PIPE_GRACE_SECS = 2.0  # after the group is killed, for output still in the pipes


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str  # a regular expression over the whole subject (tool name); "" or "*": all
    command: str
    timeout_secs: float
    origin: str  # the config file that defined it
    project_own: bool = False  # defined by a (trusted) project's file: it runs in the workspace

    def matches(self, subject: str | None, aliases: tuple[str, ...] = ()) -> bool:
        """`aliases`: other names of the subject (Claude Code's names of a tool)."""
        return self.matched(subject, aliases) is not None

    def matched(self, subject: str | None, aliases: tuple[str, ...] = ()) -> str | None:
        """The name the matcher matched (`subject` itself for "" and "*"), or None."""
        if self.matcher in ("", "*") or subject is None:
            return subject or ""
        return next((name for name in (subject, *aliases) if re.fullmatch(self.matcher, name) is not None), None)


@dataclass(frozen=True)
class HookRun:
    """What one hook did: its exit code (None: timed out or could not start) and output."""

    hook: Hook
    code: int | None
    stdout: str
    stderr: str

    def output(self) -> dict[str, Any]:
        """Its stdout as a JSON object (Claude Code's `hookSpecificOutput` merged in), or {}."""
        text = self.stdout.strip()
        if self.code != 0 or not text.startswith("{"):
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
    """The hooks of one event together: why they block (empty: they do not) and the context
    they add for the model."""

    blocks: tuple[str, ...] = ()
    context: str = ""


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
        from dataclasses import replace

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
    session: Session = field(default_factory=Session)
    mode: Callable[[], Mode] = lambda: Mode.DEFAULT  # the permission mode at the time a hook runs
    blocked: str = ""  # why a UserPromptSubmit hook blocked the last prompt ("" when it went out)
    _stop_active: bool = False
    _background: set[asyncio.Task[Any]] = field(default_factory=set)

    @classmethod
    def from_config(cls, config: HooksConfig, workspace: Path, limits: Limits, emit: Callable[[Event], None], *,
                    session: Session | None = None, mode: Callable[[], Mode] = lambda: Mode.DEFAULT) -> Hooks:
        from nanohermes.config import HOOK_EVENTS

        hooks = [Hook(event, group.matcher, h.command, h.timeout, group.origin, group.project_own)
                 for event in HOOK_EVENTS for group in config.groups(event) for h in group.hooks]
        return cls(hooks, workspace, limits, emit, session or Session(), mode)

    def of(self, event: str, subject: str | None = None, aliases: tuple[str, ...] = ()) -> list[Hook]:
        return [h for h in self.hooks if h.event == event and h.matches(subject, aliases)]

    def lines(self, tools: dict[str, tuple[str, ...]] | None = None, servers: tuple[str, ...] = ()) -> list[str]:
        """For `/hooks`: each hook in force, with its matcher, timeout and origin, then a warning
        for each tool matcher that matches none of `tools` (name -> Claude Code's names)."""
        if not self.hooks:
            return ["no hooks configured (config key hooks; see docs/hooks.md)"]
        out = [f"{h.event:<16} {(h.matcher or '*'):<20} {h.command}  (timeout {h.timeout_secs:g}s; {h.origin or 'config'})"
               for h in self.hooks]
        return out + ([f"warning: {w}" for w in unmatched(self.hooks, tools, servers)] if tools is not None else [])

    # -- running ---------------------------------------------------------------------------
    def payload(self, event: str, **extra: Any) -> dict[str, Any]:
        return {"session_id": self.session.id, "transcript_path": str(self.session.path or ""), "cwd": str(self.workspace),
                "permission_mode": self.mode(), "hook_event_name": event, **extra}

    async def run(self, hook: Hook, payload: dict[str, Any]) -> HookRun:
        """Run one hook to its end or its timeout; then kill whatever is left of its group."""
        from nanohermes.redact import configured_env

        cwd, env = programs.person_start({"PATH": os.defpath, **os.environ}, configured_env(), cwd=None,
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
        if code is not None and code not in (0, BLOCK_EXIT):
            last = run.stderr.strip().splitlines()[-1:]  # a crash's last line names the exception
            self._warn(hook, f"exited with {code}" + (f": {last[0][:200]}" if last else "") + "; going on")
        return run

    async def fire(self, event: str, subject: str | None = None, aliases: tuple[str, ...] = (),
                   **extra: Any) -> Outcome:
        """Run the hooks of `event` matching `subject` (or one of its `aliases`), in order, and
        sum up what they said."""
        blocks: list[str] = []
        context: list[str] = []
        for hook in self.of(event, subject, aliases):
            run = await self.run(hook, self.payload(event, **_named(extra, hook, subject, aliases)))
            if run.code == BLOCK_EXIT:
                blocks.append(run.stderr.strip() or f"blocked by hook `{_short(hook.command)}`")
                continue
            out = run.output()
            if out.get("decision") == "block":
                blocks.append(str(out.get("reason") or f"blocked by hook `{_short(hook.command)}`"))
            if isinstance(out.get("additionalContext"), str):
                context.append(out["additionalContext"])
            elif run.code == 0 and not out and event in ("UserPromptSubmit", "SessionStart") and run.stdout.strip():
                context.append(run.stdout.strip())  # plain text on stdout is context too
        limit = self.limits.hook_context_chars
        return Outcome(tuple(clamp(b, limit) for b in blocks), clamp("\n\n".join(context), limit))

    # -- the tool-call points (the runtime) ------------------------------------------------
    async def pre_tool_use(self, tool: Tool, args: Params) -> PreToolUse | None:
        """None when no hook matches this tool."""
        from nanohermes.tools import ToolError

        hooks = self.of("PreToolUse", tool.name, tool.claude_names)
        if not hooks:
            return None
        inputs = tool_inputs(tool, args, self.workspace)
        rewritten = False
        decision: str | None = None
        reasons: list[str] = []
        for hook in hooks:
            for sent in inputs:
                extra = _named({"tool_name": tool.name, "tool_input": sent}, hook, tool.name, tool.claude_names)
                run = await self.run(hook, self.payload("PreToolUse", **extra))
                if run.code == BLOCK_EXIT:
                    return PreToolUse(args, refusal=self._refusal(run.stderr.strip(), hook))
                out = run.output()
                # The older spelling: {"decision": "approve" | "block"}.
                said = out.get("permissionDecision") or {"approve": "allow"}.get(str(out.get("decision")))
                reason = str(out.get("permissionDecisionReason") or out.get("reason") or "")
                if said == "deny" or out.get("decision") == "block":
                    return PreToolUse(args, refusal=self._refusal(reason, hook))
                if isinstance(out.get("updatedInput"), dict):
                    if len(inputs) > 1:  # one file's input of several: there is no one call to rewrite it into
                        return PreToolUse(args, refusal=f"ERROR: a PreToolUse hook rewrote the input of one of the "
                                                        f"{len(inputs)} files {tool.name} touches; a call touching "
                                                        f"several files cannot be rewritten, so it was refused")
                    try:
                        args = tool.parse(ours_again(out["updatedInput"], sent, type(args).claude_fields))
                    except ToolError as e:
                        return PreToolUse(args, refusal=f"ERROR: a PreToolUse hook rewrote the arguments of "
                                                       f"{tool.name} into invalid ones: {e}")
                    rewritten = True
                    inputs = tool_inputs(tool, args, self.workspace)  # what the next hooks are shown
                if said == "ask" or (said == "allow" and decision is None):
                    decision = said
                    reasons.append(reason)
                elif said is not None:
                    self._warn(hook, f"unknown permissionDecision {str(said)[:40]!r} ignored (allow, deny or ask)")
        if rewritten:
            self.emit(Notice(level="info", text=f"a PreToolUse hook rewrote the arguments of {tool.name}"))
        return PreToolUse(args, decision=decision, reason="; ".join(r for r in reasons if r))

    async def post_tool_use(self, tool: Tool, args: Params, result: str) -> str:
        """The result the model gets: with the hooks' block reasons and context added."""
        if not self.of("PostToolUse", tool.name, tool.claude_names):
            return result
        notes: list[str] = []
        for sent in tool_inputs(tool, args, self.workspace):
            o = await self.fire("PostToolUse", tool.name, tool.claude_names, tool_name=tool.name, tool_input=sent,
                                tool_response=result)
            notes += [f"PostToolUse hook: {b}" for b in o.blocks] + ([o.context] if o.context else [])
        return result + "".join("\n\n" + n for n in notes)

    def _refusal(self, reason: str, hook: Hook) -> str:
        why = clamp(reason, self.limits.hook_context_chars) if reason else f"hook `{_short(hook.command)}` said no"
        return f"ERROR: blocked by a PreToolUse hook: {why}"

    # -- around a turn (the agent's TurnHooks) ---------------------------------------------
    async def prompt_submitted(self, prompt: str) -> str | None:
        """The prompt to send, with the hooks' context added; None when a hook blocks it."""
        self._stop_active = False
        self.blocked = ""
        if not self.of("UserPromptSubmit"):
            return prompt
        o = await self.fire("UserPromptSubmit", prompt=prompt)
        if o.blocks:
            self.blocked = "prompt blocked by a UserPromptSubmit hook: " + "; ".join(o.blocks)
            self.emit(Notice(level="warning", text=self.blocked))
            return None
        return prompt + (f"\n\n<hook-context>\n{o.context}\n</hook-context>" if o.context else "")

    async def settled(self) -> None:
        return None  # the prompt hooks run to their end before the prompt goes out

    async def ended(self) -> None:
        return None

    async def stopping(self, answer: str) -> str | None:
        """A reason to keep working, when a Stop hook blocks the end of the turn."""
        if not self.of("Stop"):
            return None
        o = await self.fire("Stop", stop_hook_active=self._stop_active)
        if not o.blocks:
            return None
        self._stop_active = True  # the next Stop hook knows it already sent the model back once
        return "A Stop hook asks you to go on before ending the turn:\n" + "\n".join(o.blocks)

    # -- the session ----------------------------------------------------------------------
    async def session_start(self, source: str) -> str:
        """The context SessionStart hooks add to the system prompt ("" for none)."""
        if not self.of("SessionStart", source):
            return ""
        return (await self.fire("SessionStart", source, source=source)).context

    async def session_end(self, reason: str) -> None:
        await self.drain()
        if self.of("SessionEnd", reason):
            await self.fire("SessionEnd", reason, reason=reason)

    async def pre_compact(self, trigger: str, instructions: str) -> None:
        if self.of("PreCompact", trigger):
            await self.fire("PreCompact", trigger, trigger=trigger, custom_instructions=instructions)

    def notify(self, message: str) -> None:
        """Notification hooks, in the background: a slow one must not delay the prompt."""
        if not self.of("Notification"):
            return
        task = asyncio.get_running_loop().create_task(self.fire("Notification", message=message))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for the Notification hooks still running."""
        if self._background:
            await asyncio.wait(set(self._background))

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
            self.hooks.notify("nanohermes is waiting for your input")

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        if self.approvals:
            self.hooks.notify(f"nanohermes needs your permission to use {request.tool}: {request.summary}"[:500])
        return await self.inner.confirm(request)

    def __getattr__(self, name: str) -> Any:  # the front end's own attributes (meter, view, ...)
        return getattr(self.inner, name)


def missing_program(command: str, workspace: Path) -> str | None:
    """Why the program a hook's command line starts cannot be found (for `doctor`), or None.
    Leading `NAME=value` words are environment assignments; a shell construct that is not
    a plain command (a pipeline's later stages, `$(...)`) is not looked into."""
    import shlex
    import shutil

    try:
        words = shlex.split(command)
    except ValueError as e:
        return f"cannot parse the command line: {e}"
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)] or [""]
    program = words[0]
    if not program:
        return "the command line is empty"
    if "/" in program:
        path = Path(os.path.expanduser(os.path.expandvars(program.replace("$NANOHERMES_PROJECT_DIR", str(workspace)))))
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


def _short(command: str) -> str:
    line = command.strip().splitlines()[0] if command.strip() else command
    return line if len(line) <= 60 else line[:57] + "…"


def tool_inputs(tool: Tool, args: Params, workspace: Path) -> list[dict[str, Any]]:
    """What a hook reads as `tool_input`: the call's arguments, plus the same values under the
    names Claude Code's tool of that purpose uses (`file_path`, absolute as Claude Code's is),
    so a hook script written for Claude Code reads what it expects. A tool writing several
    files (a patch) gives one input per file: a guard that reads `file_path` sees each."""
    ours = args.dump()
    shown = dict(ours)
    for mine, theirs in type(args).claude_fields.items():
        if mine in ours and theirs not in shown:
            shown[theirs] = ours[mine]
    if isinstance(shown.get("file_path"), str):
        shown["file_path"] = _absolute(shown["file_path"], workspace)
        return [shown]
    if tool.kind == "path" and tool.effect == "write":
        try:
            paths = tool.subjects(args)
        except Exception:  # a patch that cannot be read names no file; the tool reports why
            paths = []
        if paths:
            return [{**shown, "file_path": _absolute(p, workspace)} for p in paths]
    return [shown]


def ours_again(updated: dict[str, Any], sent: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    """A hook's `updatedInput` in the tool's own field names: a value given (or changed) under
    Claude Code's name replaces ours, and the names only hooks were shown are dropped."""
    out = dict(updated)
    for mine, theirs in {**fields, "path": "file_path"}.items():
        if theirs not in out:
            continue
        value = out.pop(theirs)
        if mine in fields or theirs in fields.values():
            if mine not in updated or value != sent.get(theirs):
                out[mine] = value
    return out


def _absolute(path: str, workspace: Path) -> str:
    """A path as Claude Code gives it to hooks: absolute, normalised (no link is resolved)."""
    return os.path.normpath(os.path.join(workspace, os.path.expanduser(path)))


def _named(extra: dict[str, Any], hook: Hook, subject: str | None, aliases: tuple[str, ...]) -> dict[str, Any]:
    """The payload's `tool_name` as the hook's matcher knew it: a hook that matched only by
    Claude Code's name of the tool (`Bash`) is told that name, as Claude Code would tell it."""
    if "tool_name" not in extra or subject is None:
        return extra
    name = hook.matched(subject, aliases)
    return {**extra, "tool_name": name} if name and name != subject else extra


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
        if any(h.matches(name, aliases) for name, aliases in tools.items()):
            continue
        if any(f"mcp__{server}" in h.matcher for server in servers):
            continue
        out.append(f"{h.event} matcher {h.matcher!r} ({h.origin or 'config'}) matches no tool, so its hook never "
                   f"runs; tools are named as /tools lists them, or by Claude Code's names (Bash, Read, Write, "
                   f"Edit, Glob, Grep, WebFetch, mcp__server__tool, ...)")
    return out
