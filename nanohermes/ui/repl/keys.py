"""The terminal while the person waits on a foreground task (a turn, a `!command`): its input
side (no echo, type-ahead waiting in the kernel's buffer), the keys read as they come (Esc
interrupts), what was typed ahead, and running the task there under Ctrl-C
(`Foreground.run`, the one place that does).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import signal
import struct
import termios
from collections.abc import Iterator
from typing import Any

ESC_WAIT_SECS = 0.1  # an Esc with no key after it within this is the Esc key itself
_ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|O.|.)", re.S)


def split_typeahead(raw: str) -> tuple[list[str], str]:
    """Keys typed during a turn -> (finished lines to send, the unfinished rest).

    Applies the line editing the terminal would have done (backspace, Ctrl-U, Ctrl-W) and
    drops escape sequences (arrow keys) and other control characters.
    """
    raw = _ESCAPES.sub("", raw)
    lines: list[str] = []
    cur: list[str] = []
    for ch in raw:
        if ch in "\r\n":
            if "".join(cur).strip():
                lines.append("".join(cur))
            cur = []
        elif ch in "\x7f\b":
            if cur:
                cur.pop()
        elif ch == "\x15":  # Ctrl-U
            cur = []
        elif ch == "\x17":  # Ctrl-W
            while cur and cur[-1] == " ":
                cur.pop()
            while cur and cur[-1] != " ":
                cur.pop()
        elif ch == "\t" or ch >= " ":
            cur.append(ch)
    return lines, "".join(cur)


class Terminal:
    """The controlling terminal's input side during a turn (POSIX; a no-op elsewhere)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.held = False  # a question owns the terminal: the mode it set stays until it is answered
        self._later: list[Any] | None = None  # the mode to put back once the question is answered

    def release(self) -> None:
        """The question is answered: a turn that ended meanwhile gets its mode put back now."""
        self.held = False
        later, self._later = self._later, None
        if later is not None and self.fd is not None:
            import termios  # POSIX only, as in turn_mode

            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd, termios.TCSANOW, later)

    @contextlib.contextmanager
    def turn_mode(self) -> Iterator[None]:
        """No echo and no line editing (type-ahead waits unseen in the kernel buffer), but
        Ctrl-C still raises SIGINT. A turn that ends while a question holds the terminal (a
        background sub-agent's) leaves the question's raw mode alone: putting the line mode
        back under it would echo the person's keys and keep them from the question."""
        fd = self.fd
        try:
            old = termios.tcgetattr(fd) if fd is not None else None
        except Exception:
            old = None
        if fd is None or old is None:
            yield
            return
        new = list(old)
        new[3] &= ~(termios.ECHO | termios.ICANON)
        new[3] |= termios.ISIG | termios.NOFLSH  # NOFLSH: Ctrl-C keeps what was typed ahead
        new[6] = list(old[6])
        new[6][termios.VMIN] = 1
        new[6][termios.VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, new)
        try:
            yield
        finally:
            if self.held:
                self._later = old
            else:
                termios.tcsetattr(fd, termios.TCSANOW, old)

    def pending(self) -> int:
        """Bytes typed and not yet read."""
        if self.fd is None:
            return 0
        try:
            count: int = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            return count
        except Exception:
            return 0

    def drain(self) -> str:
        n = self.pending()
        if n <= 0 or self.fd is None:
            return ""
        try:
            return os.read(self.fd, n).decode("utf-8", errors="replace")
        except OSError:
            return ""


class Foreground:
    """The task the person waits on (`task`, while it runs) and the keys they type meanwhile
    (`typed_raw`: sent or offered when it ends). Ctrl-C, and Esc alone or twice, interrupt it."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self.task: asyncio.Task[Any] | None = None
        self.typed_raw = ""
        self._watching = False  # keys are read as they come (during a turn)
        self._esc: asyncio.TimerHandle | None = None  # an Esc just came: alone, unless a key follows

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def run(self, task: asyncio.Task[Any]) -> None:
        """Wait for `task` in the foreground: Ctrl-C (SIGINT) interrupts it, the terminal does
        not echo, keys are read as they come, and what was typed is kept in `typed_raw`."""
        loop = asyncio.get_running_loop()
        self.task = task
        sigint = True
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (NotImplementedError, RuntimeError, ValueError):
            sigint = False
        try:
            with self.terminal.turn_mode():
                self.watch_keys(True)
                try:
                    await asyncio.wait({task})
                finally:
                    self.watch_keys(False)
                if not self.terminal.held:  # what is typed now is the question's
                    self.typed_raw += self.terminal.drain()
        finally:
            self.task = None
            if sigint:
                loop.remove_signal_handler(signal.SIGINT)

    def interrupt(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            # Ctrl-C at an approval asked by a sub-agent: its own task stops too, before it
            # could carry on to its next model call.
            with contextlib.suppress(RuntimeError):
                current = asyncio.current_task()
                if current is not None and current is not self.task:
                    current.cancel()

    def pause(self) -> None:
        """A question takes the keys (an approval): what was typed ahead is kept, never an answer."""
        self.watch_keys(False)  # the prompt reads the keys now
        self.typed_raw += self.terminal.drain()
        self.terminal.held = True

    def resume(self) -> None:
        """The question is answered: keys are read as they come again while the task runs."""
        self.terminal.release()
        if self.running:
            self.watch_keys(True)

    def take(self) -> tuple[list[str], str]:
        """What was typed ahead, as finished lines and the unfinished rest; forgotten here."""
        lines, partial = split_typeahead(self.typed_raw)
        self.typed_raw = ""
        return lines, partial

    def typed_ahead(self) -> int:
        """Characters typed during the turn, to be sent (or offered) when it ends."""
        lines, partial = split_typeahead(self.typed_raw)
        return sum(len(line) + 1 for line in lines) + len(partial) + self.terminal.pending()

    # -- keys during a task ------------------------------------------------------------------
    def watch_keys(self, on: bool) -> None:
        """While a turn (or a `!command`) runs, keys are read as they come: Esc, alone or
        twice, interrupts it as Ctrl-C does; anything else is kept as typed-ahead text.
        An arrow key or Alt+key starts with Esc too, so a lone Esc is one that nothing
        follows within a moment."""
        fd = self.terminal.fd
        if fd is None:
            return
        loop = asyncio.get_running_loop()
        if on and not self._watching:
            try:
                loop.add_reader(fd, self._on_keys)
            except (NotImplementedError, RuntimeError, ValueError, OSError):
                return
            self._watching = True
        elif not on and self._watching:
            loop.remove_reader(fd)
            self._watching = False
            self._esc_wait(None)

    def _on_keys(self) -> None:
        assert self.terminal.fd is not None
        try:
            raw = os.read(self.terminal.fd, 4096)
        except OSError:
            raw = b""
        if not raw:  # the terminal is gone: nothing more to read (SIGHUP ends the session)
            self.watch_keys(False)
            return
        data = raw.decode("utf-8", errors="replace")
        self.typed_raw += data
        for ch in data:
            if self._esc is not None:  # the key after an Esc
                self._esc_wait(None)
                if ch == "\x1b":
                    self.interrupt()  # Esc Esc
                    return
            elif ch == "\x1b":
                self._esc_wait(asyncio.get_running_loop().call_later(ESC_WAIT_SECS, self._lone_esc))

    def _esc_wait(self, timer: asyncio.TimerHandle | None) -> None:
        if self._esc is not None:
            self._esc.cancel()
        self._esc = timer

    def _lone_esc(self) -> None:
        self._esc = None
        self.interrupt()
