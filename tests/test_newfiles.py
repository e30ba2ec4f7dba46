"""The folders of a workspace as last listed: a folder whose times have not moved holds no new
file; one whose times moved gives its new names, also when its modification time was put back;
a racy one (its times too recent to trust) gives every file it holds; skipped folders,
repositories of their own and symbolic links are never entered. Real folders, real times: a
scan a while later is one whose start (`started_ns`) is given a while later."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from nanohermes.turn.checkpoints.newfiles import RACY_NS, Folders


def later() -> int:
    """The start of a scan a while from now: whatever was changed until now is out of the
    racy window (a folder's change time cannot be put back to make it so)."""
    return time.time_ns() + 2 * RACY_NS


def make(root: Path, *paths: str) -> None:
    for rel in paths:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)


def test_only_folders_whose_time_moved_are_read_and_give_their_new_names(tmp_path: Path) -> None:
    tmp_path = tmp_path / "root"
    make(tmp_path, "a.txt", "src/m/one.py", "src/m/two.py", "docs/x.md", "node_modules/dep/i.js", "sub/inner.txt",
         "fake/.git", "fake/f.txt")
    subprocess.run(["git", "init", "-q", str(tmp_path / "sub")], check=True,
                   env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
    (tmp_path / "linked").symlink_to(tmp_path / "src")
    folders = Folders(str(tmp_path), lambda rel: rel.rpartition("/")[2] == "node_modules")
    folders.build(later())
    # Not node_modules, sub (a repository), linked; fake's `.git` is no repository to git.
    assert set(folders.seen) == {"", "src", "src/m", "docs", "fake"}
    assert all(s.settled for s in folders.seen.values())
    assert folders.news(later()) == []
    make(tmp_path, "src/m/three.py", "new/deep/er/f.txt")
    (tmp_path / "docs" / "x.md").write_text("changed: no new name")
    assert folders.news(time.time_ns()) == ["new/", "src/m/three.py"]
    assert {"new", "new/deep", "new/deep/er"} <= set(folders.seen)
    # Their times are now within the racy window: next time they give every file they hold.
    assert sorted(folders.news(time.time_ns())) == ["a.txt", "linked", "new/deep/er/f.txt", "src/m/one.py",
                                                    "src/m/three.py", "src/m/two.py"]


def test_a_racy_folder_gives_every_file_until_it_settles(tmp_path: Path) -> None:
    tmp_path = tmp_path / "root"
    make(tmp_path, "d/a.txt", "d/b.txt")
    folders = Folders(str(tmp_path), lambda rel: False)
    folders.build(time.time_ns())  # made just now: racy
    assert not folders.seen["d"].settled
    assert folders.news(time.time_ns()) == ["d/a.txt", "d/b.txt"]
    assert folders.news(later()) == ["d/a.txt", "d/b.txt"]  # listed again once more: now settled
    assert folders.news(later()) == []


def test_a_folder_gone_or_replaced_is_forgotten_with_everything_below(tmp_path: Path) -> None:
    tmp_path = tmp_path / "root"
    make(tmp_path, "a/b/c/f.txt", "keep/g.txt")
    folders = Folders(str(tmp_path), lambda rel: False)
    folders.build(later())
    for rel in ("a/b/c/f.txt",):
        (tmp_path / rel).unlink()
    for rel in ("a/b/c", "a/b"):
        (tmp_path / rel).rmdir()
    (tmp_path / "a" / "b").write_text("a file where the folder was")
    news = folders.news(time.time_ns())
    assert news == ["a/b"]
    assert "a/b" not in folders.seen and "a/b/c" not in folders.seen and "keep" in folders.seen


def test_a_file_made_in_a_settled_folder_is_found_when_the_folders_time_is_put_back(tmp_path: Path) -> None:
    tmp_path = tmp_path / "root"
    make(tmp_path, "d/a.txt")
    folders = Folders(str(tmp_path), lambda rel: False)
    folders.build(later())
    assert folders.seen["d"].settled
    before = (tmp_path / "d").stat()
    make(tmp_path, "d/hidden.txt")
    os.utime(tmp_path / "d", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (tmp_path / "d").stat().st_mtime_ns == before.st_mtime_ns
    assert folders.news(later()) == ["d/hidden.txt"]
