"""What the catalogue says about running one simple command: whether it is a built-in
read-only one with safe arguments (`is_read_only`), why what it does is not analysed
(`unanalysable`), whether it runs code read from standard input (`code_from_stdin`), and which
assignments in front of a command change what runs (`dangerous_assign`)."""

from __future__ import annotations

import posixpath

from nanohermes.guard.commands.entry import Command
from nanohermes.guard.commands.table import lookup
from nanohermes.guard.shellwords import SimpleCommand, Word

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
_DANGEROUS_PREFIXES = ("LD_", "DYLD_", "GIT_", "BASH_FUNC_", "npm_config_", "NPM_CONFIG_", "PIP_", "UV_", "CARGO_")
# The only assignments a built-in read-only command may carry: locale and output settings.
_HARMLESS_VARS = frozenset({"LANG", "LANGUAGE", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE",
                            "COLUMNS", "LINES", "TERM", "GREP_COLOR", "GREP_COLORS", "LS_COLORS", "TIME_STYLE",
                            "QUOTING_STYLE", "BLOCK_SIZE", "DF_BLOCK_SIZE", "DU_BLOCK_SIZE"})
# An interpreter's options that name its program (or print and exit): with one, standard
# input is data, not code.
_SCRIPT_FLAGS = frozenset({"-c", "-e", "-E", "-m", "-r", "-p", "-n", "-i", "--eval", "--print", "--command",
                           "--version", "-V", "--help", "-h"})


def _var(assign: str) -> str:
    return assign.split("=", 1)[0].rstrip("+").split("[", 1)[0]


def dangerous_assign(assign: str) -> bool:
    """Does this assignment change which program runs, what it loads or which config it reads?"""
    name = _var(assign)
    return name in _DANGEROUS_VARS or name.startswith(_DANGEROUS_PREFIXES)


def harmless_assign(assign: str) -> bool:
    """Is this assignment a locale or output setting, the only ones a read-only command may carry?"""
    name = _var(assign)
    return name in _HARMLESS_VARS or name.startswith("LC_")


def uncertain_word(w: Word) -> bool:
    """A word whose final form is known only at run time: expansions, globs, braces."""
    return w.dynamic or w.glob or w.brace


def prints_files(name: str) -> bool:
    """May the command called `name` print what is in the files it is given? Fails closed:
    every command the catalogue does not know to print only names, sizes or hashes."""
    entry = lookup(name)
    return entry is None or entry.prints


def is_read_only(cmd: SimpleCommand) -> bool:
    """A built-in read-only command (its entry's name written as a plain word: ./ls, /bin/ls
    or $CMD never counts), with safe arguments? Ignores redirections (see `writes`)."""
    if cmd.unmodelled:
        return False
    if not cmd.words:
        return not any(dangerous_assign(a) for a in cmd.assigns)
    head = cmd.words[0]
    entry = None if head.dynamic or "/" in head.text else lookup(head.text)
    if entry is None or not entry.read_only or not all(harmless_assign(a) for a in cmd.assigns):
        return False
    if cmd.open_args and not entry.plain:
        return False  # xargs appends arguments: option checks cannot see them
    if not entry.dynamic_ok and _uncertain_arguments(entry, cmd.words[1:]):
        # A run-time value or a file a glob matches could be a risky option (a file named
        # `--pre=x`), or a secret file's name (globs are checked against the list).
        return False
    return entry.allows(cmd.argv[1:])


def _uncertain_arguments(entry: Command, args: tuple[Word, ...]) -> bool:
    if entry.plain:
        return entry.prints and any(w.dynamic for w in args)
    return any(uncertain_word(w) for w in args)


def unanalysable(cmd: SimpleCommand) -> str:
    """Why what this simple command does is not modelled exactly, or "": the shell analysis's
    own verdict, a program pointed elsewhere by a leading option (`git -C x`), or a
    subcommand that runs commands it is given (`git submodule foreach`)."""
    if cmd.unmodelled:
        return cmd.unmodelled
    entry = lookup(posixpath.basename(cmd.name)) if cmd.words else None
    if entry is None or entry.leading is None:
        return ""
    opts, i = entry.leading.split(cmd.argv)
    if risky := entry.leading.risky(opts):
        return f"the {entry.name} global option {risky[0]} before the subcommand is not analysed"
    rest = cmd.argv[i:]
    if entry.runs_given(rest):
        return f"`{entry.name} {' '.join(rest[:2])}` runs commands it is given; it is not analysed"
    return ""


def code_from_stdin(cmd: SimpleCommand) -> bool:
    """Does this command run a program read from standard input (its entry's `stdin_code`):
    an interpreter given no script, sqlite3 given no SQL after the database, ed always."""
    if not cmd.argv:
        return False
    entry = lookup(posixpath.basename(cmd.argv[0]))
    rest = cmd.argv[1:]
    positional = [a for a in rest if not a.startswith("-") or a == "-"]
    how = entry.stdin_code if entry is not None else "never"
    if how == "without SQL":
        return len(positional) <= 1 and not any(a.startswith(("-c", "--command", "-e", "--execute")) for a in rest)
    if how == "without a script":
        return "-" in positional or (not positional and not any(a.split("=", 1)[0] in _SCRIPT_FLAGS for a in rest))
    return how == "always"
