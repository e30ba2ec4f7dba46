"""The layers of nanohermes, in one place, and the import graph following them.

`LAYERS` lists them from the bottom up; each is named by module prefixes, and a module belongs to
the layer of its longest prefix. A module imports only from its own layer or lower ones, counting
every import: at module level, under TYPE_CHECKING and inside functions (a lazy import hides an
upward dependency from the interpreter, not from the design).

The safety core (`nanohermes.guard`) imports no UI, no turn and no tool module: it knows tools
by their contract (`tools/base.py`, with the shipped declarations it reads), a layer below the
gate. The package root holds only entry points.
"""

from __future__ import annotations

from pathlib import Path

import nanohermes
from test_imports import import_graph, modules, write

# Bottom up. Why this order (AGENTS.md, "Architecture"):
# - common: the vocabulary every layer shares (limits, events and the UI protocol, messages), and
#   the package itself (its `__init__`: the version).
# - rules: what a permission rule says and what it is checked against (rules, the command
#   catalogue, the shell analysis, trusted projects): the configuration is written in them.
# - config: the configuration, its layers and Claude Code's files read as layers.
# - guard: the rest of the safety core, which reads the configuration (the sandbox, read rules,
#   path rules, secrets, programs, git metadata, redaction).
# - llm, mcp: the model wire and the MCP client.
# - contract: what a tool is (`Tool`, `ToolContext`, `Attempt`, `ToolError`) and its shipped
#   declarations; below the gate, which judges tools by it.
# - hooks: the person's hook commands, and what they speak (Claude Code's vocabulary).
# - gate: the one owner of "may this call run, and how confined", which consults the hooks.
# - tools, turn, extensions (what files add: commands, sub-agents).
# - factory: `assemble`, the one wiring of an agent, which both front ends call.
# - ui, and the entry points at the package's root (`assemble` stays at the root beside them).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("common", ("nanohermes", "nanohermes.common")),
    ("rules", ("nanohermes.guard.permissions", "nanohermes.guard.commands", "nanohermes.guard.shellwords",
               "nanohermes.guard.shellscan", "nanohermes.guard.shellparse", "nanohermes.guard.pathglob",
               "nanohermes.guard.hosts", "nanohermes.guard.secrets", "nanohermes.guard.trust")),
    ("config", ("nanohermes.config",)),
    ("guard", ("nanohermes.guard",)),
    ("llm", ("nanohermes.llm",)),
    ("mcp", ("nanohermes.mcp",)),
    ("contract", ("nanohermes.tools.base", "nanohermes.tools.declared")),
    ("hooks", ("nanohermes.hooks",)),
    ("gate", ("nanohermes.guard.gate",)),
    ("tools", ("nanohermes.tools",)),
    ("turn", ("nanohermes.turn",)),
    ("extensions", ("nanohermes.extensions",)),
    ("factory", ("nanohermes.assemble",)),
    ("ui", ("nanohermes.ui",)),
    ("entry", ("nanohermes.cli", "nanohermes.argv", "nanohermes.doctor", "nanohermes.reference", "nanohermes.__main__",
               "nanohermes.testing")),
)
# The modules a person or a script starts nanohermes by (the package, `python -m nanohermes`,
# the console script and its option table, the one factory, `doctor`, `python -m
# nanohermes.reference`); everything else lives in a package of its layer.
ENTRY_POINTS = {"__init__.py", "__main__.py", "cli.py", "argv.py", "assemble.py", "doctor.py", "reference.py"}
SAFETY_CORE = "nanohermes.guard"
# What the safety core may not import: the front ends, the turn, and the tools but their contract.
NOT_BELOW_THE_GATE = ("nanohermes.ui", "nanohermes.turn", "nanohermes.tools", "nanohermes.extensions")
CONTRACT = ("nanohermes.tools.base", "nanohermes.tools.declared")


def _within(module: str, prefix: str) -> bool:
    """Whether `prefix` names `module`: itself, or a module inside it. The top package names only
    itself (its `__init__`): the modules at its root are named one by one."""
    return module == prefix or ("." in prefix and module.startswith(prefix + "."))


def layer_of(module: str, layers: tuple[tuple[str, tuple[str, ...]], ...]) -> int:
    """The index in `layers` of the layer whose prefix names `module` most closely."""
    best, best_len = -1, -1
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if _within(module, prefix) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best < 0:
        raise LookupError(f"{module} is in no layer: add it to LAYERS")
    return best


