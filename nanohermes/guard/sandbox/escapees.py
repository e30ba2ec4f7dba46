"""The sweep for escapees: finding and killing the processes that left a command's process
group (setsid, double fork) once it ends, as nanohermes's child subreaper."""

from __future__ import annotations

import os
import secrets
import signal
import time

from nanohermes.guard.sandbox.kernel import LINUX, PR_SET_CHILD_SUBREAPER, kern

# Every process spawned for the model carries this variable (inherited by its descendants):
# how the sweep tells a command's escapees from unrelated children such as MCP servers.
MARKER = "NANOHERMES_RUN"

_subreaper = False

_reaped_sids: set[int] = set()  # sessions of commands we started: their orphans are ours to reap

_killed: set[int] = set()  # escapees we killed and must still wait for (we are their subreaper)

def become_subreaper() -> None:
    """Orphans of commands are re-parented to nanohermes rather than to init, so they stay
    in reach of the sweep and never outlive a session unnoticed."""
    global _subreaper
    if not _subreaper and LINUX:
        kern().libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
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

def kill_escaped(marker: str, *, pgid: int, userns: tuple[int, int] | None = None, group_ended: bool = True) -> int:
    """Kill what a command left running outside its process group: every process carrying
    its marker or living in its private user namespace, and every descendant of one (even
    one that cleared its environment). Returns how many were killed. Its own group is the
    caller's to kill: `group_ended` says it was killed already, so its members' deaths are
    awaited and reaped here too."""
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
        killed |= _kill(_with_descendants(hit, procs, me))
    _killed.update(killed)
    reap_orphans(_await_deaths(killed, pgid if group_ended else None))
    return len(killed)

def _with_descendants(hit: set[int], procs: dict[int, tuple[int, int, int, str]], me: int) -> set[int]:
    """`hit` and every descendant of one in `procs` (but nanohermes itself)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(hit), list(hit)
    while todo:
        pid = todo.pop()
        for c in children.get(pid, ()):
            if c not in out and c != me:
                out.add(c)
                todo.append(c)
    return out

def _kill(pids: set[int]) -> set[int]:
    """SIGKILL each of `pids`; those it reached."""
    killed = set()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed

def reap_session(sid: int) -> None:
    """Once a command's group was killed: wait briefly for its session's members to die, and
    reap those nanohermes inherited (a PID namespace's init, once its relay has exited)."""
    reap_orphans(_await_deaths(set(), sid))

def _await_deaths(killed: set[int], sid: int | None,
                  limit: float = 0.05) -> dict[int, tuple[int, int, int, str]] | None:
    """SIGKILL takes effect a moment later: wait briefly (bounded) until what was killed,
    and the command's own session (unless None), are zombies, so they are reaped now and not
    later. Returns the last look at nanohermes's processes (None when none was made)."""
    if not killed and sid is None:
        return None
    deadline = time.monotonic() + limit
    procs = None
    while time.monotonic() < deadline:
        procs = _descendants()
        if procs is None:
            return None
        if not any(st[3] != "Z" and (pid in killed or st[2] == sid) for pid, st in procs.items()):
            return procs
        time.sleep(0.001)
    return None

def reap_orphans(procs: dict[int, tuple[int, int, int, str]] | None = None) -> None:
    """Wait for the zombies nanohermes inherited as subreaper: escapees it killed and
    leftover members of command sessions (in `procs`, a look just made, or a fresh one).
    Never a child some other code waits for (a command's shell, an MCP server)."""
    if not _subreaper:
        return
    me = os.getpid()
    if procs is None:
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
