"""The launcher: one call's temporary folder, ruleset and mount plan, the code its child runs
between fork and exec, its environment, and what the call must not leave behind.

How a call is confined: the Landlock ruleset is built in nanohermes itself (a few cheap
syscalls); the forked child, before `exec`, enters its namespaces, remounts the tree
read-only and binds the writable roots and protected paths (`mounts.py`), covers secret
files and other programs' sockets, brings up its own loopback, drops every capability, sets
no_new_privs and restricts itself. No root, no setuid helper, no daemon, and no second
interpreter per command.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nanohermes.guard import procargs, programs, sockets
from nanohermes.guard.gitmeta import link_target, planted_git, safe_new_repo, subfolder_gits, submodule_dirs
from nanohermes.guard.sandbox.confinement import Confinement
from nanohermes.guard.sandbox.kernel import (
    CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, FS_EXECUTE, FS_READ_DIR, FS_READ_FILE, MS_BIND, MS_PRIVATE, MS_REC,
    NET_BIND_TCP, NET_CONNECT_TCP, PR_SET_NO_NEW_PRIVS, RULE_PATH_BENEATH, SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL,
    SYS_ADD_RULE, SYS_CREATE_RULESET, SYS_RESTRICT_SELF, SandboxError, drop_capabilities, fail, file_rights, fs_rights,
    kern, loopback_up, set_read_only, write_proc,
)
from nanohermes.guard.sandbox.mounts import (
    cover, coverable, mount_plan, placeholder, placeholder_folder, private_temp_folder,
)
from nanohermes.guard.sandbox.pidns import split
from nanohermes.guard.sandbox.refusals import Refused


def prepare(self: Confinement) -> Prepared:
    """Create the temp folder and the ruleset; the returned object's `preexec` runs in the child."""
    if self.policy == "off":
        return Prepared(self, tmpdir=None)
    if self.unhidden and self.policy == "workspace-write":
        # Fail closed: this is what runs programs, and a program may open any file. The
        # read-only level runs only built-in commands whose reads are checked by name.
        raise SandboxError(f"{self.unhidden}, so the sandbox cannot withhold every secret file "
                           "(permissions.secret_files) from a command no person approved; raise the limit, "
                           "or approve the command at the prompt")
    kern()  # here, not in the child: between fork and exec nothing is imported
    tmp = new_temp_folder()
    writes = self.policy == "workspace-write"
    prepared = Prepared(self, tmpdir=tmp)
    if writes:
        prepared.watch()
    try:
        if self.abi:
            prepared.ruleset_fd = _ruleset(self, tmp)
        if self.namespaces:
            _mount_namespace(prepared, self, tmp)
    except BaseException:
        prepared.cleanup()
        raise
    return prepared


def _mount_namespace(prepared: Prepared, conf: Confinement, tmp: Path) -> None:
    """What the child's own mount namespace holds: the binds, its own /dev/shm, and the covers
    over other programs' sockets, the secret files and nanohermes's own folders."""
    prepared.mounts = mount_plan(conf, tmp)
    if os.path.isdir("/dev/shm"):  # the temp folder is also the call's own /dev/shm
        prepared.shm = os.fsencode(tmp)
    found = sockets.look(os.environ, keep=[str(tmp), *map(str, conf.write_roots)],
                         own_network=not conf.network, max_entries=conf.socket_scan_entries)
    if found.problem:
        raise SandboxError(f"{found.problem}, so the sandbox cannot hide every other server's socket "
                           "from the command; raise the limit, or approve the command at the prompt")
    prepared.sockets = [os.fsencode(p) for p in found.sockets]
    folders = [*found.folders, *coverable(conf.hidden_folders, [str(tmp), *map(str, conf.write_roots)])]
    prepared.socket_folders = [os.fsencode(p) for p in folders]
    if conf.hidden or found.sockets:
        prepared.cover = placeholder()
    if folders:
        prepared.cover_folder = placeholder_folder()
    if conf.hidden:
        prepared.hidden = [(os.fsencode(p), dev, ino) for p, dev, ino in conf.hidden]


