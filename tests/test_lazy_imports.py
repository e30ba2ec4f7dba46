"""Imports are at module level; one inside a function is an edge a start-up measurement earns,
and says why where it stands: a comment on its line, or on the line above it (above its block,
for several imports in a row), or it sits in a small accessor whose docstring says why (a
function that only imports and returns what it imported). What each kept edge saves is
measured by `python bench/startup.py`; which modules a start loads, by tests/test_hot_path.py."""

from __future__ import annotations

import ast
from pathlib import Path

import nanohermes

ROOT = Path(nanohermes.__file__).resolve().parent


def _is_import(node: ast.AST) -> bool:
    return isinstance(node, ast.Import | ast.ImportFrom)


def _accessor(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose docstring gives the reason and whose body only imports and returns."""
    body = fn.body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return False
    rest = body[1:]
    return bool(rest) and all(_is_import(s) for s in rest[:-1]) and isinstance(rest[-1], ast.Return)


def unexplained(source: str) -> list[int]:
    """The lines of the imports inside functions that carry no reason."""
    lines = source.splitlines()
    found: list[int] = []

    def block(stmts: list[ast.stmt]) -> None:
        for i, stmt in enumerate(stmts):
            if not _is_import(stmt):
                continue
            first = i  # the first import of the run this one belongs to: a comment above it covers the run
            while first > 0 and _is_import(stmts[first - 1]) and stmts[first - 1].end_lineno == stmts[first].lineno - 1:
                first -= 1
            above = lines[stmts[first].lineno - 2].strip() if stmts[first].lineno >= 2 else ""
            if "#" not in lines[stmt.lineno - 1] and not above.startswith("#"):
                found.append(stmt.lineno)

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if _accessor(node):
                return
            in_function = True
        for field in ("body", "orelse", "finalbody", "handlers"):
            stmts = getattr(node, field, None)
            if in_function and isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                block(stmts)
        for child in ast.iter_child_nodes(node):
            visit(child, in_function)

    visit(ast.parse(source), False)
    return sorted(found)


def test_every_import_inside_a_function_says_why() -> None:
    missing = [f"{path.relative_to(ROOT.parent)}:{line}" for path in sorted(ROOT.rglob("*.py"))
               for line in unexplained(path.read_text(encoding="utf-8"))]
    assert missing == [], "an import inside a function needs its reason beside it (or a module-level import)"


def test_the_check_sees_what_it_should() -> None:
    source = '''
import json


def bare():
    import csv
    return csv


def on_the_line():
    import csv  # the REPL's start only
    return csv


def above_its_block():
    # only when a session is resumed
    import csv
    from json import dumps
    return csv, dumps


def after_code():
    # a comment about the next line
    x = 1
    import csv
    return csv, x


def accessor():
    """csv stays off the start: only an export needs it."""
    import csv
    return csv


def not_an_accessor():
    """A docstring, but the function does more than import."""
    import csv
    print(csv)
    return csv


class Holder:
    def method(self):
        if True:
            from json import loads
        return loads
'''
    lines = source.splitlines()
    # Each flagged import, named by the function it stands in.
    flagged = [next(line.split("def ")[1].split("(")[0] for line in reversed(lines[:n]) if "def " in line)
               for n in unexplained(source)]
    assert flagged == ["bare", "after_code", "not_an_accessor", "method"]
