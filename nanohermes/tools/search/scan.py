"""The Python backend: the matcher, the reader and the scan in path order that both backends
end with (ripgrep only narrows the files it reads)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nanohermes.common.budget import MiB, Limits
from nanohermes.tools.base import ToolError
from nanohermes.tools.search.walk import Capped, iter_walk

# -- matching ------------------------------------------------------------------------------

# The printable bytes from the most to the least common in source code and prose (counted
# over Python, C, JavaScript and Markdown files); a byte not listed is rarer than any listed.
_BY_FREQUENCY = (b" etsonirac\nd_lpuh/fm)(.g,*bS:Ey\"0kA=T1NRvICO-[]wL`2Px#'35j49;{}DM867FGBU\\X>VH\tKq&z<Y|!WQ+"
                 b"J?@Z$%^~")
_RANK = {b: i for i, b in enumerate(_BY_FREQUENCY)}
# ASCII letters that a case-insensitive regex also matches outside ASCII (the Kelvin sign,
# the long s, the dotted and dotless i): their absence from a file's bytes proves nothing.
_FOLDS_BEYOND_ASCII = frozenset(b"iks")


def _rare_probes(needle: bytes, case_insensitive: bool, most: int = 2) -> tuple[tuple[int, int], ...]:
    """The `most` rarest bytes of `needle`, each as (byte, its other case): a file holding
    neither form of one of them holds no match, which memchr finds out far faster than a
    search for the whole needle."""
    pairs: dict[int, tuple[int, int]] = {}
    for b in needle:
        if not case_insensitive:
            pairs[b] = (b, b)
        elif b not in _FOLDS_BEYOND_ASCII:
            pairs[b] = (b, bytes([b]).upper()[0])
    rarest = sorted(pairs, key=lambda b: -_RANK.get(b, len(_BY_FREQUENCY)))
    return tuple(pairs[b] for b in rarest[:most])


@dataclass(frozen=True)
class Matcher:
    """Finds matching lines in a whole file's text without splitting it into lines."""

    pattern: str
    regex: bool
    case_insensitive: bool
    rx: re.Pattern[str] | None = field(default=None)
    probes: tuple[tuple[int, int], ...] = ()  # for a literal: its rarest bytes (`_rare_probes`)

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
        probes: tuple[tuple[int, int], ...] = ()
        if not regex and (pattern.isascii() or not case_insensitive):
            try:
                probes = _rare_probes(pattern.lower().encode() if case_insensitive else pattern.encode(), case_insensitive)
            except UnicodeEncodeError:  # a lone surrogate: no bytes to look for
                pass
        return cls(pattern, regex, case_insensitive, rx, probes)

    def quick_reject(self, data: bytes | bytearray, end: int | None = None) -> bool:
        """True when the raw bytes (`data[:end]`) certainly hold no match (literals only)."""
        end = len(data) if end is None else end
        for b, other in self.probes:  # a byte of the literal absent in either case: no match
            if data.find(b, 0, end) < 0 and (other == b or data.find(other, 0, end) < 0):
                return True
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


BUFFER_BYTES = 256 * 1024  # the reader's buffer: most files are read into it whole, in one call


_OPEN_FILE = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_BINARY", 0)
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _read_in(dir_fd: int, name: str, into: list[bytearray], max_bytes: int,
             reject: Callable[[bytes | bytearray, int], bool] | None) -> Read:
    """One file of the folder open as `dir_fd`, read into the buffer `into` holds, so that
    a file `reject` drops is never copied out of it."""
    fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    try:
        got = os.readv(fd, into)
        buf = into[0]
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


# What the reader hands back for a file: its bytes; None when it is larger than the limit; the
# error that kept it from being read; or REJECTED, when it was read and certainly holds no match.
REJECTED = False
Read = bytes | OSError | None | bool


def _reads(rels: Iterable[str], base: str, max_bytes: int,
           reject: Callable[[bytes | bytearray, int], bool] | None = None) -> Iterator[tuple[str, Read]]:
    """Each file of `rels` (in path order: files of one folder come in a row), read in this
    thread. A folder is opened once and its files from it, not by their whole path.

    `reject(data, end)` is the cheap test a file certainly has no match by. No reader threads:
    once the files are in the page cache a read is a few microseconds of system calls, each
    of which hands the GIL over and back, and threads fighting over it cost more than reading
    in a row (measured: a quarter more CPU time, and no shorter wall time, on two cores).
    """
    into = [bytearray(BUFFER_BYTES)]
    folder, dir_fd = None, -1
    try:
        for rel in rels:
            parent, _, name = rel.rpartition("/")
            if parent != folder:
                if dir_fd >= 0:
                    os.close(dir_fd)
                folder, dir_fd = parent, -1
                try:
                    dir_fd = os.open(base + parent if parent else base, _OPEN_FOLDER)
                except OSError as e:
                    yield rel, e
                    continue
            elif dir_fd < 0:
                yield rel, OSError(f"cannot open the folder of {rel}")
                continue
            try:
                read = _read_in(dir_fd, name, into, max_bytes, reject)
            except OSError as e:
                read = e
            yield rel, read
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)


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
    for rel, data in _reads(rels, base, max_bytes, None if known else matcher.quick_reject):
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


def scan_walk(root: Path, dirs: frozenset[str], keep: Callable[[str], bool] | None, matcher: Matcher, lim: Limits,
              cap: int, hopeless: Callable[[int, int], bool] | None = None) -> tuple[Scan, bool]:
    """Walk and search together, stopping at the match cap or after `cap` walked files (or
    when `hopeless` says so: then the walk counts as cut short). `keep`: which walked files
    to search (None: all)."""
    walk = Capped(iter_walk(root, dirs), cap)
    res = scan(root, walk if keep is None else filter(keep, walk), matcher, lim, False, hopeless)
    return res, walk.truncated or res.stopped
