"""No function of the safety core has a cyclomatic complexity over 15: each reads on a
screen and its paths can be tested one by one.

The safety core is `SAFETY_CORE`: its modules and packages (a folder counts every module in
it), one place to name them. Counted the way radon's `cc` counts, by a walker of its own (no
dependency): one, plus one for each `if`/`elif`, ternary, `assert`, loop (and one more for its
`else`), `except` handler (and one for the `try`'s `else`), comprehension `for` and each of
its `if`s, each `and`/`or` operand after the first, and each `match` case but a catch-all. A
`with` has one path and is not a decision. A nested function or class is measured on its
own, not as part of the function around it."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import nanohermes

LIMIT = 15
# The safety core, as paths from the repository's root: a module, or a package for every
# module in it (the safety core is one package).
SAFETY_CORE = ("nanohermes/guard",)
ROOT = Path(nanohermes.__file__).parent.parent

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _decisions(node: ast.AST) -> int:
    """The decision points in `node` and below it, nested functions and classes left out."""
    if isinstance(node, _Function | ast.ClassDef):
        return 0
    if isinstance(node, ast.Assert):
        return 1  # one decision, whatever its test holds
    own = 0
    if isinstance(node, ast.If | ast.IfExp):
        own = 1
    elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
        own = 1 + bool(node.orelse)
    elif isinstance(node, ast.Try | ast.TryStar):
        own = len(node.handlers) + bool(node.orelse)
    elif isinstance(node, ast.BoolOp):
        own = len(node.values) - 1
    elif isinstance(node, ast.comprehension):
        own = 1 + len(node.ifs)
    elif isinstance(node, ast.Match):
        catch_all = any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases)
        own = len(node.cases) - catch_all
    return own + sum(_decisions(child) for child in ast.iter_child_nodes(node))


def measure(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, line, complexity) of every function and method in `source`."""
    out: list[tuple[str, int, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _Function):
                out.append((prefix + child.name, child.lineno, 1 + sum(_decisions(s) for s in child.body)))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def over_limit(source: str, limit: int = LIMIT) -> list[tuple[str, int, int]]:
    """The functions of `source` over `limit`, as `measure` gives them."""
    return [(name, line, n) for name, line, n in measure(source) if n > limit]


def modules(paths: tuple[str, ...]) -> list[Path]:
    """The module files the paths (from the repository's root) name: a module, or every one in a package."""
    out: list[Path] = []
    for p in paths:
        path = ROOT / p
        assert path.exists(), f"{p} is listed in SAFETY_CORE but does not exist: name where it went"
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def test_no_function_of_the_safety_core_is_over_the_limit() -> None:
    sources = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in modules(SAFETY_CORE)}
    names = {name for source in sources.values() for name, _, _ in measure(source)}
    assert {"decide", "split", "compute_target", "read_operands"} <= names  # the core's big ones are measured
    assert any(name.startswith("Scanner.") for name in names)  # methods too
    over = [f"{file}: {name} (line {line}: {n})" for file, source in sources.items()
            for name, line, n in over_limit(source)]
    assert not over, (f"over a cyclomatic complexity of {LIMIT}, split along the seams in the code: "
                      + ", ".join(over))


def _complexity(source: str) -> int:
    (_, _, n), *_ = measure(source)
    return n


def test_each_kind_of_decision_point_is_counted() -> None:
    cases = {
        "def f():\n    return 1\n": 1,
        "def f(x):\n    if x:\n        pass\n    elif x > 1:\n        pass\n    else:\n        pass\n": 3,
        "def f(x):\n    for a in x:\n        pass\n    else:\n        pass\n    while x:\n        pass\n": 4,
        "def f(x):\n    try:\n        pass\n    except ValueError:\n        pass\n    except OSError:\n        pass\n"
        "    else:\n        pass\n    finally:\n        pass\n": 4,
        "def f(x):\n    with x:\n        pass\n": 1,
        "def f(x):\n    assert x and x\n": 2,
        "def f(a, b, c):\n    return a and b or c\n": 3,
        "def f(a, b, c):\n    return a if b else c\n": 2,
        "def f(x):\n    return [a for a in x if a if not a]\n": 4,
        "def f(x):\n    return {a: b for a in x for b in a}\n": 3,
        "def f(x):\n    match x:\n        case 1:\n            pass\n        case [2]:\n            pass\n"
        "        case _:\n            pass\n": 3,
        "def f(x):\n    match x:\n        case 1:\n            pass\n        case 2:\n            pass\n": 3,
        "def f(x):\n    g = lambda y: 1 if y else 2\n    return g\n": 2,
    }
    assert {src: _complexity(src) for src in cases} == cases


def test_a_nested_function_is_measured_on_its_own() -> None:
    source = ("class C:\n    def m(self, x):\n        def inner(y):\n            if y:\n                return 1\n"
              "            return 2\n        return inner(x) if x else 0\n")
    assert [(name, n) for name, _, n in measure(source)] == [("C.m", 2), ("C.m.inner", 2)]


def test_a_function_over_the_limit_is_named() -> None:
    def ifs(name: str, count: int) -> str:
        return f"def {name}(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(count))

    source = ifs("at_limit", LIMIT - 1) + "class K:\n" + textwrap.indent(ifs("over", LIMIT), "    ")
    assert [(name, n) for name, _, n in measure(source)] == [("at_limit", LIMIT), ("K.over", LIMIT + 1)]
    assert [(name, n) for name, _, n in over_limit(source)] == [("K.over", LIMIT + 1)]
