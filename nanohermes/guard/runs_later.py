"""Files that run code later without anyone typing their name: a git hook, a CI workflow, a
package's scripts, a Makefile, an `.envrc`, an editor's tasks, a build script or build-backend
hook, a test suite's conftest, a `.pth` file in a virtual environment, a project file of
nanohermes or Claude Code in a subfolder (`.nanohermes/`, `.claude/settings*.json`,
`.mcp.json`, ...: its hooks and MCP servers run at the next start in its folder). A turn that created or changed one
is named at its end (the REPL's summary, `-p`'s json), so the person sees what will run the
next time they commit, push, `make`, `pip install`, `npm install`, `pytest`, open the folder or
start Python or an agent there.

`runs_later(path, before, after)` says why a changed file runs code later, or None; a file
where only part of it runs code (`package.json`'s scripts, `pyproject.toml`'s build system)
is named only when that part changed, when both contents are known.

`startup_files(workspace)` looks, before and after each turn, at what Python runs at every
start in the workspace's virtual environments (any folder with a `pyvenv.cfg`, and any
`site-packages` or `dist-packages` folder): their `.pth` files and `sitecustomize.py` and
`usercustomize.py`. The checkpoints leave those folders out (`.venv`, `.tox`, ... are
dependency folders), so this look is what names a file planted there (`started_changed`).
The same look finds the `.git` entries of the workspace's subfolders (and the subfolders git
takes for a bare repository), which the checkpoints leave out too: one created or changed that
leads to a repository whose config or hooks name a program is named (`gits_changed`), as the
person's next `git status` there runs it.
"""

from __future__ import annotations

import glob as globlib
import json
import os
import posixpath
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from nanohermes.common.budget import plural
from nanohermes.guard.configfiles import project_file
from nanohermes.guard.gitmeta import GitStamp, git_entry_stamp, listed, planted_git

# Where CI and hooks keep the files they run, compiled by `_places` the first time a turn changed a
# file (a turn that changes none never needs them).
_CI = (r"(^|/)(\.github/workflows/[^/]+\.ya?ml|\.gitlab-ci\.ya?ml|\.circleci/config\.ya?ml|azure-pipelines\.ya?ml"
       r"|\.travis\.ya?ml|Jenkinsfile|bitbucket-pipelines\.ya?ml|\.buildkite/[^/]+|\.drone\.ya?ml"
       r"|\.woodpecker(\.ya?ml|/[^/]+)|\.gitea/workflows/[^/]+\.ya?ml|\.forgejo/workflows/[^/]+\.ya?ml)$")
_HOOKS = (r"(^|/)(\.git/(modules/.+/)?hooks/[^/]+|\.husky/.+|\.githooks/[^/]+|\.pre-commit-config\.ya?ml"
          r"|lefthook\.ya?ml|\.lefthook\.ya?ml)$")


