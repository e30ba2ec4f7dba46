"""Tool calls a model wrote as text, read back as calls; calls in its thinking, kept as drafts.

When a server's chat template or tool parser misfires (Ollama, LM Studio, llama.cpp and vLLM
all do, per model), the model's call arrives in the answer's text in the model's own format
instead of as `tool_calls`, and would end the turn as if it were the answer. The formats read
here are the ones those servers' parsers document, each an entry of the quirk table
(`nanohermes.llm.quirks`, `text.*`: its name, a whole call in it, the markers that open one);
their finders are `llm.textfinders`, tried in the table's order.

A call is taken only when the request offered tools, the block is whole and well-formed and
names a tool that was offered; nothing inside a Markdown code fence counts (an example, not a
call), nor anything in the model's thinking (`<think>`, `[THINK]`, Harmony's analysis channel:
a draft, never run). A format with no marker of its own (a bare JSON call, a pythonic list,
GLM-4's name and JSON) counts where it ends the answer and names an offered tool, and then runs
only with a complete argument object (every required parameter, no unknown one; else the model
is told what was wrong); a JSON call inside prose, as Llama's parsers read it, counts only when
it is such a complete call of an offered tool: an example in prose names no tool here, leaves
arguments out, or stands in a code fence. `recover` gives the calls and the text left around them; `attempted` says what
went wrong with a block that looks like a call but cannot be taken, naming the format to write;
`drafted` finds the calls of an answer that says nothing else and calls only in its thinking;
`TextHold` keeps call text from being shown as the answer while it streams.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nanohermes.common.messages import Message, ToolCall
from nanohermes.llm.textfinders import (
    CALL_OPENING,
    TAILS,
    TEXT_FORMATS,
    Bad,
    Block,
    Call,
    Finder,
    Format,
    Schemas,
    blank,
    fits,
    format_of,
    json_anywhere,
    offered,
    thinking,
)

# The strings that open a call in some format, for holding text back and for spotting attempts.
MARKERS = tuple(dict.fromkeys(m for f in TEXT_FORMATS.values() for m in (*f.markers, *f.held)))

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")

# Each format with the markers that announce it, tried in the table's order: the special-token
# formats first (their tokens never stand in a Markdown example, so they are looked for in the
# text as it is; DeepSeek's wrap the arguments in a fence of their own).
_FINDERS = tuple((f.markers, f.special, format_of(qid), qid) for qid, f in TEXT_FORMATS.items() if f.markers)
_TAILS = tuple((format_of(qid), TAILS[qid]) for qid, f in TEXT_FORMATS.items() if f.tail)


@dataclass
class Recovery:
    """What the text holds: the calls read from it and the text around them, or the reason a
    block that looks like a call could not be taken (with the format to write it in)."""

    calls: list[Call] = field(default_factory=list)
    text: str = ""  # the answer's text without the blocks taken as calls
    format: Format | None = None
    problem: str = ""  # a block looked like a call but is not one that can run: why


def _marked(qid: str) -> Finder:
    """The finder of format `qid`, which has markers: loaded with the first answer holding one
    (their patterns are many, and most answers hold no marker)."""
    from nanohermes.llm.textfinders.marked import FIND

    return FIND[qid]


def _unfenced(text: str) -> str:
    """`text` with each Markdown code block and inline code span blanked out (same length, so
    offsets hold): a call shown there is an example, not a call."""
    def spaces(m: re.Match[str]) -> str:
        return " " * len(m.group(0))

    return _INLINE_CODE.sub(spaces, _FENCE.sub(spaces, text))


def schemas_of(tools: Sequence[dict[str, Any] | str]) -> Schemas:
    """Each tool's parameter schema by name, from tool specs (or bare names: no schema)."""
    out: Schemas = {}
    for spec in tools:
        if isinstance(spec, str):
            out[spec] = {}
            continue
        fn = spec.get("function") if isinstance(spec.get("function"), dict) else spec
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def recover(text: str, tools: Sequence[dict[str, Any] | str], *, drafts: bool = False) -> Recovery:
    """The calls `text` writes out, when it holds whole blocks of one known format naming
    offered tools (every block must: a call of a tool that was not offered is not run, and
    then none of the answer's calls are); the text around them is kept. With no tools
    offered nothing is read. A block that looks like a call but is not one gives `problem`.
    Thinking is no answer: its calls are not read, unless `drafts` (the text is thinking)."""
    if not tools or not text:
        return Recovery(text=text)
    schemas = schemas_of(tools)
    raw = text if drafts else blank(text, thinking(text))
    plain = _unfenced(raw)
    for markers, special, fmt, qid in _FINDERS:
        seen = raw if special else plain
        if not any(mk in seen for mk in markers):
            continue
        try:
            blocks, fmt = _marked(qid)(seen, schemas)
        except Bad as e:
            return Recovery(text=text, format=e.fmt or fmt, problem=str(e))
        return _taken(text, blocks, fmt, schemas, tail=False)
    for fmt, find in _TAILS:
        try:
            blocks, fmt = find(plain, schemas)
        except Bad as e:
            return Recovery(text=text, format=e.fmt or fmt, problem=str(e))
        names = [n for _, _, cs in blocks for n, _ in cs]
        if names and all(offered(n, schemas) for n in names):  # a tail naming no tool here is prose
            return _taken(text, blocks, fmt, schemas, tail=True)
    return Recovery(text=text)


