"""Who may run what: modes, tool lists, rules, and `decide()` -> allow | ask | deny.

Pure functions over plain values, table-tested. The same matcher filters the tool specs the
model sees (`visible`) and checks every call at run time (`decide`), because a model can
replay a tool name from history after the mode changed.

Check order: mode block list, then `disallowed_tools`, then `allowed_tools` (when non-empty,
only those), then deny rules, then plan-mode read-only check, then protected writes, then
goal mode / --yes, then ask rules, then allow rules (learned ones included), the built-in
read-only commands, the secret-file list, the question per web host (default and
accept-edits modes) and the tool's own approval level.

Rules are `tool` or `tool(pattern)`. What the pattern is matched against comes from the
tool's declared subject kind (carried by the call's `Target`): a command prefix with `*` for
a command tool, checked against every simple command of the line (see shellparse); a path
glob relative to the workspace for path tools (`*` stays inside a folder, `**` crosses
folders, a pattern without `/` matches the file name at any depth), checked against every
path the call touches; `domain:host` for host tools, compared in canonical form; a name
prefix `mcp__server` for MCP tools. Modes block by effect, never by name: plan blocks every
tool that writes or runs, debug every tool that writes.

Commands fail closed: a line the shell analysis cannot follow exactly (see shellparse) is
asked every time, and refused when nobody will be asked and a deny rule applies; deny and
ask rules see through git's global options; the built-in read-only list checks each
program's arguments the way the program parses them; "always" learns the exact line for
programs whose arguments run code. Facts that need the file system (protected paths,
secret files reached through links, globs and folders) are computed by pathrules and
passed in on the `Target`.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Literal

from nanohermes.hosts import canonical_host, canonical_ip, host_matches
from nanohermes.shellparse import ParseError, SimpleCommand, Word, split

Decision = Literal["allow", "ask", "deny"]
# What a tool's arguments name: a file path, a command line, a web host, an MCP server's tool, nothing.
SubjectKind = Literal["path", "command", "host", "mcp", "none"]
# What a call does with it. "state" changes only this session's own state (the todo list, a
# sub-agent whose calls are judged by themselves): nothing a mode protects. "store" changes
# what nanohermes keeps beyond the session (the memory store): plan mode changes nothing.
Effect = Literal["read", "write", "run", "state", "store"]

# The effects each mode blocks outright (the tool is hidden and refused).
MODE_BLOCKED_EFFECTS: dict[str, frozenset[str]] = {
    "plan": frozenset({"write", "run", "store"}),
    "debug": frozenset({"write"}),
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
    protected: bool = False  # writes somewhere that always needs a person's yes
    shows_contents: bool = True  # a path reader whose output holds the file's contents
    raw: tuple[str, ...] = ()  # the paths as the call wrote them
    paths: tuple[Path, ...] = ()  # the resolved path of each of `raw`, for the tool to use
    cwd: Path | None = None  # a command's directory
    addresses: tuple[str, ...] = ()  # what a host resolves to, canonical
    # For a command: a secret file it would print, found through the file system (a link, a
    # glob, a folder read whole), or why that could not be checked; "" when none.
    secret_read: str = ""

    @property
    def read_only(self) -> bool:
        return self.effect == "read"

    def path_of(self, raw: str) -> Path | None:
        """The resolved path judged for `raw` (as the call wrote it), or None if not judged."""
        return self.paths[self.raw.index(raw)] if raw in self.raw else None


DEFAULT_SECRET_FILES: tuple[str, ...] = (
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "credentials.json", "credentials", ".netrc", ".pgpass", ".npmrc", ".pypirc", "*.keystore", "*.jks",
)

_RULE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(frozen=True)
class Rule:
    tool: str  # a tool name, or an MCP prefix such as mcp__server
    pattern: str | None = None
    origin: str = field(default="", compare=False)  # where it came from, for /permissions

    @classmethod
    def parse(cls, text: str, origin: str = "") -> Rule:
        m = _RULE.match(text)
        if not m:
            raise ValueError(f"malformed permission rule {text!r}; expected `tool` or `tool(pattern)`")
        pattern = m.group(2)
        rule = cls(m.group(1), pattern.strip() if pattern is not None else None, origin)
        if problem := rule_problem(rule):
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
            return match_path(self.pattern, subject)
        if kind == "host":
            return match_domain(self.pattern, subject)
        if kind == "command":
            return match_command_text(self.pattern, subject)
        return fnmatch.fnmatchcase(subject, self.pattern)


def rule_problem(rule: Rule, kind: SubjectKind | None = None) -> str | None:
    """What is wrong with a rule's pattern for its tool, or None. `kind` defaults to the
    declared subject kind of the built-in tool of that name."""
    if rule.pattern is None:
        return None
    if not rule.pattern:
        return f"empty pattern; write `{rule.tool}` to name the whole tool"
    if kind is None:
        kind = builtin_declarations().get(rule.tool, ("none", "run"))[0]
    if kind == "host" and not rule.pattern.startswith("domain:"):
        return f"{rule.tool} patterns look like `domain:example.com`, not `{rule.pattern}`"
    return None


def builtin_declarations() -> dict[str, tuple[SubjectKind, Effect]]:
    """(subject kind, effect) of each built-in tool, read from the tools' own declarations:
    for checking a rule's shape before any tool exists, and for the /permissions listing."""
    from nanohermes.tools import declarations  # lazy: the tools import this module

    return declarations()


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


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def _glob_regex(pattern: str) -> re.Pattern[str]:
    if pattern not in _GLOB_CACHE:
        out: list[str] = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern.startswith("/**", i) and i + 3 == len(pattern):
                out.append("(?:/.*)?")  # `src/**` also names `src` itself
                i += 3
                continue
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "[":
                end = pattern.find("]", i + 1)
                if end < 0:
                    out.append(re.escape(c))
                else:
                    body = pattern[i + 1:end]
                    out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                    i = end
            else:
                out.append(re.escape(c))
            i += 1
        _GLOB_CACHE[pattern] = re.compile("".join(out) + r"\Z", re.S)
    return _GLOB_CACHE[pattern]