@cache
def _places() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The CI and hook patterns, compiled."""
    return re.compile(_CI), re.compile(_HOOKS)


_NAMES: dict[str, str] = {
    "Makefile": "a Makefile (runs at `make`)", "makefile": "a Makefile (runs at `make`)",
    "GNUmakefile": "a Makefile (runs at `make`)", ".envrc": "an .envrc (direnv runs it on entering the folder)",
    "setup.py": "a setup.py (runs at `pip install`)", "conftest.py": "a conftest.py (runs at `pytest`)",
    "sitecustomize.py": "a sitecustomize.py (runs at every Python start)",
    "usercustomize.py": "a usercustomize.py (runs at every Python start)",
    "build.rs": "a Cargo build script (runs at `cargo build`)", "noxfile.py": "a noxfile (runs at `nox`)",
    "Justfile": "a Justfile (runs at `just`)", "justfile": "a Justfile (runs at `just`)",
    "Rakefile": "a Rakefile (runs at `rake`)", "Taskfile.yml": "a Taskfile (runs at `task`)",
    "devcontainer.json": "a devcontainer (runs its commands when the folder is opened in a container)",
}


def _json_part(text: bytes | None, *keys: str) -> object:
    if text is None:
        return None
    try:
        data = json.loads(text.decode("utf-8", "replace"))
    except ValueError:
        return "(not JSON)"
    return {k: data.get(k) for k in keys} if isinstance(data, dict) else "(not an object)"


def _toml_part(text: bytes | None) -> object:
    if text is None:
        return None
    # tomllib: only a pyproject.toml or TOML file a command wrote
    import tomllib

    try:
        data = tomllib.loads(text.decode("utf-8", "replace"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return "(not TOML)"
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    # The build system, and the build hooks of the backends that have them.
    return {"build-system": data.get("build-system"), "hatch": (tool.get("hatch") or {}).get("build"),
            "setuptools": {k: (tool.get("setuptools") or {}).get(k) for k in ("cmdclass", "script-files")},
            "pdm": (tool.get("pdm") or {}).get("build"), "scikit-build": tool.get("scikit-build"),
            "poetry": (tool.get("poetry") or {}).get("build")}


_PARTS: dict[str, tuple[str, Callable[[bytes | None], object]]] = {
    "package.json": ("package.json scripts (run at `npm install`, `npm test`, ...)",
                     lambda t: _json_part(t, "scripts", "bin", "husky", "simple-git-hooks", "lint-staged")),
    "pyproject.toml": ("pyproject.toml's build system (runs at `pip install`)", _toml_part),
    "tasks.json": ("an editor's tasks (run when the folder is opened, or by a key)", lambda t: t),
}


def _subfolders_project_file(parts: list[str]) -> bool:
    """A project file of a subfolder of the workspace. The workspace's own are protected (asked
    before any write, read-only in the sandbox), and nanohermes writes there itself (a rule
    the person saves for the project), so only a subfolder's are worth a warning."""
    return len(parts) > 1 and project_file(parts[1:])


def runs_later(path: str, before: bytes | None = None, after: bytes | None = None, *,
               contents_known: bool = False, hooks: tuple[str, ...] = ()) -> str | None:
    """Why the workspace-relative `path`, created or changed (`before`/`after` its contents,
    None where it did not exist, when `contents_known`), runs code later; None when it does not.
    `hooks`: more hooks folders (workspace-relative), those `core.hooksPath` names."""
    path = path.replace("\\", "/")
    name = posixpath.basename(path)
    if (where := _by_place(path, name, hooks)) is not None:
        return where
    if name in _PARTS and (name != "tasks.json" or path.endswith(".vscode/tasks.json")):
        what, part = _PARTS[name]
        if contents_known and after is not None and before is not None and part(before) == part(after):
            return None  # the file changed, but not the part that runs code
        return what
    if name.endswith(".mk"):
        return "a Makefile (runs at `make`)"
    return _NAMES.get(name) or None


def _by_place(path: str, name: str, hooks: tuple[str, ...]) -> str | None:
    """What runs the file at `path` by where it is, whatever it holds: a git hook, a CI
    workflow, a virtual environment's `.pth` file, a subfolder's project file; None for a file
    elsewhere."""
    ci, hooks_at = _places()
    if hooks_at.search(path) or any(path.startswith(h.rstrip("/") + "/") for h in hooks):
        return "a git hook (runs at your next commit, checkout or push)"
    if ci.search(path):
        return "a CI workflow (runs at your next push)"
    if name.endswith(".pth") and ("site-packages/" in path or "dist-packages/" in path):
        return "a .pth file of a virtual environment (runs at every Python start there)"
    if _subfolders_project_file(path.split("/")):
        return ("a project file of nanohermes or Claude Code (its hooks, MCP servers, commands and rules apply at the "
                "next start in that folder)")
    return None


# -- what Python runs at every start in the workspace's virtual environments ---------------------

_STARTUP = ("sitecustomize.py", "usercustomize.py")
_SITE_DIRS = ("site-packages", "dist-packages")
# Where a virtual environment keeps its site folders (POSIX, its lib64 twin, Windows).
_VENV_SITES = ("lib/python*/site-packages", "lib/python*/dist-packages", "lib64/python*/site-packages",
               "Lib/site-packages")

