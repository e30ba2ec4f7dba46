"""The one owner of "may this call run, and how confined".

`Gate.judge(call)` weighs one parsed call and answers `Grant` or `Refusal`, changing nothing
(codex's orchestrator: approval, then the sandbox chosen, then the attempt). Its inputs: the
PreToolUse hooks' answer, the call's `Target` (resolved once, here, and handed to the tool),
the mode and rules (`permissions.decide`, which says on what basis it allows), whether the
tool says only a person may let this call run (`Tool.needs_person`), the secret files a
command would read, whether the sandbox can withhold every secret file, and, when
the rules ask, the person's answer (after the tool's own precheck, so nobody is asked to
approve a call that can only fail). A Grant carries its basis and the call's `Attempt`: the
Target, the finished confinement of the call's processes, and the checks the policy answers
while it runs (a redirect's host, the read rules inside what it walks):

| basis | confinement |
| --- | --- |
| person (a yes at the prompt), bypass (--dangerously-skip-permissions) | none |
| read-only (built-in read-only commands, reading tools) and tool (no approval needed) | read-only |
| rule, mode (accept-edits), unattended (--yes, goal, auto_approve), hook | workspace-write |

with `sandbox.mode: off` turning every confinement off; the sandbox owns that mapping
(`sandbox.confine`, its `POLICY_OF`). `Gate.attempt(grant)` runs the tool with that attempt;
when the sandbox refused something (`sandbox.Refused`), it asks once (goal mode does not
wait) and, on a yes, runs the call again in another attempt, outside the sandbox.

A Refusal is a value: by what (`kind`, a `permissions.Denial`), on what, why, and the setting
that would allow it; its text is the call's result for the model.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from nanohermes.common.budget import Limits
from nanohermes.common.events import UI, ApprovalReply, ApprovalRequest, Notice, PermissionDenied, SandboxRefused
from nanohermes.common.messages import Image
from nanohermes.common.modes import Mode
from nanohermes.guard.pathrules import command_read_rule, command_secret
from nanohermes.guard import permissions
from nanohermes.guard.permissions import Basis, Denial, Policy, Rule, Target, Verdict, unattended
from nanohermes.tools.base import Attempt, Params, Tool, ToolContext, ToolError, ToolResult
from nanohermes.common.dirs import project_config_path
from nanohermes.guard.gitmeta import git_dirs
from nanohermes.guard.trust import remember, save_project_rules

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.hooks.conversation import Conversation
    from nanohermes.hooks.hooks import Hooks, PreToolUse
    from nanohermes.guard.sandbox import Confinement

# A refused call's result. With the person's note, the note is the instruction instead.
DENIED_PREFIX = "Denied by the user"
DENIED = DENIED_PREFIX + ". Do not retry it; ask what to do instead."


def denied(note: str = "") -> str:
    """The result of a refused call: the person's note, when they gave one, says what to do."""
    if not note:
        return DENIED
    return f"{DENIED_PREFIX}, who said: {note}\nDo not retry the call as it was; follow what they said."


@dataclass(frozen=True)
class Grant:
    """The call may run: on this basis, with these (perhaps hook-rewritten) arguments, in this
    attempt (the Target it was judged on, its processes' confinement: None for a tool that
    starts none)."""

    basis: Basis
    args: Params
    attempt: Attempt
    summary: str
    waited: float = 0.0  # seconds spent waiting for the person

    @property
    def target(self) -> Target:
        """What the call was judged on (a Grant's attempt always holds it)."""
        target = self.attempt.target
        assert target is not None, "a Grant is made with the judged Target"
        return target


# The setting that would let a refused call run, by what refused it.
_ALLOWED_BY: dict[str, str] = {
    "rule": "the rules in permissions.deny (read rules: permissions.ask too), disallowed_tools and allowed_tools",
    "mode": "another permission mode (--mode, or Shift+Tab in the REPL)",
    "plan": "leaving plan mode (--mode, or Shift+Tab in the REPL)",
    "protected": "a person's yes at the prompt, in a mode that writes and a run that asks (no --yes or goal mode)",
    "unattended": "a run that asks (no --yes or goal mode), or --dangerously-skip-permissions",
    "hook": "the PreToolUse hook's answer (hooks)",
    "person": "",
    "error": "",
}


