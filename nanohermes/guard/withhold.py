"""The workspace's secret files, as the OS sandbox withholds them from unasked commands.

Owns: the bounded look through the workspace for files whose names are on
`permissions.secret_files` (git-ignored ones included: a `.env` usually is), and for links
in it that name such a file (`cfg -> ../.env`, `key -> ~/.ssh/id_rsa`); and the per-folder
cache that makes the look cheap from one command to the next.

The cache keeps each folder's listing with the folder's inode and change time (ctime, which
no `touch -d` can set back). A folder whose change time is unchanged is not listed again:
adding, removing or renaming an entry changes it. A listing made within `_RACY_NS` of the
folder's last change is not trusted the next time (a change in the same clock tick would
not show). Links are resolved afresh on every look: where they lead can change elsewhere.
Folders named `.git` are not looked into (git's store holds no named secrets), nor are
linked folders (what is outside the workspace is not withheld).

The values in them (`values`): what a command nobody approved printed of one is taken out of
its result (`redact_values`), so a secret file that appears, or is replaced, while a
background task runs does not reach the model through its output even in the moment before
the sandbox covers it there. Every value seen is remembered for the life of the process: a
value the file no longer holds is still withheld. The values of a file that was within such a
command's reach (`expose`) are kept out of every result of a call no person approved
(`exposed`): the command may have copied the file where another tool reads it.

A file the workspace's repository tracks and git's own index records as unchanged (same
size, modification time and inode, older than the index, and content whose blob id is the
entry's) is not withheld: its content is in `.git/objects`, readable anyway, and withholding
it would break `git status` and `git diff`. The id is what a forged index entry cannot
match without knowing the content. The index is read here, as data: no git process runs
unconfined for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nanohermes.guard.secrets import name_matcher

if TYPE_CHECKING:
    from nanohermes.common.budget import Limits

_RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class Secrets:
    """What the look found: each secret file's real path with the (device, inode) it had,
    and why the list may be incomplete ("" when it is not)."""

    files: tuple[tuple[str, int, int], ...] = ()
    problem: str = ""


@dataclass
class _Folder:
    ident: tuple[int, int, int]  # (inode, ctime_ns, mtime_ns) when listed
    listed_ns: int
    entries: int
    secrets: list[tuple[str, int, int]] = field(default_factory=list)  # name, device, inode
    folders: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


_cache: dict[tuple[str, tuple[str, ...]], dict[str, _Folder]] = {}
_lock = threading.Lock()  # looks run in worker threads; the cache is shared


def look(workspace: Path, patterns: tuple[str, ...] | list[str], limits: Limits) -> Secrets:
    """The workspace's secret files, which a sandboxed command may not read, found within the
    sandbox's bounds of the look (`find`)."""
    return find(workspace, patterns, max_entries=limits.sandbox_secret_scan_entries,
                max_files=limits.sandbox_secret_files, max_secs=limits.sandbox_secret_scan_secs)


def find(workspace: Path, patterns: tuple[str, ...] | list[str], *, max_entries: int, max_files: int,
         max_secs: float) -> Secrets:
    """The workspace's secret files, looking at no more than `max_entries` files and folders
    for no longer than `max_secs`, and finding no more than `max_files`; past a bound the
    files found so far, with the bound's note as `problem`."""
    patterns = tuple(patterns)
    if not patterns:
        return Secrets()
    root = os.path.realpath(workspace)
    names = name_matcher(patterns)  # the one check of a name against the list
    with _lock:
        cache = _cache.setdefault((root, patterns), {})
        found = _look(root, names, cache, max_entries=max_entries, max_files=max_files, max_secs=max_secs)
        if not found.files:
            return found
        unchanged = _unchanged_tracked(root)
        return Secrets(files=tuple(f for f in found.files if not unchanged(f[0])), problem=found.problem)


