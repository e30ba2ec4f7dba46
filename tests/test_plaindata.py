"""Tool arguments that already have their fields' types are built without pydantic, into what
pydantic builds from them; anything else is pydantic's to coerce or refuse, in its words. The
comparison runs over every params class of the built-in and conditional tools, each field
given values of its type, of other types, null, out of its bounds, and the class given a
field too many or too few; a `-p` run whose calls are plain loads no pydantic."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from pydantic import TypeAdapter, ValidationError

import nanohermes.tools
from nanohermes.common.plaindata import NOT_PLAIN, made
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Params, about, params_schema
from tool_support import run_python


def params_classes() -> list[type[Params]]:
    for info in pkgutil.walk_packages(nanohermes.tools.__path__, "nanohermes.tools."):
        importlib.import_module(info.name)

    def below(cls: type[Params]) -> list[type[Params]]:
        return [c for sub in cls.__subclasses__() for c in (sub, *below(sub))]
    # Only nanohermes's own: other test modules define params classes of their own (some
    # deliberately malformed), and which of them a worker has imported depends on the order.
    ours = {c for c in below(Params) if c.__module__.startswith("nanohermes.")}
    return sorted(ours, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def values(schema: dict[str, Any], name: str = "") -> list[Any]:
    """Values for a field `name` of `schema`: of its type (at and past its bounds), of other
    types, null; the first one valid (a URL for a field that takes one)."""
    if "anyOf" in schema:
        return [v for option in schema["anyOf"] for v in values(option, name)]
    kind = schema.get("type")
    if "enum" in schema:
        return [*schema["enum"], "none of them", 1]
    if kind == "string":
        return ["https://example.com/x" if "url" in name else "x", "", "  ", "a\ud800b", 5, 2.5, True, None, ["x"]]
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        return [low, low - 1, low + 1, 10**20, True, float(low + 1), 2.5, str(low + 1), None]
    if kind == "number":
        return [1.5, 2, True, "1.5", None]
    if kind == "boolean":
        return [True, False, 1, 0, "true", None]
    if kind == "array":
        item = values(schema.get("items", {}))
        return [[], item[:1], item, "x", None, {"a": 1}]
    if kind == "object":
        props = schema.get("properties")
        if props:
            whole = {k: values(v)[0] for k, v in props.items()}
            return [whole, {**whole, "extra": 1}, {}, "x", None]
        return [{}, {"a": "b"}, {"a": 1}, {"a": None}, [], "x", None]
    return ["x", 1, None, [], {}]


def cases(cls: type[Params]) -> list[Any]:
    schema = params_schema(cls)
    props: dict[str, Any] = schema["properties"]
    required = schema.get("required", [])
    base = {k: values(props[k], k)[0] for k in required}
    out: list[Any] = [base, {k: values(v, k)[0] for k, v in props.items()}, {**base, "unknown": 1}, [], "x"]
    out += [{k: v for k, v in base.items() if k != gone} for gone in required]
    out += [{**base, name: v} for name, sub in props.items() for v in values(sub, name)]
    return out


def pydantic_made(cls: type[Any], data: Any) -> Any:
    try:
        return TypeAdapter(cls).validate_python(data)
    except ValidationError:
        return NOT_PLAIN


def drops_nulls(cls: type[Any]) -> bool:
    return issubclass(cls, Params)


@pytest.mark.parametrize("cls", params_classes(), ids=lambda c: c.__qualname__)
def test_what_is_built_without_pydantic_is_what_pydantic_builds(cls: type[Params]) -> None:
    plain = 0
    for data in cases(cls):
        ours = made(cls, cls.prepare(data) if isinstance(data, dict) else data, drops_nulls)
        if ours is NOT_PLAIN:
            continue
        plain += 1
        theirs = pydantic_made(cls, cls.prepare(data))
        assert theirs is not NOT_PLAIN, f"built {ours!r} from {data!r}, which pydantic refuses"
        assert (ours, repr(ours)) == (theirs, repr(theirs)), data
    assert plain >= 2  # the arguments of its own types, at least: the common case is built here


@dataclass(frozen=True, kw_only=True)
class Inner:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    name: str
    size: int = 1


@dataclass(frozen=True, kw_only=True)
class Outer(Params):
    kind: Literal["a", "b"] = "a"
    items: list[Inner] = field(default_factory=list)
    weight: float = field(default=1.0, metadata=about("weight", ge=0.5, lt=3))
    tags: dict[str, list[str]] = field(default_factory=dict)
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Patterned(Params):
    word: str = field(metadata=about("a word", pattern="^[a-z]+$"))  # a constraint not read here


@pytest.mark.parametrize("data", [
    {}, {"kind": "b"}, {"kind": "c"}, {"items": [{"name": "x"}, {"name": "y", "size": 3}]},
    {"items": [{"name": "x", "size": None}]}, {"items": [{"name": "x", "other": 1}]}, {"items": [{}]},
    {"weight": 0.5}, {"weight": 0.4}, {"weight": 3.0}, {"weight": 2}, {"weight": True},
    {"tags": {"a": ["x", "y"]}}, {"tags": {"a": "x"}}, {"note": None}, {"kind": None}, {"note": "n"},
], ids=repr)
def test_nested_classes_literals_bounds_and_unions_agree_with_pydantic(data: dict[str, Any]) -> None:
    ours = made(Outer, data, drops_nulls)
    theirs = pydantic_made(Outer, data)
    assert ours is NOT_PLAIN or (ours, repr(ours)) == (theirs, repr(theirs))
    assert theirs is not NOT_PLAIN or ours is NOT_PLAIN


def test_the_common_cases_are_built_here_and_the_rest_left_to_pydantic() -> None:
    assert made(Outer, {"items": [{"name": "x"}], "weight": 1.5}, drops_nulls) == Outer(items=[Inner(name="x")],
                                                                                      weight=1.5)
    assert made(Outer, {"kind": None}, drops_nulls) == Outer()  # null: not given, for an optional field
    assert repr(made(Outer, {"weight": 2}, drops_nulls)) == repr(Outer(weight=2.0))  # a whole number, as a float
    for coerced in ({"weight": "2"}, {"items": [{"name": "x", "size": "2"}]}, {"note": 5}, {"weight": 10**400}):
        assert made(Outer, coerced, drops_nulls) is NOT_PLAIN
    assert made(Patterned, {"word": "abc"}, drops_nulls) is NOT_PLAIN  # a pattern is pydantic's to check


PROBE = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]
at_exit(lambda: print("pydantic loaded:", "pydantic" in sys.modules, file=sys.stderr))
from nanohermes.cli import main
main()
"""


