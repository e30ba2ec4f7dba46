"""Another version of nanohermes beside this checkout, for the benchmarks' `--before`: the
tree of a revision written out of git, and the default revision (where this branch left main).
Standard library only, so a benchmark measuring another tree loads no nanohermes from here."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def export(rev: str, into: Path) -> Path:
    """The tree of `rev`, written out of git into `into` (no checkout, no worktree)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def default_before() -> str | None:
    p = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True, text=True)
    return p.stdout.strip() or None
