"""Git metadata prevented, not swept: where a linked worktree's git finds its repository
(`commondir`, `gitdir`, the worktree's `.git` file), and a `commondir` a background task would
make, stay as they are from the start; a repository whose work tree is set outside the
workspace is not read through git. Each plant is first shown to run a program at the
person's plain git (the control), then tried through nanohermes. Real git, real kernel."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from exec_support import acall, make_runtime
from nanohermes.guard import sandbox
from nanohermes.common.budget import Limits
from nanohermes.turn.checkpoints import repository
from nanohermes.config import Config
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import ToolContext
from nanohermes.tools.tasks import task_manager
from nanohermes.guard.sandbox import Refused

AVAIL = sandbox.probe()
confined = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                              reason="needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The person's own git, unconfined."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def init(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "T")):
        git(folder, *args).check_returncode()
    (folder / "a.txt").write_text("one\n")
    git(folder, "add", "a.txt").check_returncode()
    git(folder, "commit", "-qm", "first").check_returncode()
    return folder


@pytest.fixture
def evil(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves a mark when anything runs it, and a repository outside the
    workspace whose config names it: what a plant points the person's git at."""
    mark = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {mark}\nexit 0\n")
    script.chmod(0o755)
    planted = init(tmp_path / "planted")
    git(planted, "config", "core.fsmonitor", str(script)).check_returncode()
    return planted / ".git", mark


def with_worktree(main: Path, wt: Path) -> Path:
    """`main` a repository with a linked worktree at `wt`."""
    init(main)
    git(main, "worktree", "add", "-q", str(wt)).check_returncode()
    return wt


