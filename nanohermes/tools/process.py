"""The process machinery every command-running tool shares (run_command, background tasks,
the git tools).

Owns how a command runs: in its own process session (so its whole group can be killed),
stdin at /dev/null (a command waiting for input fails at once), stdout and stderr drained
concurrently into capped buffers (past the cap the start and the newest bytes are kept, and
what falls between is read, counted and marked, so no pipe can fill and memory stays flat),
the whole group killed on timeout, cancellation or exit, and a bounded wait for
grandchildren that still hold the pipes after the shell has exited. Also owns fitting a
command's stdout and stderr sections into one result.
Every process starts through `spawn`, in the OS sandbox the call was given (`nanohermes/guard/sandbox`); when
a command ends, what it left running outside its group is swept and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nanohermes.common.budget import Limits
from nanohermes.common.exits import at_exit
from nanohermes.guard import programs, sandbox, withhold
from nanohermes.guard.redact import child_env
from nanohermes.guard.sandbox import Refused
from nanohermes.tools.base import Attempt, ToolContext

# Called with (fd, chunk) for every chunk read from the command's stdout (1) or stderr (2).
OnData = Callable[[int, bytes], None]

_REAP_SECS = 5.0  # how long to wait for a SIGKILLed shell to be reaped before giving up on it
_MARKER_CHARS = 60  # room reserved per section for its "… N chars omitted …" marker

# Process groups started and not yet closed: killed when the process ends as a last resort,
# for exits that skip the orderly close (an exception escaping the event loop).
_live_groups: set[int] = set()


def _kill_live_groups() -> None:
    for pgid in list(_live_groups):
        _signal_group(pgid, signal.SIGKILL)
    _live_groups.clear()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


class Capture:
    """One stream's unread bytes, at most `cap` of them. When more arrive, the first half is
    kept and the newest bytes keep rolling in behind it; what rolls out in between is counted
    and marked where it was. A long build log keeps its start and its final summary."""

    __slots__ = ("_end", "_ring", "_tail_len", "cap", "data", "dropped", "gap", "total")

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.data = bytearray()  # the unread bytes up to the gap (all of them when there is none)
        # The newest unread bytes, after `data`: a ring of the cap's remaining room, written in
        # place so a flood reuses the same memory.
        self._ring = bytearray()
        self._end = 0  # where the ring's next byte goes
        self._tail_len = 0
        self.gap = 0  # bytes rolled out between `data` and the tail, not yet passed by a read
        self.total = 0  # bytes the command wrote to this stream
        self.dropped = 0  # bytes rolled out over the stream's life

    @property
    def unread(self) -> int:
        return len(self.data) + self._tail_len

    @property
    def tail_len(self) -> int:
        return self._tail_len

    def feed(self, chunk: bytes) -> None:
        n = len(chunk)
        self.total += n
        if not self._ring and len(self.data) + n <= self.cap:
            self.data += chunk
            return
        if not self._ring:  # the first overflow since the last read: keep the first half
            half = self.cap // 2
            spill = b""
            if len(self.data) > half:
                cut = utf8_boundary(self.data, half)
                spill = bytes(self.data[cut:])
                del self.data[cut:]
            else:
                fill = half - len(self.data)
                self.data += chunk[:fill]
                chunk = chunk[fill:]
            self._ring = bytearray(self.cap - len(self.data))
            if not self._ring:  # no room at all (a cap of 0): everything past `data` is dropped
                self._roll_out(len(spill) + len(chunk))
                return
            self._roll(spill)
        self._roll(chunk)

    def _roll(self, chunk: bytes) -> None:
        """Write into the ring; what it overwrites rolls out."""
        n = len(chunk)
        if not n:
            return
        room = len(self._ring)
        view = memoryview(chunk)
        if n >= room:  # only its last `room` bytes can stay
            self._roll_out(self._tail_len + n - room)
            self._ring[:] = view[n - room:]
            self._end, self._tail_len = 0, room
            return
        first = min(n, room - self._end)
        self._ring[self._end:self._end + first] = view[:first]
        self._ring[:n - first] = view[first:]
        self._end = (self._end + n) % room
        self._roll_out(max(0, self._tail_len + n - room))
        self._tail_len = min(room, self._tail_len + n)

    def _roll_out(self, n: int) -> None:
        self.gap += n
        self.dropped += n

    def _tail_bytes(self) -> bytes:
        room, n = len(self._ring), self._tail_len
        if not n:
            return b""
        start = (self._end - n) % room
        if start + n <= room:
            return bytes(self._ring[start:start + n])
        return bytes(self._ring[start:]) + bytes(self._ring[:self._end])

    def text(self) -> str:
        """Every unread byte, decoded, with a marked gap where bytes rolled out."""
        return decode(self.data) + gap_marker(self.gap) + decode(self._tail_bytes())

    def take(self, limit: int) -> tuple[str, int]:
        """Remove up to `limit` unread bytes from the front: whole lines when a line ends
        within the limit, never part of a UTF-8 character. Returns them decoded, and the
        bytes of the gap this read went past (its marker is in the text, in its place)."""
        out = self._take_data(limit)
        if self.data or not (self._tail_len or self.gap) or len(out) >= limit:
            return decode(out), 0
        gap, self.gap = self.gap, 0
        self.data = bytearray(self._tail_bytes())  # the tail is next: it becomes the front
        self._ring, self._end, self._tail_len = bytearray(), 0, 0
        return decode(out) + gap_marker(gap) + decode(self._take_data(limit - len(out))), gap

    def _take_data(self, limit: int) -> bytes:
        n = utf8_boundary(self.data, limit)
        if n < len(self.data):
            n = self.data.rfind(b"\n", 0, n) + 1 or n
        out = bytes(self.data[:n])
        del self.data[:n]
        return out


def gap_marker(dropped: int) -> str:
    """Marks where bytes of a stream were dropped (empty when none were)."""
    return f"\n[… {dropped} bytes dropped here …]\n" if dropped else ""


def utf8_boundary(buf: bytes | bytearray, limit: int) -> int:
    """The largest cut <= limit that does not fall inside a UTF-8 sequence (when there is one)."""
    if limit >= len(buf):
        return len(buf)
    cut = i = max(0, limit)
    while i > 0 and cut - i < 3 and (buf[i] & 0xC0) == 0x80:  # continuation bytes are 10xxxxxx
        i -= 1
    return i if i > 0 and (buf[i] & 0xC0) != 0x80 else cut


def decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


class _Drain(asyncio.SubprocessProtocol):
    """Reads both pipes as data arrives and never pauses: a full pipe cannot happen."""

    def __init__(self, out: Capture, err: Capture, on_data: OnData | None) -> None:
        loop = asyncio.get_running_loop()
        self.captures = {1: out, 2: err}
        self.on_data = on_data
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.captures[fd].feed(data)
        if self.on_data is not None:
            self.on_data(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _wait(fut: asyncio.Future[None], timeout: float | None) -> bool:
    """Wait for `fut` at most `timeout` seconds without cancelling it; True if it is done."""
    if fut.done():
        return True
    try:
        await asyncio.wait_for(asyncio.shield(fut), timeout)
    except TimeoutError:
        return False
    return True


@dataclass(eq=False)
class Process:
    """A command running in its own process group (its pgid is its pid)."""

    pid: int
    out: Capture
    err: Capture
    _transport: asyncio.SubprocessTransport = field(repr=False)
    _drain: _Drain = field(repr=False)
    confinement: sandbox.Confinement
    started: float = field(default_factory=time.monotonic)
    marker: str = ""  # the environment marker its processes carry
    argv: tuple[str, ...] = ()
    userns: tuple[int, int] | None = None  # its private user namespace, when confined in one
    _userns_fd: int = field(default=-1, repr=False)  # holds that namespace, so its number stays its own
    escaped: int = 0  # processes that had left its group and were killed when it ended
    _prepared: sandbox.Prepared | None = field(default=None, repr=False)
    _closed: bool = False
    # Its mount namespace, held while it runs (a command that withholds secret files): a secret
    # file that appears meanwhile is covered there (`withhold_new`); the files covered so far.
    _mntns_fd: int = field(default=-1, repr=False)
    _covered: set[tuple[str, int, int]] = field(default_factory=set, repr=False)

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode()

    @property
    def exited(self) -> bool:
        return self._drain.exited.done()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for the command itself (the shell) to exit; False if `timeout` passed first."""
        return await _wait(self._drain.exited, timeout)

    def signal(self, sig: int) -> None:
        """Signal every process of the group, grandchildren included."""
        if not self._closed:
            _signal_group(self.pid, sig)

    async def stop(self, grace: float) -> None:
        """TERM the group; KILL it after `grace` seconds, and KILL any member that outlived the shell."""
        self.signal(signal.SIGTERM)
        if not await self.wait(grace):
            self.signal(signal.SIGKILL)
            await self.wait(_REAP_SECS)
        self.signal(signal.SIGKILL)

    async def settle(self, grace: float) -> bool:
        """Once the shell has exited: give processes still holding the pipes `grace` seconds
        to let go, then kill the group. True if something was still holding them."""
        if await _wait(self._drain.pipes_closed, grace):
            return False
        self.signal(signal.SIGKILL)
        await _wait(self._drain.pipes_closed, _REAP_SECS)
        return True

    def close(self) -> None:
        """Kill whatever is left of the group and release the pipes. Idempotent, synchronous,
        so it is safe in `finally` blocks of cancelled tasks."""
        if self._closed:
            return
        # In its own PID namespace, what left the group (setsid, double fork) is counted
        # first: the group's end ends the namespace's init, and with it everything in it.
        own_pids = self.confinement.pid and self.confinement.namespaces
        if self.marker and own_pids:
            self.escaped = sandbox.kill_escaped(self.marker, pgid=self.pid, userns=self.userns, group_ended=False)
        # Leftover members (`cmd &` that closed its pipes) die with the command. The shell
        # is already reaped here, so its pid names only its group, and the group exists
        # only while a member does.
        self.signal(signal.SIGKILL)
        self._closed = True
        _live_groups.discard(self.pid)
        if self.marker and not own_pids:  # then what left the group (setsid, double fork)
            self.escaped = sandbox.kill_escaped(self.marker, pgid=self.pid, userns=self.userns)
        elif own_pids:
            sandbox.reap_session(self.pid)
        for fd in (self._userns_fd, self._mntns_fd):
            if fd >= 0:
                os.close(fd)
        self._userns_fd = self._mntns_fd = -1
        if self._prepared is not None:
            self._prepared.cleanup()
        self._transport.close()

    def refusals(self, cwd: Path) -> list[Refused]:
        """What the sandbox probably refused, read from the output (see sandbox.refusals),
        and what it created where it must not (removed once the command has ended)."""
        hidden = [os.fsdecode(p) for p in self._prepared.sockets] if self._prepared is not None else []
        found = sandbox.refusals(self.out.text() + "\n" + self.err.text(), self.confinement, cwd, hidden,
                                 " ".join(self.argv), exit_failed=self.returncode not in (0, None))
        planted = list(self._prepared.plants) if self._prepared is not None else []
        return planted + found  # what was undone first: it matters most

    def sweep(self) -> list[str]:
        """While it runs: take away what it planted where it must not (see Prepared.sweep)."""
        return self._prepared.sweep() if self._prepared is not None and not self._closed else []

    def withhold_new(self, limits: Limits) -> int:
        """While it runs (a background task, or a command in the foreground): cover in its
        sandbox the secret files that appeared (or were replaced) since it started, and remember
        their values (see `secret_values`). How many were covered now."""
        conf = self.confinement
        if self._closed or self._mntns_fd < 0 or self._userns_fd < 0 or conf.withheld_from is None:
            return 0
        found = withhold.look(conf.withheld_from, conf.secret_patterns, limits)
        new = [f for f in found.files if f not in self._covered]
        if not new:
            return 0
        withhold.expose(new, limits.sandbox_secret_value_bytes)  # remembered, whatever becomes of the files
        try:
            sandbox.cover_running((self._userns_fd, self._mntns_fd), new)
        except (OSError, subprocess.SubprocessError, sandbox.SandboxError):
            return 0  # the next look tries again; what it prints is cleaned of their values meanwhile
        self._covered.update(new)
        return len(new)

    @property
    def programs_changed(self) -> list[str]:
        """Programs on PATH inside a writable root that it created or changed."""
        return list(self._prepared.programs_changed) if self._prepared is not None else []


