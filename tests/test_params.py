"""Tool parameters are plain dataclasses: building the pool and sending its specs imports no
pydantic, the schemas the model receives are the ones it always got, and the first parse
(which imports pydantic) reports bad arguments in the same words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from nanohermes.tools import Attempt, Approval, Params, Tool, ToolContext, ToolError, build_tools
from nanohermes.tools.files import ReadFile
from nanohermes.tools.shell import RunCommand

REPO = Path(__file__).resolve().parent.parent
# The schema of every built-in params class as the model received it while they were pydantic
# models, by qualified class name.
FIXTURE = Path(__file__).parent / "fixtures" / "param_schemas.json"

# Every params class of the tool modules (MCP server tools send the server's own schema): its
# schema as a start reads it (shipped with the package) and as pydantic renders it now.
RENDER = """
import importlib, json, pkgutil, sys
import nanohermes.tools as T
from nanohermes.tools import Params, params_schema
from nanohermes.tools.base import render_params_schema
for m in pkgutil.walk_packages(T.__path__, "nanohermes.tools."):
    importlib.import_module(m.name)
def subclasses(c):
    for s in c.__subclasses__():
        yield s
        yield from subclasses(s)
classes = [c for c in subclasses(Params) if c.__module__.startswith("nanohermes.tools") and c.__name__ != "McpArgs"]
print(json.dumps({f"{c.__module__}.{c.__qualname__}": params_schema(c) for c in classes}))
print(json.dumps({f"{c.__module__}.{c.__qualname__}": render_params_schema(c) for c in classes}))
"""

COLD_START = """
import json, sys
from nanohermes.tools.catalog import builtin_pool
tools = builtin_pool()
specs = [t.spec() for t in tools]
print(json.dumps({"pydantic": sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core")),
                  "tools": len(specs)}))