def _taken(text: str, blocks: list[Block], fmt: Format, schemas: Schemas, *, tail: bool) -> Recovery:
    calls = [c for _, _, cs in blocks for c in cs]
    if not calls:
        return Recovery(text=text, format=fmt, problem="no whole call could be read from it")
    for name, _ in calls:
        if not offered(name, schemas):
            tools = ", ".join(sorted(schemas))
            return Recovery(text=text, format=fmt, problem=f"`{name}` is not a tool here (the tools are: {tools})")
    calls = [(offered(name, schemas), args) for name, args in calls]
    if tail:  # no marker says it is a call: only a complete one is
        for name, args in calls:
            if why := fits(name, args, schemas):
                return Recovery(text=text, format=fmt, problem=f"its arguments do not fit the tool: {why}")
    kept, at = [], 0
    for start, end, _ in blocks:
        kept.append(text[at:start])
        at = end
    kept.append(text[at:])
    return Recovery(calls=calls, text="".join(kept).strip(), format=fmt)


def as_tool_calls(found: Recovery) -> tuple[ToolCall, ...]:
    fmt = found.format.name if found.format else "text"
    return tuple(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(args, ensure_ascii=False),
                          text_format=fmt) for name, args in found.calls)


def attempted(text: str, tools: Sequence[dict[str, Any] | str]) -> str | None:
    """When `text` (an answer that ended the turn) holds what looks like a call written as
    text that could not be taken: the error for the model, naming the format to write; None
    when it holds none. `tools` are the offered tools' specs (or their names)."""
    found = recover(text, tools) if tools else Recovery()
    if found.format is None or found.calls:
        return None
    fmt = found.format
    return (f"ERROR: your answer holds what looks like a tool call written as text ({fmt.name}), and it could not be "
            f"run: {found.problem}. Nothing was run. Call tools through the API's tool calls; if you write a call as "
            f"text, write it whole, in this form:\n{fmt.example}")


def drafted(answer: str, reasoning: str, tools: Sequence[dict[str, Any] | str]) -> list[str]:
    """The tools an answer that says nothing but its thinking calls there (in `reasoning`, the
    thinking that came apart, or in the answer's own thinking spans), complete calls of offered
    tools only; [] when the answer says anything else or no such call is there."""
    if (text := _only_thinking(answer, reasoning, tools)) is None:
        return []
    schemas = schemas_of(tools)
    found = recover(text, tools, drafts=True)
    calls = [(n, a) for n, a in found.calls if not fits(n, a, schemas)] or json_anywhere(text, schemas)
    return list(dict.fromkeys(name for name, _ in calls))


def drafted_incomplete(answer: str, reasoning: str, tools: Sequence[dict[str, Any] | str]) -> list[str]:
    """What keeps each call of an offered tool in the thinking of an answer that says nothing
    else from being complete (`run_command` needs `command`); [] when the answer says
    anything, or its thinking holds no such call."""
    if (text := _only_thinking(answer, reasoning, tools)) is None:
        return []
    schemas = schemas_of(tools)
    calls = [*recover(text, tools, drafts=True).calls, *json_anywhere(text, schemas, complete=False)]
    return list(dict.fromkeys(why for n, a in calls if (why := fits(n, a, schemas))))


def _only_thinking(answer: str, reasoning: str, tools: Sequence[dict[str, Any] | str]) -> str | None:
    """The whole thinking of an answer that says nothing else (the thinking that came apart,
    then the answer's own thinking spans); None when it says something, or no tool is offered."""
    spans = thinking(answer)
    if not tools or blank(answer, spans).strip():
        return None
    return "\n".join([reasoning, *(answer[s:e] for s, e in spans)])


