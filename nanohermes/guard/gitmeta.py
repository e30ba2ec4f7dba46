"""Git's metadata that can make the person's next plain `git status` or commit run a program,
wherever git reads it, and which of it a sandboxed command must leave as it is.

Owns:
- the workspace's git folders (`git_dirs`): `.git`, or those a `.git` file names when git
  itself made them for this workspace (a linked worktree, a submodule);
- `metadata()`: what stays read-only for a sandboxed command that may write the workspace,
  and what must not appear there while it runs:
  - each git folder's `config`, `config.worktree` and `hooks`, and its `commondir` (which
    points git at another folder's config); the workspace's `.git` file, and each linked
    worktree's `commondir` and `gitdir` (where its git finds its repository) and its own `.git`
    file, wherever it is (a worktree inside the workspace);
  - the git folders with no `commondir`, whose top level a background task may not write;
  - the `core.hooksPath` folders of every config scope (the person's global one too; a
    relative one is taken from the work tree, as git does), and husky's whole `.husky/`;
  - the files `include.path` and `includeIf.*.path` name in any scope;
  - the configs and hooks of submodules (`.git/modules/**`) and of linked worktrees
    (`.git/worktrees/*/config.worktree`), and `.nanohermes/`;
  paths that do not exist yet are watched: one that appears is removed after the command
  (and while a background task runs, at every tool call), and reported;
- `safe_new_repo`: whether a git folder a sandboxed command created (`git init`, a
  submodule's clone) holds only what git writes itself, so that it may stay;
- `moved_work_tree`: whether git would take files outside the workspace for the work tree
  (`core.worktree`), which the git tools and the checkpoints then do not read.

The configuration is read by git itself (`git config --show-origin`), so includes and
scopes are followed as git follows them; what it read is cached by the files' stamps.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nanohermes.guard import programs


@dataclass(frozen=True)
class Metadata:
    """Git's metadata a command must leave alone, as the sandbox binds it."""

    protected: tuple[Path, ...]  # exists: bound read-only for the command
    absent: tuple[Path, ...]  # does not exist: removed if the command makes it
    module_roots: tuple[Path, ...]  # folders where git keeps submodules' git folders (checked after)
    # Git folders with no `commondir` (the workspace's own, its submodules'): one that appeared
    # there would point git at another folder's config. A command that outlives its call (a
    # background task) gets their top level read-only, so it cannot make one.
    sealable: tuple[Path, ...] = ()


def git_dirs(workspace: Path) -> list[Path]:
    """The workspace's git folders: `.git`, or for a linked worktree or a submodule the
    folders its `.git` file names (its own and the common one, where objects and config
    live). A `.git` file is anyone's to write, so the folders it names count only when git
    itself wrote them for this workspace: a worktree's folder points back at this `.git`
    file, a submodule's config names this workspace as its work tree. Otherwise a planted
    `gitdir: /home/me` would make the home folder writable to every sandboxed command."""
    dot_git = workspace / ".git"
    found = [dot_git] if dot_git.is_dir() else []
    if dot_git.is_file():
        try:
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                gd = (workspace / text[len("gitdir:"):].strip()).resolve()
                common = gd / "commondir"
                main = (gd / common.read_text(encoding="utf-8").strip()).resolve() if common.is_file() else None
                if _git_wrote(gd, main, dot_git, workspace):
                    found += [gd, *([main] if main is not None else [])]
        except OSError:
            pass
    return found


_WORKTREE = re.compile(r"^\s*worktree\s*=\s*(.+?)\s*$", re.I | re.M)


