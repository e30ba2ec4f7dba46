"""What every finder of a call written as text shares: the formats (from the quirk table's
`text.*` entries), `Bad` for a block that cannot be taken, and the readings of what a call
holds: argument values taken by the type the tool's schema gives them, JSON, XML and Python
call values, Gemma 4's argument syntax, and whether a named tool is offered and its arguments fit."""

from __future__ import annotations

import ast
import json
import math
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
    """A text call format as the model is told of it: its name and a whole call in it."""

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


def xml_value(raw: str) -> str:
    """A value between tags: one line break the template puts after the opening tag and before
    the closing one is not part of it."""
    return raw.removeprefix("\n").removesuffix("\n")


def json_object(text: str, what: str) -> dict[str, Any]:
    """`text` read as a JSON object (the arguments of a call), or Bad naming `what` it was."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Bad(f"the {what} are not valid JSON ({e.msg}: char {e.pos})") from None
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
        args = json_object(args, "arguments") if args.strip() else {}
    if not isinstance(args, dict):
        raise Bad(f'the arguments of `{name}` are not a JSON object')
    return name, args


def json_calls(text: str) -> list[Call]:
    """One call object or a list of them, as JSON text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Bad(f"the call is not valid JSON ({e.msg}: char {e.pos})") from None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Bad("the call list is empty")
    return [named_json(item) for item in items]


def json_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value that begins at `start` and the offset where it ends."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise Bad(f"the call is not valid JSON ({e.msg}: char {e.pos - start})") from None


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


def python_call(node: ast.expr) -> Call:
    """A Python call of a tool, its arguments given by name as literals; Bad otherwise."""

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print" and \
            len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    if not isinstance(node, ast.Call):
        raise Bad("it holds Python that is not a call of a tool")
    name = called(node.func)
    if not name:
        raise Bad("a call names no tool")
    if node.args:
        raise Bad(f"the arguments of `{name}` must be given by name (`{name}(path=\"a.py\")`)")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise Bad(f"the arguments of `{name}` must be given by name")
        try:
            args[kw.arg] = json_value(ast.literal_eval(kw.value))
        except (ValueError, SyntaxError):
            raise Bad(f"the argument `{kw.arg}` of `{name}` is not a literal value") from None
        except TypeError as e:
            raise Bad(f"the argument `{kw.arg}` of `{name}` is {e}, which no tool takes: write text, numbers, "
                      "true/false, None, lists and dicts") from None
    return name, args


def json_value(value: Any) -> Any:
    """A Python literal as the JSON value it stands for (a tuple is a list); TypeError naming
    what has none (bytes, a set, a complex or infinite number, a dict keyed by other than text)."""

    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: json_value(v) for k, v in value.items()}
    what = "an infinite number" if isinstance(value, float) else \
        "a dict keyed by other than text" if isinstance(value, dict) else f"a {type(value).__name__} value"
    raise TypeError(what)


def called(func: ast.expr) -> str:
    """The name a Python call calls (`read_file`, `default_api.read_file`), "" for another callee."""

    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


_GEMMA4_STRING = re.compile(r'<\|"\|>(.*?)<\|"\|>', re.DOTALL)
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_]\w*)\s*:")


def gemma4_args(text: str) -> Any:
    """Gemma 4's argument object (bare keys, strings between `<|"|>` delimiters) read as JSON."""
    strings: list[str] = []

    def stash(m: re.Match[str]) -> str:
        strings.append(m.group(1))
        return f"\x00{len(strings) - 1}\x00"

    body = _BARE_KEY.sub(r'\1"\2":', _GEMMA4_STRING.sub(stash, text))
    body = re.sub("\x00(\\d+)\x00", lambda m: json.dumps(strings[int(m.group(1))]), body)
    return json.loads(body)
