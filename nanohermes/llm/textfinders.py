"""How each format of a call written as text is found in an answer, and where the answer thinks.

One finder per entry of the quirk table's text call formats (`nanohermes.llm.quirks`, `text.*`),
keyed by the entry's id: `FIND` for the formats with markers of their own, `TAILS` for those
without one (a bare JSON call, a pythonic list, GLM-4's name and JSON), which count where they
end the answer (a JSON call in prose too, when it is a complete call of an offered tool). A
finder gives the blocks it found, each (start, end, calls), and the format it read, or raises
`Bad` for a block of its format that cannot be taken, with the reason.
`thinking` gives the spans of an answer that are the model's thinking (`<think>`, `<seed:think>`,
`[THINK]`, Gemma 4's thought channel, Harmony's analysis channel): a call there is a draft.
`llm.textcalls` decides what is taken; nothing here looks at anything but the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nanohermes.llm.quirks import TextFormat, entries

if TYPE_CHECKING:
    import ast

TEXT_FORMATS = {q.id: f for q, f in entries(TextFormat)}


@dataclass(frozen=True)
class Format:
    name: str  # what the model is told its format is
    example: str  # a whole, well-formed call in it, for the error that asks for one


def format_of(qid: str) -> Format:
    f = TEXT_FORMATS[qid]
    return Format(f.name, f.example)


class Bad(ValueError):
    """A block of a known format that cannot be taken as a call: the reason, and the format
    when it is not the one its marker announced (a `<tool_call>` holding XML)."""

    def __init__(self, reason: str, fmt: Format | None = None) -> None:
        super().__init__(reason)
        self.fmt = fmt


Call = tuple[str, dict[str, Any]]
Block = tuple[int, int, list[Call]]
Schemas = dict[str, dict[str, Any]]
Finder = Callable[[str, Schemas], tuple[list[Block], Format]]

HERMES, QWEN_XML, INVOKE, GLM = (format_of(q) for q in ("text.hermes", "text.qwen3-coder", "text.invoke", "text.glm"))
FUNCTIONARY, JSON_CALL = format_of("text.functionary"), format_of("text.json")


# --------------------------------------------------------------------------------------
# where the answer thinks: spans whose calls are drafts

# (opening, closing) of thinking written into the answer's text.
_THINK_TAGS = (("<think>", "</think>"), ("<seed:think>", "</seed:think>"), ("<thinking>", "</thinking>"),
               ("[THINK]", "[/THINK]"), ("<|channel>", "<channel|>"))
# A Harmony message on the analysis channel, its header from `<|start|>` (a recipient there or
# after the channel changes nothing: the analysis channel is thinking, whoever it addresses).
_ANALYSIS = re.compile(r"(?:<\|start\|>[^<]*)?<\|channel\|>\s*analysis\b[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
                       r".*?(?:<\|end\|>|<\|call\|>|(?=<\|start\|>)|\Z)", re.DOTALL)


def thinking(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that are thinking: between a tag and its closing one (to the end
    when it is not closed; from the start for a closing tag with no opening one, as when the
    template put the opening tag in the prompt), and Harmony's analysis messages."""
    # quirk: reasoning.think-tags
    spans: list[tuple[int, int]] = []
    for opening, closing in _THINK_TAGS:
        first_open, first_close = text.find(opening), text.find(closing)
        if first_close >= 0 and (first_open < 0 or first_close < first_open):
            spans.append((0, first_close + len(closing)))
        at = text.find(opening)
        while at >= 0:
            end = text.find(closing, at + len(opening))
            stop = len(text) if end < 0 else end + len(closing)
            spans.append((at, stop))
            at = text.find(opening, stop)
    spans += [(m.start(), m.end()) for m in _ANALYSIS.finditer(text)]
    return sorted(spans)


