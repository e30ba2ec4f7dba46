"""The Python backend: the matcher, the threaded reader and the scan in path order that both
backends end with (ripgrep only narrows the files it reads)."""

from __future__ import annotations

import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from nanohermes.common.budget import MiB, Limits
from nanohermes.tools.base import ToolError
from nanohermes.tools.search.walk import Capped, iter_walk

# -- matching ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Matcher:
    """Finds matching lines in a whole file's text without splitting it into lines."""

    pattern: str
    regex: bool
    case_insensitive: bool
    rx: re.Pattern[str] | None = field(default=None)

    @classmethod
    def build(cls, pattern: str, regex: bool, case_insensitive: bool) -> Matcher:
        if "\n" in pattern or "\r" in pattern:
            raise ToolError("pattern must be a single line; grep matches within one line")
        rx: re.Pattern[str] | None = None
        if regex or case_insensitive:
            flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
            try:
                rx = re.compile(pattern if regex else re.escape(pattern), flags)
            except re.error as e:
                raise ToolError(f"invalid regex {pattern!r}: {e}; pass regex=false to search for the literal text") from None
        return cls(pattern, regex, case_insensitive, rx)

    def quick_reject(self, data: bytes | bytearray, end: int | None = None) -> bool:
        """True when the raw bytes (`data[:end]`) certainly hold no match (literals only)."""
        end = len(data) if end is None else end
        if self.rx is None:
            try:
                return data.find(self.pattern.encode("utf-8"), 0, end) < 0  # no copy of a reader's buffer
            except UnicodeEncodeError:  # a lone surrogate: let the full search decide
                return False
        if self.regex or not self.pattern.isascii():
            return False
        head = data if end == len(data) else data[:end]
        if not head.isascii():
            return False
        # Both ASCII: case folding is plain lowering, done once for the whole file at C speed.
        return self.pattern.lower().encode() not in head.lower()

    def _find(self, text: str, pos: int) -> tuple[int, int]:
        if self.rx is None:
            s = text.find(self.pattern, pos)
            return s, s + len(self.pattern)
        m = self.rx.search(text, pos)
        return (m.start(), m.end()) if m else (-1, -1)

    def lines(self, text: str, limit: int) -> list[tuple[int, str]]:
        """Up to `limit` (line number, line) pairs, in order, without a per-line loop."""
        out: list[tuple[int, str]] = []
        n = len(text)
        pos, lineno, counted = 0, 1, 0
        while len(out) < limit and pos <= n:
            s, e = self._find(text, pos)
            if s < 0 or (s == n and (n == 0 or text.endswith("\n"))):
                break  # nothing more, or only the empty "line" after the final newline
            ls = text.rfind("\n", 0, s) + 1
            le = text.find("\n", s)
            le = n if le < 0 else le
            if e > le and self.rx is not None and self.rx.search(text, ls, le) is None:
                pos = le + 1  # the match ran across a newline; this line alone has none
                continue
            lineno += text.count("\n", counted, ls)
            counted = ls
            line = text[ls:le]
            out.append((lineno, line[:-1] if line.endswith("\r") else line))
            pos = le + 1
        return out

    def has_match(self, text: str) -> bool:
        return bool(self.lines(text, 1))

    def file_has_match(self, path: str, chunk_bytes: int = 4 * MiB) -> bool:
        """Stream a big file in line-aligned chunks; memory stays bounded."""
        carry = b""
        try:
            with open(path, "rb") as f:
                while True:
                    chunk = f.read(chunk_bytes)
                    data = carry + chunk
                    if not chunk:
                        return bool(data) and self.has_match(data.decode("utf-8", "replace"))
                    cut = data.rfind(b"\n") + 1
                    if cut == 0 and len(data) < 2 * chunk_bytes:
                        carry = data  # one long line so far: keep reading (bounded below)
                        continue
                    cut = cut or len(data)
                    if self.has_match(data[:cut].decode("utf-8", "replace")):
                        return True
                    carry = data[cut:]
        except OSError:
            return False


