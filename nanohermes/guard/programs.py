"""The programs nanohermes itself starts (git, ripgrep, the shell, the sandbox's probe), found
outside every writable root.

A folder inside a writable root (the workspace's `.venv/bin` or `node_modules/.bin`, a
folder of `sandbox.writable_roots`) may hold a program a sandboxed command wrote: nanohermes
never starts one from there for itself, and never one reached through a link into such a
folder. PATH entries that are relative are skipped too (they name a folder of whatever the
working folder is). `settle()` fixes the roots once a session knows them (every runtime
does, for its workspace); before any session there is nothing a sandboxed command could have
written. A name is looked up once per set of roots and PATH.

`started` starts one so that a cancellation in the middle of the start leaves nothing
running. Also owns how nanohermes runs git for itself: `GIT_OWN` turns off every program a
repository's config can name and takes no folder for a repository unless it is named
(`safe.bareRepository=explicit`), and `git_env` puts the same setting in force for a
sandboxed command's own git.

The person's own programs (MCP servers, hooks) start through `person_start`: where they run
and the variables that say where code is looked up, so that nothing in the workspace changes
which code runs, unless the program is the project's own (defined by a trusted project's
config), which the project wrote to run its own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar
from nanohermes.common.dirs import private_dir, state_home

_T = TypeVar("_T")

_roots: tuple[str, ...] | None = None
_kept: tuple[str, ...] = ()  # roots of every session this process serves (`keep`)
_found: dict[tuple[str, tuple[str, ...]], str | None] = {}

# Settings for every git nanohermes runs for itself: no program a repository's config names
# (fsmonitor, hooks, pager, ssh, credential helper, signing), and a folder that merely looks
# like a bare repository is never taken for one.
GIT_OWN: tuple[str, ...] = (
    "-c", "safe.bareRepository=explicit", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat", "-c", "core.sshCommand=false", "-c", "credential.helper=", "-c", "gpg.program=false",
    "-c", "core.alternateRefsCommand=false",
)


def settle(roots: Iterable[os.PathLike[str] | str]) -> None:
    """The writable roots of this session (the workspace, its git folders, extra roots):
    programs are found outside them from now on (and outside the ones `keep` kept)."""
    global _roots
    _roots = tuple(dict.fromkeys([*_kept, *(os.path.realpath(os.path.expanduser(os.fspath(r))) for r in roots)]))


def keep(roots: Iterable[os.PathLike[str] | str]) -> None:
    """Writable roots that stay excluded for the rest of the process, whatever a later
    `settle` names: a process serving sessions in several folders (`nanohermes acp`) finds
    programs outside every one's roots, a sub-agent's settle included."""
    global _kept
    _kept = tuple(dict.fromkeys([*_kept, *(os.path.realpath(os.path.expanduser(os.fspath(r))) for r in roots)]))
    settle(writable_roots())


def writable_roots() -> tuple[str, ...]:
    return _roots if _roots is not None else ()


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def usable(path: str, roots: tuple[str, ...] | None = None) -> bool:
    """Is `path` an executable file nanohermes may start: absolute, and neither it nor what
    it links to inside a writable root?"""
    roots = writable_roots() if roots is None else roots
    if not os.path.isabs(path) or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return False
    return not _inside(os.path.abspath(path), roots) and not _inside(os.path.realpath(path), roots)


def find(name: str, *, first: Iterable[str] = ()) -> str | None:
    """The absolute path of program `name`: in the folders `first`, then on PATH, skipping
    relative entries and every folder inside a writable root. None when there is none."""
    roots = writable_roots()
    path = os.environ.get("PATH", os.defpath)
    key = (name, (*roots, "\0", *first, "\0", path))
    if key in _found:
        return _found[key]
    found = None
    for folder in (*first, *path.split(os.pathsep)):
        if not folder or not os.path.isabs(folder):
            continue
        candidate = os.path.join(folder, name)
        if usable(candidate, roots):
            found = candidate
            break
    _found[key] = found
    return found


def skipped(name: str, *, first: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The programs `name` that `find` passes over because they lie inside a writable root
    (or link into one): (the program, the root), in the order `find` looks. For saying why
    none was found, and what would help (one installed outside, not a reinstall in place)."""
    roots = writable_roots()
    path = os.environ.get("PATH", os.defpath)
    out: list[tuple[str, str]] = []
    for folder in dict.fromkeys((*first, *path.split(os.pathsep))):
        candidate = os.path.join(folder, name) if folder and os.path.isabs(folder) else ""
        if not candidate or not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
            continue
        inside = [r for r in roots if _inside(os.path.abspath(candidate), (r,)) or _inside(os.path.realpath(candidate), (r,))]
        if inside:
            out.append((candidate, inside[0]))
    return out


def outside_path(path: str) -> str:
    """A PATH value without its relative entries and those inside a writable root: for the
    person's own commands that nanohermes starts (hooks, MCP servers), so a program a
    sandboxed command wrote in `.venv/bin` or `node_modules/.bin` never runs for one of them
    by name. A program named by its path still runs (the person's choice)."""
    return _folders_outside(path, writable_roots())


# Variables holding folders (or files: CLASSPATH's jars) a program looks up code in, from first
# to last: an entry that is relative (a folder of whatever the working folder is) or inside a
# writable root is dropped for a program the person configured, as PATH's are for the programs
# nanohermes runs. Programs (PATH), Python, Node, shared libraries, Perl, Ruby and Java.
SEARCH_PATHS: tuple[str, ...] = ("PATH", "PYTHONPATH", "NODE_PATH", "LD_LIBRARY_PATH", "PERL5LIB", "PERLLIB",
                                 "RUBYLIB", "GEM_PATH", "CLASSPATH")


