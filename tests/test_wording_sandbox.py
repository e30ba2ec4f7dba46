"""What the OS sandbox says, each message once: each kind of refusal, what it can do here, and the
notes on a real confined command. The other tests assert decisions and state; rewording a
message changes one row here (see tests/wording_support.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from exec_support import call, make_runtime, run_confined

from nanohermes.guard import sandbox
from nanohermes.assemble import parse_rules
from nanohermes.config import Config, load_config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.guard.sandbox import Refused
from nanohermes.tools import build_tools

# -- the OS sandbox -----------------------------------------------------------------------------

# What each kind of refusal reads as, and the setting that would let it through.
SANDBOX_REFUSED: list[tuple[Refused, str, str]] = [
    (Refused("write", "/x/out.txt", ""),
     "a write to /x/out.txt",
     "add the folder to sandbox.writable_roots"),
    (Refused("sealed", "/x/.git/HEAD", ""),
     "a write to /x/.git/HEAD (the top level of a git folder is read-only for a background task, so "
     "that it cannot point git elsewhere; run git commands that change the repository in the "
     "foreground)",
     "add the folder to sandbox.writable_roots"),
    (Refused("unnamed-write", "", ""),
     "a write outside its writable roots (\"Read-only file system\"; the output names no path)",
     "add the folder to sandbox.writable_roots"),
    (Refused("planted", "/x/.git/commondir", "it would change how git or nanohermes starts"),
     "creating /x/.git/commondir (removed: it would change how git or nanohermes starts)",
     "add the folder to sandbox.writable_roots"),
    (Refused("secret", "/x/.env", ""),
     "access to /x/.env, a secret file the sandbox withholds (permissions.secret_files)",
     "an allow rule naming the exact command line lets it read the secret file"),
    (Refused("read-rule", "/x/private/a", ""),
     "access to /x/private/a, a path a read rule withholds (permissions.deny, permissions.ask)",
     "no setting opens a path a read rule covers to sandboxed commands but removing the rule"),
    (Refused("own-file", "/h/.config/nanohermes/config.json", ""),
     "access to /h/.config/nanohermes/config.json, one of nanohermes's own files (its config, "
     "sessions, memory), hidden from sandboxed commands",
     "no setting opens nanohermes's own files to sandboxed commands"),
    (Refused("home-credential", "/h/.ssh/id_ed25519", ""),
     "access to /h/.ssh/id_ed25519, one of your home folder's credentials (keys, cloud and registry "
     "logins), withheld from sandboxed commands",
     ""),
    (Refused("init", "/proc/1/environ", ""),
     "access to /proc/1/environ, the sandbox's init (pid 1 of the command's own PID namespace, a copy "
     "of nanohermes, whose memory, environment and files no command may read)",
     "no setting shows sandboxed commands nanohermes's processes or anyone else's"),
    (Refused("own-proc", "/proc/self/mem", ""),
     "access to /proc/self/mem, the command's own /proc (read-only; it holds only the processes of "
     "the command's own PID namespace)",
     "no setting shows sandboxed commands nanohermes's processes or anyone else's"),
    (Refused("socket", "/run/user/0/bus", ""),
     "a connection to the socket /run/user/0/bus, another program's server, hidden from sandboxed "
     "commands",
     "no setting opens another program's socket to sandboxed commands"),
    (Refused("process", "4242", ""),
     "signalling process 4242, a process outside the command's own PID namespace, which holds only "
     "the command's own processes (each command gets one of its own)",
     "a background task is stopped with task_kill; no setting shows sandboxed commands nanohermes's "
     "processes or anyone else's"),
    (Refused("network", "", ""),
     "a network connection (the sandbox has no network)",
     "set \"sandbox\": {\"network\": true}"),
    (Refused("loopback", "8080", ""),
     "a connection to port 8080 of the host's loopback (the sandbox has a loopback of its own: "
     "servers the command starts are reachable, the host's are not)",
     "set \"sandbox\": {\"network\": true}"),
    (Refused("server", "5432, 6379", ""),
     "a connection, probably to a server of this machine (it was refused; listening here: 5432, 6379; "
     "the sandbox has a loopback of its own: servers the command starts are reachable, the host's are "
     "not)",
     "set \"sandbox\": {\"network\": true}"),
    (Refused("unnamed", "", ""),
     "an access the sandbox refuses (\"Permission denied\" or \"Operation not permitted\", naming no path "
     "it could check: another program's socket, a secret file, a file outside its writable roots, or "
     "a process outside the sandbox)",
     ""),
    (Refused("more", "2", "2"),
     "2 more (sandbox_refusals_listed is 2)",
     ""),
]


@pytest.mark.parametrize("refused,text,allow", SANDBOX_REFUSED, ids=[r[0].kind for r in SANDBOX_REFUSED])
def test_a_sandbox_refusal_says(refused: Refused, text: str, allow: str) -> None:
    assert (str(refused), refused.allow) == (text, allow)


AVAILABILITY: list[tuple[str, sandbox.Availability, list[tuple[bool, str]]]] = [
    ("landlock-7", sandbox.Availability(abi=7, namespaces=True, pid=True), [
        (True, "Landlock ABI 7: commands that run unasked are confined"),
        (True, "user namespaces: each command gets its own network (only its own loopback; no network at all unless "
               "sandbox.network), its own /dev/shm, its own processes (a PID namespace and /proc: it sees no other "
               "process), and a view of the files in which other programs' sockets (tmux, agents, D-Bus, container "
               "engines) are hidden, the workspace's secret files are withheld, and .git/config, git's hooks and "
               "nanohermes's config stay read-only")]),
    ("old-landlock-no-namespaces", sandbox.Availability(abi=3, namespaces=False, namespace_error="EPERM"), [
        (False, "Landlock ABI 3: commands that run unasked are confined; weaker: TCP connect/bind is not blocked (ABI "
                "< 4), signals and abstract unix sockets are not scoped (ABI < 6)"),
        (False, "user namespaces unavailable (EPERM): other programs' sockets (tmux, agents, D-Bus) cannot be hidden "
                "from a command, so only argument-checked built-in read-only commands written as plain words run "
                "without asking")]),
    ("no-landlock", sandbox.Availability(abi=0, namespaces=True, pid=True), [
        (False, "Landlock unavailable (the kernel has no Landlock (Linux 5.13+ with landlock in the LSM list)): "
                "commands are not confined; only argument-checked built-in read-only commands run without asking"),
        (True, "user namespaces: each command gets its own network (only its own loopback; no network at all unless "
               "sandbox.network), its own /dev/shm, its own processes (a PID namespace and /proc: it sees no other "
               "process), and a view of the files in which other programs' sockets (tmux, agents, D-Bus, container "
               "engines) are hidden, the workspace's secret files are withheld, and .git/config, git's hooks and "
               "nanohermes's config stay read-only")]),
]


@pytest.mark.parametrize("availability,lines", [r[1:] for r in AVAILABILITY], ids=[r[0] for r in AVAILABILITY])
def test_what_the_sandbox_can_do_here_says(availability: sandbox.Availability, lines: list[tuple[bool, str]]) -> None:
    assert availability.lines() == lines


@pytest.mark.skipif(not sandbox.probe().landlock, reason="Landlock is not available here")
def test_a_refused_write_is_noted_for_the_model(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    [note] = [ln for ln in run_confined(workspace, f"echo x > {outside}", "workspace-write").text.split("\n")
              if ln.startswith("note: ")]
    assert note == (
        f"note: the OS sandbox (workspace-write) refused a write to {outside}: this line ran sandboxed because no "
        "person approved it, and it may write the workspace, $TMPDIR and sandbox.writable_roots, but not git's "
        "config and hooks or .nanohermes/; it has a loopback of its own but no other network, and sees neither other "
        "programs' sockets, nor secret files, nor nanohermes's own files. What lets it through: add the folder to "
        "sandbox.writable_roots; --sandbox off (or sandbox.mode off) runs unasked commands unconfined; or a person's "
        "yes at the prompt runs this call outside the sandbox. Otherwise change the approach (write inside the "
        "workspace, or use the file tools)")


@pytest.mark.skipif(not sandbox.probe().landlock, reason="Landlock is not available here")
def test_a_refused_write_is_asked_about(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    ui = RecordingUI(answers=["deny"])
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=ui,
                 policy=Policy(allow=parse_rules(["run_command(touch *)"], "test", [])))
    call(rt, "run_command", command=f"touch {target}")
    [asked] = ui.of(ApprovalRequest)
    assert asked.reason == f"the sandbox (workspace-write) refused a write to {target}; run it again outside the sandbox?"


def test_a_killed_escapee_is_noted(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command",
               command="setsid sh -c ': > a; exec sleep 300' > /dev/null 2>&1 < /dev/null & "
                       "until [ -e a ]; do sleep 0.02; done")
    [note] = [ln for ln in out.split("\n") if ln.startswith("note: ")]
    assert note == ("note: 1 process the command started outside its process group (setsid, double fork) was still "
                    "running and killed when it ended; use background=true for servers and other long-running "
                    "processes")


def test_an_untrusted_projects_sandbox_is_said_to_be_ignored(workspace: Path, home: Path) -> None:
    project = workspace / ".nanohermes" / "config.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"sandbox": {"mode": "off"}}))
    [warning] = load_config(workspace).warnings
    assert warning == (f"{project}: ignored sandbox because this project is not trusted; to allow them, add "
                       f"\"{workspace}\" to trusted_projects in {home}/.config/nanohermes/config.json")


def test_a_work_tree_outside_the_workspace_says(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run(["git", "-C", str(workspace), "config", "core.worktree", str(outside)], check=True)
    assert call(make_runtime(workspace), "git_status") == (
        f"ERROR: git's work tree for this workspace is {outside}, outside it (set by core.worktree = {outside} "
        f"({workspace / '.git' / 'config'})): through git, the files there would be read as the repository's; the git "
        "tools read no files outside the workspace, so git status did not run. If that folder is meant to be the work "
        "tree, start nanohermes there; otherwise remove the setting (`git config --unset core.worktree`)")


def test_a_patch_to_a_path_outside_says(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / "elsewhere.txt"
    out = call(make_runtime(workspace), "apply_patch", diff=f"*** Begin Patch\n*** Add File: {outside}\n+x\n*** End Patch\n")
    assert out == (
        f"ERROR: writes a protected path: {outside} is outside the workspace; nobody is asked in an unattended run "
        "(--yes, goal mode, auto_approve), so it is refused: run without them to be asked, or with "
        "--dangerously-skip-permissions to allow everything")