def _look(root: str, names: re.Pattern[str], cache: dict[str, _Folder], *, max_entries: int, max_files: int,
          max_secs: float) -> Secrets:
    deadline = time.monotonic() + max_secs
    found: dict[str, tuple[str, int, int]] = {}
    seen = 0
    todo = [root]
    visited: set[str] = set()
    problem = ""
    while todo:
        folder = todo.pop()
        if time.monotonic() > deadline:
            problem = (f"the look for secret files in the workspace took over {max_secs:g}s "
                       "(limits.sandbox_secret_scan_secs)")
            break
        entry = _folder(folder, cache, names)
        if entry is None:
            continue
        visited.add(folder)
        seen += entry.entries
        if seen > max_entries:
            problem = (f"more than {max_entries} files and folders in the workspace to look through for secret "
                       "files (limits.sandbox_secret_scan_entries)")
            break
        for name, dev, ino in entry.secrets:
            path = os.path.join(folder, name)
            found.setdefault(path, (path, dev, ino))
        for name in entry.links:
            if hit := _link_target(os.path.join(folder, name), name, names):
                found.setdefault(hit[0], hit)
        if len(found) > max_files:
            problem = f"more than {max_files} secret files in the workspace (limits.sandbox_secret_files)"
            break
        todo += [os.path.join(folder, d) for d in entry.folders]
    if not problem:  # a whole look: folders it no longer reached leave the cache (which stays bounded)
        for gone in [f for f in cache if f not in visited]:
            del cache[gone]
    files = tuple(sorted(found.values()))[:max_files]
    return Secrets(files=files, problem=problem)


