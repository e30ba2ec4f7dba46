"""Commands: the catalogue of built-in read-only commands with the check of each one's
arguments; what the shell analysis says about a simple command (read-only, why it cannot be
analysed, whether it prints a secret file); how command rules meet it (allow rules by the
words as written, deny and ask rules however it is spelled, and whether they could match once
its expansions are known); and the narrowest rule to suggest for "always"."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

from nanohermes.permissions.rules import Rule, escape_pattern, is_secret, match_command_text
from nanohermes.shellparse import ParseError, SimpleCommand, Word, split

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
# Commands known not to print (or pass on) what is in the files they are given: names,
# sizes, hashes and file types only. Every other command may (`column`, `paste`, `fold`, an
# interpreter, `mv` or `ln` followed by a read): a secret file among its arguments is asked.
NON_READERS = frozenset({
    "ls", "wc", "pwd", "echo", "printf", "true", "false", "test", "[", "[[", "which", "whoami", "id", "uname",
    "basename", "dirname", "realpath", "readlink", "stat", "du", "df", "seq", "cd", "type", "md5sum", "sha1sum",
    "sha256sum", "sha512sum", "cksum", "sleep", "wait", ":", "set", "date", "hostname", "file", "tree", "touch",
    "mkdir", "rmdir", "rm", "chmod", "command", "export", "unset", "kill",
})


# Commands among the NON_READERS that do read a file when given an option: its value is read
# (and printed back in error messages: `date -f .env`, `file -m .env`), or, for the flags of
# the second set, every operand is (`tree --fromfile .env`, `sha256sum -c .env`).
OPTION_READERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "date": (frozenset({"-f", "--file"}), frozenset()),
    "file": (frozenset({"-f", "--files-from", "-m", "--magic-file"}), frozenset()),
    "tree": (frozenset(), frozenset({"--fromfile"})),
    "du": (frozenset({"-X", "--exclude-from", "--files0-from"}), frozenset()),
    "ls": (frozenset(), frozenset()),
    "wc": (frozenset({"--files0-from"}), frozenset()),
    "hostname": (frozenset({"-F", "--file"}), frozenset()),
    **{n: (frozenset(), frozenset({"-c", "--check"})) for n in ("md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum")},
}


def option_reads(cmd: SimpleCommand) -> list[Word]:
    """The words a NON_READER reads as files because of its options (OPTION_READERS)."""
    name = posixpath.basename(cmd.name) if cmd.words else ""
    if name not in OPTION_READERS:
        return []
    valued, all_operands = OPTION_READERS[name]
    out: list[Word] = []
    words = cmd.words[1:]
    operands: list[Word] = []
    whole = False
    i = 0
    while i < len(words):
        w = words[i]
        text = w.text
        if text == "--":
            operands += words[i + 1:]
            break
        opt, eq, _ = text.partition("=")
        if text.startswith("--") and opt in valued:
            if eq:
                out.append(replace(w, text=text.split("=", 1)[1]))
            elif i + 1 < len(words):
                out.append(words[i + 1])
                i += 1
        elif text.startswith("--") and opt in all_operands:
            whole = True
        elif text.startswith("-") and not text.startswith("--") and len(text) > 1:
            for j, c in enumerate(text[1:], 1):
                if f"-{c}" in all_operands:
                    whole = True
                if f"-{c}" in valued:  # the rest of the word, or the next word, is its value
                    rest = text[j + 1:]
                    if rest:
                        out.append(replace(w, text=rest))
                    elif i + 1 < len(words):
                        out.append(words[i + 1])
                        i += 1
                    break
        else:
            operands.append(w)
        i += 1
    return out + (operands if whole else [])


class _ContentReaders:
    """`name in CONTENT_READERS`: may the command print the files it is given? Fails closed:
    every command but the NON_READERS."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name not in NON_READERS


# Commands that print what is in the files they are given: a secret file among them is asked.
CONTENT_READERS = _ContentReaders()
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


def uncertain_word(w: Word) -> bool:
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
    if head.text not in DYNAMIC_OK and any(uncertain_word(w) if check is not _plain else
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
    if any(is_secret(w.text, patterns, glob=w.glob) for w in option_reads(cmd)):
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
                          "sort", "git", "ed", "ex", "sqlite3", "m4", "bc", "dc", "gcc", "cc", "clang", "g++", "c++",
                          "openssl", "gpg", "patch", "strace", "ltrace", "gdb", "script", "flock", "unshare", "chroot",
                          "nsenter", "ionice", "chrt", "taskset", "sudo", "doas", "su", "busybox", "csh", "tcsh",
                          "fish", "ksh", "dash", "mksh", "python2", "pypy3", "Rscript", "julia", "psql", "mysql",
                          "at", "crontab", "systemd-run"})