def shell_argv(command: str) -> list[str]:
    """bash -c, or sh -c where bash is missing: the shell found outside every writable root."""

    return [programs.shell(), "-c", command]


def command_env() -> dict[str, str]:
    """The user's environment without nanohermes's keys and other credentials (unless
    `shell_env.keep` lists them: a command the model writes must not be able to print them)
    and without nanohermes's own venv in front of the person's programs (`ownvenv`), with
    pagers off and no colour requested."""
    # only a command run inside nanohermes's own venv
    from nanohermes.guard.ownvenv import without_own_venv
    env = without_own_venv(child_env(), programs.writable_roots())
    for key in ("FORCE_COLOR", "CLICOLOR_FORCE"):
        env.pop(key, None)
    env.update(PAGER="cat", GIT_PAGER="cat", NO_COLOR="1", GIT_TERMINAL_PROMPT="0")
    return env


def confinement_of(ctx: ToolContext, attempt: Attempt) -> sandbox.Confinement:
    """The confinement the gate granted the call's attempt; a tool run outside the gate (a
    person's own command in the REPL) gets what an unasked call gets: workspace-write, never none."""
    if attempt.confinement is not None:
        return attempt.confinement
    return sandbox.confine("workspace-write", workspace=ctx.workspace, config=ctx.config, limits=ctx.limits)


