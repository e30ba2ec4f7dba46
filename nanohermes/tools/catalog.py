"""The built-in pool as a start builds it: declared from a cache, each tool's module imported on first use.

Building the pool from the tool modules imports all of them (their parameter models, helpers
and dataclasses), though a one-shot `-p` run whose model answers in text never calls a tool.
The first start writes each built-in's declaration (its name and flags, its description as
written, its parameter schema, its output limit, and where its class lives) to
`$XDG_CACHE_HOME/nanohermes/tools.json`, stamped with the nanohermes, Python and pydantic
versions and the stamp (modification time and size) of every file of `nanohermes/tools`, so
any edit or upgrade writes it afresh. Later starts build the pool from it: each tool is a
`Deferred` carrying that declaration, which imports the real tool the first time a call needs
its behaviour (`parse` comes first) and hands every argument-taking method to it. A cache
that cannot be read, or does not match, is ignored: the pool is then built from the modules.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from nanohermes.tools.base import Effect, P, SubjectKind, Tool, ToolContext
from nanohermes.tools.registry import build_tools

if TYPE_CHECKING:
    from nanohermes.permissions import Rule, Target
    from nanohermes.tools.base import Approval, Params, ToolResult

_FILE = "tools.json"
_TOOLS_DIR = Path(__file__).resolve().parent
# The class attributes a declaration carries; the rest of a tool is its code.
_FLAGS = ("name", "group", "description", "source", "approval", "persist", "kind", "effect", "shows_contents",
          "limit_defaults", "spawns", "claude_names")


def _stamp() -> str | None:
    """What identifies the code the declarations come from, or None when it cannot be told."""
    from nanohermes import __version__
    from nanohermes.schemacache import pydantic_version

    pydantic = pydantic_version()  # the schemas are pydantic's rendering
    if pydantic is None:
        return None
    parts = [__version__, sys.version, str(_TOOLS_DIR), f"pydantic {pydantic}"]
    try:
        for folder, dirs, files in os.walk(_TOOLS_DIR):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    parts.append(f"{os.path.relpath(os.path.join(folder, name), _TOOLS_DIR)}:{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        return None
    return "\n".join(parts)


def declaration(tool: Tool) -> dict[str, Any]:
    """What a start needs of `tool` without importing its module."""
    cls = type(tool)
    out: dict[str, Any] = {k: getattr(cls, k) for k in _FLAGS}
    out.update(module=cls.__module__, qualname=cls.__qualname__, schema=tool.parameters(),
               output_limit=tool.output_limit())
    return out


def _path() -> Path:
    from nanohermes.dirs import cache_home

    return cache_home() / _FILE


def _read(stamp: str) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("stamp") != stamp or not isinstance(data.get("tools"), list):
        return None
    tools: list[dict[str, Any]] = data["tools"]
    wanted = {*_FLAGS, "module", "qualname", "schema", "output_limit"}
    # Only a built-in tool's module is ever imported from it, whatever the file says.
    if not all(isinstance(t, dict) and wanted <= set(t) and str(t["module"]).startswith("nanohermes.tools.")
               for t in tools):
        return None
    return tools


def _write(stamp: str, tools: list[dict[str, Any]]) -> None:
    from nanohermes.dirs import write_private

    try:  # replaced atomically, readable only by its owner, like nanohermes's other files
        write_private(_path(), json.dumps({"stamp": stamp, "tools": tools}, ensure_ascii=False))
    except OSError:
        pass  # a read-only cache folder: every start builds the pool from the modules


class _LoadedParams:
    """`Deferred.params`: the real tool's model, which only its module defines."""

    def __get__(self, obj: object, owner: type[Deferred]) -> type[Params]:
        return owner.load().params


@dataclass(frozen=True, kw_only=True)
class Deferred(Tool[Any]):
    """A built-in tool known by its declaration until something needs its code. Each tool is
    its own subclass (`_deferred`), whose class attributes are the declaration."""

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
                raise RuntimeError(f"the tool cache names {cls.module}.{cls.qualname} {cls.name!r}, "
                                   f"but it is {tool.name!r}")
            cls.loaded = tool
        return cls.loaded

    # -- the declaration -------------------------------------------------------------------
    def output_limit(self) -> str:
        return self.limit

    def parameters(self) -> dict[str, Any]:
        schema: dict[str, Any] = json.loads(json.dumps(self.schema))  # a fresh copy: callers may change theirs
        return schema

    # -- the behaviour, from the real tool --------------------------------------------------
    def parse(self, raw: dict[str, Any]) -> Any:
        return self.load().parse(raw)

    async def run(self, args: P, ctx: ToolContext) -> str | ToolResult:
        return await self.load().run(args, ctx)

    def read_only(self, args: P) -> bool:
        return self.load().read_only(args)

    def subjects(self, args: P) -> list[str]:
        return self.load().subjects(args)

    def base_dir(self, args: P) -> str | None:
        return self.load().base_dir(args)

    def target(self, args: P, ctx: ToolContext) -> Target:
        return self.load().target(args, ctx)

    def resolved(self, args: P, ctx: ToolContext) -> Target:
        return self.load().resolved(args, ctx)

    def concurrency_safe(self, args: P) -> bool:
        return self.load().concurrency_safe(args)

    def approval_for(self, args: P) -> Approval:
        return self.load().approval_for(args)

    def rule_subject(self, args: P) -> str | None:
        return self.load().rule_subject(args)

    def protected(self, args: P, ctx: ToolContext) -> bool:
        return self.load().protected(args, ctx)

    def suggest_rule(self, args: P) -> Rule:
        return self.load().suggest_rule(args)

    def approval_detail(self, args: P, ctx: ToolContext) -> str:
        return self.load().approval_detail(args, ctx)

    async def precheck(self, args: P, ctx: ToolContext) -> None:
        await self.load().precheck(args, ctx)

    def summary(self, args: P) -> str:
        return self.load().summary(args)


# Built once per process: every pool of a process (a session's, its sub-agents') shares them,
# and with them the one real tool each loads.
_classes: dict[str, type[Deferred]] = {}


def _deferred(decl: dict[str, Any]) -> Deferred:
    name = str(decl["name"])
    cls = _classes.get(name)
    if cls is None:
        attrs = {k: decl[k] for k in _FLAGS}
        attrs["claude_names"] = tuple(attrs["claude_names"])  # JSON has lists only
        attrs.update(module=decl["module"], qualname=decl["qualname"], schema=decl["schema"],
                     limit=decl["output_limit"], __module__=__name__, __qualname__=f"Deferred[{name}]")
        cls = _classes[name] = type(f"Deferred[{name}]", (Deferred,), attrs)
    return cls()


def builtin_pool() -> list[Tool]:
    """The built-in tools, sorted by name: from the cache when it matches the code, else built
    from the modules (and the cache written for the next start)."""
    stamp = _stamp()
    if stamp is not None and (decls := _read(stamp)) is not None:
        return [_deferred(d) for d in decls]
    tools = build_tools()
    if stamp is not None:
        _write(stamp, [declaration(t) for t in tools])
    return tools


def declarations() -> dict[str, tuple[SubjectKind, Effect]]:
    """(kind, effect) of every built-in tool, by name, read from the pool a start builds."""
    if not _DECLARATIONS:
        _DECLARATIONS.update({t.name: (t.kind, t.effect) for t in builtin_pool()})
    return dict(_DECLARATIONS)


_DECLARATIONS: dict[str, tuple[SubjectKind, Effect]] = {}

__all__ = ["Deferred", "builtin_pool", "declaration", "declarations"]
