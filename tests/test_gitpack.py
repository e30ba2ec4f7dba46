"""A pack written without git is one git reads: every blob back byte for byte, the pack and its
index verified by git itself, read-only; a content that is not what its name says is left out."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from nanohermes.turn.checkpoints.gitpack import blob_name, write_blobs


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