def blank(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span blanked out (same length, so offsets hold; line breaks kept)."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def thought(text: str) -> str:
    """The text of `text`'s thinking spans, one after the other."""
    return "\n".join(text[s:e] for s, e in thinking(text))


# --------------------------------------------------------------------------------------
# argument values written as text: taken by the type the tool's schema gives them


def typed(value: str, schema: dict[str, Any]) -> Any:
    """A parameter value written as text, as the type its schema names (a value that does
    not read as that type is kept as text: the tool's own validation then names it)."""
    kind = schema.get("type")
    if kind in (None, "string"):
        return value
    stripped = value.strip()
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
    return value


def _xml_value(raw: str) -> str:
    """A value between tags: one line break the template puts after the opening tag and before
    the closing one is not part of it."""
    return raw.removeprefix("\n").removesuffix("\n")


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Bad(f"the {what} are not valid JSON ({e.msg} at char {e.pos})") from None
    if isinstance(value, str):  # arguments encoded twice
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if not isinstance(value, dict):
        raise Bad(f"the {what} are not a JSON object")
    return value


def named_json(obj: Any) -> Call:
    """`{"name": ..., "arguments"|"parameters": {...}}` (Command R: `tool_name`), or the API's own
    shape copied into the text (`{"type": "function", "function": {"name": ..., "arguments": ...}}`)."""
    if not isinstance(obj, dict):
        raise Bad("a call is not a JSON object")
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]
    name = obj.get("name", obj.get("tool_name"))
    if not isinstance(name, str) or not name:
        raise Bad('a call has no "name"')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        args = _json_object(args, "arguments") if args.strip() else {}
    if not isinstance(args, dict):
        raise Bad(f'the arguments of `{name}` are not a JSON object')
    return name, args


def _json_calls(text: str) -> list[Call]:
    """One call object or a list of them, as JSON text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Bad(f"the call is not valid JSON ({e.msg} at char {e.pos})") from None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Bad("the call list is empty")
    return [named_json(item) for item in items]


def json_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value that begins at `start` and the offset where it ends."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise Bad(f"the call is not valid JSON ({e.msg} at char {e.pos - start})") from None


def offered(name: str, schemas: Schemas) -> str:
    """The tool of `schemas` a call names ("" for none): as written, or without the namespace
    models put before it (`functions.read_file`)."""
    return name if name in schemas else short if (short := name.rsplit(".", 1)[-1]) in schemas else ""


def fits(name: str, args: dict[str, Any], schemas: Schemas) -> str:
    """What keeps `args` from being a complete argument object of tool `name` ("" when they
    are one): a required parameter missing, or one the tool does not have."""
    schema = schemas.get(name) or {}
    props = schema.get("properties")
    missing = [k for k in schema.get("required", ()) if k not in args]
    unknown = [k for k in args if isinstance(props, dict) and props and k not in props]
    if missing:
        return f"`{name}` needs `{missing[0]}`"
    if unknown and schema.get("additionalProperties") is not True:
        return f"`{name}` has no parameter `{unknown[0]}`"
    return ""


# --------------------------------------------------------------------------------------
# the formats with markers: each finds its blocks in the text, as (start, end, calls)

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
        args[key] = typed(_xml_value(m.group(2)), props.get(key, {}))
    return args


def _tool_call_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """`<tool_call>` blocks: Hermes JSON, Qwen3-Coder XML or GLM's arg_key/arg_value inside."""
    blocks: list[Block] = []
    fmt = HERMES
    for m in _TOOL_CALL.finditer(text):
        body = m.group(1)
        if not m.group(0).endswith("</tool_call>") and body.strip().startswith("{") and not body.rstrip().endswith("}"):
            raise Bad("the `<tool_call>` block is not closed (was the answer cut off?)")
        inner = body.strip()
        if inner.startswith("{"):
            blocks.append((m.start(), m.end(), _json_calls(inner)))
        elif "<function=" in inner:
            fmt = QWEN_XML
            fn = _QWEN_FUNCTION.search(inner)
            if fn is None:
                raise Bad("the `<function=...>` has no closing `</function>`", QWEN_XML)
            name = fn.group(1)
            blocks.append((m.start(), m.end(), [(name, _params(fn.group(2), _QWEN_PARAM, schemas.get(name, {})))]))
        elif "<invoke" in inner:
            fmt = INVOKE
            blocks += [(m.start(), m.end(), _invoke_calls(inner, schemas))]
        elif "<arg_key>" in inner or re.fullmatch(r"[\w.-]+", inner):
            fmt = GLM
            name = inner.split("<arg_key>", 1)[0].strip()
            if not re.fullmatch(r"[\w.-]+", name):
                raise Bad("the `<tool_call>` block does not start with the tool's name", GLM)
            blocks.append((m.start(), m.end(), [(name, _params(inner, _GLM_ARG, schemas.get(name, {})))]))
        else:
            raise Bad("the `<tool_call>` block holds neither a JSON call nor a `<function=...>`")
    return blocks, fmt


