"""Objects written into a git object store without a git process: many blobs as one pack, and
the odd tree or commit as a file of its own.

git keeps each object it writes alone as a loose file: a file and often a folder created, and
the file renamed into place, for every object. For the contents of many changed files (a first
checkpoint of a workspace, a checkout, a formatter run over the tree) that fixed cost per file
is most of the work. `write_blobs` puts them all into one pack instead (git's own format:
version 2 pack and index, zlib-compressed whole objects, no deltas), so keeping them costs what
reading and compressing their bytes costs. Each blob is written only if its content still has
the name the caller expects (git hashed the file before: a file changed since is left to the
caller), and the pack and its index are made read-only, as git makes them.

`held` answers the other way round, without a git process either: which objects a repository's
object folder holds, loose or in a pack (looked up in the packs' indexes, mapped, not read).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path

_BLOB = 3  # git's object type number of a blob
_INDEX_V2 = b"\377tOc\0\0\0\2"  # a version 2 pack index starts so
_COMPRESSION = 1  # zlib's fastest level: what git's own loose objects use by default is close to it


def blob_name(data: bytes) -> str:
    """The git object name (SHA-1) of a blob holding `data`."""
    h = hashlib.sha1(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def _entry_header(size: int) -> bytes:
    """A pack entry's type and size: 4 bits of size beside the type, then 7 bits a byte."""
    out = bytearray()
    byte = (_BLOB << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _index(entries: list[tuple[bytes, int, int]], pack_sum: bytes) -> bytes:
    """The version 2 index of a pack: names sorted, a fan-out table, CRCs and offsets."""
    entries = sorted(entries)
    counts = [0] * 256
    for name, _, _ in entries:
        counts[name[0]] += 1
    out = bytearray(b"\377tOc" + struct.pack(">I", 2))
    running = 0
    for n in counts:
        running += n
        out += struct.pack(">I", running)
    out += b"".join(name for name, _, _ in entries)
    out += b"".join(struct.pack(">I", crc) for _, crc, _ in entries)
    large: list[int] = []
    for _, _, offset in entries:
        if offset < 0x80000000:
            out += struct.pack(">I", offset)
        else:  # past 2 GiB: an entry of the table of 8-byte offsets
            out += struct.pack(">I", 0x80000000 | len(large))
            large.append(offset)
    out += b"".join(struct.pack(">Q", offset) for offset in large)
    out += pack_sum
    out += hashlib.sha1(out).digest()
    return bytes(out)


def write_blobs(pack_dir: Path, items: Iterable[tuple[str, bytes | None]]) -> set[str]:
    """Write the blobs of `items` ((expected name, content)) into one new pack in `pack_dir`
    (a repository's `objects/pack`), each once; returns the names written. An item whose
    content is None, or does not have its expected name, is not written."""
    fd, tmp = tempfile.mkstemp(dir=pack_dir, prefix="tmp_pack_")  # 0600, as nanohermes's other files
    idx_tmp: str | None = None
    entries: list[tuple[bytes, int, int]] = []
    written: set[str] = set()
    try:
        with os.fdopen(fd, "w+b") as f:
            f.write(b"PACK" + struct.pack(">II", 2, 0))  # the count is known at the end
            offset = 12
            for expected, data in items:
                if data is None or expected in written or blob_name(data) != expected:
                    continue
                packed = _entry_header(len(data)) + zlib.compress(data, _COMPRESSION)
                f.write(packed)
                entries.append((bytes.fromhex(expected), zlib.crc32(packed), offset))
                written.add(expected)
                offset += len(packed)
            if not entries:
                return set()
            f.seek(8)
            f.write(struct.pack(">I", len(entries)))
            f.seek(0)
            whole = hashlib.sha1()
            while chunk := f.read(1 << 20):
                whole.update(chunk)
            pack_sum = whole.digest()
            f.write(pack_sum)  # at the end: the read left the position there
            f.flush()
            os.fsync(f.fileno())
        name = pack_dir / f"pack-{pack_sum.hex()}"
        idx_fd, idx_tmp = tempfile.mkstemp(dir=pack_dir, prefix="tmp_idx_")
        with os.fdopen(idx_fd, "wb") as f:
            f.write(_index(entries, pack_sum))
            f.flush()
            os.fsync(f.fileno())
        for path in (tmp, idx_tmp):
            os.chmod(path, 0o400)
        # The pack first: git uses a pack once its index is there.
        os.replace(tmp, name.with_suffix(".pack"))
        os.replace(idx_tmp, name.with_suffix(".idx"))
        return written
    finally:
        for left in (tmp, idx_tmp):  # anything not renamed into place: a failure, or nothing to write
            if left is not None and os.path.exists(left):
                os.unlink(left)


def tree_of_blobs(blobs: Iterable[str]) -> bytes:
    """The content of a tree holding each blob as a regular file named by its own name (how
    a checkpoint holds the contents it keeps)."""
    return b"".join(b"100644 " + name.encode() + b"\0" + bytes.fromhex(name) for name in sorted(set(blobs)))


def write_object(objects_dir: Path, kind: str, content: bytes) -> str:
    """Write one object (`kind`: "tree", "commit", "blob") as git writes a loose object, and
    return its name: zlib-compressed, renamed into place, read-only. An object already
    there is left as it is."""
    head = f"{kind} {len(content)}\0".encode()
    name = hashlib.sha1(head + content).hexdigest()
    folder = objects_dir / name[:2]
    target = folder / name[2:]
    if target.exists():
        return name
    folder.mkdir(mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="tmp_obj_")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(zlib.compress(head + content, _COMPRESSION))
        os.chmod(tmp, 0o400)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return name


def pack_indexes(objects_dir: Path) -> list[str]:
    """The indexes of the packs in `objects_dir` that git uses (those beside their pack)."""
    try:
        with os.scandir(objects_dir / "pack") as it:
            return [e.path for e in it if e.name.endswith(".idx") and os.path.exists(e.path[:-4] + ".pack")]
    except OSError:
        return []


def held(objects_dir: Path, names: Iterable[str], indexes: list[str] | None = None) -> set[str]:
    """Which of these objects `objects_dir` (a repository's `objects`) holds as a loose file
    or in one of its packs (`indexes`: their `pack_indexes`, when already listed). One found
    is there; one not found may still be reachable through the folder's alternates, or in a
    pack written since the look."""
    rest = set(names)
    found: set[str] = set()
    for fan in {name[:2] for name in rest}:  # a listing of each folder they would be in: fewer calls than a stat each
        try:
            loose = os.listdir(os.path.join(objects_dir, fan))
        except OSError:
            continue
        found.update(name for name in (fan + entry for entry in loose) if name in rest)
    rest -= found
    if not rest:
        return found
    for path in pack_indexes(objects_dir) if indexes is None else indexes:
        if not rest:
            break
        there = _in_index(path, rest)
        found |= there
        rest -= there
    return found


def _in_index(path: str, names: set[str]) -> set[str]:
    """Which of these names the version 2 pack index at `path` lists (a fan-out table by
    first byte, then the names sorted: each found by bisection)."""
    try:
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # unreadable, or empty
        return set()
    found: set[str] = set()
    with m:
        if len(m) < 8 + 1024 or m[:8] != _INDEX_V2:
            return found
        fan = struct.unpack_from(">256I", m, 8)
        base = 8 + 1024
        if len(m) < base + 28 * fan[255]:  # names, CRCs, offsets
            return found
        for name in names:
            want = bytes.fromhex(name)
            lo, hi = (fan[want[0] - 1] if want[0] else 0), fan[want[0]]
            while lo < hi:
                mid = (lo + hi) // 2
                at = base + 20 * mid
                there = m[at:at + 20]
                if there < want:
                    lo = mid + 1
                elif there > want:
                    hi = mid
                else:
                    found.add(name)
                    break
    return found


__all__ = ["blob_name", "held", "pack_indexes", "tree_of_blobs", "write_blobs", "write_object"]
