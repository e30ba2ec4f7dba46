"""MCP servers from the npm registry (server-filesystem, server-everything), installed once per
test run into a git-ignored cache folder in the repository, and run as real subprocesses.

The versions are pinned by `tests/mcp/npm/package-lock.json`; `npm ci` installs exactly those,
and a later run whose lock file is unchanged reuses the install. Where npm is missing or the
registry cannot be reached, the tests that need these servers are skipped, saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SPEC = HERE / "mcp" / "npm"
CACHE = HERE / ".cache" / "npm-mcp"
_INSTALL_SECS = 300


def _stamp() -> str:
    return hashlib.sha256((SPEC / "package.json").read_bytes() + (SPEC / "package-lock.json").read_bytes()).hexdigest()


def install() -> Path:
    """The folder of the servers' programs (`node_modules/.bin`), installing them if needed;
    skips the calling test when they cannot be had."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed, so the npm registry's MCP servers cannot run")
    CACHE.mkdir(parents=True, exist_ok=True)
    bin_dir = CACHE / "node_modules" / ".bin"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs sharing the checkout install once
        stamp = CACHE / ".installed"
        if stamp.exists() and stamp.read_text() == _stamp() and (bin_dir / "mcp-server-everything").exists():
            return bin_dir
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(SPEC / name, CACHE / name)
        try:
            p = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--no-progress", "--loglevel=error"], cwd=CACHE,
                               capture_output=True, text=True, timeout=_INSTALL_SECS,
                               env={**os.environ, "npm_config_update_notifier": "false"})
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm ci did not finish within {_INSTALL_SECS} s: the npm registry cannot be reached")
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
            if any(w in p.stderr for w in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET",
                                           "network", "fetch failed")):
                pytest.skip(f"the npm registry cannot be reached: {last}")
            raise RuntimeError(f"npm ci failed in {CACHE}: {p.stderr[-2000:]}")
        stamp.write_text(_stamp())
    return bin_dir


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    return install()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def everything(bin_dir: Path, transport: str) -> Iterator[str]:
    """server-everything serving `transport` (sse or streamableHttp) on a free port: yields its
    URL, and kills its process group when done. A port taken between the look and the bind is
    retried on another."""
    path = {"sse": "/sse", "streamableHttp": "/mcp"}[transport]
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen([str(bin_dir / "mcp-server-everything"), transport], env={**os.environ, "PORT": str(port)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 60
            seen: list[str] = []
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                seen.append(line)
                if f"port {port}" in line and "in use" not in line:
                    break
                if "in use" in line:
                    break
            if seen and f"port {port}" in seen[-1] and "in use" not in seen[-1]:
                # Its stderr keeps coming (a line per client message): drained, or the server blocks.
                drain = threading.Thread(target=proc.stderr.read, daemon=True)
                drain.start()
                try:
                    yield f"http://127.0.0.1:{port}{path}"
                finally:
                    _stop(proc)
                    drain.join(timeout=10)
                return
        finally:
            _stop(proc)
        if not any("in use" in line for line in seen):
            raise RuntimeError(f"server-everything {transport} did not start: {''.join(seen)[-1000:]}")
    raise RuntimeError("server-everything found no free port in 5 tries")


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
