"""A `.git` file or folder in a subfolder of the workspace leading to a planted repository: the
person's next `git status` in that folder runs what its config names. First shown to run (the
control), then made by a sandboxed command (taken away after it), and made where the sandbox
does not reach (named at the turn's end, in `-p`'s json and on stderr). Real git, real kernel
sandbox, real CLI."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from test_sandbox_git import evil, repo  # noqa: F401  (fixtures: the same repository and planted program)

AVAIL = sandbox.probe()
sandboxed = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                               reason="needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")

# Each plant leads `sub/`'s git to a repository whose config names the program `{script}`.
PLANTS = {
    ".git file": "git init -q --bare .cache/r && git --git-dir=.cache/r config core.bare false && "
                 "git --git-dir=.cache/r config core.fsmonitor {script} && mkdir -p sub && "
                 "echo 'gitdir: ../.cache/r' > sub/.git",
    ".git folder": "mkdir -p sub && git init -q sub && git -C sub config core.fsmonitor {script}",
    ".git link": "git init -q --bare .cache/r && git --git-dir=.cache/r config core.bare false && "
                 "git --git-dir=.cache/r config core.fsmonitor {script} && mkdir -p sub && ln -s ../.cache/r sub/.git",
    "bare folder": "git init -q --bare sub && git --git-dir=sub config core.bare false && "
                   "git --git-dir=sub config core.worktree .. && git --git-dir=sub config core.fsmonitor {script}",
}
# Where each plant leads git: what the turn's end names.
NAMED = {".git file": ["sub/.git", ".cache/r"], ".git folder": ["sub/.git"], ".git link": ["sub/.git", ".cache/r"],
         "bare folder": ["sub"]}


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The person's own git, unconfined, as they would run it."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kind", list(PLANTS))
def test_the_control_a_subfolders_git_runs_the_planted_program(repo: Path, evil: tuple[Path, Path], kind: str) -> None:
    script, mark = evil
    subprocess.run(PLANTS[kind].format(script=script), shell=True, cwd=repo, check=True)
    git(repo / "sub", "status")
    assert mark.exists()


@sandboxed
@pytest.mark.parametrize("kind", list(PLANTS))
def test_a_sandboxed_command_cannot_leave_one(turn: Any, server: FakeServer, repo: Path, evil: tuple[Path, Path],
                                             kind: str) -> None:
    script, mark = evil
    server.add(tool_reply(call("run_command", {"command": PLANTS[kind].format(script=script)})), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    [out] = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    for path in NAMED[kind]:
        assert not os_lexists(repo / path), path
    assert "(removed:" in out and NAMED[kind][0] in out, out
    (repo / "sub").mkdir(exist_ok=True)  # a bare folder is taken away whole
    git(repo / "sub", "status")
    assert not mark.exists()


@sandboxed
def test_a_harmless_repository_a_command_makes_in_a_subfolder_stays(turn: Any, server: FakeServer, repo: Path) -> None:
    """`git init` in a subfolder (a test suite's fixture, a vendored checkout) is kept: its
    config and hooks name no program."""
    server.add(tool_reply(call("run_command", {"command": "git init -q fixture && git -C fixture status --short"})),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    assert (repo / "fixture" / ".git" / "HEAD").is_file()
    assert r.json()["runs_later"] == []


@sandboxed
def test_an_existing_subfolders_repository_keeps_its_config_and_hooks(turn: Any, server: FakeServer, repo: Path,
                                                                     evil: tuple[Path, Path]) -> None:
    """A repository already in a subfolder is kept as the workspace's own: its config and hooks
    read-only for a sandboxed command, a `commondir` it made taken away."""
    script, mark = evil
    git(repo, "init", "-q", "vendor/lib").check_returncode()
    line = (f"git -C vendor/lib config core.fsmonitor {script}; cp {script} vendor/lib/.git/hooks/post-checkout; "
            "echo ../../../.cache > vendor/lib/.git/commondir; true")
    server.add(tool_reply(call("run_command", {"command": line})), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    assert "fsmonitor" not in (repo / "vendor/lib/.git/config").read_text()
    assert not (repo / "vendor/lib/.git/hooks/post-checkout").exists()
    assert not (repo / "vendor/lib/.git/commondir").exists()
    git(repo / "vendor/lib", "status")
    assert not mark.exists()


@pytest.mark.parametrize("kind", list(PLANTS))
def test_one_made_outside_the_sandbox_is_named_at_the_turns_end(turn: Any, server: FakeServer, repo: Path,
                                                                evil: tuple[Path, Path], kind: str) -> None:
    """With the sandbox off, `--yes` runs the command unconfined: the plant stays, and the
    turn's end names it with the other files that run code later."""
    script, _ = evil
    server.add(tool_reply(call("run_command", {"command": PLANTS[kind].format(script=script)})), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None,
             config={"sandbox": {"mode": "off"}})
    assert r.code == 0, r.err
    assert all(os_lexists(repo / path) for path in NAMED[kind])
    named = r.json()["runs_later"]
    assert sorted(n.split(": ", 1)[0] for n in named) == sorted(NAMED[kind])
    assert all(n.endswith(": a git folder or .git file of a subfolder (its repository's config or hooks name a "
                          "program: your next git command in that folder runs it)") for n in named)
    assert NAMED[kind][0] in r.err  # the warning on stderr


def test_a_harmless_or_unchanged_one_is_not_named(turn: Any, server: FakeServer, repo: Path,
                                                   evil: tuple[Path, Path]) -> None:
    """A fresh `git init` in a subfolder is not named; nor is a planted one the turn did not
    touch (it was there before: named by the turn that made it)."""
    script, _ = evil
    subprocess.run(PLANTS[".git folder"].format(script=script), shell=True, cwd=repo, check=True)
    server.add(tool_reply(call("run_command", {"command": "git init -q fixture && git -C sub status --short"})),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None,
             config={"sandbox": {"mode": "off"}})
    assert r.code == 0, r.err
    assert (repo / "fixture" / ".git").is_dir()
    assert r.json()["runs_later"] == []


def os_lexists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


@pytest.mark.parametrize("change", ["git -C vendor/lib config core.fsmonitor {script}",
                                    "cp {script} vendor/lib/.git/hooks/post-commit"], ids=["config", "hook"])
def test_an_existing_subfolders_repository_changed_outside_the_sandbox_is_named(
        turn: Any, server: FakeServer, repo: Path, evil: tuple[Path, Path], change: str) -> None:
    script, mark = evil
    git(repo, "init", "-q", "vendor/lib").check_returncode()
    server.add(tool_reply(call("run_command", {"command": change.format(script=script)})), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None,
             config={"sandbox": {"mode": "off"}})
    assert r.code == 0, r.err
    assert [n.split(": ", 1)[0] for n in r.json()["runs_later"]] == ["vendor/lib/.git"]
    # The control: the person's next commit there runs it.
    git(repo / "vendor" / "lib", "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty",
        "-m", "x")
    assert mark.exists()


@sandboxed
def test_a_subfolders_git_link_led_to_a_planted_repository_is_taken_away(turn: Any, server: FakeServer, repo: Path,
                                                                          evil: tuple[Path, Path]) -> None:
    """A `.git` link cannot be bound read-only (a bind follows it): one the command led
    elsewhere, to a repository whose config names a program, is judged as a new one."""
    script, mark = evil
    git(repo, "init", "-q", "--bare", ".cache/good").check_returncode()
    (repo / "sub").mkdir()
    (repo / "sub" / ".git").symlink_to("../.cache/good")
    line = (f"git init -q --bare .cache/evil && git --git-dir=.cache/evil config core.bare false && "
            f"git --git-dir=.cache/evil config core.fsmonitor {script} && ln -sfn ../.cache/evil sub/.git")
    server.add(tool_reply(call("run_command", {"command": line})), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    assert not os_lexists(repo / "sub" / ".git") and not os_lexists(repo / ".cache" / "evil")
    assert (repo / ".cache" / "good" / "HEAD").is_file()
    git(repo / "sub", "status")
    assert not mark.exists()


@pytest.mark.parametrize("kind", ["folder", "bare"])
def test_one_planted_in_a_folder_a_look_listed_is_named_whatever_its_times_say(
        turn: Any, server: FakeServer, repo: Path, evil: tuple[Path, Path], kind: str) -> None:
    """The look lists a folder again only when it changed since (its change time, which
    nothing sets back): a plant in a folder listed long enough ago to be trusted is found
    even when the command puts the folder's modification time back."""
    script, _ = evil
    old = repo / "old" / "deep"
    old.mkdir(parents=True)
    (old / "keep.txt").write_text("kept\n")
    back = old.stat().st_mtime_ns
    # Until every folder's last change is older than what a listing trusts (two seconds).
    folders = [repo, repo / "old", old]
    while time.time_ns() - max(f.stat().st_ctime_ns for f in folders) < 2_500_000_000:
        time.sleep(0.1)
    plant = {"folder": f"git init -q old/deep && git -C old/deep config core.fsmonitor {script}",
             "bare": f"git init -q --bare old/deep && git --git-dir=old/deep config core.bare false && "
                     f"git --git-dir=old/deep config core.fsmonitor {script}"}[kind]
    server.add(tool_reply(call("run_command", {"command": f"{plant} && touch -m -d @{back // 10**9}.{back % 10**9:09d} old/deep old"})),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", server=server, stdin=None,
             config={"sandbox": {"mode": "off"}})
    assert r.code == 0, r.err
    assert old.stat().st_mtime_ns == back  # to the nanosecond
    assert [n.split(": ", 1)[0] for n in r.json()["runs_later"]] == [{"folder": "old/deep/.git", "bare": "old/deep"}[kind]]