def read_only_of(ctx: ToolContext) -> sandbox.Confinement:
    """The read-only confinement for a call's reads (the git tools' status, log and diff),
    whatever the call itself was granted; none only when the sandbox is turned off. What read
    rules cover stays readable to git here (it could not tell an unchanged file otherwise): the
    git tools leave those paths out of what they show, by pathspec."""
    return sandbox.confine("read-only", workspace=ctx.workspace, config=ctx.config, limits=ctx.limits, ruled=False)


def secret_values(conf: sandbox.Confinement, limits: Limits) -> frozenset[str]:
    """The values of the workspace's secret files (as they are now, or were when seen before)
    that what a confined call's processes printed must not show the model: a secret file that
    appeared, or was replaced, after the command started was not covered in its sandbox from
    the start (those are `withhold.expose`d). Empty for a call that may read them (approved, or
    unconfined)."""
    if conf.policy == "off" or conf.withheld_from is None or not conf.secret_patterns:
        return frozenset()
    found = withhold.look(conf.withheld_from, conf.secret_patterns, limits)
    # Those not withheld from its start were within its reach (see `withhold.expose`).
    covered = set(conf.hidden)
    withhold.expose([f for f in found.files if f not in covered], limits.sandbox_secret_value_bytes)
    return withhold.values(found.files, limits.sandbox_secret_value_bytes)