@dataclass(frozen=True)
class Refusal:
    """The call does not run: refused by what (`kind`, see `permissions.Denial`), why (`reason`:
    the rule, the mode, the error; a person's note for a person's no) and on what (`subject`:
    what the call touches, as shown; "" when it could not be told). `str()` is its result for
    the model; `allow` the setting that would let it run."""

    kind: Denial
    reason: str
    subject: str = ""
    waited: float = 0.0

    @property
    def is_error(self) -> bool:
        """A person's no is an answer the model reads, not an error."""
        return self.kind != "person"

    @property
    def allow(self) -> str:
        return _ALLOWED_BY[self.kind]

    def __str__(self) -> str:
        return denied(self.reason) if self.kind == "person" else f"ERROR: {self.reason}"


@dataclass(frozen=True)
class Ran:
    """What a call's run gave, as the runtime takes it from the gate."""

    text: str
    is_error: bool
    display: str | None
    waited: float
    images: tuple[Image, ...] = ()  # what the tool returned for a model that takes images


class Host(Protocol):
    """What the gate judges and runs calls for (the runtime): the session's policy, which
    "always" answers change, the session whose folder holds files the model may read back
    (saved results, pastes), the front end that answers questions, and the hooks."""

    policy: Policy
    config: Config
    workspace: Path
    ui: UI
    limits: Limits
    hooks: Hooks | None

    @property
    def session(self) -> Conversation: ...

    @property
    def confirm_lock(self) -> asyncio.Lock: ...


