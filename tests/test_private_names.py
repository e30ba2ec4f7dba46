"""No module of nanohermes uses another module's private names.

A name with a leading underscore is its module's own business: `from x import _name`, or
`x._name` on an imported module, from any other module is a seam crossed by hand. What two
modules share is public (with a docstring) in the module that owns it, or moves to one both
import. Dunder names (`__version__`) are public by convention; `self._x` and private names of
modules outside the package are not this test's concern.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nanohermes
from test_imports import modules, write


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(root: Path) -> list[str]:
    """Every use, anywhere in a module's file, of a private name of another module of the
    package at `root`, as `importer: what it wrote`."""
    mods = modules(root)
    top = root.name
    found: list[str] = []
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound: dict[str, str] = {}  # a local name -> the module of the package it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                if base not in mods:
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in mods:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif private(alias.name) and base != mod:
                        found.append(f"{mod}: from {base} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == top or alias.name.startswith(top + "."):
                        if alias.asname:
                            bound[alias.asname] = alias.name
                        else:
                            bound[top] = top
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and private(node.attr)):
                continue
            chain: list[str] = []
            value = node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                owner = ".".join([bound[value.id], *reversed(chain)])
                if owner in mods and owner != mod:
                    found.append(f"{mod}: {owner}.{node.attr}")
    return sorted(found)


def test_no_module_uses_another_modules_private_names() -> None:
    root = Path(nanohermes.__file__).parent
    assert private_uses(root) == []


def test_every_way_of_reaching_a_private_name_is_found(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "pkg/__init__.py": "__version__ = '1'\n",
        "pkg/a.py": "_x = 1\ny = 2\ndef _f(): ...\nclass C:\n    def _m(self): ...\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "_z = 3\n",
        "pkg/named.py": "from pkg.a import _x, y\n",
        "pkg/relative.py": "from .a import _f\n",
        "pkg/sub/up.py": "from ..a import _x\nfrom . import b\nb._z\n",
        "pkg/dotted.py": "import pkg.sub.b\ndef f():\n    return pkg.sub.b._z\n",
        "pkg/aliased.py": "import pkg.a as al\nfrom pkg import sub\nal._f()\nsub.b._z\n",
        "pkg/fine.py": "import os\nfrom pkg import __version__, a\nfrom pkg.a import C, y\nos._exit\n"
                       "a.y\nC()._m()\nclass D:\n    _own = 1\n    def g(self): return self._own\n",
    })
    assert private_uses(pkg) == [
        "pkg.aliased: pkg.a._f", "pkg.aliased: pkg.sub.b._z", "pkg.dotted: pkg.sub.b._z",
        "pkg.named: from pkg.a import _x", "pkg.relative: from pkg.a import _f",
        "pkg.sub.up: from pkg.a import _x", "pkg.sub.up: pkg.sub.b._z",
    ]