def _folders_outside(value: str, roots: tuple[str, ...]) -> str:
    kept = [f for f in value.split(os.pathsep) if f and os.path.isabs(f)
            and not _inside(os.path.realpath(f), roots) and not _inside(os.path.abspath(f), roots)]
    return os.pathsep.join(kept)


def neutral_folder(workspace: os.PathLike[str] | str) -> str:
    """The working folder of a program the person configured for every project: a private
    folder of nanohermes's, empty of anything a project put there, or `/` when that folder
    lies inside a writable root (a workspace holding the home folder). Not the workspace:
    `python -m name`, npx (`node_modules/.bin`, `.npmrc`), uv (`uv.toml`, `pyproject.toml`) and
    their like take code and settings from the working folder and the folders above it."""
    roots = (*writable_roots(), os.path.realpath(workspace))
    own = state_home() / "run"
    if not _inside(os.path.realpath(own), roots) and not _inside(os.path.abspath(own), roots):
        try:
            return str(private_dir(own))
        except OSError:  # an unwritable state folder: the root folder holds nothing of a project either
            pass
    return "/"


def person_start(inherited: Mapping[str, str], chosen: Mapping[str, str], *, cwd: str | None,
                 workspace: os.PathLike[str] | str, project_own: bool) -> tuple[str, dict[str, str]]:
    """Where a program of the person's config (an MCP server, a hook) starts, and with which
    environment: `inherited` is what it gets from nanohermes's own environment, `chosen` what
    its config sets for it (kept as written: the person's choice).

    Its working folder is `cwd` when the config names one (relative to the workspace), else the
    workspace for the project's own program and `neutral_folder` for the person's. The folders
    of SEARCH_PATHS that are relative or inside a writable root are dropped (a program a
    sandboxed command wrote is never run or imported by name), and a program of the person's
    whose working folder lies inside a writable root runs Python with PYTHONSAFEPATH=1: neither
    that folder nor `-c`'s empty entry comes first on `sys.path` (a script's own folder is left
    out too, so it is set only there, where it matters). The workspace's path is always in
    NANOHERMES_PROJECT_DIR and CLAUDE_PROJECT_DIR, for a program that works on the project.
    nanohermes's own venv is taken off PATH (`ownvenv`), as for the commands it runs."""
    ws = os.path.realpath(workspace)
    if cwd:
        folder = os.path.join(ws, os.path.expanduser(cwd))
    else:
        folder = ws if project_own else neutral_folder(ws)
    # only a person's own command (the REPL's !) needs it
    from nanohermes.guard.ownvenv import without_own_venv

    roots = (*writable_roots(), ws)
    env = without_own_venv(inherited, roots)  # the person's python3, not nanohermes's
    for name in SEARCH_PATHS if not project_own else ("PATH",):
        if name in env:
            env[name] = _folders_outside(env[name], roots)
    if not project_own and (_inside(os.path.realpath(folder), roots) or _inside(os.path.abspath(folder), roots)):
        env["PYTHONSAFEPATH"] = "1"
    env.update(chosen)  # PYTHONSAFEPATH="" in the config turns it off, as Python reads it
    env.update({"NANOHERMES_PROJECT_DIR": str(workspace), "CLAUDE_PROJECT_DIR": str(workspace)})
    return folder, env


def git() -> str:
    """git's absolute path; FileNotFoundError when none is usable."""
    path = find("git")
    if path is None:
        raise FileNotFoundError("git")
    return path


def shell() -> str:
    """The shell commands run in: bash, or sh where bash is missing (sh is always there)."""
    return find("bash") or find("sh") or "/bin/sh"


def git_env(env: Mapping[str, str], *, no_programs: bool = False) -> dict[str, str]:
    """`env` with `safe.bareRepository=explicit` added to the configuration git takes from the
    environment (after any the person set there): a folder a sandboxed command made to look
    like a repository is never opened as one, by that command's own git either. With
    `no_programs` (a read-only sandbox), also none of the programs in GIT_OWN."""
    out = dict(env)
    try:
        n = max(0, int(out.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        n = 0
    pairs = [GIT_OWN[i + 1].split("=", 1) for i in range(0, len(GIT_OWN), 2)]
    for key, value in pairs if no_programs else pairs[:1]:
        out.update({f"GIT_CONFIG_KEY_{n}": key, f"GIT_CONFIG_VALUE_{n}": value})
        n += 1
    out["GIT_CONFIG_COUNT"] = str(n)
    return out


def path_folders_inside(roots: Iterable[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The folders on PATH that lie inside one of `roots` (real paths): programs written there
    run whenever a command names them."""
    rs = tuple(roots)
    out: list[str] = []
    for folder in (env if env is not None else os.environ).get("PATH", "").split(os.pathsep):
        if folder and os.path.isabs(folder):
            real = os.path.realpath(folder)
            if _inside(real, rs) and real not in out:
                out.append(real)
    return out


async def started(start: Awaitable[_T], stop: Callable[[_T], Awaitable[object]]) -> _T:
    """What `start` (asyncio's start of a subprocess) gives. Cancelled while asyncio still
    connects the pipes, asyncio's own clean-up kills the child alone and then waits for every
    pipe to close (CPython 3.11), which a member of its group started in the background holds
    for ever: so the start is let finish, `stop` ends what it started (the whole group), and
    then the cancellation goes on."""
    starting = asyncio.ensure_future(start)
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # a start that failed left nothing running
            await stop(await starting)
        raise
