"""A confined command's own PID namespace: the namespace's init, the relay nanohermes waits
on, and the command's own /proc.

`unshare(CLONE_NEWPID)` moves only the caller's later children into the new namespace, and
its first child becomes the namespace's init (pid 1): the kernel protects it from every
signal it has no handler for, and kills the rest of the namespace when it exits. Neither suits
the command itself (a shell that ignored `SIGTERM` from outside, or whose exit ended its own
`cmd &` at once), so the child nanohermes forked (the relay, which stays outside the
namespace, and which nanohermes waits on) forks once more, and never execs:

- the init (pid 1) is nanohermes's code. It mounts a procfs of the namespace over /proc
  (read-only, as the rest of the tree), takes the call's restrictions, starts the command
  (pid 2) with `posix_spawn` (no second copy of nanohermes's memory), and reaps what the
  command leaves orphaned. Once the command has ended it sends its wait status to the relay,
  and exits when nothing else is left in the namespace. It is in the command's process group,
  so the group's SIGKILL at the end of a call ends it, and with it everything left in the
  namespace, whatever session or group that joined.
- the relay blocks every signal, waits for that status, and exits as the command did (with
  its exit code, or killed by the same signal), so nanohermes sees the command's own end.
  When nothing else is left in the namespace, the init exits with the status and the relay
  reaps it: nanohermes then has no process of the call to wait for.
  Signals to the command's process group reach the command and its children directly.

Neither holds a file of the call once the command runs: not its pipes (so a call ends when
the command's processes let go of them), not the pipe `subprocess` reads exec errors from.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from nanohermes.guard.sandbox.kernel import (
    MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY, PR_SET_DUMPABLE, fail, kern,
)

_MAX_FD = 0x7FFFFFFF
INIT_TITLE = b"nanohermes-sandbox-init"  # what `ps` shows as the namespace's pid 1


def split(path: str, argv: Sequence[str], env: Mapping[str, str], restrict: Callable[[], None],
          title: tuple[int, int] | None) -> NoReturn:
    """In the child nanohermes forked, after `unshare(CLONE_NEWPID)` and the mounts: fork the
    namespace's init, which mounts /proc, calls `restrict` and starts `argv`; this process
    becomes the relay at once, so that nanohermes goes on while the init starts the command.
    What keeps the init from starting it (its /proc, its restrictions, the program) is written
    where the command's errors go, and the relay ends with 126, as a shell does for a program
    it cannot run. Never returns. `title`: where nanohermes's arguments are in memory
    (procargs.area): the init, a copy of nanohermes that the command can list, shows
    INIT_TITLE there instead."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    # libc's fork, not os.fork: this process has one thread and Python was made whole for it
    # after the fork that made it, so Python's fork handlers would only cost time here.
    pid = kern().libc.fork()
    if pid < 0:
        raise fail("forking the namespace's init")
    if pid == 0:
        os.close(status_r)
        _init(status_w, path, argv, env, restrict, old, title)
    os.close(status_w)
    _relay(status_r, pid)


def _closed_but(*keep: int) -> None:
    """Close every file but `keep` (the call's pipes and subprocess's error pipe included)."""
    low = 0
    for fd in sorted(keep):
        if low < fd:  # an empty range would reach every file: close_range takes its end unsigned
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, _MAX_FD)


def _init(status: int, path: str, argv: Sequence[str], env: Mapping[str, str], restrict: Callable[[], None],
          mask: set[int | signal.Signals], title: tuple[int, int] | None) -> NoReturn:
    code = 0
    try:
        try:
            k = kern()
            libc = k.libc
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # a copy of nanohermes's memory: no command may read it
            if title is not None and title[1] > title[0]:
                size = title[1] - title[0]
                # Ending in NUL: otherwise the kernel reads on into the environment.
                k.ctypes.memmove(title[0], INIT_TITLE[:size - 1].ljust(size, b"\0"), size)
            if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, None) != 0:
                raise fail("mounting /proc for the command's own processes")
            restrict()
            _closed_but(0, 1, 2, status)
            command = os.posix_spawn(path, list(argv), env, setsigmask=mask)
        except BaseException as e:  # said where the command's errors go; the relay ends with 126
            code = 1
            os.write(2, b"nanohermes: the sandbox could not start the command: %s\n" % str(e).encode("utf-8", "replace"))
            os.write(status, b"%d%s" % (126 << 8, _ALONE))
        else:
            _closed_but(status)
            _reap(command, status)
    finally:
        os._exit(code)


_ALONE, _LEFT = b".", b"&"  # after the status: the init exits now, or processes are left in the namespace


def _reap(command: int, status: int) -> None:
    """Reap every child as it ends, and send the command's wait status to the relay, saying
    whether anything is left; return once no process is left in the namespace (each one
    descends from the init)."""
    while True:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == command:
            alone = _nothing_left()
            os.write(status, b"%d%s" % (st, _ALONE if alone else _LEFT))
            if alone:
                return  # the relay reaps this process: nanohermes has nothing to wait for
            os.close(status)


def _nothing_left() -> bool:
    """Reap what has ended; whether no child is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _relay(status: int, init: int) -> NoReturn:
    code = 255
    try:
        _closed_but(status)
        got = b""
        while chunk := os.read(status, 64):
            got += chunk
        if got.endswith(_ALONE):
            os.waitpid(init, 0)  # it is exiting: reaped here, so nobody waits for it later
        got = got.rstrip(_ALONE + _LEFT)
        code = os.waitstatus_to_exitcode(int(got)) if got else -signal.SIGKILL  # no word: the init was killed
        if code < 0:  # killed by a signal: end the same way, without a core file of this copy
            sig = -code
            code = 128 + sig
            kern().libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
            if sig != signal.SIGKILL:
                signal.signal(sig, signal.SIG_DFL)  # Python's own handler (SIGINT) would catch it
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
    finally:
        os._exit(code)
