"""Secret files withheld by the OS sandbox: a program that runs unasked (allowed by a rule, or
under --yes) cannot read the workspace's secret files, nested, git-ignored or reached
through a link; the bounds of the look fail closed. The real `nanohermes -p` command line with
the loopback fake model, the real kernel's sandbox, real git and real files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard import sandbox, withhold
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.turn.runtime import DENIED
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from exec_support import run_confined

AVAIL = sandbox.probe()
pytestmark = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                                reason="needs Landlock and user namespaces")

TOKEN = "tok-0123456789abcdef"
WITHHELD = "a secret file the sandbox withholds (permissions.secret_files)"
PYTHON = {"permissions": {"allow": ["run_command(python3 *)"]}}


def read(path: str) -> str:
    """A python3 line that prints a file, or the error it met. The path is spelled inside the
    program, where no analysis of the command line can see it."""
    return (f"python3 -c \"p = bytes.fromhex('{path.encode().hex()}').decode()\ntry: print(open(p).read())\n"
            f"except OSError as e: print('ERR', e)\"")


def results(server: FakeServer) -> list[str]:
    messages = server.requests[-1]["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


def run_lines(turn: Any, server: FakeServer, lines: list[str], *args: str,
              config: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    server.add(tool_reply(*(call("run_command", {"command": line}) for line in lines)), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", *args, server=server, config=config if config is not None else PYTHON)
    assert r.code == 0, r.err
    got = results(server)
    assert len(got) == len(lines), got
    return json.loads(r.out), got


@pytest.fixture
def secrets(workspace: Path, tmp_path: Path) -> Path:
    """A repository whose secret files are git-ignored, nested, and reached through links
    (one named innocently, one leading out of the workspace to a key)."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".gitignore").write_text(".env*\n*.pem\n")
    (workspace / ".env").write_text(f"API_TOKEN={TOKEN}\n")
    (workspace / "deep/er").mkdir(parents=True)
    (workspace / "deep/er/.env.local").write_text(f"K={TOKEN}\n")
    (workspace / "settings.txt").symlink_to(".env")
    outside = tmp_path / "keys"
    outside.mkdir()
    (outside / "id_ed25519").write_text(f"KEY {TOKEN}\n")
    (workspace / "deploy").symlink_to(outside / "id_ed25519")
    (workspace / "notes.txt").write_text("plain\n")
    return workspace


# -- what a program allowed by a rule can read ------------------------------------------------

def test_a_program_allowed_by_a_rule_cannot_read_secret_files(turn: Any, server: FakeServer, secrets: Path) -> None:
    lines = [read(".env"), read("deep/er/.env.local"), read("settings.txt"), read("deploy"), read("notes.txt")]
    out, got = run_lines(turn, server, lines)
    for text in got:
        assert TOKEN not in text
    for text, shown in zip(got[:4], [".env", "deep/er/.env.local", "settings.txt", "deploy"], strict=True):
        assert f"ERR [Errno 13] Permission denied: '{shown}'" in text, text
        assert WITHHELD in text, text
        assert "needs a person's approval" in text, text
    assert got[4].startswith("exit code: 0") and "plain" in got[4] and "note:" not in got[4]
    # Asked to run it outside the sandbox, nobody could answer: the model learns it was withheld.
    refused = [r["refused"] for r in out["sandbox_refusals"]]
    assert [f"access to {secrets / '.env'}, {WITHHELD}"] in refused
    assert [f"access to {secrets / 'deploy'}, {WITHHELD}"] in refused
    assert (secrets / ".env").read_text() == f"API_TOKEN={TOKEN}\n"  # nothing changed outside the sandbox


def test_yes_runs_programs_sandboxed_with_the_secret_files_withheld(turn: Any, server: FakeServer,
                                                                  secrets: Path) -> None:
    _, got = run_lines(turn, server, [read(".env"), "cat .env; echo rc=$?"], "--yes", config={})
    assert all(TOKEN not in text for text in got), got
    assert "Permission denied: '.env'" in got[0] and "cat: .env: Permission denied\n" in got[1]


def test_the_cover_cannot_be_moved_unmounted_linked_or_looked_behind(turn: Any, server: FakeServer,
                                                                    secrets: Path) -> None:
    lines = ["mv .env moved; rm .env; ln .env hard; umount .env; echo x > .env; cat /proc/$PPID/cwd/.env; "
             "unshare -Urm cat .env; cat .env; ls -l .env",
             read(".env")]
    _, got = run_lines(turn, server, lines, "--yes", config={})
    assert all(TOKEN not in text for text in got), got
    text = got[0]
    assert "cannot move '.env' to 'moved': Device or resource busy" in text  # a mount point
    assert "hard link 'hard' => '.env': Invalid cross-device link" in text  # another file system
    assert "----------" in text  # what the command sees: an empty file no one may read
    assert re.search(r"cat: /proc/\d+/cwd/.env: Permission denied", text), text  # Landlock: no look into nanohermes
    assert not (secrets / "moved").exists() and not (secrets / "hard").exists()
    assert (secrets / ".env").read_text() == f"API_TOKEN={TOKEN}\n"


