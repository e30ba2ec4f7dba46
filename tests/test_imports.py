"""No import circles among nanohermes's modules.

Every import counts, with no exception: at module level, under TYPE_CHECKING (a circle of
types is still two modules that each need the other) and inside functions (a lazy import
hides a circle from the interpreter, not from the design), a package's `__init__` listing
its own parts included. What two modules both need moves to the module that owns it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import nanohermes


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package at `root`."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (anywhere in its file).

    Several tests read the whole package's graph: it is worked out once per process for the
    files as they are (each one's path, time and size), and each caller gets its own copy."""
    files = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(root.rglob("*.py")))
    return {mod: set(targets) for mod, targets in _graph(root, files).items()}


@functools.lru_cache(maxsize=4)
def _graph(root: Path, files: tuple[tuple[str, int, int], ...]) -> dict[str, frozenset[str]]:
    mods = modules(root)
    top = root.name

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]

        def visit(node: ast.AST, mod: str = mod, path: Path = path, package: str = package) -> None:
            for child in ast.iter_child_nodes(node):
                names: list[str] = []
                if isinstance(child, ast.Import):
                    names = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:
                        up = package.split(".")[: len(package.split(".")) - child.level + 1]
                        base = ".".join([*up, base] if base else up)
                    names = [base, *(f"{base}.{a.name}" for a in child.names)]
                for name in names:
                    target = owner(name)
                    if target is None or target == mod or not target.startswith(top):
                        continue
                    graph[mod].add(target)
                visit(child)

        visit(ast.parse(path.read_text(encoding="utf-8")))
    return {mod: frozenset(targets) for mod, targets in graph.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_circles() -> None:
    root = Path(nanohermes.__file__).parent
    assert circles(import_graph(root)) == []


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root / "pkg"


def test_every_kind_of_import_closes_a_circle(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n",
        "pkg/c.py": "from . import d\n",
        "pkg/d.py": "def f():\n    from pkg import c\n",
        "pkg/e.py": "import pkg.f\n",
        "pkg/f.py": "import pkg.g\n",
        "pkg/g.py": "from .e import y\n",
        "pkg/h.py": "import pkg.a\n",
    })
    assert circles(import_graph(pkg)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"], ["pkg.e", "pkg.f", "pkg.g"]]


def test_a_package_listing_its_parts_lazily_is_a_circle_too(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "pkg/__init__.py": "class Base: ...\ndef pool():\n    from pkg import part\n    return part.items()\n",
        "pkg/part.py": "from pkg import Base\n",
        "pkg/base.py": "class Base: ...\n",
        "pkg/registry.py": "def pool():\n    from pkg.good import items\n",
        "pkg/good.py": "from pkg.base import Base\n",
    })
    # The contract in its own module breaks the circle the registry would close.
    assert circles(import_graph(pkg)) == [["pkg", "pkg.part"]]


def test_every_name_imported_from_nanohermes_exists() -> None:
    """A lazy import fails only when its function runs: check each one's names now."""
    import importlib
    import importlib.util

    root = Path(nanohermes.__file__).parent
    missing: list[str] = []
    for mod, path in modules(root).items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if not base.startswith("nanohermes"):
                continue
            target = importlib.import_module(base)
            for alias in node.names:
                if not hasattr(target, alias.name) and importlib.util.find_spec(f"{base}.{alias.name}") is None:
                    missing.append(f"{mod}: from {base} import {alias.name}")
    assert missing == []
