"""Paths written for another system: Windows' backslashes (`src\\app.py`) and drive letters
(`C:\\Users\\me\\proj\\notes.md`), as models trained on Windows sessions write them.

On Linux a backslash is an ordinary character of a name, so such a path names no workspace
file, and a write would create a file called `src\\app.py` (or `C:\\Users\\...`) beside the
real one. `mapped` reads it as the workspace path it stands for when that path exists, and
otherwise refuses it with the path to write instead: a file tool never creates a name holding
a backslash or a drive prefix. A path that exists as written (a file whose name really holds a
backslash) is taken as it is.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# `C:`, `C:\`, `C:/` at the start; `\\server\share` (UNC, after the backslashes became slashes).
_DRIVE = re.compile(r"^[A-Za-z]:")
_UNC = re.compile(r"^//[^/]+/[^/]+")


class ForeignPath(ValueError):
    """A Windows path that names no workspace path: the text says which path to write instead."""


def is_foreign(text: str) -> bool:
    """Does `text` hold a backslash or start with a drive letter (`C:`)?"""
    return "\\" in text or bool(_DRIVE.match(text))


def _parts(posix: str) -> tuple[bool, list[str]]:
    """(absolute on its own system, the path's components) of a path with `/` for `\\`."""
    head = _DRIVE.match(posix) or _UNC.match(posix)
    rest = posix[head.end():] if head else posix
    absolute = head is not None or rest.startswith("/")
    return absolute, [p for p in rest.split("/") if p not in ("", ".")]


def mapped(workspace: Path, start: Path, text: str) -> str | None:
    """The path to use for `text` (relative to `start`, or absolute) when it is a Windows path
    naming an existing workspace path once read with `/`; None when `text` is no Windows path
    or exists as written. Raises ForeignPath when it names nothing there.

    A relative path (`src\\app.py`) is read from `start`. An absolute one (`C:\\...\\src\\app.py`)
    is read as the workspace path it ends with, the longest that exists, of two components at
    least (or one, right after a folder named as the workspace is): a lone `app.py` somewhere
    else is not taken for the workspace's."""
    if not is_foreign(text) or os.path.lexists(os.path.join(start, text)):
        return None
    absolute, parts = _parts(text.replace("\\", "/"))
    if not absolute:
        rel = "/".join(parts)
        if rel and os.path.lexists(start / rel):
            return rel
        raise ForeignPath(_refusal(text, rel or ".", start, workspace, sure=True))
    return _in_workspace(workspace, text, parts)


def _in_workspace(workspace: Path, text: str, parts: list[str]) -> str:
    """An absolute Windows path (its `parts`) as the workspace path it ends with; ForeignPath
    with the path to write instead when it ends with none."""
    after_name = max((k + 1 for k, p in enumerate(parts) if p == workspace.name), default=None)
    for k in range(len(parts)):
        tail = "/".join(parts[k:])
        if (len(parts) - k >= 2 or k == after_name) and os.path.lexists(workspace / tail):
            return str(workspace / tail)
    raise ForeignPath(_refusal(text, _suggestion(workspace, parts, after_name), workspace, workspace,
                               sure=after_name is not None))


def _suggestion(workspace: Path, parts: list[str], after_name: int | None) -> str:
    """The path to write instead: what follows a folder named as the workspace, else the
    longest tail whose folder the workspace has (`src/new.py` when there is a `src/`)."""
    if after_name is not None and after_name < len(parts):
        return "/".join(parts[after_name:])
    return next(("/".join(parts[k:]) for k in range(len(parts) - 1) if os.path.isdir(workspace.joinpath(*parts[k:-1]))),
                parts[-1] if parts else ".")


def _refusal(text: str, suggestion: str, start: Path, workspace: Path, *, sure: bool) -> str:
    where = f"the workspace ({workspace})" if start == workspace else f"{start}"
    use = f"`{suggestion}`" if sure else f"perhaps `{suggestion}`"
    return (f"{text} is a Windows path (a backslash or a drive letter); on this Linux system it names nothing in "
            f"{where}, and no file tool creates such a name, so nothing was read or written. Write paths with `/`, "
            f"relative to the workspace: {use}")


def note(pairs: tuple[tuple[str, str], ...]) -> str:
    """What the result says of the Windows paths a call's paths were read as."""
    said = "; ".join(f"`{written}` as `{used}`" for written, used in pairs)
    return f"(Windows path{'s' if len(pairs) > 1 else ''} read {said}: paths here use `/`)"


__all__ = ["ForeignPath", "is_foreign", "mapped", "note"]