def _read_upto(path: str, max_bytes: int) -> bytes | None:
    """The file's bytes, or None when it is larger than `max_bytes`."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_BINARY", 0))
    try:
        return _read_rest(fd, b"", max_bytes)
    finally:
        os.close(fd)


def _read_rest(fd: int, head: bytes, max_bytes: int) -> bytes | None:
    """`head` (what was read of `fd` so far) and the rest of the file, or None when it is
    larger than `max_bytes`. Sized from fstat: usually one read."""
    size = os.fstat(fd).st_size
    if size > max_bytes:
        return None
    chunks = [head, os.read(fd, max(size - len(head), 0) + 1)]
    got = len(head) + len(chunks[1])
    while got > size and got <= max_bytes:  # it grew since the stat: read on to the limit
        more = os.read(fd, max_bytes + 1 - got)
        if not more:
            break
        chunks.append(more)
        got += len(more)
    return None if got > max_bytes else b"".join(chunks)


BUFFER_BYTES = 256 * 1024  # a reader's buffer: most files are read into it whole, in one call
_buffers = threading.local()


def _read_in(dir_fd: int, name: str, max_bytes: int, reject: Callable[[bytes | bytearray, int], bool] | None) -> Read:
    """One file of the folder open as `dir_fd`: read into this thread's buffer, so a file
    `reject` drops is never copied out of it."""
    buf: bytearray | None = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = bytearray(BUFFER_BYTES)
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_BINARY", 0), dir_fd=dir_fd)
    try:
        got = os.readv(fd, [buf])
        if got == len(buf):  # perhaps more than the buffer holds: read whole, or not at all
            data = _read_rest(fd, bytes(buf), max_bytes)
            return REJECTED if data is not None and reject is not None and reject(data, len(data)) else data
    finally:
        os.close(fd)
    if got > max_bytes:
        return None
    if reject is not None and reject(buf, got):
        return REJECTED
    return bytes(memoryview(buf)[:got])


# What a reader hands back for a file: its bytes; None when it is larger than the limit; the
# error that kept it from being read; or REJECTED, when it was read and certainly holds no match
# (its bytes are dropped in the reader: the thread that searches the rest does not see them).
REJECTED = False
Read = bytes | OSError | None | bool


def _read_many(base: str, rels: list[str], max_bytes: int,
               reject: Callable[[bytes | bytearray, int], bool] | None) -> list[Read]:
    """Each file of `rels` (in a row, most of them in few folders): each folder is opened
    once, and its files opened from it, not by their whole path."""
    out: list[Read] = []
    folder, dir_fd = None, -1
    try:
        for rel in rels:
            parent, _, name = rel.rpartition("/")
            if parent != folder:
                if dir_fd >= 0:
                    os.close(dir_fd)
                folder, dir_fd = parent, -1
                try:
                    dir_fd = os.open(base + parent if parent else base,
                                     os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError as e:
                    out.append(e)
                    continue
            elif dir_fd < 0:
                out.append(OSError(f"cannot open the folder of {rel}"))
                continue
            try:
                out.append(_read_in(dir_fd, name, max_bytes, reject))
            except OSError as e:
                out.append(e)
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)
    return out


def _read_ahead(rels: Iterable[str], base: str, max_bytes: int,
                reject: Callable[[bytes | bytearray, int], bool] | None = None,
                batch: int = 32, depth: int = 4, workers: int = 2) -> Iterator[tuple[str, Read]]:
    """Read the next files in threads while the caller searches this one; order is kept.
    `reject(data)`: the cheap test a file certainly has no match by, made in the reader.

    Reading is mostly system calls that release the GIL, so a few threads keep the disk
    cache busy. Each task reads `batch` files in a row, and drops those `reject` says hold
    no match, so most files never cross to the searching thread: a task per file cost more
    in hand-offs between threads than the reads themselves once the files are cached. At
    most `depth` tasks are in flight; leaving early waits only for those.
    """
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grep-read") as pool:
        queue: deque[tuple[list[str], Future[list[Read]]]] = deque()
        group: list[str] = []
        for rel in rels:
            group.append(rel)
            if len(group) < batch:
                continue
            queue.append((group, pool.submit(_read_many, base, group, max_bytes, reject)))
            group = []
            if len(queue) >= depth:
                names, done = queue.popleft()
                yield from zip(names, done.result(), strict=True)
        if group:
            queue.append((group, pool.submit(_read_many, base, group, max_bytes, reject)))
        while queue:
            names, done = queue.popleft()
            yield from zip(names, done.result(), strict=True)


@dataclass
class Scan:
    hits: list[tuple[str, int, str]] = field(default_factory=list)  # (rel, line number, text)
    large: int = 0
    binary: int = 0
    searched: int = 0  # files taken from the input
    stopped: bool = False  # `hopeless` ended it before the input or the match cap did


def scan(root: Path, rels: Iterable[str], matcher: Matcher, limits: Limits, known: bool,
         hopeless: Callable[[int, int], bool] | None = None) -> Scan:
    """Read `rels` in the given (path) order until one hit more than the cap is found.

    `known`: each file is already known to contain a match (ripgrep said so), so a big or
    binary one is counted without being searched again. `hopeless(files, hits)`, asked
    before each file, stops the scan early (`stopped`).
    """
    res = Scan()
    need = limits.grep_matches + 1
    max_bytes = limits.grep_file_max_bytes
    base = os.path.join(root, "")
    for rel, data in _read_ahead(rels, base, max_bytes, None if known else matcher.quick_reject):
        if hopeless is not None and hopeless(res.searched, len(res.hits)):
            res.stopped = True
            break
        res.searched += 1
        if data is REJECTED or isinstance(data, OSError):
            continue
        if data is None:
            if known or matcher.file_has_match(base + rel):
                res.large += 1
            continue
        assert isinstance(data, bytes)
        text = data.decode("utf-8", "replace")
        if data.find(b"\x00", 0, limits.binary_sniff_bytes) >= 0:
            if known or matcher.has_match(text):
                res.binary += 1
            continue
        for lineno, line in matcher.lines(text, need - len(res.hits)):
            res.hits.append((rel, lineno, line))
        if len(res.hits) >= need:
            break
    return res


def scan_walk(root: Path, dirs: frozenset[str], keep: Callable[[str], bool], matcher: Matcher, lim: Limits,
               cap: int, hopeless: Callable[[int, int], bool] | None = None) -> tuple[Scan, bool]:
    """Walk and search together, stopping at the match cap or after `cap` walked files (or
    when `hopeless` says so: then the walk counts as cut short)."""
    walk = Capped(iter_walk(root, dirs), cap)
    res = scan(root, (r for r in walk if keep(r)), matcher, lim, False, hopeless)
    return res, walk.truncated or res.stopped
