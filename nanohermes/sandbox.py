"""The OS sandbox every process spawned for the model starts in, and the sweep for escapees.

Owns: the policies (`read-only`, `workspace-write`, `off`); the Landlock layer (raw
syscalls through ctypes: landlock_create_ruleset/add_rule/restrict_self, prctl, unshare,
mount, mount_setattr, capset); the private user + mount (+ network) namespace in which the
whole tree is read-only except the writable roots, and `.git/config`, `.git/hooks/`,
`.nanohermes/` and nanohermes's own config stay read-only inside those; the per-call
temporary folder; the workspace's secret files, each covered by an empty unreadable file in
the mount namespace (found by `withhold.py`); the availability probe (`doctor`,
`/permissions`); reading a refusal out of a command's output; and finding and killing the
processes that left a command's process group (setsid, double fork) once it ends.

How a call is confined: the Landlock ruleset is built in nanohermes itself (a few cheap
syscalls); the forked child, before `exec`, enters its namespaces, remounts the tree
read-only and binds the writable roots and protected paths, drops every capability, sets
no_new_privs and restricts itself. No root, no setuid helper, no daemon, and no second
interpreter per command.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nanohermes import programs, sockets
from nanohermes.gitmeta import git_dirs, metadata, safe_new_repo, submodule_dirs

SandboxPolicy = Literal["read-only", "workspace-write", "off"]

# Every process spawned for the model carries this variable (inherited by its descendants):
# how the sweep tells a command's escapees from unrelated children such as MCP servers.
MARKER = "NANOHERMES_RUN"

# -- kernel constants ----------------------------------------------------------------------
# The Landlock syscall numbers are the same on every architecture (they were added after the
# tables were unified).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 24, 38, 36
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_AF_INET, _SOCK_DGRAM, _SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 2, 2, 0x8913, 0x8914, 1
_SYS_MOUNT_SETATTR, _AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1  # same on every arch

LINUX = sys.platform.startswith("linux")


class _Kernel:
    """ctypes, libc and the kernel's structures, loaded the first time a call is confined
    (or the sandbox is probed): a session that never runs a command never loads ctypes.
    `Confinement.prepare` loads it in nanohermes itself, so the child between fork and exec
    only uses what is already there."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        if LINUX:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
            libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
            libc.unshare.argtypes = [ctypes.c_int]
            libc.socket.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
            libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
            self.libc = libc

        class RulesetAttr(ctypes.Structure):
            _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                        ("scoped", ctypes.c_uint64)]

        class PathBeneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

        class MountAttr(ctypes.Structure):
            _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                        ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

        class CapHeader(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class CapData(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        class IfReq(ctypes.Structure):  # struct ifreq, for the flags of the loopback interface
            _fields_ = [("name", ctypes.c_char * 16), ("flags", ctypes.c_short), ("pad", ctypes.c_char * 22)]

        self.IfReq = IfReq

        self.RulesetAttr, self.PathBeneath, self.MountAttr = RulesetAttr, PathBeneath, MountAttr
        self.CapHeader, self.CapData = CapHeader, CapData


@functools.cache
def _k() -> _Kernel:
    return _Kernel()


class SandboxError(Exception):
    """The sandbox could not be set up for a call: the command does not run."""


def _fail(what: str) -> SandboxError:
    e = _k().ctypes.get_errno()
    return SandboxError(f"{what}: {os.strerror(e)}")


def _fs_rights(abi: int) -> int:
    """Every filesystem right the running kernel knows, which is what a ruleset handles."""
    rights = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def _file_rights(abi: int) -> int:
    """The rights that apply to a file that is not a folder (others make add_rule fail)."""
    return _fs_rights(abi) & (_FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if not LINUX:
        return 0
    k = _k()
    r = k.libc.syscall(_SYS_CREATE_RULESET, None, k.ctypes.c_size_t(0), k.ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(r) if r > 0 else 0


# -- availability --------------------------------------------------------------------------

@dataclass(frozen=True)
class Availability:
    abi: int  # Landlock ABI, 0 when missing
    namespaces: bool  # may a child enter a new user + mount namespace?
    landlock_error: str = ""  # why Landlock cannot be used, when it cannot
    namespace_error: str = ""

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
                              "network at all unless sandbox.network), its own /dev/shm, and a view of the files "
                              "in which other programs' sockets (tmux, agents, D-Bus, container engines) are "
                              "hidden, the workspace's secret files are withheld, and .git/config, git's hooks "
                              "and nanohermes's config stay read-only"))
        else:
            why = self.namespace_error or "unprivileged user namespaces are disabled"
            out.append((False, f"user namespaces unavailable ({why}): other programs' sockets (tmux, agents, "
                               "D-Bus) cannot be hidden from a command, so only argument-checked built-in "
                               "read-only commands written as plain words run without asking"))
        return out


@functools.lru_cache(maxsize=1)
def probe() -> Availability:
    """Check once, for real, by starting `true` under each piece."""
    if not LINUX:  # nothing to confine with (a Seatbelt policy for macOS is described in the README)
        return Availability(abi=0, namespaces=False, landlock_error=f"not Linux ({sys.platform})",
                            namespace_error=f"not Linux ({sys.platform})")
    abi = landlock_abi()
    ll_err = ns_err = ""
    true = programs.find("true") or "/bin/true"
    if abi:
        try:
            _probe_run([true], Confinement("read-only", abi=abi, namespaces=False))
        except (OSError, subprocess.SubprocessError, SandboxError) as e:
            ll_err = str(e) or type(e).__name__
    ns = True
    try:
        _probe_run([true], Confinement("read-only", abi=0, namespaces=True))
    except (OSError, subprocess.SubprocessError, SandboxError) as e:
        ns, ns_err = False, str(e) or type(e).__name__
    return Availability(abi=abi, namespaces=ns, landlock_error=ll_err, namespace_error=ns_err)


def _probe_run(argv: list[str], conf: Confinement) -> None:
    prepared = conf.prepare()
    try:
        r = subprocess.run(argv, preexec_fn=prepared.preexec, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10, env=prepared.env({}), close_fds=True)
        if r.returncode != 0:
            raise SandboxError(f"a confined `true` exited with {r.returncode}")
    finally:
        prepared.cleanup()


def describe_availability(mode: str) -> list[str]:
    """The /permissions lines about the sandbox."""
    if mode == "off":
        return ["sandbox: off (sandbox.mode or --sandbox off): only built-in read-only commands written as plain "
                "words run without asking; --yes and goal mode run everything with your full rights"]
    return ["sandbox: " + text for _, text in probe().lines()]


# -- the confinement of one call -------------------------------------------------------------

@dataclass
class Confinement:
    """What one call may do. Built by the tools from the policy the runtime chose."""

    policy: SandboxPolicy
    abi: int = 0  # 0: no Landlock (off, or unavailable)
    namespaces: bool = False
    write_roots: tuple[Path, ...] = ()  # beyond the call's own temp folder and /dev/null
    read_only_paths: tuple[Path, ...] = ()  # protected paths inside write roots
    network: bool = False
    # Paths that must not appear: absent ones cannot be bound read-only, so one the command
    # creates is removed after it, and while it runs at every sweep (`sweep_plants`): a
    # `.git/commondir` would point git at another config (see gitmeta.metadata).
    must_not_appear: tuple[Path, ...] = ()
    # The workspace's `.git` when it had none, and the folders where git keeps submodules' git
    # folders: a repository the command makes there (`git init`, a submodule's clone) is kept
    # only while its hooks and config name no program (see `gitmeta.safe_new_repo`).
    new_git: Path | None = None
    module_roots: tuple[Path, ...] = ()
    # PATH folders inside the writable roots (`.venv/bin`, `node_modules/.bin`): a program the
    # command creates or changes there is named, since an approved command would run it.
    path_folders: tuple[str, ...] = ()
    # Secret files to withhold: (real path, device, inode) as the look found them. Landlock
    # cannot take one file out of a readable tree; the mount namespace covers each one.
    hidden: tuple[tuple[str, int, int], ...] = ()
    # Why some secret files could not be withheld ("" when all are): a workspace-write call
    # then does not run (a person may approve it to run outside the sandbox).
    unhidden: str = ""
    # How many entries the look for other servers' sockets may read (sockets.look).
    socket_scan_entries: int = 50_000
    # nanohermes's own secret folders (data, state), covered whole by an empty unreadable
    # folder, and its own secret files (the user's config), covered as the secret files are.
    hidden_folders: tuple[str, ...] = ()
    own_files: tuple[str, ...] = ()

    def prepare(self) -> Prepared:
        """Create the temp folder and the ruleset; the returned object's `preexec` runs in the child."""
        if self.policy == "off":
            return Prepared(self, tmpdir=None)
        if self.unhidden and self.policy == "workspace-write":
            # Fail closed: this is what runs programs, and a program may open any file. The
            # read-only level runs only built-in commands whose reads are checked by name.
            raise SandboxError(f"{self.unhidden}, so the sandbox cannot withhold every secret file "
                               "(permissions.secret_files) from a command no person approved; raise the limit, "
                               "or approve the command at the prompt")
        _k()  # here, not in the child: between fork and exec nothing is imported
        tmp = _new_temp_folder()
        writes = self.policy == "workspace-write"
        prepared = Prepared(self, tmpdir=tmp)
        if writes:
            prepared.watch()
        try:
            if self.abi:
                prepared.ruleset_fd = self._ruleset(tmp)
            if self.namespaces:
                prepared.mounts = self._mounts(tmp)
                if os.path.isdir("/dev/shm"):  # the temp folder is also the call's own /dev/shm
                    prepared.shm = os.fsencode(tmp)
                found = sockets.look(os.environ, keep=[str(tmp), *map(str, self.write_roots)],
                                     own_network=not self.network, max_entries=self.socket_scan_entries)
                if found.problem:
                    raise SandboxError(f"{found.problem}, so the sandbox cannot hide every other server's socket "
                                       "from the command; raise the limit, or approve the command at the prompt")
                prepared.sockets = [os.fsencode(p) for p in found.sockets]
                folders = [*found.folders, *_coverable(self.hidden_folders, [str(tmp), *map(str, self.write_roots)])]
                prepared.socket_folders = [os.fsencode(p) for p in folders]
                if self.hidden or found.sockets:
                    prepared.cover = _placeholder()
                if folders:
                    prepared.cover_folder = _placeholder_folder()
                if self.hidden:
                    prepared.hidden = [(os.fsencode(p), dev, ino) for p, dev, ino in self.hidden]
        except BaseException:
            prepared.cleanup()
            raise
        return prepared

    def _ruleset(self, tmp: Path) -> int:
        abi, k = self.abi, _k()
        handled = _fs_rights(abi)
        attr = k.RulesetAttr(handled_access_fs=handled)
        size = 8
        if abi >= 4 and not self.network and not self.namespaces:
            # Without a network namespace of its own, TCP is closed here (loopback too). With
            # one, the namespace is the boundary: it holds only its own loopback, so local
            # test servers work and the host's listeners stay out of reach.
            attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
            size = 16
        if abi >= 6:
            # A confined command may not signal nanohermes or anything outside its domain.
            attr.scoped = _SCOPE_SIGNAL | (0 if self.network else _SCOPE_ABSTRACT_UNIX)
            size = 24
        fd = int(k.libc.syscall(_SYS_CREATE_RULESET, k.ctypes.byref(attr), k.ctypes.c_size_t(size), k.ctypes.c_uint32(0)))
        if fd < 0:
            raise _fail("landlock_create_ruleset")
        try:
            self._add(fd, Path("/"), _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR)
            self._add(fd, Path("/dev/null"), _file_rights(abi))
            # The temp folder is also bound over /dev/shm (POSIX semaphores, shared memory): a
            # bind's root is checked by its own inode, which is the temp folder's.
            roots = [tmp] + ([*self.write_roots] if self.policy == "workspace-write" else [])
            for root in roots:
                self._add(fd, root, handled)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _add(self, ruleset: int, path: Path, rights: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a root that does not exist grants nothing
        try:
            if not os.path.isdir(f"/proc/self/fd/{pfd}"):
                rights &= _file_rights(self.abi)
            k = _k()
            rule = k.PathBeneath(allowed_access=rights, parent_fd=pfd)
            if k.libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, k.ctypes.byref(rule), k.ctypes.c_uint32(0)) != 0:
                raise _fail(f"landlock_add_rule {path}")
        finally:
            os.close(pfd)

    def _mounts(self, tmp: Path) -> list[tuple[bytes, bool]]:
        """(path, read-only) binds, in order, made after the whole tree is remounted
        read-only: Landlock does not cover chmod, chown, utimes or xattrs, a read-only mount
        does. The writable roots (the temp folder, and under workspace-write the workspace
        and its git folder) are bound read-write again; being mount points, they cannot be
        renamed away (`mv .git x && mkdir .git`). The protected paths come last, read-only."""
        out: list[tuple[bytes, bool]] = [(os.fsencode(tmp), False)]
        if self.policy != "workspace-write":
            return out
        inside = [p for p in self.read_only_paths if any(_within(p, r) for r in self.write_roots)]
        anchors: list[Path] = [r for r in self.write_roots if r.is_dir()]
        for p in inside:
            if p.name in ("config", "hooks", "config.worktree") and p.parent.is_dir():
                anchors.append(p.parent)  # the git folder itself
        out += [(os.fsencode(a), False) for a in _dedupe(anchors)]
        for p in inside:
            if p.name == "hooks" and not p.exists() and p.parent.is_dir():
                try:  # an empty hooks folder, as git itself makes, so there is something to bind over
                    p.mkdir()
                except OSError:
                    pass
            if p.exists():
                out.append((os.fsencode(p), True))
        return out


def _dedupe(paths: list[Path]) -> list[Path]:
    seen: set[Path] = set()
    out = []
    for p in sorted(paths, key=lambda p: len(p.parts)):  # outer mounts first
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _within(path: Path, root: Path) -> bool:
    try:
        return path.resolve() == root.resolve() or root.resolve() in path.resolve().parents
    except OSError:
        return False


@dataclass(eq=False)  # one per call, kept in a set while it runs
class Prepared:
    """One call's temp folder and ruleset; `preexec` runs in the forked child before exec."""

    conf: Confinement
    tmpdir: Path | None
    ruleset_fd: int = -1
    mounts: list[tuple[bytes, bool]] = field(default_factory=list)
    absent: tuple[Path, ...] = ()
    removed: list[Path] = field(default_factory=list)  # planted paths taken away after the call
    new_git: Path | None = None  # the workspace's `.git`, absent before the call
    modules: frozenset[Path] = frozenset()  # submodules' git folders before the call
    programs_before: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    programs_changed: list[str] = field(default_factory=list)  # on PATH, created or changed by the call
    plants: list[str] = field(default_factory=list)  # what was taken away, as refusals read
    cover: bytes = b""  # the empty, unreadable file bound over each secret file and other servers' sockets
    hidden: list[tuple[bytes, int, int]] = field(default_factory=list)
    shm: bytes = b""  # the call's own folder bound over /dev/shm (its temp folder)
    sockets: list[bytes] = field(default_factory=list)  # other servers' sockets, each covered
    socket_folders: list[bytes] = field(default_factory=list)  # the person's runtime folders, covered whole
    cover_folder: bytes = b""  # the empty, unreadable folder bound over those

    @property
    def active(self) -> bool:
        return self.conf.policy != "off"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        # A confined command is not told where the person's servers listen (their sockets
        # are hidden from it anyway): no TMUX, SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, ...
        env = sockets.without_socket_variables(base) if self.active else dict(base)
        if self.active:
            env = programs.git_env(env, no_programs=self.conf.policy == "read-only")
        if self.tmpdir is not None:
            env.update(TMPDIR=str(self.tmpdir), TMP=str(self.tmpdir), TEMP=str(self.tmpdir))
        if self.conf.policy != "off" and (self.conf.abi or self.conf.namespaces):
            env["NANOHERMES_SANDBOX"] = self.conf.policy
        return env

    @property
    def preexec(self) -> Callable[[], None] | None:
        if not self.active or (self.ruleset_fd < 0 and not self.conf.namespaces):
            return None
        return self._in_child

    def _in_child(self) -> None:
        """Runs between fork and exec: only syscalls, no allocation-heavy Python."""
        conf, k = self.conf, _k()  # loaded by `prepare`, before the fork
        libc = k.libc
        if conf.namespaces:
            uid, gid = os.geteuid(), os.getegid()
            flags = _CLONE_NEWUSER | _CLONE_NEWNS | (0 if conf.network else _CLONE_NEWNET)
            if libc.unshare(flags) != 0:
                raise _fail("unshare")
            _write("/proc/self/setgroups", b"deny")
            _write("/proc/self/uid_map", b"%d %d 1" % (uid, uid))
            _write("/proc/self/gid_map", b"%d %d 1" % (gid, gid))
            # Private, so that the binds below never show in nanohermes's own namespace.
            if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                raise _fail("making / private")
            _set_read_only(b"/", True)
            for path, read_only in self.mounts:
                if libc.mount(path, path, None, _MS_BIND | _MS_REC, None) != 0:
                    raise _fail(f"bind {path!r}")
                _set_read_only(path, read_only)
            for path, dev, ino in self.hidden:
                _cover(self.cover, path, dev, ino)
            if self.shm and libc.mount(self.shm, b"/dev/shm", None, _MS_BIND, None) != 0:
                raise _fail("bind /dev/shm")
            for path in self.socket_folders:
                if libc.mount(self.cover_folder, path, None, _MS_BIND, None) != 0 and k.ctypes.get_errno() != errno.ENOENT:
                    raise _fail(f"covering the folder {path!r}")
            for path in self.sockets:
                if libc.mount(self.cover, path, None, _MS_BIND, None) != 0 and k.ctypes.get_errno() != errno.ENOENT:
                    raise _fail(f"covering the socket {path!r}")
            if not conf.network:
                _loopback_up()
            # The working folder was entered before the binds: enter it again through them,
            # or relative paths would reach the files underneath.
            os.chdir(os.getcwd())
        _drop_capabilities()
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("no_new_privs")
        if self.ruleset_fd >= 0 and libc.syscall(_SYS_RESTRICT_SELF, self.ruleset_fd, k.ctypes.c_uint32(0)) != 0:
            raise _fail("landlock_restrict_self")

    def release_ruleset(self) -> None:
        if self.ruleset_fd >= 0:
            os.close(self.ruleset_fd)
            self.ruleset_fd = -1

    def watch(self) -> None:
        """Before a command that may write runs: what it must not plant, and what is on PATH."""
        conf = self.conf
        self.absent = tuple(p for p in conf.must_not_appear if not os.path.lexists(p))
        if conf.new_git is not None and not os.path.lexists(conf.new_git):
            self.new_git = conf.new_git
        self.modules = frozenset(m for root in conf.module_roots for m in submodule_dirs(root))
        self.programs_before = _programs(conf.path_folders)
        _watched.add(self)

    def sweep(self) -> list[str]:
        """Take away what the command planted so far where it must not, and note the programs
        on PATH it created or changed; returns what this sweep found (also kept on the object)."""
        found: list[str] = []
        for p in self.absent:
            if os.path.lexists(p) and p not in self.removed:
                _remove(p)
                self.removed.append(p)
                self.plants.append(f"creating {p} (removed: it would change how git or nanohermes starts)")
                found.append(self.plants[-1])
        candidates = [m for root in self.conf.module_roots for m in submodule_dirs(root) if m not in self.modules]
        if self.new_git is not None and os.path.lexists(self.new_git):
            candidates.append(self.new_git)
        for repo in candidates:
            if repo not in self.removed and not safe_new_repo(repo):
                _remove(repo)
                self.removed.append(repo)
                self.plants.append(f"creating {repo} (removed: its config or hooks name a program git would run)")
                found.append(self.plants[-1])
        if self.conf.path_folders:
            after = _programs(self.conf.path_folders)
            for path, st in after.items():
                if self.programs_before.get(path) != st and path not in self.programs_changed and st[3] & 0o111:
                    self.programs_changed.append(path)
                    _tainted[path] = st
                    found.append(f"a program on PATH: {path} (created or changed; a command a person approves "
                                 "would run it outside the sandbox)")
        return found

    def cleanup(self) -> None:
        """After the call and its escapees are gone: the ruleset, the temp folder, and any
        path the command planted where it must not."""
        self.release_ruleset()
        if self in _watched:
            self.sweep()
            _watched.discard(self)
        self.absent, self.new_git = (), None
        if self.tmpdir is not None:
            try:  # the usual case, and far cheaper than a tree walk
                os.rmdir(self.tmpdir)
            except OSError:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def _coverable(folders: tuple[str, ...], keep: list[str]) -> list[str]:
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
        out += _coverable(tuple(e for e in entries if os.path.isdir(e) and not os.path.islink(e)), keep)
    return out


# Calls that may write and are still running (background tasks): swept at every tool call.
_watched: set[Prepared] = set()
# Programs on PATH that commands nobody approved created or changed, with what the command
# left there (inode, size, mtime, mode), in the order found.
_tainted: dict[str, tuple[int, int, int, int]] = {}


def sweep_plants() -> list[str]:
    """Sweep every running command that may write (see `Prepared.sweep`): what was found now."""
    return [f for prepared in list(_watched) for f in prepared.sweep()]


def tainted_programs() -> list[str]:
    """Programs that sandboxed commands created or changed and that are still there as they
    left them, in a folder on PATH now: what a command a person approves could run."""
    on_path = {os.path.realpath(f) for f in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(f)}
    out = []
    for path, st in _tainted.items():
        if os.path.dirname(path) in on_path and _programs((os.path.dirname(path),)).get(path) == st:
            out.append(path)
    return out


def _programs(folders: tuple[str, ...]) -> dict[str, tuple[int, int, int, int]]:
    """(inode, size, mtime, mode) of every file in `folders`."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                for e in entries:
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        out[e.path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
        except OSError:
            continue
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _loopback_up() -> None:
    """Bring up `lo` of the command's new network namespace (it starts down): 127.0.0.1 and ::1
    are then the namespace's own, for local test servers, and nothing else is reachable."""
    k = _k()
    fd = k.libc.socket(_AF_INET, _SOCK_DGRAM, 0)
    if fd < 0:
        raise _fail("a socket to bring up the loopback interface")
    try:
        req = k.IfReq(name=b"lo")
        if k.libc.ioctl(fd, _SIOCGIFFLAGS, k.ctypes.byref(req)) != 0:
            raise _fail("reading the loopback interface's flags")
        req.flags |= _IFF_UP
        if k.libc.ioctl(fd, _SIOCSIFFLAGS, k.ctypes.byref(req)) != 0:
            raise _fail("bringing up the loopback interface")
    finally:
        os.close(fd)


def _cover(cover: bytes, path: bytes, dev: int, ino: int) -> None:
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
        if _k().libc.mount(cover, b"/proc/self/fd/%d" % fd, None, _MS_BIND, None) != 0:  # loaded by `prepare`
            raise _fail(f"covering the secret file {path!r}")
    finally:
        os.close(fd)


_cover_file: bytes = b""


def _placeholder() -> bytes:
    """An empty file no one may read or write (mode 0000), outside every writable root: one
    per user, kept in a private folder of the system's temporary folder and made again if it
    went missing, so no session leaves one behind. A folder of that name this user does not
    own privately (another user's, a link) is not used: then a fresh one is made."""
    global _cover_file
    if _cover_file and os.path.exists(_cover_file):
        return _cover_file
    folder = Path(tempfile.gettempdir()) / f"nanohermes-withheld-{os.geteuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        folder = Path(tempfile.mkdtemp(prefix="nanohermes-withheld-"))
    path = folder / "secret"
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


def _placeholder_folder() -> bytes:
    """An empty folder no one may list or enter (mode 0000), beside the placeholder file:
    bound over a folder a confined command must not see into."""
    global _cover_folder
    if _cover_folder and os.path.isdir(_cover_folder):
        return _cover_folder
    path = Path(os.fsdecode(_placeholder())).parent / "folder"
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


def _new_temp_folder() -> Path:
    """A private folder (mode 0700) under the system's temporary folder."""
    base = Path(tempfile.gettempdir())
    while True:
        path = base / f"nanohermes-sandbox-{secrets.token_hex(6)}"
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _set_read_only(path: bytes, read_only: bool) -> None:
    """Make the mount at `path` and every mount below it read-only, or read-write again."""
    k = _k()
    attr = k.MountAttr(attr_set=_MOUNT_ATTR_RDONLY if read_only else 0, attr_clr=0 if read_only else _MOUNT_ATTR_RDONLY)
    if k.libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path, _AT_RECURSIVE, k.ctypes.byref(attr),
                      k.ctypes.c_size_t(k.ctypes.sizeof(attr))) != 0:
        raise _fail(f"mount_setattr {path!r}")


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _drop_capabilities() -> None:
    """No capability survives into the command: as root it could otherwise load a kernel
    module or reach past the sandbox. Without CAP_SETPCAP the drops fail harmlessly."""
    k = _k()
    for cap in range(64):
        if k.libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and k.ctypes.get_errno() == errno.EINVAL:
            break
    k.libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    hdr = k.CapHeader(version=0x20080522, pid=0)
    data = (k.CapData * 2)()
    k.libc.capset(k.ctypes.byref(hdr), data)


# -- choosing the confinement -------------------------------------------------------------

def confinement(policy: str, *, workspace: Path, write_roots: tuple[Path, ...] = (), network: bool = False,
                config_files: tuple[Path, ...] = (), hidden: tuple[tuple[str, int, int], ...] = (),
                unhidden: str = "", socket_scan_entries: int = 50_000, own: tuple[str, ...] = ()) -> Confinement:
    """The confinement for `policy` on this machine. Where Landlock is missing the command
    runs unconfined (the permission layer then lets nothing but checked read-only commands
    run unasked); where namespaces are missing the protected paths stay writable, and secret
    files cannot be withheld (`hidden`: those the look found; `unhidden`: why the look is
    incomplete)."""
    chosen: SandboxPolicy
    if policy == "read-only":
        chosen = "read-only"
    elif policy == "workspace-write":
        chosen = "workspace-write"
    else:
        return Confinement("off")
    avail = probe()
    # A linked worktree commits into folders outside it: they are written as the workspace is.
    roots = (workspace, *git_dirs(workspace), *write_roots) if policy == "workspace-write" else ()
    resolved = tuple(_dedupe([Path(os.path.realpath(r)) for r in roots]))
    meta = metadata(workspace, config_files) if policy == "workspace-write" else None
    # nanohermes's own secret files join the workspace's; its folders are covered whole.
    own_files: list[tuple[str, int, int]] = []
    for path in own:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            own_files.append((path, st.st_dev, st.st_ino))
    hidden = (*hidden, *(f for f in own_files if f[0] not in {h[0] for h in hidden}))
    folders = tuple(p for p in own if os.path.isdir(p))
    if hidden and not avail.namespaces:
        unhidden, hidden = unhidden or "user namespaces are unavailable here", ()
    return Confinement(chosen, abi=avail.abi if avail.landlock else 0, namespaces=avail.namespaces,
                       write_roots=resolved, read_only_paths=meta.protected if meta else (), network=network,
                       hidden=hidden, unhidden=unhidden, must_not_appear=meta.absent if meta else (),
                       socket_scan_entries=socket_scan_entries, hidden_folders=folders,
                       own_files=tuple(f[0] for f in own_files), module_roots=meta.module_roots if meta else (),
                       path_folders=tuple(programs.path_folders_inside(map(str, resolved))),
                       new_git=None if os.path.lexists(workspace / ".git") else Path(os.path.realpath(workspace)) / ".git")


# -- refusals ------------------------------------------------------------------------------

_DENIED = r"(?:Permission denied|Read-only file system|Operation not permitted)"
_NET = (r"Network is unreachable|Could not resolve host|Temporary failure in name resolution|"
        r"Name or service not known|(?:connect|bind)[^\n]{0,80}(?:Permission denied|EACCES)|"
        r"\.(?:connect|bind)\([^\n]*\)\s*\n(?:.*\n)?.*(?:Errno 13|EACCES)|"
        r"(?:Errno 13|EACCES)[^\n]{0,40}(?:connect|socket)")


_BARE_WORD = 2  # the pattern of `bash: x: Permission denied`, whose word may be no path at all


@functools.cache  # compiled when the first command's output is read, not at import
def _refusal_patterns() -> tuple[list[re.Pattern[str]], re.Pattern[str]]:
    paths = [
        re.compile(r"['‘`\"]([^'’`\"\n]+)['’`\"]:? " + _DENIED),  # touch: cannot touch 'x': Permission denied
        re.compile(_DENIED + r"\]?:? ['‘\"]([^'’\"\n]+)['’\"]"),  # PermissionError: [Errno 13] Permission denied: 'x'
        re.compile(r"(?:^|\s)(/?[\w.~+@%/-][^\s:'\"]*): " + _DENIED, re.M),  # bash: x: Permission denied
        re.compile(r"['‘`\"]([^'’`\"\n]+)['’`\"] for (?:reading|writing): " + _DENIED),  # cp: cannot open 'x' for reading: ...
        re.compile(r"\b(?:EACCES|EROFS|EPERM):? ['\"]?(/[^\s'\"]+)"),  # node: Error: connect EACCES /x/s.sock
    ]
    return paths, re.compile(_NET, re.I)


SECRET_WITHHELD = "a secret file the sandbox withholds (permissions.secret_files)"


SOCKET_HIDDEN = "another program's server, hidden from sandboxed commands"
OWN_HIDDEN = "one of nanohermes's own files (its config, sessions, memory), hidden from sandboxed commands"
_DENIED_BARE = re.compile(r"Permission denied|Operation not permitted|\[Errno (?:1|13)\]|\b(?:EACCES|EPERM)\b")
_READ_ONLY_FS = re.compile(r"Read-only file system|\[Errno 30\]|\bEROFS\b")


def refusals(text: str, conf: Confinement, cwd: Path, hidden_sockets: tuple[str, ...] | list[str] = (),
             command: str = "") -> list[str]:
    """What the sandbox probably refused, read from a command's output: the paths named in
    "Permission denied" / "Read-only file system" messages that the command could have
    written without the sandbox (checked with access(2)), a socket the sandbox hid
    (`hidden_sockets`) that the output names (or the `command` line names, when the output
    shows a refused or failed connection), a read-only file system named without a path
    (a shared-memory lock, a semaphore), and network failures while the network is closed. A
    heuristic: a program that fails silently or words its errors its own way is not seen, and
    a path that is unwritable anyway is not blamed on the sandbox."""
    if conf.policy == "off" or not (conf.abi or conf.namespaces):
        return []
    found: list[str] = []

    def add(what: str) -> None:
        if what not in found:
            found.append(what)

    hidden = {p for p, _, _ in conf.hidden} if conf.namespaces else set()
    path_patterns, net = _refusal_patterns()
    for i, pattern in enumerate(path_patterns):
        for m in pattern.finditer(text):
            raw = m.group(1).strip()
            if not raw or len(raw) > 4096:
                continue
            path = Path(os.path.expanduser(raw))
            path = path if path.is_absolute() else cwd / path
            if i == _BARE_WORD and not any(c in raw for c in "/.") and not os.path.lexists(path):
                continue  # `open: Read-only file system` (perror) names a call, not a file
            real = _real(path)
            if real and real in hidden_sockets:
                continue  # named below, as a socket
            if conf.namespaces and real and (real in conf.own_files or any(
                    real == f or real.startswith(f.rstrip("/") + "/") for f in conf.hidden_folders)):
                add(f"access to {os.path.normpath(path)}, {OWN_HIDDEN}")
            elif hidden and real in hidden:
                add(f"access to {os.path.normpath(path)}, {SECRET_WITHHELD}")
            elif _blames(path, conf):
                add(f"a write to {os.path.normpath(path)}")
    failed = bool(_DENIED_BARE.search(text) or _NOT_CONNECTED.search(text))
    for sock in hidden_sockets:
        if sock in text or (failed and sock in command):
            add(f"a connection to the socket {sock}, {SOCKET_HIDDEN}")
    if not found and conf.namespaces:
        if _READ_ONLY_FS.search(text):
            add("a write outside its writable roots (\"Read-only file system\"; the output names no path)")
        elif _DENIED_BARE.search(text):
            # Capabilities are dropped in the sandbox, so even root's access to other users'
            # files is refused there.
            add("an access the sandbox refuses (\"Permission denied\" or \"Operation not permitted\", naming no "
                "path it could check: another program's socket, a secret file, a file outside its writable roots, "
                "or a process outside the sandbox)")
    if not conf.network and not any(SOCKET_HIDDEN in f for f in found):
        if net.search(text):
            add("a network connection (the sandbox has no network)")
        elif conf.namespaces and _NOT_CONNECTED.search(text):
            for port in _host_ports(text):
                add(f"a connection to port {port} of the host's loopback (the sandbox has a loopback of its own: "
                    "servers it starts are reachable, the host's are not)")
    return found


_NOT_CONNECTED = re.compile(r"refused|(?:couldn't|could not|failed to|unable to|cannot) connect", re.I)
_LOOPBACK_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|::1)\]?['\"]?(?::|,\s*(?:port=)?|\s+port\s+)(\d{1,5})\b")


def _host_ports(text: str) -> list[int]:
    """The loopback ports the output names that a server of the host listens on (the sandbox's
    own loopback cannot reach them)."""
    named = {int(m.group(1)) for m in _LOOPBACK_PORT.finditer(text)}
    if not named:
        return []
    listening: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, "rb") as f:
                rows = f.read().split(b"\n")[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            if len(parts) > 3 and parts[3] == b"0A":  # LISTEN
                listening.add(int(parts[1].rsplit(b":", 1)[1], 16))
    return sorted(named & listening)


def remedies(refused: Sequence[str]) -> str:
    """What lets a refused sandboxed call through, for these refusals: the settings that widen
    the sandbox for what they name, and the two that always do."""
    out: list[str] = []
    if any(r.startswith(("a write", "creating")) for r in refused):
        out.append("add the folder to sandbox.writable_roots")
    if any("network" in r or "loopback" in r for r in refused):
        out.append('set "sandbox": {"network": true}')
    if any(SECRET_WITHHELD in r for r in refused):
        out.append("an allow rule naming the exact command line lets it read the secret file")
    if any(OWN_HIDDEN in r for r in refused):
        out.append("no setting opens nanohermes's own files to sandboxed commands")
    if any(SOCKET_HIDDEN in r for r in refused):
        out.append("no setting opens another program's socket to sandboxed commands")
    out += ["--sandbox off (or sandbox.mode off) runs unasked commands unconfined",
            "or a person's yes at the prompt runs this call outside the sandbox"]
    return "; ".join(out)


def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except OSError:  # a path nanohermes may not look at
        return ""


def _blames(path: Path, conf: Confinement) -> bool:
    """`_sandbox_blocks`, and no for a path nanohermes may not even look at (`/proc/1/root/x`):
    a command's output must never turn its finished run into an error."""
    try:
        return _sandbox_blocks(path, conf)
    except OSError:
        return False


def _sandbox_blocks(path: Path, conf: Confinement) -> bool:
    """Could nanohermes itself write here, and does the confinement forbid it?"""
    real = Path(os.path.realpath(path))
    target = real if real.exists() else real.parent
    if not os.access(target, os.W_OK):
        return False  # unwritable without the sandbox too: not ours to blame
    if any(_within(real, p) for p in conf.read_only_paths) and conf.namespaces:
        return True
    if conf.policy == "workspace-write" and any(_within(real, r) for r in conf.write_roots):
        return False
    return str(real) != "/dev/null"


# -- escapees ------------------------------------------------------------------------------

_subreaper = False
_reaped_sids: set[int] = set()  # sessions of commands we started: their orphans are ours to reap
_killed: set[int] = set()  # escapees we killed and must still wait for (we are their subreaper)


def become_subreaper() -> None:
    """Orphans of commands are re-parented to nanohermes rather than to init, so they stay
    in reach of the sweep and never outlive a session unnoticed."""
    global _subreaper
    if not _subreaper and LINUX:
        _k().libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _subreaper = True


def new_marker() -> str:
    return secrets.token_hex(8)


def note_session(sid: int) -> None:
    _reaped_sids.add(sid)


def _stat(pid: str) -> tuple[int, int, int, str] | None:
    """(ppid, pgid, sid, state) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode()


def _has_marker(pid: str, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def _descendants() -> dict[int, tuple[int, int, int, str]] | None:
    """Every process below nanohermes, by walking /proc/<tid>/children from here down:
    as subreaper, everything a command left running stays in this subtree, so the sweep
    never reads the rest of the machine. None when the kernel has no children files."""
    me = os.getpid()
    try:
        tids = os.listdir(f"/proc/{me}/task")
    except OSError:
        return None
    todo: list[tuple[int, str]] = [(me, t) for t in tids]
    out: dict[int, tuple[int, int, int, str]] = {}
    while todo:
        pid, tid = todo.pop()
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids = [int(k) for k in f.read().split()]
        except FileNotFoundError:
            if pid == me:
                return None  # no CONFIG_PROC_CHILDREN
            continue
        except OSError:
            continue
        for kid in kids:
            if kid in out or (st := _stat(str(kid))) is None:
                continue
            out[kid] = st
            try:
                todo += [(kid, t) for t in os.listdir(f"/proc/{kid}/task")]
            except OSError:
                pass
    return out


def _all_processes() -> dict[int, tuple[int, int, int, str]]:
    procs: dict[int, tuple[int, int, int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(name)) is not None:
            procs[int(name)] = st
    return procs


def hold_user_namespace(pid: int) -> tuple[tuple[int, int], int] | None:
    """The identity of the user namespace a process is in, and an fd that keeps it alive:
    a freed namespace's number is given to the next one made, so a command's namespace
    identifies its processes only while it is held. None when it cannot be opened."""
    try:
        fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino), fd


def _in_namespace(pid: int, userns: tuple[int, int] | None) -> bool:
    if userns is None:
        return False
    try:
        st = os.stat(f"/proc/{pid}/ns/user")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == userns


def kill_escaped(marker: str, *, pgid: int, userns: tuple[int, int] | None = None) -> int:
    """Kill what a command left running outside its process group: every process carrying
    its marker or living in its private user namespace, and every descendant of one (even
    one that cleared its environment). Returns how many were killed. Its own group is the
    caller's to kill."""
    if not LINUX:
        return 0  # no /proc to look in: the process group is all that is killed
    needle = f"{MARKER}={marker}".encode()
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(5):  # a process may fork while we look: look again until nothing is left
        procs = (_descendants() if _subreaper else None)
        if procs is None:
            procs = _all_processes()
        hit = {pid for pid, (_, pg, _, state) in procs.items()
               if pid != me and pg != pgid and state != "Z"
               and (_has_marker(str(pid), needle) or _in_namespace(pid, userns))}
        if not hit:
            break
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        todo = list(hit)
        while todo:
            pid = todo.pop()
            for c in children.get(pid, ()):
                if c not in hit and c != me:
                    hit.add(c)
                    todo.append(c)
        for pid in hit:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
    _killed.update(killed)
    _await_deaths(killed, pgid)
    reap_orphans()
    return len(killed)


def _await_deaths(killed: set[int], sid: int, limit: float = 0.05) -> None:
    """SIGKILL takes effect a moment later: wait briefly (bounded) until what was killed,
    and the command's own session, are zombies, so they are reaped now and not later."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        procs = _descendants()
        if procs is None:
            return
        if not any(st[3] != "Z" and (pid in killed or st[2] == sid) for pid, st in procs.items()):
            return
        time.sleep(0.001)


def reap_orphans() -> None:
    """Wait for the zombies nanohermes inherited as subreaper: escapees it killed and
    leftover members of command sessions. Never a child some other code waits for (a
    command's shell, an MCP server)."""
    if not _subreaper:
        return
    me = os.getpid()
    procs = _descendants()
    if procs is None:
        procs = _all_processes()
    for pid, st in procs.items():
        if st[0] != me or st[3] != "Z":
            continue
        ours = pid in _killed or (st[2] in _reaped_sids and pid != st[2])
        if ours:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            _killed.discard(pid)
