"""Permission rules and how a subject is matched: a rule's shape and parsing, what a call
touches (`Target`), subject kinds and effects, and the matchers for command text, path
globs, web hosts and the secret-file list."""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nanohermes.guard.hosts import canonical_host, canonical_ip
from nanohermes.common.modes import Mode
from nanohermes.guard.pathglob import glob_regex
from nanohermes.guard.secrets import DEFAULT_SECRET_FILES, is_secret

__all__ = ["DEFAULT_SECRET_FILES", "is_secret"]  # re-exported: the one list lives in nanohermes.guard.secrets

Decision = Literal["allow", "ask", "deny"]
# What a tool's arguments name: a file path, a command line, a web host, an MCP server's tool, nothing.
SubjectKind = Literal["path", "command", "host", "mcp", "none"]
# What a call does with it. "state" changes only this session's own state (the todo list, a
# sub-agent whose calls are judged by themselves): nothing a mode protects. "store" changes
# what nanohermes keeps beyond the session (the memory store): plan mode changes nothing.
Effect = Literal["read", "write", "run", "state", "store"]

# The effects each mode blocks outright (the tool is hidden and refused).
MODE_BLOCKED_EFFECTS: dict[Mode, frozenset[str]] = {
    Mode.PLAN: frozenset({"write", "run", "store"}),
    Mode.DEBUG: frozenset({"write"}),
}


@dataclass(frozen=True)
class Target:
    """What one call touches, computed once by the runtime from the tool's declaration and
    handed to both `decide()` and the tool, so the path judged is the path used.

    `subjects` are what rule patterns see: every path (physical: symlinks and `..` resolved
    the way the kernel does; workspace-relative inside it, absolute outside), the command
    line, or the canonical host. `aliases` are other spellings of those paths that the call
    also suggests (`l/../x` read lexically while `l` is a symlink): deny and ask rules and the
    secret list look at them too, and an allow rule must cover them as well.
    """

    kind: SubjectKind = "none"
    effect: Effect = "run"
    subjects: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    protected: str = ""  # why it writes somewhere that always needs a person's yes ("": it does not)
    shows_contents: bool = True  # a path reader whose output holds the file's contents
    raw: tuple[str, ...] = ()  # the paths as the call wrote them
    paths: tuple[Path, ...] = ()  # the resolved path of each of `raw`, for the tool to use
    # Windows paths of `raw` read as the workspace paths they name: (as written, as used).
    mapped: tuple[tuple[str, str], ...] = ()
    cwd: Path | None = None  # a command's directory
    addresses: tuple[str, ...] = ()  # what a host resolves to, canonical
    # For a command: a secret file it would print, found through the file system (a link, a
    # glob, a folder read whole), or why that could not be checked; "" when none.
    secret_read: str = ""
    # For a command: a path it would print that a read rule covers, as (decision, the path as
    # rules see it, the rule), found through the file system like `secret_read`; () when none.
    rule_read: tuple[str, str, str] | tuple[()] = ()

    @property
    def read_only(self) -> bool:
        return self.effect == "read"

    def used(self, written: str) -> str:
        """The path `written` (one of `raw`) as the call uses it: the workspace path a Windows
        path was read as, else as written. For a tool that hands the path on as text (to git)."""
        return next((used for raw, used in self.mapped if raw == written), written)

    @property
    def shown(self) -> str:
        """What a refusal or a question names: the paths as judged, the command line, the
        host; "" for a call that touches none of these."""
        return ", ".join(self.subjects) if self.kind in ("path", "command", "host") else ""

    def path_of(self, raw: str) -> Path | None:
        """The resolved path judged for `raw` (as the call wrote it), or None if not judged."""
        return self.paths[self.raw.index(raw)] if raw in self.raw else None


_RULE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\((.*)\))?\s*$", re.S)

# The origin of a rule granted by a custom command's allowed-tools, for its turn only: what a
# sub-agent never inherits.
GRANT_ORIGIN = "allowed-tools of /"


