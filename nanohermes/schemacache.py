"""Tool parameter schemas kept on disk, so a start does not render them with pydantic.

Rendering a params class's JSON schema imports pydantic and builds a validator for it, and
doing that for every built-in tool is a large part of a one-shot `-p` run that may never
call a tool. A built-in class's schema is stored in `$XDG_CACHE_HOME/nanohermes/param-schemas.json`
the first time it is rendered, keyed by the class's qualified name, the nanohermes and
pydantic versions and the stamps (modification time and size) of the files that define the
class and its bases, so any edit or upgrade renders it afresh. pydantic's version is read
from its `version.py` without importing it (importing it alone costs more than the cache
saves). Only classes defined at the top level of a nanohermes module are kept: a class built
in a function has no stable identity. A cache that cannot be read or written is ignored: the
schema is then rendered as before.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nanohermes.dirs import cache_home, write_private

_FILE = "param-schemas.json"
_read: dict[Path, dict[str, Any]] = {}  # each cache file's contents, read once per process
_VERSION = re.compile(r"""^VERSION\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)
_pydantic: list[str | None] = []  # pydantic's version once looked up


def pydantic_version() -> str | None:
    """The installed pydantic's version, from its source file, or None when it cannot be read."""
    if not _pydantic:
        found: str | None = None
        try:
            spec = importlib.util.find_spec("pydantic")
            folders = list(spec.submodule_search_locations or []) if spec else []
            text = (Path(folders[0]) / "version.py").read_text(encoding="utf-8") if folders else ""
            m = _VERSION.search(text)
            found = m.group(1) if m else None
        except (OSError, ValueError, ImportError):
            found = None
        _pydantic.append(found)
    return _pydantic[0]


def _stamp(model: type) -> str | None:
    """What identifies this version of the model, or None when it is not cacheable: the
    versions, and the stamp of each nanohermes file among the model and its bases."""
    if not model.__module__.startswith("nanohermes.") or "<locals>" in model.__qualname__:
        return None
    from nanohermes import __version__

    pydantic = pydantic_version()
    if pydantic is None:
        return None
    parts = [__version__, pydantic]
    for module_name in dict.fromkeys(c.__module__ for c in model.__mro__ if c.__module__.startswith("nanohermes")):
        path = getattr(sys.modules.get(module_name), "__file__", None)
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        if st is None:
            return None
        parts.append(f"{module_name}:{st.st_mtime_ns}:{st.st_size}")
    return " ".join(parts)


def _path() -> Path:
    return cache_home() / _FILE


def _load(path: Path) -> dict[str, Any]:
    if path not in _read:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        _read[path] = data if isinstance(data, dict) else {}
    return _read[path]


def _save(path: Path, entries: dict[str, Any]) -> None:
    try:  # a private folder and file like every other of nanohermes's; replaced atomically
        write_private(path, json.dumps(entries, ensure_ascii=False))
    except OSError:
        pass  # a read-only cache folder: schemas are rendered each time


def schema(model: type, render: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`render()`'s result for `model`, from the cache when it holds this version of it."""
    stamp = _stamp(model)
    if stamp is None:
        return render()
    key = f"{model.__module__}.{model.__qualname__}"
    path = _path()
    entries = _load(path)
    entry = entries.get(key)
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("schema"), dict):
        return _copy(entry["schema"])  # a fresh copy: callers may change theirs
    out = render()
    entries[key] = {"stamp": stamp, "schema": out}
    _save(path, entries)
    return _copy(out)


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(schema))  # JSON in, the same JSON out
    return copied
