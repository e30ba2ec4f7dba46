"""Tool calls a model wrote as text, read back as calls.

When a server's chat template or tool parser misfires (Ollama, LM Studio, llama.cpp and vLLM
all do, per model), the model's call arrives in the answer's text in the model's own format
instead of as `tool_calls`, and would end the turn as if it were the answer. The formats read
here are the ones those servers' parsers document, each an entry of the quirk table
(`nanohermes.llm.quirks`, `text.*`: its name, a whole call in it, the markers that open one);
the finder that reads each is keyed here by the entry's id (`_FIND`), and they are tried in the
table's order. Llama's JSON call is also taken when it is the whole answer.

A call is taken only when the request offered tools, the block is whole and well-formed and
names a tool that was offered; nothing inside a Markdown code fence counts (an example, not a
call). `recover` gives the calls and the text left around them; `attempted` says what went
wrong with a block that looks like a call but cannot be taken, naming the format to write;
`TextHold` keeps such text from being shown as the answer while it streams.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nanohermes.llm.quirks import TextFormat, entries
from nanohermes.messages import ToolCall

_TEXT_FORMATS = {q.id: f for q, f in entries(TextFormat)}
# The strings that open a call in some format, for holding text back and for spotting attempts.
MARKERS = tuple(dict.fromkeys(m for f in _TEXT_FORMATS.values() for m in (*f.markers, *f.held)))

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")


@dataclass(frozen=True)
class Format:
    name: str  # what the model is told its format is
    example: str  # a whole, well-formed call in it, for the error that asks for one


def _format(qid: str) -> Format:
    f = _TEXT_FORMATS[qid]
    return Format(f.name, f.example)


HERMES = _format("text.hermes")
QWEN_XML = _format("text.qwen3-coder")
INVOKE = _format("text.invoke")
GLM = _format("text.glm")
DEEPSEEK = _format("text.deepseek")
KIMI = _format("text.kimi")
MISTRAL = _format("text.mistral")
LLAMA = _format("text.llama")
FUNCTIONARY = _format("text.functionary")
HARMONY = _format("text.harmony")


@dataclass
class Recovery:
    """What the text holds: the calls read from it and the text around them, or the reason a
    block that looks like a call could not be taken (with the format to write it in)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    text: str = ""  # the answer's text without the blocks taken as calls
    format: Format | None = None
    problem: str = ""  # a block looked like a call but is not one that can run: why


class _Bad(ValueError):
    """A block of a known format that cannot be taken as a call: the reason, and the format
    when it is not the one its marker announced (a `<tool_call>` holding XML)."""

    def __init__(self, reason: str, fmt: Format | None = None) -> None:
        super().__init__(reason)
        self.fmt = fmt


# --------------------------------------------------------------------------------------
# argument values written as text: taken by the type the tool's schema gives them


def _typed(value: str, schema: dict[str, Any]) -> Any:
    """A parameter value written as text, as the type its schema names (a value that does
    not read as that type is kept as text: the tool's own validation then names it)."""
    kind = schema.get("type")
    text = value
    if kind in (None, "string"):
        return text
    stripped = text.strip()
    try:
        if kind == "integer":
            return int(stripped)
        if kind == "number":
            return float(stripped)
        if kind == "boolean" and stripped.lower() in ("true", "false"):
            return stripped.lower() == "true"
        if kind in ("array", "object"):
            return json.loads(stripped)
    except ValueError:
        pass
    return text


def _xml_value(raw: str) -> str:
    """A value between tags: one line break the template puts after the opening tag and before
    the closing one is not part of it."""
    return raw.removeprefix("\n").removesuffix("\n")


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise _Bad(f"the {what} are not valid JSON ({e.msg} at char {e.pos})") from None
    if isinstance(value, str):  # arguments encoded twice
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if not isinstance(value, dict):
        raise _Bad(f"the {what} are not a JSON object")
    return value


def _named_json(obj: Any) -> tuple[str, dict[str, Any]]:
    """`{"name": ..., "arguments"|"parameters": {...}}` (Command R: `tool_name`)."""
    if not isinstance(obj, dict):
        raise _Bad("a call is not a JSON object")
    name = obj.get("name", obj.get("tool_name"))
    if not isinstance(name, str) or not name:
        raise _Bad('a call has no "name"')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        args = _json_object(args, "arguments") if args.strip() else {}
    if not isinstance(args, dict):
        raise _Bad(f'the arguments of `{name}` are not a JSON object')
    return name, args


