"""Shared fixtures: a tmp workspace and tmp HOME per test, the fake server, and a CLI runner."""

from __future__ import annotations

import compileall
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer

REPO = Path(__file__).resolve().parent.parent

# The suite behaves the same however it is started. A shell's background job (`pytest &`,
# nohup) starts with SIGINT ignored, and an ignored signal stays ignored in every process it
# starts: a test's Ctrl-C (a pty's ^C, a SIGINT sent to `nanohermes -p`) would then do
# nothing. With a handler here, each process the tests start gets the default back at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)
# Most tests start nanohermes as a process of its own. With PYTHONDONTWRITEBYTECODE set (as
# many CI images set it) none of them keeps the bytecode it compiles, and every start compiles
# the package again: more CPU than the turn it runs. Compiled once here (compileall writes
# whatever that variable says, and skips what is up to date), every start reads it.
compileall.compile_dir(str(REPO / "nanohermes"), quiet=1, workers=1)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Keeps the test modules' compiled code between runs, whatever PYTHONDONTWRITEBYTECODE says.

    Every xdist worker imports every test module, and pytest rewrites each module's asserts
    before compiling it: several seconds of CPU per worker, on every run. pytest keeps the
    rewritten code beside the module (`__pycache__/*-pytest-*.pyc`, checked against the source)
    only when bytecode may be written; with that variable set, as many CI images set it, it
    rewrites afresh each time. Writing is allowed while the suite collects and put back after,
    so the tests themselves run under the flag the environment gave."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved

# A runner may set the terminal's size in the environment (pytest-xdist's workers set
# COLUMNS=80 and LINES=24); rich and prompt-toolkit would size a pty's screen from it
# instead of from the pty, and the screens the tests read would wrap elsewhere.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME and XDG folders, so no real config, session or cached
    answer leaks in (nor from one test into another)."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(var, str(h / sub))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "NANOHERMES_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return h


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s
    assert s.violations == [], s.violations


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def _command_line(args: tuple[str, ...], server: FakeServer | None, config: dict[str, Any] | None,
                  home: Path) -> list[str]:
    """The arguments of a run against `server` (its URL and the fake model), with `config` as
    the user's config file."""
    if config is not None:
        cfg = home / ".config" / "nanohermes" / "config.json"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(json.dumps(config))
    extra = ["--base-url", server.base_url, "--model", "fake-model"] if server is not None else []
    return [*args, *extra]


@pytest.fixture
def cli(workspace: Path, home: Path):  # type: ignore[no-untyped-def]
    """Run the real `nanohermes` process: cli(*args, stdin=..., server=..., config=...)."""

    def run(*args: str, stdin: str | None = "", server: FakeServer | None = None, config: dict[str, Any] | None = None,
            cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None) -> Ran:
        # The checkout under test, not whatever copy of nanohermes is installed.
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        if server is not None:
            full_env.setdefault("OPENAI_API_KEY", "test-key")
        argv = [sys.executable, "-m", "nanohermes", *_command_line(args, server, config, home)]
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=cwd or workspace,
                           env=full_env, timeout=timeout)
        return Ran(p.returncode, p.stdout, p.stderr)

    return run


@pytest.fixture
def turn(workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run a `nanohermes` command line that opens no REPL in this process (`cli.run_line`),
    for tests whose subject is the turn (the wire, the tools, the permissions) rather than the
    process: the same arguments and result as `cli`, without a Python start each time. Its
    output is what the run wrote to sys.stdout and sys.stderr."""
    import faulthandler
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from nanohermes.cli import run_line

    def run(*args: str, stdin: str | None = "", server: FakeServer | None = None, config: dict[str, Any] | None = None,
            cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None) -> Ran:
        argv = _command_line(args, server, config, home)
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as m:
            for name, value in (env or {}).items():
                m.setenv(name, value)
            if server is not None and "OPENAI_API_KEY" not in os.environ:
                m.setenv("OPENAI_API_KEY", "test-key")
            m.chdir(cwd or workspace)
            m.setattr(sys, "stdin", io.StringIO(stdin or ""))
            # A run that hangs ends this test process with every thread's stack, as the
            # process's timeout ends a `cli` run, rather than hanging the suite.
            faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
            try:
                with redirect_stdout(out), redirect_stderr(err):
                    code = run_line(argv)
            finally:
                faulthandler.cancel_dump_traceback_later()
        return Ran(code, out.getvalue(), err.getvalue())

    return run


# -- loopback servers that are not model endpoints ------------------------------------------
def serve_on(listener: socket.socket, handle: Callable[[socket.socket], None]) -> Iterator[int]:
    listener.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                handle(conn)
            except OSError:
                pass
            finally:
                conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    listener.close()


@pytest.fixture
def tls_port(tmp_path: Path) -> Iterator[int]:
    """A TLS server on 127.0.0.1 with a throwaway self-signed certificate; a plain-HTTP client
    fails its handshake, which is the case under test."""
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    def handshake(conn: socket.socket) -> None:
        with ctx.wrap_socket(conn, server_side=True):
            pass

    yield from serve_on(socket.create_server(("127.0.0.1", 0)), handshake)


@pytest.fixture
def hang_up_port() -> Iterator[int]:
    """A plain server that reads the request and closes without answering (a crashing backend)."""
    def hang_up(conn: socket.socket) -> None:
        conn.recv(65536)

    yield from serve_on(socket.create_server(("127.0.0.1", 0)), hang_up)
