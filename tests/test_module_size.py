"""No module of nanohermes passes 700 lines.

A module owns one thing and says what in its first lines; past 700 lines it owns several, and
the next contributor reads all of them to change one. Split it by what it owns (a package of
modules, each saying what it owns), never by cutting a list in two.
"""

from __future__ import annotations

from pathlib import Path

import nanohermes
from test_imports import write

LIMIT = 700


def oversized(root: Path, limit: int = LIMIT) -> dict[str, int]:
    """Every module of the package at `root` longer than `limit` lines, by its path from the
    package's parent, with its length."""
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            out[path.relative_to(root.parent).as_posix()] = lines
    return out


def test_no_module_passes_700_lines() -> None:
    root = Path(nanohermes.__file__).parent
    assert oversized(root) == {}


def test_the_limit_counts_every_line_of_every_module_in_every_folder(tmp_path: Path) -> None:
    pkg = write(tmp_path, {
        "pkg/__init__.py": "\n" * 3,
        "pkg/fits.py": "x = 1\n" * 10,
        "pkg/sub/__init__.py": "",
        "pkg/sub/long.py": "x = 1\n" * 11,
        "pkg/sub/blank.py": "\n" * 11,  # blank lines count: a module is read whole
        "pkg/notes.txt": "x\n" * 50,  # not a module
    })
    assert oversized(pkg, 10) == {"pkg/sub/blank.py": 11, "pkg/sub/long.py": 11}
    assert oversized(pkg, 11) == {}