def _invoke_calls(text: str, schemas: Schemas) -> list[Call]:
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
        raise Bad("the `<function=...>` has no closing `</function>`")
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
            raise Bad("the tool-call tokens do not hold a whole call (each needs its end token, and the list its "
                      "closing token)")
        blocks.append((section.start(), section.end(), calls))
    return blocks, format_of("text.deepseek")


# Kimi writes the section token plural or singular (`tool_call_section_begin`).
_KIMI_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>(.*?)(?:<\|tool_calls?_section_end\|>|\Z)", re.DOTALL)
_KIMI_CALL = re.compile(r"<\|tool_call_begin\|>\s*(?:functions\.)?([\w.-]+?)(?::\d+)?\s*<\|tool_call_argument_begin\|>"
                        r"\s*(.*?)\s*<\|tool_call_end\|>", re.DOTALL)


def _kimi_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for section in _KIMI_SECTION.finditer(text):
        calls = [(m.group(1), _json_object(m.group(2), f"arguments of `{m.group(1)}`"))
                 for m in _KIMI_CALL.finditer(section.group(1))]
        if not calls or not section.group(0).endswith(("<|tool_calls_section_end|>", "<|tool_call_section_end|>")):
            raise Bad("the tool-call section does not hold a whole call (each needs `<|tool_call_end|>`, the "
                      "section `<|tool_calls_section_end|>`)")
        blocks.append((section.start(), section.end(), calls))
    return blocks, format_of("text.kimi")


# Kimi K3's XTML: a `tools` channel of `call` blocks of typed `argument`s; the answer's text
# may come wrapped in a `response` channel, whose markers are no part of it.
_K3_TOOLS = re.compile(r"<\|open\|>\s*tools\s*<\|sep\|>(.*?)(<\|close\|>\s*tools\s*<\|sep\|>|\Z)", re.DOTALL)
_K3_CALL = re.compile(r"<\|open\|>\s*call\s+((?:(?!<\|sep\|>).)*?)<\|sep\|>(.*?)<\|close\|>\s*call\s*<\|sep\|>", re.DOTALL)
_K3_ARG = re.compile(r"<\|open\|>\s*argument\s+((?:(?!<\|sep\|>).)*?)<\|sep\|>(.*?)<\|close\|>\s*argument\s*<\|sep\|>",
                     re.DOTALL)
_K3_WRAP = re.compile(r"<\|(?:open|close)\|>\s*response\s*<\|sep\|>|<\|close\|>\s*message\s*<\|sep\|>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def _attrs(text: str) -> dict[str, str]:
    return {k: v.replace("&quot;", '"').replace("&amp;", "&") for k, v in _ATTR.findall(text)}


def _k3_value(attrs: dict[str, str], raw: str) -> Any:
    if attrs.get("type", "string") == "string":
        return raw  # written raw by the template
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _kimi3_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for channel in _K3_TOOLS.finditer(text):
        if not channel.group(2):
            raise Bad("the `<|open|>tools<|sep|>` channel is not closed with `<|close|>tools<|sep|>`")
        calls = []
        for m in _K3_CALL.finditer(channel.group(1)):
            name = _attrs(m.group(1)).get("tool", "")
            if not name:
                raise Bad("a `call` names no `tool=`")
            args = {(a := _attrs(arg.group(1))).get("key", ""): _k3_value(a, arg.group(2))
                    for arg in _K3_ARG.finditer(m.group(2))}
            calls.append((name, args))
        if not calls:
            raise Bad("the tools channel holds no whole `call` (each ends with `<|close|>call<|sep|>`)")
        blocks.append((channel.start(), channel.end(), calls))
    blocks += [(m.start(), m.end(), []) for m in _K3_WRAP.finditer(text)]  # the response channel's markers
    return sorted(blocks), format_of("text.kimi-k3")


# Gemma 4: `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>`, bare keys, strings
# between `<|"|>` delimiters; the call is closed by `<turn|>` at times, and opened `:call:`.
_GEMMA4 = re.compile(r"<\|tool_call>\s*(.*?)(<tool_call\|>|<turn\|>|(?=<\|tool_call>)|\Z)", re.DOTALL)
_GEMMA4_STRING = re.compile(r'<\|"\|>(.*?)<\|"\|>', re.DOTALL)
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_]\w*)\s*:")


