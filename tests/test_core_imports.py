"""The turn's modules import no tool module: only the tool contract (`nanohermes.tools.base`).

The loop, the runtime, the session, compaction, the context, the window and the rest of the
turn know tools by their contract alone. What a tool module adds to them (the todo list the
session keeps, how the runtime offers tools and reads a patch sent through the shell) reaches
them through a protocol they define and whoever builds them fills (`assemble`, from
`tools.registry`). Every import counts: at module level, under TYPE_CHECKING and inside
functions.
"""

from __future__ import annotations

from pathlib import Path

import nanohermes
from test_imports import import_graph, write

CORE = ("turn.agent", "common.arguments", "common.budget", "turn.compact", "turn.context", "common.events", "hooks.hooks",
        "common.messages", "turn.meters", "turn.persisted", "turn.runtime", "turn.session", "turn.window")
CONTRACT = "tools.base"


def tool_imports(root: Path, core: tuple[str, ...], contract: str) -> dict[str, list[str]]:
    """Each module of `core` (names under the package at `root`) that imports a module of its
    `tools` package other than `contract`, with what it imports."""
    top = root.name
    graph = import_graph(root)
    tools = f"{top}.tools"
    out: dict[str, list[str]] = {}
    for name in core:
        found = sorted(m for m in graph[f"{top}.{name}"]
                       if (m == tools or m.startswith(tools + ".")) and m != f"{top}.{contract}")
        if found:
            out[name] = found
    return out


def test_the_core_imports_only_the_tool_contract() -> None:
    root = Path(nanohermes.__file__).parent
    assert tool_imports(root, CORE, CONTRACT) == {}


def test_a_tool_module_imported_anywhere_in_a_core_module_is_found(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/tools/__init__.py": "from pkg.tools.base import Tool\n",
        "pkg/tools/base.py": "class Tool: ...\n",
        "pkg/tools/todo.py": "from pkg.tools.base import Tool\n",
        "pkg/clean.py": "from pkg.tools.base import Tool\n",
        "pkg/lazy.py": "def f():\n    from pkg.tools import todo\n",
        "pkg/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.tools.todo import x\n",
        "pkg/facade.py": "from pkg.tools import Tool\n",  # the package, which lists its tools
    })
    assert tool_imports(pkg, ("clean", "lazy", "typed", "facade"), "tools.base") == {
        "facade": ["pkg.tools"], "lazy": ["pkg.tools", "pkg.tools.todo"], "typed": ["pkg.tools.todo"]}
