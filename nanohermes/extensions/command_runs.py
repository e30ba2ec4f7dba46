"""What a command file does when it runs, beyond its prompt, as Claude Code runs it: its `!`
commands, its `allowed-tools` and its `model`.

- `` !`git status` `` (anywhere in the body, not after a letter, digit, `$` or backtick) and
  a fenced block opened with ` ```! ` are commands run before the prompt is sent; each is replaced by
  its output (stdout, or the whole result with the exit code and stderr when it failed or
  wrote to stderr), clamped to `command_file_output_chars`. Only the command file's own text
  runs: `$1` and `$ARGUMENTS` inside one are filled in, but the arguments and attached files
  themselves are never searched for commands. Each runs as the model's run_command runs,
  through the same gate (hooks, mode, rules, the sandbox, a person's yes where the rules ask);
  with nobody to ask, what the gate would ask about is not run. A project that is not trusted
  (`trusted_projects`) gets no command run unasked: each needs a person's yes, and with nobody
  to ask none runs. What did not run says why, in the prompt and to the person.
- `allowed-tools` (Claude Code's rules: `Bash(git add:*)`, `Read`, ...) become allow rules for
  that command's turn only, for a user's command or a trusted project's; an untrusted
  project's are ignored, with a note. They never reach a sub-agent the turn starts, and they
  come after deny rules, modes and protected writes, as every allow rule does.
- `model` is looked up by `model_names.choose` (aliases, the endpoint's list); a name the
  endpoint would refuse is ignored with a note, never a failed run.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nanohermes.common.budget import Limits, clamp
from nanohermes.common.events import UI, ApprovalReply, ApprovalRequest, Event, Notice, ToolProgress
from nanohermes.config.claude_files import translate_rule
from nanohermes.guard.gate import Gate, Refusal
from nanohermes.guard.permissions import Policy, Rule, blocked
from nanohermes.guard.permissions.rules import GRANT_ORIGIN
from nanohermes.guard.trust import is_trusted
from nanohermes.tools import ToolContext, ToolError, declarations

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.hooks.hooks import Hooks
    from nanohermes.tools import Tool
    from nanohermes.turn.agent import Agent
    from nanohermes.turn.runtime import Runtime
    from nanohermes.turn.session import Session

# Claude Code's two spellings of a command in a prompt. An inline one is not right after a
# letter, digit, `$` or backtick and does not start with a space, so prose about `!` itself
# ("type `!` then `ls`") runs nothing.
BLOCK = re.compile(r"```!\s*\n?(.*?)\n?```", re.S)
INLINE = re.compile(r"(?<![\w$`])!`([^`\s][^`]*)`")
_PLAIN = re.compile(r"\Aexit code: 0\n\nstdout:\n(.*)\n\nstderr:\n\(empty\)\Z", re.S)


@dataclass(frozen=True)
class Shell:
    """One `!` command of a command file: where its output goes in the prompt, and its line."""

    marker: str
    line: str


class CommandFile(Protocol):
    """What a run needs of a command file (`custom_commands.CommandFile`, prepared for one run)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def project(self) -> bool: ...

    @property
    def model(self) -> str | None: ...

    @property
    def allowed_tools(self) -> tuple[str, ...]: ...

    @property
    def shell(self) -> tuple[Shell, ...]: ...


def find_shell(body: str) -> tuple[str, list[Shell]]:
    """`body` with a marker in place of each `!` command, and the commands in order. The
    markers carry a random word, so no argument or attached file can spell one."""

    nonce = secrets.token_hex(6)
    found: list[Shell] = []

    def mark(m: re.Match[str]) -> str:
        marker = f"\u27e6!{nonce}:{len(found)}\u27e7"
        found.append(Shell(marker, m.group(1).strip()))
        return marker

    return INLINE.sub(mark, BLOCK.sub(mark, body)), found


def is_trusted_here(runtime: Runtime) -> bool:
    return is_trusted(runtime.workspace, list(runtime.config.trusted_projects))


def untrusted_note(runtime: Runtime) -> str:
    return (f"this project is not trusted; to allow it, add \"{runtime.workspace.resolve()}\" to trusted_projects in "
            "your config")


