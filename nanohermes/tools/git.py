"""git_status, git_diff, git_log (read-only) and git_commit.

git runs directly (no shell) in the workspace through the same capped drain as commands:
stdin at /dev/null, no pager, no colour, the process group killed at `git_timeout_secs`.
The read-only tools turn git's optional locks off so parallel calls never fight over
index.lock, run in the `read-only` OS sandbox, and turn off every program a repository's
config can name for them (fsmonitor, hooks, pager, external diff, textconv, filters,
signature checks): plan mode promises that nothing runs, and a cloned repository writes its
own `.git/config`. git_commit runs in the sandbox its approval earned, as run_command does,
with the repository's hooks and filters (a person approved it, or it is confined). None of
them runs where git would take files outside the workspace for the work tree
(`gitmeta.moved_work_tree`: a repository's `core.worktree`).
Any failure names git's exit code and includes git's own message.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from nanohermes.guard.permissions import Rule
from nanohermes.tools.base import Attempt, Approval, ClaudeCall, P, Params, ReadOnlyTool, Tool, ToolContext, ToolError
from nanohermes.guard import programs, sandbox
from nanohermes.guard.gitmeta import moved_work_tree
from nanohermes.tools.fileops import Withheld
from nanohermes.tools.process import (
    command_env, confinement_of, read_only_of, run_capped, secret_values, secs, strip_newline, without_values,
)

_NOTE_CHARS = 400  # room kept for the tool's own notes when fitting output into max_output
_CUT = "\n[git output was "  # how the note on output cut at the capture cap starts


# Settings that stop git from starting a program a repository's config names.
# An external diff is not blanked here (an empty `diff.external` is a program git fails to
# run, which fails every diff): the tools that diff pass --no-ext-diff.
_NO_PROGRAMS = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "core.pager=cat",
                "log.showSignature=false", "status.submoduleSummary=false", "core.sshCommand=false",
                "credential.helper=", "gpg.program=false", "core.alternateRefsCommand=false")
# Per-driver keys that name programs: a driver's name is the repository's choice, so they
# are looked up first and each one is blanked (an empty command means "no filter").
_DRIVER_KEYS = re.compile(r"^(filter|diff|merge)\.(.+)\.(clean|smudge|process|textconv|command|driver)$")


async def _no_program_overrides(ctx: ToolContext, conf: sandbox.Confinement, env: dict[str, str]) -> list[str]:
    lim = ctx.limits
    argv = [programs.git(), *programs.GIT_OWN, *_flags(_NO_PROGRAMS), "config", "--name-only", "--get-regexp",
            r"^(filter|diff|merge)\."]
    fin = await run_capped(argv, cwd=ctx.workspace, env=env, limits=lim, timeout=lim.git_timeout_secs,
                           out_cap=lim.run_command_capture_bytes, err_cap=4096, confinement=conf)
    out: list[str] = []
    for name in fin.out.text().split():
        m = _DRIVER_KEYS.match(name)
        if m and "\n" not in name:
            out.append(f"{name}=")
            if m.group(1) == "filter":
                out.append(f"filter.{m.group(2)}.required=false")  # a blanked required filter would fail the call
    return out


def _flags(settings: tuple[str, ...] | list[str]) -> list[str]:
    return [x for kv in settings for x in ("-c", kv)]


async def git(ctx: ToolContext, *args: str, writes: Attempt | None = None) -> str:
    """Run `git args...` in the workspace; its stdout, with notes when it had to be cut. A read
    (`writes` None) runs read-only whatever the call was granted; a write runs in the
    confinement of the call's attempt (`writes`)."""
    env = command_env()
    lim = ctx.limits
    try:
        argv = [programs.git(), "--no-pager", "-c", "color.ui=never", "-c", "core.quotepath=off",
                "-c", "safe.bareRepository=explicit"]
    except FileNotFoundError:
        raise ToolError("git is not installed (no `git` on PATH outside the workspace); install git to use "
                        "the git_* tools") from None
    if writes is None:
        env["GIT_OPTIONAL_LOCKS"] = "0"
        conf = read_only_of(ctx)
    else:
        conf = confinement_of(ctx, writes)
    if moved := await asyncio.to_thread(moved_work_tree, ctx.workspace, env):
        raise ToolError(f"{moved}; the git tools read no files outside the workspace, so git {args[0]} did not run. "
                        "If that folder is meant to be the work tree, start nanohermes there; otherwise remove the "
                        "setting (`git config --unset core.worktree`)")
    try:
        if writes is None:
            argv += _flags([*_NO_PROGRAMS, *await _no_program_overrides(ctx, conf, env)])
        fin = await run_capped([*argv, *args], cwd=ctx.workspace, env=env, limits=lim, timeout=lim.git_timeout_secs,
                               out_cap=lim.run_command_capture_bytes, err_cap=lim.run_command_capture_bytes,
                               confinement=conf)
    except sandbox.SandboxError as e:
        raise ToolError(f"{e}; git did not run. `nanohermes doctor` shows what the sandbox needs") from None
    except FileNotFoundError:
        raise ToolError("git is not installed (no `git` on PATH outside the workspace); install git to use "
                        "the git_* tools") from None
    except OSError as e:
        raise ToolError(f"cannot run git: {e.strerror or e}") from None
    (err, out), withheld = without_values([fin.err.text(), fin.out.text()],
                                          await asyncio.to_thread(secret_values, conf, lim))
    message = (err.strip() or out.strip())[:4000]
    if fin.timed_out is not None:
        raise ToolError(f"git {args[0]} timed out after {secs(fin.timed_out)} and was killed"
                        + (f"; git said: {message}" if message else ""))
    if fin.exit_code != 0:
        if "not a git repository" in message:
            raise ToolError(f"{ctx.workspace} is not inside a git repository; create one with run_command "
                            f"(git init) or work in a repository\ngit exited with code {fin.exit_code}: {message}")
        raise ToolError(f"git {args[0]} failed with exit code {fin.exit_code}: {message or '(no message)'}")
    text = out
    if fin.out.dropped:
        text += (f"{_CUT}{fin.out.total} bytes; the first {len(fin.out.data)} and the last "
                 f"{fin.out.tail_len} were kept ({fin.out.dropped} bytes dropped where marked)]")
    return text + (f"\n[{withheld}]" if withheld else "")


