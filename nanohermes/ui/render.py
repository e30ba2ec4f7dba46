"""Events and REPL facts as rich renderables: pure functions, no I/O, snapshot-tested.

The REPL decides when to print; this module decides what it looks like. Everything fits 80
columns: one-line summaries are cut with an ellipsis, long outputs are folded with a count of
the hidden lines, diffs are coloured line by line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from nanohermes.common.budget import Limits, plural
from nanohermes.common.events import (
    ApprovalRequest,
    ElicitationRequest,
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
    TodoUpdated,
    ToolFinished,
    ToolProgress,
    ToolRunning,
    ToolStarted,
    TurnEnded,
    UsageUpdate,
)
from nanohermes.guard.redact import redact, settle
from nanohermes.llm.thinktags import message_parts
from nanohermes.ui import visible
from nanohermes.ui.visible import escape_controls

if TYPE_CHECKING:
    from nanohermes.common.messages import Message
    from nanohermes.tools import Tool

PREVIEW_LINES = 4  # result lines shown under a tool call
ERROR_LINES = 6  # error lines shown under a failed call
DIFF_LINES = 60  # diff lines shown for an edit or in an approval prompt
DETAIL_LINES = 200  # command or detail lines shown in an approval prompt (then a count of the rest)
LINE_CHARS = 200  # any single folded line


def fold(text: str, max_lines: int, *, style: str = "", indent: str = "  ", wrap: bool = False) -> Text:
    """The first `max_lines` lines, then `… N more lines` when some were hidden. Control
    characters are shown escaped, never acted on; a line over LINE_CHARS is cut with a
    count of what was cut, or (`wrap`, for what a person approves) shown whole."""
    text = visible.escape_controls(redact(text))
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    out = Text()
    for line in lines[:max_lines]:
        if len(line) > LINE_CHARS and not wrap:
            line = line[:LINE_CHARS] + f"… (+{len(line) - LINE_CHARS} chars)"
        out.append(indent + line + "\n", style=style)
    hidden = len(lines) - max_lines
    if hidden > 0:
        out.append(f"{indent}… {hidden} more line{'s' if hidden != 1 else ''}\n", style="dim")
    out.rstrip()
    return out


CONTINUED = "↳"  # in the marker column of a diff line's continuation: it is no line of its own


@dataclass(frozen=True)
class Diff:
    """A unified diff, + green, - red, @@ cyan, headers bold, laid out at the console's width:
    a wrapped line goes on under its own marker, after a ↳ in the marker column, so its
    continuation reads neither as a new +/- line nor as context."""

    lines: tuple[tuple[str, str], ...]  # (line, style)
    hidden: int

    def __rich_console__(self, console: Any, options: Any) -> Iterable[RenderableType]:
        width = max(20, options.max_width)
        for line, style in self.lines:
            marker = line[:1] if line[:1] in "+- " and not line.startswith(("+++", "---")) else ""
            body = line[len(marker):]
            room = width - 2 - len(marker)
            pieces = Text(body).wrap(console, room, overflow="fold") if body else [Text("")]
            yield Text.assemble(("  " + marker + pieces[0].plain, style), no_wrap=True, overflow="fold")
            for piece in pieces[1:]:
                yield Text.assemble(("  " + CONTINUED.ljust(len(marker)), "dim"), (piece.plain, style), no_wrap=True,
                                    overflow="fold")
        if self.hidden > 0:
            yield Text(f"  … {self.hidden} more diff line{'s' if self.hidden != 1 else ''}", style="dim")


def diff_hidden(text: str) -> int:
    """How many lines of this detail the approval box leaves out (a diff past DIFF_LINES,
    other text past DETAIL_LINES)."""
    lines = text.strip("\n").count("\n") + 1 if text.strip() else 0
    return max(0, lines - (DIFF_LINES if looks_like_diff(text.strip("\n")) else DETAIL_LINES))


def diff(text: str, max_lines: int = DIFF_LINES) -> Diff:
    """A unified diff, control characters escaped, folded past `max_lines`."""
    text = visible.escape_controls(redact(text))
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    styled: list[tuple[str, str]] = []
    for line in lines[:max_lines]:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = "dim"
        styled.append((line, style))
    return Diff(tuple(styled), len(lines) - max_lines)


def elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


def status_of(ev: ToolFinished) -> str:
    return visible.status_of(ev)


_MARK = {"ok": ("✓", "green"), "error": ("✗", "red"), "failed": ("✗", "red"), "denied": ("⊘", "yellow"),
         "interrupted": ("⊘", "yellow")}
_COMMAND = re.compile(r"\Aexit code: [^\n]*\n\nstdout:\n(?P<out>.*?)\n\nstderr:\n(?P<err>.*?)(?:\n\nnote: .*)?\Z", re.S)


def fold_tail(text: str, max_lines: int, *, style: str = "", indent: str = "  ") -> Text:
    """The last `max_lines` lines, after `… N earlier lines` when some were hidden: the end
    of a command's output (a test summary, the error) is what matters."""
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    hidden = len(lines) - max_lines
    out = Text()
    if hidden > 0:
        out.append(f"{indent}… {hidden} earlier line{'s' if hidden != 1 else ''}\n", style="dim")
    out.append_text(fold("\n".join(lines[max(hidden, 0):]), max_lines, style=style, indent=indent))
    return out


