"""The mount plan of a confined call: the binds that make the tree read-only but for the
writable roots and keep git's metadata read-only inside them, and the covers (an empty
unreadable file or folder) over secret files, nanohermes's own files and other programs'
sockets."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

from nanohermes.guard import programs
from nanohermes.guard.sandbox.confinement import Confinement
from nanohermes.guard.sandbox.kernel import (
    AT_FDCWD,
    CLONE_NEWNS,
    CLONE_NEWUSER,
    MOVE_MOUNT_F_EMPTY_PATH,
    MOVE_MOUNT_T_EMPTY_PATH,
    MS_BIND,
    OPEN_TREE_CLONE,
    SYS_MOVE_MOUNT,
    SYS_OPEN_TREE,
    SandboxError,
    fail,
    kern,
)


def mount_plan(self: Confinement, tmp: Path) -> list[tuple[bytes, bool]]:
    """(path, read-only) binds, in order, made after the whole tree is remounted
    read-only: Landlock does not cover chmod, chown, utimes or xattrs, a read-only mount
    does. The writable roots (the temp folder, and under workspace-write the workspace
    and its git folders) are bound read-write again, and so is every folder between a root
    and a protected path: being mount points, none can be renamed away and rebuilt
    (`mv .git x && mkdir .git`, `mv .git/worktrees/w x`, `mv .claude x && mkdir .claude` for a
    fresh `.claude/settings.json`: a mount moves with its renamed parent). A command that
    outlives its call (`background`) also gets the top level of each git folder without a
    `commondir` read-only (its folders read-write again), so it cannot make one. The protected
    paths come last, read-only."""
    out: list[tuple[bytes, bool]] = [(os.fsencode(tmp), False)]
    if self.policy != "workspace-write":
        return out
    # Every path here is real already (the confinement resolved them): compared as text.
    inside = [p for p in self.read_only_paths if any(_under(p, r) for r in self.write_roots)]
    _make_hooks_folders(inside)
    layers = _layers(self, inside)
    if self.background:
        _seal(self, layers)
    ordered = sorted(layers, key=lambda p: len(p.parts))  # outer mounts first
    out += [(os.fsencode(p), layers[p]) for p in ordered]
    out += [(os.fsencode(p), True) for p in inside if p.exists()]
    return out


def _make_hooks_folders(inside: list[Path]) -> None:
    """An empty hooks folder where a protected one is missing, as git itself makes, so there
    is something to bind over."""
    for p in inside:
        if p.name == "hooks" and not p.exists() and p.parent.is_dir():
            try:
                p.mkdir()
            except OSError:
                pass


def _layers(conf: Confinement, inside: list[Path]) -> dict[Path, bool]:
    """The folders bound read-write again (False: not read-only): the writable roots, and every
    folder between a root and a protected path inside it."""
    layers: dict[Path, bool] = {r: False for r in conf.write_roots if r.is_dir()}
    for p in inside:
        root = max((r for r in conf.write_roots if _under(p, r)), key=lambda r: len(r.parts))
        for folder in p.parents:
            if folder == root or len(folder.parts) <= len(root.parts):
                break
            if folder.is_dir() and not folder.is_symlink():  # only what is there can be bound
                layers.setdefault(folder, False)
    return layers


def _seal(conf: Confinement, layers: dict[Path, bool]) -> None:
    """For a command that outlives its call: the top level of each git folder without a
    `commondir` read-only in `layers`, and its folders (but hooks) read-write again."""
    for g in conf.sealable:
        if any(_under(g, r) for r in conf.write_roots):
            layers[g] = True
            layers.update({sub: False for sub in _subfolders(g) if sub not in layers and sub.name != "hooks"})


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def coverable(folders: tuple[str, ...], keep: list[str]) -> list[str]:
    """The folders to cover whole so that `folders` are hidden but no kept root is: a folder
    holding a kept root is covered part by part instead (its other entries)."""
    out: list[str] = []
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        if not any(k == folder or k.startswith(folder.rstrip("/") + "/") for k in keep):
            out.append(folder)
            continue
        try:
            entries = [os.path.join(folder, n) for n in os.listdir(folder)]
        except OSError:
            continue
        out += coverable(tuple(e for e in entries if os.path.isdir(e) and not os.path.islink(e)), keep)
    return out

def cover(cover: bytes, path: bytes, dev: int, ino: int) -> None:
    """Bind the empty file over one secret file, if it is still the file the look found: it
    is opened without following a final link and bound through its descriptor, so a path
    swapped meanwhile (by a background task) can neither dodge the cover nor move it. The
    bind takes the read-only flag of the tree the empty file is in."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # deleted since the look: nothing to withhold
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino):
            raise SandboxError(f"the secret file {path!r} changed while the command started; run it again")
        if kern().libc.mount(cover, b"/proc/self/fd/%d" % fd, None, MS_BIND, None) != 0:  # loaded by `prepare`
            raise fail(f"covering the secret file {path!r}")
    finally:
        os.close(fd)