def without_values(texts: list[str], values: frozenset[str]) -> tuple[list[str], str]:
    """`texts` with every one of `values` taken out, and the note that says so ("" if none was)."""
    if not values:
        return texts, ""
    out, n = [], 0
    for text in texts:
        cleaned, k = withhold.redact_values(text, values)
        out.append(cleaned)
        n += k
    if not n:
        return out, ""
    return out, (f"note: {n} value{'s' if n != 1 else ''} of the workspace's secret files (permissions.secret_files) "
                 f"{'were' if n != 1 else 'was'} replaced by {withhold.WITHHELD} in this output: commands no person "
                 "approved may not read them (a person's yes at the prompt lets a command read one)")


async def _stop_start(marker: str, started: tuple[asyncio.SubprocessTransport, _Drain]) -> None:
    """End a start that was cancelled: its group and its escapees killed, then its transport
    closed (once the shell is reaped: closing a live one reaps it behind the watcher's back)."""
    transport, drain = started
    pid = transport.get_pid()
    _signal_group(pid, signal.SIGKILL)
    sandbox.kill_escaped(marker, pgid=pid)
    await _wait(drain.exited, _REAP_SECS)
    transport.close()


async def spawn(argv: list[str], *, cwd: Path, env: dict[str, str], out_cap: int, err_cap: int,
                confinement: sandbox.Confinement, on_data: OnData | None = None) -> Process:
    """Start `argv` in a new session with stdin at /dev/null and both pipes drained, in
    `confinement` (which the caller must choose: there is no default).

    Raises OSError (FileNotFoundError when the program is missing) if it cannot start, and
    sandbox.SandboxError when the sandbox cannot be set up (the command does not run).
    """
    at_exit(_kill_live_groups)
    sandbox.become_subreaper()
    conf = confinement
    prepared = sandbox.prepare(conf)
    marker = sandbox.new_marker()
    env = prepared.env(env)
    env[sandbox.MARKER] = marker
    loop = asyncio.get_running_loop()
    out, err = Capture(out_cap), Capture(err_cap)
    try:
        transport, drain = await programs.started(loop.subprocess_exec(
            lambda: _Drain(out, err, on_data), *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True, preexec_fn=prepared.preexec(argv, env),
        ), functools.partial(_stop_start, marker))
    except subprocess.SubprocessError as e:  # the child failed while entering the sandbox
        prepared.cleanup()
        raise sandbox.SandboxError(f"the sandbox could not be set up ({e})") from None
    except BaseException:
        prepared.cleanup()
        raise
    prepared.release_ruleset()  # the child has it; the temp folder lives until the command ends
    pid = transport.get_pid()
    _live_groups.add(pid)
    sandbox.note_session(pid)
    # The child has exec'd by now, so it is already in its own user namespace (if any).
    held = sandbox.hold_user_namespace(pid) if conf.namespaces and prepared.active else None
    userns, userns_fd = held if held is not None else (None, -1)
    mntns_fd = -1
    if conf.namespaces and conf.withheld_from is not None and held is not None:
        with contextlib.suppress(OSError):
            mntns_fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    return Process(pid=pid, out=out, err=err, _transport=transport, _drain=drain, confinement=conf, marker=marker,
                   argv=tuple(argv), userns=userns, _userns_fd=userns_fd, _prepared=prepared, _mntns_fd=mntns_fd,
                   _covered=set(conf.hidden))