read_file = next(t for t in tools if t.name == "read_file")
errors = []
for raw in ({}, {"path": "a", "x": 1}, {"path": "a", "limit": "many"}, {"path": " "}, {"path": "a", "offset": 0}):
    try:
        read_file.parse(raw)
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
print(json.dumps({"errors": errors, "pydantic": "pydantic" in sys.modules}))
"""


def run(code: str, home: Path, cache: Path) -> list[Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home), "XDG_CACHE_HOME": str(cache)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def test_the_schemas_the_model_receives_are_unchanged(home: Path) -> None:
    want = json.loads(FIXTURE.read_text())
    shipped, rendered = run(RENDER, home, home / "cache")
    missing = sorted(set(want) - set(rendered))
    assert missing == [], "a params class was renamed or removed: its schema is in tests/fixtures/param_schemas.json"
    for name, schema in want.items():
        assert rendered[name] == schema, name
        assert shipped[name] == schema, name
    assert shipped == rendered


def test_a_start_builds_the_pool_and_its_specs_without_pydantic(home: Path) -> None:
    cache = home / "cache"
    first, then = run(COLD_START, home, cache)  # a fresh HOME: nothing kept from an earlier start
    assert first["pydantic"] == []
    assert first["tools"] == len(build_tools())
    assert not cache.exists()  # and it keeps nothing for a later one
    # The first parse imports pydantic and says what the model got wrong, as it always did.
    assert then["errors"] == [
        "ToolError: missing string field `path`",
        "ToolError: unknown field `x`",
        "ToolError: field `limit` must be an integer, not a string",
        "ToolError: path must not be empty",
        "ToolError: field `offset`: Input should be greater than or equal to 1",
    ]
    assert then["pydantic"] is True


def test_hooks_and_the_ui_see_the_stated_defaults_of_a_field_left_out() -> None:
    # A field left out is None inside ("not given"); what others see is the default the schema states.
    args = RunCommand().parse({"command": "ls"})
    assert args.timeout_secs is None
    assert args.dump() == {"command": "ls", "cwd": None, "timeout_secs": 120, "background": False}
    assert RunCommand().parse({"command": "ls", "timeout_secs": 0}).dump()["timeout_secs"] == 1
    assert ReadFile().parse({"path": "a"}).dump() == {"path": "a", "offset": 1, "limit": 2000}
    assert ReadFile().parse({"path": "a", "limit": 5}).dump() == {"path": "a", "offset": 1, "limit": 5}


def test_nested_entries_are_checked_like_the_params_that_hold_them() -> None:
    todo = next(t for t in build_tools() if t.name == "todo_write")
    with pytest.raises(ToolError, match=r"^unknown field `todos.0.when`$"):
        todo.parse({"todos": [{"content": "a", "status": "pending", "when": "now"}]})
    with pytest.raises(ToolError, match=r"^field `todos.0` must be an object, not a string$"):
        todo.parse({"todos": ["a"]})
    with pytest.raises(ToolError, match=r"^todo content must not be empty; describe the step$"):
        todo.parse({"todos": [{"content": "  ", "status": "pending"}]})
    assert todo.parse({"todos": [{"content": " a ", "status": "pending"}]}).todos[0].content == "a"


class Undecorated(Params):  # its fields would be lost: the dataclass decorator is missing
    path: str = ""


@dataclass(frozen=True, kw_only=True)
class Forgetful(Tool[Undecorated]):
    name: ClassVar[str] = "forgetful"
    description: ClassVar[str] = "has params that are not a dataclass of their own"
    params: ClassVar[type[Params]] = Undecorated
    approval: ClassVar[Approval] = "never"

    async def run(self, args: Undecorated, ctx: ToolContext, attempt: Attempt) -> str:
        return args.path


def test_a_params_class_without_its_dataclass_decorator_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"^Undecorated must be decorated with @dataclass\(frozen=True, kw_only=True\)$"):
        Forgetful().parse({"path": "a"})


def _params_classes() -> list[type[Params]]:
    """Every params class of the tool modules (MCP server tools send the server's own schema)."""
    import importlib
    import pkgutil

    import nanohermes.tools as package

    for m in pkgutil.walk_packages(package.__path__, "nanohermes.tools."):
        importlib.import_module(m.name)

    def below(c: type[Params]) -> list[type[Params]]:
        return [d for s in c.__subclasses__() for d in (s, *below(s))]

    return [c for c in below(Params) if c.__module__.startswith("nanohermes.tools") and c.__name__ != "McpArgs"]


# A value of each schema type that the params' own checks take, for the required fields.
_SAMPLE: dict[str, Any] = {"string": "a", "integer": 1, "boolean": False, "array": [], "object": {}}
_SAMPLE_OF: dict[str, Any] = {"url": "https://example.com/"}


def test_null_for_an_optional_field_of_any_params_is_the_field_left_out() -> None:
    from dataclasses import MISSING, fields

    from pydantic import ValidationError

    from nanohermes.tools import describe_validation, params_schema

    checked = 0
    for cls in _params_classes():
        schema = params_schema(cls)
        required = {name: _SAMPLE_OF.get(name, _SAMPLE[schema["properties"][name]["type"]])
                    for name in schema.get("required", [])}
        for f in fields(cls):
            if f.default is MISSING and f.default_factory is MISSING:  # required: null is refused, by name
                with pytest.raises(ValidationError) as e:
                    cls.validate({**required, f.name: None})
                assert f"field `{f.name}`" in describe_validation(e.value, cls), (cls, f.name)
                continue
            assert cls.validate({**required, f.name: None}) == cls.validate(required), (cls, f.name)
            checked += 1
    assert checked >= 20  # every built-in tool's optional fields, not a handful


@dataclass(frozen=True, kw_only=True)
class Step(Params):
    """A developer's note on a nested class: never sent."""

    text: str
    done: bool = False


@dataclass(frozen=True, kw_only=True)
class Plan(Params):
    """A developer's note on the params class: never sent."""

    steps: list[Step] = field(default_factory=list, metadata={"description": "What to do."})


def test_nested_optional_fields_take_null_and_no_class_docstring_reaches_the_schema() -> None:
    from nanohermes.tools import params_schema

    assert Plan.validate({"steps": [{"text": "a", "done": None}]}) == Plan(steps=[Step(text="a")])
    assert Plan.validate({"steps": None}) == Plan()
    schema = params_schema(Plan)
    assert "description" not in schema and "description" not in schema["properties"]["steps"]["items"]
    assert schema["properties"]["steps"]["description"] == "What to do."  # a field's own text stays
    for name, fixed in json.loads(FIXTURE.read_text()).items():
        assert "description" not in fixed, name


def test_argument_errors_name_the_nested_fields_type_with_its_article() -> None:
    todo = next(t for t in build_tools() if t.name == "todo_write")
    errors = []
    for raw in ({"todos": [{"content": "a"}]}, {"todos": "x"}, {"todos": None}, {"todos": [None]}):
        with pytest.raises(ToolError) as e:
            todo.parse(raw)
        errors.append(str(e.value))
    assert errors == ["missing string field `todos.0.status`", "field `todos` must be an array, not a string",
                      "field `todos` must be an array, not null", "field `todos.0` must be an object, not null"]
    with pytest.raises(ToolError, match=r"^field `limit` must be an integer, not a string$"):
        ReadFile().parse({"path": "a", "limit": "x"})


def test_the_cli_runs_calls_with_null_optional_arguments_and_sends_no_class_docstring(
        cli: Any, server: Any, workspace: Path) -> None:
    from nanohermes.testing import Reply, call, tool_reply

    (workspace / "a.txt").write_text("hello\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt", "offset": None, "limit": None}),
                          call("list_dir", {"path": None}),
                          call("grep", {"pattern": "hel", "regex": None, "case_insensitive": None}),
                          call("read_file", {"path": None})),
               Reply(text="done"))
    r = cli("-p", "go", "--no-session", server=server, config={"subagents": {"explore": {"description": "Finds"}}})
    assert r.code == 0, r.err
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert results == ["1\thello", "a.txt  6", "a.txt:1:hello", "ERROR: read_file: field `path` must be a string, not null"]
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in server.requests[0]["tools"]}
    assert sent["agent_list"] == {"additionalProperties": False, "properties": {}, "type": "object"}
    assert [name for name, schema in sent.items() if "description" in schema] == []
