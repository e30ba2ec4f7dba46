"""git's entry in the catalogue: its global options, and its subcommands as entries of their
own (which are read-only and with what arguments, which run commands they are given, how
`git grep` reads)."""

from __future__ import annotations

from nanohermes.guard.commands.entry import Command, Leading, Options, Reads

# Global options before git's subcommand. The harmless ones change only output and pathspec
# reading; every other one points git at another repository, config or program, so a line
# using one is unanalysable (deny and ask rules still see through them).
GLOBALS = Leading(
    harmless=frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
                        "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects", "--no-advice",
                        "--no-lazy-fetch"}),
    valued=frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix",
                      "--exec-path", "--list-cmds", "--attr-source"}),
    # `--exec-path` alone prints a path; with `=` it sets one, like the others' `=` form.
    alone=frozenset({"--exec-path", "--list-cmds"}),
)


def git_globals(argv: tuple[str, ...]) -> tuple[list[str], int]:
    """(git's global options, the index of its subcommand) for argv[0] == git; the index is
    len(argv) when there is no subcommand."""
    return GLOBALS.split(argv)


# Options no read-only subcommand may take: each writes a file or runs a program (an external
# diff, a pager, a text converter, another git).
_RUNS_OR_WRITES = Options(("--output*", "--ext-diff", "--open-files-in-pager", "--exec", "--textconv",
                           "--upload-pack", "--receive-pack", "--config-env", "-O"), groups=False, through=True)
# Options that make rebase, difftool and mergetool run a command they are given.
_RUNS_GIVEN = Options(("-x", "--exec", "--extcmd", "-t", "--tool"), groups=False, through=True)

_LISTING = frozenset({"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l", "--show-current",
                      "-i", "--ignore-case", "--no-color", "--color", "--no-column", "-n", "--omit-empty"})
_LISTING_VALUE = ("--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format")


def _lists(rest: tuple[str, ...]) -> bool:
    """`git branch` and `git tag` that only list: listing options, and names only as the
    patterns of `--list`."""
    patterns_ok = "--list" in rest or "-l" in rest
    j = 0
    while j < len(rest):
        a = rest[j]
        if a in _LISTING_VALUE:
            j += 2
            continue
        if a.split("=", 1)[0] in _LISTING_VALUE or a.startswith(("--color=", "--column=")) or a in _LISTING:
            j += 1
            continue
        if a.startswith("-") or not patterns_ok:
            return False
        j += 1
    return True


GIT = Command(
    "git", read_only=True,  # as the subcommand it runs is
    leading=GLOBALS, unsafe=_RUNS_OR_WRITES, learn="subcommands", reads=Reads(kind="words"),
    # git's subcommands are learned as a prefix, unless a global option (or -c) points git at
    # other config and programs, or an option runs something.
    exact=Options(("--exec*", "--upload-pack*", "--receive-pack*", "--ext-diff*", "--textconv*", "--config*",
                   "--output*", "--open-files-in-pager*"), through=True),
    subcommands={
        **{n: Command(n, read_only=True) for n in (
            "status", "log", "diff", "show", "blame", "shortlog", "describe", "rev-parse", "rev-list", "ls-files",
            "ls-tree", "cat-file", "merge-base", "name-rev", "count-objects", "whatchanged", "version",
            "check-ignore", "for-each-ref", "show-ref")},
        "grep": Command("grep", read_only=True, unsafe=Options(("-O*",), through=True),
                        reads=Reads(kind="search", recursive=True)),
        "branch": Command("branch", read_only=True, check=_lists),
        "tag": Command("tag", read_only=True, check=_lists),
        "remote": Command("remote", read_only=True,
                          check=lambda rest: not rest or rest[0] in ("-v", "--verbose", "show", "get-url")),
        "stash": Command("stash", read_only=True, check=lambda rest: bool(rest) and rest[0] in ("list", "show")),
        "reflog": Command("reflog", read_only=True,
                          check=lambda rest: not rest or rest[0] == "show" or rest[0].startswith("-")),
        "submodule": Command("submodule", subcommands={"foreach": Command("foreach", runs=True)}),
        "bisect": Command("bisect", subcommands={"run": Command("run", runs=True)}),
        "filter-branch": Command("filter-branch", runs=True),
        **{n: Command(n, runs=_RUNS_GIVEN) for n in ("rebase", "difftool", "mergetool")},
    },
)