def test_a_line_a_rule_spells_out_reads_the_secret_it_names(turn: Any, server: FakeServer, secrets: Path) -> None:
    """What an "always" to the secret-file question learns is consent to that exact line."""
    _, got = run_lines(turn, server, ["cat .env"], config={"permissions": {"allow": ["run_command(cat .env)"]}})
    assert got[0].startswith("exit code: 0") and "API_TOKEN=" in got[0]


def test_a_built_in_read_only_command_is_withheld_secret_files_too(secrets: Path) -> None:
    """The argument reading lets `wc -c .env` run unasked (a size is no content), but it is
    never the only guard: the read-only sandbox withholds every secret file as well."""
    ran = run_confined(secrets, "wc -c .env; wc -c deep/er/.env.local", "read-only")
    assert "wc: .env: Permission denied" in ran.text and "wc: deep/er/.env.local: Permission denied" in ran.text
    assert ran.refused == [f"access to {secrets / '.env'}, {WITHHELD}",
                           f"access to {secrets / 'deep/er/.env.local'}, {WITHHELD}"]


# -- what the look finds -----------------------------------------------------------------------

def look(ws: Path, **limits: Any) -> withhold.Secrets:
    lim = Limits(**limits)
    return withhold.find(ws, Config().permissions.secret_files, max_entries=lim.sandbox_secret_scan_entries,
                         max_files=lim.sandbox_secret_files, max_secs=lim.sandbox_secret_scan_secs)


def test_the_look_sees_a_secret_moved_where_the_cache_trusted_an_old_listing(secrets: Path) -> None:
    """A folder renamed and its parent's time set back (`touch -d`) would fool a cache keyed by
    modification time; the change time cannot be set back."""
    (secrets / "a/b").mkdir(parents=True)
    time.sleep(2.1)  # old enough for their listings to be trusted the next time
    first = {os.path.relpath(p, secrets) for p, _, _ in look(secrets).files}
    assert first == {".env", "deep/er/.env.local", os.path.relpath(secrets.parent / "keys/id_ed25519", secrets)}
    before = os.stat(secrets / "deep")
    os.rename(secrets / "deep/er", secrets / "deep/moved")
    os.utime(secrets / "deep", ns=(before.st_atime_ns, before.st_mtime_ns))
    (secrets / "a/b/server.pem").write_text("k\n")
    found = {os.path.relpath(p, secrets) for p, _, _ in look(secrets).files}
    assert {"deep/moved/.env.local", "a/b/server.pem"} <= found and "deep/er/.env.local" not in found


