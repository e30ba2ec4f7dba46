"""What a call touches, computed with the file system: the one path resolver, the `Target`
built from a tool's declaration, the subject a path rule is matched against
(workspace-relative, `..` and symlinks resolved), whether a write lands somewhere that
always needs a person's yes (outside the workspace and `extra_write_roots`, inside `.git/`,
or a file that configures nanohermes or runs when it starts: `configfiles`), whether a command line reads a secret file through a
symlink, a glob or a folder it reads whole; and opening exactly the resolved path afterwards.

Paths are resolved once, the way the kernel walks them: each symlink is followed where it
stands and a `..` after it climbs from where the link points (`l/../x` with `l -> deep/er`
is `deep/x`). When reading the path as text (`l/../x` is `x`) gives another file, that
reading is kept as an alias, so a rule written for either spelling sees the call.

`permissions.decide()` stays pure; the runtime and the tools call these first.
"""

from __future__ import annotations

import errno
import glob as globlib
import itertools
import os
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from nanohermes.guard.configfiles import project_file, why_protected
from nanohermes.guard.gitmeta import metadata
from nanohermes.guard.hosts import LookupTimeout, canonical_host
from nanohermes.guard.hosts import resolve as resolve_host
from nanohermes.guard.permissions import Effect, ReadRules, SubjectKind, Target
from nanohermes.guard.secrets import holds_own_secret, name_matcher, own_secret

if TYPE_CHECKING:
    from nanohermes.guard.shellparse import SimpleCommand, Word


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
    return Path(real_path(p, path))


def lexical(base: Path | str, path: str) -> Path:
    """The path read as text first (`a/../b` is `b` whatever `a` is), then resolved."""
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        p = os.path.join(base, p)
    return Path(real_path(os.path.normpath(p), path))


def real_path(path: str, shown: str = "") -> str:
    """os.path.realpath, with a path that cannot be resolved said so: a folder on its way that
    may not be searched (`/proc/1/root`: permission denied), or a link found on the way that is
    no link by the time it is read (a folder swapped for a link and back, by a command still
    running, makes realpath fail with EINVAL). Either is a PathProblem here."""
    try:
        return os.path.realpath(path)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM):
            raise PathProblem(f"{shown or path} cannot be resolved: a folder on its way may not be searched "
                              f"({e.strerror}: {e.filename})") from None
        raise PathProblem(f"{shown or path} changed while it was being resolved ({e.strerror or e}: a folder on "
                          "its way was swapped for a link, or back, by a process still running); nothing was "
                          "done; stop what keeps changing it, then try again") from None


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
    if "://" in url_or_host:
        return canonical_host(urlsplit(url_or_host).hostname or "")
    return canonical_host(url_or_host.split("/", 1)[0].rsplit(":", 1)[0] if not url_or_host.startswith("[")
                          else url_or_host.split("]", 1)[0] + "]")


def resolve_cwd(workspace: Path, cwd: str | None) -> Path:
    """A command's directory: the workspace, or an existing directory inside it (a Windows
    path, `src\\lib`, read as the folder it names: `foreign_paths`)."""
    if cwd is None or not cwd.strip():
        return workspace
    real = resolve(workspace, _not_foreign(workspace, workspace, cwd))
    root = os.path.realpath(workspace)
    if not _inside(str(real), root):
        raise PathProblem(f"cwd {cwd} is outside the workspace {root}; pass a directory inside it, or omit cwd")
    if not real.is_dir():
        raise PathProblem(f"cwd {cwd} is not an existing directory; create it first or omit cwd")
    return real


def _not_foreign(workspace: Path, start: Path, text: str) -> str:
    """`text`, or the workspace path a Windows path stands for (`foreign_paths`); a PathProblem
    when it stands for none, so no tool creates a name holding a backslash or a drive letter."""
    # only a path written the Windows way
    from nanohermes.guard.foreign_paths import ForeignPath, is_foreign, mapped

    if not is_foreign(text):
        return text
    try:
        return mapped(workspace, start, text) or text
    except ForeignPath as e:
        raise PathProblem(str(e)) from None