async def withheld_specs(ctx: ToolContext, attempt: Attempt, listing: list[str],
                         paths: Callable[[str], list[str]] = lambda out: out.split("\0")) -> tuple[list[str], Withheld]:
    """Pathspecs that leave out what read rules withhold among the paths `git *listing*` names
    (relative to the repository's top; `paths` reads them from its output), and the Withheld
    that counts them; ([], a falsy Withheld) when no read rule covers the tool, without
    running git."""
    if attempt.read_rule is None:
        return [], Withheld(ctx, attempt, ctx.workspace)
    top = strip_newline(await git(ctx, "rev-parse", "--show-toplevel"))
    withheld = Withheld(ctx, attempt, Path(top))  # git names its top as a real path
    listed = await git(ctx, *listing)
    if _CUT in listed:  # a path left unread could be one a rule covers: nothing is shown
        raise ToolError(f"too many changed paths to check against the read rules (over "
                        f"{ctx.limits.run_command_capture_bytes} bytes of names); pass a narrower path")
    names = dict.fromkeys(n for n in paths(listed) if n)
    return [f":(top,exclude,literal){n}" for n in names if not withheld.keeps(n)], withheld


def porcelain_paths(text: str) -> list[str]:
    """The paths of `git status --porcelain=v1 -z` output: `XY path`, a rename's source after it."""
    out: list[str] = []
    fields = text.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        out.append(entry[3:])
        if "R" in entry[:2] or "C" in entry[:2]:
            out.append(fields[i] if i < len(fields) else "")
            i += 1
    return out


def fit(text: str, limit: int, hint: str) -> str:
    """Keep the head of `text` within `limit` chars, with an exact note and a next step."""
    keep = max(0, limit - _NOTE_CHARS)
    if len(text) <= limit:
        return text
    return f"{text[:keep]}\n… {len(text) - keep} more chars not shown; {hint}"


@dataclass(frozen=True, kw_only=True)
class NoParams(Params):
    pass


@dataclass(frozen=True, kw_only=True)
class _ReadOnlyGit(ReadOnlyTool[P]):
    group: ClassVar[str] = "git"
    claude_names: ClassVar[tuple[str, ...]] = ("Bash",)  # Claude Code runs git through its shell

    def git_line(self, args: P) -> list[str]:
        """The git command line this call runs, as a person would type it (for hooks)."""
        raise NotImplementedError

    def claude_calls(self, args: P, workspace: Path) -> list[ClaudeCall]:
        return [ClaudeCall.bash(shlex.join(self.git_line(args)), args.dump())]

    def output_limit(self) -> str:
        return "run_command_capture_bytes, max_output"