Stamp = tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns): ctime cannot be set back


@dataclass(frozen=True)
class Startup:
    """The start-up files found (workspace-relative path -> stamp), and why the look is
    incomplete ("" when it is not)."""

    files: dict[str, Stamp] = field(default_factory=dict)
    problem: str = ""
    gits: dict[str, GitStamp] = field(default_factory=dict)  # the subfolders' `.git` entries (real paths)


def startup_files(workspace: Path, max_folders: int) -> Startup:
    """Every `.pth`, `sitecustomize.py` and `usercustomize.py` at the top of a site folder of
    the workspace: those of each virtual environment (a folder with `pyvenv.cfg`, not walked
    further) and of any `site-packages` or `dist-packages` folder. At most `max_folders`
    folders are looked at; past that, what was found so far and the bound's note. A folder
    unchanged since a look listed it is only stat'ed (`gitmeta.listed`): the look runs before
    and after every turn."""
    root = os.path.realpath(workspace)
    sites: list[str] = []
    gits: dict[str, GitStamp] = {}
    todo = [root]
    seen = 0
    problem = ""
    while todo:
        folder = todo.pop()
        seen += 1
        if seen > max_folders:
            problem = (f"the look for Python start-up files (.pth, sitecustomize.py) in the workspace stopped after "
                       f"{plural(max_folders, 'folder')} (limits.startup_scan_folders)")
            break
        listing = listed(folder)  # from the last look's listing while the folder is unchanged
        if listing is None:
            continue
        if folder != root and listing.bare:  # a repository of its own
            gits[folder] = git_entry_stamp(Path(folder))
            continue
        if listing.venv:
            for pattern in _VENV_SITES:
                sites += globlib.glob(os.path.join(globlib.escape(folder), pattern))
            continue
        if listing.git and folder != root:  # the workspace's own is `gitmeta.metadata`'s
            gits[os.path.join(folder, ".git")] = git_entry_stamp(Path(folder, ".git"))
        for name in listing.folders:  # not `.git` nor `node_modules`, which hold no virtual environment
            (sites if name in _SITE_DIRS else todo).append(os.path.join(folder, name))
    files: dict[str, Stamp] = {}
    for site in dict.fromkeys(os.path.realpath(s) for s in sites):
        files.update(_site_files(site, root))
    return Startup(files, problem, gits)


def _site_files(site: str, root: str) -> dict[str, Stamp]:
    out: dict[str, Stamp] = {}
    try:
        with os.scandir(site) as it:
            for e in it:
                if not (e.name.endswith(".pth") or e.name in _STARTUP):
                    continue
                try:
                    st = e.stat()  # Python follows a link to a .pth, and so does this
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    path = os.path.join(site, e.name)
                    shown = os.path.relpath(path, root) if path.startswith(root + os.sep) else path
                    out[Path(shown).as_posix()] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        pass
    return out


def startup_changed(before: Startup, after: Startup) -> list[str]:
    """`path: why` for each start-up file created or changed between the two looks."""
    out = []
    for path, st in sorted(after.files.items()):
        if before.files.get(path) != st:
            name = posixpath.basename(path)
            why = (f"a {name} of a virtual environment (runs at every Python start there)" if name in _STARTUP
                   else "a .pth file of a virtual environment (runs at every Python start there)")
            out.append(f"{path}: {why}")
    return out


def gits_changed(before: Startup, after: Startup, workspace: Path) -> list[str]:
    """`path: why` for each `.git` entry of a subfolder created or changed between the two
    looks that leads to a repository whose config or hooks name a program (`gitmeta.planted_git`):
    the checkpoints leave `.git` out, so this look is what names one."""
    root = os.path.realpath(workspace)
    out = []
    for path, st in sorted(after.gits.items()):
        if before.gits.get(path) != st and planted_git(Path(path), Path(root)):
            out.append(f"{Path(os.path.relpath(path, root)).as_posix()}: a git folder or .git file of a subfolder "
                       "(its repository's config or hooks name a program: your next git command in that folder "
                       "runs it)")
    return out