def compute_target(kind: SubjectKind, effect: Effect, raw: list[str], workspace: Path, *, base: str | None = None,
                   extra_roots: Iterable[str] = (), shows_contents: bool = True,
                   lookup_secs: float | None = None) -> Target:
    """A call's Target from its tool's declaration and the subjects its arguments name
    (a host's name looked up within `lookup_secs`). Raises PathProblem for a subject that
    cannot be judged."""
    roots = tuple(extra_roots)
    if kind == "path":
        return _path_target(effect, raw, workspace, base, roots, shows_contents)
    if kind == "command":
        return _command_target(effect, raw, workspace, base, roots)
    if kind == "host":
        return _host_target(effect, raw, lookup_secs)
    return Target(kind=kind, effect=effect, subjects=tuple(raw))


def _path_target(effect: Effect, raw: list[str], workspace: Path, base: str | None, roots: tuple[str, ...],
                 shows_contents: bool) -> Target:
    """Each path resolved from the call's folder (a Windows path read as the workspace path it
    names), as rules see it, with the other spelling it suggests; and why a write is protected."""
    start = resolve_cwd(workspace, base) if base else workspace
    written = list(dict.fromkeys(raw))
    subjects: list[str] = []
    aliases: list[str] = []
    paths: list[Path] = []
    mapped: list[tuple[str, str]] = []
    protected = ""
    for text in written:
        use = _not_foreign(workspace, start, text)
        real = resolve(start, use)
        subject = subject_of(workspace, real)
        if use != text:
            mapped.append((text, subject))
        paths.append(real)
        subjects.append(subject)
        aliases.append(subject_of(workspace, lexical(start, use)))
        if effect != "read" and not protected:
            protected = protected_write(workspace, str(real), extra_roots=roots)
    subjects = list(dict.fromkeys(subjects))
    return Target(kind="path", effect=effect, subjects=tuple(subjects),
                  aliases=tuple(a for a in dict.fromkeys(aliases) if a not in subjects), protected=protected,
                  shows_contents=shows_contents, raw=tuple(written), paths=tuple(paths), mapped=tuple(mapped))


def _command_target(effect: Effect, raw: list[str], workspace: Path, base: str | None,
                    roots: tuple[str, ...]) -> Target:
    """The command line, the folder it runs in, and why a write of it is protected."""
    cwd = resolve_cwd(workspace, base)
    line = raw[0] if raw else ""
    protected = command_protected(line, workspace, cwd=None if cwd == workspace else cwd,
                                  extra_roots=roots) if line else ""
    moved = ((base, subject_of(workspace, cwd)),) if base and _not_foreign(workspace, workspace, base) != base else ()
    return Target(kind="command", effect=effect, subjects=(line,) if raw else (), protected=protected, cwd=cwd,
                  mapped=moved)


def _host_target(effect: Effect, raw: list[str], lookup_secs: float | None) -> Target:
    """The canonical hosts, and the addresses they resolve to."""

    hosts = [h for h in (host_subject(r) for r in raw) if h]
    try:
        addresses = tuple(a for h in dict.fromkeys(hosts) for a in resolve_host(h, lookup_secs))
    except LookupTimeout as e:  # a host that cannot be judged is refused, not guessed
        raise PathProblem(f"{e}; its addresses cannot be checked against the host rules: try again later") from None
    return Target(kind="host", effect=effect, subjects=tuple(dict.fromkeys(hosts)), addresses=addresses)


# -- opening exactly the judged path -------------------------------------------------------

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_O_PATH = getattr(os, "O_PATH", 0)  # Linux: a descriptor that only names a file


def open_dir(real: Path, *, create: bool = False, path_only: bool = False) -> int:
    """A descriptor of the folder `real`, walked from / one component at a time without
    following any symlink (each folder is looked at once, so a link swapped in after the
    check cannot redirect the walk). With `create`, missing folders are made on the way.
    `path_only`: where the system has them, descriptors that only name the folders (O_PATH),
    which need no read permission on them."""
    if not real.is_absolute():
        raise PathProblem(f"{real} is not an absolute path")
    flags = _DIR_FLAGS | (_O_PATH if path_only else 0)
    fd = os.open("/", flags)
    try:
        for part in real.parts[1:]:
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(part, flags, dir_fd=fd)
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


