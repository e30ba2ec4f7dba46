"""A pack written without git is one git reads: every blob back byte for byte, the pack and its
index verified by git itself, read-only; a content that is not what its name says is left out.
What a repository holds is found without git as git finds it: loose, or in a pack git wrote."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from nanohermes.turn.checkpoints.gitpack import blob_name, held, write_blobs


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, env=env, check=True, capture_output=True).stdout


def test_blobs_written_as_a_pack_are_read_back_by_git(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    contents = [b"", b"x", b"sixteen bytes!!\n" * 3, bytes(range(256)) * 400, os.urandom(70_000), b"dup", b"dup"]
    for data in contents:  # git's own name for each
        assert blob_name(data) == git(tmp_path, "hash-object", "--stdin", stdin=data).decode().strip()
    pack_dir = tmp_path / ".git" / "objects" / "pack"
    wrong = b"not what the name says"
    written = write_blobs(pack_dir, [*((blob_name(d), d) for d in contents), (blob_name(b"other"), wrong),
                                     (blob_name(b"unreadable"), None)])
    assert written == {blob_name(d) for d in contents}
    for data in contents:
        assert git(tmp_path, "cat-file", "blob", blob_name(data)) == data
    missing = subprocess.run(["git", "-C", str(tmp_path), "cat-file", "-e", blob_name(b"other")], capture_output=True)
    assert missing.returncode != 0
    (idx,) = pack_dir.glob("pack-*.idx")
    verified = git(tmp_path, "verify-pack", "-v", str(idx)).decode()
    assert f"non delta: {len(written)} objects" in verified
    git(tmp_path, "fsck", "--full", "--strict")
    for path in pack_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o400
    assert sorted(p.suffix for p in pack_dir.iterdir()) == [".idx", ".pack"]  # nothing else left behind


def test_nothing_to_write_leaves_nothing(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    pack_dir = tmp_path / ".git" / "objects" / "pack"
    assert write_blobs(pack_dir, [(blob_name(b"a"), b"b"), (blob_name(b"c"), None)]) == set()
    assert list(pack_dir.iterdir()) == []


def test_what_a_repository_holds_is_found_loose_and_in_packs_git_wrote(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    objects = tmp_path / ".git" / "objects"
    packed = [git(tmp_path, "hash-object", "-w", "--stdin", stdin=f"packed {i}\n".encode()).decode().strip()
              for i in range(300)]
    git(tmp_path, "pack-objects", "-q", str(objects / "pack" / "pack"), stdin="".join(f"{n}\n" for n in packed).encode())
    git(tmp_path, "prune-packed")  # into one pack, the loose files gone
    assert not list(objects.glob("??/*"))
    loose = git(tmp_path, "hash-object", "-w", "--stdin", stdin=b"loose\n").decode().strip()
    ours = blob_name(b"ours")
    write_blobs(objects / "pack", [(ours, b"ours")])  # a second pack
    absent = [blob_name(f"absent {i}".encode()) for i in range(50)]
    names = [*packed, loose, ours, *absent]
    expected = {*packed, loose, ours}
    assert held(objects, names) == expected
    # git agrees on each
    checked = git(tmp_path, "cat-file", "--batch-check", stdin="".join(f"{n}\n" for n in names).encode()).decode()
    assert {line.split(" ")[0] for line in checked.splitlines() if not line.endswith(" missing")} == expected


def test_an_index_without_its_pack_or_not_an_index_holds_nothing(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    objects = tmp_path / ".git" / "objects"
    name = blob_name(b"kept")
    write_blobs(objects / "pack", [(name, b"kept")])
    assert held(objects, [name]) == {name}
    (pack,) = (objects / "pack").glob("*.pack")
    pack.unlink()  # as a repack removing it leaves things for a moment
    assert held(objects, [name]) == set()
    (objects / "pack" / "junk.pack").write_bytes(b"")
    (objects / "pack" / "junk.idx").write_bytes(b"not an index")
    (objects / "pack" / "empty.pack").write_bytes(b"")
    (objects / "pack" / "empty.idx").write_bytes(b"")
    assert held(objects, [name]) == set()
    assert held(tmp_path / "nowhere", [name]) == set()
