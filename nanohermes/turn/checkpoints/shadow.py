"""The shadow git repository of a workspace: where it lives, how it is made, and how every git
command of the checkpoints runs (`Shadow.run_git`).

git runs with its own GIT_DIR, the session's own index and the workspace as GIT_WORK_TREE,
with no global or system config, no hooks and no attributes (so contents are kept and
restored byte for byte). The user's repository is only read: its objects as git's alternates
(`borrow`), and its config when a question is about it (`users`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from nanohermes.guard import programs
from nanohermes.turn.checkpoints.gitpack import held, pack_indexes
from nanohermes.turn.checkpoints.versions import CheckpointError
from nanohermes.common.dirs import private_dir, write_private
from nanohermes.guard.programs import GIT_OWN

_GIT_CONFIG = (*GIT_OWN, "-c", "core.autocrlf=false",
               "-c", "core.safecrlf=false", "-c", "core.symlinks=true", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
               "-c", "core.quotepath=off", "-c", "core.untrackedCache=false", "-c", "core.splitIndex=false",
               "-c", "core.trustctime=true", "-c", "core.checkStat=default", "-c", "core.filemode=true",
               # The store holds copies of the workspace's files: owner-only, whatever the umask.
               "-c", "core.sharedRepository=0600")
# info/attributes wins over every .gitattributes of the workspace: no line-ending or filter changes.
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"
# Past this many lookups (names times packs), `unheld` asks git, whose lookup is quicker than Python's.
_LOOKUPS_UPTO = 20_000
# What `git init` writes (the work tree and the rest of the settings come with each command).
_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"


class Shadow:
    """The shadow repository in `root` (its git folder `root/git`), working on `workspace`
    with the session's `index`; `borrowed`: the user's repository's objects, read as
    alternates when a command may borrow them."""

    def __init__(self, root: Path, workspace: Path, index: Path, borrowed: str | None) -> None:
        self.root = root
        self.git_dir = root / "git"
        self.workspace = workspace
        self.index = index
        self.borrowed = borrowed

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").exists()

    def create(self) -> None:
        """Make the repository as `git init --template=` lays it out (git's documented layout,
        written here: a process fewer before a new store's first scan): owner-only folders,
        no template, attributes that keep bytes as they are. HEAD comes last, as `exists`
        looks for it: a repository that has one has its attributes."""
        for folder in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "info"):
            private_dir(self.git_dir / folder)
        write_private(self.git_dir / "info" / "attributes", _ATTRIBUTES)
        _put(self.git_dir / "config", _CONFIG)
        _put(self.git_dir / "HEAD", "ref: refs/heads/master\n")

    def indexes(self) -> list[Path]:
        """The sessions' indexes of this workspace, oldest first."""
        def mtime(p: Path) -> int:
            try:
                return p.stat().st_mtime_ns
            except OSError:
                return 0
        return sorted((p for p in self.root.glob("index-*") if not p.name.endswith(".lock")), key=mtime)

    def git(self, *args: str, stdin: bytes | None = None, check: bool = True, index: Path | None = None,
            borrow: bool = False) -> bytes:
        p = self.run_git(*args, stdin=stdin, index=index, borrow=borrow)
        if check and p.returncode != 0:
            raise CheckpointError(f"git {args[0]} failed: {p.stderr.decode('utf-8', 'replace').strip()[:300]}")
        return p.stdout

    def text(self, *args: str, **kw: Any) -> str:
        return self.git(*args, **kw).decode("utf-8", "surrogateescape")

    def run_git(self, *args: str, stdin: bytes | None = None, index: Path | None = None,
                borrow: bool = False, users: bool = False) -> subprocess.CompletedProcess[bytes]:
        """Every git command of the store runs here. `borrow`: the user's repository's objects
        may be read too; `index`: another index than the session's; `users`: a question to
        the user's repository itself (what its config says), with the person's settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        if users:  # the person's global and system config apply, no program runs (GIT_OWN)
            env.update(GIT_TERMINAL_PROMPT="0")
            config = GIT_OWN
        else:  # none of the user's git settings apply (no GIT_* variable, no global or system config)
            env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.workspace),
                       GIT_INDEX_FILE=str(index or self.index), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                       GIT_LITERAL_PATHSPECS="1", GIT_TERMINAL_PROMPT="0", GIT_AUTHOR_NAME="nanohermes",
                       GIT_AUTHOR_EMAIL="nanohermes@localhost", GIT_COMMITTER_NAME="nanohermes",
                       GIT_COMMITTER_EMAIL="nanohermes@localhost")
            if borrow and self.borrowed:
                env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = _quoted(self.borrowed)
            config = _GIT_CONFIG
        try:
            return subprocess.run([programs.git(), *config, *args], input=stdin, capture_output=True, env=env,
                                  cwd=self.workspace, timeout=600)
        except FileNotFoundError:
            raise CheckpointError("git was not found on PATH (checkpoints need it; install git)") from None
        except subprocess.TimeoutExpired:
            raise CheckpointError(f"git {args[0]} took more than 600 s") from None

    def missing(self, blobs: list[str], *, borrow: bool = False) -> set[str]:
        """Which of these blobs the store (with `borrow`: nor the user's repository) does not hold."""
        if not blobs:
            return set()
        out = self.text("cat-file", "--batch-check", stdin="".join(f"{b}\n" for b in blobs).encode(), borrow=borrow)
        return {line.split(" ")[0] for line in out.splitlines() if line.endswith(" missing")}

    def unheld(self, blobs: list[str], *, borrow: bool = False) -> set[str]:
        """Which of these blobs the store (with `borrow`: nor the user's repository) does not
        hold, read from their object folders without a git process (`gitpack.held`). For what
        is about to be kept: a blob taken for missing that is there after all (in a pack
        written since the look) costs a copy too many, never a content. The rest of what a
        repository borrowing objects of its own (its alternates) may hold, git is asked, and
        so it is about many names in many packs, which it looks up faster."""
        folders = [self.git_dir / "objects", *([Path(self.borrowed)] if borrow and self.borrowed else [])]
        indexes = [pack_indexes(f) for f in folders]
        if len(blobs) * sum(map(len, indexes)) > _LOOKUPS_UPTO:  # many names, many packs: git looks them up faster
            return self.missing(blobs, borrow=borrow)
        rest = set(blobs)
        for folder, packs in zip(folders, indexes, strict=True):
            rest -= held(folder, rest, packs) if rest else set()
        if rest and borrow and self.borrowed and os.path.exists(os.path.join(self.borrowed, "info", "alternates")):
            return self.missing(sorted(rest), borrow=True)
        return rest

    def add_ref(self, ref: str, commit: str) -> None:
        """A new ref (`ref`, a name no other has) at `commit`, written as git writes a loose
        ref (whole or not at all): a process fewer a turn."""
        path = self.git_dir / ref
        if not path.parent.is_dir():
            private_dir(path.parent)
        _put(path, f"{commit}\n")


def _put(path: Path, text: str) -> None:
    """Write a file of the repository as git would: whole or not at all (renamed into place),
    owner-only, not flushed to disk (git does not flush these either)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def nul(paths: list[str]) -> bytes:
    """Paths as git's `-z --stdin` reads them."""
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _quoted(path: str) -> str:
    """A path as one entry of GIT_ALTERNATE_OBJECT_DIRECTORIES (colon-separated, C-quoted)."""
    if not any(c in path for c in ':"\\\n'):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