@dataclass
class Gate:
    """May this call run, and how confined: judges each call, then runs it as judged."""

    host: Host

    @property
    def policy(self) -> Policy:
        """The session's policy, with this session's own folder readable to the file tools."""
        policy = self.host.policy
        folder = self.host.session.folder
        if folder is None or not policy.own_secrets:
            return policy
        return replace(policy, own_readable=(os.path.realpath(folder),))

    @property
    def config(self) -> Config:
        return self.host.config

    @property
    def workspace(self) -> Path:
        return self.host.workspace

    @property
    def ui(self) -> UI:
        return self.host.ui

    @property
    def limits(self) -> Limits:
        return self.host.limits

    @property
    def confirm_lock(self) -> asyncio.Lock:
        return self.host.confirm_lock

    # -- judging -----------------------------------------------------------------------------
    def foresee(self, tool: Tool) -> None:
        """A call of `tool` is coming (the model's answer is in, and the turn is about to run
        it): when its processes may be confined, what confining them first needs starts now in
        a background thread (once per process): the sandbox's probe (processes of its own), then
        the first look for the workspace's secret files (the slow one: later looks check only
        what changed). They run while the turn does what comes before the call (the
        checkpoint's scan, loading the tool, judging it) rather than after. Only a head start:
        the call is judged and confined as ever, each step waiting for what this began."""
        if not tool.spawns or self.config.sandbox.mode == "off" or self.host.policy.skip_permissions:
            return
        if not _foreseen.is_set():
            _foreseen.set()
            threading.Thread(target=_ready_sandbox, args=(self.workspace, self.host.policy.secret_files, self.limits),
                             name="sandbox-ready", daemon=True).start()

    async def judge(self, tool: Tool, args: Params, ctx: ToolContext, summary: str) -> Grant | Refusal:
        """May this call run, and how confined? A Grant holds the call's Attempt; the context
        is not touched."""
        self._sweep()  # what running background tasks planted is gone before anything is judged
        hooks = self.host.hooks
        hooked = await hooks.pre_tool_use(tool, args, ctx.call_id) if hooks is not None else None
        if hooked is not None:  # a hook may refuse the call or rewrite it; the rules then judge the result
            if hooked.refusal is not None:
                return self._refuse(ctx, tool, summary, Refusal("hook", hooked.refusal.removeprefix("ERROR: "),
                                                                _named(tool, args)))
            args, summary = hooked.args, tool.summary(hooked.args)  # an approval shows what will run
        target = await self._target(tool, args, ctx)
        if isinstance(target, Refusal):
            return target
        attempt = Attempt(target=target, redirect=self._redirect_check(tool, args),
                          read_rule=self._read_rule(tool, target))
        verdict = self._verdict(tool, args, ctx, target, hooked)
        if verdict.decision == "deny":
            return self._refuse(ctx, tool, summary, Refusal(verdict.denied_by, verdict.reason, target.shown))
        if verdict.decision == "allow":
            try:
                confinement = await self._confinement(tool, target, verdict.basis)
            except _CannotWithhold as e:
                verdict = Verdict("ask", f"{e}, so the sandbox cannot withhold every secret file "
                                         "(permissions.secret_files) from it; a yes runs it outside the sandbox", None)
            else:
                return Grant(verdict.basis, args, replace(attempt, confinement=confinement), summary)
        return await self._ask(tool, args, ctx, summary, attempt, verdict)

    async def _target(self, tool: Tool, args: Params, ctx: ToolContext) -> Target | Refusal:
        """The call's Target: once per call, off the loop (a host's addresses come from the
        resolver); the verdict and the tool both use this one. A Refusal when it cannot be told."""
        try:
            target = await asyncio.to_thread(tool.target, args, ctx)
            target = replace(target, protected=target.protected or tool.protected(args, ctx))
        except ToolError as e:  # a subject that cannot be judged: a clear error, before any question
            return Refusal("error", str(e))
        except Exception as e:  # a tool whose declaration fails cannot be judged: refused, not guessed
            return Refusal("error", f"{tool.name} cannot say what this call touches ({type(e).__name__}: {e}); "
                                    "the call was refused")
        if target.kind == "command" and target.subjects:
            target = await self._command_facts(target)
        return target

    async def _command_facts(self, target: Target) -> Target:
        """A command line's Target with what the file system says of it: the secret file it
        would print, and the path a read rule covers that it reads."""
        if not unattended(self.policy):
            target = replace(target, secret_read=await asyncio.to_thread(self._command_secret, target))
        if rules := permissions.policy_read_rules(self.policy):
            # A path a read rule covers that the line names is refused or asked; one inside a
            # folder it reads whole is withheld by the sandbox, or found here where there is none.
            folders = not await asyncio.to_thread(self.policy.is_sandboxed)
            target = replace(target, rule_read=await asyncio.to_thread(
                command_read_rule, target.subjects[0], self.workspace, rules, cwd=target.cwd, folders=folders,
                max_entries=self.limits.secret_scan_entries, max_secs=self.limits.secret_scan_secs))
        return target

    def _verdict(self, tool: Tool, args: Params, ctx: ToolContext, target: Target,
                 hooked: PreToolUse | None) -> Verdict:
        """The rules' verdict, with the hooks' answer applied and a call only a person may let
        run asked of one."""
        verdict = permissions.decide(self.policy, tool_name=tool.name, approval=tool.approval_for(args), target=target)
        verdict = hooked.adjust(verdict) if hooked is not None else verdict
        # --dangerously-skip-permissions is a person's yes given in advance, to this call too.
        if verdict.decision != "deny" and not self.policy.skip_permissions and \
                (why := tool.needs_person(args, ctx)) is not None:
            verdict = person_only(why, unattended=unattended(self.policy))
        return verdict

    def _refuse(self, ctx: ToolContext, tool: Tool, summary: str, refusal: Refusal) -> Refusal:
        """A call refused without asking anyone: the front ends are told, by the refusal's fields."""
        self.ui.emit(PermissionDenied(call_id=ctx.call_id, tool=tool.name, summary=summary, reason=refusal.reason,
                                      target=refusal.subject, kind=refusal.kind, allow=refusal.allow))
        return refusal

    async def _confinement(self, tool: Tool, target: Target, basis: Basis) -> Confinement | None:
        """The finished confinement of an allowed call's processes. Secret files are withheld
        from every sandboxed command, but not from a line an allow rule spelling it out let
        read one (what "always" to that question learns). Where they cannot all be withheld, a
        workspace-write command is asked (`_CannotWithhold`), or with nobody to ask refused by
        the sandbox itself."""
        if not tool.spawns:
            return None
        spelled_out = target.kind == "command" and target.subjects and basis == "rule" and (
            target.secret_read or self._names_secret(target.subjects[0]))
        conf = await asyncio.to_thread(self._confine, basis, withhold=not spelled_out)
        if conf.policy == "workspace-write" and conf.unhidden and not unattended(self.policy) \
                and target.kind == "command":
            raise _CannotWithhold(conf.unhidden)
        return conf

    def _confine(self, basis: str, *, withhold: bool = True) -> Confinement:
        """The sandbox's confinement for `basis` (or a policy named outright), this session's
        secret files withheld unless `withhold` is False."""
        from nanohermes.guard import sandbox  # here: a turn that runs no command loads no sandbox

        return sandbox.confine(basis, workspace=self.workspace, config=self.config, limits=self.limits,
                               secret_patterns=self.policy.secret_files, withhold=withhold)

    async def _ask(self, tool: Tool, args: Params, ctx: ToolContext, summary: str, attempt: Attempt,
                   verdict: Verdict) -> Grant | Refusal:
        """The person's answer, once the call's own checks pass: a Grant on basis person, or a
        Refusal of kind person. The check is skipped when reading the file is what needs the
        yes (a secret file, a read rule that asks): its error would quote the file (an edit's
        near miss) before anyone answered."""
        if not permissions.reading_asked(self.policy, tool.name, _judged(attempt)) and \
                (failed := await self._precheck(tool, args, ctx, attempt)) is not None:
            return failed
        learn = list(verdict.suggest or ()) or ([tool.suggest_rule(args)] if verdict.suggest is not None else [])
        self._sweep()
        reason = self._why_asked(tool, verdict.reason)
        try:
            detail = await _detail(tool, args, ctx, attempt)
        except ToolError as e:
            return Refusal("error", str(e))
        except Exception as e:  # what the person would approve cannot be shown: nobody is asked, nothing runs
            return Refusal("error", f"{tool.name} cannot show what this call would do ({type(e).__name__}: {e}); "
                                    "nothing was run; try again")
        target = _judged(attempt)
        asked = time.monotonic()
        async with self.confirm_lock:  # one prompt at a time, even for parallel calls
            if (granted := await self._answered(tool, args, summary, attempt, learn)) is not None:
                return granted
            reply = await self.ui.confirm(ApprovalRequest(
                call_id=ctx.call_id, tool=tool.name, summary=summary, detail=detail,
                rule=", ".join(map(str, learn)), reason=reason, target=target.shown))
        return self._answer(tool, args, summary, attempt, learn, reply, waited=time.monotonic() - asked)

    async def _precheck(self, tool: Tool, args: Params, ctx: ToolContext, attempt: Attempt) -> Refusal | None:
        """A call that can only fail fails now, with the tool's own error: nobody is asked in
        vain. Nothing is approved yet, so what the check starts runs read-only."""
        checking = replace(attempt, confinement=await asyncio.to_thread(self._confine, "read-only")) \
            if tool.spawns else attempt
        try:
            await tool.precheck(args, ctx, checking)
        except ToolError as e:
            return Refusal("error", str(e))
        except Exception:  # a check that breaks knows nothing: the person is asked, and the run reports
            pass
        return None

    def _why_asked(self, tool: Tool, reason: str) -> str:
        """Why the person is asked, and what a yes would run that commands nobody approved
        left on PATH: a yes runs this outside the sandbox, where such a program would run as
        the person."""
        if tool.spawns and (tainted := _tainted()):
            reason += (f"; warning: commands nobody approved created or changed programs on PATH: "
                       f"{', '.join(tainted)} (a yes runs this outside the sandbox, and it would run them if it "
                       "names them)")
        return reason

    async def _answered(self, tool: Tool, args: Params, summary: str, attempt: Attempt,
                        learn: list[Rule]) -> Grant | None:
        """A parallel call's "always" may have answered this one meanwhile: it then runs as
        that rule lets it, confined as every call a rule allows, never as a person's yes."""
        if not learn or not all(rule in self.policy.allow for rule in learn):
            return None
        target = _judged(attempt)
        now = permissions.decide(self.policy, tool_name=tool.name, approval=tool.approval_for(args), target=target)
        if now.decision != "allow" or now.basis != "rule":
            return None
        try:
            confinement = await self._confinement(tool, target, "rule")
        except _CannotWithhold:
            return None  # asked, as judge asks such a call
        return Grant("rule", args, replace(attempt, confinement=confinement), summary)

    def _answer(self, tool: Tool, args: Params, summary: str, attempt: Attempt, learn: list[Rule],
                reply: ApprovalReply, *, waited: float) -> Grant | Refusal:
        """The person's reply: a no refuses, a yes runs unconfined, "always" remembers the rule."""
        if reply.choice == "deny":
            return Refusal("person", reply.note, _judged(attempt).shown, waited=waited)
        if reply.choice == "always":
            for rule in learn:
                self.remember(rule)
        elif reply.choice == "project" and learn:
            self.remember_in_project(learn)
        confinement = self._confine("person") if tool.spawns else None
        return Grant("person", args, replace(attempt, confinement=confinement), summary, waited=waited)

    def _sweep(self) -> None:
        if "nanohermes.guard.sandbox" not in sys.modules:
            return  # nothing has run confined yet, so nothing is watched
        # the sandbox (ctypes, the probe): only a turn that confined a command
        from nanohermes.guard.sandbox import sweep_plants

        for found in sweep_plants():
            self.ui.emit(Notice(level="warning", text=f"a running background task: {found}"))

    def _redirect_check(self, tool: Tool, args: Params) -> Callable[[Target], str | None]:
        """For a tool that reaches a further target mid-call (a redirect to another host):
        why the policy would not let it through unasked, or None."""
        def refusal(target: Target) -> str | None:
            v = permissions.decide(self.policy, tool_name=tool.name, approval=tool.approval_for(args), target=target)
            if v.decision == "allow":
                return None
            return v.reason if v.decision == "deny" else f"it needs approval ({v.reason})"
        return refusal

    def _read_rule(self, tool: Tool, target: Target) -> Callable[[str], str | None] | None:
        """For a path tool or a reading one (git_status lists paths): which read rule withholds a
        path the call reaches (see `Attempt.read_rule`)."""
        if tool.kind != "path" and tool.effect != "read":
            return None
        rules = permissions.policy_read_rules(self.policy, tool.name).answered((*target.subjects, *target.aliases))
        if not rules:
            return None

        def rule_of(subject: str) -> str | None:
            hit = rules.covering(subject)
            return None if hit is None else str(hit[1])
        return rule_of

    def _names_secret(self, line: str) -> bool:
        # the shell analysis: at the first command line judged
        from nanohermes.guard.shellparse import ParseError, split

        try:
            return any(permissions.reads_secret(cmd, self.policy.secret_files) for cmd in split(line))
        except ParseError:
            return False

    def _command_secret(self, target: Target) -> str:
        """A secret file the command line would print through the file system (asked only
        when someone would be asked, so goal mode does not pay for the look)."""
        try:
            return command_secret(target.subjects[0], self.workspace, cwd=target.cwd,
                                  patterns=self.policy.secret_files, max_entries=self.limits.secret_scan_entries,
                                  max_secs=self.limits.secret_scan_secs, own=self.policy.own_secrets)
        except Exception as e:  # a look that fails cannot clear the line: it is asked
            return f"files that could not be checked for secret files ({type(e).__name__})"

    # -- remembering -------------------------------------------------------------------------
    def remember(self, rule: Rule, origin: str = "learned this session") -> None:
        """An "always" answer: allowed for the rest of the session, whatever the mode."""
        self.host.policy = remember(self.host.policy, rule, origin)

    def remember_in_project(self, rules: Sequence[Rule]) -> None:
        """"Always for this project": remembered now and written to the project config."""
        try:
            path = save_project_rules(self.workspace, rules)
        except (OSError, ValueError) as e:
            for rule in rules:
                self.remember(rule)
            self.ui.emit(Notice(level="warning", text=f"could not save to {project_config_path(self.workspace)} ({e}); "
                                                      "remembered for this session only"))
            return
        for rule in rules:
            self.remember(rule, f"learned, saved to {path}")
        self.ui.emit(Notice(level="info", text=f"saved {', '.join(map(str, rules))} to {path}"))

    # -- running -----------------------------------------------------------------------------
    async def attempt(self, tool: Tool, grant: Grant, ctx: ToolContext) -> Ran:
        """Run the granted call in its attempt; on a sandbox refusal, ask once whether to run
        it again outside the sandbox."""
        waited = grant.waited
        try:
            out = await tool.run(grant.args, ctx, grant.attempt)
            if isinstance(out, ToolResult) and out.refused:
                out, asked = await self._refused(tool, grant, ctx, out)
                waited += asked
        except ToolError as e:
            return Ran(f"ERROR: {e}", True, None, waited)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a tool bug must not end the turn
            if _sandbox_failed(e):
                return Ran(f"ERROR: {e}; the command did not run. `nanohermes doctor` shows what the sandbox needs",
                           True, None, waited)
            return Ran(f"ERROR: {tool.name} failed unexpectedly: {type(e).__name__}: {e}", True, None, waited)
        if isinstance(out, ToolResult):
            return Ran(out.text, False, out.display, waited, out.images)
        return Ran(out, False, None, waited)

    async def _refused(self, tool: Tool, grant: Grant, ctx: ToolContext,
                       out: ToolResult) -> tuple[str | ToolResult, float]:
        """The sandbox refused something: offer the person to run the same call outside it
        (one keypress, like any approval); without one the model is told it needs a person."""
        # the sandbox: only when it refused a command
        from nanohermes.guard.sandbox import remedies

        refused = out.refused
        conf = grant.attempt.confinement
        policy = conf.policy if conf is not None else "off"
        said = ", ".join(map(str, refused))
        rerun = False
        asked = time.monotonic()
        if self.policy.mode != Mode.GOAL:  # goal mode runs unattended: nobody to wait for
            async with self.confirm_lock:
                reply = await self.ui.confirm(ApprovalRequest(
                    call_id=ctx.call_id, tool=tool.name, summary=grant.summary,
                    detail=await _detail(tool, grant.args, ctx, grant.attempt),
                    reason=f"the sandbox ({policy}) refused {said}; run it again outside the sandbox?",
                    rerun=True, hint=remedies(refused), target=grant.target.shown, sandbox=policy, refused=refused))
            rerun = reply.choice != "deny"
        waited = time.monotonic() - asked
        self.ui.emit(SandboxRefused(call_id=ctx.call_id, tool=tool.name, summary=grant.summary, sandbox=policy,
                                    refused=refused, rerun=rerun))
        if not rerun:
            return out, waited
        outside = replace(grant.attempt, confinement=self._confine("person"))
        second = await tool.run(grant.args, ctx, outside)
        text = second.text if isinstance(second, ToolResult) else second
        return (f"{text}\n\n(ran outside the sandbox, approved by the user, after the sandboxed run was refused "
                f"{said})"), waited