# Programs that run what comes on standard input when given no script or program argument
# (`python3 <<< ...`, `... | sqlite3 db`): the code is not on the line, so nothing learned
# from one run can stand for the next.
_STDIN_CODE = frozenset({*_INTERPRETERS, "lua", "tclsh", "expect", "ed", "ex", "m4", "bc", "dc", "python2", "pypy3",
                         "ksh", "dash", "mksh", "csh", "tcsh", "fish", "Rscript", "julia", "osascript"})
_SCRIPT_FLAGS = frozenset({"-c", "-e", "-E", "-m", "-r", "-p", "-n", "-i", "--eval", "--print", "--command",
                           "--version", "-V", "--help", "-h"})


def code_from_stdin(cmd: SimpleCommand) -> bool:
    """Does this command run a program read from standard input (see _STDIN_CODE)? sqlite3
    does when it has no SQL argument after the database."""
    if not cmd.argv:
        return False
    base, rest = posixpath.basename(cmd.argv[0]), cmd.argv[1:]
    positional = [a for a in rest if not a.startswith("-") or a == "-"]
    if base in ("sqlite3", "psql", "mysql"):
        return len(positional) <= 1 and not any(a.startswith(("-c", "--command", "-e", "--execute")) for a in rest)
    if base in ("ed", "ex"):
        return True  # their commands always come on standard input; the file is what they edit
    if base not in _STDIN_CODE:
        return False
    return "-" in positional or (not positional and not any(a.split("=", 1)[0] in _SCRIPT_FLAGS for a in rest))


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


# The tail of a learned prefix rule: more arguments, but no option the rule does not spell
# (`git clean -n <args>` never covers `git clean -f`). Never a word of a parsed command.
ARGS = "<args>"


def suggest_command_rule(cmd: SimpleCommand, tool_name: str = "run_command") -> Rule:
    """The narrowest useful rule for "always": what runs (the program, its subcommand words,
    an interpreter's script or module) with exactly the options given, and any other
    arguments (`git log --oneline <args>`, `rm -rf <args>`, `python -m pytest -x <args>`): an
    option changes what a command does (`-n`, `--force`, `--hard`), so one the rule does not
    spell is asked again. The exact text when a prefix would cover arbitrary code (`python -c
    ...`, `sh` reading stdin, `git -C x push`, sed, awk, find, xargs, env ...), a changed
    environment or a write. Words keep their quotes as written, so the rule re-parsed
    matches the same command."""
    exact = Rule(tool_name, escape_pattern(rule_text(cmd, full=bool(cmd.writes), raw=True,
                                                      assigns=bool(cmd.wrappers) or _exact_only(cmd))))
    if any(_dangerous_assign(a) for a in cmd.assigns) or cmd.writes or unanalysable(cmd) or _exact_only(cmd):
        return exact
    shape = _learned_shape(cmd)
    if shape is None:
        return exact
    prefix, options, _ = shape
    shown = list(dict.fromkeys(w.raw or w.text for w in options))  # as typed, once each
    return Rule(tool_name, escape_pattern(" ".join([*prefix, *shown])) + " " + ARGS)


def _learned_shape(cmd: SimpleCommand) -> tuple[list[str], list[Word], list[Word]] | None:
    """How a learned rule sees a command: the words naming what runs (as written), its
    options and its other arguments. None when no rule short of the exact line may stand
    for it (an interpreter reading code from a flag or stdin, a bare tool of subcommands)."""
    words = cmd.words
    if not words or words[0].dynamic:
        return None
    raws = [w.raw or w.text for w in words]
    base = posixpath.basename(words[0].text)
    lead = [a for a in cmd.assigns if _dangerous_assign(a)]
    n = 1
    if base in _INTERPRETERS:
        if len(words) < 2 or (words[1].text.startswith("-") and words[1].text != "-m"):
            return None  # no script (stdin), or -c, -e, -p, -I, -r ...: flags that run or load code
        n = 3 if words[1].text == "-m" else 2
        if n > len(words):
            return None
    elif base in _SUBCOMMAND_TOOLS:
        while n < len(words) and n < 3 and _SUBWORD.fullmatch(words[n].text) and raws[n] == words[n].text:
            n += 1
        if n == 1:
            return None  # `git -C x push` or a bare `git`: a prefix would be the whole tool
    rest = words[n:]
    options = [w for w in rest if w.text.startswith("-")]
    return [*lead, *raws[:n]], options, [w for w in rest if not w.text.startswith("-")]