def command_preview(result: str, failed: bool) -> Text | None:
    """A run_command result's lines that matter: for a failure the tail of stderr (or of
    stdout when stderr is empty), otherwise the tail of stdout. None: not a command result."""
    m = _COMMAND.match(result)
    if m is None:
        return None
    out, err = (x if x != "(empty)" else "" for x in (m.group("out"), m.group("err")))
    if failed:
        return fold_tail(err or out, ERROR_LINES, style="red")
    return fold_tail(out, PREVIEW_LINES, style="dim") if out.strip() else Text()


def _one_line(left: Text, right: Text) -> RenderableType:
    """`left` cut with an ellipsis to fit the width; `right` (elapsed, status) always shown."""
    if left.cell_len + 1 + right.cell_len <= 80:  # fits any usable terminal: no table needed
        return Text.assemble(left, " ", right, no_wrap=True, overflow="ellipsis")
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    grid.add_column(no_wrap=True, width=right.cell_len)
    grid.add_row(left, right)
    return grid


def one_line(text: str) -> str:
    """A summary on one line: line breaks as spaces, other controls escaped, bounded (the
    row's ellipsis marks a cut)."""
    return visible.escape_controls(text.replace("\r\n", " ").replace("\n", " "))[:LINE_CHARS]


def tool_line(name: str, summary: str, status: str, seconds: float) -> RenderableType:
    """`✓ read_file notes.md · 0.1s`: the one line a finished call gets."""
    mark, style = _MARK.get(status, ("•", ""))
    left = Text()
    left.append(f"{mark} ", style=style)
    left.append(name, style="bold")
    if summary:
        left.append(" " + one_line(summary))
    right = Text(f"· {elapsed(seconds)}", style="dim")
    if status != "ok":
        right.append(f" · {status}", style=style)
    return _one_line(left, right)


def tool_finished(ev: ToolFinished, summary: str) -> RenderableType:
    """The call line plus its body: the diff of an edit, the error, or a folded preview."""
    status = status_of(ev)
    parts: list[RenderableType] = [tool_line(ev.name, summary, status, ev.elapsed)]
    if ev.display:
        parts.append(diff(ev.display))
    elif status in ("ok", "failed") and (preview := command_preview(ev.result, status == "failed")) is not None:
        if preview:
            parts.append(preview)
    elif status == "error":
        parts.append(fold(ev.result, ERROR_LINES, style="red"))
    elif status == "ok" and ev.result.strip():
        parts.append(fold(ev.result, PREVIEW_LINES, style="dim"))
    return Group(*parts)


def tool_running(name: str, summary: str, seconds: float, progress: str = "") -> RenderableType:
    left = Text()
    left.append(name, style="bold")
    if summary:
        left.append(" " + one_line(summary))
    right = Text(f"· {elapsed(seconds)}", style="dim")
    if progress:
        right.append(" · " + visible.escape_controls(progress, newlines=True)[:60], style="dim")
    return _one_line(left, right)