def _ruleset(self: Confinement, tmp: Path) -> int:
    abi, k = self.abi, kern()
    handled = fs_rights(abi)
    attr = k.RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4 and not self.network and not self.namespaces:
        # Without a network namespace of its own, TCP is closed here (loopback too). With
        # one, the namespace is the boundary: it holds only its own loopback, so local
        # test servers work and the host's listeners stay out of reach.
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        # A confined command may not signal nanohermes or anything outside its domain.
        attr.scoped = SCOPE_SIGNAL | (0 if self.network else SCOPE_ABSTRACT_UNIX)
        size = 24
    fd = int(k.libc.syscall(SYS_CREATE_RULESET, k.ctypes.byref(attr), k.ctypes.c_size_t(size), k.ctypes.c_uint32(0)))
    if fd < 0:
        raise fail("landlock_create_ruleset")
    try:
        _add(self, fd, Path("/"), FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)
        _add(self, fd, Path("/dev/null"), file_rights(abi))
        # The temp folder is also bound over /dev/shm (POSIX semaphores, shared memory): a
        # bind's root is checked by its own inode, which is the temp folder's.
        roots = [tmp] + ([*self.write_roots] if self.policy == "workspace-write" else [])
        for root in roots:
            _add(self, fd, root, handled)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _add(self: Confinement, ruleset: int, path: Path, rights: int) -> None:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a root that does not exist grants nothing
    try:
        if not os.path.isdir(f"/proc/self/fd/{pfd}"):
            rights &= file_rights(self.abi)
        k = kern()
        rule = k.PathBeneath(allowed_access=rights, parent_fd=pfd)
        if k.libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, k.ctypes.byref(rule), k.ctypes.c_uint32(0)) != 0:
            raise fail(f"landlock_add_rule {path}")
    finally:
        os.close(pfd)


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
    plants: list[Refused] = field(default_factory=list)  # what was taken away, as refusals
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

    def preexec(self, argv: Sequence[str], env: Mapping[str, str]) -> Callable[[], None] | None:
        """What the forked child runs before it execs `argv` with `env` (the same the caller
        gives `subprocess`); None when nothing is confined. With a PID namespace, the child
        never execs: it starts `argv` itself (see pidns.py)."""
        if not self.active or (self.ruleset_fd < 0 and not self.conf.namespaces):
            return None
        if not (self.conf.pid and self.conf.namespaces):
            return self._in_child
        # As subprocess finds it (a bare name on the PATH the command gets), so that a missing
        # program is an error here as it is there; a relative path is the child's to find.
        path = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if path is None or (os.path.isabs(path) and not os.access(path, os.X_OK)):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
        command = (path, argv, env)  # posix_spawn encodes them, in the init
        title = procargs.area()  # read here: the init names itself in the same place of its copy
        return lambda: self._in_child(command, title)

    def _in_child(self, command: tuple[str, Sequence[str], Mapping[str, str]] | None = None,
                  title: tuple[int, int] | None = None) -> None:
        """Runs between fork and exec: only syscalls, no allocation-heavy Python."""
        conf = self.conf  # kern() was loaded by `prepare`, before the fork
        if conf.namespaces:
            self._own_namespaces(pid=command is not None)
            self._bind()
            self._cover()
            if not conf.network:
                loopback_up()
            # The working folder was entered before the binds: enter it again through them,
            # or relative paths would reach the files underneath.
            os.chdir(os.getcwd())
            if command is not None:
                split(*command, self._restrict, title)  # the init starts the command; this process relays its end
        self._restrict()

    def _own_namespaces(self, *, pid: bool) -> None:
        """In the child: a user and mount namespace of its own (and a network one without
        `sandbox.network`, a PID one for a command its init starts), as the same user, whose
        mounts never show in nanohermes's own namespace."""
        libc = kern().libc
        uid, gid = os.geteuid(), os.getegid()
        flags = CLONE_NEWUSER | CLONE_NEWNS | (0 if self.conf.network else CLONE_NEWNET) | (CLONE_NEWPID if pid else 0)
        if libc.unshare(flags) != 0:
            raise fail("unshare")
        write_proc("/proc/self/setgroups", b"deny")
        write_proc("/proc/self/uid_map", b"%d %d 1" % (uid, uid))
        write_proc("/proc/self/gid_map", b"%d %d 1" % (gid, gid))
        # Private, so that the binds below never show in nanohermes's own namespace.
        if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            raise fail("making / private")

    def _bind(self) -> None:
        """In the child: the whole tree read-only, then the mount plan's binds."""
        libc = kern().libc
        set_read_only(b"/", True)
        for path, read_only in self.mounts:
            if libc.mount(path, path, None, MS_BIND | MS_REC, None) != 0:
                raise fail(f"bind {path!r}")
            set_read_only(path, read_only)

    def _cover(self) -> None:
        """In the child: the covers over the secret files, the call's own /dev/shm, and the
        covers over other programs' sockets and their folders (one gone meanwhile is no error)."""
        k = kern()
        libc = k.libc
        for path, dev, ino in self.hidden:
            cover(self.cover, path, dev, ino)
        if self.shm and libc.mount(self.shm, b"/dev/shm", None, MS_BIND, None) != 0:
            raise fail("bind /dev/shm")
        for path in self.socket_folders:
            if libc.mount(self.cover_folder, path, None, MS_BIND, None) != 0 and k.ctypes.get_errno() != errno.ENOENT:
                raise fail(f"covering the folder {path!r}")
        for path in self.sockets:
            if libc.mount(self.cover, path, None, MS_BIND, None) != 0 and k.ctypes.get_errno() != errno.ENOENT:
                raise fail(f"covering the socket {path!r}")

    def _restrict(self) -> None:
        """The last step before the command: no capability, no new privilege, the ruleset."""
        k = kern()
        drop_capabilities()
        if k.libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise fail("no_new_privs")
        if self.ruleset_fd >= 0 and k.libc.syscall(SYS_RESTRICT_SELF, self.ruleset_fd, k.ctypes.c_uint32(0)) != 0:
            raise fail("landlock_restrict_self")

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
        # Each time: a background task may make a path again after it was taken away.
        for p in self.absent:
            if os.path.lexists(p):
                found += self._take_away(p, "it would change how git or nanohermes starts")
        for repo in self._new_repos():
            if not safe_new_repo(repo):
                found += self._take_away(repo, "its config or hooks name a program git would run")
        for entry in self._new_subfolder_gits():
            found += self._take_away(entry, "it leads git in its folder to a repository whose config or hooks name a "
                                            "program your next git command there would run")
        if self.conf.path_folders:
            found += self._programs_changed()
        return found

    def _take_away(self, path: Path, why: str) -> list[str]:
        """Remove what the command planted at `path`, every time it is there (a background task
        may make it again); kept as a refusal and named the first time, not again."""
        _remove(path)
        if path in self.removed:
            return []
        self.removed.append(path)
        self.plants.append(Refused("planted", str(path), why))
        return [str(self.plants[-1])]

    def _new_repos(self) -> list[Path]:
        """The repositories the command made: submodules' git folders, and the workspace's `.git`
        when it had none."""
        candidates = [m for root in self.conf.module_roots for m in submodule_dirs(root) if m not in self.modules]
        if self.new_git is not None and os.path.lexists(self.new_git):
            candidates.append(self.new_git)
        return candidates

    def _new_subfolder_gits(self) -> list[Path]:
        """The `.git` entries in the workspace's subfolders the command made (none were there
        before), or links it led elsewhere (a link is replaced, not bound read-only), that lead
        to a repository git would run a program of (`gitmeta.planted_git`)."""
        root = self.conf.git_look
        if root is None:
            return []
        before = dict(self.conf.subfolder_gits)
        new = [Path(p) for p in subfolder_gits(root, self.conf.git_look_folders)
               if p not in before or before[p] != link_target(p)]  # new, or a link led elsewhere
        return [p for p in new if p in self.removed or planted_git(p, root)]

    def _programs_changed(self) -> list[str]:
        """The programs on PATH inside a writable root the command created or changed since the
        last look, noted (and kept as tainted)."""
        found = []
        for path, st in _programs(self.conf.path_folders).items():
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

def new_temp_folder() -> Path:
    """A private folder (mode 0700) for one call, in this user's private folder of the
    system's temporary folder: made and removed there, it leaves the temporary folder itself
    unchanged, whose listing the look for other programs' sockets then keeps."""
    base = _temp_base()
    while True:
        path = base / secrets.token_hex(6)
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue
        except FileNotFoundError:  # the base went away (a cleaner of /tmp): made again
            _base.clear()
            base = _temp_base()

_base: list[Path] = []

def _temp_base() -> Path:
    """The private folder the calls' own temporary folders are made in (`private_temp_folder`)."""
    if _base:
        return _base[0]
    folder = private_temp_folder("nanohermes-sandbox")
    _base.append(folder)
    return folder