def upward(graph: dict[str, set[str]], layers: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """Every import from a lower layer to a higher one, as 'module (layer) -> module (layer)'."""
    found = []
    for module, imported in sorted(graph.items()):
        low = layer_of(module, layers)
        for target in sorted(imported):
            high = layer_of(target, layers)
            if high > low:
                found.append(f"{module} ({layers[low][0]}) -> {target} ({layers[high][0]})")
    return found


def core_imports(graph: dict[str, set[str]], core: str, barred: tuple[str, ...],
                 allowed: tuple[str, ...]) -> list[str]:
    """Every import from a module of `core` into a module `barred` names and `allowed` does not."""
    return [f"{module} -> {target}" for module, imported in sorted(graph.items()) if _within(module, core)
            for target in sorted(imported)
            if any(_within(target, b) for b in barred) and not any(_within(target, a) for a in allowed)]


def strays(root: Path, entry_points: set[str]) -> list[str]:
    """The modules at the package's root that are not entry points."""
    return sorted(p.name for p in root.glob("*.py") if p.name not in entry_points)


ROOT = Path(nanohermes.__file__).parent


def test_every_module_is_in_a_layer() -> None:
    for module in modules(ROOT):
        layer_of(module, LAYERS)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    assert upward(import_graph(ROOT), LAYERS) == []


def test_the_safety_core_imports_no_ui_turn_or_tool_module() -> None:
    assert core_imports(import_graph(ROOT), SAFETY_CORE, NOT_BELOW_THE_GATE, CONTRACT) == []


def test_the_package_root_holds_only_entry_points() -> None:
    assert strays(ROOT, ENTRY_POINTS) == []


# The checks themselves, on a package made for them: each finds what it is for, however imported.
TOY_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("low", ("pkg", "pkg.low")), ("contract", ("pkg.tools.base",)), ("core", ("pkg.core",)), ("tools", ("pkg.tools",)),
    ("ui", ("pkg.ui",)), ("entry", ("pkg.main", "pkg.stray")))
TOY = {
    "pkg/__init__.py": "",
    "pkg/main.py": "from pkg.ui import screen\n",
    "pkg/stray.py": "",
    "pkg/low/__init__.py": "",
    "pkg/low/words.py": "def f():\n    from pkg.core import gate\n",
    "pkg/core/__init__.py": "",
    "pkg/core/gate.py": "from pkg.tools.base import Tool\nfrom pkg.low import words\n",
    "pkg/core/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.ui.screen import Screen\n",
    "pkg/core/lazy.py": "def f():\n    import pkg.tools.todo\n",
    "pkg/tools/__init__.py": "",
    "pkg/tools/base.py": "from pkg.low import words\n",
    "pkg/tools/todo.py": "from pkg.tools.base import Tool\nfrom .. import ui\n",
    "pkg/ui/__init__.py": "",
    "pkg/ui/screen.py": "from pkg.tools import todo\n",
}


def test_an_upward_import_is_found_however_it_is_written(tmp_path: Path) -> None:
    graph = import_graph(write(tmp_path, TOY))
    assert upward(graph, TOY_LAYERS) == [
        "pkg.core.lazy (core) -> pkg.tools.todo (tools)",  # inside a function
        "pkg.core.typed (core) -> pkg.ui.screen (ui)",  # under TYPE_CHECKING
        "pkg.low.words (low) -> pkg.core (core)",
        "pkg.low.words (low) -> pkg.core.gate (core)",
        "pkg.tools.todo (tools) -> pkg.ui (ui)",  # relative
    ]


def test_a_core_importing_a_tool_or_the_ui_is_found_and_the_contract_allowed(tmp_path: Path) -> None:
    graph = import_graph(write(tmp_path, TOY))
    assert core_imports(graph, "pkg.core", ("pkg.ui", "pkg.tools"), ("pkg.tools.base",)) == [
        "pkg.core.lazy -> pkg.tools.todo", "pkg.core.typed -> pkg.ui.screen"]


def test_a_module_in_no_layer_and_a_stray_at_the_root_are_named(tmp_path: Path) -> None:
    root = write(tmp_path, TOY)
    assert strays(root, {"__init__.py", "main.py"}) == ["stray.py"]
    # The top package names only itself: a module at the root that no layer lists is in none.
    assert layer_of("pkg", TOY_LAYERS) == 0
    for module in ("pkg.unlisted", "elsewhere.extra"):
        try:
            layer_of(module, TOY_LAYERS)
        except LookupError as e:
            assert str(e).startswith(f"{module} is in no layer")
        else:
            raise AssertionError(f"{module}, outside every layer, was given one")