def last_thinking(history: Sequence[Message]) -> str:
    """The thinking that came apart with the last message, when it is the model's ("" else)."""
    last = history[-1] if history else None
    return (last.reasoning or "") if last is not None and last.role == "assistant" else ""


def _them(names: list[str]) -> tuple[str, str]:
    return ("it", "call") if len(names) == 1 else ("them", "calls")


@dataclass
class TextCallCheck:
    """A turn hook (`agent.TurnHooks`): an answer that would end the turn while it holds a
    call written as text that could not be run goes back to the model as the error
    `attempted` gives, at most `retries` times in one turn; one that says nothing and calls
    tools only in its thinking (`drafted`) is told to send the calls, at most `draft_retries`
    times. Past either, the turn ends with the answer as it is, and a warning says why."""

    tools: Callable[[], Sequence[dict[str, Any] | str]]  # the tools the model is offered now (specs or names)
    retries: int
    warn: Callable[[str], None] = lambda text: None
    reasoning: Callable[[], str] = lambda: ""  # the thinking that came apart with the answer
    draft_retries: int = 0
    _sent: int = field(default=0, init=False)
    _drafts: int = field(default=0, init=False)

    async def prompt_submitted(self, prompt: str) -> str | None:
        self._sent = self._drafts = 0
        return prompt

    async def stopping(self, answer: str) -> str | None:
        tools = list(self.tools())
        error = attempted(answer, tools)
        if error is not None:
            if self._sent >= self.retries:
                self.warn(f"the answer holds a tool call written as text that could not be run; it was sent back "
                          f"{self._sent} time{'s' if self._sent != 1 else ''} (limit text_call_retries), so the turn "
                          "ends with the answer as it is")
                return None
            self._sent += 1
            return error
        names = drafted(answer, self.reasoning(), tools)
        if names:
            return self._draft(names, "")
        incomplete = drafted_incomplete(answer, self.reasoning(), tools)
        if incomplete:
            return self._draft([], "; ".join(incomplete))
        return None

    def _draft(self, names: list[str], incomplete: str) -> str | None:
        """What the model is told of a reply whose only calls (`names`, or those `incomplete`
        says are incomplete) are in its thinking; None past `draft_retries`, with a warning."""
        shown = ", ".join(f"`{n}`" for n in names)
        it, calls = _them(names) if names else ("it", "call")
        if self._drafts >= self.draft_retries:
            what = f"tool {calls} ({shown}) {'was' if len(names) == 1 else 'were'}" if names else \
                f"tool call, incomplete ({incomplete}), was"
            self.warn(f"the reply's only {what} in its thinking, "
                      f"where calls never run; the model was told {self._drafts} time{'s' if self._drafts != 1 else ''} "
                      "(limit reasoning_call_retries), so the turn ends with the answer as it is")
            return None
        self._drafts += 1
        if not names:
            return ("ERROR: your reply has no answer and no tool call: it holds only a tool call in your thinking, "
                    f"where calls are drafts and never run, and that call is incomplete ({incomplete}). Nothing was "
                    "run. If you meant to make it, send it now as a tool call with every required argument; "
                    "otherwise give your answer.")
        return (f"ERROR: your reply has no answer and no tool call: its only {calls}, to {shown}, "
                f"{'is' if len(names) == 1 else 'are'} in your thinking, where calls are drafts and never run. Nothing "
                f"was run. If you meant to make {it}, send {it} now as tool {calls}; otherwise give your answer.")

    async def settled(self, changing: bool = False) -> None:
        return None

    async def ended(self) -> None:
        return None


# --------------------------------------------------------------------------------------
# streaming: text from the first marker on is held until the answer is complete

# A line that begins a call with no marker (`{"name": ...`, `[read_file(...`, a line holding
# a name with `{` on the next), and what may still become one at the end of what came.
_TAIL_LINE = re.compile(r'(?m)^[ \t]*(?:<\|python_start\|>\s*)?(?:\[?\s*\{\s*"|\[\s*[A-Za-z_][\w.]*\s*\()'
                        r"|^(?:<\|assistant\|>)?[ \t]*[A-Za-z_][\w.-]*[ \t]*\n[ \t]*\{")
# A name is at most 64 chars (as the chat API allows): a longer word at the end is no call's
# beginning, so a long line without a break streams on instead of being held (and scanned again
# with every piece).
_TAIL_MAYBE = re.compile(r"(?:^|\n)((?:<\|assistant\|>)?[ \t]*(?:\[\s*(?:\{\s*|[A-Za-z_][\w.]{0,63}\s*)?|\{\s*|"
                         r"[A-Za-z_][\w.-]{0,63}[ \t]*(?:\n[ \t]*)?))\Z")
