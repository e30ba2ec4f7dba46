"""Ordinary development work, run confined: a command an allow rule lets run unasked
(workspace-write) must behave as it does unconfined. Loopback servers, a private /dev/shm,
multiprocessing with every start method, a pytest suite serving HTTP on 127.0.0.1:0, make
with cc, a venv inside the workspace. Real kernel, real processes."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard import sandbox
from nanohermes.testing import FakeServer, Reply, call, tool_reply

AVAIL = sandbox.probe()
pytestmark = pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces),
                                reason="needs Landlock and user namespaces (`nanohermes doctor` says which is missing)")
PY = sys.executable


def allowed(turn: Any, server: FakeServer, command: str, timeout: int = 120) -> tuple[dict[str, Any], str]:
    """The model runs `command`; an allow rule for it lets it run unasked, so confined. Returns
    the json result and the tool result the model got."""
    server.add(tool_reply(call("run_command", {"command": command, "timeout_secs": timeout}, id="w1")),
               Reply(text="done"))
    r = turn("-p", "work", "--output-format", "json", server=server, stdin=None, timeout=timeout + 60,
            config={"permissions": {"allow": ["run_command"]}})
    assert r.code == 0, r.err
    messages = server.requests[-1]["messages"]
    return r.json(), next(m["content"] for m in messages if m["role"] == "tool")


def ok(turn: Any, server: FakeServer, command: str, expect: str, timeout: int = 120) -> None:
    data, out = allowed(turn, server, command, timeout)
    assert out.startswith("exit code: 0"), out
    assert expect in out, out
    assert data["sandbox_refusals"] == [], data["sandbox_refusals"]


SERVE = """
import asyncio, socket, sys
family, host = (socket.AF_INET6, "::1") if sys.argv[1] == "6" else (socket.AF_INET, "127.0.0.1")
async def main():
    async def echo(r, w):
        w.write(await r.readline()); await w.drain(); w.close()
    srv = await asyncio.start_server(echo, host, 0, family=family)
    port = srv.sockets[0].getsockname()[1]
    r, w = await asyncio.open_connection(host, port)
    w.write(b"ping\\n"); await w.drain()
    print("echoed", (await r.readline()).decode().strip())
asyncio.run(main())
"""


@pytest.mark.parametrize("family", ["4", "6"])
def test_an_asyncio_server_on_loopback(turn: Any, server: FakeServer, workspace: Path, family: str) -> None:
    (workspace / "serve.py").write_text(SERVE)
    ok(turn, server, f"{PY} serve.py {family}", "echoed ping")


def test_a_pytest_fixture_serving_http_on_port_0(turn: Any, server: FakeServer, workspace: Path) -> None:
    (workspace / "test_http.py").write_text(textwrap.dedent("""
        import http.server, threading, urllib.request
        import pytest

        @pytest.fixture
        def url():
            class H(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200); self.end_headers(); self.wfile.write(b"served")
                def log_message(self, *a):
                    pass
            srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            yield f"http://127.0.0.1:{srv.server_address[1]}/"
            srv.shutdown()

        def test_fetch(url):
            assert urllib.request.urlopen(url, timeout=5).read() == b"served"
    """))
    ok(turn, server, f"{PY} -m pytest -q -p no:cacheprovider test_http.py", "1 passed")


MULTI = """
import multiprocessing as mp, sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

def square(x):
    return x * x

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    with ctx.Pool(2) as pool:
        assert pool.map(square, range(4)) == [0, 1, 4, 9]
    lock, q = ctx.Lock(), ctx.Queue()
    with lock:
        q.put("queued")
    assert q.get(timeout=10) == "queued"
    with ProcessPoolExecutor(2, mp_context=ctx) as ex:
        assert list(ex.map(square, [5, 6])) == [25, 36]
    with ctx.Manager() as m:
        d = m.dict(a=1)
        assert d["a"] == 1
    shm = shared_memory.SharedMemory(create=True, size=16)
    shm.buf[0] = 7
    other = shared_memory.SharedMemory(name=shm.name)
    assert other.buf[0] == 7
    other.close(); shm.close(); shm.unlink()
    print("all good with", sys.argv[1])
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_with_every_start_method(turn: Any, server: FakeServer, workspace: Path, method: str) -> None:
    (workspace / "multi.py").write_text(MULTI)
    ok(turn, server, f"{PY} multi.py {method}", f"all good with {method}")


def test_dev_shm_is_private_to_the_call(turn: Any, server: FakeServer, workspace: Path) -> None:
    marker = Path("/dev/shm") / "nanohermes-test-not-leaked"
    ok(turn, server, f"touch {marker} && ls /dev/shm", "nanohermes-test-not-leaked")
    assert not marker.exists()


def test_make_with_cc(turn: Any, server: FakeServer, workspace: Path) -> None:
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make or cc is not installed")
    (workspace / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("built and ran"); return 0; }\n')
    (workspace / "Makefile").write_text("hello: hello.c\n\tcc -o hello hello.c\n")
    ok(turn, server, "make && ./hello", "built and ran")


def test_a_venv_inside_the_workspace(turn: Any, server: FakeServer, workspace: Path) -> None:
    ok(turn, server, f"{PY} -m venv --without-pip .venv && .venv/bin/python -c 'import sys; print(sys.prefix)'",
       str(workspace / ".venv"))