def test_a_tracked_secret_git_holds_unchanged_is_not_withheld(turn: Any, server: FakeServer, workspace: Path) -> None:
    """Its content is in .git/objects anyway; withholding it would only break `git diff`.
    Once changed, what it holds is no longer git's, and it is withheld."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "tests").mkdir()
    (workspace / "tests/server.pem").write_text("fixture\n")
    subprocess.run(["git", "-C", str(workspace), "add", "."], check=True)
    subprocess.run(["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
                   check=True)
    time.sleep(0.05)  # the file is older than the index git wrote after it
    subprocess.run(["git", "-C", str(workspace), "update-index", "--refresh"], check=True, capture_output=True)
    _, got = run_lines(turn, server, ["git diff --stat && echo CLEAN", read("tests/server.pem")], "--yes", config={})
    assert "CLEAN" in got[0] and "fixture" in got[1], got
    (workspace / "tests/server.pem").write_text(f"real key {TOKEN}\n")
    _, got = run_lines(turn, server, [read("tests/server.pem")], "--yes", config={})
    assert TOKEN not in got[0] and "Permission denied" in got[0]


# -- the bounds fail closed --------------------------------------------------------------------

@pytest.mark.parametrize(("limits", "note"), [
    ({"sandbox_secret_scan_entries": 3},
     "more than 3 files and folders in the workspace to look through for secret files "
     "(limits.sandbox_secret_scan_entries)"),
    ({"sandbox_secret_files": 2}, "more than 2 secret files in the workspace (limits.sandbox_secret_files)"),
    ({"sandbox_secret_scan_secs": 0}, "the look for secret files in the workspace took over 0s "
                                      "(limits.sandbox_secret_scan_secs)"),
])
def test_past_a_bound_a_program_is_asked_and_refused_with_nobody_to_ask(turn: Any, server: FakeServer, secrets: Path,
                                                                        limits: dict[str, Any], note: str) -> None:
    assert look(secrets, **limits).problem == note
    config = {**PYTHON, "limits": limits}
    out, got = run_lines(turn, server, [read("notes.txt")], config=config)
    assert got == [DENIED]
    reason = out["permission_denials"][0]["reason"]
    assert reason.startswith(f"needs approval ({note}, ") and "(permissions.secret_files)" in reason, reason
    _, got = run_lines(turn, server, [read("notes.txt")], "--yes", config={"limits": limits})
    [refused] = got
    assert refused.startswith(f"ERROR: {note}, ") and "did not run" in refused, refused
    # Built-in read-only commands still run: their arguments are checked for secret reads by name.
    _, got = run_lines(turn, server, ["ls notes.txt"], config={"limits": limits})
    assert got[0].startswith("exit code: 0"), got


def test_more_secret_files_than_the_bound_are_counted_exactly(workspace: Path) -> None:
    for i in range(5):
        (workspace / f"k{i}.pem").write_text("k\n")
    found = look(workspace, sandbox_secret_files=4)
    assert found.problem == "more than 4 secret files in the workspace (limits.sandbox_secret_files)"
    assert len(found.files) == 4
    assert len(look(workspace, sandbox_secret_files=5).files) == 5 and not look(workspace).problem
    entries = look(workspace, sandbox_secret_scan_entries=4)  # the five files of the workspace's one folder
    assert entries.problem.startswith("more than 4 files and folders") and not look(
        workspace, sandbox_secret_scan_entries=5).problem


def test_a_secret_file_replaced_after_the_look_stops_the_command(secrets: Path) -> None:
    """The cover goes on the file the look found, through its descriptor: a path swapped in
    between (by a background task) stops the command rather than leave the new file open."""
    found = look(secrets)
    os.rename(secrets / ".env", secrets / ".env.old")
    (secrets / ".env").write_text(f"NEW={TOKEN}\n")
    conf = sandbox.confinement("workspace-write", workspace=secrets,
                               hidden=tuple(f for f in found.files if f[0] == str(secrets / ".env")))
    prepared = sandbox.prepare(conf)
    try:
        argv, env = ["cat", ".env"], prepared.env(dict(os.environ))
        r = subprocess.run(argv, cwd=secrets, preexec_fn=prepared.preexec(argv, env), capture_output=True, text=True,
                           env=env)
    except subprocess.SubprocessError as e:
        assert "preexec" in str(e)
    else:
        raise AssertionError(f"ran: {r.stdout!r}")
    finally:
        prepared.cleanup()


def test_a_refusal_naming_a_path_nanohermes_may_not_look_at_leaves_the_result_whole(secrets: Path) -> None:
    """Reading refusals out of the output looks at the paths it names; one it may not even
    look at (`/proc/1/root`, closed to the command by Landlock) is no sandbox refusal, and
    the finished command is reported as it ran, not as a shell that could not start."""
    out = run_confined(secrets, "cat /proc/1/root/etc/hostname; echo DONE", "read-only").text
    assert out.startswith("exit code: 0") and "DONE" in out
    assert "cat: /proc/1/root/etc/hostname: Permission denied" in out


def test_an_index_entry_forged_to_match_a_secret_files_times_does_not_uncover_it(workspace: Path) -> None:
    """`.git/index` is writable to a sandboxed command, and a file's times may be guessed
    (its folder's time often equals them): only the content's blob id clears a tracked file."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".env").write_text(f"API_TOKEN={TOKEN}\n")
    subprocess.run(["git", "-C", str(workspace), "add", ".env"], check=True)
    time.sleep(0.05)
    subprocess.run(["git", "-C", str(workspace), "update-index", "--refresh"], check=True, capture_output=True)
    assert look(workspace).files == ()  # what git holds is no secret from a command that can read .git/objects
    real = bytes.fromhex(subprocess.run(["git", "-C", str(workspace), "rev-parse", ":.env"], check=True,
                                        capture_output=True, text=True).stdout.strip())
    index = workspace / ".git/index"
    data = index.read_bytes()
    assert data.count(real) == 1
    index.write_bytes(data.replace(real, bytes(20)))  # same times, size and inode; another content
    assert [os.path.basename(p) for p, _, _ in look(workspace).files] == [".env"]
