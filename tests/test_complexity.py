"""No function in the safety core is over cyclomatic complexity 15, counted as radon's `cc`
counts it: 1, plus 1 for each `if`, `elif`, conditional expression, `for`/`while` (and its
`else`), `except` (and a `try`'s `else`), `assert`, comprehension `for` and its `if`s, `case`
but a wildcard, and each extra operand of `and`/`or`. A function nested in another is
counted on its own; a lambda's conditions are its function's."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

LIMIT = 15

# The modules of the safety core whose functions must stay simple.
SAFETY_CORE = (
    "nanohermes/gate.py", "nanohermes/sandbox", "nanohermes/sockets.py", "nanohermes/withhold.py",
    "nanohermes/gitmeta.py", "nanohermes/redact.py", "nanohermes/runs_later.py", "nanohermes/trust.py",
    "nanohermes/programs.py", "nanohermes/ownreads.py", "nanohermes/configfiles.py", "nanohermes/procargs.py",
)

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def decisions(node: ast.AST) -> int:
    """The decision points of `node` itself (radon's ComplexityVisitor, one node)."""
    if isinstance(node, ast.Try):
        return len(node.handlers) + bool(node.orelse)
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
        return 1
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    if isinstance(node, ast.Match):
        wildcard = any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases)
        return max(0, len(node.cases) - wildcard)
    return 0


def complexity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1 plus the decision points of the function's body, leaving out the functions and
    classes defined in it."""
    total = 1
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFS):
            continue
        total += decisions(node)
        stack.extend(ast.iter_child_nodes(node))
    return total


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method in `tree`, nested ones too, by qualified name."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def over(source: str, limit: int) -> dict[str, int]:
    """The functions of `source` over `limit`, with their complexity."""
    return {name: n for name, fn in functions(ast.parse(source)) if (n := complexity(fn)) > limit}


def modules() -> list[Path]:
    out: list[Path] = []
    for name in SAFETY_CORE:
        path = REPO / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def test_no_function_in_the_safety_core_is_over_the_limit() -> None:
    found = {f"{path.relative_to(REPO)}:{name}": n for path in modules()
             for name, n in over(path.read_text(encoding="utf-8"), LIMIT).items()}
    assert found == {}, f"over complexity {LIMIT}: split them into named steps"


SAMPLE = '''
def plain(x):
    return x

def branches(a, b, items):
    if a and b or not a:          # 1, and the operators' 2
        pass
    elif b:                        # 1
        pass
    for i in items:                # 1
        continue
    else:                          # 1
        pass
    while a:                       # 1
        break
    try:
        pass
    except ValueError:             # 1
        pass
    except OSError:                # 1
        pass
    else:                          # 1
        pass
    assert a                       # 1
    y = [i for i in items if i if not i]   # 1 + 2
    z = 1 if a else 2              # 1
    f = lambda q: q if q else 0    # 1 (a lambda's are its function's)
    match a:
        case 1:                    # 1
            pass
        case 2:                    # 1
            pass
        case _:                    # 0
            pass

    def inner(c):                  # on its own, not the outer's
        if c:
            return 1
        return 2

    class Local:
        def method(self, d):
            return d and d

    return y, z, f, inner, Local
'''


def test_the_count_is_radons() -> None:
    counted = {name: complexity(fn) for name, fn in functions(ast.parse(SAMPLE))}
    # radon gives plain 1, branches 19 and (with --show-closures) branches.inner 2; a class
    # defined in a function radon leaves out, and its methods are counted here too.
    assert counted == {"plain": 1, "branches": 19, "branches.inner": 2, "branches.Local.method": 2}


@pytest.mark.parametrize(("limit", "expected"), [
    (19, {}),
    (18, {"branches": 19}),
    (1, {"branches": 19, "branches.inner": 2, "branches.Local.method": 2}),
])
def test_a_lowered_limit_names_each_function_over_it(limit: int, expected: dict[str, int]) -> None:
    assert over(SAMPLE, limit) == expected