def model_runs(turn: Any, server: FakeServer, *commands: str) -> list[str]:
    """The model runs each command under --yes: sandboxed, it may write the workspace."""
    server.add(*(tool_reply(call("run_command", {"command": c}, id=f"c{i}")) for i, c in enumerate(commands)),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


@confined
@pytest.mark.parametrize("plant", [
    "echo {planted} > .git/worktrees/wt/commondir",
    "mv .git/worktrees/wt .git/worktrees/old && mkdir .git/worktrees/wt && cp .git/worktrees/old/HEAD "
    ".git/worktrees/old/gitdir .git/worktrees/wt/ && echo {planted} > .git/worktrees/wt/commondir",
    "mv .git/worktrees .git/wt-old && mkdir -p .git/worktrees/wt && cp .git/wt-old/wt/HEAD .git/wt-old/wt/gitdir "
    ".git/worktrees/wt/ && echo {planted} > .git/worktrees/wt/commondir",
], ids=["rewrite", "rename-the-folder", "rename-its-parent"])
def test_a_linked_worktrees_commondir_stays_as_git_wrote_it(turn: Any, server: FakeServer, workspace: Path,
                                                           tmp_path: Path, evil: tuple[Path, Path], plant: str) -> None:
    planted, mark = evil
    # The control, on a repository of the same shape: the person's git in the worktree then
    # runs the planted program.
    other = tmp_path / "other"
    other_wt = with_worktree(other, tmp_path / "o" / "wt")  # the same name: .git/worktrees/wt
    control = subprocess.run(plant.format(planted=planted), shell=True, cwd=other, capture_output=True, text=True)
    assert control.returncode == 0, control.stderr
    git(other_wt, "status")
    assert mark.exists()
    mark.unlink()

    worktree = with_worktree(workspace, tmp_path / "wt")
    pointer = workspace / ".git" / "worktrees" / "wt" / "commondir"
    before = pointer.read_text()
    [out] = model_runs(turn, server, plant.format(planted=planted))
    assert pointer.read_text() == before, out
    git(worktree, "status")
    assert not mark.exists(), out


@confined
@pytest.mark.parametrize("plant", [
    "echo 'gitdir: {planted}' > inner/.git",
    "mv inner inner-old && mkdir inner && echo 'gitdir: {planted}' > inner/.git",
], ids=["rewrite", "rename-the-worktree"])
def test_a_worktree_inside_the_workspace_keeps_its_git_file(turn: Any, server: FakeServer, workspace: Path,
                                                            tmp_path: Path, evil: tuple[Path, Path], plant: str) -> None:
    """A linked worktree made inside the workspace has its `.git` file there: rewritten, it
    would send the person's git in that worktree to a planted repository."""
    planted, mark = evil
    other = tmp_path / "other"
    with_worktree(other, other / "inner")  # the control, of the same shape
    assert subprocess.run(plant.format(planted=planted), shell=True, cwd=other).returncode == 0
    git(other / "inner", "status")
    assert mark.exists()
    mark.unlink()

    with_worktree(workspace, workspace / "inner")
    pointer = workspace / "inner" / ".git"
    before = pointer.read_text()
    [out] = model_runs(turn, server, plant.format(planted=planted))
    assert "Read-only file system" in out or "Device or resource busy" in out, out
    assert pointer.read_text() == before
    git(workspace / "inner", "status")
    assert not mark.exists(), out


def test_every_worktree_and_submodule_folder_is_kept_however_many(workspace: Path) -> None:
    """A command may add folders of its own to `.git/worktrees` and `.git/modules`: a look
    that stopped at a count would leave the person's real ones past it writable."""
    from nanohermes.guard.gitmeta import metadata, submodule_dirs

    init(workspace)
    n = 300
    for i in range(n):
        wt = workspace / ".git" / "worktrees" / f"fake{i}"
        wt.mkdir(parents=True)
        (wt / "commondir").write_text("../..\n")
        module = workspace / ".git" / "modules" / "libs" / f"m{i}"
        module.mkdir(parents=True)
        (module / "HEAD").write_text("ref: refs/heads/main\n")
        (module / "config").write_text("")
    real = workspace.resolve() / ".git"
    assert len(submodule_dirs(real / "modules")) == n
    protected = set(metadata(workspace).protected)
    assert all(real / "worktrees" / f"fake{i}" / "commondir" in protected for i in range(n))
    assert all(real / "modules" / "libs" / f"m{i}" / "config" in protected for i in range(n))


@confined
def test_folders_a_command_adds_leave_the_real_worktree_kept(turn: Any, server: FakeServer, workspace: Path,
                                                             tmp_path: Path, evil: tuple[Path, Path]) -> None:
    planted, mark = evil
    worktree = with_worktree(workspace, tmp_path / "wt")
    pointer = workspace / ".git" / "worktrees" / "wt" / "commondir"
    before = pointer.read_text()
    outs = model_runs(turn, server, "for i in $(seq 1000); do mkdir .git/worktrees/w$i; done; echo made",
                      f"echo {planted} > .git/worktrees/wt/commondir")
    assert "made" in outs[0] and "Read-only file system" in outs[1], outs
    assert pointer.read_text() == before
    git(worktree, "status")
    assert not mark.exists()


@confined
def test_a_linked_worktree_workspace_keeps_its_pointers(turn: Any, server: FakeServer, workspace: Path,
                                                        tmp_path: Path, evil: tuple[Path, Path]) -> None:
    """The workspace is itself a linked worktree: its `.git` file, and the `gitdir` and
    `commondir` of its folder in the main repository, are read-only to its commands."""
    planted, mark = evil
    main = init(tmp_path / "main")
    git(main, "worktree", "add", "-q", str(workspace / "wt")).check_returncode()
    ws = workspace / "wt"
    own = main / ".git" / "worktrees" / "wt"
    plants = [f"echo 'gitdir: {planted}' > .git", f"echo {planted} > {own / 'commondir'}",
              f"echo {tmp_path}/x/.git > {own / 'gitdir'}"]
    saved = {p: p.read_text() for p in (ws / ".git", own / "commondir", own / "gitdir")}
    subprocess.run(plants[0], shell=True, cwd=ws, check=True)
    git(ws, "status")
    assert mark.exists()  # the control
    mark.unlink()
    (ws / ".git").write_text(saved[ws / ".git"])

    server.add(*(tool_reply(call("run_command", {"command": c}, id=f"c{i}")) for i, c in enumerate(plants)),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", "-C", str(ws), server=server, stdin=None)
    assert r.code == 0, r.err
    outs = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert all("Read-only file system" in out for out in outs), outs
    assert {p: p.read_text() for p in saved} == saved
    git(ws, "status")
    assert not mark.exists()


@confined
def test_a_background_task_cannot_make_a_commondir(workspace: Path, evil: tuple[Path, Path]) -> None:
    """Made by a task that outlives its call, a `.git/commondir` would be in force until a
    sweep took it away: the top level of the git folder is read-only to the task from the
    start, while its git reads as before and says why it cannot write."""
    planted, mark = evil
    init(workspace)
    commondir = workspace / ".git" / "commondir"
    # The control, in a copy: the plant makes the person's next git status run the program.
    copy = workspace.parent / "copy"
    subprocess.run(["cp", "-a", str(workspace), str(copy)], check=True)
    (copy / ".git" / "commondir").write_text(f"{planted}\n")
    git(copy, "status")
    assert mark.exists()
    mark.unlink()

    async def go() -> tuple[str, str]:
        rt = make_runtime(workspace)  # goal mode: the task runs unasked, may write the workspace
        started = await acall(rt, "run_command", background=True,
                              command=f"echo {planted} > .git/commondir; git status --short; git log --format=%s; "
                                      "git commit -qm second --allow-empty")
        tid = started.split()[3].rstrip(":")
        task = task_manager(ToolContext(workspace=workspace, limits=Limits(), config=Config(),
                                        state=rt.session.state)).get(tid)
        assert task.watcher is not None
        await asyncio.wait({task.watcher})
        out = await acall(rt, "task_output", task_id=tid)
        foreground = await acall(rt, "run_command", command="echo new > b.txt && git add b.txt && echo added")
        await rt.close()
        return out, foreground

    out, foreground = asyncio.run(go())
    assert ".git/commondir: Read-only file system" in out and "first" in out, out
    assert str(Refused("sealed", f"{workspace.resolve()}/.git/commondir")) in out, out  # sealed, not a plain write
    assert not commondir.exists()
    git(workspace, "status")
    assert not mark.exists()
    assert git(workspace, "log", "--format=%s").stdout == "first\n"  # its commit could not be made
    assert "added" in foreground and "b.txt" in git(workspace, "diff", "--cached", "--name-only").stdout


# -- a work tree set outside the workspace ------------------------------------------------------

@pytest.fixture
def moved(workspace: Path, tmp_path: Path) -> Path:
    """A repository (as an archive would bring it) whose config sets the work tree to a folder
    outside the workspace, whose index tracks a file there."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "notes.txt").write_text("private notes\n")
    init(workspace)
    git(workspace, "--work-tree", str(outside), "add", "notes.txt").check_returncode()
    git(workspace, "--work-tree", str(outside), "commit", "-qm", "notes").check_returncode()
    (outside / "notes.txt").write_text("private notes\nTHE-PERSONS-SECRET\n")
    git(workspace, "config", "core.worktree", str(outside)).check_returncode()
    return outside


@pytest.mark.parametrize("mode", ["default", "plan"])
def test_a_work_tree_set_outside_the_workspace_is_not_read_through_git(turn: Any, server: FakeServer, workspace: Path,
                                                                       moved: Path, mode: str) -> None:
    assert "THE-PERSONS-SECRET" in git(workspace, "diff").stdout  # the control: git shows the outside file
    server.add(tool_reply(call("git_diff", {}, id="d"), call("git_status", {}, id="s"), call("git_log", {}, id="l")),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--mode", mode, server=server, stdin=None)
    assert r.code == 0, r.err
    outs = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    for out in outs:
        assert out.startswith("ERROR: git's work tree ") and f" {moved.resolve()}, outside it " in out, out
        assert f"core.worktree = {moved}" in out
        assert "THE-PERSONS-SECRET" not in out and "notes.txt" not in out
    assert repository(workspace) is None  # nanohermes's own git (checkpoints) does not take it either


@pytest.mark.parametrize("flags", [(), ("--yes",)], ids=["default", "yes"])
def test_a_command_running_git_there_needs_a_persons_yes(turn: Any, server: FakeServer, workspace: Path, moved: Path,
                                                        flags: tuple[str, ...]) -> None:
    """The built-in read-only `git diff` would run unasked, and the same git through a
    wrapper or a shell under --yes: each is a person's to allow, refused with nobody to ask."""
    lines = ["git diff", "timeout 20 git grep -h SECRET", "sh -c 'git show :notes.txt; git diff'"]
    for line in lines:  # the control: each line shows the outside file
        assert "PERSONS-SECRET" in subprocess.run(line.replace("SECRET", "PERSONS-SECRET"), shell=True, cwd=workspace,
                                                  capture_output=True, text=True).stdout
    server.add(tool_reply(*(call("run_command", {"command": c}, id=f"c{i}") for i, c in enumerate(lines))),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", *flags, server=server, stdin=None)
    assert r.code == 0, r.err
    outs = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert all("SECRET" not in out for out in outs), outs
    denials = r.json()["permission_denials"]
    assert [d["tool_input"]["command"] for d in denials] == lines
    for d in denials:
        assert f" {moved.resolve()}, outside it" in d["reason"], d
        assert "this line runs git there" in d["reason"]
    assert all(d["answered_by"] == ("rules" if flags else "no terminal to ask") for d in denials)


def test_a_work_tree_inside_the_workspace_or_found_by_git_is_read(turn: Any, server: FakeServer, workspace: Path,
                                                                   tmp_path: Path) -> None:
    init(workspace)
    (workspace / "a.txt").write_text("two\n")
    git(workspace, "config", "core.worktree", "..").check_returncode()  # the workspace itself, spelled out
    sub = workspace / "sub"
    sub.mkdir()
    server.add(tool_reply(call("git_diff", {}, id="d"), call("run_command", {"command": "git diff"}, id="c")),
               Reply(text="done"))
    r = turn("-p", "go", server=server, stdin=None, cwd=workspace)
    assert r.code == 0, r.err
    outs = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert all("-one\n+two" in out for out in outs), outs  # run_command's git diff runs unasked
    assert repository(workspace) is not None
