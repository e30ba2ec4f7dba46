"""What the tool code declares, rendered once and kept on disk: one file, keyed by that code's content.

A start would otherwise import every tool module (for the pool's declarations) and pydantic
(for the parameter schemas), though a one-shot `-p` run may never call a tool. The first start
writes `$XDG_CACHE_HOME/nanohermes/tools.json`: the built-in tools' declarations (`catalog.py`)
and every parameter schema rendered so far (`base.params_schema`), under one key, a SHA-256 of
the Python and pydantic versions and the source of every module of `nanohermes/tools` (where
every tool, its params and their rendering live). Any edit or upgrade gives another key: the
file is then ignored, and written afresh. pydantic's version is read from its `version.py`
without importing it (importing it alone costs more than the cache saves). A file that cannot
be read, or holds another key, is ignored; one that cannot be written is not needed: the
declarations and schemas are then rendered by each start.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nanohermes.dirs import cache_home, write_private

_FILE = "tools.json"
_TOOLS_DIR = Path(__file__).resolve().parent
_VERSION = re.compile(r"""^VERSION\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)
_key: list[str | None] = []  # the key once computed: the code does not change while it runs
_held: dict[Path, dict[str, Any]] = {}  # each cache file's entries under the key, read once per process


def pydantic_version() -> str | None:
    """The installed pydantic's version, from its source file, or None when it cannot be read."""
    try:
        spec = importlib.util.find_spec("pydantic")
        folders = list(spec.submodule_search_locations or []) if spec else []
        text = (Path(folders[0]) / "version.py").read_text(encoding="utf-8") if folders else ""
    except (OSError, ValueError, ImportError):
        return None
    m = _VERSION.search(text)
    return m.group(1) if m else None


def key() -> str | None:
    """What identifies the code the cache is rendered from, or None when it cannot be told."""
    if not _key:
        _key.append(_content_key())
    return _key[0]


def _content_key() -> str | None:
    pydantic = pydantic_version()  # the schemas are pydantic's rendering
    if pydantic is None:
        return None
    digest = hashlib.sha256(f"{sys.version}\npydantic {pydantic}\n".encode())
    try:
        for folder, dirs, files in os.walk(_TOOLS_DIR):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    source = f.read()
                digest.update(f"\n{os.path.relpath(path, _TOOLS_DIR)} {len(source)}\n".encode())
                digest.update(source)
    except OSError:
        return None
    return digest.hexdigest()


def _path() -> Path:
    return cache_home() / _FILE


def _entries() -> dict[str, Any] | None:
    """The cache file's entries ("tools", "schemas") if it holds this code's, else {}; None
    when the code cannot be identified (nothing is cached then)."""
    code = key()
    if code is None:
        return None
    path = _path()
    if path not in _held:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        fresh = isinstance(data, dict) and data.get("key") == code and isinstance(data.get("schemas", {}), dict)
        _held[path] = {k: v for k, v in data.items() if k != "key"} if fresh and isinstance(data, dict) else {}
    return _held[path]


def _save(entries: dict[str, Any]) -> None:
    try:  # replaced atomically, readable only by its owner, like nanohermes's other files
        write_private(_path(), json.dumps({"key": key(), **entries}, ensure_ascii=False))
    except OSError:
        pass  # a read-only cache folder: every start renders what it needs


def stored_tools() -> tuple[list[Any], dict[str, Any]] | None:
    """The built-in tools' declarations as stored for this code, with the stored schemas, or None."""
    entries = _entries()
    if not entries or not isinstance(entries.get("tools"), list):
        return None
    return entries["tools"], entries.get("schemas", {})


def store_tools(declarations: list[dict[str, Any]]) -> None:
    """Keep the built-in tools' declarations for the next start (their schemas are kept already)."""
    entries = _entries()
    if entries is not None:
        entries["tools"] = declarations
        _save(entries)


def schema_key(model: type) -> str | None:
    """Under what name `model`'s schema is kept, or None when it is not: only a class defined
    at the top level of a tool module has a stable identity that the key covers."""
    if not model.__module__.startswith("nanohermes.tools.") or "<locals>" in model.__qualname__:
        return None
    return f"{model.__module__}.{model.__qualname__}"


def schema(model: type, render: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`render()`'s result for `model`, from the cache when it holds it (a fresh copy: callers
    may change theirs)."""
    name, entries = schema_key(model), _entries()
    if name is None or entries is None:
        return render()
    schemas = entries.setdefault("schemas", {})
    if not isinstance(schemas.get(name), dict):
        schemas[name] = render()
        _save(entries)
    return copied(schemas[name])


def copied(value: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object (JSON in, the same JSON out)."""
    out: dict[str, Any] = json.loads(json.dumps(value))
    return out