def batch_label(label: str, calls: int) -> RenderableType:
    left = Text()
    left.append("▸ ", style="cyan")
    left.append(label, style="bold")
    return _one_line(left, Text(f"· {calls} call{'s' if calls != 1 else ''}", style="dim"))


def notice(ev: Notice) -> Text:
    style = {"info": "dim", "warning": "yellow", "error": "red"}[ev.level]
    prefix = "" if ev.level == "info" else f"{ev.level}: "
    return Text(prefix + redact(ev.text), style=style)


def turn_ended(ev: TurnEnded) -> Text | None:
    if ev.reason == "interrupted":
        n = ev.interrupted_calls
        calls = f" ({n} unfinished call{'s were' if n != 1 else ' was'} answered \"interrupted by user\")" if n else ""
        return Text(f"⊘ interrupted{calls}", style="yellow")
    if ev.reason == "max_turns":
        return Text(f"stopped after {ev.turns} model calls; say \"continue\" to go on", style="yellow")
    if ev.reason == "error":
        return Text("the turn ended with an error", style="red")
    return None


def info(text: str) -> Text:
    return Text(text, style="cyan")


RECAP_LINES = 6  # lines of the last answer shown when a session is resumed
RECAP_TURNS = 3  # recent exchanges shown when a session is resumed (earlier ones: one line each)


def resumed(session_id: str, history: Sequence[Message]) -> Text:
    """Where a resumed session left off: its size and its recent exchanges, the last answer
    at more length."""
    out = Text(f"resumed {session_id}: {plural(len(history), 'message')}", style="cyan")
    turns: list[list[str]] = []  # [prompt, last answer to it, its thinking]
    for m in history:
        if m.role == "user" and m.content and not m.content.startswith("<"):  # not a summary or context
            turns.append([m.content, "", ""])
        elif m.role == "assistant" and turns:
            thinking, said = message_parts(m)  # thinking shows folded, as it did live, never as tags in the answer
            if said.strip():
                turns[-1][1:] = [said, thinking]
    shown = turns[-RECAP_TURNS:]
    for k, (prompt, answer, thinking) in enumerate(shown):
        first = visible.escape_controls(redact(prompt)).strip().split("\n")[0]
        out.append("\n  › " + (first[:LINE_CHARS] + "…" if len(first) > LINE_CHARS else first), style="dim")
        last = k == len(shown) - 1
        if last and (folded := reasoning(thinking, shown=False)) is not None:
            out.append("\n    ")
            out.append_text(folded)
        if answer:
            out.append("\n")
            out.append_text(fold(answer, RECAP_LINES if last else 1, style="dim", indent="    "))
    return out


def lines(items: Sequence[str]) -> Text:
    """Plain report lines (never read as markup)."""
    return Text("\n".join(redact(i) for i in items))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # rich passes ESC through: a model must not drive the terminal


def reasoning(text: str, *, shown: bool) -> Text | None:
    """The model's finished thinking: dimmed, folded to one line unless `/thinking on`."""
    body = _CONTROL.sub("?", redact(text)).strip()
    if not body:
        return None
    lines = body.count("\n") + 1
    if not shown:
        return Text(f"✻ thought for {lines} line{'s' if lines != 1 else ''} (/thinking on shows it)", style="dim italic")
    return Text.assemble(("✻ thinking\n", "dim italic"), (body, "dim"))


def reasoning_live(text: str) -> Text:
    """The thinking still streaming, for the live area: its latest line, dimmed."""
    last = _CONTROL.sub("?", redact(text)).rstrip().rsplit("\n", 1)[-1]
    return Text(f"✻ {last}", style="dim italic", no_wrap=True, overflow="ellipsis")


def unknown(event: Any) -> Text:
    """Any event this module does not know yet: its type and fields on one dim line."""
    name = type(event).__name__
    if is_dataclass(event):
        pairs = ", ".join(f"{f.name}={_short(getattr(event, f.name))}" for f in fields(event))
    else:
        pairs = _short(event)
    return Text(f"• {name}: {pairs}", style="dim", no_wrap=True, overflow="ellipsis")


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    text = redact(text).replace("\n", " ")
    return text if len(text) <= 60 else text[:59] + "…"


