"""What a call touches, computed with the file system: the one path resolver, the `Target`
built from a tool's declaration, the subject a path rule is matched against
(workspace-relative, `..` and symlinks resolved) and whether a write lands somewhere that
always needs a person's yes (outside the workspace and `extra_write_roots`, inside `.git/`,
or nanohermes's own config files); and opening exactly the resolved path afterwards.

Paths are resolved once, the way the kernel walks them: each symlink is followed where it
stands and a `..` after it climbs from where the link points (`l/../x` with `l -> deep/er`
is `deep/x`). When reading the path as text (`l/../x` is `x`) gives another file, that
reading is kept as an alias, so a rule written for either spelling sees the call.

`permissions.decide()` stays pure; the runtime and the tools call these first.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit

from nanohermes.dirs import config_home
from nanohermes.permissions import Effect, SubjectKind, Target
from nanohermes.shellparse import ParseError, split


class PathProblem(ValueError):
    """A path that cannot be judged (a NUL byte, a cwd outside the workspace); the text says
    what to do instead."""


def resolve(base: Path | str, path: str) -> Path:
    """The one resolver: `path` (relative to `base`, `~` expanded) as the absolute physical
    path the kernel would use, every symlink and `..` resolved, a missing tail kept as written."""
    if "\x00" in path:
        raise PathProblem(f"path {path!r} contains a NUL byte; pass a plain file path")
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        p = os.path.join(base, p)
    return Path(os.path.realpath(p))


def lexical(base: Path | str, path: str) -> Path:
    """The path read as text first (`a/../b` is `b` whatever `a` is), then resolved."""
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        p = os.path.join(base, p)
    return Path(os.path.realpath(os.path.normpath(p)))


def _real(base: Path, path: str) -> str:
    return str(resolve(base, path))


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def subject_of(workspace: Path, real: Path | str) -> str:
    """A resolved path as rules see it: `src/a.py` inside the workspace, absolute outside."""
    root = os.path.realpath(workspace)
    if not _inside(str(real), root):
        return Path(real).as_posix()
    rel = os.path.relpath(real, root)
    return "." if rel == "." else Path(rel).as_posix()


def host_subject(url_or_host: str) -> str:
    """web_fetch rules match the host: `https://Docs.Python.org:443/x` -> `docs.python.org`;
    an IP literal in any spelling gives its usual form."""
    from nanohermes.hosts import canonical_host

    if "://" in url_or_host:
        return canonical_host(urlsplit(url_or_host).hostname or "")
    return canonical_host(url_or_host.split("/", 1)[0].rsplit(":", 1)[0] if not url_or_host.startswith("[")
                          else url_or_host.split("]", 1)[0] + "]")


def resolve_cwd(workspace: Path, cwd: str | None) -> Path:
    """A command's directory: the workspace, or an existing directory inside it."""
    if cwd is None or not cwd.strip():
        return workspace
    real = resolve(workspace, cwd)
    root = os.path.realpath(workspace)
    if not _inside(str(real), root):
        raise PathProblem(f"cwd {cwd} is outside the workspace {root}; pass a directory inside it, or omit cwd")
    if not real.is_dir():
        raise PathProblem(f"cwd {cwd} is not an existing directory; create it first or omit cwd")
    return real


def compute_target(kind: SubjectKind, effect: Effect, raw: list[str], workspace: Path, *, base: str | None = None,
                   extra_roots: Iterable[str] = (), shows_contents: bool = True) -> Target:
    """A call's Target from its tool's declaration and the subjects its arguments name.
    Raises PathProblem for a subject that cannot be judged."""
    roots = tuple(extra_roots)
    if kind == "path":
        start = resolve_cwd(workspace, base) if base else workspace
        subjects: list[str] = []
        aliases: list[str] = []
        written = list(dict.fromkeys(raw))
        paths: list[Path] = []
        protected = False
        for text in written:
            real = resolve(start, text)
            paths.append(real)
            subject = subject_of(workspace, real)
            if subject not in subjects:
                subjects.append(subject)
            alias = subject_of(workspace, lexical(start, text))
            if alias != subject and alias not in aliases:
                aliases.append(alias)
            if effect != "read":
                protected = protected or protected_write(workspace, str(real), extra_roots=roots)
        return Target(kind=kind, effect=effect, subjects=tuple(subjects), aliases=tuple(a for a in aliases if a not in subjects),
                      protected=protected, shows_contents=shows_contents, raw=tuple(written), paths=tuple(paths))
    if kind == "command":
        cwd = resolve_cwd(workspace, base)
        line = raw[0] if raw else ""
        protected = bool(line) and command_protected(line, workspace, cwd=None if cwd == workspace else cwd,
                                                     extra_roots=roots)
        return Target(kind=kind, effect=effect, subjects=(line,) if raw else (), protected=protected, cwd=cwd)
    if kind == "host":
        from nanohermes.hosts import resolve as resolve_host

        hosts = [h for h in (host_subject(r) for r in raw) if h]
        return Target(kind=kind, effect=effect, subjects=tuple(dict.fromkeys(hosts)),
                      addresses=tuple(a for h in dict.fromkeys(hosts) for a in resolve_host(h)))
    return Target(kind=kind, effect=effect, subjects=tuple(raw))


# -- opening exactly the judged path -------------------------------------------------------

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def open_dir(real: Path, *, create: bool = False) -> int:
    """A descriptor of the folder `real`, walked from / one component at a time without
    following any symlink (each folder is looked at once, so a link swapped in after the
    check cannot redirect the walk). With `create`, missing folders are made on the way."""
    if not real.is_absolute():
        raise PathProblem(f"{real} is not an absolute path")
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in real.parts[1:]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_exact(real: Path, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """Open the file `real` (already resolved) refusing a symlink anywhere in the path: a
    link put there after the path was judged gives ELOOP instead of another file."""
    dfd = open_dir(real.parent)
    try:
        return os.open(real.name, flags | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=dfd)
    finally:
        os.close(dfd)


def read_exact(real: Path) -> bytes:
    fd = open_exact(real)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def unlink_exact(real: Path) -> None:
    """Remove the file `real` (already resolved); a link swapped into its folders is refused."""
    dfd = open_dir(real.parent)
    try:
        os.unlink(real.name, dir_fd=dfd)
    finally:
        os.close(dfd)


def swapped(e: OSError) -> bool:
    """Did an open fail because a symlink stood where the judged path had none?"""
    return e.errno in (errno.ELOOP, errno.ENOTDIR)


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