@dataclass(frozen=True, kw_only=True)
class Finished:
    """How a foreground command ended, with what it wrote."""

    exit_code: int | None
    out: Capture
    err: Capture
    timed_out: float | None  # the timeout that fired, in seconds
    pipes_held: bool  # leftover processes held the pipes after the shell exited and were killed
    elapsed: float
    escaped: int = 0  # processes that had left the group (setsid, double fork), killed at the end
    sandbox: str = "off"  # the policy it ran under
    refused: tuple[Refused, ...] = ()  # what the sandbox probably refused
    programs: tuple[str, ...] = ()  # programs on PATH it created or changed


async def run_capped(argv: list[str], *, cwd: Path, env: dict[str, str], limits: Limits, timeout: float,
                     out_cap: int, err_cap: int, confinement: sandbox.Confinement,
                     on_data: OnData | None = None) -> Finished:
    """Run to completion: kill the group at `timeout`, never hang on inherited pipes, and
    leave nothing running behind, also when cancelled."""
    proc = await spawn(argv, cwd=cwd, env=env, out_cap=out_cap, err_cap=err_cap, on_data=on_data,
                       confinement=confinement)
    try:
        timed_out = None
        if not await _wait_covering(proc, timeout, limits):
            timed_out = timeout
            await proc.stop(limits.command_kill_grace_secs)
        held = await proc.settle(limits.command_pipe_grace_secs)
    finally:
        if not proc.exited:  # cancelled (Ctrl-C): kill, and let asyncio's child watcher reap it
            proc.signal(signal.SIGKILL)
            # Closing a live shell's transport polls it, and reaping it there makes the
            # watcher log "Unknown child process pid N" onto the screen.
            with contextlib.suppress(asyncio.CancelledError):
                await proc.wait(_REAP_SECS)
        proc.close()
    return Finished(exit_code=proc.returncode, out=proc.out, err=proc.err, timed_out=timed_out, pipes_held=held,
                    elapsed=time.monotonic() - proc.started, escaped=proc.escaped, sandbox=proc.confinement.policy,
                    refused=tuple(listed(proc.refusals(cwd), limits.sandbox_refusals_listed)),
                    programs=tuple(proc.programs_changed))


COVER_SECS = 1.0  # how often a running command's sandbox looks for secret files that appeared


async def _wait_covering(proc: Process, timeout: float, limits: Limits) -> bool:
    """Wait for the command until `timeout`; True when it exited. Every `COVER_SECS` meanwhile,
    a secret file that appeared in the workspace is covered in its sandbox (as a background
    task's is), so a long command reads one only in the moment before the next look."""
    if proc._mntns_fd < 0:
        return await proc.wait(timeout)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return proc.exited
        if await proc.wait(min(left, COVER_SECS)):
            return True
        await asyncio.to_thread(proc.withhold_new, limits)


# -- presenting output ---------------------------------------------------------------------

def secs(value: float) -> str:
    return f"{int(value)}s" if value == int(value) else f"{value:.1f}s"


def describe_exit(code: int | None, timed_out: float | None = None) -> str:
    if timed_out is not None:
        return f"killed (timed out after {secs(timed_out)})"
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return str(code)