def _gemma4_args(text: str) -> Any:
    strings: list[str] = []

    def stash(m: re.Match[str]) -> str:
        strings.append(m.group(1))
        return f"\x00{len(strings) - 1}\x00"

    body = _BARE_KEY.sub(r'\1"\2":', _GEMMA4_STRING.sub(stash, text))
    body = re.sub("\x00(\\d+)\x00", lambda m: json.dumps(strings[int(m.group(1))]), body)
    return json.loads(body)


def _gemma4_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for m in _GEMMA4.finditer(text):
        call = re.match(r":?\s*call:\s*([\w.-]+)\s*(\{.*\})\s*\Z", m.group(1), re.DOTALL)
        if call is None:
            raise Bad("`<|tool_call>` is not followed by `call:NAME{...}`" +
                      ("" if m.group(2) else " and its closing `<tool_call|>`"))
        try:
            args = _gemma4_args(call.group(2))
        except json.JSONDecodeError as e:
            raise Bad(f"the arguments of `{call.group(1)}` cannot be read ({e.msg}); write each text between "
                      '`<|"|>` and `<|"|>`') from None
        if not isinstance(args, dict):
            raise Bad(f"the arguments of `{call.group(1)}` are not an object")
        blocks.append((m.start(), m.end(), [(call.group(1), args)]))
    return blocks, format_of("text.gemma4")


def _mistral_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    i = text.find("[TOOL_CALLS]")
    while i >= 0:
        m = _MISTRAL_ARGS.match(text, i)
        if m is not None:
            args, end = json_at(text, m.end())
            if not isinstance(args, dict):
                raise Bad(f"the arguments of `{m.group(1)}` are not a JSON object")
            blocks.append((i, end, [(m.group(1), args)]))
        else:
            start = i + len("[TOOL_CALLS]")
            while start < len(text) and text[start].isspace():
                start += 1
            value, end = json_at(text, start)
            blocks.append((i, end, [named_json(v) for v in (value if isinstance(value, list) else [value])]))
        i = text.find("[TOOL_CALLS]", blocks[-1][1])
    return blocks, format_of("text.mistral")


_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]\s*", re.DOTALL)


