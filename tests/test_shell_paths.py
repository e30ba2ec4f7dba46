"""Shell lines against the real file system: writes bash would send into .git/ through globs,
braces, tildes and CDPATH are protected, and reads that reach a secret file by a symlink,
a glob or a folder read whole are asked (bounded, and "too big to check" asks too)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.pathrules import command_protected, command_secret
from nanohermes.guard.permissions import DEFAULT_SECRET_FILES, Policy
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.guard.shellparse import split
from nanohermes.tools.shell import RunCommand


@pytest.fixture
def repo(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("print(1)\n")
    (workspace / "keys").mkdir()
    (workspace / "keys" / ".env").write_text("API_TOKEN=sk-live-123\n")
    (workspace / "config").mkdir()
    (workspace / "config" / "prod.pem").write_text("-----BEGIN-----\n")
    (workspace / "notes.txt").write_text("API_TOKEN appears in notes\n")
    (workspace / "link").symlink_to(workspace / "keys" / ".env")
    return workspace


def runtime(ws: Path, ui: RecordingUI, policy: Policy, limits: Limits | None = None) -> Runtime:
    return Runtime(tools=[RunCommand()], config=Config(), workspace=ws, ui=ui, policy=policy, limits=limits or Limits())


def run(rt: Runtime, command: str) -> str:
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name="run_command", arguments=json.dumps({"command": command}))]))
    return msg.content or ""


# -- accept-edits: writes into .git/config by paths bash computes ---------------------------------
@pytest.mark.parametrize("command", [
    "cd .gi? && echo x >> config",
    "cd .g* && echo x >> config",
    "cd .[g]it && echo x >> config",
    "cd ~+/.git && echo x >> config",
    "echo x >> ~+/.git/config",
    "echo x >> ~-/config",
    "echo x | tee {.git/config,/dev/null}",
    "echo x > .gi?/config",
    "echo x > {.git,x}/config",
    "cd $D && echo x > config",
    "cd - && echo x > config",
    "pushd .g* && echo x > config",
    "popd && echo x > config",
    "CDPATH=. cd git-stuff && echo x > config",
    "export CDPATH=.; cd hooks && echo x > pre-commit",
])
def test_write_targets_bash_computes_are_protected(repo: Path, command: str) -> None:
    assert command_protected(command, repo)


@pytest.mark.parametrize("command", ["echo x | /usr/bin/tee .git/config", "echo x | ./tee -a .git/config",
                                     "echo x | command tee .git/config"])
def test_tee_named_by_a_path_writes_its_files_as_tee_does(repo: Path, command: str) -> None:
    assert command_protected(command, repo).endswith(".git/config is git's metadata")
    assert split(command)[-1].writes == (".git/config",)


def test_cdpath_from_the_environment_makes_a_relative_cd_unknown(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not command_protected("cd src && echo x > out.txt", repo)
    monkeypatch.setenv("CDPATH", str(repo / ".git"))
    assert command_protected("cd hooks && echo x > pre-commit", repo)
    assert command_protected("cd src && echo x > out.txt", repo)
    assert not command_protected("cd ./src && echo x > out.txt", repo)  # ./ is never looked up in CDPATH


@pytest.mark.parametrize("command", [
    "cd .gi? && echo '[core] fsmonitor = touch PWNED' >> config",
    "echo '[core] fsmonitor = touch PWNED' | tee {.git/config,/dev/null}",
    "echo '[core] fsmonitor = touch PWNED' >> ~+/.git/config",
])
def test_accept_edits_asks_before_such_writes_and_a_refusal_leaves_git_config_alone(repo: Path, command: str) -> None:
    before = (repo / ".git" / "config").read_text()
    ui = RecordingUI(answers=["deny"])
    assert run(runtime(repo, ui, Policy(mode="accept-edits")), command) == DENIED
    assert len(ui.of(ApprovalRequest)) == 1
    assert (repo / ".git" / "config").read_text() == before
    # and bash really would have written it (the test is about a real write):
    subprocess.run(["bash", "-c", command], cwd=repo, check=True, capture_output=True)
    assert "fsmonitor" in (repo / ".git" / "config").read_text()


def test_accept_edits_still_lets_an_ordinary_workspace_write_through(repo: Path) -> None:
    ui = RecordingUI()
    assert run(runtime(repo, ui, Policy(mode="accept-edits")), "cd src && echo hi > out.txt").startswith("exit code: 0")
    assert (repo / "src" / "out.txt").read_text() == "hi\n"
    assert ui.of(ApprovalRequest) == []


# -- secret files read through the shell ------------------------------------------------------------
SECRET_READS = [
    ("grep -r API_TOKEN .", "keys/.env"),
    ("grep -rh X keys/", "keys/.env"),
    ("grep -R X", "keys/.env"),
    ("grep --recursive -n X keys", "keys/.env"),
    ("rg API_TOKEN", "keys/.env"),
    ("rg -n X config", "config/prod.pem"),
    ("cat link", "keys/.env"),
    ("head -1 link", "keys/.env"),
    ("wc -c < link", "keys/.env"),
    ("cat keys/.e*", "keys/.env"),
    ("cat keys/.??v", "keys/.env"),
    ("cat config/*", "config/prod.pem"),
    ("find . -exec cat {} +", "keys/.env"),
    ("find keys -type f -exec cat {} \\;", "keys/.env"),
    ("find . -name x | xargs cat", "keys/.env"),
    ("cd keys && cat .env", "keys/.env"),
    ("cd keys && grep -r X", "keys/.env"),
    ("git grep API_TOKEN", "keys/.env"),
    ("git --no-pager grep API_TOKEN", "keys/.env"),  # after git's harmless global options too
    ("git -P grep -n X keys", "keys/.env"),
    ("cd $D && cat foo", "files in a folder known only at run time"),
    ("cd - && grep -r X", "files in a folder known only at run time"),
    ("cat ~+/link", "files in a folder known only at run time"),
]


@pytest.mark.parametrize("command,found", SECRET_READS)
def test_shell_reads_that_reach_a_secret_file_are_found(repo: Path, command: str, found: str) -> None:
    assert command_secret(command, repo, patterns=DEFAULT_SECRET_FILES) == found


@pytest.mark.parametrize("command", [
    "grep -r X src", "rg X src", "cat notes.txt", "cat *.txt", "grep -n X notes.txt", "ls -la keys",
    "find src -exec cat {} +", "cat src/*", "wc -l src/a.py",
])
def test_reads_that_stay_away_from_secret_files_find_nothing(repo: Path, command: str) -> None:
    assert command_secret(command, repo, patterns=DEFAULT_SECRET_FILES) == ""


def test_a_configured_secret_list_is_what_counts(repo: Path) -> None:
    assert command_secret("grep -r X .", repo, patterns=("*.txt",)) == "notes.txt"
    assert command_secret("grep -r X .", repo, patterns=()) == ""


@pytest.mark.parametrize("command", ["grep -r API_TOKEN .", "grep -rh X keys/", "cat link", "cat keys/.e*",
                                     "find . -exec cat {} +"])
def test_the_runtime_asks_before_a_shell_read_of_a_secret_and_names_it(repo: Path, command: str) -> None:
    ui = RecordingUI(answers=["deny"])
    assert run(runtime(repo, ui, Policy()), command) == DENIED
    [req] = ui.of(ApprovalRequest)
    assert "keys/.env (permissions.secret_files)" in req.reason, req.reason
    # only this exact line could be learned (find's -exec command is one more exact rule)
    assert req.rule.split(", ")[0] == f"run_command({command.replace('*', '[*]')})"


def test_without_secret_files_the_same_read_runs_unasked(repo: Path) -> None:
    ui = RecordingUI()
    out = run(runtime(repo, ui, Policy(secret_files=())), "grep -rh API_TOKEN keys/")
    assert "sk-live-123" in out
    assert ui.of(ApprovalRequest) == []


def test_a_folder_too_big_to_check_is_asked_with_the_exact_note(repo: Path) -> None:
    big = repo / "big"
    big.mkdir()
    for i in range(30):
        (big / f"f{i}.txt").write_text("x\n")
    limits = Limits(secret_scan_entries=10)
    assert command_secret("grep -r X big", repo, patterns=DEFAULT_SECRET_FILES, max_entries=10) == \
        "more than 10 files to check for secret files (secret_scan_entries)"
    ui = RecordingUI(answers=["deny"])
    assert run(runtime(repo, ui, Policy(), limits), "grep -r X big") == DENIED
    [req] = ui.of(ApprovalRequest)
    assert req.reason == ("`grep -r X big` reads more than 10 files to check for secret files (secret_scan_entries) "
                          "(permissions.secret_files)")
    # Under the bound the same folder is checked, found clean, and runs.
    ui2 = RecordingUI()
    out = run(runtime(repo, ui2, Policy(), Limits(secret_scan_entries=100)), "grep -rc x big")
    assert out.startswith("exit code: 0") and "big/f1.txt:1" in out and ui2.of(ApprovalRequest) == []


def test_a_walk_over_its_time_is_asked_with_the_exact_note(repo: Path) -> None:
    assert command_secret("grep -r X src", repo, patterns=DEFAULT_SECRET_FILES, max_secs=0.0) == \
        "files that took over 0s to check for secret files (secret_scan_secs)"
    ui = RecordingUI(answers=["deny"])
    assert run(runtime(repo, ui, Policy(), Limits(secret_scan_secs=0.0)), "grep -r X src") == DENIED
    assert ui.of(ApprovalRequest)[0].reason == ("`grep -r X src` reads files that took over 0s to check for secret "
                                                "files (secret_scan_secs) (permissions.secret_files)")


def test_a_symlinked_folder_read_whole_is_followed(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "vault"
    outside.mkdir()
    (outside / "id_rsa").write_text("KEY\n")
    os.symlink(outside, repo / "vault")
    assert command_secret("grep -r X vault", repo, patterns=DEFAULT_SECRET_FILES) == str(outside / "id_rsa")


def test_always_on_sed_in_place_learns_the_line_and_a_sed_that_executes_is_asked_again(repo: Path) -> None:
    (repo / "a.txt").write_text("x\n")
    ui = RecordingUI(answers=["always"])  # then no more answers: a second prompt is refused
    rt = runtime(repo, ui, Policy())
    assert run(rt, "sed -i s/x/y/ a.txt").startswith("exit code: 0")
    [req] = ui.of(ApprovalRequest)
    assert req.rule == "run_command(sed -i s/x/y/ a.txt)"  # the prompt shows the exact rule it saves
    assert (repo / "a.txt").read_text() == "y\n"
    assert run(rt, "sed -i s/x/y/ a.txt").startswith("exit code: 0")  # learned: not asked again
    assert len(ui.of(ApprovalRequest)) == 1
    assert run(rt, "sed -i '1e touch X' a.txt") == DENIED
    assert len(ui.of(ApprovalRequest)) == 2
    assert not (repo / "X").exists()


def test_a_symlinked_folder_inside_a_folder_read_whole_is_followed(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "credentials.json").write_text("{}")
    os.symlink(outside, repo / "src" / "more")
    assert command_secret("grep -R X src", repo, patterns=DEFAULT_SECRET_FILES) == str(outside / "credentials.json")


def test_a_symlink_loop_only_runs_the_budget_down(repo: Path) -> None:
    os.symlink(repo / "src", repo / "src" / "loop")
    assert command_secret("grep -R X src", repo, patterns=DEFAULT_SECRET_FILES, max_entries=50) == \
        "more than 50 files to check for secret files (secret_scan_entries)"