def shares(lengths: list[int], budget: int) -> list[int]:
    """Split `budget` among sections: short ones whole, the rest evenly (water-filling),
    so a long stdout never pushes stderr out."""
    out = [0] * len(lengths)
    left, count = max(0, budget), len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        give = min(lengths[i], left // count)
        out[i] = give
        left -= give
        count -= 1
    return out


def cut_middle(text: str, keep: int) -> str:
    """Keep the first 3/4 and the last 1/4 of `keep` chars, with an exact note between."""
    if len(text) <= keep:
        return text
    head = keep * 3 // 4
    tail = keep - head
    return f"{text[:head]}\n… {len(text) - keep} chars omitted …\n{text[len(text) - tail:] if tail else ''}"


def listed(refused: list[Refused], limit: int) -> list[Refused]:
    """The first `limit` refusals, and how many more there were."""
    if len(refused) <= limit:
        return refused
    more = len(refused) - limit
    return [*refused[:max(0, limit)], Refused("more", str(more), str(limit))]


def refusal_note(policy: str, refused: Sequence[Refused]) -> str:
    """What the sandbox refused and what to do about it, for the model."""
    where = ("it may write only its temporary folder ($TMPDIR)" if policy == "read-only" else
             "it may write the workspace, $TMPDIR and sandbox.writable_roots, but not git's config and hooks or "
             ".nanohermes/")
    where += ("; it has a loopback of its own but no other network, and sees neither other programs' sockets, "
              "nor secret files, nor nanohermes's own files")
    said = ", ".join(map(str, refused))
    if all(r.kind == "secret" for r in refused):
        return (f"note: the OS sandbox ({policy}) refused {said}: this line ran sandboxed because no person "
                "approved it, and the workspace's secret files are withheld from it (reads fail with \"Permission "
                "denied\"). Reading one needs a person's approval at the prompt; otherwise do without it")
    return (f"note: the OS sandbox ({policy}) refused {said}: this line ran sandboxed because no person "
            f"approved it, and {where}. What lets it through: {sandbox.remedies(refused)}. Otherwise change the "
            "approach (write inside the workspace, or use the file tools)")


def programs_note(paths: tuple[str, ...] | list[str]) -> str:
    return (f"note: this created or changed programs in a folder on PATH: {', '.join(paths)}. Commands find them "
            "by name there; before a person approves a command (which runs outside the sandbox), they are told")


def strip_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def format_command(fin: Finished, limits: Limits, secrets: frozenset[str] = frozenset()) -> str:
    """The run_command result: exit code, stdout, stderr, then short notes with exact counts;
    `secrets` (values the output must not show) taken out before anything is cut."""
    notes: list[str] = []
    for label, cap in (("stdout", fin.out), ("stderr", fin.err)):
        if cap.dropped:
            notes.append(f"note: {label} was {cap.total} bytes; the first {len(cap.data)} and the last {cap.tail_len} "
                         f"were kept ({cap.dropped} bytes dropped where marked); filter it (grep, head, tail) or "
                         f"redirect it to a file and read that")
    if fin.escaped:
        notes.append(f"note: {fin.escaped} process{'es' if fin.escaped != 1 else ''} the command started outside its "
                     f"process group (setsid, double fork) {'were' if fin.escaped != 1 else 'was'} still running and "
                     f"killed when it ended; use background=true for servers and other long-running processes")
    if fin.refused:
        notes.append(refusal_note(fin.sandbox, fin.refused))
    if fin.programs:
        notes.append(programs_note(fin.programs))
    if fin.pipes_held:
        notes.append(f"note: processes the command left running still held its output "
                     f"{secs(limits.command_pipe_grace_secs)} after it exited and were killed; "
                     f"use background=true for servers and other long-running processes")
    head = f"exit code: {describe_exit(fin.exit_code, fin.timed_out)}\n\nstdout:\n"
    mid = "\n\nstderr:\n"
    tail = "".join("\n\n" + n for n in notes)
    texts, withheld_note = without_values([strip_newline(fin.out.text()), strip_newline(fin.err.text())], secrets)
    if withheld_note:
        tail += "\n\n" + withheld_note
    budget = limits.max_output - len(head) - len(mid) - len(tail) - 2 * _MARKER_CHARS
    out, err = (cut_middle(t, n) if t else "(empty)" for t, n in zip(texts, shares([len(t) for t in texts], budget), strict=True))
    return head + out + mid + err + tail