def match_path(pattern: str, subject: str) -> bool:
    """A path glob against a workspace-relative (or, outside it, absolute) path."""
    pattern = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if "/" not in pattern.rstrip("/"):  # a bare name: any depth, like .gitignore
        return bool(_glob_regex(pattern.rstrip("/")).match(posixpath.basename(subject.rstrip("/"))))
    return bool(_glob_regex(pattern.rstrip("/") if pattern != "/" else pattern).match(subject))


def match_domain(pattern: str, subject: str) -> bool:
    """`domain:docs.python.org`, `domain:*.python.org`, `domain:127.0.0.1` (an IP in any
    spelling) against a host; both sides are compared in canonical form."""
    host = canonical_host(subject)
    pat = pattern[len("domain:"):] if pattern.startswith("domain:") else pattern
    if canonical_ip(pat):
        return canonical_host(pat) == host
    return fnmatch.fnmatchcase(host, pat.lower().rstrip("."))


def is_secret(path: str, patterns: tuple[str, ...] | list[str], *, glob: bool = False) -> bool:
    """Does the path's file name match the secret list? With `glob`, the path is itself a shell
    glob: does it match a file name the list would name (`.e*` could be `.env`)?"""
    name = posixpath.basename(path.rstrip("/"))
    if not name:
        return False
    if not glob:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)
    for p in patterns:
        sample = p.replace("*", "x").replace("?", "x")
        if sample.startswith(".") and not name.startswith("."):
            continue  # the shell's * does not match a leading dot
        if fnmatch.fnmatchcase(sample, name) or fnmatch.fnmatchcase(name, p):
            return True
    return False


def escape_pattern(text: str) -> str:
    """A literal for use inside a rule pattern."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


# -- built-in read-only commands -----------------------------------------------------------

def _no(*flags: str) -> Callable[[tuple[str, ...]], bool]:
    """Safe unless one of these options (or `--opt=...`, or a short one glued to others) is used."""
    longs = {f for f in flags if f.startswith("--")}
    shorts = {f[1] for f in flags if len(f) == 2 and f.startswith("-")}
    words = {f for f in flags if not f.startswith("--") and len(f) > 2}  # e.g. find's -exec

    def check(args: tuple[str, ...]) -> bool:
        for a in args:
            if a == "--":
                break
            if a.split("=", 1)[0] in longs or a in words:
                return False
            if a.startswith("-") and not a.startswith("--") and shorts & set(a[1:]):
                return False
        return True

    return check


def _plain(args: tuple[str, ...]) -> bool:
    return True


def _positionals(args: tuple[str, ...], most: int, **takes_value: bool) -> bool:
    """At most `most` non-option arguments (e.g. uniq's second one is an output file)."""
    n = 0
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a.startswith("-") and a != "-":
            skip = takes_value.get(a.lstrip("-"), False)
        else:
            n += 1
    return n <= most


_SED_CMD = re.compile(
    r"""^\s*(?:(?:\d+|\$|/(?:[^/\\]|\\.)*/)(?:\s*,\s*(?:\d+|\$|/(?:[^/\\]|\\.)*/))?)?\s*!?\s*"""
    r"""(?:[pdqQ=nNgGhHxl]|s(?P<d>[^\w\s\\])(?:(?!(?P=d))[^\\]|\\.)*(?P=d)(?:(?!(?P=d))[^\\]|\\.)*(?P=d)[gpiImM0-9]*)?\s*$""",
    re.S,
)
# sed's options: -> takes a value? (-i, -f, --in-place, --file and unknown ones end the check)
_SED_SHORT = {"n": False, "E": False, "r": False, "s": False, "u": False, "z": False, "b": False,
              "e": True, "l": True}
_SED_LONG = {"--quiet": False, "--silent": False, "--regexp-extended": False, "--separate": False,
             "--unbuffered": False, "--null-data": False, "--posix": False, "--debug": False, "--sandbox": False,
             "--binary": False, "--follow-symlinks": False, "--expression": True, "--line-length": True}


def _sed(args: tuple[str, ...]) -> bool:
    """sed without -i or a script file, and with a script of only printing commands (no w,
    W, e, r, R). Options are parsed as sed parses them: `-l 9` takes 9, `-ne p` takes p."""
    scripts: list[str] = []
    explicit = False
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            if not explicit and i < len(args):
                scripts.append(args[i])
            break
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if name not in _SED_LONG:
                return False  # --in-place, --file and anything unknown
            if _SED_LONG[name]:
                if not eq:
                    if i >= len(args):
                        return False
                    value = args[i]
                    i += 1
                if name == "--expression":
                    scripts.append(value)
                    explicit = True
            continue
        if a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                c = a[j]
                if c not in _SED_SHORT:
                    return False  # -i, -f and anything unknown
                if _SED_SHORT[c]:
                    value = a[j + 1:]
                    if not value:
                        if i >= len(args):
                            return False
                        value = args[i]
                        i += 1
                    if c == "e":
                        scripts.append(value)
                        explicit = True
                    break
                j += 1
            continue
        if not explicit and not scripts:
            scripts.append(a)  # the first operand is the script
    if not scripts:
        return False
    return all(all(_SED_CMD.match(part) for part in re.split(r"[;\n]", s)) for s in scripts)


_GIT_READ = frozenset({"status", "log", "diff", "show", "blame", "shortlog", "describe", "rev-parse", "rev-list",
                       "ls-files", "ls-tree", "cat-file", "grep", "merge-base", "name-rev", "count-objects",
                       "whatchanged", "version", "check-ignore", "for-each-ref", "show-ref", "reflog",
                       "branch", "tag", "remote", "stash"})
# Global options before git's subcommand. The harmless ones change only output and pathspec
# reading; every other one points git at another repository, config or program, so a line
# using one is unanalysable (deny and ask rules still see through them).
_GIT_HARMLESS = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
                           "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects", "--no-advice",
                           "--no-lazy-fetch"})
_GIT_GLOBAL_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                               "--super-prefix", "--exec-path", "--list-cmds", "--attr-source"})


