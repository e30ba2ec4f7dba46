"""The user's git repository a workspace is in, as the checkpoints see it: only read, its
objects as a source of contents whose hash is known and its index as a first stat cache."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nanohermes.guard.gitmeta import moved_work_tree


@dataclass(frozen=True)
class Repository:
    top: Path  # the folder holding `.git`
    index: Path
    objects: Path


def repository(workspace: Path) -> Repository | None:
    """The git repository the workspace is in (a worktree's or a submodule's `.git` file
    followed), or None. Only read: its objects as a source of contents whose hash is known,
    and its index as a first stat cache."""
    for folder in (workspace, *workspace.parents):
        dot = folder / ".git"
        try:
            if dot.is_dir():
                gitdir = dot
            elif dot.is_file():
                with open(dot, encoding="utf-8", errors="replace") as f:
                    first = f.read(4096).strip()
                if not first.startswith("gitdir:"):
                    return None
                gitdir = (folder / first.removeprefix("gitdir:").strip()).resolve()
            else:
                continue
            common = gitdir
            if (gitdir / "commondir").is_file():
                with open(gitdir / "commondir", encoding="utf-8", errors="replace") as f:
                    common = (gitdir / f.read(4096).strip()).resolve()
            objects = common / "objects"
            if _may_move_work_tree(gitdir, common) and moved_work_tree(workspace):
                return None  # its index and objects describe files outside the workspace
            return Repository(folder, gitdir / "index", objects) if objects.is_dir() else None
        except OSError:
            return None
    return None


def _may_move_work_tree(gitdir: Path, common: Path) -> bool:
    """Whether a repository's own config could set its work tree (`core.worktree`, or an
    include that might): only then is git asked (`gitmeta.moved_work_tree`)."""
    for config in {gitdir / "config", common / "config", gitdir / "config.worktree"}:
        try:
            with open(config, "rb") as f:
                text = f.read(1 << 20).lower()
        except OSError:
            continue
        if b"worktree" in text or b"include" in text:
            return True
    return False