def test_a_p_run_whose_calls_are_plain_loads_no_pydantic(home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("plover\n")
    script = [tool_reply(call("read_file", {"path": "notes.txt", "offset": 1}),
                         call("list_dir", {"path": None}), call("glob", {"pattern": "*.txt"})),
              tool_reply(call("todo_write", {"todos": [{"content": "read", "status": "completed"}]})),
              tool_reply(call("run_command", {"command": "echo hi", "timeout_secs": 30})),
              Reply(text="done")]
    with FakeServer(script) as server:
        p = run_python(PROBE, home, "-p", "go", "--yes", "--base-url", server.base_url, "--model", "fake-model",
                       cwd=workspace)
    assert p.stdout == "done\n" and "pydantic loaded: False" in p.stderr, p.stderr
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "plover" in results[0] and "notes.txt" in results[1] and "notes.txt" in results[2]
    assert "hi" in results[4] and not any(r.startswith("ERROR") for r in results), results


def test_arguments_pydantic_coerces_or_refuses_are_still_its_to_judge(home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    script = [tool_reply(call("read_file", {"path": "notes.txt", "offset": "2", "limit": 1.0}),
                         call("read_file", {"offset": 2}), call("read_file", {"path": "notes.txt", "offset": True}),
                         call("todo_write", {"todos": [{"content": "x", "status": "later"}]})),
              Reply(text="done")]
    with FakeServer(script) as server:
        p = run_python(PROBE, home, "-p", "go", "--base-url", server.base_url, "--model", "fake-model", cwd=workspace)
    assert p.stdout == "done\n" and "pydantic loaded: True" in p.stderr, p.stderr
    coerced, missing, boolean, literal = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "two" in coerced and "one" not in coerced and "three" not in coerced
    assert missing == "ERROR: read_file: missing string field `path`"
    assert "one" in boolean  # pydantic takes true for 1
    assert literal.startswith("ERROR: todo_write: field `todos.0.status`: Input should be 'pending'")