def git_globals(argv: tuple[str, ...]) -> tuple[list[str], int]:
    """(git's global options, the index of its subcommand) for argv[0] == git; the index is
    len(argv) when there is no subcommand."""
    opts: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-") or a == "-":
            break
        opts.append(a)
        name = a.split("=", 1)[0]
        # `--exec-path` alone prints a path; with `=` it sets one, like the others' `=` form.
        takes_next = name in _GIT_GLOBAL_VALUE and "=" not in a and name not in ("--exec-path", "--list-cmds")
        i += 2 if takes_next else 1
    return opts, i


_LISTING_VALUE_OPTS = ("--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format")


_AWK_VALUE = frozenset({"-F", "-v", "--field-separator", "--assign"})
_AWK_FLAGS = frozenset({"-b", "--characters-as-bytes", "-c", "--traditional", "-P", "--posix", "-r", "--re-interval",
                        "-S", "--sandbox", "-N", "--use-lc-numeric", "-s", "--no-optimize", "-C", "--copyright",
                        "-V", "--version", "-h", "--help", "-n", "--non-decimal-data"})
_AWK_RISKY = re.compile(r"system|getline|close|fflush|[|>@]|ENVIRON|PROCINFO|\bextension\b")


def _awk(args: tuple[str, ...]) -> bool:
    """awk with inline programs that cannot run commands, write files or load code; options
    outside a short list (`-f`, `-i`, `-l`, `-o`, `-p`, `-d`, `-W` ...) end the check."""
    programs: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        name = a.split("=", 1)[0]
        if name in _AWK_VALUE:
            i += 1 if "=" in a else 2
            continue
        if a[:2] in ("-F", "-v") and len(a) > 2:
            i += 1
            continue
        if name in ("-e", "--source"):
            if "=" in a:
                programs.append(a.split("=", 1)[1])
                i += 1
            elif i + 1 < len(args):
                programs.append(args[i + 1])
                i += 2
            else:
                return False
            continue
        if a in _AWK_FLAGS:
            i += 1
            continue
        return False
    if not programs:
        if i >= len(args):
            return False
        programs.append(args[i])
    return all(not _AWK_RISKY.search(p) for p in programs)


def _git(args: tuple[str, ...]) -> bool:
    """git status|log|diff|show|branch|... without global options other than the harmless
    ones (-C, -c, --git-dir, --exec-path ... point git at other config and programs), and
    without --output, external diff or pager options."""
    opts, i = git_globals(("git", *args))
    if any(o not in _GIT_HARMLESS for o in opts):
        return False
    i -= 1
    if i >= len(args) or args[i] not in _GIT_READ:
        return False
    sub, rest = args[i], args[i + 1:]
    for a in rest:
        if a.split("=", 1)[0] in ("--output", "--ext-diff", "--open-files-in-pager", "--exec", "--textconv",
                                  "--upload-pack", "--receive-pack", "--config-env") or a == "-O" \
                or (a.startswith("-O") and sub == "grep") or a.startswith("--output"):
            return False
    if sub in ("branch", "tag"):
        listing = {"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l", "--show-current",
                   "-i", "--ignore-case", "--no-color", "--color", "--no-column", "-n", "--omit-empty"}
        positional_ok = "--list" in rest or "-l" in rest
        j = 0
        while j < len(rest):
            a = rest[j]
            if a in _LISTING_VALUE_OPTS:
                j += 2
                continue
            if a.split("=", 1)[0] in _LISTING_VALUE_OPTS or a.startswith(("--color=", "--column=")) or a in listing:
                j += 1
                continue
            if a.startswith("-") or not positional_ok:
                return False
            j += 1
        return True
    if sub == "remote":
        return not rest or rest[0] in ("-v", "--verbose", "show", "get-url")
    if sub == "stash":
        return bool(rest) and rest[0] in ("list", "show")
    if sub == "reflog":
        return not rest or rest[0] == "show" or rest[0].startswith("-")
    return True


