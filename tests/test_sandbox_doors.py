"""Doors of the sandbox, tried as an attacker would: each attack first shown to work
unconfined (the control), then run through nanohermes under `--yes`, where it must fail and
be reported as a sandbox refusal. Real kernel, real tmux, real sockets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exec_support import run_confined, wait_until
from nanohermes.common.budget import Limits
from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply

AVAIL = sandbox.probe()
pytestmark = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                                reason="needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")


def run_through(turn: Any, server: FakeServer, command: str, *flags: str, env: dict[str, str] | None = None) -> Any:
    """One run_command call the model asks for, run unasked under --yes; the json result."""
    server.add(tool_reply(call("run_command", {"command": command}, id="c1")), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "json", "--yes", *flags, server=server, stdin=None, env=env)
    assert r.code == 0, r.err
    return r.json()


def tool_result(server: FakeServer) -> str:
    """What the model was sent back for its call."""
    messages = server.requests[-1]["messages"]
    return next(m["content"] for m in messages if m["role"] == "tool")


@pytest.fixture
def tmux_server(tmp_path: Path) -> Iterator[Path]:
    """A tmux server of the test's own, on its own socket outside the workspace, running a shell
    (never the person's terminal)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    sock = tmp_path / "tmux.sock"
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    subprocess.run(["tmux", "-f", "/dev/null", "-S", str(sock), "new-session", "-d", "-s", "t", "sh"],
                   check=True, env=env, timeout=20)
    try:
        yield sock
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, env=env, timeout=20)


def test_the_persons_tmux_server_cannot_be_typed_into(turn: Any, server: FakeServer, tmux_server: Path,
                                                      tmp_path: Path) -> None:
    typed = tmp_path / "typed-by-the-control"
    subprocess.run(["tmux", "-S", str(tmux_server), "send-keys", "-t", "t", f"touch {typed}", "Enter"], check=True)
    assert wait_until(typed.exists, timeout=10)  # the control: the door is real

    mark = tmp_path / "typed-through-nanohermes"
    data = run_through(turn, server, f"tmux -S {tmux_server} send-keys -t t 'touch {mark}' Enter")
    subprocess.run(["tmux", "-S", str(tmux_server), "send-keys", "-t", "t", "true", "Enter"], check=True)
    assert not wait_until(mark.exists, timeout=1)
    [refusal] = data["sandbox_refusals"]
    assert any(str(tmux_server) in r and "socket" in r for r in refusal["refused"]), refusal