_TODO_MARK = {"pending": ("☐", ""), "in_progress": ("▶", "bold cyan"), "completed": ("☑", "dim")}


def todos(ev: TodoUpdated) -> Text:
    out = Text()
    done = sum(1 for i in ev.items if i.status == "completed")
    out.append(f"todo ({done}/{len(ev.items)} done)\n", style="bold")
    for item in ev.items:
        mark, style = _TODO_MARK.get(item.status, ("•", ""))
        out.append(f"  {mark} {item.content}\n", style=style)
    out.rstrip()
    return out


def sandbox_refused(ev: SandboxRefused) -> Text:
    """What the OS sandbox refused a call (its result line follows): the person learns it
    even when nobody was asked to run it again (goal mode)."""
    then = "; run again outside it, as approved" if ev.rerun else ""
    what = ", ".join(map(str, ev.refused)) or "something"
    return Text(f"⊘ {ev.tool} {one_line(redact(ev.summary))}: sandbox ({ev.sandbox}) refused "
                f"{one_line(redact(what))}{then}", style="yellow")


def subagent(ev: SubagentEvent, summary: str = "") -> RenderableType | None:
    """A sub-agent's finished calls, notices and sandbox refusals, indented under its name;
    its text is not the answer and its other events are not shown (a denied call's line says
    it failed)."""
    inner = ev.event
    if isinstance(inner, ToolFinished):
        body: RenderableType = tool_line(inner.name, summary, status_of(inner), inner.elapsed)
    elif isinstance(inner, Notice):
        body = notice(inner)
    elif isinstance(inner, SandboxRefused):
        body = sandbox_refused(inner)
    elif isinstance(inner, TurnEnded):
        body = Text(f"finished: {inner.reason}, {plural(inner.tool_calls, 'tool call')}", style="dim")
    else:
        return None
    head = Text(f"  ↳ {ev.agent} {ev.agent_id} ", style="magenta")
    return Group(head, body) if not isinstance(body, Text) else Text.assemble(head, body)


def event(ev: Any, summary: str = "") -> RenderableType | None:
    """What the scrolling transcript shows for one event (None: nothing, or shown elsewhere)."""
    if isinstance(ev, (ModelStarted, TextDelta, TextPending, ReasoningDelta, ToolStarted, ToolRunning, ToolProgress, UsageUpdate,
                       ApprovalRequest, MessageAdded)):
        return None  # the live area, the answer stream, the toolbar and the approval prompt show these
    if isinstance(ev, PermissionDenied):
        return None  # the call's ✗ line follows, with the reason as its error
    if isinstance(ev, FilesChanged):
        return None  # /rewind lists them
    if isinstance(ev, ToolFinished):
        return tool_finished(ev, summary)
    if isinstance(ev, Notice):
        return notice(ev)
    if isinstance(ev, TurnEnded):
        return turn_ended(ev)
    if isinstance(ev, TodoUpdated):
        return todos(ev)
    if isinstance(ev, SandboxRefused):
        return sandbox_refused(ev)
    if isinstance(ev, SubagentEvent):
        return subagent(ev, summary)
    return unknown(ev)  # not an event of nanohermes.common.events (tests check every one is handled above)


def approval(req: ApprovalRequest) -> Panel:
    """The approval prompt's body: what would run, why it asks, what "always" remembers."""
    body: list[RenderableType] = []
    head = Text()
    if req.agent:
        head.append(f"sub-agent {req.agent}: ", style="magenta")
    head.append(req.tool, style="bold")
    summary = visible.escape_controls(req.summary, newlines=True)
    if summary:
        head.append(" " + (summary if len(summary) <= LINE_CHARS else summary[:LINE_CHARS] + "…"))
    body.append(head)
    detail = req.detail.strip("\n")
    # What is approved is what runs: the detail is shown unless it says exactly what the
    # (escaped, whole) head line says; long lines wrap, nothing is cut without a marker.
    if detail and (detail != req.summary or summary != req.summary or len(summary) > LINE_CHARS):
        if looks_like_diff(detail):
            body.append(diff(detail))
        else:
            body.append(fold(detail, DETAIL_LINES, wrap=True))
    if req.reason:
        body.append(Text(f"asked because: {visible.escape_controls(req.reason, newlines=True)}", style="dim"))
    if req.rule:  # what [a] would store, in full, before anyone answers
        body.append(Text.assemble(("always remembers: ", "dim"), visible.escape_controls(req.rule, newlines=True)))
    return Panel(Group(*body), title="approve?", title_align="left", border_style="yellow")