def cover_running(namespaces: tuple[int, int], files: list[tuple[str, int, int]]) -> None:
    """Cover secret files that appeared (or were replaced) in a command that is still running:
    a helper process enters its user and mount namespaces (`namespaces`: descriptors of
    them, held since it started; their owner may enter them) and mounts the empty file over
    each one through a descriptor of it, if it is still the file the look found. Best
    effort: a file that changed again is covered at the next look."""

    source = placeholder()
    k = kern()
    true = programs.find("true") or "/bin/true"

    def enter() -> None:
        if k.libc.setns(namespaces[0], CLONE_NEWUSER) != 0 or k.libc.setns(namespaces[1], CLONE_NEWNS) != 0:
            raise fail("entering the command's namespaces")
        for path, dev, ino in files:
            _cover_by_descriptor(source, os.fsencode(path), dev, ino)

    subprocess.run([true], preexec_fn=enter, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env={}, timeout=10, close_fds=True, check=False)


def _cover_by_descriptor(source: bytes, path: bytes, dev: int, ino: int) -> None:
    """`cover`, where /proc is not this process's (the command's own PID namespace): the empty
    file's mount is cloned and moved onto the descriptor of the file (open_tree, move_mount)."""
    k = kern()
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino):
            return
        tree = int(k.libc.syscall(SYS_OPEN_TREE, AT_FDCWD, source, OPEN_TREE_CLONE | os.O_CLOEXEC))
        if tree < 0:
            return
        try:
            k.libc.syscall(SYS_MOVE_MOUNT, tree, b"", fd, b"", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
        finally:
            os.close(tree)
    finally:
        os.close(fd)


_cover_file: bytes = b""

def private_temp_folder(name: str) -> Path:
    """`name-UID` in the system's temporary folder, this user's own (0700, no link); a fresh one
    of another name where that name is taken by someone or something else."""
    folder = Path(tempfile.gettempdir()) / f"{name}-{os.geteuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    return folder


def placeholder() -> bytes:
    """An empty file no one may read or write (mode 0000), outside every writable root: one
    per user, kept in a private folder of the system's temporary folder and made again if it
    went missing, so no session leaves one behind. A folder of that name this user does not
    own privately (another user's, a link) is not used: then a fresh one is made."""
    global _cover_file
    if _cover_file and os.path.exists(_cover_file):
        return _cover_file
    path = private_temp_folder("nanohermes-withheld") / "secret"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0)
        os.close(fd)
    except FileExistsError:
        pst = os.lstat(path)
        if not stat.S_ISREG(pst.st_mode) or pst.st_size or pst.st_uid != os.geteuid():
            raise SandboxError(f"{path} is not the empty file the sandbox covers secret files with; remove it") from None
    os.chmod(path, 0)
    _cover_file = os.fsencode(path)
    return _cover_file

_cover_folder: bytes = b""

def placeholder_folder() -> bytes:
    """An empty folder no one may list or enter (mode 0000), beside the placeholder file:
    bound over a folder a confined command must not see into."""
    global _cover_folder
    if _cover_folder and os.path.isdir(_cover_folder):
        return _cover_folder
    path = Path(os.fsdecode(placeholder())).parent / "folder"
    try:
        os.mkdir(path, 0)
    except FileExistsError:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            os.chmod(path, 0o700)  # to look inside
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or os.listdir(path):
            raise SandboxError(f"{path} is not the empty folder the sandbox covers folders with; remove it") from None
    os.chmod(path, 0)
    _cover_folder = os.fsencode(path)
    return _cover_folder
