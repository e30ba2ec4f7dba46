"""git tools on real temporary repositories."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest

from exec_support import call, make_runtime, no_leftover_processes  # noqa: F401
from nanohermes.common.budget import Limits
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.tools.git import GitLog


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(workspace: Path) -> Path:
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "config", "user.name", "Ada Tester")
    git(workspace, "config", "user.email", "ada@example.com")
    (workspace / "a.txt").write_text("one\ntwo\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-q", "-m", "first commit")
    return workspace


def test_status_shows_branch_and_short_status(repo: Path) -> None:
    rt = make_runtime(repo)
    assert call(rt, "git_status") == "## main\nnothing to commit, working tree clean"
    (repo / "a.txt").write_text("one\nTWO\n")
    (repo / "new.txt").write_text("x")
    assert call(rt, "git_status") == "## main\n M a.txt\n?? new.txt"


def test_diff_unstaged_staged_path_and_stat(repo: Path) -> None:
    rt = make_runtime(repo)
    assert call(rt, "git_diff") == "no unstaged changes; staged ones: git_diff(staged=true)"
    (repo / "a.txt").write_text("one\nTWO\n")
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    unstaged = call(rt, "git_diff")
    assert "-two\n+TWO" in unstaged and "b.txt" not in unstaged
    staged = call(rt, "git_diff", staged=True)
    assert "+++ b/b.txt\n@@ -0,0 +1 @@\n+b" in staged and "a.txt" not in staged
    assert call(rt, "git_diff", stat=True) == " a.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)"
    assert call(rt, "git_diff", path="b.txt") == "no unstaged changes in b.txt; staged ones: git_diff(staged=true)"
    assert call(rt, "git_diff", staged=True, path="a.txt") == "no staged changes in a.txt; unstaged ones: git_diff()"


def test_long_diff_is_cut_with_an_exact_note(repo: Path) -> None:
    (repo / "a.txt").write_text("".join(f"line {i}\n" for i in range(2000)))
    full = git(repo, "diff", "--no-ext-diff").rstrip("\n")
    out = call(make_runtime(repo, limits=Limits(max_output=2000)), "git_diff")
    assert len(out) <= 2000
    shown, note = out.rsplit("\n… ", 1)
    m = re.fullmatch(r"(\d+) more chars not shown; narrow it with path, or see the overview with stat=true", note)
    assert m, note
    assert shown == full[: len(full) - int(m.group(1))]


def test_log_count_path_and_format(repo: Path) -> None:
    for i in range(3):
        (repo / f"f{i}.txt").write_text(str(i))
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"change {i}")
    rt = make_runtime(repo)
    lines = call(rt, "git_log", count=2).splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"[0-9a-f]{7,} \d{4}-\d\d-\d\d Ada Tester: change 2", lines[0])
    assert call(rt, "git_log", path="f0.txt").endswith("Ada Tester: change 0")
    assert len(call(rt, "git_log").splitlines()) == 4
    assert call(rt, "git_log", path="nothing-here") == "no commits touch nothing-here"


@pytest.mark.parametrize("given,expected", [(0, 1), (20, 20), (500, 200)])
def test_log_count_is_clamped(given: int, expected: int) -> None:
    assert GitLog().parse({"count": given}).count == expected  # type: ignore[attr-defined]


def test_git_output_capture_lowered(repo: Path) -> None:
    expected = git(repo, "log", "--max-count=20", "--date=short", "--format=%h %ad %an: %s")
    out = call(make_runtime(repo, limits=Limits(run_command_capture_bytes=10)), "git_log")
    n = len(expected.encode())
    raw = expected.encode()
    assert out == (f"{raw[:5].decode()}\n[… {n - 10} bytes dropped here …]\n{raw[-5:].decode()}\n"
                   f"[git output was {n} bytes; the first 5 and the last 5 were kept ({n - 10} bytes dropped where marked)]")


def test_commit_paths_returns_hash_and_summary(repo: Path) -> None:
    (repo / "new.txt").write_text("hello\n")
    out = call(make_runtime(repo), "git_commit", message="add new file", paths=["new.txt"])
    head = git(repo, "rev-parse", "HEAD").strip()
    assert out.startswith(f"committed {head}\n[main {head[:7]}")
    assert "add new file\n 1 file changed, 1 insertion(+)\n create mode 100644 new.txt" in out
    assert git(repo, "log", "-1", "--format=%s").strip() == "add new file"


def test_commit_all_stages_tracked_changes_only(repo: Path) -> None:
    (repo / "a.txt").write_text("changed\n")
    (repo / "untracked.txt").write_text("u")
    call(make_runtime(repo), "git_commit", message="update a", all=True)
    assert git(repo, "status", "--short") == "?? untracked.txt\n"


def test_commit_with_nothing_staged_says_what_to_do(repo: Path) -> None:
    (repo / "a.txt").write_text("changed\n")
    out = call(make_runtime(repo), "git_commit", message="nothing staged")
    assert out.startswith("ERROR: nothing to commit: nothing is staged; pass paths to stage, or all=true for every "
                          "change to tracked files\ngit commit failed with exit code 1: ")
    assert "no changes added to commit" in out


def test_commit_message_must_not_be_empty(repo: Path) -> None:
    out = call(make_runtime(repo), "git_commit", message=" ")
    assert out == "ERROR: git_commit: message must not be empty; describe the change in a short subject line"


def test_commit_asks_and_a_refusal_commits_nothing(repo: Path) -> None:
    ui = RecordingUI(answers=["deny"])
    (repo / "a.txt").write_text("changed\n")
    out = call(make_runtime(repo, ui=ui, mode="default"), "git_commit", message="risky", all=True)
    assert out == "Denied by the user. Do not retry it; ask what to do instead."
    [req] = ui.of(ApprovalRequest)
    assert (req.tool, req.summary, req.detail) == ("git_commit", "risky", "stages every change to tracked files\n\nrisky")
    assert git(repo, "log", "--format=%s") == "first commit\n"


def test_a_commit_that_cannot_succeed_fails_before_anyone_is_asked(repo: Path, tmp_path: Path) -> None:
    ui = RecordingUI(answers=["deny"])
    (repo / "a.txt").write_text("changed\n")  # changed, not staged
    out = call(make_runtime(repo, ui=ui, mode="default"), "git_commit", message="nothing staged")
    assert out == ("ERROR: nothing to commit: nothing is staged; pass paths to stage, or all=true for every change "
                   "to tracked files")
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    out = call(make_runtime(elsewhere, ui=ui, mode="default"), "git_commit", message="x", all=True)
    assert out.startswith(f"ERROR: {elsewhere} is not inside a git repository; create one with run_command (git init)")
    assert ui.of(ApprovalRequest) == []
    git(repo, "add", "a.txt")  # now there is something to commit: asked, and the answer decides
    assert call(make_runtime(repo, ui=ui, mode="default"), "git_commit", message="staged") == (
        "Denied by the user. Do not retry it; ask what to do instead.")
    assert [r.tool for r in ui.of(ApprovalRequest)] == ["git_commit"]
    assert git(repo, "log", "--format=%s") == "first commit\n"


def test_read_only_git_tools_never_ask(repo: Path) -> None:
    ui = RecordingUI()
    rt = make_runtime(repo, ui=ui, mode="plan")
    for name in ("git_status", "git_diff", "git_log"):
        assert not call(rt, name).startswith("ERROR")
    assert ui.of(ApprovalRequest) == []
    assert "git_commit" not in {t.name for t in rt.visible_tools()}


def test_parallel_read_only_calls_all_succeed(repo: Path) -> None:
    (repo / "a.txt").write_text("changed\n")
    rt = make_runtime(repo)
    calls = [ToolCall(id=f"g{i}", name=n, arguments=json.dumps({})) for i, n in
             enumerate(["git_status", "git_diff", "git_log"] * 4)]
    out = asyncio.run(rt.run_calls(calls))
    assert [m.tool_call_id for m in out] == [c.id for c in calls]
    assert not [m.content for m in out if (m.content or "").startswith("ERROR")]


def test_not_a_repository_is_a_clear_error(workspace: Path) -> None:
    out = call(make_runtime(workspace), "git_status")
    assert out.startswith(f"ERROR: {workspace} is not inside a git repository; create one with run_command (git init) "
                          "or work in a repository\ngit exited with code 128: fatal: not a git repository")


def test_git_missing_is_a_clear_error(workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "no-git"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = call(make_runtime(workspace), "git_log")
    assert out == ("ERROR: git is not installed (no `git` on PATH outside the workspace); install git to use the "
                   "git_* tools")


def test_git_errors_carry_exit_code_and_stderr(repo: Path) -> None:
    out = call(make_runtime(repo), "git_commit", message="x", paths=["does-not-exist.txt"])
    assert out == ("ERROR: git add failed with exit code 128: "
                   "fatal: pathspec 'does-not-exist.txt' did not match any files")


def test_git_timeout_lowered_kills_a_hanging_hook(repo: Path, no_leftover_processes: str) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho checking >&2\nsleep 300\n")
    hook.chmod(0o755)
    (repo / "a.txt").write_text("changed\n")
    rt = make_runtime(repo, limits=Limits(git_timeout_secs=1, command_kill_grace_secs=0.2))
    out = call(rt, "git_commit", message="blocked by hook", all=True)
    assert out == "ERROR: git commit timed out after 1s and was killed; git said: checking"
    assert git(repo, "log", "--format=%s") == "first commit\n"