def _json_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """One call object or a list of them, as JSON text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise _Bad(f"the call is not valid JSON ({e.msg} at char {e.pos})") from None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise _Bad("the call list is empty")
    return [_named_json(item) for item in items]


# --------------------------------------------------------------------------------------
# the formats: each finds its blocks in the text, as (start, end, calls), or raises _Bad

Block = tuple[int, int, list[tuple[str, dict[str, Any]]]]
Schemas = dict[str, dict[str, Any]]
Finder = Callable[[str, Schemas], tuple[list[Block], Format]]

_QWEN_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
_QWEN_PARAM = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)
_INVOKE = re.compile(r"<invoke\s+name=\"([^\"]+)\"\s*>(.*?)</invoke>", re.DOTALL)
_INVOKE_PARAM = re.compile(r"<parameter\s+name=\"([^\"]+)\"\s*>(.*?)</parameter>", re.DOTALL)
_GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def _params(body: str, pattern: re.Pattern[str], schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    args: dict[str, Any] = {}
    for m in pattern.finditer(body):
        key = m.group(1).strip()
        args[key] = _typed(_xml_value(m.group(2)), props.get(key, {}))
    return args


def _tool_call_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """`<tool_call>` blocks: Hermes JSON, Qwen3-Coder XML or GLM's arg_key/arg_value inside."""
    blocks: list[Block] = []
    fmt = HERMES
    for m in _TOOL_CALL.finditer(text):
        body = m.group(1)
        if not m.group(0).endswith("</tool_call>") and body.strip().startswith("{") and not body.rstrip().endswith("}"):
            raise _Bad("the `<tool_call>` block is not closed (was the answer cut off?)")
        inner = body.strip()
        if inner.startswith("{"):
            blocks.append((m.start(), m.end(), _json_calls(inner)))
        elif "<function=" in inner:
            fmt = QWEN_XML
            fn = _QWEN_FUNCTION.search(inner)
            if fn is None:
                raise _Bad("the `<function=...>` has no closing `</function>`", QWEN_XML)
            name = fn.group(1)
            blocks.append((m.start(), m.end(), [(name, _params(fn.group(2), _QWEN_PARAM, schemas.get(name, {})))]))
        elif "<invoke" in inner:
            fmt = INVOKE
            blocks += [(m.start(), m.end(), _invoke_calls(inner, schemas))]
        elif "<arg_key>" in inner or re.fullmatch(r"[\w.-]+", inner):
            fmt = GLM
            name = inner.split("<arg_key>", 1)[0].strip()
            if not re.fullmatch(r"[\w.-]+", name):
                raise _Bad("the `<tool_call>` block does not start with the tool's name", GLM)
            blocks.append((m.start(), m.end(), [(name, _params(inner, _GLM_ARG, schemas.get(name, {})))]))
        else:
            raise _Bad("the `<tool_call>` block holds neither a JSON call nor a `<function=...>`")
    return blocks, fmt


def _invoke_calls(text: str, schemas: Schemas) -> list[tuple[str, dict[str, Any]]]:
    return [(m.group(1), _params(m.group(2), _INVOKE_PARAM, schemas.get(m.group(1), {})))
            for m in _INVOKE.finditer(text)]


def _bare_function_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """`<function=NAME>` outside `<tool_call>`: Qwen3-Coder's XML or Functionary's JSON body."""
    blocks: list[Block] = []
    fmt = QWEN_XML
    for m in _QWEN_FUNCTION.finditer(text):
        name, body = m.group(1), m.group(2)
        if body.strip().startswith("{"):
            fmt = FUNCTIONARY
            blocks.append((m.start(), m.end(), [(name, _json_object(body.strip(), f"arguments of `{name}`"))]))
        else:
            blocks.append((m.start(), m.end(), [(name, _params(body, _QWEN_PARAM, schemas.get(name, {})))]))
    if not blocks:
        raise _Bad("the `<function=...>` has no closing `</function>`")
    return blocks, fmt


