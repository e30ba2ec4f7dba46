"""The README's reference tables, generated from the code: tools, limits and config keys.

`python -m nanohermes.reference` prints the three tables; `--write README.md` replaces the
sections between `<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->`.
A test regenerates them and fails when the README no longer matches the code.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from nanohermes import budget
from nanohermes.budget import Limits
from nanohermes.config import Config, Section, default_of, section_fields, section_types
from nanohermes.tools import Tool, build_tools


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _params(tool: Tool) -> str:
    schema = tool.spec()["function"]["parameters"]
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        if name in required:
            out.append(f"`{name}`")
        elif "default" in prop:
            out.append(f"`[{name}={_short(prop['default'])}]`")
        else:
            out.append(f"`[{name}]`")
    return ", ".join(out) or "(none)"


def _short(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def tools_table() -> str:
    from nanohermes.ui.render import flag, limit_text

    limits = Limits()
    rows = ["| tool | group | parameters | read-only | parallel | asks | own limit |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in build_tools():
        asks = "per host" if t.kind == "host" else {"never": "no", "edit": "edits", "always": "yes"}[t.approval]
        rows.append(f"| `{t.name}` | {t.group} | {_cell(_params(t))} | {flag(t, 'read_only')} | "
                    f"{flag(t, 'concurrency_safe')} | {asks} | {_cell(limit_text(t.output_limit(), limits))} |")
    return "\n".join(rows)


_FIELD = re.compile(r"^    (\w+): [^=]+= (.+?)(?:  # (.*))?$")


def limits_table() -> str:
    """Each Limits field with its default as written in budget.py and the comment beside it."""
    rows = ["| limit | default | what it bounds |", "| --- | --- | --- |"]
    source = inspect.getsource(budget.Limits)
    for line in source.splitlines():
        m = _FIELD.match(line)
        if m and m.group(1) in Limits.names():
            rows.append(f"| `{m.group(1)}` | `{m.group(2).strip()}` | {_cell(m.group(3) or '')} |")
    return "\n".join(rows)


def _type_name(ann: Any) -> str:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return "one of: " + ", ".join(str(a) for a in args)
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return "one of: " + ", ".join(str(m.value) for m in ann)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    return "null" if ann is type(None) else getattr(ann, "__name__", str(ann))


def _model(ann: Any) -> type[Section] | None:
    return ann if isinstance(ann, type) and issubclass(ann, Section) else None


def _dict_of_model(ann: Any) -> type[Section] | None:
    if typing.get_origin(ann) is dict:
        return _model(typing.get_args(ann)[1])
    return None


def _config_rows(model: type[Section], prefix: str) -> list[str]:
    rows = []
    types = section_types(model)
    for name, f in section_fields(model).items():
        key, ann, text = prefix + name, types[name], f.metadata.get("description", "")
        if sub := _model(ann):
            rows.extend(_config_rows(sub, key + "."))
            continue
        if sub := _dict_of_model(ann):
            placeholder = {"servers": "<server>", "subagents": "<name>", "prices": "<model>"}.get(name, "<name>")
            rows.append(f"| `{key}` | object | `{{}}` | {_cell(text)} |")
            rows.extend(_config_rows(sub, f"{key}.{placeholder}."))
            continue
        value = default_of(f)
        default = "required" if value is dataclasses.MISSING else f"`{_json_default(value)}`"
        rows.append(f"| `{key}` | {_cell(_type_name(ann))} | {_cell(default)} | {_cell(text)} |")
    return rows


def _json_default(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "…"


def config_table() -> str:
    return "\n".join(["| key | type | default | meaning |", "| --- | --- | --- | --- |", *_config_rows(Config, "")])


SECTIONS = {"tools": tools_table, "limits": limits_table, "config": config_table}


def render_into(text: str) -> str:
    """The text with every generated section replaced by fresh output."""
    for name, make in SECTIONS.items():
        begin, end = f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"
        if begin not in text or end not in text:
            raise ValueError(f"missing the {name} markers ({begin} … {end})")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{make()}\n{end}{tail}"
    return text


def main(argv: list[str]) -> int:
    if argv[:1] == ["--write"] and len(argv) == 2:
        path = Path(argv[1])
        path.write_text(render_into(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    for name, make in SECTIONS.items():
        print(f"## {name}\n\n{make()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
