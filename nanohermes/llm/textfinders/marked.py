"""The finders of the call formats that have markers of their own (`FIND`, keyed by the quirk
table's id): each finds its blocks in the text, as (start, end, calls), and the format it
read, or raises `Bad` for a block of its format that cannot be taken."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from nanohermes.llm.textfinders.common import (
    FUNCTIONARY,
    GLM,
    HERMES,
    INVOKE,
    QWEN_XML,
    TEXT_FORMATS,
    Bad,
    Block,
    Call,
    Finder,
    Format,
    Schemas,
    format_of,
    gemma4_args,
    json_at,
    json_calls,
    json_object,
    named_json,
    python_call,
    typed,
    xml_value,
)

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
        args[key] = typed(xml_value(m.group(2)), props.get(key, {}))
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
            blocks.append((m.start(), m.end(), json_calls(inner)))
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
            blocks.append((m.start(), m.end(), [(name, json_object(body.strip(), f"arguments of `{name}`"))]))
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
            calls.append((name, json_object(args, f"arguments of `{name}`")))
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
        calls = [(m.group(1), json_object(m.group(2), f"arguments of `{m.group(1)}`"))
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
def _gemma4_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    blocks: list[Block] = []
    for m in _GEMMA4.finditer(text):
        call = re.match(r":?\s*call:\s*([\w.-]+)\s*(\{.*\})\s*\Z", m.group(1), re.DOTALL)
        if call is None:
            raise Bad("`<|tool_call>` is not followed by `call:NAME{...}`" +
                      ("" if m.group(2) else " and its closing `<tool_call|>`"))
        try:
            args = gemma4_args(call.group(2))
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


def _tool_code_blocks(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
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
