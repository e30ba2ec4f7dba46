"""The path-named unix sockets a confined command must not reach, and the variables that name them.

A socket file is reached with connect(2), which neither Landlock (at this ABI) nor a read-only
mount controls: a command that may read `/tmp` may talk to the person's tmux server, their
ssh-agent, D-Bus or a container engine, each of which runs programs outside any sandbox. The
sandbox therefore hides them in the command's mount namespace (see `sandbox/launch.py`): every socket
this look finds is covered by an empty unreadable file, and the per-user runtime folders whole
by an empty unreadable folder, so sockets made there later are hidden too.

What the look finds:
- every path socket bound in nanohermes's own network namespace (`/proc/net/unix`): the
  person's tmux and screen servers, agents, D-Bus, Docker and Podman, IDE servers, wherever
  their files are. A sandboxed command runs in a network namespace of its own, so the
  sockets it binds (in its temp folder or the workspace) are not among them;
- socket files in the folders where servers of other network namespaces put theirs (`/run`,
  `/var/run`, `/tmp`'s socket folders, `$XDG_RUNTIME_DIR`, `~/.gnupg`), and those the
  environment names (`SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`, `DOCKER_HOST`, ...).

What it cannot find, and so does not cover: a socket bound after the command started, in a
folder not covered whole, by a server in another network namespace; a socket whose file was
renamed after it was bound (the listing keeps the name it was bound under) is found only by
the folder look.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Variables that name a socket (or a folder of them) a sandboxed command must not be pointed at.
SOCKET_VARIABLES = frozenset({
    "TMUX", "TMUX_PANE", "TMUX_TMPDIR", "STY", "WINDOW", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "DOCKER_HOST", "CONTAINER_HOST", "PODMAN_HOST",
    "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "PULSE_SERVER", "PIPEWIRE_REMOTE", "VSCODE_IPC_HOOK", "VSCODE_IPC_HOOK_CLI",
    "VSCODE_GIT_IPC_HANDLE", "KITTY_LISTEN_ON", "WEZTERM_UNIX_SOCKET", "ALACRITTY_SOCKET", "NVIM",
    "NVIM_LISTEN_ADDRESS", "EMACS_SOCKET_NAME", "SWAYSOCK", "I3SOCK", "HYPRLAND_INSTANCE_SIGNATURE", "ZELLIJ",
    "ZELLIJ_SESSION_NAME", "JUPYTER_RUNTIME_DIR", "GNOME_KEYRING_CONTROL", "SYSTEMD_EXEC_PID", "NOTIFY_SOCKET",
    "LISTEN_FDS", "LISTEN_PID", "XAUTHORITY", "SSH_CONNECTION", "SSH_CLIENT",
})

# Folders under /tmp (by name prefix) where servers keep their sockets: the person's tmux,
# screen, X11 and ICE sessions, ssh-agent, IDEs.
_TMP_SOCKET_FOLDERS = ("tmux-", ".X11-unix", ".ICE-unix", "ssh-", "screens", "vscode-", ".s.PGSQL", "mysql")


@dataclass(frozen=True)
class Found:
    """What a confined command may not reach: socket files to cover one by one, and folders
    (the person's runtime folders) to cover whole."""

    sockets: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    problem: str = ""  # why the look stopped early ("" when it did not)


def _bound_paths() -> list[str]:
    """Paths of the sockets bound in this network namespace, from /proc/net/unix (the path is
    the eighth column, when there is one; `@` marks an abstract name, which has no file)."""
    try:
        with open("/proc/net/unix", "rb") as f:
            lines = f.read().split(b"\n")[1:]
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        parts = line.split(None, 7)
        if len(parts) == 8 and parts[7].startswith(b"/"):
            out.append(os.fsdecode(parts[7]))
    return out


def _named_by(env: Mapping[str, str]) -> list[str]:
    """Socket paths the environment names: `unix:path=/x` (D-Bus), `unix:///x` (Docker), a
    plain path, a tmux `path,pid,n` triple, a Wayland name inside the runtime folder."""
    out: list[str] = []
    for name, value in env.items():
        if not value or len(value) > 4096:
            continue
        for piece in value.replace(";", ",").split(","):
            piece = piece.strip()
            for prefix in ("unix:path=", "unix:abstract=", "unix://", "unix:"):
                if piece.startswith(prefix):
                    piece = piece[len(prefix):].split(",", 1)[0]
                    break
            if piece.startswith("/"):
                out.append(piece)
        if name == "WAYLAND_DISPLAY" and env.get("XDG_RUNTIME_DIR") and not value.startswith("/"):
            out.append(os.path.join(env["XDG_RUNTIME_DIR"], value))
    return out


# folder -> ((inode, mtime), the sockets right in it, its subfolders, how many entries): a
# folder whose entries did not change since (its mtime moves when one is added or removed) is
# not listed again; its entries count against the look's bound all the same.
_listed: dict[str, tuple[tuple[int, int], list[str], list[str], int]] = {}


def _sockets_in(folder: str, depth: int, budget: list[int]) -> Iterable[str]:
    """Socket files under `folder` down to `depth` levels, looking through no more than
    `budget[0]` entries in all (links are not followed)."""
    try:
        st = os.lstat(folder)
    except OSError:
        return
    ident = (st.st_ino, st.st_mtime_ns)
    listing = _listed.get(folder)
    if listing is not None and listing[0] == ident:
        budget[0] -= listing[3]
        if budget[0] < 0:
            return
    elif (listing := _list(folder, ident, budget)) is None:
        return
    yield from listing[1]
    if depth > 0:
        for sub in listing[2]:
            yield from _sockets_in(sub, depth - 1, budget)


def _list(folder: str, ident: tuple[int, int],
          budget: list[int]) -> tuple[tuple[int, int], list[str], list[str], int] | None:
    """`folder`'s sockets and subfolders, listed now (each entry counted against the budget)
    and kept; None when it cannot be listed or the budget ran out."""
    found: list[str] = []
    subfolders: list[str] = []
    count = 0
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                budget[0] -= 1
                count += 1
                if budget[0] < 0:
                    return None
                kind = _kind(e)
                if kind == "folder":
                    subfolders.append(e.path)
                elif kind == "socket":
                    found.append(e.path)
    except OSError:
        return None
    if len(_listed) > 4096:
        _listed.clear()
    _listed[folder] = listing = (ident, found, subfolders, count)
    return listing


def _kind(entry: os.DirEntry[str]) -> str:
    """"folder", "socket" or "" for anything else (the entry's type comes with the listing:
    only an odd one costs a stat)."""
    try:
        if entry.is_dir(follow_symlinks=False):
            return "folder"
        if not (entry.is_file(follow_symlinks=False) or entry.is_symlink()) \
                and stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
            return "socket"
    except OSError:
        pass
    return ""


_tmp_picked: tuple[tuple[int, int], list[str]] = ((0, 0), [])


def _tmp_socket_folders() -> list[str]:
    """The folders right under /tmp where servers keep sockets, picked again only when /tmp's
    listing changed (a busy /tmp holds hundreds of other folders)."""
    global _tmp_picked
    listed = _listed.get("/tmp")
    if listed is None:
        return []
    if _tmp_picked[0] != listed[0]:
        _tmp_picked = (listed[0], [f for f in listed[2] if os.path.basename(f).startswith(_TMP_SOCKET_FOLDERS)])
    return _tmp_picked[1]


def runtime_folders(env: Mapping[str, str], uid: int) -> list[str]:
    """The person's own runtime folders, covered whole: what servers put there later is hidden too."""
    out = [f"/run/user/{uid}", f"/tmp/tmux-{uid}"]
    for name in ("XDG_RUNTIME_DIR", "TMUX_TMPDIR"):
        value = env.get(name, "")
        if value.startswith("/"):
            out.append(value if name == "XDG_RUNTIME_DIR" else os.path.join(value, f"tmux-{uid}"))
    return out


def look(env: Mapping[str, str], *, keep: Iterable[str], own_network: bool, max_entries: int) -> Found:
    """The sockets and folders to hide from a confined command. `keep`: real paths of folders
    the command may use whole (its temp folder, the workspace and the other writable roots): a
    runtime folder holding one is not covered whole (its sockets are, one by one), and a socket
    the folder look finds inside one is the command's own. With `own_network` (the command gets
    a network namespace of its own) a socket bound in nanohermes's namespace is covered even
    inside them: no sandboxed command made it. `max_entries` bounds the folder look."""
    kept = [k.rstrip("/") + "/" for k in keep]
    budget = [max_entries]
    bound = set(_bound_paths())
    candidates = [*bound, *_named_by(env), *_looked(env.get("HOME", ""), budget)]
    problem = ""
    if budget[0] < 0:
        problem = (f"the look for other programs' sockets went past "
                   f"limits.sandbox_socket_scan_entries ({max_entries})")
    folders: list[str] = []
    for folder in dict.fromkeys(runtime_folders(env, os.geteuid())):
        real = os.path.realpath(folder)
        if os.path.isdir(real) and not _holds_kept(real, kept) and not _inside_kept(real, kept):
            folders.append(real)
    sockets = _to_cover(candidates, bound, folders, kept, own_network)
    return Found(sockets=tuple(sockets), folders=tuple(folders), problem=problem)


def _inside_kept(path: str, kept: list[str]) -> bool:
    return any((path + "/").startswith(k) for k in kept)


def _holds_kept(folder: str, kept: list[str]) -> bool:
    return any(k.startswith(folder.rstrip("/") + "/") for k in kept)


def _looked(home: str, budget: list[int]) -> list[str]:
    """The sockets the folder look finds: in /run (and /var/run, usually the same), in
    ~/.gnupg, right in /tmp and in the folders there where servers keep theirs."""
    found: list[str] = []
    scanned: set[str] = set()
    for folder, depth in (("/run", 2), ("/var/run", 2), (os.path.join(home, ".gnupg") if home else "", 0)):
        real = os.path.realpath(folder) if folder else ""
        if real and real not in scanned:  # /var/run is usually /run
            scanned.add(real)
            found += _sockets_in(real, depth, budget)
    found += _sockets_in("/tmp", 0, budget)  # sockets right in /tmp, and in its socket folders
    for folder in _tmp_socket_folders():
        found += _sockets_in(folder, 2, budget)
    return found


def _to_cover(candidates: list[str], bound: set[str], folders: list[str], kept: list[str],
              own_network: bool) -> list[str]:
    """The real paths of the sockets among `candidates` to cover one by one: not the
    command's own (inside a kept folder, unless bound in nanohermes's namespace while the
    command has a network of its own), nor one in a folder covered whole."""
    sockets: list[str] = []
    seen: set[str] = set()
    for path in candidates:
        try:
            real = os.path.realpath(path)
            if real in seen or not stat.S_ISSOCK(os.lstat(real).st_mode):
                continue
        except OSError:
            continue
        seen.add(real)
        if _inside_kept(real, kept) and not (own_network and (path in bound or real in bound)):
            continue  # the command's own
        if any((real + "/").startswith(f.rstrip("/") + "/") for f in folders):
            continue  # its folder is covered whole
        sockets.append(real)
    return sockets


def names_socket(name: str, value: str) -> bool:
    """Does this variable point a program at a socket (by name, or by what its value names)?"""
    if name in SOCKET_VARIABLES:
        return True
    if "/" not in value:  # names no path (`_named_by` finds only those)
        return False
    for path in _named_by({name: value}):
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                return True
        except (OSError, ValueError):
            continue
    return False


def without_socket_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with every variable that names a socket taken out."""
    return {k: v for k, v in env.items() if not names_socket(k, v)}