def _prefixed_json_blocks(marker: str, closer: str, fmt: Format) -> Finder:
    """`<marker>` then one JSON call or a list of them (Llama's python tag, Granite, Command R)."""
    def find(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
        blocks: list[Block] = []
        i = text.find(marker)
        while i >= 0:
            start = i + len(marker)
            while start < len(text) and text[start].isspace():
                start += 1
            value, end = json_at(text, start)
            calls = [named_json(v) for v in (value if isinstance(value, list) else [value])]
            while (more := re.compile(r"\s*;\s*(?=[\[{])").match(text, end)) is not None:  # several, `;` between
                value, end = json_at(text, more.end())
                calls += [named_json(v) for v in (value if isinstance(value, list) else [value])]
            rest = text[end:].lstrip()
            if closer and rest.startswith(closer):
                end = len(text) - len(rest) + len(closer)
            blocks.append((i, end, calls))
            i = text.find(marker, end)
        return blocks, fmt
    return find


# The recipient stands after the channel (`<|channel|>commentary to=functions.x`) or in the
# role header (`<|start|>assistant to=functions.x<|channel|>commentary`, some serializers write
# `commentary` for the role); the content type may come with `<|constrain|>` or alone (`commentary json`).
_HARMONY = re.compile(r"(?:<\|start\|>\s*)?(?:(?:assistant|commentary)\s*)?(?:to=functions\.(?P<a>[\w.-]+)\s*)?"
                      r"(?:<\|channel\|>\s*\w+\s*)?(?:to=functions\.(?P<b>[\w.-]+)\s*)?"
                      r"(?:<\|constrain\|>\s*\w+\s*|json\s*)?<\|message\|>")


def _harmony_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for m in _HARMONY.finditer(text):
        name = m.group("a") or m.group("b")
        if not name:
            continue  # a message to no function: text, or thinking
        value, end = json_at(text, m.end())
        if not isinstance(value, dict):
            raise Bad(f"the arguments of `{name}` are not a JSON object")
        rest = text[end:]
        end += len(rest) - len(rest.lstrip()) + (len("<|call|>") if rest.lstrip().startswith("<|call|>") else 0)
        blocks.append((m.start(), end, [(name, value)]))
    if not blocks:
        raise Bad("`to=functions.NAME` is not followed by `<|message|>` and the JSON arguments")
    return blocks, format_of("text.harmony")


def _invoke_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    return [(m.start(), m.end(), _invoke_calls(m.group(0), schemas)) for m in _INVOKE.finditer(text)], INVOKE


# Gemma's ```tool_code block: Python calls of the tools (`read_file(path="a")`, or
# `print(default_api.read_file(path="a"))`), one a line.
_TOOL_CODE = re.compile(r"^[ \t]*```tool_code[ \t]*\n(.*?)\n?[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)


def python_call(node: ast.expr) -> Call:
    """A Python call of a tool, its arguments given by name as literals; Bad otherwise."""
    import ast  # here: only an answer holding Python calls needs it

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print" and \
            len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    if not isinstance(node, ast.Call):
        raise Bad("it holds Python that is not a call of a tool")
    name = _called(node.func)
    if not name:
        raise Bad("a call names no tool")
    if node.args:
        raise Bad(f"the arguments of `{name}` must be given by name (`{name}(path=\"a.py\")`)")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise Bad(f"the arguments of `{name}` must be given by name")
        try:
            args[kw.arg] = _json_value(ast.literal_eval(kw.value))
        except (ValueError, SyntaxError):
            raise Bad(f"the argument `{kw.arg}` of `{name}` is not a literal value") from None
        except TypeError as e:
            raise Bad(f"the argument `{kw.arg}` of `{name}` is {e}, which no tool takes: write text, numbers, "
                      "true/false, None, lists and dicts") from None
    return name, args


def _json_value(value: Any) -> Any:
    """A Python literal as the JSON value it stands for (a tuple is a list); TypeError naming
    what has none (bytes, a set, a complex or infinite number, a dict keyed by other than text)."""
    import math

    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _json_value(v) for k, v in value.items()}
    what = "an infinite number" if isinstance(value, float) else \
        "a dict keyed by other than text" if isinstance(value, dict) else f"a {type(value).__name__} value"
    raise TypeError(what)


def _tool_code_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    import ast

    blocks: list[Block] = []
    for m in _TOOL_CODE.finditer(text):
        try:
            tree = ast.parse(m.group(1).strip())
        except SyntaxError as e:
            raise Bad(f"the ```tool_code block is not Python ({e.msg}); nanohermes runs no code from it, only calls "
                      "of its tools, one a line") from None
        if not tree.body or not all(isinstance(s, ast.Expr) for s in tree.body):
            raise Bad("the ```tool_code block holds Python that is not a call of a tool; nanohermes runs no code from "
                      "it (use run_command for that), only calls of its tools, one a line")
        values = [s.value for s in tree.body if isinstance(s, ast.Expr)]
        calls = [python_call(e) for v in values for e in (v.elts if isinstance(v, ast.List) else [v])]
        blocks.append((m.start(), m.end(), calls))
    if not blocks:
        raise Bad("the ```tool_code block is not closed with ```")
    return blocks, format_of("text.tool-code")


def _prefixed(qid: str) -> Finder:
    f = TEXT_FORMATS[qid]
    return _prefixed_json_blocks(f.markers[0], f.closer, format_of(qid))


# The finder of each format that has markers of its own (the others are found inside these).
FIND: dict[str, Finder] = {
    "text.deepseek": _deepseek_blocks, "text.kimi": _kimi_blocks, "text.kimi-k3": _kimi3_blocks,
    "text.gemma4": _gemma4_blocks, "text.tool-code": _tool_code_blocks, "text.hermes": _tool_call_blocks,
    "text.qwen3-coder": _bare_function_blocks, "text.invoke": _invoke_blocks, "text.mistral": _mistral_blocks,
    "text.llama": _prefixed("text.llama"), "text.granite": _prefixed("text.granite"),
    "text.command-r": _prefixed("text.command-r"), "text.harmony": _harmony_blocks,
}


# --------------------------------------------------------------------------------------
# the formats without a marker: taken where they end the answer (a complete JSON call in prose too)

# What may follow the last call: blanks and the tokens that end a turn or a call list.
_END = re.compile(r"(?:\s|<\|eom_id\|>|<\|eot_id\|>|<\|python_end\|>|<\|observation\|>|<\|end\|>|<\|endoftext\|>)*\Z")
# A JSON call object, or a list of them, begins: `{` then one of its keys, in any order
# (Llama writes `{"type": "function", "name": ...}` as often as `{"name": ...}`).
_CALL_KEYS = frozenset({"name", "tool_name", "arguments", "parameters", "type", "id", "function"})
CALL_OPENING = r'\{\s*"(?:name|tool_name|arguments|parameters|type|id|function)"\s*:'
_JSON_START = re.compile(r"(?:<\|python_start\|>\s*)?(?P<v>(?:\[\s*)?)" + CALL_OPENING)
_NEXT_CALL = re.compile(r"\s*;?\s*(?=[\[{])")


_ARGS_KEYS = frozenset({"arguments", "parameters", "function"})


def _json_call_value(text: str, at: int) -> tuple[list[Call], int, bool]:
    """The call object or list of them at `at`, where it ends, and whether each has the shape
    of a call (arguments beside its name, not only a name); Bad (or ValueError) when what
    stands there is no call."""
    value, end = json.JSONDecoder().raw_decode(text, at)
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, dict) and set(v) <= _CALL_KEYS for v in items):
        raise Bad("not calls")
    return [named_json(v) for v in items], end, all(_ARGS_KEYS & set(v) for v in items)