@dataclass(frozen=True)
class Rule:
    """A permission rule: `tool` or `tool(pattern)`, and where it came from."""

    tool: str  # a tool name, or an MCP prefix such as mcp__server
    pattern: str | None = None
    origin: str = field(default="", compare=False)  # where it came from, for /permissions
    # The real path of the workspace the rule is read for: a path pattern that is absolute
    # (`/home/me/proj/secrets/**`, `~/proj/.env`) meets the workspace's files through it,
    # which subjects name relative to the workspace. "" for a rule read for no workspace.
    root: str = field(default="", compare=False, repr=False)

    @classmethod
    def parse(cls, text: str, origin: str = "", kinds: Mapping[str, SubjectKind] | None = None,
              root: str = "") -> Rule:
        """A rule from its text; `kinds` (the tools' subject kinds by name, when known) checks
        the pattern's shape for its tool; `root`: the real path of the workspace it is read for."""
        m = _RULE.match(text)
        if not m:
            raise ValueError(f"malformed permission rule {text!r}; expected `tool` or `tool(pattern)`")
        pattern = m.group(2)
        rule = cls(m.group(1), pattern.strip() if pattern is not None else None, origin, root)
        if problem := rule_problem(rule, (kinds or {}).get(rule.tool)):
            raise ValueError(f"malformed permission rule {text!r}; {problem}")
        return rule

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def names(self, tool_name: str) -> bool:
        """Does the rule name this tool? `mcp__srv` names every tool of that server."""
        return tool_name == self.tool or (self.tool.startswith("mcp__") and tool_name.startswith(self.tool + "__"))

    def matches(self, tool_name: str, subject: str | None, kind: SubjectKind | None = None) -> bool:
        """Does the rule cover this tool and subject? `kind` is the tool's declared subject
        kind; without it, a `domain:` pattern is read as a host and anything else as text."""
        if not self.names(tool_name):
            return False
        if self.pattern is None:
            return True
        if subject is None:
            return False
        if kind is None:
            kind = "host" if self.pattern.startswith("domain:") else "none"
        if kind == "path":
            return match_path(self.pattern, subject, self.root)
        if kind == "host":
            return match_domain(self.pattern, subject)
        if kind == "command":
            return match_command_text(self.pattern, subject)
        return fnmatch.fnmatchcase(subject, self.pattern)


def rule_problem(rule: Rule, kind: SubjectKind | None = None) -> str | None:
    """What is wrong with a rule's pattern for a tool of subject `kind` (when known), or None."""
    if rule.pattern is None:
        return None
    if not rule.pattern:
        return f"empty pattern; write `{rule.tool}` to name the whole tool"
    if kind == "host" and not rule.pattern.startswith("domain:"):
        return f"{rule.tool} patterns look like `domain:example.com`, not `{rule.pattern}`"
    return None


def names_tool(rules: list[str] | tuple[str, ...], tool_name: str) -> bool:
    """Whether a plain list of tool names / rules (allowed_tools, disallowed_tools) names the tool."""
    for text in rules:
        try:
            if Rule.parse(text).names(tool_name):
                return True
        except ValueError:
            continue
    return False


# -- matchers ------------------------------------------------------------------------------

def match_command_text(pattern: str, text: str) -> bool:
    """`git log *` matches `git log` and `git log -5`; `npm test` only itself."""
    if pattern.endswith(" *") and fnmatch.fnmatchcase(text, pattern[:-2]):
        return True
    if pattern.endswith(":*"):  # the `prefix:*` spelling some users bring along
        return fnmatch.fnmatchcase(text, pattern[:-2]) or fnmatch.fnmatchcase(text, pattern[:-2] + " *")
    return fnmatch.fnmatchcase(text, pattern)


def match_path(pattern: str, subject: str, root: str = "") -> bool:
    """A path glob against a workspace-relative (or, outside it, absolute) path. An absolute
    pattern (`~` expanded) names real paths: its literal folders are resolved as the kernel
    resolves them, as subjects are, and with `root` (the workspace's real path) it meets the
    workspace's files too, so `read_file(/home/me/proj/secrets/**)` covers `secrets/key.txt`
    of a session in `/home/me/proj`."""
    pattern = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if "/" not in pattern.rstrip("/"):  # a bare name: any depth, like .gitignore
        return bool(glob_regex(pattern.rstrip("/"), rule=True).fullmatch(posixpath.basename(subject.rstrip("/"))))
    if pattern.startswith("/"):
        pattern = real_pattern(pattern)
        if root and not subject.startswith("/"):
            subject = root if subject == "." else root.rstrip("/") + "/" + subject
    return bool(glob_regex(pattern.rstrip("/") if pattern != "/" else pattern, rule=True).fullmatch(subject))


@functools.lru_cache(maxsize=1024)  # a walk matches every file it meets against the same few patterns
def real_pattern(pattern: str) -> str:
    """An absolute path pattern with the folders it spells out before its first wildcard
    resolved as the kernel resolves them (`/home/me/link/**` names what the link leads to)."""
    parts = pattern.split("/")
    literal = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), len(parts))
    head = "/".join(parts[:literal]) or "/"
    try:
        real = os.path.realpath(head)
    except OSError:  # a folder on its way cannot be searched (/proc/1/root): matched as written
        return pattern
    rest = parts[literal:]
    return posixpath.join(real, *rest) if rest else real


def match_domain(pattern: str, subject: str) -> bool:
    """`domain:docs.python.org`, `domain:*.python.org`, `domain:127.0.0.1` (an IP in any
    spelling) against a host; both sides are compared in canonical form."""
    host = canonical_host(subject)
    pat = pattern[len("domain:"):] if pattern.startswith("domain:") else pattern
    if canonical_ip(pat):
        return canonical_host(pat) == host
    return fnmatch.fnmatchcase(host, pat.lower().rstrip("."))


def literal_pattern(pattern: str) -> bool:
    """Does a rule pattern match one text only (no wildcard but `[c]` escapes)?"""
    bare = re.sub(r"\[[^\]]\]", "", pattern)
    return not any(c in bare for c in "*?[")


def escape_pattern(text: str) -> str:
    """A literal for use inside a rule pattern."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
