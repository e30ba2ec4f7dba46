"""What the core tells its front ends, and the one thing it asks them.

The core emits frozen events and never renders; the REPL, `-p text`, `-p json` and
`-p stream-json` are consumers of the same stream. Approval is the single request/reply
seam: `await ui.confirm(request)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from nanohermes.common.messages import Message, Usage


class Refused(Protocol):
    """One thing the sandbox refused a call, as events carry it (the sandbox's `Refused` is one;
    a protocol here, since the vocabulary every layer shares imports no layer above it)."""

    @property
    def kind(self) -> str: ...

    @property
    def subject(self) -> str: ...

    @property
    def allow(self) -> str: ...  # the settings that would let it through


@dataclass(frozen=True, kw_only=True)
class ModelStarted:
    """A request to the model is on its way (front ends show a spinner)."""

    turn: int
    model: str


@dataclass(frozen=True, kw_only=True)
class TextDelta:
    """A piece of the answer as it streams in."""

    text: str


@dataclass(frozen=True, kw_only=True)
class TextPending:
    """A piece of a reply's first text not yet known to be answer or thinking (the reply may
    begin inside thinking whose opening tag the template put in the prompt, `llm.thinktags`):
    a front end may show it for now; the same text follows as a TextDelta or a ReasoningDelta
    once it is known."""

    text: str


@dataclass(frozen=True, kw_only=True)
class ReasoningDelta:
    """A piece of the model's thinking: front ends show it apart (dimmed, folded), never as
    part of the answer."""

    text: str


@dataclass(frozen=True, kw_only=True)
class ToolStarted:
    """A tool call begins (before it is judged): front ends show it with its one-line summary."""

    call_id: str
    name: str
    arguments: dict[str, Any] | str  # parsed when valid, raw text otherwise
    summary: str  # one line for display: the command, the path, the pattern


@dataclass(frozen=True, kw_only=True)
class ToolRunning:
    """A judged call begins to run (allowed, or approved): what was pending is under way."""

    call_id: str
    name: str


@dataclass(frozen=True, kw_only=True)
class ToolProgress:
    """Something a running call has to show before it ends: an output line, bytes so far."""

    call_id: str
    name: str
    text: str  # an output line, or a status such as "1.2 MB so far"
    elapsed: float


@dataclass(frozen=True, kw_only=True)
class ToolFinished:
    """A call ended: its result as the model reads it, and how long it took."""

    call_id: str
    name: str
    result: str  # exactly what the model sees (clamped)
    is_error: bool
    elapsed: float
    display: str | None = None  # richer view for people: a unified diff of an edit


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """A call that waits for a person's yes (`UI.confirm`), with what they need to decide."""

    call_id: str
    tool: str
    summary: str  # the exact command, or "edit path"
    detail: str = ""  # a diff or the full command text
    rule: str = ""  # the rule "always" would remember, e.g. run_command(git log --oneline <args>)
    reason: str = ""  # why it is asked: "runs a shell command", "writes outside the workspace"
    agent: str = ""  # set when a sub-agent asks: its name and id, e.g. "explore agent-1"
    # The sandbox refused the call, which already ran: a yes runs it again outside the sandbox.
    rerun: bool = False
    hint: str = ""  # what else would let it through, for a refusal with nobody to ask
    sandbox: str = ""  # for a rerun: the policy the call ran under
    refused: tuple[Refused, ...] = ()  # for a rerun: what the sandbox refused
    target: str = ""  # what the call touches: its paths, its command line, its host ("" when none)
    # What the yes means, when it is more than "yes, once" ("Yes, read it; remembered for this
    # project"), and whether a no asks for a note: a question no model asked has nobody to read one.
    yes: str = ""
    note: bool = True


@dataclass(frozen=True, kw_only=True)
class UsageUpdate:
    """The tokens of a model call, and of the session so far."""

    usage: Usage  # this model call
    total: Usage  # the session so far
    model: str


@dataclass(frozen=True, kw_only=True)
class Notice:
    """A line for people: a warning, an error or information, never part of the answer."""

    level: Literal["info", "warning", "error"]
    text: str


@dataclass(frozen=True, kw_only=True)
class TurnEnded:
    """The turn is over: why, how many model calls and tool calls it took, and its answer."""

    reason: Literal["completed", "max_turns", "interrupted", "error"]
    turns: int  # model calls in this turn
    tool_calls: int
    text: str  # the final answer (may be empty)
    interrupted_calls: int = 0  # calls answered "interrupted by user" when the turn was cancelled


@dataclass(frozen=True, kw_only=True)
class TodoItem:
    """One item of the session's todo list."""

    content: str
    status: Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True, kw_only=True)
class TodoUpdated:
    """The session's todo list after a todo_write replaced it (front ends show it)."""

    items: tuple[TodoItem, ...]