@contextmanager
def held(real: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """`real` (already resolved: a folder or a file) opened without following any symlink
    and kept open while the block runs, for walkers and processes that take paths. Yields a
    path naming what was opened and its stat. Where the system names descriptors
    (`/proc/<pid>/fd/<n>`, Linux) the path is that name, so a link swapped into `real` after
    the check redirects nothing; elsewhere it is `real`, found link-free just now. On Linux
    the descriptor is an O_PATH one: it needs no more permission than walking the path does
    and never blocks on a FIFO. OSError as the opens raise (`swapped(e)`: a link appeared)."""
    flags = (_O_PATH or (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if real.parent == real:
        fd = os.open(real, flags)
    else:
        dfd = open_dir(real.parent, path_only=True)
        try:
            fd = os.open(real.name, flags, dir_fd=dfd)
        finally:
            os.close(dfd)
    try:
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):  # O_PATH with O_NOFOLLOW opens a link itself
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(real))
        by_fd = Path(f"/proc/{os.getpid()}/fd/{fd}")
        try:
            named: os.stat_result | None = os.stat(by_fd)
        except OSError:
            named = None
        same = named is not None and (named.st_dev, named.st_ino) == (st.st_dev, st.st_ino)
        yield (by_fd if same else real), st
    finally:
        os.close(fd)


def protected_write(workspace: Path, path: str, *, cwd: Path | None = None,
                    extra_roots: list[str] | tuple[str, ...] = ()) -> str:
    """Why writing `path` needs a person's yes whatever the mode or rules say, or "" when it
    does not: outside the workspace and `extra_roots`; inside `.git/` or what git runs from
    outside it; and what configures nanohermes or runs when it starts (`configfiles`: the
    project's and Claude Code's files, the user's config folders, the interpreter and packages
    nanohermes runs from)."""
    real = _real(cwd or workspace, path)
    if why := why_protected(real):
        return why
    root = os.path.realpath(workspace)
    if _inside(real, root):
        return _inside_root(real, root, git_runs=True)
    for extra in extra_roots:
        r = os.path.realpath(os.path.expanduser(extra))
        if _inside(real, r):
            return _inside_root(real, r, git_runs=False)
    return f"{real} is outside the workspace"


def _inside_root(real: str, root: str, *, git_runs: bool) -> str:
    """Why a write to `real`, inside the writable root `root`, is protected, or ""."""
    parts = Path(os.path.relpath(real, root)).parts
    if ".git" in parts:
        return f"{real} is git's metadata"
    if project_file(parts):
        return f"{real} configures nanohermes or Claude Code for this project"
    if git_runs and _git_runs(real, Path(root)):
        return f"{real} is a file git runs or reads its settings from"
    return ""


def _git_runs(real: str, workspace: Path) -> bool:
    """Is `real` a file git reads outside `.git` (what the sandbox keeps read-only too): a
    `core.hooksPath` folder, a file an `include.path` names, husky's `.husky/`? A write there
    runs code at the person's next commit, as a write to `.git/hooks` would."""
    meta = metadata(workspace)
    return any(_inside(real, str(p)) for p in (*meta.protected, *meta.absent))


def _unknown_path(w: Word) -> bool:
    """A word whose path is only known when bash expands it: variables, substitutions,
    globs (`.gi?`), braces (`{.git/config,x}`) and tilde forms other than `~` and `~/`
    (`~+` is $PWD, `~-` $OLDPWD, `~user` another home)."""
    return w.dynamic or w.glob or w.brace or (w.tilde and not (w.text == "~" or w.text.startswith("~/")))


def _cd(cmd: SimpleCommand, base: Path | None, cdpath: bool) -> Path | None:
    """The folder after `cd`/`pushd`/`popd`, or None when only the run knows it."""
    if cmd.name == "popd":
        return None
    args = [w for w in cmd.words[1:] if not w.text.startswith("-") or w.text == "-"]
    if not args:
        return Path.home() if cmd.name == "cd" else None
    t = args[0]
    if _unknown_path(t) or t.text == "-" or base is None:
        return None
    if cdpath and not t.text.startswith(("/", "./", "../", "~")) and t.text not in (".", ".."):
        return None  # CDPATH may send a relative cd anywhere
    return Path(_real(base, t.text))


def _located(commands: list[SimpleCommand], command: str, workspace: Path,
             cwd: Path | None) -> Iterator[tuple[SimpleCommand, Path | None]]:
    """Each simple command of the line but `cd`, `pushd` and `popd`, with the folder it runs
    in: None once a `cd` went where only the run knows."""
    cdpath = "CDPATH" in os.environ or "CDPATH" in command
    base: Path | None = cwd or workspace
    for cmd in commands:
        if cmd.name in ("cd", "pushd", "popd"):
            base = _cd(cmd, base, cdpath)
            continue
        yield cmd, base


def _named_paths(w: Word, root: str, most: int) -> list[str]:
    """The paths a word names from `root`: what its glob matches (lazily, at most `most`), or itself."""
    if not w.glob:
        return [os.path.join(root, os.path.expanduser(w.text))]
    try:
        matches = list(itertools.islice(globlib.iglob(os.path.expanduser(w.text), root_dir=root), most))
    except (OSError, ValueError):
        matches = []
    return [os.path.join(root, m) for m in matches]



def _simple_commands(command: str) -> list[SimpleCommand] | None:
    """A command line's simple commands, None when the shell analysis cannot follow it."""
    # the shell analysis and the command catalogue: at the first command line judged, never
    # for a turn that runs no command
    from nanohermes.guard.shellparse import ParseError, split

    try:
        return split(command)
    except ParseError:
        return None


def command_protected(command: str, workspace: Path, *, cwd: Path | None = None,
                      extra_roots: list[str] | tuple[str, ...] = ()) -> str:
    """Why a command line's write (by `>`, `>>`, a file it writes as an operand: tee) is
    protected, or "" when none is. A target only known at run time (an expansion, a glob, a
    brace, `~+`), or after a `cd` whose folder is (the same, `-`, `popd`, or a relative folder
    while CDPATH may be set), counts as protected."""
    commands = _simple_commands(command)
    if commands is None:
        return ""  # asked anyway: an unparseable command is never allowed silently
    for cmd, base in _located(commands, command, workspace, cwd):
        for t in cmd.written:
            if _unknown_path(t) or (base is None and not os.path.isabs(os.path.expanduser(t.text))):
                return f"{t.text} is only known when the command runs"
            if why := protected_write(workspace, t.text, cwd=base, extra_roots=extra_roots):
                return why
    return ""


class _Scan:
    """A bounded look through the file system for secret files."""

    def __init__(self, workspace: Path, patterns: tuple[str, ...], max_entries: int, max_secs: float,
                 own: tuple[str, ...] = ()) -> None:
        self.workspace = workspace
        self.patterns = patterns
        self.own = own
        self.left = max_entries
        self.max_entries = max_entries
        self.max_secs = max_secs
        self.deadline = time.monotonic() + max_secs
        # One compiled test for every name: folders of tens of thousands of files are common.
        self.names = name_matcher(patterns)

    def spent(self) -> str:
        self.left -= 1
        if self.left < 0:
            return f"more than {self.max_entries} files to check for secret files (secret_scan_entries)"
        if time.monotonic() > self.deadline:
            return f"files that took over {self.max_secs:g}s to check for secret files (secret_scan_secs)"
        return ""

    def secret(self, path: str) -> bool:
        if self.names.match(os.path.basename(path.rstrip("/"))):
            return True
        return os.path.islink(path) and bool(self.names.match(os.path.basename(os.path.realpath(path))))

    def check(self, path: str, recursive: bool) -> str:
        if too_much := self.spent():
            return too_much
        if self.secret(path):
            return subject_of(self.workspace, os.path.realpath(path))
        real = os.path.realpath(path)
        if own_secret(real, self.own) or (recursive and holds_own_secret(real, self.own)):
            return f"{real} (nanohermes's own files: its config, sessions, memory)"
        if not recursive or not os.path.isdir(path):
            return ""
        # Links are followed (grep -R and rg -L do; a loop only runs the budget down).
        for root, dirs, files in os.walk(os.path.realpath(path), followlinks=True):
            dirs[:] = [d for d in dirs if d != ".git"]  # git's own store holds no named secrets
            for name in (*files, *dirs):
                if too_much := self.spent():
                    return too_much
                if self.names.match(name) or self.secret(os.path.join(root, name)):
                    return subject_of(self.workspace, os.path.realpath(os.path.join(root, name)))
        return ""


def command_secret(command: str, workspace: Path, *, cwd: Path | None = None,
                   patterns: tuple[str, ...] | list[str] = (), max_entries: int = 20_000,
                   max_secs: float = 1.0, own: tuple[str, ...] = ()) -> str:
    """A secret file (workspace-relative when inside it) the command line would print:
    named through a symlink, matched by a glob, or inside a folder read whole (`grep -r`,
    `rg`, `find -exec cat`, `xargs cat`); or why that could not be checked within the
    bounds. "" when none. Names themselves are checked without the file system by
    `permissions.reads_secret`."""
    patterns = tuple(patterns)
    if not patterns and not own:
        return ""
    commands = _simple_commands(command)
    if commands is None:
        return ""  # asked anyway
    from nanohermes.guard.commands import read_operands  # loaded with the shell analysis, just above

    scan = _Scan(workspace, patterns, max_entries, max_secs, own)
    for cmd, base in _located(commands, command, workspace, cwd):
        words, recursive = read_operands(cmd)
        for w in words:
            if found := _secret_named(scan, w, workspace, base, recursive):
                return found
    return ""


def _secret_named(scan: _Scan, w: Word, workspace: Path, base: Path | None, recursive: bool) -> str:
    """A secret file the word names (read whole when `recursive`) from the folder `base`, or
    why that cannot be known here; "" when none."""
    if w.dynamic:
        return ""  # not known here: the command analysis asks for dynamic reads
    if (base is None and not os.path.isabs(os.path.expanduser(w.text))) \
            or (w.tilde and not (w.text == "~" or w.text.startswith("~/"))):
        return "files in a folder known only at run time"  # after `cd $X`, `cd -`, `popd`; `~+`
    root = str(base) if base is not None else str(workspace)
    for path in _named_paths(w, root, scan.max_entries + 1):  # no more names than the look may check
        if os.path.lexists(path) and (found := scan.check(path, recursive)):
            return found
    return ""


def command_read_rule(command: str, workspace: Path, rules: ReadRules, *, cwd: Path | None = None,
                      folders: bool = True, max_entries: int = 20_000,
                      max_secs: float = 1.0) -> tuple[str, str, str] | tuple[()]:
    """(decision, path as rules see it, rule) for a path the command line would print that a
    read rule covers: named, through a link or a glob, or (with `folders`: where no sandbox
    withholds it) inside a folder it reads whole; () when none is found within the bounds
    (the sandbox withholds what the look missed)."""
    commands = _simple_commands(command)
    if commands is None:
        return ()  # asked anyway
    from nanohermes.guard.commands import read_operands  # loaded with the shell analysis, just above

    look = _RuleLook(workspace, rules, folders, max_entries, max_secs)
    for cmd, base in _located(commands, command, workspace, cwd):
        words, recursive = read_operands(cmd)
        root = str(base) if base is not None else str(workspace)
        for w in words:
            if w.dynamic or (base is None and not os.path.isabs(os.path.expanduser(w.text))):
                continue  # known only at run time: the sandbox withholds what it reaches
            for path in _named_paths(w, root, max_entries):
                if (hit := look.walk(path, recursive)) is not None:
                    return hit
    return ()


def _judged(path: str) -> str:
    """The real path a read rule is matched against: links resolved, or, where a folder on the
    way cannot be searched (`/proc/1/root`, a folder without x), the path as written, made
    absolute: what the look cannot resolve, a command cannot open either."""
    try:
        return os.path.realpath(path)
    except OSError:
        return os.path.normpath(os.path.abspath(path))


class _RuleLook:
    """A bounded look for a path a read rule covers."""

    def __init__(self, workspace: Path, rules: ReadRules, folders: bool, max_entries: int, max_secs: float) -> None:
        self.workspace = workspace
        self.rules = rules
        self.folders = folders
        self.left = max_entries
        self.deadline = time.monotonic() + max_secs

    def walk(self, path: str, recursive: bool) -> tuple[str, str, str] | tuple[()] | None:
        """(decision, subject, rule) for the path, or (read whole) one below it, that a rule
        covers; () when the look ran out of its bounds; None when none is covered."""
        walk = [path]
        while walk:
            self.left -= 1
            if self.left < 0 or time.monotonic() > self.deadline:
                return ()
            one = walk.pop()
            subject = subject_of(self.workspace, _judged(one))
            if (hit := self.rules.covering(subject)) is not None:
                return (hit[0], subject, str(hit[1]))
            if self.folders and recursive and os.path.isdir(one) and not os.path.islink(one):
                try:
                    walk += [e.path for e in os.scandir(one) if e.name != ".git"]
                except OSError:
                    continue
        return None
