"""Tool-call execution: look up, parse, permit, precheck, batch, run, clamp, budget, persist.

Every call in an assistant message gets exactly one result, in the model's order, whatever
happens: unknown tool, bad JSON, a missing field, a denial, a crash. Consecutive
concurrency-safe calls run together (bounded by `max_parallel`); any other call runs alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.arguments import parse_arguments
from nanohermes.budget import Limits, clamp
from nanohermes.config import Config
from nanohermes.events import UI, ApprovalRequest, Notice, PermissionDenied, SandboxRefused, ToolFinished, ToolStarted
from nanohermes.messages import Message, ToolCall
from nanohermes.pathrules import command_secret
from nanohermes.permissions import Policy, Rule, Target, Verdict, blocked, decide, describe, reads_secret, unattended
from nanohermes.session import Session
from nanohermes.shellparse import ParseError, split
from nanohermes.tools import Params, Tool, ToolContext, ToolError, ToolResult

if TYPE_CHECKING:
    from nanohermes.hooks import Hooks

# A refused call's result. With the person's note, the note is the instruction instead.
DENIED_PREFIX = "Denied by the user"
DENIED = DENIED_PREFIX + ". Do not retry it; ask what to do instead."
INTERRUPTED = "interrupted by user"
# After a result clamped by the aggregate budget when there is no session folder to keep it in.
UNSAVED_NOTE = "\n(cut to fit the per-message budget; not saved, the session is not recorded: narrow the call to see more)"


def denied(note: str = "") -> str:
    """The result of a refused call: the person's note, when they gave one, says what to do."""
    if not note:
        return DENIED
    return f"{DENIED_PREFIX}, who said: {note}\nDo not retry the call as it was; follow what they said."


@dataclass
class _Call:
    call: ToolCall
    tool: Tool | None = None
    args: Params | None = None
    error: str | None = None  # set when the call cannot run at all
    safe: bool = False