_DS_CALL = re.compile(
    r"<[｜|]tool[▁_]call[▁_]begin[｜|]>\s*(?:function\s*<[｜|]tool[▁_]sep[｜|]>\s*([\w.-]+)\s*```(?:json)?\s*(.*?)\s*```"
    r"|([\w.-]+)\s*<[｜|]tool[▁_]sep[｜|]>\s*(.*?))\s*<[｜|]tool[▁_]call[▁_]end[｜|]>", re.DOTALL)
_DS_SECTION = re.compile(r"<[｜|]tool[▁_]calls[▁_]begin[｜|]>(.*?)(?:<[｜|]tool[▁_]calls[▁_]end[｜|]>|\Z)", re.DOTALL)


def _deepseek_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for section in _DS_SECTION.finditer(text):
        calls = []
        for m in _DS_CALL.finditer(section.group(1)):
            name, args = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            calls.append((name, _json_object(args, f"arguments of `{name}`")))
        if not calls or not section.group(0).rstrip().endswith(("calls▁end｜>", "calls_end|>", "calls▁end|>")):
            raise _Bad("the tool-call tokens do not hold a whole call (each needs its end token, and the list its "
                       "closing token)")
        blocks.append((section.start(), section.end(), calls))
    return blocks, DEEPSEEK


_KIMI_SECTION = re.compile(r"<\|tool_calls_section_begin\|>(.*?)(?:<\|tool_calls_section_end\|>|\Z)", re.DOTALL)
_KIMI_CALL = re.compile(r"<\|tool_call_begin\|>\s*(?:functions\.)?([\w.-]+?)(?::\d+)?\s*<\|tool_call_argument_begin\|>"
                        r"\s*(.*?)\s*<\|tool_call_end\|>", re.DOTALL)


def _kimi_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for section in _KIMI_SECTION.finditer(text):
        calls = [(m.group(1), _json_object(m.group(2), f"arguments of `{m.group(1)}`"))
                 for m in _KIMI_CALL.finditer(section.group(1))]
        if not calls or not section.group(0).endswith("<|tool_calls_section_end|>"):
            raise _Bad("the tool-call section does not hold a whole call (each needs `<|tool_call_end|>`, the "
                       "section `<|tool_calls_section_end|>`)")
        blocks.append((section.start(), section.end(), calls))
    return blocks, KIMI


_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]\s*", re.DOTALL)


def _json_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value that begins at `start` and the offset where it ends."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise _Bad(f"the call is not valid JSON ({e.msg} at char {e.pos - start})") from None


def _mistral_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    i = text.find("[TOOL_CALLS]")
    while i >= 0:
        m = _MISTRAL_ARGS.match(text, i)
        if m is not None:
            args, end = _json_at(text, m.end())
            if not isinstance(args, dict):
                raise _Bad(f"the arguments of `{m.group(1)}` are not a JSON object")
            blocks.append((i, end, [(m.group(1), args)]))
        else:
            start = i + len("[TOOL_CALLS]")
            while start < len(text) and text[start].isspace():
                start += 1
            value, end = _json_at(text, start)
            blocks.append((i, end, [_named_json(v) for v in (value if isinstance(value, list) else [value])]))
        i = text.find("[TOOL_CALLS]", blocks[-1][1])
    return blocks, MISTRAL