# name -> check of its arguments (True: read-only). A path such as ./ls never matches a name.
READ_ONLY_COMMANDS: dict[str, Callable[[tuple[str, ...]], bool]] = {
    **{n: _plain for n in (
        "ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "true", "false", "test", "[", "which", "whoami",
        "id", "uname", "basename", "dirname", "realpath", "readlink", "stat", "du", "df", "cut", "tr", "nl", "tac",
        "rev", "comm", "cmp", "diff", "column", "seq", "grep", "egrep", "fgrep", "jq", "cd", "type", "strings",
        "od", "hexdump", "md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum", "base64", "sleep",
        "tee",  # tee's files are writes, checked like redirections
        "[[", "wait", ":",  # their risky forms are marked by the shell analysis
    )},
    "set": lambda a: bool(a) and a[0][:1] in ("-", "+"),
    # BSD-style `e` shows every process's environment (nanohermes's keys among them).
    "ps": lambda a: not any("e" in x for x in a if not x.startswith("-")),  # options only: `set` alone prints every variable
    "date": _no("-s", "--set"),
    "hostname": lambda a: not any(not x.startswith("-") for x in a),
    "file": _no("-C", "--compile"),
    "tree": _no("-o", "-R"),
    "find": _no("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "rg": _no("--pre", "--pre-glob", "--hostname-bin"),  # each runs a program
    "sort": lambda a: _no("-o", "--output", "--compress-program")(a),
    "uniq": lambda a: _positionals(a, 1, f=True, s=True, w=True, **{"skip-fields": True}),
    "xxd": lambda a: _no("-r", "--revert")(a) and _positionals(a, 1, c=True, g=True, l=True, s=True, o=True),
    "sed": _sed,
    "awk": _awk, "gawk": _awk, "mawk": _awk,
    "git": _git,
    "command": lambda a: bool(a) and a[0] in ("-v", "-V"),
}
# Commands that print what is in the files they are given: a secret file among them is asked.
CONTENT_READERS = frozenset({
    "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "sed", "sort", "uniq", "cut", "tr", "nl", "tac", "rev",
    "comm", "cmp", "diff", "od", "hexdump", "xxd", "strings", "base64", "jq", "git", "less", "more", "awk", "cp",
    "scp", "curl", "tee", "source", ".", "python", "python3", "node",
})
# Their dynamic arguments cannot change what they do beyond printing (printf and test are
# also checked by the shell analysis, which marks their risky forms unmodelled).
DYNAMIC_OK = frozenset({"echo", "printf", "cd", "test", "[", "true", "false", "sleep"})
# Assignments that change which program runs, what it loads or which config it reads.
_DANGEROUS_VARS = frozenset({"PATH", "BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
                             "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONBREAKPOINT", "NODE_OPTIONS",
                             "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "PAGER",
                             "EDITOR", "VISUAL", "MANPAGER", "LESSOPEN", "LESSCLOSE", "HOME", "ZDOTDIR", "TMPDIR",
                             "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS", "GCONV_PATH",
                             "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "RIPGREP_CONFIG_PATH", "AWKPATH", "AWKLIBPATH",
                             "CDPATH", "GREP_OPTIONS", "TAR_OPTIONS", "RSYNC_RSH", "SSH_ASKPASS", "SHELL", "BROWSER",
                             "MAKEFLAGS", "CC", "CXX", "RUSTC_WRAPPER", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
                             "TERMINFO", "BASH_COMPAT", "GLOBIGNORE", "EXECIGNORE", "BASH_LOADABLES_PATH"})
# The only assignments a built-in read-only command may carry: locale and output settings.
_HARMLESS_VARS = frozenset({"LANG", "LANGUAGE", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE",
                            "COLUMNS", "LINES", "TERM", "GREP_COLOR", "GREP_COLORS", "LS_COLORS", "TIME_STYLE",
                            "QUOTING_STYLE", "BLOCK_SIZE", "DF_BLOCK_SIZE", "DU_BLOCK_SIZE"})


def _var(assign: str) -> str:
    return assign.split("=", 1)[0].rstrip("+").split("[", 1)[0]


def _dangerous_assign(assign: str) -> bool:
    name = _var(assign)
    return name in _DANGEROUS_VARS or name.startswith(("LD_", "DYLD_", "GIT_", "BASH_FUNC_", "npm_config_",
                                                       "NPM_CONFIG_", "PIP_", "UV_", "CARGO_"))


def _harmless_assign(assign: str) -> bool:
    name = _var(assign)
    return name in _HARMLESS_VARS or name.startswith("LC_")


def _uncertain(w: Word) -> bool:
    """A word whose final form is known only at run time: expansions, globs, braces."""
    return w.dynamic or w.glob or w.brace


def is_read_only(cmd: SimpleCommand) -> bool:
    """In the built-in read-only list, with safe arguments? Ignores redirections (see writes)."""
    if cmd.unmodelled:
        return False
    if not cmd.words:
        return not any(_dangerous_assign(a) for a in cmd.assigns)
    head = cmd.words[0]
    if head.dynamic or "/" in head.text:
        return False  # ./sed, /bin/ls or $CMD never counts as the built-in
    check = READ_ONLY_COMMANDS.get(head.text)
    if check is None or not all(_harmless_assign(a) for a in cmd.assigns):
        return False
    if cmd.open_args and check is not _plain:
        return False  # xargs appends arguments: option checks cannot see them
    if head.text not in DYNAMIC_OK and any(_uncertain(w) if check is not _plain else
                                           (w.dynamic and head.text in CONTENT_READERS) for w in cmd.words[1:]):
        # A run-time value or a file a glob matches could be a risky option (a file named
        # `--pre=x`), or a secret file's name (globs are checked against the list).
        return False
    return check(cmd.argv[1:])


def unanalysable(cmd: SimpleCommand) -> str:
    """Why what this simple command does is not modelled exactly, or "": the shell analysis's
    own verdict, and git pointed elsewhere by a global option."""
    if cmd.unmodelled:
        return cmd.unmodelled
    if cmd.words and posixpath.basename(cmd.name) == "git":
        opts, i = git_globals(cmd.argv)
        risky = [o for o in opts if o not in _GIT_HARMLESS]
        if risky:
            return f"the git global option {risky[0]} before the subcommand is not analysed"
        rest = cmd.argv[i:]
        if rest[:2] in (("submodule", "foreach"), ("bisect", "run")) or rest[:1] == ("filter-branch",) \
                or (rest[:1] in (("rebase",), ("difftool",), ("mergetool",))
                    and any(a in ("-x", "--exec", "--extcmd", "-t", "--tool") or a.startswith(("--exec=", "--extcmd=",
                                                                                              "--tool="))
                            for a in rest[1:])):
            return f"`git {' '.join(rest[:2])}` runs commands it is given; it is not analysed"
    return ""


_ENVIRON = re.compile(r"/proc/[^/]+/(?:task/[^/]+/)?environ\Z")


def _environ(w: Word | None) -> bool:
    """A process's environment (nanohermes's own holds its keys), by any spelling or glob."""
    if w is None:
        return False
    return bool(_ENVIRON.search(w.text)) or (w.glob and fnmatch.fnmatchcase("/proc/1/environ", w.text))


def reads_secret(cmd: SimpleCommand, patterns: tuple[str, ...]) -> bool:
    """Would the command print the contents of a file on the secret list, or a process's
    environment?"""
    if any(_environ(r.target) for r in cmd.redirects if r.op in ("<", "<>")) \
            or (cmd.words and posixpath.basename(cmd.name) in CONTENT_READERS and any(map(_environ, cmd.words[1:]))):
        return True
    if not patterns:
        return False
    for r in cmd.redirects:
        if r.op in ("<", "<>") and r.target is not None and is_secret(r.target.text, patterns, glob=r.target.glob):
            return True
    for i, w in enumerate(cmd.words):
        # A list of file names read from a file: the names, that is the contents, are printed
        # in error messages (`du --files0-from=.env`).
        if w.text.startswith("--files0-from="):
            if is_secret(w.text.split("=", 1)[1], patterns, glob=w.glob):
                return True
        elif w.text == "--files0-from" and i + 1 < len(cmd.words):
            if is_secret(cmd.words[i + 1].text, patterns, glob=cmd.words[i + 1].glob):
                return True
    if not cmd.words or posixpath.basename(cmd.words[0].text) not in CONTENT_READERS:
        return False
    for w in cmd.words[1:]:
        for part in re.split(r"[=:]", w.text) if "=" in w.text or ":" in w.text else [w.text]:
            if part and is_secret(part, patterns, glob=w.glob):
                return True
    return False


# -- rule suggestions ----------------------------------------------------------------------

_SUBCOMMAND_TOOLS = frozenset({
    "git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "docker", "podman", "kubectl", "pip", "pip3", "uv", "poetry",
    "make", "gh", "apt", "apt-get", "brew", "dotnet", "mvn", "gradle", "terraform", "systemctl", "conda", "bundle",
    "rake", "mix", "helm", "npx", "pdm", "hatch", "tox", "nox", "just", "deno", "composer", "rustup", "nix",
})
_INTERPRETERS = frozenset({"python", "python3", "node", "ruby", "perl", "php", "bash", "sh", "zsh", "deno"})
_SUBWORD = re.compile(r"[a-z][a-z0-9]*(?:[-_:][a-z0-9]+)*")


# Programs whose arguments can run code or write files in ways a prefix rule would not
# bound (sed scripts and -i, awk programs, find -exec, xargs, env, interpreters' flags, ...):
# "always" learns the exact command line.
_EXACT_LEARN = frozenset({"sed", "gsed", "awk", "gawk", "mawk", "nawk", "find", "xargs", "env", "perl", "ruby", "php",
                          "lua", "tclsh", "expect", "tar", "rsync", "ssh", "scp", "sftp", "zip", "less", "more",
                          "vi", "vim", "nvim", "emacs", "nano", "man", "dd", "tee", "parallel", "watch", "rg",
                          "osascript", "timeout", "nice", "nohup", "stdbuf", "command", "builtin", "time",
                          "sort", "git"})


def _exact_only(cmd: SimpleCommand) -> bool:
    base = posixpath.basename(cmd.name)
    if base == "git":
        # git's subcommands are learned as a prefix, unless a global option (or -c) points
        # git at other config and programs, or an option runs something.
        opts, _ = git_globals(cmd.argv)
        return bool(opts) or any(a.startswith(("--exec", "--upload-pack", "--receive-pack", "--ext-diff",
                                               "--textconv", "--config", "--output", "--open-files-in-pager"))
                                 for a in cmd.argv)
    if base == "sort":
        return any(a.startswith(("--compress-program", "-o", "--output")) for a in cmd.argv[1:])
    return base in _EXACT_LEARN or bool(cmd.wrappers) or cmd.open_args


def suggest_command_rule(cmd: SimpleCommand, tool_name: str = "run_command") -> Rule:
    """The narrowest useful rule for "always": the command's prefix up to its first argument
    that looks like a value (`git log *`, `rm -rf *`, `python -m pytest *`); the exact text
    when a prefix would cover arbitrary code (`python -c ...`, `sh` reading stdin, `git -C x
    push`, sed, awk, find, xargs, env ...), a changed environment or a write. Words keep
    their quotes as written, so the rule re-parsed matches the same command."""
    argv = cmd.argv
    exact = Rule(tool_name, escape_pattern(_rule_text(cmd, full=bool(cmd.writes), raw=True,
                                                      assigns=bool(cmd.wrappers) or _exact_only(cmd))))
    if not argv or any(_dangerous_assign(a) for a in cmd.assigns) or cmd.writes or cmd.words[0].dynamic \
            or unanalysable(cmd) or _exact_only(cmd):
        return exact
    raws = [w.raw or w.text for w in cmd.words]
    name, rest = argv[0], argv[1:]
    base = posixpath.basename(name)
    words = [raws[0]]
    if base in _INTERPRETERS:
        for i, a in enumerate(rest):
            if a.startswith("-") and a != "-m":
                return exact  # -c, -e, -p, -I, -r ...: flags that run or load code
            if a == "-m" and i + 1 < len(rest):
                words += ["-m", raws[i + 2]]
                break
            words.append(raws[i + 1])
            break  # the script
        else:
            return exact  # no script: it would run whatever comes on stdin
    elif base in _SUBCOMMAND_TOOLS:
        for i, a in enumerate(rest):
            if len(words) >= 3 or not _SUBWORD.fullmatch(a) or raws[i + 1] != a:
                break
            words.append(a)
        if len(words) == 1:
            return exact  # `git -C x push` or a bare `git`: a prefix would be the whole tool
    else:
        for i, a in enumerate(rest):
            if not a.startswith("-") or "=" in a:
                break
            words.append(raws[i + 1])
    return Rule(tool_name, escape_pattern(" ".join(words)) + " *")


def _rule_text(cmd: SimpleCommand, *, full: bool = False, basename: bool = False, raw: bool = False,
               assigns: bool = False) -> str:
    """The text rules see: dangerous assignments stay in front (a rule for `git log` must not
    cover `GIT_PAGER=x git log`); `full` adds every assignment and redirection; `raw` keeps
    the words as written, quotes included (allow rules match that, so `sed -i '1e x' f` and
    `sed -i 1e x f` are different commands to them)."""
    words = [w.raw or w.text for w in cmd.words] if raw else list(cmd.argv)
    if basename and words:
        words[0] = posixpath.basename(words[0])
    kept = [a for a in cmd.assigns if full or assigns or _dangerous_assign(a)]
    redirs = [f"{r.fd}{r.op} {(r.target.raw or r.target.text) if raw else r.target.text}"
              for r in cmd.redirects if full and r.target is not None and r.writes_file]
    return " ".join([*kept, *words, *redirs])


def _allow_matches(rule: Rule, cmd: SimpleCommand) -> bool:
    if not cmd.words or cmd.words[0].dynamic:
        return False  # $CMD args: the program is only known at run time
    pattern = rule.pattern or "*"
    if ">" in pattern:  # a rule that spells a redirection is matched with it
        return match_command_text(pattern, _rule_text(cmd, full=True, raw=True))
    # Harmless assignments may be left out of a rule, or spelled in it (exact learned rules).
    return match_command_text(pattern, _rule_text(cmd, raw=True)) \
        or match_command_text(pattern, _rule_text(cmd, raw=True, assigns=True))


def _seen_through(cmd: SimpleCommand) -> list[SimpleCommand]:
    """The command, and for git the same command without its global options (`git -C . -c
    k=v --no-pager push` is `git push` to a deny rule)."""
    out = [cmd]
    if cmd.words and posixpath.basename(cmd.name) == "git":
        opts, i = git_globals(cmd.argv)
        if opts and i < len(cmd.words):
            out.append(replace(cmd, words=(cmd.words[0], *cmd.words[i:])))
    return out


def _deny_matches(rule: Rule, cmd: SimpleCommand) -> bool:
    """Deny and ask rules catch a command however it is spelled: /bin/rm as rm, with its
    assignments or redirections or without them, its short options grouped or apart and in
    any order, git with or without global options, quoted or not."""
    if rule.pattern is None:
        return True
    for c in _seen_through(cmd):
        texts = {c.text, _rule_text(c), _rule_text(c, full=True), _rule_text(c, basename=True),
                 _rule_text(c, raw=True), " ".join([posixpath.basename(c.name), *c.argv[1:]])}
        if any(match_command_text(rule.pattern, t) for t in texts if t) or _options_match(rule.pattern, c.argv):
            return True
    return False


def _could_match(rule: Rule, cmd: SimpleCommand) -> bool:
    """Could the pattern match once the command's expansions, globs and appended arguments
    are known? (`git pus[h]`, `git $SUB`, `xargs git`, `rm *` against `rm -rf *`.)"""
    if rule.pattern is None:
        return False
    pwords = rule.pattern.split()
    star = len(pwords) > 1 and pwords[-1] == "*"
    if star:
        pwords = pwords[:-1]
    for c in _seen_through(cmd):
        words = c.words
        if not words or not (c.open_args or any(_uncertain(w) for w in words[1:])):
            continue
        if not (fnmatch.fnmatchcase(c.name, pwords[0]) or fnmatch.fnmatchcase(posixpath.basename(c.name), pwords[0])):
            continue
        if any(p.startswith("-") for p in pwords[1:]):
            return True  # options may come anywhere: an unknown word could be one
        for i, p in enumerate(pwords[1:], 1):
            if i >= len(words):
                if c.open_args or any(_uncertain(w) for w in words[1:]):
                    return True
                break
            if _uncertain(words[i]):
                return True
            if not fnmatch.fnmatchcase(words[i].text, p):
                break
        else:
            rest = words[len(pwords):]
            if not star and (c.open_args or (rest and all(w.splits for w in rest))):
                return True  # `$EMPTY` expands to no word at all
    return False


_SHORT_GROUP = re.compile(r"-[A-Za-z]+")


def _options(words: list[str] | tuple[str, ...]) -> tuple[set[str], list[str]]:
    """(the options, the other words in order); `-rf` counts as `-r` and `-f`, and all words
    after `--` are arguments."""
    opts: set[str] = set()
    args: list[str] = []
    for i, w in enumerate(words):
        if w == "--":
            args.extend(words[i + 1:])
            break
        if _SHORT_GROUP.fullmatch(w):
            opts.update(f"-{c}" for c in w[1:])
        elif w.startswith("-") and len(w) > 1:
            opts.add(w)
        else:
            args.append(w)
    return opts, args


def _options_match(pattern: str, argv: tuple[str, ...]) -> bool:
    """A pattern with options names the command with at least those options, however they
    are grouped or ordered: `rm -rf *` catches `rm -r -f x`, `rm -fr x` and `rm -v -f -r x`.
    Its other words must match the command's other words in order."""
    words = pattern.split()
    rest = len(words) > 1 and words[-1] == "*"
    if rest:
        words = words[:-1]
    want, want_args = _options(words[1:])
    if not want or not argv or any(ch in o for o in want for ch in "*?["):
        return False  # no options (the text match decides), or options spelled as a glob
    name = argv[0]
    if not (fnmatch.fnmatchcase(name, words[0]) or fnmatch.fnmatchcase(posixpath.basename(name), words[0])):
        return False
    have, args = _options(argv[1:])
    if not want <= have or len(args) < len(want_args) or (not rest and len(args) != len(want_args)):
        return False
    return all(fnmatch.fnmatchcase(a, p) for a, p in zip(args, want_args))


# -- the decision --------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Policy:
    mode: str = "default"
    auto_approve: bool = False
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    secret_files: tuple[str, ...] = DEFAULT_SECRET_FILES
    # False where the OS sandbox is unavailable: then no command runs unasked but the
    # argument-checked built-in read-only ones written as plain words (allow rules and
    # learned rules ask); --yes and goal mode still approve, as the person chose.
    sandboxed: bool = True


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str = ""
    # For "ask": the rules an "always" answer should remember (empty: the tool's own
    # suggestion). None: nothing can be remembered, this call is asked every time.
    suggest: tuple[Rule, ...] | None = ()


def blocked(policy: Policy, tool_name: str, effect: Effect = "run") -> str | None:
    """Why a tool is hidden from the model and refused outright, or None. `effect` is what
    the tool declares it does; the worst case when unknown."""
    if effect in MODE_BLOCKED_EFFECTS.get(policy.mode, frozenset()):
        return f"{tool_name} is not available in {policy.mode} mode"
    if names_tool(policy.disallowed_tools, tool_name):
        return f"{tool_name} is disallowed by config (disallowed_tools)"
    if policy.allowed_tools and not names_tool(policy.allowed_tools, tool_name):
        return f"{tool_name} is not in allowed_tools"
    for rule in policy.deny:
        if rule.pattern is None and rule.names(tool_name):
            return f"{tool_name} is denied by rule {rule}"
    return None


def visible(policy: Policy, tool_name: str, effect: Effect = "run") -> bool:
    return blocked(policy, tool_name, effect) is None


def _unattended(policy: Policy) -> bool:
    return policy.mode == "goal" or policy.auto_approve


def unattended(policy: Policy) -> bool:
    """Nobody is asked (goal mode, --yes): facts that only lead to a question need no look."""
    return _unattended(policy)


def _protected(policy: Policy) -> Verdict:
    if policy.mode in ("plan", "debug"):
        return Verdict("deny", f"protected path: refused in {policy.mode} mode")
    if _unattended(policy):
        return Verdict("allow")
    return Verdict("ask", "writes a protected path (outside the workspace, .git/ or nanohermes config)", None)


def _hits(rule: Rule, tool_name: str, target: Target, *, every: bool) -> bool:
    """Does a rule cover the call's subjects? Deny and ask rules need one subject (`every`
    False), allow rules all of them, aliases included; a host is also known by the addresses
    it resolves to, which count for denials only."""
    if not rule.names(tool_name):
        return False
    if rule.pattern is None:
        return True
    if target.kind == "host" and rule.pattern.startswith("domain:"):
        pat = rule.pattern[len("domain:"):]
        if not every and any(host_matches(a, (), pat, by_address=False) for a in target.addresses):
            return True
    subjects = (*target.subjects, *target.aliases)
    if not subjects:
        return False
    test = all if every else any
    return test(rule.matches(tool_name, s, target.kind) for s in subjects)


def decide(policy: Policy, *, tool_name: str, approval: str, target: Target) -> Verdict:
    """allow | ask | deny for one call. `approval` is the tool's own level: never, edit, always.

    `target` is what the call touches, already resolved by the caller (see `Target`): its
    subjects are what rule patterns are matched against, its kind says how."""
    if why := blocked(policy, tool_name, target.effect):
        return Verdict("deny", why)
    if target.kind == "command" and target.subjects:
        return _decide_command(policy, tool_name, target.subjects[0], target.protected,
                               target.secret_read)
    for rule in policy.deny:
        if _hits(rule, tool_name, target, every=False):
            return Verdict("deny", f"denied by rule {rule}")
    if policy.mode == "plan" and target.effect in ("write", "run") and approval != "never":
        return Verdict("deny", f"{tool_name} changes things and plan mode is read-only")
    if target.protected:
        return _protected(policy)
    if _unattended(policy):
        return Verdict("allow")
    for rule in policy.ask:
        if _hits(rule, tool_name, target, every=False):
            return Verdict("ask", f"rule {rule} asks", None)
    secrets = [s for s in (*target.subjects, *target.aliases) if is_secret(s, policy.secret_files)] \
        if target.kind == "path" and target.read_only and target.shows_contents else []
    for rule in policy.allow:
        # A secret file needs a rule that names it: `read_file` alone does not cover .env.
        if _hits(rule, tool_name, target, every=True) and not (secrets and rule.pattern is None):
            return Verdict("allow")
    if secrets:
        return Verdict("ask", f"{secrets[0]} is on the secret-file list (permissions.secret_files)",
                       tuple(Rule(tool_name, escape_pattern(s)) for s in dict.fromkeys(secrets)))
    if target.kind == "host" and target.subjects and policy.mode in ("default", "accept-edits"):
        host = target.subjects[0]
        return Verdict("ask", f"fetches from {host}, a host no rule allows yet",
                       (Rule(tool_name, "domain:" + escape_pattern(host)),))
    if approval == "never" or (approval == "edit" and policy.mode == "accept-edits"):
        return Verdict("allow")
    return Verdict("ask", "edits a file" if approval == "edit" else "needs approval")


UNANALYSABLE_HELP = ("write it as plain simple commands with every word spelled out (no eval, exec, brace "
                     "expansion, computed names or arithmetic on variables), or leave it for a person to approve")


def _decide_command(policy: Policy, tool_name: str, command: str, protected: bool, secret: str = "") -> Verdict:
    try:
        commands: list[SimpleCommand] | None = split(command)
        problem = ""
    except ParseError as e:
        commands, problem = None, str(e)
    denies = [r for r in policy.deny if r.names(tool_name)]
    seen = commands if commands is not None else _line_by_line(command)
    for rule in denies:
        if rule.pattern is None or match_command_text(rule.pattern, command.strip()) \
                or any(_deny_matches(rule, c) for c in seen):
            return Verdict("deny", f"denied by rule {rule}")
    if policy.mode == "plan":
        return Verdict("deny", f"{tool_name} changes things and plan mode is read-only")
    if commands is not None:
        problem = next((why for c in commands if (why := unanalysable(c))), "")
    maybe = next((r for r in denies if any(_could_match(r, c) for c in commands or ())), None)
    if _unattended(policy) and denies and problem:
        # Nobody will be asked, and the deny rules cannot see inside this line.
        return Verdict("deny", f"the command cannot be analysed ({problem}) and deny rules apply to {tool_name}; "
                               f"unattended runs refuse it: {UNANALYSABLE_HELP}")
    if _unattended(policy) and maybe is not None:
        return Verdict("deny", f"the command could match deny rule {maybe} once its globs, expansions or appended "
                               "arguments are known; unattended runs refuse it: spell those words out")
    if protected:
        return _protected(policy)
    if _unattended(policy):
        return Verdict("allow")
    if problem:
        for rule in policy.ask:
            if rule.names(tool_name):
                return Verdict("ask", f"rule {rule} asks", None)
        return Verdict("ask", f"the command cannot be analysed ({problem}), so it is asked every time", None)
    assert commands is not None
    if maybe is not None:
        return Verdict("ask", f"the command could match deny rule {maybe} once its globs, expansions or appended "
                              "arguments are known", None)
    reasons: list[str] = []
    suggest: list[Rule] = []
    remember = True
    readers = [c for c in commands if _reads_files(c)] or commands
    for cmd in commands:
        why, learn = _check_simple(policy, tool_name, cmd, secret if cmd in readers else "")
        if why:
            reasons.append(why)
            if learn is None:
                remember = False
            elif learn not in suggest:
                suggest.append(learn)
    if reasons:
        return Verdict("ask", "; ".join(reasons), tuple(suggest) if remember else None)
    if not policy.sandboxed and not (_plain_words(command, commands) and all(is_read_only(c) for c in commands)):
        return Verdict("ask", "there is no OS sandbox on this system, so only the built-in read-only commands "
                              "written as plain words run without asking", None)
    return Verdict("allow")


def _line_by_line(command: str) -> list[SimpleCommand]:
    """For deny rules only, when the whole line cannot be analysed: the commands of each
    physical line that can be (a line bash reads as text, not commands, only adds refusals)."""
    out: list[SimpleCommand] = []
    for line in command.splitlines():
        try:
            out += split(line)
        except ParseError:
            continue
    return out


def read_only_line(command: str, *, plain: bool = False) -> bool:
    """Is every simple command of the line a built-in read-only one with checked arguments,
    analysable, writing nothing? With `plain`, also one command of words and quotes only
    (what may run unasked where there is no OS sandbox)."""
    try:
        commands = split(command)
    except ParseError:
        return False
    if not commands or any(unanalysable(c) or c.writes or not is_read_only(c) for c in commands):
        return False
    return not plain or _plain_words(command, commands)


def _reads_files(cmd: SimpleCommand) -> bool:
    return (bool(cmd.words) and posixpath.basename(cmd.name) in (*CONTENT_READERS, "find", "xargs")) \
        or any(r.op in ("<", "<>") for r in cmd.redirects)


def _plain_words(command: str, commands: list[SimpleCommand]) -> bool:
    """One simple command of words and quotes, and nothing else: no operators,
    redirections, assignments, wrappers, expansions or globs."""
    if len(commands) != 1:
        return False
    [cmd] = commands
    if cmd.assigns or cmd.redirects or cmd.wrappers or not cmd.words \
            or any(_uncertain(w) or w.tilde or w.splits for w in cmd.words):
        return False
    pattern = r"\s*" + r"[ \t]+".join(re.escape(w.raw) for w in cmd.words) + r"\s*"
    return re.fullmatch(pattern, command) is not None


def _check_simple(policy: Policy, tool_name: str, cmd: SimpleCommand, found_secret: str = "") -> tuple[str, Rule | None]:
    """("", None) when this simple command may run; else why not, and the rule to learn."""
    shown = _rule_text(cmd, full=True, raw=True) or "(empty command)"
    for rule in policy.ask:
        if rule.names(tool_name) and (_deny_matches(rule, cmd) or _could_match(rule, cmd)):
            return f"rule {rule} asks for `{shown}`", None
    secret = reads_secret(cmd, policy.secret_files) or bool(found_secret)
    by_rule = None
    for rule in policy.allow:
        if rule.names(tool_name) and (rule.pattern is None and not secret or rule.pattern and _allow_matches(rule, cmd)):
            by_rule = rule
            break
    if by_rule is None and not (is_read_only(cmd) and not secret):
        if secret:
            what = found_secret or "a file on the secret-file list"
            return f"`{shown}` reads {what} (permissions.secret_files)", Rule(tool_name, escape_pattern(shown))
        return f"`{shown}` is not allowed by a rule", suggest_command_rule(cmd, tool_name)
    if cmd.writes and policy.mode != "accept-edits":
        # A read-only allow does not cover writing a file; a rule must spell the redirection.
        full = _rule_text(cmd, full=True, raw=True)
        covered = by_rule is not None and (by_rule.pattern is None or ((">" in by_rule.pattern or cmd.name == "tee")
                                                                       and match_command_text(by_rule.pattern, full)))
        if not covered:
            return f"`{shown}` writes {', '.join(cmd.writes)}", Rule(tool_name, escape_pattern(full))
    return "", None


# -- reporting -----------------------------------------------------------------------------

def describe(policy: Policy, tools: Iterable[tuple[str, Effect]] | None = None) -> list[str]:
    """The rules in force and where each came from, one line each (for /permissions).
    `tools` are the (name, effect) of the pool; by default the built-in tools."""
    lines = [f"mode: {policy.mode}" + ("  (--yes: every call that would ask is approved)" if policy.auto_approve else "")]
    pool = tools if tools is not None else ((n, e) for n, (_, e) in builtin_declarations().items())
    blocked_effects = MODE_BLOCKED_EFFECTS.get(policy.mode, frozenset())
    blocked_tools = sorted({n for n, e in pool if e in blocked_effects})
    if blocked_tools:
        lines.append(f"blocked by the mode: {', '.join(blocked_tools)}")
    if policy.allowed_tools:
        lines.append(f"allowed_tools (only these): {', '.join(policy.allowed_tools)}")
    if policy.disallowed_tools:
        lines.append(f"disallowed_tools: {', '.join(policy.disallowed_tools)}")
    for kind, rules in (("deny", policy.deny), ("ask", policy.ask), ("allow", policy.allow)):
        for rule in rules:
            lines.append(f"{kind:<5}  {rule}  — {rule.origin or 'config'}")
    if not (policy.deny or policy.ask or policy.allow):
        lines.append("no allow/ask/deny rules")
    lines.append("built-in: read-only commands run without asking (" + ", ".join(sorted(READ_ONLY_COMMANDS)[:12])
                 + ", ...; with their risky options checked)")
    lines.append("commands the analysis cannot follow exactly (eval, exec, brace expansion, computed names, ...) are "
                 "asked every time" + ("; with deny rules, --yes and goal mode refuse them"
                                       if any(r.names("run_command") for r in policy.deny) else ""))
    if not policy.sandboxed:
        lines.append("no OS sandbox: only built-in read-only commands written as plain words run without asking; "
                     "allow and learned rules ask, and --yes / goal mode run commands unconfined")
    if policy.secret_files:
        lines.append(f"secret files, asked before reading: {', '.join(policy.secret_files)}")
    return lines


__all__ = [
    "DEFAULT_SECRET_FILES", "Decision", "Effect", "MODE_BLOCKED_EFFECTS", "Policy", "READ_ONLY_COMMANDS", "Rule",
    "SubjectKind", "Target", "Verdict", "blocked", "decide", "describe", "git_globals", "is_read_only", "is_secret",
    "match_path", "names_tool", "read_only_line", "rule_problem", "suggest_command_rule", "unanalysable", "unattended",
    "visible",
]