@dataclass(frozen=True, kw_only=True)
class GitStatus(_ReadOnlyGit[NoParams]):
    name: ClassVar[str] = "git_status"
    description: ClassVar[str] = (
        "Show the branch (ahead/behind) and the short status of staged, unstaged and untracked files. "
        "See git_diff for the changes."
    )
    params: ClassVar[type[Params]] = NoParams

    def git_line(self, args: NoParams) -> list[str]:
        return ["git", "status", "--short", "--branch"]

    async def run(self, args: NoParams, ctx: ToolContext, attempt: Attempt) -> str:
        # Submodules' own work trees are not inspected: that would run git inside them, under
        # their config, whose filter drivers the overrides here cannot name.
        excluded, withheld = await withheld_specs(
            ctx, attempt, ["status", "--porcelain=v1", "-z", "--ignore-submodules=dirty"], porcelain_paths)
        specs = ["--", ":(top)", *excluded] if excluded else []
        out = strip_newline(await git(ctx, "status", "--short", "--branch", "--ignore-submodules=dirty", *specs))
        if len(out.splitlines()) <= 1:
            out += "\nnothing to commit, working tree clean"
        if note := withheld.note("path", "not shown"):
            out += "\n" + note
        return fit(out, ctx.limits.max_output, "see one folder with git_diff(path=...) or git_diff(stat=true)")


@dataclass(frozen=True, kw_only=True)
class GitDiffParams(Params):
    staged: bool = False
    path: str | None = None
    stat: bool = False


@dataclass(frozen=True, kw_only=True)
class GitDiff(_ReadOnlyGit[GitDiffParams]):
    name: ClassVar[str] = "git_diff"
    description: ClassVar[str] = (
        "Show changes as a unified diff: unstaged by default, staged with staged=true; `path` narrows "
        "it, stat=true gives per-file counts. A long diff is cut with a note."
    )
    params: ClassVar[type[Params]] = GitDiffParams
    kind = "path"

    def rule_subject(self, args: GitDiffParams) -> str | None:
        return args.path

    def git_line(self, args: GitDiffParams) -> list[str]:
        return ["git", "diff", *(["--staged"] if args.staged else []), *(["--stat"] if args.stat else []),
                *(["--", args.path] if args.path else [])]

    async def run(self, args: GitDiffParams, ctx: ToolContext, attempt: Attempt) -> str:
        argv = ["diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"]
        if args.staged:
            argv.append("--staged")
        path = self.resolved(args, ctx, attempt).used(args.path) if args.path else None
        where = [path] if path else []
        # Each side of a rename is listed, so a file a read rule covers shows from neither.
        excluded, withheld = await withheld_specs(ctx, attempt, [*argv, "--name-only", "-z", "--no-renames", "--", *where])
        if args.stat:
            argv.append("--stat")
        if where or excluded:
            argv += ["--", *(where or [":(top)"]), *excluded]
        out = strip_newline(await git(ctx, *argv))
        note = withheld.note("file", "not shown")
        if not out:
            where_text = f" in {path}" if path else ""
            empty = (f"no staged changes{where_text}; unstaged ones: git_diff()" if args.staged
                     else f"no unstaged changes{where_text}; staged ones: git_diff(staged=true)")
            return empty + (f"\n{note}" if note else "")
        return fit(out, ctx.limits.max_output, "narrow it with path, or see the overview with stat=true") + (
            f"\n\n{note}" if note else "")


@dataclass(frozen=True, kw_only=True)
class GitLogParams(Params):
    count: int = 20
    path: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        # Clamped rather than refused (frozen, hence object.__setattr__).
        object.__setattr__(self, "count", min(max(self.count, 1), 200))


@dataclass(frozen=True, kw_only=True)
class GitLog(_ReadOnlyGit[GitLogParams]):
    name: ClassVar[str] = "git_log"
    description: ClassVar[str] = (
        "Show recent commits, newest first: short hash, date, author, subject. `count` is 1..200; `path` "
        "keeps commits that touched it."
    )
    params: ClassVar[type[Params]] = GitLogParams
    kind = "path"
    shows_contents = False  # commit lines, never a file's contents

    def rule_subject(self, args: GitLogParams) -> str | None:
        return args.path

    def git_line(self, args: GitLogParams) -> list[str]:
        return ["git", "log", f"--max-count={args.count}", *(["--", args.path] if args.path else [])]

    async def run(self, args: GitLogParams, ctx: ToolContext, attempt: Attempt) -> str:
        argv = ["log", "--no-textconv", "--no-ext-diff", f"--max-count={args.count}", "--date=short", "--format=%h %ad %an: %s"]
        path = self.resolved(args, ctx, attempt).used(args.path) if args.path else None
        if path:
            argv += ["--", path]
        out = strip_newline(await git(ctx, *argv))
        if not out:
            return f"no commits touch {path}" if path else "no commits yet"
        return fit(out, ctx.limits.max_output, "lower count or pass a path")