def _json_run(text: str, at: int) -> tuple[list[Call], int, bool]:
    """The calls of a run starting at `at`, several joined by `;` or blanks (Llama's parallel
    calls), where the run ends, and whether every one has the shape of a call."""
    calls, end, shaped = _json_call_value(text, at)
    while (nxt := _NEXT_CALL.match(text, end)) is not None:
        try:
            more, after, also = _json_call_value(text, nxt.end())
        except (ValueError, Bad):
            break
        calls, end, shaped = calls + more, after, shaped and also
    return calls, end, shaped


def _json_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """Llama's JSON calls (`{"name": ..., "parameters": {...}}`, several with `;` between, or a
    list), as Llama's parsers read them in prose: a run that ends the answer (then a call whose
    arguments do not fit goes back to the model, and so does one naming no tool here, Bad, when
    it has the shape of a call: a name and arguments), and, before it, each run whose every call
    names a tool of `schemas` with a complete argument object (an example of a call in prose
    names no tool here, or leaves arguments out)."""
    blocks: list[Block] = []
    after = 0
    for m in _JSON_START.finditer(text):
        if m.start() < after:
            continue
        try:
            calls, end, shaped = _json_run(text, m.start("v"))
        except (ValueError, Bad):
            continue
        if _END.match(text, end):
            unknown = [name for name, _ in calls if not offered(name, schemas)]
            if unknown and shaped and not blocks:
                raise Bad(f"`{unknown[0]}` is not a tool here (the tools are: {', '.join(sorted(schemas))})")
            # Otherwise a run naming no tool here is prose: an object that happens to have a name.
            return blocks + [(m.start(), len(text), calls)] * (not unknown), JSON_CALL
        if all(offered(name, schemas) and not fits(offered(name, schemas), args, schemas) for name, args in calls):
            blocks.append((m.start(), end, calls))
        after = end
    return blocks, JSON_CALL


_PYTHONIC_START = re.compile(r"(?:<\|python_start\|>\s*)?\[\s*[A-Za-z_][\w.]*\s*\(")


def _pythonic_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """A list of Python calls (`[read_file(path="a.py"), grep(pattern="x")]`) ending the answer;
    Bad when every one calls a tool of `schemas` but one cannot be read (an argument by
    position, bytes): a call that cannot run, not prose."""
    import ast

    end = _END.search(text)
    stop = end.start() if end else len(text)
    if not text[:stop].endswith("]"):
        return [], format_of("text.pythonic")
    for m in _PYTHONIC_START.finditer(text, 0, stop):
        start = text.index("[", m.start())
        try:
            tree = ast.parse(text[start:stop], mode="eval")
        except SyntaxError:
            continue
        if isinstance(tree.body, ast.List) and tree.body.elts:
            try:
                return [(m.start(), len(text), [python_call(e) for e in tree.body.elts])], format_of("text.pythonic")
            except Bad:
                if all(isinstance(e, ast.Call) and offered(_called(e.func), schemas) for e in tree.body.elts):
                    raise
                continue
    return [], format_of("text.pythonic")