def _folder(folder: str, cache: dict[str, _Folder], names: re.Pattern[str]) -> _Folder | None:
    """The folder's listing, from the cache while the folder is unchanged."""
    try:
        st = os.lstat(folder)
    except OSError:
        cache.pop(folder, None)
        return None
    if not stat.S_ISDIR(st.st_mode):
        cache.pop(folder, None)
        return None
    ident = (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
    old = cache.get(folder)
    if old is not None and old.ident == ident and old.listed_ns - max(st.st_ctime_ns, st.st_mtime_ns) > _RACY_NS:
        return old
    now = time.time_ns()
    entry = _Folder(ident=ident, listed_ns=now, entries=0)
    try:
        with os.scandir(folder) as it:
            for e in it:
                entry.entries += 1
                try:
                    if e.is_symlink():
                        entry.links.append(e.name)
                    elif e.is_dir(follow_symlinks=False):
                        if e.name != ".git":
                            entry.folders.append(e.name)
                    elif names.match(e.name) and e.is_file(follow_symlinks=False):
                        s = e.stat(follow_symlinks=False)
                        entry.secrets.append((e.name, s.st_dev, s.st_ino))
                except OSError:
                    continue  # gone while listed: the folder's change time has changed too
    except OSError:
        cache.pop(folder, None)
        return None
    cache[folder] = entry
    return entry


def _link_target(path: str, name: str, names: re.Pattern[str]) -> tuple[str, int, int] | None:
    """The file a link leads to, when the link's name or the file's is on the list."""
    real = os.path.realpath(path)
    if not (names.match(name) or names.match(os.path.basename(real))):
        return None
    try:
        s = os.stat(real)
    except OSError:
        return None
    return (real, s.st_dev, s.st_ino) if stat.S_ISREG(s.st_mode) else None


# -- files git already holds -----------------------------------------------------------------

_Entry = tuple[int, int, int, bytes]  # an index entry's (mtime_ns, size, inode, object id)
_index_cache: dict[str, tuple[tuple[int, int, int, int], dict[str, _Entry], int]] = {}
# Files hashed once while unchanged: (path, inode, size, mtime_ns, ctime_ns) -> object id.
_hashed: dict[tuple[str, int, int, int, int], bytes] = {}


def _unchanged_tracked(root: str) -> Callable[[str], bool]:
    """A test: is this real path a file the repository at `root` tracks, unchanged since git
    recorded it? Only a repository whose `.git` is a folder of the workspace is read."""
    index = os.path.join(root, ".git", "index")
    try:
        ist = os.stat(index)
    except OSError:
        return lambda path: False
    ident = (ist.st_ino, ist.st_size, ist.st_mtime_ns, ist.st_ctime_ns)
    cached = _index_cache.get(root)
    if cached is None or cached[0] != ident:
        size = _hash_size(os.path.join(root, ".git", "config"))
        cached = (ident, _read_index(index, size), size)
        _index_cache[root] = cached
    entries, hash_size = cached[1], cached[2]

    def unchanged(path: str) -> bool:
        rel = os.path.relpath(path, root)
        if rel.startswith(".."):
            return False
        rec = entries.get(rel.replace(os.sep, "/"))
        if rec is None:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        # Racily clean (changed in the tick the index was written) counts as changed, as for git.
        if rec[:3] != (st.st_mtime_ns, st.st_size, st.st_ino & 0xFFFFFFFF) or st.st_mtime_ns >= ist.st_mtime_ns:
            return False
        # The index is writable to a sandboxed command, and the times can be guessed: only the
        # content's own id, which nobody can forge without knowing the content, clears it.
        return _object_id(path, st, hash_size) == rec[3]

    return unchanged


def _object_id(path: str, st: os.stat_result, hash_size: int) -> bytes:
    """git's blob id of the file's content (sha1, or sha256 for such a repository)."""
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if (known := _hashed.get(key)) is not None:
        return known

    h = hashlib.sha256() if hash_size == 32 else hashlib.sha1()
    h.update(b"blob %d\0" % st.st_size)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return b""
    if len(_hashed) > 10_000:
        _hashed.clear()
    _hashed[key] = h.digest()
    return _hashed[key]


def _hash_size(config: str) -> int:
    try:
        with open(config, encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return 20
    return 32 if re.search(r"^\s*objectformat\s*=\s*sha256\s*$", text, re.I | re.M) else 20


def _read_index(path: str, hash_size: int) -> dict[str, _Entry]:
    """path -> (mtime_ns, size, inode, object id) of each stage-0 entry of a git index (versions
    2-4); {} for anything else (a split index, a bad file): then nothing is exempt."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if len(data) < 12 or data[:4] != b"DIRC":
        return {}
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        return {}
    out: dict[str, _Entry] = {}
    pos, prev = 12, b""
    fixed = 40 + hash_size + 2
    try:
        for _ in range(count):
            start = pos
            (_, _, mt_s, mt_ns, _, ino, mode, _, _, size) = struct.unpack(">10I", data[pos:pos + 40])
            (flags,) = struct.unpack(">H", data[pos + 40 + hash_size:pos + fixed])
            pos += fixed
            if version >= 3 and flags & 0x4000:
                pos += 2
            if version == 4:
                strip, pos = _varint(data, pos)
                end = data.index(b"\0", pos)
                name = prev[:len(prev) - strip] + data[pos:end]
                pos = end + 1
            else:
                end = data.index(b"\0", pos)
                name = data[pos:end]
                pos = start + ((pos - start + len(name) + 8) & ~7)
            prev = name
            if (flags >> 12) & 3 == 0 and stat.S_ISREG(mode):
                oid = data[start + 40:start + 40 + hash_size]
                out[os.fsdecode(name)] = (mt_s * 1_000_000_000 + mt_ns, size, ino, oid)
    except (struct.error, ValueError, IndexError):
        return {}
    if data[pos:pos + 4] == b"link":  # a split index: most entries live in another file
        return {}
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (index version 4)."""
    c = data[pos]
    pos += 1
    value = c & 0x7F
    while c & 0x80:
        c = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (c & 0x7F)
    return value, pos


# -- the values in them ------------------------------------------------------------------------

WITHHELD = "[REDACTED]"
_MIN_TOKEN = 16  # a token this long, of letters and digits, is a key whatever names it
_MIN_NAMED = 6  # the value of a name that says it is a secret (DB_PASSWORD=hunter2x)
_ASSIGNED = re.compile(r"""^\s*(?:export\s+)?["']?([\w.-]+)["']?\s*[=:]\s*(.*?)\s*,?\s*$""")
_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-.~]{16,}")
_URL_PASSWORD = re.compile(r"://[^/@:\s]*:([^/@\s]+)@")
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH|SALT|DSN)$", re.I)
_read_values: dict[tuple[str, int, int, int, int], frozenset[str]] = {}
_seen: set[str] = set()  # every value found, for the life of the process
# The values of secret files a command no person approved could read before the sandbox
# withheld them (they appeared, or were replaced, while it ran): kept out of every result.
_exposed: set[str] = set()
_pattern: tuple[frozenset[str], re.Pattern[str] | None] = (frozenset(), None)


