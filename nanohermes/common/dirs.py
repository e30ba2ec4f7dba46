"""Where nanohermes keeps its files (the XDG config, data, state and cache folders), and how it
writes there: folders 0700 and files 0600 whatever the umask, since sessions, memories and
logs can hold anything the model saw.

Kept apart from the config so that code needing only a path (the REPL's input history, the
session list) does not import it and what it imports.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "nanohermes"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "nanohermes"


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "nanohermes"


def cache_home() -> Path:
    """What can be rebuilt at any time (rendered tool schemas): deleting it only costs time."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nanohermes"


def user_config_path() -> Path:
    return config_home() / "config.json"


def project_config_path(workspace: Path) -> Path:
    return workspace / ".nanohermes" / "config.json"


def private_dir(path: Path) -> Path:
    """Create `path` as 0700, with its missing parents up to nanohermes's own folder (0700
    too; an existing one is tightened). Folders above that (~/.local/share) are shared with
    other programs and keep the usual mode; a folder outside nanohermes's own is only created."""
    path = Path(path)
    roots = (config_home(), data_home(), state_home(), cache_home())
    root = next((r for r in roots if path == r or r in path.parents), None)
    if root is None:
        path.mkdir(parents=True, exist_ok=True)
        return path
    root.parent.mkdir(parents=True, exist_ok=True)
    chain = [root, *reversed([p for p in path.parents if root in p.parents])]
    if path != root:
        chain.append(path)
    for d in chain:
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        try:
            if not d.is_symlink() and (d.stat().st_mode & 0o777) != DIR_MODE:
                os.chmod(d, DIR_MODE)
        except OSError:  # someone else's folder: leave it
            pass
    return path


def open_private(path: Path, mode: str = "a", *, encoding: str | None = "utf-8") -> IO[Any]:
    """open() for a file of ours: created 0600 (an existing one is tightened to 0600)."""
    path = Path(path)
    private_dir(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    if "a" in mode:
        flags |= os.O_APPEND
    elif "w" in mode:
        flags |= os.O_TRUNC
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        pass
    return os.fdopen(fd, mode, encoding=None if "b" in mode else encoding)


def make_private(path: Path) -> None:
    """Tighten an existing file of ours to 0600 (one another library created)."""
    try:
        os.chmod(path, FILE_MODE)
    except OSError:
        pass


def write_private(path: Path, text: str) -> None:
    """Replace `path` atomically with `text`, the new file 0600: a reader sees the old
    content or the new, never half of it."""
    path = Path(path)
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mkstemp: 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