def _called(func: ast.expr) -> str:
    """The name a Python call calls (`read_file`, `default_api.read_file`), "" for another callee."""
    import ast

    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


_GLM_CALL = re.compile(r"(?:<\|assistant\|>\s*|^)[ \t]*([A-Za-z_][\w.-]*)[ \t]*\n[ \t]*(?=\{)", re.MULTILINE)


def _glm0414_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """GLM-4-0414's calls: a line holding the tool's name, then its arguments as JSON, several
    joined by `<|assistant|>`, ending the answer (and `<|observation|>`)."""
    fmt = format_of("text.glm4-0414")
    for m in _GLM_CALL.finditer(text):
        calls: list[Call] = []
        at, here = m.start(), m
        try:
            while True:
                args, end = json.JSONDecoder().raw_decode(text, here.end())
                if not isinstance(args, dict):
                    raise Bad("not an object")
                calls.append((here.group(1), args))
                if _END.match(text, end):
                    return [(at, len(text), calls)], fmt
                nxt = _GLM_CALL.match(text, end + len(text[end:]) - len(text[end:].lstrip()))
                if nxt is None or not text[end:].lstrip().startswith("<|assistant|>"):
                    raise Bad("prose after it")
                here = nxt
        except (ValueError, Bad):
            continue
    return [], fmt


# Gemma 4's call with its tokens left out: `call:NAME{...}`, after the thought channel's end.
_GEMMA4_BARE = re.compile(r"(?<![\w.])call:([A-Za-z_][\w.-]*)(?=\{)")


def _braced_end(text: str, start: int) -> int:
    """Where the `{...}` opening at `start` ends (past its `}`), over `<|"|>` strings; Bad when
    it does not."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith('<|"|>', i):
            close = text.find('<|"|>', i + 5)
            if close < 0:
                break
            i = close + 5
            continue
        depth += (text[i] == "{") - (text[i] == "}")
        i += 1
        if depth == 0:
            return i
    raise Bad("the call's `{` is not closed")


def _gemma4_bare_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """Gemma 4's calls written without `<|tool_call>` (`call:NAME{...}`, one after another),
    ending the answer."""
    fmt = format_of("text.gemma4-bare")
    for m in _GEMMA4_BARE.finditer(text):
        calls: list[Call] = []
        here: re.Match[str] | None = m
        try:
            while here is not None:
                end = _braced_end(text, here.end())
                args = _gemma4_args(text[here.end():end])
                if not isinstance(args, dict):
                    raise Bad("not an object")
                calls.append((here.group(1), args))
                if _END.match(text, end):
                    return [(m.start(), len(text), calls)], fmt
                here = _GEMMA4_BARE.match(text, len(text) - len(text[end:].lstrip()))
        except (ValueError, Bad):
            continue
    return [], fmt


TAILS: dict[str, Finder] = {"text.json": _json_tail, "text.pythonic": _pythonic_tail, "text.glm4-0414": _glm0414_tail,
                            "text.gemma4-bare": _gemma4_bare_tail}


def json_anywhere(text: str, schemas: Schemas) -> list[Call]:
    """Every JSON call object in `text` that names a tool of `schemas` with a complete
    argument object, wherever it stands (for thinking, where a draft sits in prose)."""
    calls: list[Call] = []
    for m in re.finditer(CALL_OPENING, text):
        try:
            value, _ = json.JSONDecoder().raw_decode(text, m.start())
            name, args = named_json(value)
        except (ValueError, Bad):
            continue
        if (tool := offered(name, schemas)) and not fits(tool, args, schemas):
            calls.append((tool, args))
    return calls


__all__ = ["CALL_OPENING", "FIND", "TAILS", "TEXT_FORMATS", "Bad", "Block", "Call", "Finder", "Format", "Schemas", "blank",
           "fits", "format_of", "json_anywhere", "json_at", "named_json", "offered", "python_call", "thinking", "thought",
           "typed"]