def values(files: tuple[tuple[str, int, int], ...] | list[tuple[str, int, int]], max_bytes: int) -> frozenset[str]:
    """The secret values in these files (as the look found them) and every one found before:
    each value assigned to a name that says it is a secret (`API_KEY=...`, `"password": ...`),
    each password in a URL, and each long token of letters and digits (a key's body, a PEM
    line). At most `max_bytes` of each file are read; a file is read again only once it changed."""
    with _lock:
        for path, _, _ in files:
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if key not in _read_values:
                if len(_read_values) > 10_000:
                    _read_values.clear()
                _read_values[key] = _file_values(path, max_bytes)
            _seen.update(_read_values[key])
        return frozenset(_seen)


def expose(files: tuple[tuple[str, int, int], ...] | list[tuple[str, int, int]], max_bytes: int) -> None:
    """These secret files were within reach of a command no person approved (they appeared, or
    were replaced, after its sandbox withheld the others): their values, and those found in
    them before, are kept out of every result of a call no person approved (`exposed`),
    whatever the command made of the files (a copy another tool reads, ...)."""
    if not files:
        return
    values(files, max_bytes)
    with _lock:
        for path, _, _ in files:
            for key, found in _read_values.items():
                if key[0] == path:
                    _exposed.update(found)


def exposed() -> frozenset[str]:
    """The values `expose` was told of, for the life of the process."""
    with _lock:
        return frozenset(_exposed)


def _file_values(path: str, max_bytes: int) -> frozenset[str]:
    try:
        with open(path, "rb") as f:
            text = f.read(max_bytes).decode("utf-8", "replace")
    except OSError:
        return frozenset()
    return frozenset(secret_values(text))


def secret_values(text: str) -> set[str]:
    """The values a secret file's text holds (see `values`)."""
    out: set[str] = set()
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "//", ";")):
            continue
        m = _ASSIGNED.match(line)
        if m:
            value = m.group(2).strip().strip("\"'")
            if _SECRET_NAME.search(m.group(1)) and len(value) >= _MIN_NAMED:
                out.add(value)
        out.update(t for t in _TOKEN.findall(line) if _token_like(t))
        out.update(p for p in _URL_PASSWORD.findall(line) if len(p) >= _MIN_NAMED)
    return out


def _token_like(token: str) -> bool:
    """A long run of letters and digits both (a key, a hash, base64), not a word or a path."""
    t = token.strip("=.-_")
    return len(t) >= _MIN_TOKEN and any(c.isdigit() for c in t) and any(c.isalpha() for c in t) and "/" not in t[:1]


def redact_values(text: str, found: frozenset[str]) -> tuple[str, int]:
    """`text` with every value of `found` (also JSON-escaped) replaced by WITHHELD, and how
    many places were."""
    global _pattern
    if not found or not text:
        return text, 0
    known, pattern = _pattern
    if known != found or pattern is None:
        forms = {f for v in found for f in (v, json.dumps(v)[1:-1])}
        pattern = re.compile("|".join(re.escape(v) for v in sorted(forms, key=len, reverse=True)))
        _pattern = (found, pattern)
    return pattern.subn(WITHHELD, text)
