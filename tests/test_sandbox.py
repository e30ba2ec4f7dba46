"""The OS sandbox with the real kernel: what confined commands can and cannot do, which
policy a call gets from how it was permitted, refusals, the git tools' programs, and the
sweep of escaped processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exec_support import (  # noqa: F401
    Confined, acall, call, confined_context, make_runtime, marked_pids, no_leftover_processes, run_confined, wait_until,
)
from nanohermes.guard import sandbox
from nanohermes.assemble import parse_rules
from nanohermes.common.budget import Limits
from nanohermes.config import Config, load_config
from nanohermes.common.events import ApprovalRequest, Notice, RecordingUI, SandboxRefused
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.guard.sandbox import Refused
from nanohermes.tools import Attempt, ToolContext, build_tools
from nanohermes.tools.tasks import task_manager

AVAIL = sandbox.probe()
needs_landlock = pytest.mark.skipif(not AVAIL.landlock, reason=f"Landlock is not available here: {AVAIL.lines()[0][1]}")
needs_namespaces = pytest.mark.skipif(not AVAIL.namespaces, reason="user namespaces are not available here")
pytestmark = needs_landlock

CONFINED = ("read-only", "workspace-write")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(workspace: Path) -> Path:
    git(workspace, "init", "-q")
    git(workspace, "config", "user.email", "t@example.com")
    git(workspace, "config", "user.name", "T")
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-qm", "first")
    return workspace


def run(ws: Path, command: str, policy: str, config: Config | None = None) -> tuple[str, Confined]:
    """run_command as the gate would run a call granted `policy`."""
    ran = run_confined(ws, command, policy, config=config)
    return ran.text, ran


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A TCP listener on 127.0.0.1 that records every connection it accepts."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    t.join()
    srv.close()


# -- what a confined command can and cannot do ---------------------------------------------

@pytest.mark.parametrize("policy", CONFINED)
def test_cannot_create_a_file_outside_its_writable_roots(workspace: Path, tmp_path: Path, policy: str) -> None:
    outside = tmp_path / "outside.txt"
    out, ctx = run(workspace, f"echo x > {outside}", policy)
    assert out.startswith("exit code: 1")
    assert not outside.exists()
    assert [(r.kind, r.subject) for r in ctx.found] == [("write", str(outside))]
    [note] = [line for line in out.split("\n") if line.startswith("note: ")]
    assert f"({policy})" in note and f" {ctx.refused[0]}: " in note
    assert ctx.found[0].allow == "add the folder to sandbox.writable_roots" and ctx.found[0].allow in note


@pytest.mark.parametrize("policy", CONFINED)
def test_cannot_write_git_config_or_hooks(repo: Path, policy: str) -> None:
    before = (repo / ".git" / "config").read_text()
    _, ctx = run(repo, "echo '[core] fsmonitor = evil' >> .git/config; mkdir -p .git/hooks; "
                         "echo evil > .git/hooks/x; echo evil > .git/hooks/pre-commit", policy)
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / ".git" / "hooks" / "x").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert f"a write to {repo / '.git' / 'config'}" in ctx.refused


@needs_namespaces
def test_workspace_write_cannot_move_the_git_folder_away_to_replace_its_config(repo: Path) -> None:
    before = (repo / ".git" / "config").read_text()
    out, ctx = run(repo, "mv .git .git-old; rm -rf .git; mv .git/config .git/c; echo x > .git/commondir",
                   "workspace-write")
    assert "cannot move '.git'" in out and "Device or resource busy" in out  # a mount point in the sandbox
    assert not (repo / ".git-old").exists()
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / ".git" / "commondir").exists()  # it would point git at another config
    assert ("planted", str(repo / ".git" / "commondir")) in [(r.kind, r.subject) for r in ctx.found]


@needs_namespaces
def test_nanohermes_folder_and_config_stay_read_only_under_workspace_write(workspace: Path, home: Path) -> None:
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text("{}")
    cfg = home / ".config" / "nanohermes"
    cfg.mkdir(parents=True)
    (cfg / "config.json").write_text("{}")
    config = Config.from_dict({"sandbox": {"writable_roots": [str(home)]}})  # the config folder lies in a writable root
    out, _ = run(workspace, f"echo '{{\"auto_approve\": true}}' > .nanohermes/config.json; "
                            f"echo '{{\"auto_approve\": true}}' > {cfg / 'config.json'}; echo ok > {home / 'free.txt'}",
                 "workspace-write", config)
    assert (workspace / ".nanohermes" / "config.json").read_text() == "{}"
    assert (cfg / "config.json").read_text() == "{}"
    assert (home / "free.txt").read_text() == "ok\n"  # the rest of the writable root is writable
    assert out.count("Read-only file system") == 2


@pytest.mark.parametrize("policy", CONFINED)
def test_cannot_connect_to_a_tcp_listener_on_loopback(workspace: Path, policy: str,
                                                      listener: tuple[int, list[object]]) -> None:
    port, accepted = listener
    out, ctx = run(workspace, f"curl -sS http://127.0.0.1:{port}/ && echo CONNECTED", policy)
    assert "CONNECTED" not in out
    assert accepted == []
    assert any(f"port {port} of the host's loopback" in r for r in ctx.refused), out


def test_network_true_lets_a_command_connect(workspace: Path, listener: tuple[int, list[object]]) -> None:
    port, accepted = listener
    out, ctx = run(workspace, f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
                              " && echo CONNECTED", "workspace-write", Config.from_dict({"sandbox": {"network": True}}))
    assert "CONNECTED" in out
    assert wait_until(lambda: len(accepted) == 1, timeout=5)
    assert ctx.refused == []


@pytest.mark.parametrize("policy", CONFINED)
def test_can_read_the_workspace_and_write_its_temp_folder(workspace: Path, policy: str) -> None:
    (workspace / "a.txt").write_text("hello\n")
    out, ctx = run(workspace, 'cat a.txt; echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t"; echo "$TMPDIR"; '
                              'echo gone > /dev/null; echo "$NANOHERMES_SANDBOX"', policy)
    lines = out.split("stdout:\n")[1].split("\n\nstderr:")[0].splitlines()
    assert lines[:2] == ["hello", "tmp"]
    assert lines[3] == policy
    assert not Path(lines[2]).exists()  # the call's private temp folder is removed after it
    assert ctx.refused == []


def test_workspace_write_writes_the_workspace_and_read_only_does_not(workspace: Path) -> None:
    run(workspace, "echo x > made.txt", "workspace-write")
    assert (workspace / "made.txt").read_text() == "x\n"
    _, ctx = run(workspace, "echo y > made2.txt", "read-only")
    assert not (workspace / "made2.txt").exists()
    assert ctx.refused == [f"a write to {workspace / 'made2.txt'}"]


@needs_namespaces
def test_the_read_only_binds_never_show_in_nanohermes_own_mounts(repo: Path) -> None:
    before = Path("/proc/self/mountinfo").read_text()
    run(repo, "true", "workspace-write")
    assert Path("/proc/self/mountinfo").read_text() == before
    assert str(repo) not in before


def test_sandbox_mode_off_runs_unconfined(workspace: Path, tmp_path: Path) -> None:
    out, ctx = run(workspace, f"echo x > {tmp_path / 'free.txt'}; echo \"[$NANOHERMES_SANDBOX]\"", "workspace-write",
                   Config.from_dict({"sandbox": {"mode": "off"}}))
    assert (tmp_path / "free.txt").exists()
    assert "[]" in out and ctx.refused == []


# -- which command runs where ----------------------------------------------------------------

def runtime(ws: Path, *, mode: str = "default", allow: list[str] = (), yes: bool = False,  # type: ignore[assignment]
            answers: list[Any] | None = None, config: Config | None = None) -> tuple[Runtime, RecordingUI]:
    ui = RecordingUI(answers=list(answers or []))
    policy = Policy(mode=mode, auto_approve=yes, allow=parse_rules(list(allow), "test", []))
    return Runtime(tools=build_tools(), config=config or Config(), workspace=ws, ui=ui, policy=policy,
                   limits=Limits()), ui


SHOW = 'echo "[$NANOHERMES_SANDBOX]"'


@pytest.mark.parametrize(("how", "expected"), [
    ({}, "[read-only]"),  # a built-in read-only command, allowed as such
    ({"allow": ["run_command(echo *)"]}, "[read-only]"),  # the rule is not needed: still read-only
    ({"allow": ["run_command(touch *)"], "cmd": "touch f; " + SHOW}, "[workspace-write]"),
    ({"yes": True, "cmd": "touch f; " + SHOW}, "[workspace-write]"),
    ({"mode": "goal", "cmd": "touch f; " + SHOW}, "[workspace-write]"),
    ({"answers": ["once"], "cmd": "touch f; " + SHOW}, "[]"),  # a person said yes to this line
    ({"answers": ["always"], "cmd": "touch f; " + SHOW}, "[]"),  # the first run of an "always" answer
])
def test_the_policy_follows_how_the_call_was_permitted(workspace: Path, how: dict[str, Any], expected: str) -> None:
    cmd = how.pop("cmd", SHOW)
    rt, _ = runtime(workspace, **how)
    out = call(rt, "run_command", command=cmd)
    assert f"stdout:\n{expected}" in out


def test_a_learned_always_rule_runs_later_calls_confined(workspace: Path) -> None:
    rt, _ = runtime(workspace, answers=["always"])
    first = call(rt, "run_command", command="touch f; " + SHOW)
    second = call(rt, "run_command", command="touch g; " + SHOW)
    assert "stdout:\n[]" in first and "stdout:\n[workspace-write]" in second


# Lines a static reading of bash can get wrong: whatever the analyser makes of them, what
# runs unasked cannot write outside what its policy allows.
DESYNCS = [
    "echo $[1<<2]\ntouch {out}/A in-ws; echo pwned >> .git/config",
    "grep -c x $[2<<1] /dev/null\ntouch {out}/B in-ws; echo pwned >> .git/config",
    "ls $[1<<2]\ntouch {out}/C in-ws; mkdir -p .git/hooks; echo pwned > .git/hooks/pre-commit",
]


@pytest.mark.parametrize("line", DESYNCS)
@pytest.mark.parametrize("how", [{}, {"allow": ["run_command(echo *)", "run_command(ls *)", "run_command(grep *)"]},
                                 {"yes": True}], ids=["read-only-commands", "allow-rules", "yes"])
def test_parser_desync_lines_that_run_unasked_cannot_write(repo: Path, tmp_path: Path, line: str,
                                                           how: dict[str, Any]) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    config_before = (repo / ".git" / "config").read_text()
    rt, ui = runtime(repo, **how)
    # Under --yes, a visible write first, so the line is not read as read-only commands only.
    prefix = "mkdir -p visible; " if how.get("yes") else ""
    result = call(rt, "run_command", command=prefix + line.format(out=out_dir) + "; " + SHOW)
    assert list(out_dir.iterdir()) == []
    assert (repo / ".git" / "config").read_text() == config_before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    if any(not r.reason.startswith("the sandbox") for r in ui.of(ApprovalRequest)):
        return  # the analysis asked (and nobody answered): nothing ran
    assert "refused" in result and ui.of(SandboxRefused)
    if how.get("yes"):  # unasked for another reason than read-only commands: the workspace is writable
        assert "[workspace-write]" in result and (repo / "in-ws").exists()
    else:  # read as built-in read-only commands: nothing at all is written
        assert "[read-only]" in result and not (repo / "in-ws").exists()


# -- refusals --------------------------------------------------------------------------------

def test_a_refusal_is_offered_to_the_person_and_rerun_outside(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    rt, ui = runtime(workspace, allow=["run_command(touch *)"], answers=["once"])
    out = call(rt, "run_command", command=f"touch {target}")
    assert target.exists()
    [req] = ui.of(ApprovalRequest)
    assert "(workspace-write)" in req.reason and f" {Refused('write', str(target))};" in req.reason
    [ev] = ui.of(SandboxRefused)
    assert ev.rerun and ev.refused == (Refused("write", str(target)),) and ev.sandbox == "workspace-write"
    assert out.startswith("exit code: 0")
    assert "ran outside the sandbox, approved by the user" in out


def test_a_refusal_nobody_approves_tells_the_model_it_needs_a_person(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    rt, ui = runtime(workspace, allow=["run_command(touch *)"], answers=["deny"])
    out = call(rt, "run_command", command=f"touch {target}")
    assert not target.exists()
    assert len(ui.of(ApprovalRequest)) == 1
    [ev] = ui.of(SandboxRefused)
    assert not ev.rerun and ev.refused == (Refused("write", str(target)),)
    assert "a person's yes" in out


def test_goal_mode_does_not_wait_for_a_person_on_a_refusal(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    rt, ui = runtime(workspace, mode="goal", answers=["once"])
    out = call(rt, "run_command", command=f"touch {target}")
    assert not target.exists() and ui.of(ApprovalRequest) == []
    assert len(ui.of(SandboxRefused)) == 1 and "a person's yes at the prompt runs this call" in out


def test_json_output_lists_sandbox_refusals(turn: Any, server: Any, workspace: Path, tmp_path: Path) -> None:
    from nanohermes.testing import Reply, call as fcall, tool_reply

    target = tmp_path / "outside.txt"
    server.add(tool_reply(fcall("run_command", {"command": f"touch {target}"}, id="t1")), Reply(text="done"))
    r = turn("-p", "touch it", "--output-format", "json", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    data = r.json()
    assert data["sandbox_refusals"] == [{"tool": "run_command", "command": f"touch {target}",
                                         "sandbox": "workspace-write", "refused": [f"a write to {target}"],
                                         "rerun": False}]
    assert not target.exists()


def test_sandbox_off_flag_and_config(turn: Any, server: Any, workspace: Path, tmp_path: Path) -> None:
    from nanohermes.testing import Reply, call as fcall, tool_reply

    target = tmp_path / "outside.txt"
    server.add(tool_reply(fcall("run_command", {"command": f"touch {target}"}, id="t1")), Reply(text="done"))
    r = turn("-p", "touch it", "--output-format", "json", "--yes", "--sandbox", "off", server=server, stdin=None)
    assert r.code == 0, r.err
    assert r.json()["sandbox_refusals"] == [] and target.exists()


def test_a_project_config_cannot_turn_the_sandbox_off_or_widen_it(workspace: Path) -> None:
    (workspace / ".nanohermes").mkdir()
    for bad in ({"mode": "off"}, {"network": True}, {"writable_roots": ["/"]}):
        (workspace / ".nanohermes" / "config.json").write_text(json.dumps({"sandbox": bad}))
        loaded = load_config(workspace)
        assert loaded.config.sandbox.mode == "auto" and loaded.config.sandbox.network is False
        assert loaded.config.sandbox.writable_roots == []
        assert [w for w in loaded.warnings if ": ignored sandbox " in w and "not trusted" in w]
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({"sandbox": {"mode": "auto"}}))
    assert load_config(workspace).warnings == []


def test_permissions_report_says_what_the_sandbox_confines(workspace: Path) -> None:
    rt, _ = runtime(workspace)
    lines = rt.permissions_report()
    assert AVAIL.lines()[0][0] and f"sandbox: {AVAIL.lines()[0][1]}" in lines  # confined, and said so
    rt, _ = runtime(workspace, config=Config.from_dict({"sandbox": {"mode": "off"}}))
    assert rt.permissions_report()[-1].startswith("sandbox: off")


# -- the git tools run no program a repository names -----------------------------------------

def _evil_repo(repo: Path, marker: Path) -> None:
    """A repository whose config runs a marker-writing program for status, diff and add."""
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attrs")
    cmd = f"touch {marker}"
    git(repo, "config", "core.fsmonitor", cmd)
    git(repo, "config", "filter.evil.clean", f"{cmd}; cat")
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "diff.evil.textconv", f"{cmd}; cat")
    git(repo, "config", "diff.external", cmd)
    git(repo, "config", "core.hooksPath", str(repo / "hooks"))
    (repo / "a.txt").write_text("two\n")  # a change: status and diff must look at it


def test_the_evil_repo_really_runs_its_programs_under_plain_git(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    _evil_repo(repo, marker)
    subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True)
    assert marker.exists()  # so the tests below would see a program run


@pytest.mark.parametrize("mode", ["default", "plan"])
@pytest.mark.parametrize("sandbox_mode", ["auto", "off"])
def test_git_tools_run_no_repo_configured_program(repo: Path, tmp_path: Path, mode: str, sandbox_mode: str) -> None:
    marker = tmp_path / "marker"
    _evil_repo(repo, marker)
    rt, ui = runtime(repo, mode=mode, config=Config.from_dict({"sandbox": {"mode": sandbox_mode}}))
    status = call(rt, "git_status")
    assert "M a.txt" in status
    diff = call(rt, "git_diff")
    assert "-one\n+two" in diff
    call(rt, "git_diff", stat=True)
    log = call(rt, "git_log")
    assert "attrs" in log
    assert not marker.exists()
    assert ui.of(ApprovalRequest) == []


# -- escaped processes ---------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["off", "workspace-write"])
def test_a_setsid_daemon_is_killed_when_its_command_ends(workspace: Path, no_leftover_processes: str,
                                                         policy: str) -> None:
    # Each escapee says it is there (a file the shell itself makes: no short-lived child to
    # count) before the command ends: no sleep stands for that.
    out, _ = run(workspace, "setsid sh -c ': > a; exec sleep 300' > /dev/null 2>&1 < /dev/null & "
                            "(setsid sh -c 'sleep 301 & : > b; exec sleep 302' > /dev/null 2>&1 &); "
                            "until [ -e a ] && [ -e b ]; do sleep 0.02; done; echo started",
                 policy)
    assert "started" in out
    [note] = [line for line in out.split("\n") if line.startswith("note: ")]
    assert note.startswith("note: 3 processes ") and "killed" in note, note
    assert marked_pids(no_leftover_processes) == []


def test_a_setsid_daemon_of_a_background_task_is_killed_when_it_ends(workspace: Path,
                                                                     no_leftover_processes: str) -> None:
    async def go() -> tuple[str, list[Notice]]:
        ui = RecordingUI()
        rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=ui, policy=Policy(mode="goal"))
        started = await acall(rt, "run_command", command="setsid sleep 300 > /dev/null 2>&1 < /dev/null & sleep 0.3",
                              background=True)
        tid = started.split()[3].rstrip(":")
        task = task_manager(ToolContext(workspace=workspace, limits=Limits(), config=Config(), state=rt.session.state)).get(tid)
        assert task.watcher is not None
        await asyncio.wait({task.watcher})
        out = await acall(rt, "task_output", task_id=tid)
        await rt.close()
        return out, ui.of(Notice)

    out, notices = asyncio.run(go())
    [note] = [line for line in out.split("\n") if line.startswith("note: ")]
    assert note.startswith("note: 1 process ") and "killed" in note, note
    assert any("1 escaped process(es) killed" in n.text for n in notices)
    assert marked_pids(no_leftover_processes) == []


def test_the_sweep_leaves_unrelated_processes_alone(workspace: Path) -> None:
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)  # like an MCP server
    try:
        out, _ = run(workspace, "setsid sleep 300 > /dev/null 2>&1 < /dev/null & sleep 0.2", "workspace-write")
        assert "note: 1 process the command started" in out
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def _zombies() -> set[str]:
    """Zombie children of this process (earlier tests may leave some: only new ones count)."""
    me = str(os.getpid())
    out = set()
    for name in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] == "Z":
            out.add(name)
    return out


def test_no_zombies_are_left_behind(workspace: Path) -> None:
    before = _zombies()
    out, _ = run(workspace, "setsid sleep 300 > /dev/null 2>&1 < /dev/null & sleep 1 & sleep 0.2", "workspace-write")
    assert "note: 1 process the command started" in out
    assert _zombies() - before == set()


# -- unprivileged ----------------------------------------------------------------------------

_UNPRIVILEGED = """
import os, subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from nanohermes.guard import sandbox
ws = Path(sys.argv[2])
conf = sandbox.confinement("workspace-write", workspace=ws)
prepared = sandbox.prepare(conf)
argv, env = ["bash", "-c", sys.argv[3]], prepared.env(dict(os.environ))
r = subprocess.run(argv, cwd=ws, preexec_fn=prepared.preexec(argv, env), env=env, capture_output=True, text=True)
prepared.cleanup()
print(os.getuid(), conf.namespaces, r.stdout.strip(), r.stderr, sep="\\n")
"""


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A folder straight under the system temp folder, so user 65534 can reach it."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="nanohermes-test-nobody-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _nobody_python(src: Path) -> list[str] | None:
    """A python that user 65534 can run and that imports the sandbox from `src` (this one,
    and the checkout, may live in a folder that user cannot enter, as root's home is), or None."""
    import shutil

    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    probe = f"import sys; sys.path.insert(0, {str(src)!r}); import ctypes; from nanohermes.guard import sandbox"
    for py in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", py]
        if Path(py).exists() and subprocess.run([*argv, "-c", probe], capture_output=True, cwd=src).returncode == 0:
            return argv
    return None


@needs_namespaces
def test_an_unprivileged_user_gets_the_same_confinement(nobody_dir: Path) -> None:
    import shutil

    if os.geteuid() != 0:
        pytest.skip("needs root, to become an unprivileged user")
    base = nobody_dir
    # What that user runs is a copy it can read: the checkout may sit in a 0700 folder.
    src = base / "src"
    shutil.copytree(Path(__file__).resolve().parent.parent / "nanohermes", src / "nanohermes",
                    ignore=shutil.ignore_patterns("__pycache__"))
    ws = base / "ws"
    ws.mkdir(parents=True)
    git(ws, "init", "-q")
    subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
    argv = _nobody_python(src)
    if argv is None:
        pytest.skip("needs setpriv, and a python that user 65534 can run and that can import nanohermes")
    line = f"echo x >> .git/config; echo ok > in.txt; echo no > {base / 'out.txt'}; id -u"
    r = subprocess.run([*argv, "-c", _UNPRIVILEGED, str(src), str(ws), line], cwd=base,  # not the 0700 checkout
                       capture_output=True, text=True, env={"PATH": os.environ["PATH"], "HOME": str(base)})
    assert r.returncode == 0, r.stderr
    uid, namespaces, out, err = r.stdout.split("\n", 3)
    assert (uid, namespaces, out) == ("65534", "True", "65534")
    assert ".git/config: Read-only file system" in err
    assert f"{base / 'out.txt'}: Read-only file system" in err
    assert (ws / "in.txt").read_text() == "ok\n" and not (base / "out.txt").exists()
    assert "x" not in (ws / ".git" / "config").read_text().split()


def test_doctor_has_one_line_for_landlock_and_one_for_namespaces(turn: Any) -> None:
    r = turn("doctor", "--base-url", "http://127.0.0.1:9/v1")
    lines = [line for line in r.out.splitlines() if "sandbox " in line]
    assert lines[0] == f"[ok]   sandbox landlock: {AVAIL.lines()[0][1]}"
    assert lines[1] == f"[ok]   sandbox namespaces: {AVAIL.lines()[1][1]}"
    r = turn("doctor", "--base-url", "http://127.0.0.1:9/v1", config={"sandbox": {"mode": "off"}})
    [off] = [line for line in r.out.splitlines() if line.startswith("[warn] sandbox: off ")]
    assert "sandbox.mode" in off, off


def test_availability_lines_say_what_is_weaker() -> None:
    weak = sandbox.Availability(abi=3, namespaces=False, namespace_error="EPERM")
    (good1, landlock), (good2, ns) = weak.lines()
    assert not good1 and "TCP connect/bind is not blocked (ABI < 4)" in landlock
    assert not good2 and ns.startswith("user namespaces unavailable (EPERM): ") and "sockets" in ns
    assert "read-only commands written as plain words" in ns
    (good, none), _ = sandbox.Availability(abi=0, namespaces=True, pid=True).lines()
    assert not good and none.startswith("Landlock unavailable ") and "read-only commands run without" in none


@needs_namespaces
def test_a_hooks_folder_named_by_core_hooks_path_stays_read_only(repo: Path) -> None:
    (repo / ".husky").mkdir()
    (repo / ".husky" / "pre-commit").write_text("npm test\n")
    git(repo, "config", "core.hooksPath", ".husky")
    out, _ = run(repo, "echo evil >> .husky/pre-commit; echo evil > .husky/post-checkout", "workspace-write")
    assert (repo / ".husky" / "pre-commit").read_text() == "npm test\n"
    assert not (repo / ".husky" / "post-checkout").exists()
    assert out.count("Read-only file system") == 2


@needs_namespaces
def test_a_daemon_that_clears_its_environment_is_still_found_when_confined(workspace: Path) -> None:
    out, _ = run(workspace, "setsid env -i sleep 303 > /dev/null 2>&1 < /dev/null & sleep 0.3", "workspace-write")
    assert "note: 1 process " in out

    def sleepers() -> list[str]:
        found = []
        for name in os.listdir("/proc"):
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == b"sleep\x00303\x00":
                    found.append(name)
            except OSError:
                pass
        return found

    assert wait_until(lambda: sleepers() == [], timeout=5)


def test_extra_write_roots_are_writable_under_workspace_write_only(workspace: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    config = Config(extra_write_roots=[str(extra)])
    run(workspace, f"echo ok > {extra / 'a'}", "workspace-write", config)
    _, ctx = run(workspace, f"echo ok > {extra / 'b'}", "read-only", config)
    assert (extra / "a").read_text() == "ok\n" and not (extra / "b").exists()
    assert ctx.refused == [f"a write to {extra / 'b'}"]


def test_a_background_task_reports_what_the_sandbox_refused(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"

    async def go() -> str:
        rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=RecordingUI(),
                     policy=Policy(mode="goal"))
        started = await acall(rt, "run_command", command=f"touch {target}", background=True)
        tid = started.split()[3].rstrip(":")
        task = task_manager(ToolContext(workspace=workspace, limits=Limits(), config=Config(), state=rt.session.state)).get(tid)
        assert task.watcher is not None
        await asyncio.wait({task.watcher})
        out = await acall(rt, "task_output", task_id=tid)
        await rt.close()
        return out

    out = asyncio.run(go())
    assert not target.exists()
    [note] = [line for line in out.split("\n") if line.startswith("note: ")]
    assert "(workspace-write)" in note and f" {Refused('write', str(target))}: " in note, note


@needs_namespaces
@pytest.mark.parametrize("policy", CONFINED)
def test_cannot_change_metadata_outside_its_writable_roots(workspace: Path, tmp_path: Path, policy: str) -> None:
    """Landlock does not cover chmod, chown, utimes or xattrs: the read-only tree does."""
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    victim.chmod(0o644)
    before = victim.stat()
    out, _ = run(workspace, f"chmod 777 {victim}; touch -d 2001-01-01 {victim}; echo to-stderr > /dev/stderr", policy)
    after = victim.stat()
    assert (after.st_mode, after.st_mtime) == (before.st_mode, before.st_mtime)
    assert out.count("Read-only file system") == 2
    assert "stderr:\n" in out and "to-stderr" in out  # /dev/stderr still works


def test_sandbox_refusals_listed_lowered_to_2(workspace: Path, tmp_path: Path) -> None:
    targets = [tmp_path / f"t{i}" for i in range(4)]
    ran = run_confined(workspace, "; ".join(f"touch {t}" for t in targets), "workspace-write",
                       limits=Limits(sandbox_refusals_listed=2))
    out = ran.text
    assert ran.refused == [f"a write to {targets[0]}", f"a write to {targets[1]}",
                                    "2 more (sandbox_refusals_listed is 2)"]
    assert (f"refused a write to {targets[0]}, a write to {targets[1]}, 2 more (sandbox_refusals_listed is 2):"
            in out)


@needs_namespaces
def test_the_sweep_of_an_ended_command_spares_a_command_started_after_it(workspace: Path) -> None:
    """A freed namespace's number goes to the next one made: the sweep must not take a
    later command's namespace for the ended command's."""
    from nanohermes.tools.process import spawn

    async def go() -> int | None:
        _, attempt = confined_context(workspace, "read-only")
        first = await spawn(["true"], cwd=workspace, env=dict(os.environ), out_cap=100, err_cap=100,
                            confinement=attempt.confinement)
        await first.wait(10)
        await asyncio.sleep(0.1)  # its namespace is gone once it has exited
        second = await spawn(["sleep", "2"], cwd=workspace, env=dict(os.environ), out_cap=100, err_cap=100,
                             confinement=attempt.confinement)
        first.close()  # the sweep after the first command
        try:
            await second.wait(10)
            return second.returncode
        finally:
            second.close()

    assert asyncio.run(go()) == 0


@needs_landlock
def test_a_command_run_without_a_granted_confinement_is_confined_as_an_unasked_one(workspace: Path,
                                                                                    tmp_path: Path) -> None:
    """An attempt the gate did not make (a tool run outside it) has no confinement: its command
    still runs in workspace-write, never unconfined."""
    from nanohermes.tools.shell import RunCommand, RunCommandParams

    ctx = ToolContext(workspace=workspace, limits=Limits(), config=Config())
    assert Attempt().confinement is None
    outside = tmp_path / "outside.txt"
    out = asyncio.run(RunCommand().run(RunCommandParams(command=f"touch {outside}; touch inside.txt"), ctx,
                                       Attempt()))
    assert (workspace / "inside.txt").exists() and not outside.exists()
    assert "workspace-write" in str(out)
