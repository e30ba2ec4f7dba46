"""What the tool code declares, shipped with the package: `declarations.json`, beside this module.

A start would otherwise import every tool module (for the pool's declarations) and pydantic
(for the parameter schemas), though a one-shot `-p` run may never call a tool. The file holds
what a start needs of them: each built-in tool's declaration (`catalog.declaration`) and the
schema of every params class at the top level of a tool module (`base.render_params_schema`,
pydantic's rendering). It is generated from the code (`catalog.shipped_text`, written by
`python -m nanohermes.reference --write`) and checked against it by a test, as the docs'
tables are (`tests/test_tool_catalog.py`). Nothing writes it while nanohermes runs, so a start
costs the same in any HOME, a fresh one included. A file that is missing or cannot be read is
not needed: the pool is then built from the modules, and each schema rendered when asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

FILE = Path(__file__).resolve().with_name("declarations.json")
_held: list[dict[str, Any]] = []  # the file's content, read once per process


def shipped() -> dict[str, Any]:
    """The file's content ("tools", "schemas"), or {} when it cannot be read."""
    if not _held:
        try:
            data = json.loads(FILE.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        ok = isinstance(data, dict) and isinstance(data.get("schemas", {}), dict)
        _held.append(data if ok and isinstance(data, dict) else {})
    return _held[0]


def stored_tools() -> tuple[list[Any], dict[str, Any]] | None:
    """The built-in tools' declarations as shipped, with the shipped schemas, or None."""
    entries = shipped()
    if not isinstance(entries.get("tools"), list):
        return None
    return entries["tools"], entries.get("schemas", {})


def schema_key(model: type) -> str | None:
    """Under what name `model`'s schema is shipped, or None when it is not: only a class
    defined at the top level of a tool module has a name the file can hold."""
    if not model.__module__.startswith("nanohermes.tools.") or "<locals>" in model.__qualname__:
        return None
    return f"{model.__module__}.{model.__qualname__}"


def schema(model: type, render: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`model`'s shipped schema (a fresh copy: callers may change theirs), else `render()`'s."""
    name = schema_key(model)
    schemas = shipped().get("schemas", {})
    if name is None or not isinstance(schemas.get(name), dict):
        return render()
    return copied(schemas[name])


def copied(value: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object (JSON in, the same JSON out)."""
    out: dict[str, Any] = json.loads(json.dumps(value))
    return out
