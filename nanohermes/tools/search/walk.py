"""The workspace walk grep and glob share: the ignore rules (.gitignore, .ignore, .rgignore,
git's exclude files, the build and cache folders), the walker that yields files in path
order, and how both tools show a walked path and a walk cut short."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nanohermes.common.budget import Limits
    from nanohermes.config import Config

# Build output, dependency and cache folders nobody wants in search results. Config replaces
# the list with `search_ignore_dirs` or extends it with `search_ignore_extra`.
DEFAULT_IGNORE_DIRS: tuple[str, ...] = (
    ".eggs", ".gradle", ".hypothesis", ".mypy_cache", ".next", ".nox", ".nuxt", ".pytest_cache",
    ".ruff_cache", ".terraform", ".tox", ".venv", "__pycache__", "bower_components", "build",
    "dist", "node_modules", "target", "venv",
)


def ignore_dir_names(config: Config | None) -> frozenset[str]:
    """The directory names the walk skips at any depth below the search root."""
    if config is None:
        return frozenset(DEFAULT_IGNORE_DIRS)
    base = DEFAULT_IGNORE_DIRS if config.search_ignore_dirs is None else config.search_ignore_dirs
    return frozenset([*base, *config.search_ignore_extra])


# -- ignore rules --------------------------------------------------------------------------

# Kinds, highest precedence first (ripgrep's order); the last two count only inside git.
_KIND_FILES = (".rgignore", ".ignore", ".gitignore")
_GIT_KINDS = (2, 3)

_Pattern = tuple[bool, "re.Pattern[str]"]  # (ignores?, regex over a dir-relative path)


class _Rules:
    """The patterns of one ignore file (or of git's two exclude files), the last that matches
    deciding; `first` is one regex matching wherever any of them does, so that a path none of
    them decides (most paths) costs one match instead of one per pattern."""

    __slots__ = ("first", "patterns")

    def __init__(self, patterns: list[_Pattern]) -> None:
        self.patterns = patterns
        self.first = _union(patterns) if len(patterns) > 1 else None

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def decide(self, probe: str, is_dir: bool) -> bool | None:
        if self.first is not None and self.first.match(probe) is None:
            return None
        for ignores, rx in reversed(self.patterns):
            m = rx.match(probe)
            if m is None:
                continue
            # pathspec's regexes also match the contents of a directory (`foo/**` matches `foo/`);
            # git decides a directory by its own path, so a bare "contents" match is not one.
            if is_dir and m.end() == len(probe) and not m.groupdict().get("ps_d"):
                continue
            return ignores
        return None


def _union(patterns: list[_Pattern]) -> re.Pattern[str] | None:
    """One regex that matches where any of `patterns` does (their groups made plain, so that
    the names cannot clash), or None when they cannot be joined into one."""
    flags = {rx.flags for _, rx in patterns}
    if len(flags) != 1:
        return None
    joined = "|".join(f"(?:{rx.pattern.replace('(?P<ps_d>', '(?:')})" for _, rx in patterns)
    try:
        return re.compile(joined, flags.pop())
    except re.error:
        return None


NO_RULES = _Rules([])


def _load_patterns(path: Path) -> list[_Pattern]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    # pathspec: only a walk that meets an ignore file
    from pathspec import GitIgnoreSpec

    out: list[_Pattern] = []
    for line in text.lstrip("\ufeff").splitlines():
        try:  # one line at a time: git skips a bad line, it does not drop the file
            spec = GitIgnoreSpec.from_lines([line])
        except ValueError:
            continue
        for p in spec.patterns:
            if p.include is not None and p.regex is not None:
                out.append((bool(p.include), p.regex))
    return out


def _git_exclude_file(dot_git: Path) -> Path:
    """`info/exclude` of a repository; `.git` may be a file pointing elsewhere (worktrees)."""
    if dot_git.is_file():
        try:
            line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return dot_git / "info" / "exclude"
        if line.startswith("gitdir:"):
            gitdir = (dot_git.parent / line[7:].strip()).resolve()
            try:
                common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
            except OSError:
                common = gitdir
            return common / "info" / "exclude"
    return dot_git / "info" / "exclude"


_EXCLUDES_FILE = re.compile(r'^\s*excludesfile\s*=\s*"?\s*(\S+?)\s*"?\s*$', re.I | re.M)


def global_excludes_file() -> Path:
    """Git's global excludes file as ripgrep finds it: `core.excludesFile` from ~/.gitconfig,
    else from $XDG_CONFIG_HOME/git/config, else $XDG_CONFIG_HOME/git/ignore."""
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    for config in (Path.home() / ".gitconfig", xdg / "git" / "config"):
        try:
            m = _EXCLUDES_FILE.search(config.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if m:
            return Path(os.path.expanduser(m.group(1)))
    return xdg / "git" / "ignore"


_SPECIAL = frozenset([*_KIND_FILES, ".git"])  # the names a folder's listing looks for


@dataclass
class _Level:
    """The ignore files of one directory, and how to express a walk path relative to it."""

    prefix: str  # prepended to the root-relative path (directories above the root)
    strip: int  # characters of the root-relative path to drop (the root and below)
    has_git: bool
    kinds: tuple[_Rules, _Rules, _Rules, _Rules]

    @classmethod
    def read(cls, directory: str, prefix: str, strip: int, has_git: bool, names: frozenset[str] | None) -> _Level | None:
        """The level of `directory`, or None when it has no rules; `names`: which of its
        ignore files exist (None: try each)."""
        if names is not None and not names and not has_git:
            return None  # most folders of a walk: nothing to read
        folder = Path(directory)
        rg, ig, gi = (_Rules(_load_patterns(folder / f)) if names is None or f in names else NO_RULES
                      for f in _KIND_FILES)
        # The global file first: info/exclude, read after it, wins where both decide.
        exclude = (_Rules(_load_patterns(global_excludes_file()) + _load_patterns(_git_exclude_file(folder / ".git")))
                   if has_git else NO_RULES)
        if not has_git and not (rg or ig or gi):
            return None
        return cls(prefix, strip, has_git, (rg, ig, gi, exclude))


# The ignore files that decide a path below a folder, in the order they are asked: each kind
# (highest precedence first), innermost folder first, git's kinds only up to the repository
# root. Made again only in a folder that adds ignore files; empty where none applies.
_Plan = list[tuple[_Rules, str, int]]  # (rules, prefix, strip)


def _plan(levels: list[_Level]) -> _Plan:
    any_git = any(lv.has_git for lv in levels)
    plan: _Plan = []
    for kind in range(4):
        if kind in _GIT_KINDS and not any_git:
            break
        for lv in reversed(levels):
            if lv.kinds[kind]:
                plan.append((lv.kinds[kind], lv.prefix, lv.strip))
            if kind in _GIT_KINDS and lv.has_git:
                break  # git rules stop at the repository root
    return plan


def _ignored(plan: _Plan, rel: str, is_dir: bool) -> bool:
    tail = "/" if is_dir else ""
    for rules, prefix, strip in plan:
        verdict = rules.decide(prefix + rel[strip:] + tail, is_dir)
        if verdict is not None:
            return verdict
    return False


def _ancestor_levels(root: Path) -> list[_Level]:
    levels: list[_Level] = []
    root = Path(os.path.realpath(root))  # ripgrep sees the physical path of its working folder
    for parent in root.parents:
        prefix = root.relative_to(parent).as_posix() + "/"
        lv = _Level.read(str(parent), prefix, 0, os.path.lexists(parent / ".git"), None)
        if lv is not None:
            levels.append(lv)
    levels.reverse()  # outermost first, like the walk's own stack
    return levels


def _listing(directory: str) -> tuple[list[str], frozenset[str], bool]:
    """A folder's entries to walk, sorted: `name/` for a folder, `name` for a regular file,
    links, `.git` and anything else left out; which ignore files it has; whether it holds a
    `.git`. Sorting `name/` among the names makes a depth-first walk come out in the order
    a sort of the whole paths would give."""
    try:
        with os.scandir(directory) as it:
            entries = list(it)
        # Without following links both are False for a link; both come from the folder's listing
        # itself (no stat) wherever the file system says an entry's type, as the common ones do.
        keys = [e.name + "/" for e in entries if e.is_dir(follow_symlinks=False)]
        keys += [e.name for e in entries if e.is_file(follow_symlinks=False)]
    except OSError:  # unreadable, or gone since: walked as empty
        return [], frozenset(), False
    # Ignore files are read through a link, as ripgrep reads them; any `.git` marks a repository.
    found = _SPECIAL.intersection([e.name for e in entries])
    has_git = ".git" in found
    if has_git:
        found -= {".git"}
        keys = [k for k in keys if k != ".git/" and k != ".git"]
    keys.sort()
    return keys, found, has_git


@dataclass
class Walk:
    files: list[str]  # root-relative, forward slashes; sorted when truncated
    truncated: bool  # more files existed than the cap allowed
    pruned: list[str] = field(default_factory=list)  # folders not entered (Python walk only)


def iter_walk(root: Path, ignore_dirs: frozenset[str], pruned: list[str] | None = None) -> Iterator[str]:
    """Yield the root-relative paths of the walk's files in plain string order, lazily."""
    top = os.path.join(root, "")
    # One frame per folder being walked: its entries (an iterator left where the walk went
    # down), its root-relative path ("" or ending in "/"), the levels and plan in force.
    Frame = tuple[Iterator[str], str, list[_Level], _Plan]

    def frame(rel: str, levels: list[_Level], plan: _Plan) -> Frame:
        keys, names, has_git = _listing(top + rel)
        lv = _Level.read(top + rel, "", len(rel), has_git, names)
        if lv is not None:
            levels = [*levels, lv]
            plan = _plan(levels)
        return iter(keys), rel, levels, plan

    base = _ancestor_levels(root)
    stack = [frame("", base, _plan(base))]
    while stack:
        keys, rel, levels, plan = stack[-1]
        for key in keys:
            if key[-1] != "/":
                if not plan or not _ignored(plan, rel + key, False):
                    yield rel + key
                continue
            child = rel + key[:-1]
            if key[:-1] in ignore_dirs or (plan and _ignored(plan, child, True)):
                if pruned is not None:
                    pruned.append(child)
                continue
            stack.append(frame(rel + key, levels, plan))
            break  # down into it; this folder's iterator goes on from here after it
        else:
            stack.pop()


class Capped:
    """Passes on at most `cap` items; `truncated` turns true once a further one shows up."""

    def __init__(self, items: Iterable[str], cap: int) -> None:
        self.items = items
        self.cap = cap
        self.truncated = False

    def __iter__(self) -> Iterator[str]:
        items = iter(self.items)
        yield from islice(items, self.cap)
        if next(items, None) is not None:
            self.truncated = True


def walk_python(root: Path, ignore_dirs: frozenset[str], max_files: int) -> Walk:
    """The whole walk in pure Python, up to `max_files` files."""
    pruned: list[str] = []
    capped = Capped(iter_walk(root, ignore_dirs, pruned), max_files)
    files = list(capped)
    return Walk(files, capped.truncated, pruned)


# -- showing the walk ----------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line_path(path: str) -> str:
    """A path on one line: control characters (a newline in a file name) shown escaped."""
    if not _CONTROL.search(path):
        return path
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], path)


def shown_prefix(shown: str) -> str:
    """What goes before a root-relative path to show it from the workspace."""
    return "" if shown == "." else shown.rstrip("/") + "/"


def walk_note(limits: Limits) -> str:
    """The note for a walk stopped at `grep_max_files`."""
    return f"… stopped walking after {limits.grep_max_files} files; search a narrower path"