@pytest.fixture
def agent_socket(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A path socket standing for ssh-agent, gpg-agent, D-Bus or a container engine: it records
    what each client sends."""
    path = tmp_path / "agent" / "S.agent"
    path.parent.mkdir()
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen()
    srv.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    got.append(conn.recv(100))
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield path, got
    stop.set()
    t.join()
    srv.close()


CONNECT = ("python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
           "s.sendall(b\"hello\"); print(\"SENT\")' {path}")


def test_no_path_socket_of_another_program_is_reachable(turn: Any, server: FakeServer,
                                                        agent_socket: tuple[Path, list[bytes]]) -> None:
    path, got = agent_socket
    control = subprocess.run(CONNECT.format(path=path), shell=True, capture_output=True, text=True)
    assert "SENT" in control.stdout and wait_until(lambda: got == [b"hello"], timeout=5)

    data = run_through(turn, server, CONNECT.format(path=path))
    assert "SENT" not in tool_result(server)
    assert got == [b"hello"]  # only the control's
    assert any(str(path) in r for r in data["sandbox_refusals"][0]["refused"])


def test_a_socket_bound_in_another_network_namespace_is_hidden_by_its_folder(turn: Any, server: FakeServer,
                                                                             tmp_path: Path) -> None:
    """Not in nanohermes's /proc/net/unix (another network namespace bound it), but in the
    person's runtime folder: the folder is covered whole."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    path = runtime / "bus"
    serve = ("import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); "
             "print('ready', flush=True); c,_=s.accept(); c.recv(10); print('GOT', flush=True); time.sleep(30)")
    proc = subprocess.Popen(["unshare", "-Urn", sys.executable, "-c", serve, str(path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert str(path) not in Path("/proc/net/unix").read_text()  # the socket list does not show it
        data = run_through(turn, server, CONNECT.format(path=path), env={"XDG_RUNTIME_DIR": str(runtime)})
        assert "SENT" not in tool_result(server)
        assert data["sandbox_refusals"], tool_result(server)
    finally:
        proc.kill()
        proc.wait()


def test_sockets_the_command_makes_in_its_own_places_work(turn: Any, server: FakeServer, workspace: Path) -> None:
    script = workspace / "pair.py"
    script.write_text(
        "import os, socket, sys, threading\n"
        "for where in (os.environ['TMPDIR'], sys.argv[1]):\n"
        "    path = os.path.join(where, 's.sock')\n"
        "    srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen()\n"
        "    threading.Thread(target=lambda: srv.accept()[0].sendall(b'pong'), daemon=True).start()\n"
        "    c = socket.socket(socket.AF_UNIX); c.connect(path); print(where == sys.argv[1], c.recv(4))\n"
        "    os.unlink(path)\n")
    data = run_through(turn, server, f"python3 pair.py {workspace}")
    out = tool_result(server)
    assert "False b'pong'" in out and "True b'pong'" in out, out
    assert data["sandbox_refusals"] == []


def test_variables_naming_sockets_are_not_passed_in(turn: Any, server: FakeServer, tmp_path: Path,
                                                    agent_socket: tuple[Path, list[bytes]]) -> None:
    path, _ = agent_socket
    env = {"TMUX": "/tmp/tmux-1000/default,123,0", "TMUX_PANE": "%1", "STY": "123.pts-0.host",
           "SSH_AUTH_SOCK": str(path), "DBUS_SESSION_BUS_ADDRESS": f"unix:path={path}",
           "DOCKER_HOST": f"unix://{path}", "WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": str(tmp_path),
           "MY_OWN_SOCKET": str(path), "PLAIN_SETTING": "kept"}
    run_through(turn, server, "env", env=env)
    out = tool_result(server)
    assert "PLAIN_SETTING=kept" in out
    for name in env:
        if name != "PLAIN_SETTING":
            assert f"\n{name}=" not in out, name


def test_terminal_injection_stays_blocked(turn: Any, server: FakeServer, workspace: Path) -> None:
    script = workspace / "sti.py"
    script.write_text(
        "import fcntl, os, termios\n"
        "for dev in ['/dev/tty'] + ['/dev/pts/' + n for n in os.listdir('/dev/pts') if n.isdigit()]:\n"
        "    try:\n"
        "        fd = os.open(dev, os.O_RDWR | os.O_NOCTTY)\n"
        "        fcntl.ioctl(fd, termios.TIOCSTI, b'x')\n"
        "        print('INJECTED', dev)\n"
        "    except OSError as e:\n"
        "        print('refused', dev, e.errno)\n")
    run_through(turn, server, "python3 sti.py")
    out = tool_result(server)
    assert "INJECTED" not in out and "refused /dev/tty" in out, out


def test_the_socket_look_is_bounded_and_fails_closed(workspace: Path) -> None:
    from nanohermes.tools import ToolError

    with pytest.raises(ToolError) as e:
        run_confined(workspace, "touch ran", "workspace-write", limits=Limits(sandbox_socket_scan_entries=1))
    assert "sockets went past limits.sandbox_socket_scan_entries (1)" in str(e.value)
    assert not (workspace / "ran").exists()


@pytest.mark.parametrize("policy", ["read-only", "workspace-write"])
def test_a_refusal_whose_output_names_no_path_is_still_a_sandbox_refusal(workspace: Path, policy: str) -> None:
    """A program that words its failure as a bare errno (a semaphore, a lock file, a socket)
    still gets the sandbox's note, not a plain program error."""
    ran = run_confined(workspace, "python3 -c \"import os\ntry: os.open('/usr/nh-x', os.O_CREAT | os.O_WRONLY)\n"
                                  "except OSError as e: print('failed:', os.strerror(e.errno))\"", policy)
    assert "failed: Read-only file system" in ran.text
    assert ran.refused == ["a write outside its writable roots (\"Read-only file system\"; the output names no path)"]
    assert "note: the OS sandbox" in ran.text


def test_without_a_terminal_a_sandbox_refusal_names_the_remedies_that_apply(turn: Any, server: FakeServer,
                                                                            tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    server.add(tool_reply(call("run_command", {"command": f"touch {target}"}, id="c1")), Reply(text="done"))
    r = turn("-p", "go", server=server, stdin=None, config={"permissions": {"allow": ["run_command(touch *)"]}})
    assert r.code == 0, r.err
    [line] = [ln for ln in r.err.splitlines() if ln.startswith("nanohermes: refused")]
    assert f"a write to {target}" in line and "sandbox.writable_roots" in line and "--sandbox off" in line
    assert "rerun with --yes" not in line  # an allow rule already matched: --yes would change nothing
    assert not target.exists()