async def _detail(tool: Tool, args: Params, ctx: ToolContext, attempt: Attempt) -> str:
    """What the person is shown to approve, made in a worker thread as the call's run is: a
    file tool's preview reads the file as the run will (an editor's buffer is read only from
    there), and a big diff keeps the loop free."""
    return await asyncio.to_thread(tool.approval_detail, args, ctx, attempt)


def _sandbox_failed(e: Exception) -> bool:
    """Is `e` the sandbox's own error (a command it could not confine)? Asked without loading
    the sandbox (ctypes, the probe): only a sandbox that is loaded raises its error, and a turn
    that confines no command never loads it."""
    kernel = sys.modules.get("nanohermes.guard.sandbox.kernel")
    return kernel is not None and isinstance(e, kernel.SandboxError)


def _judged(attempt: Attempt) -> Target:
    """The Target of an attempt the gate made (it always holds one)."""
    assert attempt.target is not None, "the gate's attempts hold the judged Target"
    return attempt.target


# Set once the sandbox was readied early (`Gate.foresee`): once per process.
_foreseen = threading.Event()


def _ready_sandbox(workspace: Path, secret_files: tuple[str, ...], limits: Limits) -> None:
    try:
        # the sandbox (ctypes, the probe) and the secret files' look: only a turn about to run a command
        from nanohermes.guard.sandbox import probe
        from nanohermes.guard.withhold import look

        probe()
        look(workspace, secret_files, limits)  # fills the per-folder cache the call's own look then checks
    except Exception:  # the call's own probe and look, when it is judged, run again and report it
        pass