# -- allowed-tools -----------------------------------------------------------------------------
def grants(command: CommandFile, runtime: Runtime) -> tuple[tuple[Rule, ...], list[str]]:
    """The allow rules `command`'s allowed-tools grant for its turn, and notes on what is not
    granted and why."""
    if not command.allowed_tools:
        return (), []
    if command.project and not is_trusted_here(runtime):
        return (), [f"/{command.name}: allowed-tools ignored ({', '.join(command.allowed_tools)}): "
                    f"{untrusted_note(runtime)}"]

    kinds = {name: kind for name, (kind, _) in declarations().items()}
    root = os.path.realpath(runtime.workspace)
    origin = f"{GRANT_ORIGIN}{command.name} ({command.path}), for its turn"
    rules: list[Rule] = []
    notes: list[str] = []
    for text in command.allowed_tools:
        ours = translate_rule(text, "allow", runtime.workspace)
        if ours is None:
            notes.append(f"/{command.name}: allowed-tools entry {text!r} has no counterpart in nanohermes; ignored")
            continue
        for one in ours:
            try:
                rules.append(Rule.parse(one, origin=origin, kinds=kinds, root=root))
            except ValueError as e:
                notes.append(f"/{command.name}: allowed-tools entry {text!r}: {e}; ignored")
    return tuple(rules), notes


def without(policy: Policy, rules: tuple[Rule, ...]) -> Policy:
    """`policy` with exactly these rule objects taken out (a rule learned meanwhile stays)."""
    ids = {id(r) for r in rules}
    return replace(policy, allow=tuple(r for r in policy.allow if id(r) not in ids))


# -- the `!` commands --------------------------------------------------------------------------
@dataclass
class _MarkedUI:
    """The runtime's UI, with each question saying which command file asks it."""

    inner: UI
    why: str

    def emit(self, event: Event) -> None:
        self.inner.emit(event)

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        reason = f"{request.reason}; {self.why}" if request.reason else self.why
        return await self.inner.confirm(replace(request, reason=reason))


@dataclass
class _Host:
    """The gate's host for a command file's `!` commands: the runtime's session, policy and
    rules (an "always" answer is the session's), with its questions marked."""

    runtime: Runtime
    ui: UI
    config: Config
    workspace: Path
    limits: Limits
    hooks: Hooks | None

    @property
    def policy(self) -> Policy:
        return self.runtime.policy

    @policy.setter
    def policy(self, value: Policy) -> None:
        self.runtime.policy = value

    @property
    def session(self) -> Session:
        return self.runtime.session

    @property
    def confirm_lock(self) -> Any:
        return self.runtime.confirm_lock