@dataclass
class Runtime:
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
    _confirm_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}

    @property
    def confirm_lock(self) -> asyncio.Lock:
        """Held while an approval prompt is open; sub-agents asking through this runtime's UI
        take it too, so two prompts never share the terminal."""
        return self._confirm_lock

    def set_tools(self, tools: list[Tool]) -> None:
        """Replace the pool, e.g. when MCP servers have started and their tools are known."""
        self.tools = tools
        self._by_name = {t.name: t for t in tools}

    # -- what the model sees ---------------------------------------------------------------
    def visible_tools(self) -> list[Tool]:
        return [t for t in self.tools if blocked(self.policy, t.name, t.effect) is None]

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec(self.limits) for t in self.visible_tools()]

    def set_mode(self, mode: str) -> None:
        self.policy = replace(self.policy, mode=mode)

    def remember(self, rule: Rule, origin: str = "learned this session") -> None:
        """An "always" answer: allowed for the rest of the session, whatever the mode."""
        if rule not in self.policy.allow:
            self.policy = replace(self.policy, allow=(*self.policy.allow, Rule(rule.tool, rule.pattern, origin)))

    def remember_in_project(self, rules: Sequence[Rule]) -> None:
        """"Always for this project": remembered now and written to the project config."""
        from nanohermes.config import project_config_path

        path = project_config_path(self.workspace)
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            if not isinstance(data, dict):
                raise ValueError("the top level is not an object")
            perms = data.setdefault("permissions", {})
            allow = perms.setdefault("allow", [])
            if not isinstance(perms, dict) or not isinstance(allow, list):
                raise ValueError("`permissions.allow` is not a list")
            allow.extend(str(r) for r in rules if str(r) not in allow)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            tmp.replace(path)
            # The project file comes with the repository, so its allow rules apply only in a
            # trusted folder, or when this person saved them: record that outside it.
            from nanohermes.config import record_approved_rules

            record_approved_rules(self.workspace, [str(r) for r in rules])
        except (OSError, ValueError) as e:
            for rule in rules:
                self.remember(rule)
            self.ui.emit(Notice(level="warning", text=f"could not save to {path} ({e}); remembered for this session only"))
            return
        for rule in rules:
            self.remember(rule, f"learned, saved to {path}")
        self.ui.emit(Notice(level="info", text=f"saved {', '.join(map(str, rules))} to {path}"))

    def permissions_report(self) -> list[str]:
        """The rules in force and where each came from (the /permissions listing), and what
        the OS sandbox confines here."""
        from nanohermes.sandbox import describe_availability

        return [*describe(self.policy, [(t.name, t.effect) for t in self.tools]),
                *describe_availability(self.config.sandbox.mode)]

    # -- running calls ---------------------------------------------------------------------
    async def run_calls(self, calls: Sequence[ToolCall], results: dict[str, Message] | None = None) -> list[Message]:
        """Run one assistant message's calls. `results` fills in as calls finish, so a
        caller that is cancelled mid-way knows which calls still need an answer."""
        done = results if results is not None else {}
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
        tool = self._by_name.get(call.name)
        if tool is None:
            names = ", ".join(t.name for t in self.visible_tools())
            p.error = f"unknown tool `{call.name}`; available tools: {names}"
            return p
        p.tool = tool
        try:
            raw = parse_arguments(call.arguments, self.limits.tool_args_max_depth)
        except ValueError as e:
            p.error = f"arguments for {call.name} {e}"
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

    def _context(self, call_id: str) -> ToolContext:
        return ToolContext(
            workspace=self.workspace, limits=self.limits, config=self.config,
            call_id=call_id, emit=self.ui.emit, state=self.session.state, secret_files=self.policy.secret_files,
        )

    def _refusal(self, tool: Tool, args: Params) -> Callable[[Target], str | None]:
        """For a tool that reaches a further target mid-call (a redirect to another host):
        why the policy would not let it through unasked, or None."""
        def refusal(target: Target) -> str | None:
            v = decide(self.policy, tool_name=tool.name, approval=tool.approval_for(args), target=target)
            if v.decision == "allow":
                return None
            return v.reason if v.decision == "deny" else f"it needs approval ({v.reason})"
        return refusal

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
        text = clamp(text, self.limits.max_output)
        # The time shown is the tool's own: an approval prompt's wait is not counted.
        self.ui.emit(ToolFinished(call_id=p.call.id, name=name, result=text, is_error=is_error,
                                  elapsed=time.monotonic() - started - waited, display=display))
        return Message.tool(p.call.id, text)

    async def _permitted_run(self, tool: Tool, args: Params, call_id: str,
                             summary: str) -> tuple[str, bool, str | None, float]:
        """(result text, is_error, display, seconds spent waiting for the approval)."""
        ctx = self._context(call_id)
        hooked = await self.hooks.pre_tool_use(tool, args) if self.hooks is not None else None
        if hooked is not None:  # a hook may refuse the call or rewrite it; the rules then judge the result
            if hooked.refusal is not None:
                self.ui.emit(PermissionDenied(call_id=call_id, tool=tool.name, summary=summary,
                                              reason=hooked.refusal.removeprefix("ERROR: ")))
                return hooked.refusal, True, None, 0.0
            args, summary = hooked.args, tool.summary(hooked.args)  # an approval shows what will run
        try:
            # Once per call, off the loop (a host's addresses come from the resolver); the
            # verdict and the tool both use this one Target.
            target = await asyncio.to_thread(tool.target, args, ctx)
            target = replace(target, protected=target.protected or bool(tool.protected(args, ctx)))
        except ToolError as e:  # a subject that cannot be judged: a clear error, before any question
            return f"ERROR: {e}", True, None, 0.0
        except Exception as e:  # a tool whose declaration fails cannot be judged: refused, not guessed
            return (f"ERROR: {tool.name} cannot say what this call touches ({type(e).__name__}: {e}); "
                    "the call was refused"), True, None, 0.0
        if target.kind == "command" and target.subjects and not unattended(self.policy):
            target = replace(target, secret_read=await asyncio.to_thread(self._command_secret, target))
        ctx.target = target
        ctx.refusal = self._refusal(tool, args)
        verdict = decide(self.policy, tool_name=tool.name, approval=tool.approval_for(args), target=target)
        verdict = hooked.adjust(verdict) if hooked is not None else verdict
        if verdict.decision == "deny":
            self.ui.emit(PermissionDenied(call_id=call_id, tool=tool.name, summary=summary, reason=verdict.reason))
            return f"ERROR: {verdict.reason}", True, None, 0.0
        waited = 0.0
        ctx.sandbox = self._sandbox_for(tool, args, verdict.decision, target)
        if verdict.decision == "allow" and ctx.sandbox != "off" and target.kind == "command" and target.subjects:
            verdict = await self._withholding(ctx, target, verdict)
        if verdict.decision == "ask":
            # A call that can only fail fails now, with the tool's own error: nobody is asked in
            # vain. Nothing is approved yet, so what the check starts runs read-only.
            checking = replace(ctx, sandbox="off" if self.config.sandbox.mode == "off" else "read-only",
                               sandbox_refusals=[])
            try:
                await tool.precheck(args, checking)
            except ToolError as e:
                return f"ERROR: {e}", True, None, 0.0
            except Exception:  # a check that breaks knows nothing: the person is asked, and the run reports
                pass
            learn = list(verdict.suggest or ()) or ([tool.suggest_rule(args)] if verdict.suggest is not None else [])
            asked = time.monotonic()
            async with self._confirm_lock:  # one prompt at a time, even for parallel calls
                reply = await self.ui.confirm(ApprovalRequest(
                    call_id=call_id, tool=tool.name, summary=summary, detail=tool.approval_detail(args, ctx),
                    rule=", ".join(map(str, learn)), reason=verdict.reason))
            waited = time.monotonic() - asked
            if reply.choice == "deny":
                return denied(reply.note), False, None, waited
            if reply.choice == "always":
                for rule in learn:
                    self.remember(rule)
            elif reply.choice == "project" and learn:
                self.remember_in_project(learn)
        try:
            out = await tool.run(args, ctx)
            if ctx.sandbox_refusals:
                out, asked = await self._refused(tool, args, ctx, summary, out)
                waited += asked
        except ToolError as e:
            return f"ERROR: {e}", True, None, waited
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a tool bug must not end the turn
            return f"ERROR: {tool.name} failed unexpectedly: {type(e).__name__}: {e}", True, None, waited
        text, display = (out.text, out.display) if isinstance(out, ToolResult) else (out, None)
        if self.hooks is not None:
            text = await self.hooks.post_tool_use(tool, args, text)
        return text, False, display, waited

    def _sandbox_for(self, tool: Tool, args: Params, decision: str, target: Target) -> str:
        """The OS sandbox of a call's processes. A person answering yes to this exact call:
        none. Allowed only because every command is a built-in read-only one (the same call
        would be allowed with no allow rule, no --yes, outside goal mode): read-only.
        Anything else that runs unasked: workspace-write."""
        if decision == "ask" or self.config.sandbox.mode == "off":
            return "off"
        bare = replace(self.policy, mode="default", auto_approve=False, allow=())
        verdict = decide(bare, tool_name=tool.name, approval=tool.approval_for(args), target=target)
        return "read-only" if verdict.decision == "allow" else "workspace-write"

    async def _withholding(self, ctx: ToolContext, target: Target, verdict: Verdict) -> Verdict:
        """The workspace's secret files are withheld from an unasked command's sandbox, but
        not from a line that reads one and was allowed by a rule spelling it out (what "always"
        to that question learns). Where they cannot all be withheld, a program is asked, and
        a yes runs it outside the sandbox; with nobody to ask, the command fails closed."""
        from nanohermes.sandbox import probe
        from nanohermes.tools.process import withheld_from

        if unattended(self.policy):
            # Nobody to ask: the sandbox itself refuses what it cannot withhold. The look runs
            # here, off the loop, so the tool's own (then cached) look costs only stats.
            await asyncio.to_thread(withheld_from, ctx)
            return verdict
        if target.secret_read or self._names_secret(target.subjects[0]):
            ctx.withhold_secrets = False
            return verdict
        if ctx.sandbox != "workspace-write":
            # Built-in read-only commands, whose arguments were judged: a secret file named as
            # one was allowed for what the command does with it (a size, a hash, a listing).
            ctx.secrets_named = self._named_paths(target)
            await asyncio.to_thread(withheld_from, ctx)
            return verdict
        found = await asyncio.to_thread(withheld_from, ctx)
        problem = found.problem or ("user namespaces are unavailable here" if found.files and not probe().namespaces
                                    else "")
        if not problem:
            return verdict
        ctx.sandbox = "off"
        return Verdict("ask", f"{problem}, so the sandbox cannot withhold every secret file (permissions.secret_files) "
                              "from it; a yes runs it outside the sandbox", None)

    def _named_paths(self, target: Target) -> frozenset[str]:
        """The real paths the line's plain words (and `--opt=value` values) name, from its folder."""
        base = str(target.cwd or self.workspace)
        try:
            commands = split(target.subjects[0])
        except ParseError:
            return frozenset()
        out: set[str] = set()
        for cmd in commands:
            for w in cmd.words[1:]:
                if w.dynamic or w.glob or w.tilde or w.brace:
                    continue
                for part in (w.text, *(w.text.split("=", 1)[1:] if w.text.startswith("-") else ())):
                    if part:
                        out.add(os.path.realpath(os.path.join(base, part)))
        return frozenset(out)

    def _names_secret(self, line: str) -> bool:
        try:
            return any(reads_secret(cmd, self.policy.secret_files) for cmd in split(line))
        except ParseError:
            return False

    async def _refused(self, tool: Tool, args: Params, ctx: ToolContext, summary: str,
                       out: str | ToolResult) -> tuple[str | ToolResult, float]:
        """The sandbox refused something: offer the person to run the same call outside it
        (one keypress, like any approval); without one the model is told it needs a person."""
        refused = tuple(ctx.sandbox_refusals)
        rerun = False
        asked = time.monotonic()
        if self.policy.mode != "goal":  # goal mode runs unattended: nobody to wait for
            async with self._confirm_lock:
                reply = await self.ui.confirm(ApprovalRequest(
                    call_id=ctx.call_id, tool=tool.name, summary=summary, detail=tool.approval_detail(args, ctx),
                    reason=f"the sandbox ({ctx.sandbox}) refused {', '.join(refused)}; run it again outside the sandbox?"))
            rerun = reply.choice != "deny"
        waited = time.monotonic() - asked
        self.ui.emit(SandboxRefused(call_id=ctx.call_id, tool=tool.name, summary=summary, sandbox=ctx.sandbox,
                                    refused=refused, rerun=rerun))
        if not rerun:
            return out, waited
        again = self._context(ctx.call_id)
        again.sandbox, again.target, again.refusal = "off", ctx.target, ctx.refusal
        second = await tool.run(args, again)
        text = second.text if isinstance(second, ToolResult) else second
        return (f"{text}\n\n(ran outside the sandbox, approved by the user, after the sandboxed run was refused "
                f"{', '.join(refused)})"), waited
    def _command_secret(self, target: Target) -> str:
        """A secret file the command line would print through the file system (asked only
        when someone would be asked, so goal mode does not pay for the look)."""
        try:
            return command_secret(target.subjects[0], self.workspace, cwd=target.cwd,
                                  patterns=self.policy.secret_files, max_entries=self.limits.secret_scan_entries,
                                  max_secs=self.limits.secret_scan_secs)
        except Exception as e:  # a look that fails cannot clear the line: it is asked
            return f"files that could not be checked for secret files ({type(e).__name__})"

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
            out[i] = Message.tool(prepared[i].call.id, preview)
        return out

    def persist(self, call_id: str, text: str) -> str:
        """Save `text` in the session folder; returns the preview the model sees instead (or
        `text` itself when the preview would be no shorter: then nothing is saved)."""
        assert self.session.folder is not None
        from nanohermes import persisted

        path = persisted.free_path(self.session.folder, call_id)
        preview = persisted.aggregate_preview(path, text, self.limits.persisted_preview_chars)
        if len(preview) >= len(text):
            return text  # nothing gained: no file
        persisted.write(path, text)
        return preview