@dataclass(frozen=True, kw_only=True)
class GitCommitParams(Params):
    message: str
    paths: list[str] | None = None
    all: bool = False

    non_empty: ClassVar[dict[str, str]] = {"message": "describe the change in a short subject line"}

    def __post_init__(self) -> None:
        if self.paths is not None and any(not p.strip() for p in self.paths):
            raise ValueError("paths must not contain empty strings; list the files to stage, or omit paths")
        super().__post_init__()


_NOTHING_STAGED = "nothing to commit: nothing is staged; pass paths to stage, or all=true for every change to tracked files"


@dataclass(frozen=True, kw_only=True)
class GitCommit(Tool[GitCommitParams]):
    name: ClassVar[str] = "git_commit"
    group: ClassVar[str] = "git"
    description: ClassVar[str] = (
        "Commit with `message`. Stages `paths` first when given, or every tracked change with all=true; "
        "else commits what is staged. Returns the hash and a summary. Asks the user to confirm unless "
        "auto-approval is on."
    )
    params: ClassVar[type[Params]] = GitCommitParams
    approval: ClassVar[Approval] = "always"
    effect = "write"  # the repository's history

    claude_names: ClassVar[tuple[str, ...]] = ("Bash",)  # Claude Code commits through its shell

    def suggest_rule(self, args: GitCommitParams) -> Rule:
        return Rule(self.name)

    def claude_calls(self, args: GitCommitParams, workspace: Path) -> list[ClaudeCall]:
        line = shlex.join(["git", "commit", *(["--all"] if args.all else []), "-m", args.message])
        if args.paths:
            line = shlex.join(["git", "add", "--", *args.paths]) + " && " + line
        return [ClaudeCall.bash(line, args.dump())]

    def approval_detail(self, args: GitCommitParams, ctx: ToolContext, attempt: Attempt) -> str:
        if args.paths:
            paths, _ = _staged(args.paths, ctx.workspace)
            what = "stages " + ", ".join(paths) + (" and every change to tracked files" if args.all else "")
        else:
            what = "stages every change to tracked files" if args.all else "commits what is already staged"
        return f"{what}\n\n{args.message}"

    async def precheck(self, args: GitCommitParams, ctx: ToolContext, attempt: Attempt) -> None:
        # Read-only; outside a repository it says so. "XY path": X the index, Y the work tree.
        status = await git(ctx, "status", "--porcelain=v1", "--untracked-files=no")
        rows = [row for row in status.splitlines() if len(row) > 3]
        staged = any(row[0] not in " ?" for row in rows)
        if args.paths:
            _staged(args.paths, ctx.workspace)  # a Windows path that names nothing is refused before anyone is asked
        if not args.paths and not staged and not (args.all and any(row[1] != " " for row in rows)):
            raise ToolError(_NOTHING_STAGED)

    async def run(self, args: GitCommitParams, ctx: ToolContext, attempt: Attempt) -> str:
        read_as: tuple[tuple[str, str], ...] = ()
        if args.paths:
            paths, read_as = _staged(args.paths, ctx.workspace)
            await git(ctx, "add", "--", *paths, writes=attempt)
        argv = ["commit", "-m", args.message]
        if args.all:
            argv.append("--all")
        try:
            out = strip_newline(await git(ctx, *argv, writes=attempt))
        except ToolError as e:
            if "nothing to commit" in str(e) or "no changes added to commit" in str(e):
                raise ToolError(f"{_NOTHING_STAGED}\n{e}") from None
            raise
        head = strip_newline(await git(ctx, "rev-parse", "HEAD"))
        done = fit(f"committed {head}\n{out}", ctx.limits.max_output, "see the whole commit with git_log and git_diff")
        if read_as:
            # only a path written the Windows way
            from nanohermes.guard.foreign_paths import note

            done += "\n" + note(read_as)
        return done


def _staged(paths: list[str], workspace: Path) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """The paths to stage, a Windows path (`src\\app.py`) read as the workspace path it names,
    as the file tools read it; and (written, used) for each so read. A Windows path that names
    nothing there is refused with the path to write instead (never handed to git, whose
    "pathspec did not match" says nothing of why)."""
    # only a path written the Windows way
    from nanohermes.guard.foreign_paths import ForeignPath, is_foreign, mapped

    out: list[str] = []
    read_as: list[tuple[str, str]] = []
    for p in paths:
        try:
            use = mapped(workspace, workspace, p) if is_foreign(p) else None
        except ForeignPath as e:
            raise ToolError(str(e)) from None
        out.append(use or p)
        if use is not None:
            read_as.append((p, use))
    return out, tuple(read_as)


def tools() -> list[Tool]:
    return [GitCommit(), GitDiff(), GitLog(), GitStatus()]