def _prefixed_json_blocks(marker: str, closer: str, fmt: Format) -> Finder:
    """`<marker>` then one JSON call or a list of them (Llama's python tag, Granite, Command R)."""
    def find(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
        blocks: list[Block] = []
        i = text.find(marker)
        while i >= 0:
            start = i + len(marker)
            while start < len(text) and text[start].isspace():
                start += 1
            value, end = _json_at(text, start)
            calls = [_named_json(v) for v in (value if isinstance(value, list) else [value])]
            rest = text[end:].lstrip()
            if closer and rest.startswith(closer):
                end = len(text) - len(rest) + len(closer)
            elif marker == "<|python_tag|>" and rest.startswith(";"):  # several calls, `;` between them
                end = len(text) - len(rest)
            blocks.append((i, end, calls))
            i = text.find(marker, end)
        return blocks, fmt
    return find


_HARMONY = re.compile(r"(?:<\|start\|>\s*assistant\s*)?(?:<\|channel\|>\s*\w+\s*)?to=functions\.([\w.-]+)[^<]*"
                      r"(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>")


def _harmony_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for m in _HARMONY.finditer(text):
        value, end = _json_at(text, m.end())
        if not isinstance(value, dict):
            raise _Bad(f"the arguments of `{m.group(1)}` are not a JSON object")
        rest = text[end:]
        end += len(rest) - len(rest.lstrip()) + (len("<|call|>") if rest.lstrip().startswith("<|call|>") else 0)
        blocks.append((m.start(), end, [(m.group(1), value)]))
    if not blocks:
        raise _Bad("`to=functions.NAME` is not followed by `<|message|>` and the JSON arguments")
    return blocks, HARMONY


def _invoke_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    return [(m.start(), m.end(), _invoke_calls(m.group(0), schemas)) for m in _INVOKE.finditer(text)], INVOKE


def _prefixed(qid: str) -> Finder:
    f = _TEXT_FORMATS[qid]
    return _prefixed_json_blocks(f.markers[0], f.closer, _format(qid))


# The finder of each format that has markers of its own (the others are found inside these).
_FIND: dict[str, Finder] = {
    "text.deepseek": _deepseek_blocks, "text.kimi": _kimi_blocks, "text.hermes": _tool_call_blocks,
    "text.qwen3-coder": _bare_function_blocks, "text.invoke": _invoke_blocks, "text.mistral": _mistral_blocks,
    "text.llama": _prefixed("text.llama"), "text.granite": _prefixed("text.granite"),
    "text.command-r": _prefixed("text.command-r"), "text.harmony": _harmony_blocks,
}
# Each format with the markers that announce it, tried in the table's order: the special-token
# formats first (their tokens never stand in a Markdown example, so they are looked for in the
# text as it is; DeepSeek's wrap the arguments in a fence of their own).
_FINDERS: tuple[tuple[tuple[str, ...], bool, Format, Finder], ...] = tuple(
    (f.markers, f.special, _format(qid), _FIND[qid]) for qid, f in _TEXT_FORMATS.items() if f.markers)


def _unfenced(text: str) -> str:
    """`text` with each Markdown code block and inline code span blanked out (same length, so
    offsets hold): a call shown there is an example, not a call."""
    def blank(m: re.Match[str]) -> str:
        return " " * len(m.group(0))

    return _INLINE_CODE.sub(blank, _FENCE.sub(blank, text))


def schemas_of(tools: Sequence[dict[str, Any]]) -> Schemas:
    out: Schemas = {}
    for spec in tools:
        fn = spec.get("function") if isinstance(spec.get("function"), dict) else spec
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def recover(text: str, tools: Sequence[dict[str, Any]]) -> Recovery:
    """The calls `text` writes out, when it holds whole blocks of one known format naming
    offered tools (every block must: a call of a tool that was not offered is not run, and
    then none of the answer's calls are); the text around them is kept. With no tools
    offered nothing is read. A block that looks like a call but is not one gives `problem`."""
    if not tools or not text:
        return Recovery(text=text)
    schemas = schemas_of(tools)
    plain = _unfenced(text)
    for markers, special, fmt, find in _FINDERS:
        seen = text if special else plain
        if not any(mk in seen for mk in markers):
            continue
        try:
            blocks, fmt = find(seen, schemas)
        except _Bad as e:
            return Recovery(text=text, format=e.fmt or fmt, problem=str(e))
        if not blocks:
            return Recovery(text=text, format=fmt, problem="no whole call could be read from it")
        calls = [c for _, _, cs in blocks for c in cs]
        for name, _ in calls:
            if name not in schemas and name.rsplit(".", 1)[-1] not in schemas:
                offered = ", ".join(sorted(schemas))
                return Recovery(text=text, format=fmt, problem=f"`{name}` is not a tool here (the tools are: {offered})")
        calls = [(name if name in schemas else name.rsplit(".", 1)[-1], args) for name, args in calls]
        kept, at = [], 0
        for start, end, _ in blocks:
            kept.append(text[at:start])
            at = end
        kept.append(text[at:])
        return Recovery(calls=calls, text="".join(kept).strip(), format=fmt)
    whole = _whole_json_call(text.strip(), schemas)
    if whole:
        return Recovery(calls=whole, text="", format=LLAMA)
    return Recovery(text=text)


def _whole_json_call(text: str, schemas: Schemas) -> list[tuple[str, dict[str, Any]]]:
    """An answer that is nothing but `{"name": <an offered tool>, "parameters"|"arguments": {...}}`
    (Llama 3.x's JSON calls when no parser catches them), or a list of such."""
    if not text.startswith(("{", "[")):
        return []
    try:
        value = json.loads(text)
        items = value if isinstance(value, list) else [value]
        calls = [_named_json(v) for v in items]
    except (ValueError, _Bad):
        return []
    keys_ok = all(isinstance(v, dict) and set(v) <= {"name", "arguments", "parameters", "type", "id"} for v in items)
    if not calls or not keys_ok or any(name not in schemas for name, _ in calls):
        return []
    return calls


def as_tool_calls(found: Recovery) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(args, ensure_ascii=False))
                 for name, args in found.calls)


