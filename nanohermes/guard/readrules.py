"""What read rules cover on disk: the one check of a path against them (`read_denied`, for
whatever reads a file: what nanohermes reads by itself too), the rules' texts as they come
from the config in either syntax (`config_read_rules`), and the paths the sandbox withholds
from sandboxed commands because a read rule covers them (`covered`).

Which rules count and how a path is matched is `permissions.reading`'s: a deny or ask rule on
`read_file` (Claude Code's `Read(...)`) with a path pattern, matching the path or a folder
above it. The look through the file system starts where each pattern's literal part ends
(`secrets/**` at `secrets`, `*.key` at the workspace's root, `~/.aws/**` at `~/.aws`),
does not enter `.git` or follow links (a link a rule covers is withheld where it leads), stops
at a folder a rule covers (withheld whole), and is bounded like the look for secret files.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nanohermes.guard.permissions import READER, Policy, Rule, Verdict, match_path, read_verdict, real_pattern
from nanohermes.config.claude_files import translate_rule
from nanohermes.guard.pathrules import compute_target

if TYPE_CHECKING:
    from nanohermes.config import Config

_GLOB = re.compile(r"[*?\[]")


def read_denied(policy: Policy, workspace: Path, path: str | Path, tool_name: str = READER) -> Verdict | None:
    """The deny or ask verdict of a read rule covering `path` (relative to the workspace, `~`
    expanded), resolved as the file tools resolve it (its links and its spelling as written
    both count), or None when no read rule covers it. `pathrules.PathProblem` for a path that
    cannot be judged (a NUL byte)."""
    target = compute_target("path", "read", [str(path)], workspace)
    return read_verdict(policy, tool_name, target)


def config_read_rules(config: Config, workspace: Path) -> tuple[str, ...]:
    """The path patterns of the config's deny and ask rules on reading, written in
    nanohermes's syntax or Claude Code's (`Read(./secrets/**)`)."""
    patterns: list[str] = []
    for kind, texts in (("deny", config.permissions.deny), ("ask", config.permissions.ask)):
        for text in texts:
            for ours in translate_rule(text, kind, workspace) or []:
                try:
                    rule = Rule.parse(ours)
                except ValueError:
                    continue
                if rule.pattern and rule.names(READER) and rule.pattern not in patterns:
                    patterns.append(rule.pattern)
    return tuple(patterns)


@dataclass(frozen=True)
class Covered:
    """What the look found: each covered file's real path with the (device, inode) it had,
    the covered folders (withheld whole), and why the look is incomplete ("" when it is not)."""

    files: tuple[tuple[str, int, int], ...] = ()
    folders: tuple[str, ...] = ()
    problem: str = ""


def _start(pattern: str, root: str) -> str:
    """Where the look for `pattern` starts: the folder its literal part names."""
    text = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
    text = text[2:] if text.startswith("./") else text
    if "/" not in text.rstrip("/") and not os.path.isabs(text):
        return root  # a bare name matches at any depth
    text = real_pattern(text) if os.path.isabs(text) else text  # the real folders, as the walk meets them
    base = "/" if os.path.isabs(text) else root
    literal = []
    for part in text.split("/"):
        if not part or _GLOB.search(part):
            if part:
                break
            continue
        literal.append(part)
    return os.path.join(base, *literal) if literal else base


class _Look:
    def __init__(self, root: str, patterns: tuple[str, ...], max_entries: int, max_secs: float) -> None:
        self.root = root.rstrip("/") + "/"
        self.patterns = patterns
        self.left = max_entries
        self.max_entries, self.max_secs = max_entries, max_secs
        self.deadline = time.monotonic() + max_secs
        self.files: dict[str, tuple[str, int, int]] = {}
        self.folders: dict[str, None] = {}

    def subject(self, path: str) -> str:
        return path[len(self.root):] if path.startswith(self.root) else path

    def covers(self, path: str) -> bool:
        subject = self.subject(path)
        return any(match_path(p, subject, self.root.rstrip("/")) for p in self.patterns)

    def spent(self) -> str:
        self.left -= 1
        if self.left < 0:
            return (f"more than {self.max_entries} files and folders to look through for what read rules cover "
                    "(limits.sandbox_secret_scan_entries)")
        if time.monotonic() > self.deadline:
            return f"the look for what read rules cover took over {self.max_secs:g}s (limits.sandbox_secret_scan_secs)"
        return ""

    def add(self, path: str) -> None:
        """Withhold `path` (a link: where it leads), a file by its identity, a folder whole."""
        real = os.path.realpath(path)
        try:
            st = os.stat(real)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode):
            self.folders.setdefault(real)
        elif stat.S_ISREG(st.st_mode):
            self.files.setdefault(real, (real, st.st_dev, st.st_ino))

    def chain(self, start: str) -> list[str]:
        """`start` and the folders above it, up to (not including) the workspace's root or /."""
        out: list[str] = []
        path = start
        while path not in ("/", self.root.rstrip("/")):
            out.append(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        return out

    def walk(self, start: str) -> str:
        """Look below `start` (itself first, and the folders above it); why it stopped early, or ""."""
        if any(self.covers(f) for f in self.chain(start)):
            if os.path.lexists(start):
                self.add(start)
            return ""
        todo = [start]
        while todo:
            folder = todo.pop()
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                if too_much := self.spent():
                    return too_much
                if e.name == ".git":
                    continue
                if self.covers(e.path):
                    self.add(e.path)
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        todo.append(e.path)
                except OSError:
                    continue
        return ""


def covered(workspace: Path, patterns: tuple[str, ...], *, max_entries: int, max_secs: float) -> Covered:
    """The files and folders the read rules' `patterns` cover, inside the workspace (matched
    workspace-relative, and as absolute paths by an absolute pattern) and outside it (matched as
    absolute paths), looking at no more than
    `max_entries` entries for no longer than `max_secs`."""
    if not patterns:
        return Covered()
    root = os.path.realpath(workspace)
    look = _Look(root, patterns, max_entries, max_secs)
    starts = sorted({_start(p, root) for p in patterns}, key=len)
    chosen: list[str] = []
    for s in starts:  # one walk for nested starts: the outer one sees what the inner would
        if not any(s == c or s.startswith(c.rstrip("/") + "/") for c in chosen):
            chosen.append(s)
    problem = ""
    for start in chosen:
        if problem := look.walk(start):
            break
    return Covered(tuple(sorted(look.files.values())), tuple(look.folders), problem)