@dataclass(frozen=True, kw_only=True)
class SandboxRefused:
    """The OS sandbox refused something a call tried (its result says what to do)."""

    call_id: str
    tool: str
    summary: str  # the command line
    sandbox: str  # the policy it ran under
    refused: tuple[Refused, ...]  # a write to /path, a network connection (`str()` says it)
    rerun: bool = False  # a person approved running it again outside the sandbox


@dataclass(frozen=True, kw_only=True)
class PermissionDenied:
    """A call the mode, the tool lists, a deny rule or a hook refused without asking anyone
    (its result tells the model why)."""

    call_id: str
    tool: str
    summary: str  # the call in one line, as its tool shows it
    reason: str
    target: str = ""  # what the call would have touched: its paths, its command line, its host
    kind: str = "rule"  # what refused it (`permissions.Denial`): rule, mode, plan, protected, unattended, hook
    allow: str = ""  # the setting that would let it run


@dataclass(frozen=True, kw_only=True)
class MessageAdded:
    """A message joined the conversation: the prompt, the model's answer with its tool calls,
    each tool's result as the model reads it (stream-json prints them whole)."""

    message: Message


@dataclass(frozen=True, kw_only=True)
class FilesChanged:
    """The workspace paths a turn's tools and commands changed, once the turn is over (what
    /undo would take back; not the person's own edits between turns)."""

    turn: int  # the checkpoint's turn number in the session
    paths: tuple[str, ...]
    # Those of them that run code later without anyone typing their name (a git hook, a CI
    # workflow, package scripts, a Makefile, ...), each as `path: why` (`nanohermes.guard.runs_later`).
    runs_later: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SubagentEvent:
    """An event of a sub-agent, wrapped so front ends show it nested and never mistake it
    for the main agent's (its text is not the answer, its turn end is not the run's)."""

    agent_id: str
    agent: str  # the configured sub-agent name
    event: Event  # a sub-agent's own sub-agents nest once more


Event = (ModelStarted | TextDelta | TextPending | ReasoningDelta | ToolStarted | ToolRunning | ToolProgress | ToolFinished | ApprovalRequest
         | UsageUpdate | Notice | TurnEnded | TodoUpdated | SandboxRefused | PermissionDenied | MessageAdded
         | FilesChanged | SubagentEvent)

@dataclass(frozen=True, kw_only=True)
class ElicitationRequest:
    """An MCP server asks the person for input during a tool call: a form (`schema`, a flat
    JSON schema of strings, numbers, booleans and choices) or a page to visit (`url`)."""

    server: str
    message: str
    schema: dict[str, Any] = field(default_factory=dict)
    url: str = ""


@dataclass(frozen=True)
class ElicitationReply:
    """The person's answer to an MCP server's question."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] = field(default_factory=dict)  # with "accept": the form's values


class Elicits(Protocol):
    """A front end that can put a server's questions to a person (the REPL). One that cannot
    (`-p`) does not have `elicit`, and the question is declined."""

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply: ...


# "project": always, and saved to the project config for later sessions.
Choice = Literal["once", "always", "deny", "project"]


@dataclass(frozen=True)
class ApprovalReply:
    """The person's answer to an approval request."""

    choice: Choice
    note: str = ""  # with "deny": passed on to the model
    # With "deny": the person stopped the turn that asked (Esc or Ctrl-C at the question): a
    # sub-agent's run stops as the main turn does.
    stop: bool = False


class UI(Protocol):
    def emit(self, event: Event) -> None: ...

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply: ...


class NullUI:
    """Drops events and refuses approvals: the safe stand-in when nobody can answer."""

    def emit(self, event: Event) -> None:
        pass

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        return ApprovalReply("deny")


@dataclass
class RecordingUI:
    """Keeps every event and answers approvals from a queue; for tests and embedding."""

    answers: list[ApprovalReply | Choice] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def emit(self, event: Event) -> None:
        self.events.append(event)

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        self.events.append(request)
        if not self.answers:
            return ApprovalReply("deny")
        a = self.answers.pop(0)
        return a if isinstance(a, ApprovalReply) else ApprovalReply(a)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def event_to_dict(event: Event) -> dict[str, Any]:
    """The stream-json form: {"type": "tool_finished", ...fields}."""
    if isinstance(event, SubagentEvent):
        return {"type": "subagent_event", "agent_id": event.agent_id, "agent": event.agent,
                "event": event_to_dict(event.event)}
    name = type(event).__name__
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    d = asdict(event)
    if isinstance(event, (SandboxRefused, ApprovalRequest)):  # the sandbox's refusals as people read them
        d["refused"] = [str(r) for r in event.refused]
    if isinstance(event, UsageUpdate):
        d["usage"] = event.usage.to_dict()
        d["total"] = event.total.to_dict()
    return {"type": snake, **d}
