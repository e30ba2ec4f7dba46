"""What one call's processes may do: the finished confinement the gate grants (`Confinement`),
and what this machine can confine with (`Availability`). Plain data; choosing them is
`policy.py`'s, applying them `launch.py`'s."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SandboxPolicy = Literal["read-only", "workspace-write", "off"]

@dataclass(frozen=True)
class Availability:
    abi: int  # Landlock ABI, 0 when missing
    namespaces: bool  # may a child enter a new user + mount namespace?
    landlock_error: str = ""  # why Landlock cannot be used, when it cannot
    namespace_error: str = ""
    pid: bool = False  # and a PID namespace of its own, with its own /proc?
    pid_error: str = ""

    @property
    def landlock(self) -> bool:
        return self.abi > 0 and not self.landlock_error

    @property
    def confines(self) -> bool:
        """Can a command be confined here as a command nobody approved must be: Landlock for
        the files, namespaces for the network, the sockets and the read-only git metadata."""
        return self.landlock and self.namespaces

    def lines(self) -> list[tuple[bool, str]]:
        """(good, text) per part: what the sandbox has here and what is weaker."""
        out: list[tuple[bool, str]] = []
        if not self.landlock:
            why = self.landlock_error or "the kernel has no Landlock (Linux 5.13+ with landlock in the LSM list)"
            out.append((False, f"Landlock unavailable ({why}): commands are not confined; only argument-checked "
                               "built-in read-only commands run without asking"))
        else:
            weak = []
            if self.abi < 4:
                weak.append("TCP connect/bind is not blocked (ABI < 4)")
            if self.abi < 6:
                weak.append("signals and abstract unix sockets are not scoped (ABI < 6)")
            if self.abi < 3:
                weak.append("truncating files is not controlled (ABI < 3)")
            out.append((not weak, f"Landlock ABI {self.abi}: commands that run unasked are confined"
                                  + (f"; weaker: {', '.join(weak)}" if weak else "")))
        if self.namespaces:
            out.append((True, "user namespaces: each command gets its own network (only its own loopback; no "
                              "network at all unless sandbox.network), its own /dev/shm, "
                              + ("its own processes (a PID namespace and /proc: it sees no other process), "
                                 if self.pid else "")
                              + "and a view of the files "
                              "in which other programs' sockets (tmux, agents, D-Bus, container engines) are "
                              "hidden, the workspace's secret files are withheld, and .git/config, git's hooks "
                              "and nanohermes's config stay read-only"))
            if not self.pid:
                out.append((False, f"no PID namespace with its own /proc ({self.pid_error or 'refused here'}): "
                                   "commands see the machine's other processes and their command lines"))
        else:
            why = self.namespace_error or "unprivileged user namespaces are disabled"
            out.append((False, f"user namespaces unavailable ({why}): other programs' sockets (tmux, agents, "
                               "D-Bus) cannot be hidden from a command, so only argument-checked built-in "
                               "read-only commands written as plain words run without asking"))
        return out


@dataclass(frozen=True)
class Confinement:
    """What one call's processes may do, finished: made by `policy.confine` for the basis the
    gate allowed the call on, never changed after."""

    policy: SandboxPolicy
    abi: int = 0  # 0: no Landlock (off, or unavailable)
    namespaces: bool = False
    pid: bool = False  # its own PID namespace and /proc (with namespaces only)
    write_roots: tuple[Path, ...] = ()  # beyond the call's own temp folder and /dev/null
    read_only_paths: tuple[Path, ...] = ()  # protected paths inside write roots
    network: bool = False
    # Paths that must not appear: absent ones cannot be bound read-only, so one the command
    # creates is removed after it, and while it runs at every sweep (`sweep_plants`): a
    # `.git/commondir` would point git at another config (see gitmeta.metadata).
    must_not_appear: tuple[Path, ...] = ()
    # Git folders with no `commondir` (gitmeta.Metadata.sealable), and whether the command
    # outlives its call (a background task): then their top level is read-only from the
    # start, as a `commondir` it made would be in force until a sweep took it away.
    sealable: tuple[Path, ...] = ()
    background: bool = False
    # The workspace's `.git` when it had none, and the folders where git keeps submodules' git
    # folders: a repository the command makes there (`git init`, a submodule's clone) is kept
    # only while its hooks and config name no program (see `gitmeta.safe_new_repo`).
    new_git: Path | None = None
    module_roots: tuple[Path, ...] = ()
    # The workspace, whose subfolders are looked through for `.git` entries after the command
    # (None: not looked at), the bound of that look, and the links among the entries there
    # before it (path, where it led) and the other entries: a new one, or a link led elsewhere,
    # that leads to a repository whose config or hooks name a program is taken away
    # (`gitmeta.planted_git`), as the person's next `git status` in its folder would run it.
    git_look: Path | None = None
    git_look_folders: int = 20_000
    subfolder_gits: tuple[tuple[str, str], ...] = ()
    # PATH folders inside the writable roots (`.venv/bin`, `node_modules/.bin`): a program the
    # command creates or changes there is named, since an approved command would run it.
    path_folders: tuple[str, ...] = ()
    # Secret files to withhold: (real path, device, inode) as the look found them. Landlock
    # cannot take one file out of a readable tree; the mount namespace covers each one.
    hidden: tuple[tuple[str, int, int], ...] = ()
    # Where the secret files were looked for, and their names: what the command prints of their
    # values is taken out of its result, and one that appears while a background task runs
    # is covered there too ("" and () when the call may read them).
    withheld_from: Path | None = None
    secret_patterns: tuple[str, ...] = ()
    # Why some secret files could not be withheld ("" when all are): a workspace-write call
    # then does not run (a person may approve it to run outside the sandbox).
    unhidden: str = ""
    # How many entries the look for other servers' sockets may read (sockets.look).
    socket_scan_entries: int = 50_000
    # nanohermes's own secret folders (data, state), covered whole by an empty unreadable
    # folder, and its own secret files (the user's config), covered as the secret files are.
    hidden_folders: tuple[str, ...] = ()
    own_files: tuple[str, ...] = ()
    # The home folder's credential files and folders (secrets.home_credentials), among `hidden`
    # and `hidden_folders`, so a refusal names them as such.
    home: tuple[str, ...] = ()
    # What read rules withhold (real paths of files and folders, among `hidden` and
    # `hidden_folders`), so a refusal names the rule's reason rather than a secret's.
    ruled: tuple[str, ...] = ()


def dedupe(paths: list[Path]) -> list[Path]:
    seen: set[Path] = set()
    out = []
    for p in sorted(paths, key=lambda p: len(p.parts)):  # outer mounts first
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out

def within(path: Path, root: Path) -> bool:
    try:
        return path.resolve() == root.resolve() or root.resolve() in path.resolve().parents
    except OSError:
        return False
