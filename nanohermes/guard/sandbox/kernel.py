"""The kernel calls the sandbox makes, through ctypes: Landlock's rulesets, prctl, unshare and
setns, mount, mount_setattr, open_tree and move_mount, capset, and the loopback interface's flags. libc and the structures
are loaded the first time a call is confined (or the sandbox probed), in nanohermes itself,
so the child between fork and exec only calls what is already there."""

from __future__ import annotations

import errno
import functools
import os
import sys

# -- kernel constants ----------------------------------------------------------------------
# The Landlock syscall numbers are the same on every architecture (they were added after the
# tables were unified).
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 24, 38, 36
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
AF_INET, SOCK_DGRAM, SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 2, 2, 0x8913, 0x8914, 1
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1  # same on every arch
SYS_OPEN_TREE, SYS_MOVE_MOUNT, OPEN_TREE_CLONE = 428, 429, 1  # same on every arch
MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40

LINUX = sys.platform.startswith("linux")


class Kernel:
    """ctypes, libc and the kernel's structures, loaded the first time a call is confined
    (or the sandbox is probed): a session that never runs a command never loads ctypes.
    `launch.prepare` loads it in nanohermes itself, so the child between fork and exec
    only uses what is already there."""

    def __init__(self) -> None:
        # ctypes: only when the kernel is asked for Landlock
        import ctypes

        self.ctypes = ctypes
        if LINUX:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
            libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
            libc.unshare.argtypes = [ctypes.c_int]
            libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
            libc.fork.restype = ctypes.c_int
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
        try:  # the kernel's highest capability number: the bounding set is dropped up to it
            with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
                self.last_cap = int(f.read())
        except (OSError, ValueError):
            self.last_cap = 63
        self.CapHeader, self.CapData = CapHeader, CapData

@functools.cache
def kern() -> Kernel:
    return Kernel()

class SandboxError(Exception):
    """The sandbox could not be set up for a call: the command does not run."""

def fail(what: str) -> SandboxError:
    e = kern().ctypes.get_errno()
    return SandboxError(f"{what}: {os.strerror(e)}")

def fs_rights(abi: int) -> int:
    """Every filesystem right the running kernel knows, which is what a ruleset handles."""
    rights = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights

def file_rights(abi: int) -> int:
    """The rights that apply to a file that is not a folder (others make add_rule fail)."""
    return fs_rights(abi) & (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)

def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if not LINUX:
        return 0
    k = kern()
    r = k.libc.syscall(SYS_CREATE_RULESET, None, k.ctypes.c_size_t(0), k.ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(r) if r > 0 else 0

def set_read_only(path: bytes, read_only: bool) -> None:
    """Make the mount at `path` and every mount below it read-only, or read-write again."""
    k = kern()
    attr = k.MountAttr(attr_set=MOUNT_ATTR_RDONLY if read_only else 0, attr_clr=0 if read_only else MOUNT_ATTR_RDONLY)
    if k.libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path, AT_RECURSIVE, k.ctypes.byref(attr),
                      k.ctypes.c_size_t(k.ctypes.sizeof(attr))) != 0:
        raise fail(f"mount_setattr {path!r}")

def write_proc(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)

def drop_capabilities() -> None:
    """No capability survives into the command: as root it could otherwise load a kernel
    module or reach past the sandbox. Without CAP_SETPCAP the drops fail harmlessly. The
    bounding set matters only to a process that is root where it runs (exec gives root its
    capabilities back up to that set; no_new_privs keeps them out too): dropped only there."""
    k = kern()
    if os.geteuid() == 0:
        for cap in range(k.last_cap + 1):
            if k.libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and k.ctypes.get_errno() == errno.EINVAL:
                break
    k.libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    hdr = k.CapHeader(version=0x20080522, pid=0)
    data = (k.CapData * 2)()
    k.libc.capset(k.ctypes.byref(hdr), data)

def loopback_up() -> None:
    """Bring up `lo` of the command's new network namespace (it starts down): 127.0.0.1 and ::1
    are then the namespace's own, for local test servers, and nothing else is reachable."""
    k = kern()
    fd = k.libc.socket(AF_INET, SOCK_DGRAM, 0)
    if fd < 0:
        raise fail("a socket to bring up the loopback interface")
    try:
        req = k.IfReq(name=b"lo")
        if k.libc.ioctl(fd, SIOCGIFFLAGS, k.ctypes.byref(req)) != 0:
            raise fail("reading the loopback interface's flags")
        req.flags |= IFF_UP
        if k.libc.ioctl(fd, SIOCSIFFLAGS, k.ctypes.byref(req)) != 0:
            raise fail("bringing up the loopback interface")
    finally:
        os.close(fd)