def attempted(text: str, tool_names: Sequence[str]) -> str | None:
    """When `text` (an answer that ended the turn) holds what looks like a call written as
    text that could not be taken: the error for the model, naming the format to write; None
    when it holds none."""
    found = recover(text, [{"name": n, "parameters": {}} for n in tool_names]) if tool_names else Recovery()
    if found.format is None or found.calls:
        return None
    fmt = found.format
    return (f"ERROR: your answer holds what looks like a tool call written as text ({fmt.name}), and it could not be "
            f"run: {found.problem}. Nothing was run. Call tools through the API's tool calls; if you write a call as "
            f"text, write it whole, in this form:\n{fmt.example}")


@dataclass
class TextCallCheck:
    """A turn hook (`agent.TurnHooks`): an answer that would end the turn while it holds a
    call written as text that could not be run goes back to the model as the error
    `attempted` gives, at most `retries` times in one turn; past that the turn ends with the
    answer as it is, and a warning says why."""

    tool_names: Callable[[], Sequence[str]]  # the tools the model is offered now
    retries: int
    warn: Callable[[str], None] = lambda text: None
    _sent: int = field(default=0, init=False)

    async def prompt_submitted(self, prompt: str) -> str | None:
        self._sent = 0
        return prompt

    async def stopping(self, answer: str) -> str | None:
        error = attempted(answer, list(self.tool_names()))
        if error is None:
            return None
        if self._sent >= self.retries:
            self.warn(f"the answer holds a tool call written as text that could not be run; it was sent back "
                      f"{self._sent} time{'s' if self._sent != 1 else ''} (limit text_call_retries), so the turn ends "
                      "with the answer as it is")
            return None
        self._sent += 1
        return error

    async def settled(self) -> None:
        return None

    async def ended(self) -> None:
        return None


# --------------------------------------------------------------------------------------
# streaming: text from the first marker on is held until the answer is complete


class TextHold:
    """Passes streamed text on until a call format's marker appears (or could be starting at
    the end of what came), then holds the rest: recovered calls are not shown as text, and
    `release()` hands on what was held when it was not a call after all."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self.held = ""
        self.holding = False

    def feed(self, piece: str) -> None:
        if self.holding:
            self.held += piece
            return
        text = self.held + piece
        at = min((i for mk in MARKERS if (i := text.find(mk)) >= 0), default=-1)
        if at >= 0:
            self.holding = True
            self._pass(text[:at])
            self.held = text[at:]
            return
        keep = max((n for mk in MARKERS for n in range(1, len(mk)) if text.endswith(mk[:n])), default=0)
        self._pass(text[:len(text) - keep])
        self.held = text[len(text) - keep:]

    def _pass(self, text: str) -> None:
        if text:
            self.sink(text)

    def release(self) -> None:
        held, self.held, self.holding = self.held, "", False
        self._pass(held)


__all__ = ["MARKERS", "Format", "Recovery", "TextCallCheck", "TextHold", "as_tool_calls", "attempted", "recover",
           "schemas_of"]
