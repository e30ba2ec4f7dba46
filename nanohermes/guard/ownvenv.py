"""The Python environment nanohermes runs from, kept out of what the programs it starts see.

nanohermes installed in a venv that is on PATH (a clone's `.venv/bin` put there, or the venv
activated) would put its own interpreter in front of the person's: `python3 -m pytest` in
their project would run nanohermes's Python, which has no pytest. Commands, and the person's
hooks and MCP servers (`programs.person_start`), get PATH without
that venv's scripts folder and without VIRTUAL_ENV when it names that venv. A venv inside a
writable root is the workspace's own (nanohermes installed in the project's venv, or a clone
of nanohermes being worked on): it stays, as the person set it. So does a venv that holds
packages nanohermes does not need (nanohermes installed in a project's venv that poetry,
pipenv or virtualenvwrapper keep outside the project): it is the person's environment too,
and its `python3 -m pytest` is the one they mean. nanohermes's own venv is one that holds
nanohermes, what it requires (its extras included) and the packaging tools, nothing else:
a clone's `.venv`, pipx's or uv's venv of it, a venv made for it.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

# Installed with or by any venv's pip, not by the person for a project.
PACKAGING = frozenset({"pip", "setuptools", "wheel", "uv"})


@functools.cache
def own_venv() -> str | None:
    """The venv nanohermes runs from (its prefix, a real path) when it is nanohermes's own (see
    the module); None outside a venv, or in one that holds the person's packages too."""
    if sys.prefix == sys.base_prefix or not holds_only_nanohermes():
        return None
    return os.path.realpath(sys.prefix)


def holds_only_nanohermes() -> bool:
    """Does the running venv's own site-packages hold nanohermes and nothing that nanohermes
    does not require (its extras included), but packaging tools?

    A distribution is told by its metadata folder's name, as importlib.metadata tells them
    apart, and only the requirements of those nanohermes needs are read: parsing every
    installed package's metadata (importlib's `Distribution.metadata`) cost tens of
    milliseconds at the first command of every run."""
    # sysconfig: only where the environment names the venv (`without_own_venv`)
    import sysconfig

    folders = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    installed: dict[str, str] = {}  # canonical name -> its metadata folder
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in names:
            stem, dot, kind = entry.rpartition(".")
            if dot and kind in ("dist-info", "egg-info"):
                installed.setdefault(_canonical(stem.partition("-")[0]), os.path.join(folder, entry))
    if "nanohermes" not in installed:
        return False
    required: set[str] = set()
    todo = ["nanohermes"]
    while todo:
        name = todo.pop()
        if name in required:
            continue
        required.add(name)
        if name in installed:
            todo += [_canonical(m.group(1)) for r in _requirements(installed[name]) if (m := _NAME.match(r))]
    return set(installed) <= required | PACKAGING


def _requirements(meta: str) -> list[str]:
    """What the distribution whose metadata folder is `meta` requires, extras included: the
    `Requires-Dist` headers of a wheel's METADATA (they come before the first blank line);
    an egg's through importlib.metadata, which reads its requires.txt."""
    if meta.endswith(".egg-info"):
        # importlib.metadata: only for a command run inside nanohermes's own venv
        from importlib.metadata import PathDistribution
        return list(PathDistribution(Path(meta)).requires or ())
    found: list[str] = []
    try:
        with open(os.path.join(meta, "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, colon, value = line.partition(":")
                if colon and key.strip().lower() == "requires-dist":
                    found.append(value.strip())
    except OSError:
        pass
    return found


_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def without_own_venv(env: Mapping[str, str], roots: Iterable[str]) -> dict[str, str]:
    """`env` for a program nanohermes starts (a command, a hook, an MCP server): without
    nanohermes's own venv on PATH or in VIRTUAL_ENV (see the module), unless that venv lies
    inside one of the writable `roots`. Whether the venv is nanohermes's own (its installed
    packages read) is asked only when `env` names it: most starts (pipx's or uv's venv behind
    a link in ~/.local/bin, no venv activated) have nothing to take out."""
    out = dict(env)
    if sys.prefix == sys.base_prefix:
        return out  # no venv
    venv = os.path.realpath(sys.prefix)
    path = out["PATH"].split(os.pathsep) if "PATH" in out else []
    kept = _without_scripts(path, venv)
    activated = bool(out.get("VIRTUAL_ENV")) and os.path.realpath(out["VIRTUAL_ENV"]) == venv
    if (len(kept) == len(path) and not activated) or not _own_outside(roots):
        return out
    if "PATH" in out:
        out["PATH"] = os.pathsep.join(kept)
    if activated:
        for name in ("VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT"):
            out.pop(name, None)
    return out


def _without_scripts(path: list[str], venv: str) -> list[str]:
    """The PATH entries `path` but the venv's scripts folder (however spelled)."""
    inside = {p: real for p in path if p and os.path.isabs(p) and
              ((real := os.path.realpath(p)) == venv or real.startswith(venv + os.sep))}
    if not inside:
        return path  # the scripts folder is inside the venv: PATH names no folder of it
    # sysconfig: only where PATH names a folder of the venv
    import sysconfig

    scripts = {os.path.realpath(sysconfig.get_path("scripts")), os.path.join(venv, "bin")}
    return [p for p in path if inside.get(p) not in scripts]


def _own_outside(roots: Iterable[str]) -> bool:
    """Is the running venv nanohermes's own, outside every one of `roots`?"""
    prefix = own_venv()
    return prefix is not None and not any(prefix == r or prefix.startswith(r.rstrip("/") + "/") for r in roots)