def _git_wrote(gd: Path, main: Path | None, dot_git: Path, workspace: Path) -> bool:
    """Is `gd` the git folder git made for this workspace (see `git_dirs`)?"""
    if not (gd / "HEAD").is_file():
        return False
    real_ws = workspace.resolve()
    if main is not None:  # a linked worktree: <main>/worktrees/<name>, whose gitdir file names our .git
        back = (gd / "gitdir").read_text(encoding="utf-8", errors="replace").strip() \
            if (gd / "gitdir").is_file() else ""
        return gd.parent.name == "worktrees" and gd.parent.parent == main and (main / "HEAD").is_file() \
            and bool(back) and Path(os.path.realpath(gd / back)) == dot_git.resolve()
    try:  # a submodule: its config names the work tree
        config = (gd / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(Path(os.path.realpath(gd / m.group(1).strip('"'))) == real_ws for m in _WORKTREE.finditer(config))


def submodule_dirs(modules: Path) -> list[Path]:
    """The git folders under `.git/modules` (nested submodules too): each folder holding a
    `HEAD` and a `config` file is one, and only its own `modules/` is looked into; any other
    folder is part of a submodule's name (`libs/a`). All of them, however many: a count that
    stopped the look would let a command push the real ones past it with folders of its own."""
    found: list[Path] = []
    todo = [modules]
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = [(e.name, e.path, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                           for e in it]
        except OSError:
            continue
        files = {name for name, _, _, is_file in entries if is_file}
        if folder != modules and {"HEAD", "config"} <= files:
            found.append(folder)
            todo += [Path(path) for name, path, is_dir, _ in entries if is_dir and name == "modules"]
        else:
            todo += [Path(path) for _, path, is_dir, _ in entries if is_dir]
    return sorted(found)


# -- what git's configuration names ------------------------------------------------------------

_KEYS = r"^(core\.hookspath|core\.worktree|include\.path|includeif\..*\.path)$"


def _config_files(workspace: Path, git_folders: list[Path]) -> list[str]:
    """The files git's configuration starts from for this workspace, in every scope."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    out = ["/etc/gitconfig", os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    for gd in git_folders:
        out += [str(gd / "config"), str(gd / "config.worktree")]
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        if os.environ.get(name):
            out.append(os.environ[name])
    return out


def _stamp(paths: list[str]) -> tuple[tuple[str, int, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((p, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((p, 0, -1, 0))
    return tuple(out)


_read: dict[str, tuple[tuple[tuple[str, int, int, int], ...], list[tuple[str, str, str]]]] = {}


def named_by_config(workspace: Path, git_folders: list[Path]) -> list[tuple[str, str, str]]:
    """(origin file, key, value) of every hooks path, work tree and include directive git
    reads for the workspace, in every scope, followed through includes as git follows them.
    Cached until one of the files read changes."""
    key = str(workspace)
    base = _config_files(workspace, git_folders)
    cached = _read.get(key)
    if cached is not None and cached[0] == _stamp([*base, *(o for o, _, _ in cached[1])]):
        return cached[1]
    try:
        git = programs.git()
    except FileNotFoundError:
        return []
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in ("GIT_CONFIG_GLOBAL",
                                                                                   "GIT_CONFIG_SYSTEM")}
    try:
        r = subprocess.run([git, *programs.GIT_OWN, "config", "--show-origin", "-z", "--get-regexp", _KEYS],
                           cwd=workspace, env=env, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    found: list[tuple[str, str, str]] = []
    parts = r.stdout.split(b"\0")
    for origin, entry in zip(parts[0::2], parts[1::2], strict=False):
        name, _, value = os.fsdecode(entry).partition("\n")
        where = os.fsdecode(origin)
        if where.startswith("file:"):
            path = where[len("file:"):]
            found.append((os.path.join(workspace, path) if not os.path.isabs(path) else path, name.lower(), value))
    _read[key] = (_stamp([*base, *(o for o, _, _ in found)]), found)
    return found


def _named_paths(workspace: Path, git_folders: list[Path]) -> tuple[list[Path], list[Path]]:
    """(hooks folders, included files) the configuration names, as git would find them."""
    hooks: list[Path] = []
    includes: list[Path] = []
    for origin, key, value in named_by_config(workspace, git_folders):
        if not value:
            continue
        value = os.path.expanduser(value)
        if key == "core.hookspath":
            hooks.append(Path(value) if os.path.isabs(value) else workspace / value)
        elif key != "core.worktree":  # an include: relative to the folder of the file that has the directive
            includes.append(Path(value) if os.path.isabs(value) else Path(origin).parent / value)
    return hooks, includes


def hooks_folders(workspace: Path) -> list[Path]:
    """The hooks folders git runs programs from for this workspace: each git folder's own,
    and every `core.hooksPath` of any config scope (real paths)."""
    folders = git_dirs(workspace)
    named, _ = _named_paths(workspace, folders)
    return list(dict.fromkeys(Path(os.path.realpath(p)) for p in [*(gd / "hooks" for gd in folders), *named]))


# -- where git takes the work tree from -------------------------------------------------------

def moved_work_tree(workspace: Path, env: Mapping[str, str] | None = None) -> str:
    """Why git would take files outside the workspace for this repository's work tree, or ""
    when it would not. A repository's `core.worktree` (in any config scope, or an included
    file), or `GIT_WORK_TREE`/`GIT_DIR` in `env`, may name any folder: `git diff` would then
    show files there in full, `git status` list them. The work tree git finds is accepted when
    it is the workspace, inside it, or the folder whose `.git` git found by looking up from
    the workspace (the repository the workspace is part of)."""
    env = os.environ if env is None else env
    set_by = [f"core.worktree = {v} ({o})" for o, k, v in named_by_config(workspace, git_dirs(workspace))
              if k == "core.worktree"]
    set_by += [f"{name}={env[name]}" for name in ("GIT_WORK_TREE", "GIT_DIR") if env.get(name)]
    if not set_by:
        return ""
    real = _work_tree(workspace, env)
    if not real or _accepted(real, workspace):
        return ""
    return (f"git's work tree for this workspace is {real}, outside it (set by {'; '.join(set_by)}): through git, "
            "the files there would be read as the repository's")


def _work_tree(workspace: Path, env: Mapping[str, str]) -> str:
    """The real path of the work tree git finds from the workspace; "" when it finds none
    (git says so itself) or cannot run."""
    try:
        r = subprocess.run([programs.git(), *programs.GIT_OWN, "rev-parse", "--show-toplevel"], cwd=workspace,
                           env=dict(env), capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    top = os.fsdecode(r.stdout).strip()
    return os.path.realpath(top) if r.returncode == 0 and top else ""


def _accepted(real: str, workspace: Path) -> bool:
    """Is the work tree `real` the workspace, inside it, or the folder whose `.git` git finds
    by looking up from it?"""
    root = os.path.realpath(workspace)
    found = next((f for f in (Path(root), *Path(root).parents) if os.path.lexists(f / ".git")), None)
    return real == root or real.startswith(root.rstrip("/") + "/") or (found is not None and real == str(found))


# -- what a sandboxed command must leave as it is ----------------------------------------------

def metadata(workspace: Path, config_files: tuple[Path, ...] = ()) -> Metadata:
    """What stays read-only for a command that may write the workspace, and what must not
    appear (see the module's docstring). `config_files`: nanohermes's own, read-only too."""
    folders = git_dirs(workspace)
    wanted: list[Path] = [workspace / ".nanohermes", workspace / ".husky", *config_files]
    if (workspace / ".git").is_file():  # it names the git folder: rewritten, it names a planted one
        wanted.append(workspace / ".git")
    module_roots: list[Path] = []
    sealable: list[Path] = []
    for gd in folders:
        kept, seal = _git_folder_metadata(gd)
        wanted += kept
        module_roots.append(gd / "modules")
        sealable += seal
    hooks, includes = _named_paths(workspace, folders)
    wanted += hooks + includes
    real = list(dict.fromkeys(Path(os.path.realpath(p)) for p in wanted))
    # A git folder's missing hooks folder is made empty (as git makes it) and bound over.
    hooks_folders = {Path(os.path.realpath(gd / "hooks")) for gd in folders if gd.is_dir()}
    protected = tuple(p for p in real if os.path.lexists(p) or p in hooks_folders)
    absent = tuple(p for p in real if not os.path.lexists(p) and p not in hooks_folders)
    return Metadata(protected=protected, absent=absent, module_roots=tuple(module_roots),
                    sealable=tuple(dict.fromkeys(Path(os.path.realpath(g)) for g in sealable)))


def _git_folder_metadata(gd: Path) -> tuple[list[Path], list[Path]]:
    """What of one git folder stays read-only (its config and hooks, what points a linked
    worktree's git elsewhere, its submodules' and its linked worktrees'), and which of it and
    its submodules' git folders a background command's sandbox can seal (no `commondir`)."""
    # `commondir` and `gitdir` point a linked worktree's git at its repository's config.
    wanted = [gd / "config", gd / "hooks", gd / "config.worktree", gd / "commondir"]
    if gd.parent.name == "worktrees":
        wanted.append(gd / "gitdir")
    modules = submodule_dirs(gd / "modules")
    for module in modules:
        wanted += [module / "config", module / "hooks", module / "config.worktree", module / "commondir"]
    sealable = [g for g in (gd, *modules) if g.is_dir() and not os.path.lexists(g / "commondir")]
    return [*wanted, *_worktrees_metadata(gd / "worktrees")], sealable


def _worktrees_metadata(worktrees: Path) -> list[Path]:
    """What of a repository's linked worktrees' folders (`.git/worktrees/<name>/`) the
    person's git in each of them reads first: where their repository is (`commondir`), where
    their work tree is (`gitdir`), and their own config; and each worktree's own `.git` file
    (what `gitdir` names), which points its git at that folder: a worktree inside the
    workspace would otherwise have it rewritten to name a planted repository. Every worktree,
    however many: a count that stopped the look would let a command push the person's past it
    with folders of its own."""
    out: list[Path] = []
    try:
        with os.scandir(worktrees) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    wt = Path(e.path)
                    out += [wt / "config.worktree", wt / "commondir", wt / "gitdir"]
                    if (pointer := _worktree_pointer(wt / "gitdir")) is not None:
                        out.append(pointer)
    except OSError:
        pass
    return out


def _worktree_pointer(gitdir: Path) -> Path | None:
    """The linked worktree's `.git` file that its `gitdir` names (absolute, as git writes it)."""
    try:
        with open(gitdir, "rb") as f:
            named = os.fsdecode(f.read(4096).strip())
    except OSError:
        return None
    return Path(named) if os.path.isabs(named) and os.path.basename(named) == ".git" else None


# What `git init`, `git remote add`, a submodule's clone and the usual first steps write to a
# repository's config: none of it names a program git would run.
_SAFE_NEW_KEYS = (
    r"(core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode|symlinks|autocrlf"
    r"|eol|safecrlf|worktree)|extensions\.(objectformat|refstorage)|init\.defaultbranch|user\.(name|email)"
    r"|remote\.[^\n]+\.(url|fetch|pushurl)|branch\.[^\n]+\.(remote|merge|rebase)|pull\.rebase|push\.default"
    r"|submodule\.[^\n]+\.(url|active))")


@functools.cache  # compiled for the first repository a command makes, not at import
def _safe_new_keys() -> re.Pattern[str]:
    return re.compile(_SAFE_NEW_KEYS)


def safe_new_repo(git_folder: Path) -> bool:
    """Is a git folder a sandboxed command created harmless the next time git runs there,
    outside any sandbox? A folder whose hooks are git's samples and whose config holds only
    the keys `git init`, a submodule's clone and the usual first steps write; never a `.git`
    file or link (it points git at a config elsewhere)."""
    if git_folder.is_symlink() or not git_folder.is_dir():
        return False
    try:
        names = _config_names(git_folder / "config") if _plain_layout(git_folder) else None
    except (OSError, subprocess.SubprocessError):
        return False
    return names is not None and all(_safe_new_keys().fullmatch(n.lower()) for n in names)


def _plain_layout(git_folder: Path) -> bool:
    """Only git's sample hooks, no `commondir` or `config.worktree`, and each submodule's git
    folder as harmless (see `safe_new_repo`)."""
    hooks = git_folder / "hooks"
    if hooks.is_symlink() or any(not n.endswith(".sample") for n in (os.listdir(hooks) if hooks.is_dir() else ())):
        return False
    if any(os.path.lexists(git_folder / n) for n in ("commondir", "config.worktree")):
        return False
    return all(safe_new_repo(m) for m in submodule_dirs(git_folder / "modules"))


def _config_names(config: Path) -> list[str] | None:
    """The names of the keys a new repository's config sets (none without one); None for a
    config that is a link or that git cannot read."""
    if not config.exists():
        return []
    if config.is_symlink():
        return None
    r = subprocess.run([programs.git(), "config", "--file", str(config), "--list", "--name-only", "-z"],
                       capture_output=True, timeout=10, env={"PATH": os.environ.get("PATH", ""),
                                                               "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"})
    if r.returncode != 0:
        return None
    return [n for n in r.stdout.decode("utf-8", "replace").split("\0") if n]


# -- the `.git` entries of the workspace's subfolders ------------------------------------------

# A `.git` folder or file in a subfolder makes the person's next git command there use the
# repository it leads to (its `core.fsmonitor`, hooks, aliases): one a command planted runs
# when the person types `git status` in that folder.
GitStamp = tuple[tuple[int, int, int, int] | None, ...]
_NOT_WALKED = (".git", "node_modules")  # git's own store; dependencies, which hold no one's checkout
_LEADS = ("config", "commondir", "config.worktree", "hooks")


def subfolder_gits(workspace: Path, max_folders: int) -> dict[str, GitStamp]:
    """Every `.git` file, folder or link in a subfolder of the workspace (not its own, which
    `metadata` keeps), and every subfolder git takes for a bare repository (`looks_bare`), with
    its stamp, not looking into `.git`, `node_modules` or a virtual environment's folder; at
    most `max_folders` folders (the turn's look for start-up files, `runs_later.startup_files`,
    has the same bound and says when it stopped). A folder unchanged since it was last listed
    is only stat'ed (`listed`)."""
    root = os.path.realpath(workspace)
    found: dict[str, GitStamp] = {}
    todo, seen = [root], 0
    while todo and seen < max_folders:
        folder = todo.pop()
        seen += 1
        listing = listed(folder)
        if listing is None or (folder != root and listing.venv):
            continue
        if folder != root and listing.bare:  # git takes the folder itself for a repository
            found[folder] = git_entry_stamp(Path(folder))
            continue
        if listing.git and folder != root:
            found[os.path.join(folder, ".git")] = git_entry_stamp(Path(folder, ".git"))
        todo += [os.path.join(folder, d) for d in listing.folders]
    return found


@dataclass(frozen=True)
class _Listing:
    """What the walk needs of one folder's entries, with the folder's identity when listed."""

    ino: int
    ctime_ns: int
    listed_ns: int
    folders: tuple[str, ...]  # to walk into
    git: bool  # holds a `.git` entry
    venv: bool  # a virtual environment's folder (`pyvenv.cfg`)
    bare: bool  # git takes it for a repository of its own


# A folder's listing by path. Adding, removing or renaming an entry changes the folder's change
# time (ctime, which nothing sets back); a listing made within this of that change may have
# missed an entry made in the same clock tick, and is not trusted.
_listings: dict[str, _Listing] = {}
_RACY_NS = 2_000_000_000


def listed(folder: str) -> _Listing | None:
    """The folder's listing, from the cache while the folder is unchanged; None when it cannot
    be read."""
    try:
        st = os.stat(folder, follow_symlinks=False)
    except OSError:
        return None
    cached = _listings.get(folder)
    if cached is not None and (cached.ino, cached.ctime_ns) == (st.st_ino, st.st_ctime_ns) \
            and cached.listed_ns - st.st_ctime_ns > _RACY_NS:
        return cached
    listed = time.time_ns()
    try:
        with os.scandir(folder) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return None
    names = {name for name, _ in entries}
    listing = _Listing(st.st_ino, st.st_ctime_ns, listed,
                       tuple(n for n, is_dir in entries if is_dir and n not in _NOT_WALKED),
                       ".git" in names, "pyvenv.cfg" in names, looks_bare(names))
    _listings[folder] = listing
    return listing


def looks_bare(names: set[str]) -> bool:
    """Would git take a folder holding these names for a (bare) repository of its own, as
    `git status` run inside it does? It needs `HEAD`, `objects` and `refs`."""
    return {"HEAD", "objects", "refs"} <= names


def leads_to(entry: Path) -> Path | None:
    """The git folder a `.git` entry makes git use: itself for a folder, what a link names,
    or what a `gitdir:` file names (relative to its folder); None when it names none."""
    try:
        if entry.is_symlink() or entry.is_dir():
            return Path(os.path.realpath(entry)) if entry.is_dir() else None
        with open(entry, "rb") as f:
            text = os.fsdecode(f.read(4096)).strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    named = Path(os.path.realpath(entry.parent / text[len("gitdir:"):].strip()))
    return named if named.is_dir() else None


def link_target(path: str) -> str:
    """What the link at `path` names ("" when it is no link)."""
    try:
        return os.readlink(path)
    except OSError:
        return ""


def git_entry_stamp(entry: Path) -> GitStamp:
    """What changes when a `.git` entry or what it leads to changes where git finds programs:
    the entry, and its git folder's config, commondir, config.worktree and hooks (each hook)."""
    def st(p: Path) -> tuple[int, int, int, int] | None:
        try:
            s = os.lstat(p)
        except OSError:
            return None
        return (s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns)  # ctime cannot be set back

    folder = leads_to(entry)
    # A folder's own times change with every commit (its index, ORIG_HEAD): only a file's or link's count.
    parts = [] if entry.is_dir() and not entry.is_symlink() else [st(entry)]
    if folder is not None:
        parts += [st(folder / n) for n in _LEADS]
        try:
            parts += [st(folder / "hooks" / n) for n in sorted(os.listdir(folder / "hooks"))]
        except OSError:
            pass
    return tuple(parts)


def planted_git(entry: Path, workspace: Path) -> bool:
    """Would the person's next git command in the folder of this `.git` entry run a program
    it names? Not when it leads into one of the workspace's own git folders (a submodule's or
    worktree's, which `metadata` keeps), or to a repository as harmless as a fresh `git init`
    (`safe_new_repo`); a `.git` file that names no folder makes git stop, and runs nothing."""
    folder = leads_to(entry)
    if folder is None:
        return False
    own = [Path(os.path.realpath(g)) for g in git_dirs(workspace)]
    if any(folder == g or g in folder.parents for g in own):
        return False
    return not safe_new_repo(folder)


def subfolder_metadata(entries: Mapping[str, GitStamp]) -> list[Path]:
    """What of the subfolders' existing `.git` entries stays read-only for a command that may
    write them (as the workspace's own: `metadata`): a `.git` file (rewritten, it names a
    planted folder), and of a `.git` folder its config, hooks, commondir and config.worktree."""
    out: list[Path] = []
    for path in entries:
        entry = Path(path)
        if entry.is_symlink():
            continue  # a link is replaced, not written through: the sweep judges what it leads to
        out += [entry / n for n in _LEADS] if entry.is_dir() else [entry]
    return out