def _option_set(options: list[Word]) -> frozenset[str]:
    """The options, a short group counted as its letters (`-rf` is `-r -f`)."""
    out: set[str] = set()
    for w in options:
        out.update(f"-{c}" for c in w.text[1:]) if _SHORT_GROUP.fullmatch(w.text) else out.add(w.text)
    return frozenset(out)


@lru_cache(maxsize=256)
def _learned_rule(pattern: str) -> tuple[list[str], frozenset[str], list[str]] | None:
    """A `... <args>` pattern read back as the command it was learned from."""
    text = re.sub(r"\[(.)\]", r"\1", pattern[:-len(ARGS)].rstrip())
    try:
        [cmd] = split(text)
    except (ParseError, ValueError):
        return None
    shape = _learned_shape(cmd)
    if shape is None:
        return None
    prefix, options, args = shape
    return prefix, _option_set(options), [w.raw or w.text for w in args]


def _learned_matches(pattern: str, cmd: SimpleCommand) -> bool:
    """Same program and subcommand, exactly the rule's options (grouped or ordered any
    way), its arguments first if it names some, then only plain arguments: a word that
    could become an option once the shell expands it (`$X`, a glob, braces) is not covered."""
    rule, shape = _learned_rule(pattern), _learned_shape(cmd)
    if rule is None or shape is None:
        return False
    prefix, options, args = shape
    if prefix != rule[0] or _option_set(options) != rule[1] or cmd.open_args:
        return False
    if any(w.dynamic or w.glob or w.brace or w.splits for w in args):
        return False
    raws = [w.raw or w.text for w in args]
    return raws[:len(rule[2])] == rule[2]


def rule_text(cmd: SimpleCommand, *, full: bool = False, basename: bool = False, raw: bool = False,
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


def allow_matches(rule: Rule, cmd: SimpleCommand) -> bool:
    """Does an allow rule cover `cmd`? Matched against the words as written (quotes kept), with
    the harmless assignments left out or spelled; a program known only at run time never is."""
    if not cmd.words or cmd.words[0].dynamic:
        return False  # $CMD args: the program is only known at run time
    pattern = rule.pattern or "*"
    if pattern.endswith(" " + ARGS):
        return _learned_matches(pattern, cmd) and not cmd.writes
    if ">" in pattern:  # a rule that spells a redirection is matched with it
        return match_command_text(pattern, rule_text(cmd, full=True, raw=True))
    # Harmless assignments may be left out of a rule, or spelled in it (exact learned rules).
    return match_command_text(pattern, rule_text(cmd, raw=True)) \
        or match_command_text(pattern, rule_text(cmd, raw=True, assigns=True))


def _seen_through(cmd: SimpleCommand) -> list[SimpleCommand]:
    """The command, and for git the same command without its global options (`git -C . -c
    k=v --no-pager push` is `git push` to a deny rule)."""
    out = [cmd]
    if cmd.words and posixpath.basename(cmd.name) == "git":
        opts, i = git_globals(cmd.argv)
        if opts and i < len(cmd.words):
            out.append(replace(cmd, words=(cmd.words[0], *cmd.words[i:])))
    return out


def deny_matches(rule: Rule, cmd: SimpleCommand) -> bool:
    """Deny and ask rules catch a command however it is spelled: /bin/rm as rm, with its
    assignments or redirections or without them, its short options grouped or apart and in
    any order, git with or without global options, quoted or not."""
    if rule.pattern is None:
        return True
    for c in _seen_through(cmd):
        texts = {c.text, rule_text(c), rule_text(c, full=True), rule_text(c, basename=True),
                 rule_text(c, raw=True), " ".join([posixpath.basename(c.name), *c.argv[1:]])}
        if any(match_command_text(rule.pattern, t) for t in texts if t) or _options_match(rule.pattern, c.argv):
            return True
    return False


def could_match(rule: Rule, cmd: SimpleCommand) -> bool:
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
        if not words or not (c.open_args or any(uncertain_word(w) for w in words[1:])):
            continue
        if not (fnmatch.fnmatchcase(c.name, pwords[0]) or fnmatch.fnmatchcase(posixpath.basename(c.name), pwords[0])):
            continue
        if any(p.startswith("-") for p in pwords[1:]):
            return True  # options may come anywhere: an unknown word could be one
        for i, p in enumerate(pwords[1:], 1):
            if i >= len(words):
                if c.open_args or any(uncertain_word(w) for w in words[1:]):
                    return True
                break
            if uncertain_word(words[i]):
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
    return all(fnmatch.fnmatchcase(a, p) for a, p in zip(args, want_args, strict=False))  # `rest`: more args
