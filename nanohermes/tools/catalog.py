"""The built-in pool as a start builds it: declared from the shipped declarations, each tool's module imported on first use.

Building the pool from the tool modules imports all of them (their parameter models, helpers
and dataclasses), though a one-shot `-p` run whose model answers in text never calls a tool.
Each built-in's declaration (its class attributes, its output limit, its parameter schema, and
where its class lives) ships with the package (`declared.py`: `declarations.json`, which
`shipped_text` renders from the code). A start builds the pool from it: each tool is a
`Deferred` carrying that declaration, which imports the real tool the first time a call needs
its behaviour (`parse` comes first) and hands it every other method of the `Tool` contract. A
file that cannot be read is not needed: the pool is then built from the modules.

`Deferred` is made from the contract itself: the declaration is every class attribute `Tool`
declares (but the params class, which only the tool's module defines), and every public method
of `Tool` but those in `DECLARED` is handed to the real tool, so a flag or method added to the
contract is carried or delegated without a line here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import nanohermes.tools.declared as declared
from nanohermes.tools.base import Effect, Params, SubjectKind, Tool, render_params_schema
from nanohermes.tools.registry import build_tools


# The methods a declaration answers: its output limit and schema, and what is made of them (a
# built-in may not override these: `tests/test_tool_catalog.py`); `in_thread` is a helper.
DECLARED = frozenset({"output_limit", "parameters", "describe", "spec", "in_thread"})
# The class attributes a declaration carries: every one the contract declares but the params class.
FLAGS = tuple(n for n, a in Tool.__annotations__.items() if str(a).startswith("ClassVar") and n != "params")
# Every other public method of the contract: the real tool's behaviour.
BEHAVIOUR = tuple(n for n, v in inspect.getmembers(Tool, inspect.isfunction) if not n.startswith("_") and n not in DECLARED)


def declaration(tool: Tool) -> dict[str, Any]:
    """What a start needs of `tool` without importing its module."""
    cls = type(tool)
    out: dict[str, Any] = {k: getattr(cls, k) for k in FLAGS}
    out.update(module=cls.__module__, qualname=cls.__qualname__, params=declared.schema_key(cls.params),
               output_limit=tool.output_limit())
    return out


def _params_classes() -> Iterator[type[Params]]:
    """Every params class at the top level of a tool module (every module imported first)."""
    for found in pkgutil.walk_packages([str(declared.FILE.parent)], "nanohermes.tools."):
        importlib.import_module(found.name)

    def below(cls: type[Params]) -> Iterator[type[Params]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    yield from (c for c in below(Params) if declared.schema_key(c) is not None)


def shipped_text() -> str:
    """`declarations.json` as the code makes it now: the built-in tools' declarations and every
    tool module's params schema, rendered by pydantic (whose version is named)."""
    # importlib.metadata: only when the shipped declarations are checked
    from importlib.metadata import version

    tools = build_tools()
    schemas = {declared.schema_key(c): render_params_schema(c) for c in _params_classes()}
    data = {"rendered_by": f"pydantic {version('pydantic')}", "tools": [declaration(t) for t in tools],
            "schemas": dict(sorted(schemas.items()))}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _usable(decls: list[Any], schemas: dict[str, Any]) -> bool:
    """Whether stored declarations are whole; and only a built-in tool's module is ever
    imported from them, whatever the file says."""
    wanted = {*FLAGS, "module", "qualname", "params", "output_limit"}
    return all(isinstance(d, dict) and wanted <= set(d) and str(d["module"]).startswith("nanohermes.tools.")
               and isinstance(schemas.get(d["params"]), dict) for d in decls)


class _LoadedParams:
    """`Deferred.params`: the real tool's model, which only its module defines."""

    def __get__(self, obj: object, owner: type[Deferred]) -> type[Params]:
        return owner.load().params


class Deferred(Tool[Any]):
    """A built-in tool known by its declaration until something needs its code. Each tool is
    its own subclass (`_deferred`), whose class attributes are the declaration; the methods of
    `BEHAVIOUR` are added below, each handing its call to the real tool. It adds no field to
    `Tool`, whose dataclass methods (a frozen instance, equality, repr) it keeps: made again
    for it, they would cost every start the time to generate them and change nothing."""

    module: ClassVar[str]
    qualname: ClassVar[str]
    schema: ClassVar[dict[str, Any]]
    limit: ClassVar[str]
    loaded: ClassVar[Tool | None] = None
    params = _LoadedParams()  # a descriptor standing for the ClassVar

    @classmethod
    def load(cls) -> Tool:
        """The real tool, imported and built on first use (built-in tools take no settings)."""
        if cls.loaded is None:
            tool: Tool = getattr(importlib.import_module(cls.module), cls.qualname)()
            if tool.name != cls.name:
                raise RuntimeError(f"the shipped declarations name {cls.module}.{cls.qualname} {cls.name!r}, "
                                   f"but it is {tool.name!r} (python -m nanohermes.reference --write)")
            cls.loaded = tool
        return cls.loaded

    def output_limit(self) -> str:
        return self.limit

    def parameters(self) -> dict[str, Any]:
        return declared.copied(self.schema)


def _delegate(name: str) -> Callable[..., Any]:
    """`Deferred.<name>`: the real tool's method, called with the same arguments."""
    async def awaited(self: Deferred, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.load(), name)(*args, **kwargs)

    def called(self: Deferred, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.load(), name)(*args, **kwargs)

    method = awaited if inspect.iscoroutinefunction(getattr(Tool, name)) else called
    method.__name__, method.__qualname__ = name, f"Deferred.{name}"
    method.__doc__ = f"The real tool's `{name}`."
    return method


for _name in BEHAVIOUR:
    setattr(Deferred, _name, _delegate(_name))

# Built once per process: every pool of a process (a session's, its sub-agents') shares them,
# and with them the one real tool each loads.
_classes: dict[str, type[Deferred]] = {}


def _deferred(decl: dict[str, Any], schemas: dict[str, Any]) -> Deferred:
    name = str(decl["name"])
    cls = _classes.get(name)
    if cls is None:
        # JSON has lists only: a flag the contract holds as a tuple is made one again.
        attrs = {k: tuple(decl[k]) if isinstance(getattr(Tool, k, None), tuple) else decl[k] for k in FLAGS}
        attrs.update(module=decl["module"], qualname=decl["qualname"], schema=schemas[decl["params"]],
                     limit=decl["output_limit"], __module__=__name__, __qualname__=f"Deferred[{name}]")
        cls = _classes[name] = type(f"Deferred[{name}]", (Deferred,), attrs)
    return cls()


def builtin_pool() -> list[Tool]:
    """The built-in tools, sorted by name: from the shipped declarations, else built from the modules."""
    stored = declared.stored_tools()
    if stored is not None and _usable(*stored):
        return [_deferred(d, stored[1]) for d in stored[0]]
    return build_tools()


def declarations() -> dict[str, tuple[SubjectKind, Effect]]:
    """(kind, effect) of every built-in tool, by name, read from the pool a start builds."""
    if not _DECLARATIONS:
        _DECLARATIONS.update({t.name: (t.kind, t.effect) for t in builtin_pool()})
    return dict(_DECLARATIONS)


_DECLARATIONS: dict[str, tuple[SubjectKind, Effect]] = {}

__all__ = ["BEHAVIOUR", "DECLARED", "FLAGS", "Deferred", "builtin_pool", "declaration", "declarations", "shipped_text"]
