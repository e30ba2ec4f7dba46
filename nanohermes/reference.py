"""The reference generated from the code: the tables of docs/ (tools, limits, config keys,
provider quirks), config.example.json, and the tool declarations the package ships
(`nanohermes/tools/declarations.json`, `tools/declared.py`).

`python -m nanohermes.reference` prints the four tables. `--write` (the `WRITE` command, run from
the repository's root) finds every file that holds a generated section, between
`<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->` (README.md and the Markdown
files of docs/), replaces each section with fresh output, and writes the example config: every
key with its default (every limit under `limits`), but where `EXAMPLES` shows a value worth
copying, and the shipped tool declarations. `--write FILE...` writes only those files (a `.json`
one is the example config, unless it is the declarations).
Tests regenerate them all and fail, naming that command, when a file no longer matches the code.
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

from nanohermes.common import budget
from nanohermes.common.budget import Limits
from nanohermes.config import Config, Section, default_of, section_fields, section_types
from nanohermes.llm.quirks import QUIRKS
from nanohermes.tools import Tool, build_tools
from nanohermes.tools.catalog import shipped_text


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
    # rich: only the tools table renders with it
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


def quirks_table() -> str:
    """Each provider quirk of `llm/quirks.py`: who it belongs to, on which wire, what it is and
    where it is documented."""

    rows = ["| quirk | providers | wire | kind | what | source |", "| --- | --- | --- | --- | --- | --- |"]
    for q in QUIRKS:
        source = f"<{q.source}>" if q.source.startswith("https://") else f"`{q.source}`"
        rows.append(f"| `{q.id}` | {_cell(', '.join(q.providers))} | {', '.join(q.wires)} | {q.kind} | "
                    f"{_cell(q.what)} | {source} |")
    return "\n".join(rows)


SECTIONS = {"tools": tools_table, "limits": limits_table, "config": config_table, "quirks": quirks_table}


# The command that regenerates every generated file, as the tests that check them say.
WRITE = "python -m nanohermes.reference --write"
EXAMPLE_CONFIG = "config.example.json"
# What the example config shows instead of a key's default: a value worth copying (defaults of
# these keys are empty or say nothing).
EXAMPLES: dict[str, Any] = {
    "permissions.allow": ["run_command(git log *)"],
    "permissions.deny": ["run_command(rm -rf *)"],
    "mcp.servers": {
        "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "env": {}, "cwd": None, "trusted": True},
        "docs": {"type": "http", "url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
        "legacy": {"type": "sse", "url": "${LEGACY_URL:-http://127.0.0.1:3001/sse}"},
    },
    "subagents": {
        "explore": {"description": "Finds where things are in the code and reports back",
                    "prompt": "Only read and search; never change files.",
                    "tools": ["read_file", "list_dir", "grep", "glob"], "model": None, "max_turns": 20},
    },
    "model_aliases": {"sonnet": "gpt-4.1", "opus": "o3", "haiku": "gpt-4.1-mini"},
    "prices": {"gpt-4.1-mini": {"input_per_mtok": 0.4, "output_per_mtok": 1.6}},
    "hooks.PreToolUse": [{"matcher": "run_command", "hooks": [{"type": "command", "command": "~/bin/check-command.sh",
                                                               "timeout": 60}]}],
    "hooks.PostToolUse": [{"matcher": "write_file|edit_file|apply_patch",
                           "hooks": [{"type": "command", "command": "ruff check --quiet ."}]}],
    "hooks.Notification": [{"hooks": [{"type": "command", "command": "notify-send nanohermes 'waiting for you'"}]}],
}
_WIDTH = 120  # the example's lines, as the code's


def _example_of(model: type[Section], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, f in section_fields(model).items():
        key, ann = prefix + name, section_types(model)[name]
        if key in EXAMPLES:
            out[name] = EXAMPLES[key]
        elif sub := _model(ann):
            out[name] = _example_of(sub, key + ".")
        elif key == "limits":  # every limit but those that are keys of their own, listed above
            defaults = Limits()
            out[name] = {n: getattr(defaults, n) for n in Limits.names() if n not in section_fields(Config)}
        else:
            out[name] = default_of(f)
    return out


def _spread(ann: Any, key: str) -> bool:
    """Whether a value is written one member a line even when it would fit on one: a section,
    a table of sections (servers, sub-agents, prices) and the limits."""
    return _model(ann) is not None or _dict_of_model(ann) is not None or key == "limits"


def _layout(value: Any, ann: Any, key: str, indent: int, lead: int) -> str:
    """`value` as JSON written from column `lead` of a line indented `indent`: on that line when
    it fits and need not be spread, else a member (or, for a list of plain values, as many as
    fit) a line."""
    inline = json.dumps(value, ensure_ascii=False)
    if not (value and isinstance(value, (dict, list))) or (not _spread(ann, key) and lead + len(inline) < _WIDTH):
        return inline
    pad, end = " " * (indent + 2), " " * indent
    if isinstance(value, dict):
        sub = _model(ann)
        types = section_types(sub) if sub else {}  # a table's entries are laid out as they fit
        rows = []
        for name, v in value.items():
            head = f"{pad}{json.dumps(name)}: "
            rows.append(head + _layout(v, types.get(name), f"{key}.{name}".lstrip("."), indent + 2, len(head)))
        return "{\n" + ",\n".join(rows) + "\n" + end + "}"
    if all(not isinstance(v, (dict, list)) for v in value):  # words, wrapped as a person would
        lines, line = [], ""
        for word in (json.dumps(v, ensure_ascii=False) for v in value):
            if line and lead + 1 + len(line) + len(", ") + len(word) + len("],") > _WIDTH:
                lines.append(line + ",")
                line = word
            else:
                line = f"{line}, {word}" if line else word
        lines.append(line)
        return "[" + ("\n" + " " * (lead + 1)).join(lines) + "]"
    rows = [pad + _layout(v, None, key, indent + 2, indent + 2) for v in value]
    return "[\n" + ",\n".join(rows) + "\n" + end + "]"


def config_example() -> str:
    """config.example.json as the code makes it."""
    return _layout(_example_of(Config, ""), Config, "", 0, 0) + "\n"


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"


def sections_in(text: str) -> list[str]:
    """The generated sections a text holds, by name (a section with one marker but not the
    other is an error naming both)."""
    found = []
    for name in SECTIONS:
        begin, end = _markers(name)
        if (begin in text) != (end in text):
            raise ValueError(f"the {name} section lacks one of its markers ({begin} … {end})")
        if begin in text:
            found.append(name)
    return found


def render_into(text: str) -> str:
    """The text with every generated section it holds replaced by fresh output."""
    for name in sections_in(text):
        begin, end = _markers(name)
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{SECTIONS[name]()}\n{end}{tail}"
    return text


def generated_files(root: Path) -> list[Path]:
    """Every file under `root` that the `WRITE` command regenerates: README.md and the docs
    that hold a generated section, and the example config."""
    candidates = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    docs = [p for p in candidates if p.is_file() and sections_in(p.read_text(encoding="utf-8"))]
    return [*docs, root / EXAMPLE_CONFIG]


DECLARATIONS = Path("nanohermes", "tools", "declarations.json")  # from the repository's root


def write(path: Path) -> None:
    """Regenerate one file: the shipped declarations, the example config, or a file's generated sections."""
    if path.name == DECLARATIONS.name:
        path.write_text(shipped_text(), encoding="utf-8")
        return
    if path.suffix == ".json":
        path.write_text(config_example(), encoding="utf-8")
        return
    text = path.read_text(encoding="utf-8")
    if not sections_in(text):
        raise ValueError(f"{path} holds no generated section; `{WRITE}` finds the files that do")
    path.write_text(render_into(text), encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--write"]:
        try:
            if len(argv) > 1:
                paths = [Path(name) for name in argv[1:]]
            else:
                paths = generated_files(Path.cwd())
                missing = set(SECTIONS) - {s for p in paths[:-1] for s in sections_in(p.read_text(encoding="utf-8"))}
                if missing:
                    raise ValueError(f"no file under {Path.cwd()} holds the {', '.join(sorted(missing))} section; "
                                     "run this from the repository's root")
                if (Path.cwd() / DECLARATIONS).parent.is_dir():  # the package's source is here too
                    paths.append(Path.cwd() / DECLARATIONS)
            for path in paths:
                write(path)
        except (OSError, ValueError) as e:
            print(f"nanohermes.reference: {e}", file=sys.stderr)
            return 2
        return 0
    for name, make in SECTIONS.items():
        print(f"## {name}\n\n{make()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
