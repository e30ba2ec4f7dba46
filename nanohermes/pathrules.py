"""Path facts for permission checks, computed with the file system: the subject a path rule
is matched against (workspace-relative, `..` and symlinks resolved) and whether a write
lands somewhere that always needs a person's yes (outside the workspace and
`extra_write_roots`, inside `.git/`, or nanohermes's own config files).

`permissions.decide()` stays pure; the runtime and the tools call these first.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from nanohermes.dirs import config_home
from nanohermes.shellparse import ParseError, split


def _real(base: Path, path: str) -> str:
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        p = os.path.join(base, p)
    return os.path.realpath(p)  # resolves `..` and every symlink, even of a missing tail's parents


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def path_subject(workspace: Path, path: str, *, cwd: Path | None = None) -> str:
    """What a file tool's path rule sees: `src/a.py` inside the workspace, an absolute path
    outside it. `a/../b` is `b`; a symlink counts as the file it points to."""
    real = _real(cwd or workspace, path)
    root = os.path.realpath(workspace)
    if not _inside(real, root):
        return Path(real).as_posix()
    rel = os.path.relpath(real, root)
    return "." if rel == "." else Path(rel).as_posix()


def host_subject(url_or_host: str) -> str:
    """web_fetch rules match the host: `https://Docs.Python.org:443/x` -> `docs.python.org`."""
    if "://" in url_or_host:
        return (urlsplit(url_or_host).hostname or "").lower()
    return url_or_host.split("/", 1)[0].split(":", 1)[0].lower()


def protected_write(workspace: Path, path: str, *, cwd: Path | None = None,
                    extra_roots: list[str] | tuple[str, ...] = ()) -> bool:
    """Does writing `path` need a person's yes whatever the mode or rules say?"""
    real = _real(cwd or workspace, path)
    cfg = os.path.realpath(config_home())
    if _inside(real, cfg):
        return True
    root = os.path.realpath(workspace)
    if _inside(real, root):
        parts = Path(os.path.relpath(real, root)).parts
        return ".git" in parts or (len(parts) >= 1 and parts[0] == ".nanohermes")
    for extra in extra_roots:
        r = os.path.realpath(os.path.expanduser(extra))
        if _inside(real, r):
            return ".git" in Path(os.path.relpath(real, r)).parts
    return True


def command_protected(command: str, workspace: Path, *, cwd: Path | None = None,
                      extra_roots: list[str] | tuple[str, ...] = ()) -> bool:
    """Does a command line write (by `>`, `>>`, `tee`) to a protected path? A target only
    known at run time, or after a `cd` whose folder is, counts as protected."""
    try:
        commands = split(command)
    except ParseError:
        return False  # asked anyway: an unparseable command is never allowed silently
    base: Path | None = cwd or workspace
    for cmd in commands:
        if cmd.name in ("cd", "pushd"):
            args = [w for w in cmd.words[1:] if not w.text.startswith("-")]
            if not args:
                base = Path.home()
            elif args[0].dynamic or args[0].text == "-":
                base = None
            else:
                base = Path(_real(base, args[0].text)) if base is not None else None
            continue
        targets = [r.target for r in cmd.redirects if r.writes_file and r.target is not None]
        if cmd.name == "tee":
            targets += [w for w in cmd.words[1:] if not w.text.startswith("-") and w.text != "/dev/null"]
        for t in targets:
            if t.dynamic or t.glob:
                return True
            if base is None and not os.path.isabs(os.path.expanduser(t.text)):
                return True
            if protected_write(workspace, t.text, cwd=base, extra_roots=extra_roots):
                return True
    return False
