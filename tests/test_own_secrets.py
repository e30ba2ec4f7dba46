"""nanohermes's own secrets stay its own: a key given as `--api-key` is in no command line a
command can read, sandboxed or approved, while it still reaches the endpoint. Each door is
first shown open to a plain process (the control). Real processes, real /proc."""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from exec_support import acall, make_runtime
from nanohermes.guard import sandbox, withhold
from nanohermes.guard.procargs import secret_spans
from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent
AVAIL = sandbox.probe()


def test_secret_values_are_found_in_every_spelling() -> None:
    raw = b"python3\0-m\0nanohermes\0--api-key\0sk-one\0-p\0hi\0--api-key=sk-two\0--api-key=\0"
    assert [raw[at:at + n] for at, n in secret_spans(raw)] == [b"sk-one", b"sk-two"]
    assert secret_spans(b"nanohermes\0-p\0--api-keys are secret\0") == []


def tool_results(server: FakeServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("how", ["sandboxed", "approved"])
def test_an_api_key_given_on_the_command_line_is_shown_to_no_command(server: FakeServer, workspace: Path, home: Path,
                                                                     tmp_path: Path, how: str) -> None:
    key = "sk-" + secrets.token_hex(16)
    server.api_key = key
    # The control: a process's arguments are anyone's to read, where it keeps them or not.
    ctrl = subprocess.Popen([sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()", "--api-key", key],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert ctrl.stdout is not None and ctrl.stdout.readline() == b"\n"  # running
        assert key.encode() in Path(f"/proc/{ctrl.pid}/cmdline").read_bytes()
    finally:
        ctrl.communicate(b"")

    if how == "sandboxed" and not (AVAIL.landlock and AVAIL.namespaces):
        pytest.skip("needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")
    held = tmp_path / "held"
    os.mkfifo(held)
    reads = "ps -eo args; grep -a -- --api-key /proc/*/cmdline"
    if how == "sandboxed":  # read-only commands: they run unasked, confined
        commands, flags = [reads], []
    else:  # every command runs unconfined, as a person's yes runs one
        commands, flags = [f"{reads}; cat /proc/$PPID/cmdline; read line < {held}"], ["--yes", "--sandbox", "off"]
    server.add(*(tool_reply(call("run_command", {"command": c}, id=f"c{i}")) for i, c in enumerate(commands)),
               Reply(text="done"))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "nanohermes", "-p", "go", "--api-key", key, "--base-url",
                             server.base_url, "--model", "fake-model", *flags], cwd=workspace, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: list[bytes] = []
    if how == "approved":
        # Opening the pipe waits for the command to read it: nanohermes is running its command.
        def release() -> None:
            with open(held, "w") as f:
                seen.append(Path(f"/proc/{proc.pid}/cmdline").read_bytes())
                f.write("go\n")

        releaser = threading.Thread(target=release, daemon=True)
        releaser.start()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    if how == "approved":
        releaser.join(timeout=10)
        [cmdline] = seen  # read by the test while nanohermes ran
        assert b"--api-key" in cmdline and key.encode() not in cmdline and b"*" * len(key) in cmdline
    [result] = tool_results(server)
    assert "--api-key" in result or how == "sandboxed"
    assert key not in result, result
    assert all(h.get("authorization") == f"Bearer {key}" for h in server.headers)  # the key still reaches it


def test_a_key_in_the_environment_is_not_in_what_the_kernel_shows_of_it(server: FakeServer, workspace: Path,
                                                                        cli: Any) -> None:
    """The variable is the recommended way to give the key; the environment a process started
    with is readable by the person's other processes, an approved command among them."""
    key = "sk-" + secrets.token_hex(16)
    server.api_key = key
    ctrl = subprocess.run(["sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ"], env={"OPENAI_API_KEY": key},
                          capture_output=True, text=True)
    assert f"OPENAI_API_KEY={key}" in ctrl.stdout  # the control: the door is real
    line = "tr '\\0' '\\n' < /proc/$PPID/environ | grep '^OPENAI_API_KEY='; env | grep -c OPENAI_API_KEY"
    server.add(tool_reply(call("run_command", {"command": line}, id="c")), Reply(text="done"))
    r = cli("-p", "go", "--yes", "--sandbox", "off", server=server, env={"OPENAI_API_KEY": key})  # unconfined
    assert r.code == 0, r.err
    [result] = tool_results(server)
    assert key not in result and f"OPENAI_API_KEY={'*' * len(key)}" in result, result
    assert all(h.get("authorization") == f"Bearer {key}" for h in server.headers)  # the key still reaches it


# -- secret files that appear while a task runs ---------------------------------------------------

def test_the_values_of_a_secret_file_are_what_names_a_secret_and_what_looks_like_a_key() -> None:
    text = ("# a comment with a_long_token_like_value_1234567890\n"
            "API_KEY=sk-abc123def456ghi789\nexport DB_PASSWORD='hunter22'\nPORT=8080\nNODE_ENV=development\n"
            "DATABASE_URL=postgres://app:s3cretpw@localhost/db\n  \"client_secret\": \"shh-shh\",\n"
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n")
    found = withhold.secret_values(text)
    assert {"sk-abc123def456ghi789", "hunter22", "s3cretpw", "shh-shh",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"} <= found
    assert not found & {"8080", "development", "localhost", "postgres", "a_long_token_like_value_1234567890"}


def test_a_value_of_a_secret_file_is_kept_out_of_what_an_unapproved_command_prints(turn: Any, server: FakeServer,
                                                                                    workspace: Path) -> None:
    value = "tok-" + secrets.token_hex(16)
    (workspace / ".env").write_text(f"API_TOKEN={value}\n")
    (workspace / "notes.txt").write_text(f"copied here: {value}\n")  # not a secret file: a command may read it
    assert value in subprocess.run(["cat", "notes.txt"], cwd=workspace, capture_output=True, text=True).stdout

    server.add(tool_reply(call("run_command", {"command": "cat notes.txt"}, id="c1")), Reply(text="done"))
    r = turn("-p", "go", server=server, stdin=None)  # cat runs unasked: read-only, confined
    assert r.code == 0, r.err
    [out] = tool_results(server)
    assert value not in out and "copied here: [REDACTED]" in out
    note = out.split("\n")[-1]
    assert note.startswith("note: 1 value ") and "(permissions.secret_files)" in note and "[REDACTED]" in note, note


def test_the_bytes_read_of_each_secret_file_are_a_limit(turn: Any, server: FakeServer, workspace: Path) -> None:
    late = "tok-" + secrets.token_hex(16)
    (workspace / ".env").write_text("# " + "x" * 100 + f"\nLATE_TOKEN={late}\n")
    (workspace / "notes.txt").write_text(f"{late}\n")
    server.add(tool_reply(call("run_command", {"command": "cat notes.txt"}, id="c1")), Reply(text="done"))
    r = turn("-p", "go", server=server, stdin=None, config={"limits": {"sandbox_secret_value_bytes": 64}})
    assert r.code == 0, r.err
    [out] = tool_results(server)
    assert late in out and "[REDACTED]" not in out  # past the first 64 bytes: not read, not known


def start_reading(rt: Any, line: str) -> Any:
    """A background task nobody approved (goal mode: it runs confined) that keeps reading."""
    async def go() -> str:
        started = await acall(rt, "run_command", command=line, background=True)
        return started.split()[3].rstrip(":")
    return go()


@pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces), reason="needs Landlock and user namespaces")
@pytest.mark.parametrize("how", ["created", "replaced by rename"])
def test_a_secret_file_that_appears_while_a_task_runs_never_reaches_the_model(workspace: Path, how: str) -> None:
    value = "tok-" + secrets.token_hex(16)
    env = workspace / ".env"
    loop = "while :; do cat .env 2>&1; echo; sleep 0.05; done"
    if how == "replaced by rename":
        env.write_text("OLD_TOKEN=tok-old-0123456789abcdef\n")
    # The control: a plain process that keeps reading gets the value once the file is there.
    control = subprocess.Popen(["sh", "-c", f"for i in $(seq 200); do cat {env} 2>/dev/null; "
                                f"grep -q {value} {env} 2>/dev/null && break; sleep 0.05; done"],
                               stdout=subprocess.PIPE, text=True)

    def put() -> None:
        staged = workspace / ".env.new~"
        staged.write_text(f"API_TOKEN={value}\n")
        os.rename(staged, env)  # an editor's save; for "created", the first .env there is

    async def go() -> list[str]:
        rt = make_runtime(workspace)
        tid = await start_reading(rt, loop)
        outs = [await acall(rt, "task_output", task_id=tid)]
        while "cat: .env" not in outs[-1] and ("OLD_TOKEN" not in outs[-1] or how == "created"):
            await asyncio.sleep(0.05)  # until it has read at least once
            outs.append(await acall(rt, "task_output", task_id=tid))
        await asyncio.to_thread(put)
        after = len(outs)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and reads(outs[after:])[-3:] != [DENIED] * 3:
            await asyncio.sleep(0.1)  # until the sandbox has covered the new file there
            outs.append(await acall(rt, "task_output", task_id=tid))
        await acall(rt, "task_kill", task_id=tid)
        await rt.close()
        return outs[:after], outs[after:]

    before, after = asyncio.run(go())
    seen, _ = control.communicate(timeout=60)
    assert value in seen  # the door is real
    assert not any(value in out for out in before + after), after
    assert reads(after)[-3:] == [DENIED] * 3  # covered in the task's sandbox while it runs


DENIED = "cat: .env: Permission denied"


def reads(outs: list[str]) -> list[str]:
    """What each `cat .env` of a task printed, across task_output calls."""
    text = "".join(o.split("stdout (new since the last read):\n", 1)[-1].split("\n\nstderr (new", 1)[0] for o in outs)
    return [line for line in text.splitlines() if line.strip() and line != "(nothing new)"]


@pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces), reason="needs Landlock and user namespaces")
@pytest.mark.parametrize("background", [True, False], ids=["task", "foreground"])
def test_a_copy_a_command_made_of_a_secret_file_that_appeared_is_kept_out_of_every_result(
        workspace: Path, tmp_path: Path, background: bool) -> None:
    """A command nobody approved copies a secret file the moment it appears (before its
    sandbox covers it); the copy is no secret file by name, yet its values reach the model
    through no tool: read_file and grep give them replaced."""
    value = "tok-" + secrets.token_hex(16)
    (workspace / "notes").mkdir()

    def put_in(held: Path) -> None:
        with open(held, "w") as f:  # opened once the command reads it: it has started
            (workspace / ".env").write_text(f"API_TOKEN={value}\n")
            f.write("go\n")

    async def go(attempt: int) -> tuple[str, str, str]:
        held = tmp_path / f"held{attempt}"
        os.mkfifo(held)
        line = f"read go < {held}; cp .env notes/copy.txt"  # waits until the test has made .env
        (workspace / ".env").unlink(missing_ok=True)
        rt = make_runtime(workspace)  # goal mode: the command runs unasked, confined
        put = functools.partial(put_in, held)
        putter = asyncio.create_task(asyncio.to_thread(put))
        if background:
            tid = await start_reading(rt, line)
            await putter
            while "exited" not in (out := await acall(rt, "task_output", task_id=tid)):
                await asyncio.sleep(0.05)
        else:
            out = await acall(rt, "run_command", command=line)
            await putter
        read = await acall(rt, "read_file", path="notes/copy.txt")
        found = await acall(rt, "grep", pattern="API_TOKEN", path="notes")
        await rt.close()
        return out, read, found

    # The copy races the sandbox's cover of the new file (within a second): on a loaded machine the
    # cover may come first and the copy fail, which leaves nothing to test, so the world is made again.
    for attempt in range(5):
        out, read, found = asyncio.run(go(attempt))
        if "exit code: 0" in out or "Permission denied" not in out:
            break
    assert "exit code: 0" in out, out
    assert (workspace / "notes" / "copy.txt").read_text() == f"API_TOKEN={value}\n"  # the copy holds it
    for result in (read, found):
        assert value not in result and "[REDACTED]" in result, result
        note = result.split("\n")[-1]
        assert note.startswith("note: 1 value ") and "(permissions.secret_files)" in note and " result: " in note, note


@pytest.mark.parametrize("line", ["cat ~/.ssh/id_ed25519", "cat ~/.ssh/config", "cat ~/.aws/credentials",
                                  "cat ~/.netrc", "grep -r token ~/.config/gh"])
def test_the_home_folders_credentials_are_withheld_from_commands_nobody_approved(
        turn: Any, server: FakeServer, workspace: Path, home: Path, line: str) -> None:
    """Under --yes a command runs in the sandbox: it may read the machine, but not the keys and
    logins people keep in their home folder (a person's yes runs one outside)."""
    mark = "cred-" + secrets.token_hex(12)
    for rel in (".ssh/id_ed25519", ".ssh/config", ".aws/credentials", ".netrc", ".config/gh/hosts.yml"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"token {mark}\n")
    control = subprocess.run(["sh", "-c", line], cwd=workspace, capture_output=True, text=True,
                             env={**os.environ, "HOME": str(home)})
    assert mark in control.stdout  # the door is open to a plain process
    server.add(tool_reply(call("run_command", {"command": line}, id="c1")), Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server, stdin=None)
    assert r.code == 0, r.err
    [out] = tool_results(server)
    assert mark not in out
    assert "one of your home folder's credentials" in out
