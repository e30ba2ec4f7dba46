"""The files that configure nanohermes or run code when it starts, wherever they are: a write
there changes what the next start does, so the file tools ask a person for it in every mode
(`pathrules.protected_write`) and the sandbox keeps it read-only (`sandbox_paths`).

Three groups:
- project files, at any depth of a workspace (a start in that folder reads them):
  `.nanohermes/`, Claude Code's `.claude/settings.json` and `.claude/settings.local.json`,
  `.mcp.json`, and the `.claude/commands`, `.claude/agents` and `.claude/skills` folders;
- the user's folders: nanohermes's own (config, data, state, cache: see `dirs`), `~/.claude/`
  and `~/.claude.json`;
- the interpreter and packages nanohermes runs from: each prefix's `bin`, `lib` and
  `include` folders and `pyvenv.cfg` (`sys.prefix`, `sys.base_prefix` and their exec
  twins), every site-packages folder, the user site, and the interpreter itself. A `.pth`
  file or `sitecustomize.py` there runs unconfined at the next start, even when that
  installation is a venv inside the workspace.
"""

from __future__ import annotations

import functools
import os
import site
import sys
from pathlib import Path

from nanohermes.common.dirs import cache_home, config_home, data_home, state_home

# Paths relative to a folder of the workspace (its root or any folder below it).
PROJECT_FILES: tuple[tuple[str, ...], ...] = (
    (".nanohermes",), (".claude", "settings.json"), (".claude", "settings.local.json"), (".mcp.json",),
    (".claude", "commands"), (".claude", "agents"), (".claude", "skills"),
)
# What an installation runs Python from, below each of its prefixes (POSIX and Windows layouts).
_PREFIX_PARTS = ("bin", "lib", "lib64", "include", "pyvenv.cfg", "Lib", "Scripts")


def project_file(parts: tuple[str, ...] | list[str]) -> bool:
    """Is the workspace-relative path of `parts` one of the project files (or inside one), at any depth?"""
    parts = tuple(parts)
    for i in range(len(parts)):
        for entry in PROJECT_FILES:
            if parts[i:i + len(entry)] == entry:
                return True
    return False


def user_paths() -> tuple[str, ...]:
    """Real paths of the user's config folders and files: nanohermes's own and Claude Code's."""
    home = Path.home()
    paths = (config_home(), data_home(), state_home(), cache_home(), home / ".claude", home / ".claude.json")
    return tuple(dict.fromkeys(os.path.realpath(p) for p in paths))


def interpreter_paths() -> tuple[str, ...]:
    """Real paths of what the running interpreter starts from: its prefixes' folders, its
    site-packages folders, the user site and the interpreter's own file."""
    return _interpreter_paths((sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix), sys.executable)


@functools.lru_cache(maxsize=4)  # looked up again only if the interpreter's own values change
def _interpreter_paths(prefixes: tuple[str, ...], executable: str) -> tuple[str, ...]:
    out: list[str] = []
    prefixes = tuple(p for p in dict.fromkeys(prefixes) if p and os.path.realpath(p) != "/")
    for prefix in prefixes:
        out += [os.path.join(prefix, part) for part in _PREFIX_PARTS]
    try:  # the folders this process took, and those its prefixes hold
        out += [*site.getsitepackages(), *site.getsitepackages(list(prefixes))]
    except AttributeError:  # an embedded interpreter's `site` may lack it
        pass
    try:
        out.append(site.getusersitepackages())
    except AttributeError:
        pass
    if executable:
        out.append(executable)
    return tuple(dict.fromkeys(os.path.realpath(p) for p in out if p))


def protected_anywhere() -> tuple[str, ...]:
    """Every real path outside the project files that a write must not change unasked."""
    return (*user_paths(), *interpreter_paths())


def why_protected(real: str) -> str:
    """Why a write to the real path `real` outside the project files is protected, or ""."""
    if root := inside(real, user_paths()):
        return f"{real} is in {root}, which configures nanohermes or Claude Code for the user"
    if root := inside(real, interpreter_paths()):
        return f"{real} is in {root}, part of the Python installation nanohermes runs from"
    return ""


def sandbox_paths(workspace: Path, roots: tuple[Path, ...] = ()) -> list[Path]:
    """What a sandboxed command that may write the workspace must leave as it is, beside git's
    metadata: the project files at the workspace's root, and the user's folders and the
    interpreter's where they lie in the workspace or one of `roots` (the other writable
    roots; everywhere else the tree is read-only anyway). Those that exist are bound
    read-only, those that do not are removed if the command makes them (see
    `gitmeta.metadata`)."""
    project = [workspace.joinpath(*entry) for entry in PROJECT_FILES]
    writable = [os.path.realpath(r) for r in (workspace, *roots)]
    return [*project, *(Path(p) for p in protected_anywhere() if inside(p, writable))]


def inside(real: str, roots: tuple[str, ...] | list[str]) -> str:
    """The one of `roots` (real paths) that the real path `real` is or lies in, or ""."""
    for root in roots:
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return root
    return ""