def elicitation(req: ElicitationRequest) -> Panel:
    """An MCP server's question: its message, and the page to visit or the form's fields
    (all shown escaped: the text is the server's)."""
    # only an MCP server's elicitation
    from nanohermes.turn.elicitation import fields

    body: list[RenderableType] = [Text(visible.escape_controls(req.message, newlines=True))]
    if req.url:
        body.append(Text(f"open: {visible.escape_controls(req.url, newlines=True)}", style="bold"))
    for f in fields(req.schema):
        line = Text(f"• {visible.escape_controls(f.title, newlines=True)}{' *' if f.required else ''}")
        if f.description:
            line.append(f" — {visible.escape_controls(f.description, newlines=True)}", style="dim")
        body.append(line)
    return Panel(Group(*body), title=f"MCP server {visible.escape_controls(req.server, newlines=True)} asks",
                 title_align="left", border_style="cyan")


def looks_like_diff(text: str) -> bool:
    return text.startswith(("--- ", "diff ", "@@")) or "\n@@ " in text


@dataclass(frozen=True)
class ToolRow:
    name: str
    group: str
    read_only: str  # yes | no | per call
    concurrency_safe: str
    output_limit: str
    source: str
    hidden: str = ""  # why the current mode or lists hide it


def flag(tool: Tool, which: str) -> str:
    """A behaviour flag for display. Flags may depend on the arguments, so the predicate is
    tried on the defaults; when it needs a real argument the answer is "per call"."""
    try:
        args = tool.params.defaults()
        return "yes" if getattr(tool, which)(args) else "no"
    except Exception:
        return "per call"


def limit_text(text: str, limits: Limits) -> str:
    """A tool's `output_limit()` with each Limits name replaced by its value and unit."""
    out = []
    words = text.replace(",", " ,").split(" ")
    for i, word in enumerate(words):
        value = getattr(limits, word, None) if word in Limits.names() else None
        if value is None:
            out.append(word)
            continue
        following = words[i + 1] if i + 1 < len(words) else ""
        if word.endswith("_bytes"):
            out.append(_bytes(int(value)))
        elif word.endswith("_line_chars"):
            out.append(f"{value:,} chars a line")
        elif (word.endswith("_chars") or word == "max_output") and following != "chars":
            out.append(f"{value:,} chars")
        else:
            out.append(f"{value:,}")
    return " ".join(out).replace(" ,", ",")


def _bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


WIDE_TOOLS_TABLE = 100  # columns from which /tools gives each property its own column


@dataclass(frozen=True)
class ToolsTable:
    """Every tool in pool order; the hidden ones dimmed, with the reason listed under the
    table. On a terminal narrower than WIDE_TOOLS_TABLE the group, flags and source share one
    column, so the output limit keeps room to be read (laid out anew on each print, so a
    resized terminal gets the right one)."""

    rows: Sequence[ToolRow]
    mode: str

    def __rich_console__(self, console: Any, options: Any) -> Iterable[RenderableType]:
        wide = options.max_width >= WIDE_TOOLS_TABLE
        t = Table(title=f"tools (mode: {self.mode})", title_justify="left", pad_edge=False, box=box.SIMPLE_HEAD)
        t.add_column("name", style="bold", no_wrap=wide, overflow="fold", max_width=None if wide else 20)
        if wide:
            for header in ("group", "read-only", "parallel"):
                t.add_column(header, no_wrap=True)
            t.add_column("output limit")
            t.add_column("source", no_wrap=True)
            t.add_column("shown", no_wrap=True)
        else:
            t.add_column("kind")
            t.add_column("output limit")
        reasons = Text()
        for r in self.rows:
            if wide:
                shown = Text("hidden", style="yellow") if r.hidden else Text("yes", style="green")
                cells = [*(Text(v) for v in (r.name, r.group, r.read_only, r.concurrency_safe, r.output_limit,
                                             r.source)), shown]
            else:
                cells = [Text(r.name), _kind(r), Text(r.output_limit)]
            t.add_row(*cells, style="dim" if r.hidden else "")
            if r.hidden:
                why = r.hidden[len(r.name) + 1:] if r.hidden.startswith(r.name + " ") else r.hidden
                reasons.append(f"hidden {r.name}: {why}\n", style="yellow")
        reasons.rstrip()
        yield t
        if reasons:
            yield reasons