# A JSON call or a pythonic list may stand after prose on its line too (`Here it is: {"name": ...`,
# `Logging: [run_command(...`), and may be starting at the end of what came (`{"na`, `[run_co`).
_IN_LINE = re.compile(CALL_OPENING + r"|\[\s*[A-Za-z_][\w.]*\s*\(")
_IN_LINE_MAYBE = re.compile(r'\{\s*(?:"[A-Za-z_]{0,64}"?\s*)?\Z|\[\s*[A-Za-z_][\w.]{0,63}\s*\Z')


# Every proper beginning of a marker: text ending in one may be a marker still arriving.
_PREFIXES = frozenset(mk[:n] for mk in MARKERS for n in range(1, len(mk)))
_PREFIX_CHARS = max(map(len, _PREFIXES), default=0)
# Where any marker begins, in one pass (a lookahead, so markers that overlap are all found).
_MARKER_AT = re.compile("(?=" + "|".join(re.escape(mk) for mk in sorted(MARKERS, key=len, reverse=True)) + ")")


class TextHold:
    """Passes streamed text on until a call format's marker appears (or a line that begins a
    call with no marker, or either could be starting at the end of what came), then holds the
    rest: recovered calls are not shown as text, and `release()` hands on what was held when
    it was not a call after all. Markers in the model's thinking hold nothing: a draft there
    is shown as the thinking it is."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self.held = ""
        self.holding = False
        # What was handed on, to tell where the thinking is: pieces joined only when a call may
        # begin (rare), so a long answer streams in time that grows with its length, not faster.
        self._passed: list[str] = []
        self._passed_chars = 0

    @property
    def passed(self) -> str:
        """All the text handed on so far."""
        if len(self._passed) > 1:
            self._passed[:] = ["".join(self._passed)]
        return self._passed[0] if self._passed else ""

    def feed(self, piece: str) -> None:
        if self.holding:
            self.held += piece
            return
        text = self.held + piece
        at = self._start(text)
        if at is not None:
            self.holding = True
            self._pass(text[:at])
            self.held = text[at:]
            return
        keep = max((n for n in range(1, min(len(text), _PREFIX_CHARS) + 1) if text[-n:] in _PREFIXES), default=0)
        lead = self._lead()
        if (maybe := _TAIL_MAYBE.search(lead + text)) is not None and maybe.group(1).strip():
            keep = max(keep, len(maybe.group(1)))
        if (maybe := _IN_LINE_MAYBE.search(text)) is not None:
            keep = max(keep, len(maybe.group(0)))
        self._pass(text[:len(text) - keep])
        self.held = text[len(text) - keep:]

    def _lead(self) -> str:
        """What stands before the text to look at: nothing at a line's start, else a char no
        line-start pattern begins with (so `^` there is no line start)."""
        return "" if not self._passed or self._passed[-1].endswith("\n") else "\x00"

    def _start(self, text: str) -> int | None:
        """Where a call may begin in `text` (what came after what was passed on), outside the
        thinking; None when nowhere."""
        lead = self._lead()
        found = sorted({m.start() for m in _MARKER_AT.finditer(text)} | {m.start() for m in _IN_LINE.finditer(text)} |
                       {m.start() - len(lead) for m in _TAIL_LINE.finditer(lead + text)})
        if not found:
            return None
        spans = thinking(self.passed + text)
        offset = self._passed_chars
        return next((i for i in found if not any(s <= offset + i < e for s, e in spans)), None)

    def _pass(self, text: str) -> None:
        if text:
            self._passed.append(text)
            self._passed_chars += len(text)
            self.sink(text)

    def release(self) -> None:
        held, self.held, self.holding = self.held, "", False
        self._pass(held)

    def taken(self, kept: str) -> None:
        """The held text was calls: what the answer keeps around them (`kept`, which begins
        with what was passed on) is shown from where the shown text stopped, the calls not."""
        self.held, self.holding = "", False
        shown = self.passed.strip()
        rest = kept[len(shown):].lstrip() if kept.startswith(shown) else ""
        if rest:
            self._pass(("" if not self.passed or self.passed[-1].isspace() else " ") + rest)


__all__ = ["MARKERS", "Format", "Recovery", "TextCallCheck", "TextHold", "as_tool_calls", "attempted", "drafted",
           "last_thinking", "recover", "schemas_of"]
