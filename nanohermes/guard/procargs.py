"""nanohermes's command line and environment as other processes see them (`/proc/PID/cmdline`,
`ps`, `/proc/PID/environ`).

The kernel shows the bytes of the argument area of the process's memory, whatever the program
did with its own copy of them: a key given as `--api-key KEY` would be there, for every
process on the machine, and for every command nanohermes runs, for as long as nanohermes runs.
`hide_secret_values` overwrites such values there once, early in start-up (only when such an
option was given: a start without one reads nothing); `area` says where the area is, so the
sandbox's init, a copy of nanohermes in a command's own PID namespace, shows a name of its
own instead of nanohermes's arguments. The environment it started with is shown the same way
(to the person's own processes: an approved command reads its parent's), and Python keeps its
own copy of it (`os.environ`): `hide_env_values` overwrites there the values of the variables
that hold nanohermes's keys, once the config has named them.
"""

from __future__ import annotations

import functools
import os

# Options whose value is a secret, in every spelling the command line takes them.
SECRET_OPTIONS = ("--api-key",)
HIDDEN = ord("*")


def given(argv: list[str]) -> bool:
    """Whether `argv` holds one of SECRET_OPTIONS (cheap: no file is read)."""
    return any(a.partition("=")[0] in SECRET_OPTIONS for a in argv if a.startswith("--"))


def secret_spans(raw: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each secret value in a NUL-separated argument area: the word after
    an option of SECRET_OPTIONS, or what follows its `=`."""
    spans: list[tuple[int, int]] = []
    options = tuple(o.encode() for o in SECRET_OPTIONS)
    words = raw.split(b"\0")
    at = 0
    for i, word in enumerate(words):
        name, eq, value = word.partition(b"=")
        if name in options:
            if eq:
                spans.append((at + len(name) + 1, len(value)))
            elif i + 1 < len(words):
                spans.append((at + len(word) + 1, len(words[i + 1])))
        at += len(word) + 1
    return [s for s in spans if s[1]]


@functools.cache
def area() -> tuple[int, int] | None:
    """(start, end) of this process's argument area in its memory, or None where the kernel
    does not say (not Linux)."""
    return _stat_span(45)  # arg_start, arg_end: fields 48 and 49 of stat(5)


def _stat_span(at: int) -> tuple[int, int] | None:
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return int(fields[at]), int(fields[at + 1])
    except (OSError, IndexError, ValueError):
        return None


def hide_env_values(names: tuple[str, ...] | list[str] | frozenset[str]) -> int:
    """Overwrite with `*` the values of the variables `names` in the environment this process
    started with, where `/proc/PID/environ` shows it; how many were. `os.environ`, Python's
    copy, keeps them (nanohermes reads its key there); C's `getenv` sees the stars."""
    wanted = {os.fsencode(n) for n in names if n}
    where = _stat_span(47)  # env_start, env_end: fields 50 and 51 of stat(5)
    if not wanted or where is None or where[1] <= where[0]:
        return 0
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read(where[1] - where[0])
    except OSError:
        return 0
    pieces: list[tuple[int, bytes]] = []
    at = 0
    for entry in raw.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if eq and value and name in wanted and value.strip(bytes([HIDDEN])):
            pieces.append((where[0] + at + len(name) + 1, bytes([HIDDEN]) * len(value)))
        at += len(entry) + 1
    if pieces:
        overwrite(pieces)
    return len(pieces)


def hide_secret_values() -> int:
    """Overwrite every secret value in this process's argument area with `*`; how many were.
    Its length stays (the other words stay where they are); `sys.argv` is untouched."""
    where = area()
    if where is None:
        return 0
    try:
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read(where[1] - where[0])
    except OSError:
        return 0
    spans = secret_spans(raw)
    if spans:
        overwrite([(where[0] + at, bytes([HIDDEN]) * n) for at, n in spans])
    return len(spans)


def overwrite(pieces: list[tuple[int, bytes]]) -> None:
    """Write each piece at its address in this process's memory: through /proc/self/mem,
    which needs no ctypes, or with ctypes where that file may not be written."""
    try:
        fd = os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC)
        try:
            for address, data in pieces:
                os.pwrite(fd, data, address)
        finally:
            os.close(fd)
    except OSError:
        # ctypes (a few ms): only where /proc/self/mem may not be written
        import ctypes

        for address, data in pieces:
            ctypes.memmove(address, data, len(data))