def _tainted() -> list[str]:
    if "nanohermes.guard.sandbox" not in sys.modules:
        return []  # nothing has run confined yet
    # the sandbox: only a turn that confined a command
    from nanohermes.guard.sandbox import tainted_programs

    return tainted_programs()


class _CannotWithhold(Exception):
    """The secret files' look was incomplete: a program no person approved may not run."""


def person_only(why: str, *, unattended: bool) -> Verdict:
    """The verdict on a call only a person's yes may let run (`Tool.needs_person`): asked every
    time, or refused when nobody is asked."""
    if unattended:
        return Verdict("deny", f"{why}; only a person's yes lets it run, and this run asks nobody (--yes or goal "
                               "mode), so it is refused", denied_by="unattended")
    return Verdict("ask", why, None)


def writable_roots(workspace: Path, config: Config) -> list[Path]:
    """Every folder a sandboxed command of this session may write: the workspace, the git
    folders it commits into, `extra_write_roots` and `sandbox.writable_roots`."""
    extra = (*config.extra_write_roots, *config.sandbox.writable_roots)
    return [workspace, *git_dirs(workspace), *(Path(os.path.expanduser(r)) for r in extra)]


def _named(tool: Tool, args: Params) -> str:
    """What a call names, as written (before its Target is computed): its paths, command or URL."""
    try:
        return ", ".join(tool.subjects(args)) if tool.kind in ("path", "command", "host") else ""
    except Exception:  # a subject that cannot even be read names nothing
        return ""