def _kind(r: ToolRow) -> Text:
    """group, flags and source in one cell: `files, read-only, parallel`."""
    flags = [f"{label}{'' if value == 'yes' else ' ' + value}"
             for label, value in (("read-only", r.read_only), ("parallel", r.concurrency_safe)) if value != "no"]
    text = Text(", ".join([r.group, *flags] + ([r.source] if r.source != "built-in" else [])))
    if r.hidden:
        text.append(", hidden", style="yellow")
    return text


def tools_table(rows: Sequence[ToolRow], mode: str) -> ToolsTable:
    return ToolsTable(rows, mode)


def help_table(rows: Iterable[tuple[str, str]]) -> Group:
    """/help: (the command as typed, what it does) rows, then the keys."""
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column()
    for typed, help_text in rows:
        t.add_row(Text(typed), Text(help_text))
    t.add_row(Text("!command"), Text("Run a command yourself in the workspace, unasked; its output joins the "
                                     "conversation for the model to see"))
    keys = Text(
        "Enter sends · Alt+Enter or Esc Enter: new line · Tab completes /commands and @paths\n"
        "a long paste shows as [pasted N lines]: Ctrl-O expands it · @path attaches a file · "
        "Shift+Tab cycles default, accept-edits, plan · Esc or Ctrl-C interrupts the turn · Ctrl-D exits",
        style="dim",
    )
    return Group(t, keys)


class MarkdownBlocks:
    """Splits a streamed answer into finished Markdown blocks.

    A block is finished at a blank line outside a code fence; finished blocks are printed
    for good, and only the unfinished tail is redrawn live, so a long answer never needs a
    live area taller than the screen.
    """

    def __init__(self) -> None:
        self.pending = ""

    def feed(self, piece: str) -> list[str]:
        # `pending` is read by the live display's refresh thread: it is assigned once, never
        # left holding a block that is also being printed (a stale half-rendered block).
        text = self.pending + piece
        done: list[str] = []
        in_fence = False
        start = 0
        pos = 0
        cut = 0
        for line in text.splitlines(keepends=True):
            pos += len(line)
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                in_fence = not in_fence
            elif not stripped and not in_fence and line.endswith("\n") and text[start:pos - len(line)].strip():
                done.append(text[start:pos])
                start = cut = pos
        self.pending = text[cut:]
        return [b.strip("\n") for b in done]

    def flush(self) -> str:
        rest, self.pending = self.pending.strip("\n"), ""
        return rest


@dataclass(frozen=True)
class Trimmed:
    """A renderable without its leading and trailing blank lines: blocks of an answer are
    printed one by one with one blank line between them, and rich's own margins (a list's
    leading line, a code block's padding) would double it."""

    inner: RenderableType

    def __rich_console__(self, console: Any, options: Any) -> Iterable[Any]:
        lines = console.render_lines(self.inner, options, pad=False)
        blank = [not "".join(seg.text for seg in line).strip() for line in lines]
        start = next((i for i, b in enumerate(blank) if not b), len(lines))
        end = len(lines) - next((i for i, b in enumerate(reversed(blank)) if not b), len(lines))
        for line in lines[start:end]:
            yield from line
            yield Segment.line()


def answer(markdown_text: str, *, streaming: bool = False) -> RenderableType:
    """The answer as Markdown, keys redacted; `streaming`: the unfinished end of an answer,
    shown without a tail that may be the start of a key."""

    text = settle(markdown_text)[0] if streaming else redact(markdown_text)
    # The model's text may carry escape sequences (clear the screen, write the clipboard):
    # shown, never acted on. hyperlinks=False: a link shows its URL after its text;
    # terminals without OSC 8 would hide it.
    return Trimmed(Markdown(escape_controls(text), hyperlinks=False))
