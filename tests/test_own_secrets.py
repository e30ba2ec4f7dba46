"""nanohermes's own secrets stay its own: a key given as `--api-key` is in no command line a
command can read, sandboxed or approved, while it still reaches the endpoint. Each door is
first shown open to a plain process (the control). Real processes, real /proc."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nanohermes import sandbox
from nanohermes.procargs import secret_spans
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