@dataclass
class ShellRun:
    """Runs one command file's `!` commands for one run of it."""

    command: CommandFile
    runtime: Runtime
    emit: Callable[[Event], None]

    async def fill(self, prompt: str) -> str:
        """`prompt` with each marker replaced by its command's output (or why it did not run)."""
        for i, shell in enumerate(self.command.shell):
            prompt = prompt.replace(shell.marker, await self.one(i, shell.line))
        return prompt

    async def one(self, i: int, line: str) -> str:
        name = f"/{self.command.name}"
        runtime = self.runtime
        ran, text = await self._run(i, line)
        if not ran:
            self.emit(Notice(level="warning", text=f"{name}: `!{line}` not run: {text}"))
            return f"[`{line}` was not run: {text}]"
        self.emit(Notice(level="info", text=f"{name}: ran `!{line}`"))
        return clamp(text, runtime.limits.command_file_output_chars)

    async def _run(self, i: int, line: str) -> tuple[bool, str]:
        """(whether it ran, its output or why not)."""

        runtime = self.runtime
        if not line:
            return False, "it is empty"
        tool = next((t for t in runtime.tools if t.name == "run_command"), None)
        if tool is None:
            return False, "run_command is not among this session's tools"
        if why := blocked(runtime.policy, tool.name, tool.effect):
            return False, why
        untrusted = self.command.project and not is_trusted_here(runtime)
        if untrusted and not runtime.own_reader.can_ask():
            return False, f"a project's command runs its `!` commands unasked only in a trusted project, and nobody " \
                          f"is here to say yes; {untrusted_note(runtime)}"
        try:
            args = tool.parse({"command": line})
        except ToolError as e:
            return False, str(e)
        where = f"before the prompt of /{self.command.name} ({self.command.path}) is sent"
        host = _Host(runtime, _MarkedUI(runtime.ui, f"a `!` command of a command file, run {where}"),
                     runtime.config, runtime.workspace, runtime.limits, runtime.hooks)
        gate = Gate(host)
        ctx = ToolContext.of(runtime, f"command-{self.command.name}-{i + 1}", emit=self._quiet)
        summary = tool.summary(args)
        verdict = await gate.judge(tool, args, ctx, summary)
        if isinstance(verdict, Refusal):
            return False, self._refused(verdict, line)
        if untrusted and verdict.basis != "person" and not await self._asked(tool, line, ctx.call_id, where):
            return False, "you answered no (this project is not trusted, so each of its `!` commands is asked)"
        ran = await gate.attempt(tool, verdict, ctx)
        if ran.is_error:
            return False, ran.text.removeprefix("ERROR: ")
        plain = _PLAIN.match(ran.text)
        if plain is None:
            return True, ran.text
        return True, plain.group(1) if plain.group(1) != "(empty)" else "(no output)"

    def _refused(self, refusal: Refusal, line: str) -> str:
        """Why the gate's refusal kept the command from running."""
        if refusal.kind != "person":
            return refusal.reason
        if self.runtime.own_reader.asks:
            said = refusal.reason  # the person's note
            return "it needs approval, and the answer was no" + (f", with: {said}" if said else "")
        return (f"it needs approval, and nobody is here to give it; to let it run unasked, allow it in the command "
                f"file (allowed-tools: Bash({line.split()[0]}:*)), with a permissions.allow rule, or with --yes")

    def _quiet(self, event: Event) -> None:
        """What the command emits as it runs, but its progress lines: no front end shows a
        call here (the notices say what ran)."""
        if not isinstance(event, ToolProgress):
            self.emit(event)

    async def _asked(self, tool: Tool, line: str, call_id: str, where: str) -> bool:
        """A person's yes for an untrusted project's command the rules would let run."""
        if not self.runtime.own_reader.can_ask():
            return False
        reply = await self.runtime.confirm_own_read(ApprovalRequest(
            call_id=call_id, tool=tool.name, summary=line, detail=line, target=line,
            reason=f"a `!` command of a command file of this project, which is not trusted, run {where}"))
        return reply.choice != "deny"


@dataclass
class ShellFirst:
    """A turn hook for one run of a command: its `!` commands run as the turn starts (inside
    it, so an interrupt stops them), and their output goes into the prompt."""

    run: ShellRun

    async def prompt_submitted(self, prompt: str) -> str | None:
        return await self.run.fill(prompt)

    async def stopping(self, answer: str) -> str | None:
        return None

    async def settled(self, changing: bool = False) -> None:
        return None

    async def ended(self) -> None:
        return None


# -- the run -------------------------------------------------------------------------------------
async def run(agent: Agent, command: CommandFile, prompt: str,
              submit: Callable[[str], Awaitable[Any]] | None = None) -> Any:
    """One turn of `command` with `prompt`: on the model its `model` names, with its
    allowed-tools granted and its `!` commands run first, all for this turn only. `submit`:
    the front end's way to run a turn (default: agent.ask)."""
    # only a command file naming a model looks models up
    from nanohermes.llm.model_names import OrConfigured, choose, endpoint_lister

    runtime = agent.runtime
    say = agent.ui.emit
    llm = agent.llm
    old_model = llm.model
    if command.model:
        choice = await choose(command.model, aliases=runtime.config.model_aliases, listed=endpoint_lister(llm),
                              current=old_model)
        if choice.note:
            say(Notice(level="warning", text=f"/{command.name}: {choice.note}"))
        if choice.model:
            llm.model = choice.model
            agent.llm = OrConfigured(llm, old_model, lambda text: say(Notice(level="warning",
                                                                             text=f"/{command.name}: {text}")))
    rules, notes = grants(command, runtime)
    for note in notes:
        say(Notice(level="warning", text=note))
    hook = ShellFirst(ShellRun(command, runtime, say)) if command.shell else None
    if rules:
        runtime.policy = replace(runtime.policy, allow=(*runtime.policy.allow, *rules))
    if hook is not None:
        agent.turn_hooks.insert(0, hook)
    try:
        return await (submit or agent.ask)(prompt)
    finally:
        if hook is not None:
            agent.turn_hooks.remove(hook)
        if rules:
            runtime.policy = without(runtime.policy, rules)
        agent.llm = llm
        llm.model = old_model
