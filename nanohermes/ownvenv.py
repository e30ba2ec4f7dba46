"""The Python environment nanohermes runs from, kept out of what the programs it starts see.

nanohermes installed in a venv that is on PATH (a clone's `.venv/bin` put there, or the venv
activated) would put its own interpreter in front of the person's: `python3 -m pytest` in
their project would run nanohermes's Python, which has no pytest. Commands, and the person's
hooks and MCP servers (`programs.person_start`), get PATH without
that venv's scripts folder and without VIRTUAL_ENV when it names that venv. A venv inside a
writable root is the workspace's own (nanohermes installed in the project's venv, or a clone
of nanohermes being worked on): it stays, as the person set it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping


def own_venv() -> str | None:
    """The venv nanohermes runs from (its prefix, a real path); None outside a venv."""
    if sys.prefix == sys.base_prefix:
        return None
    return os.path.realpath(sys.prefix)


def without_own_venv(env: Mapping[str, str], roots: Iterable[str]) -> dict[str, str]:
    """`env` for a program nanohermes starts (a command, a hook, an MCP server): without
    nanohermes's own venv on PATH or in VIRTUAL_ENV (see the module), unless that venv lies
    inside one of the writable `roots`."""
    out = dict(env)
    prefix = own_venv()
    if prefix is None or any(prefix == r or prefix.startswith(r.rstrip("/") + "/") for r in roots):
        return out
    scripts = {os.path.realpath(sysconfig.get_path("scripts")), os.path.join(prefix, "bin")}
    if "PATH" in out:
        out["PATH"] = os.pathsep.join(p for p in out["PATH"].split(os.pathsep)
                                      if not (p and os.path.isabs(p) and os.path.realpath(p) in scripts))
    if out.get("VIRTUAL_ENV") and os.path.realpath(out["VIRTUAL_ENV"]) == prefix:
        for name in ("VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT"):
            out.pop(name, None)
    return out
