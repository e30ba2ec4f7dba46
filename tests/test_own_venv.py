"""nanohermes's own venv never stands in front of the person's programs in the commands it
runs: run from a venv that is on PATH and activated (as a clone's `.venv` put on PATH is), a
command's `python3` is the person's, not nanohermes's. Real nanohermes processes against the
loopback fake server; the command runs in the real sandbox."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply, call, tool_reply

pytestmark = pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the suite runs from no venv of its own")

PRINT_PREFIX = "python3 -c 'import os, sys; print(os.path.realpath(sys.prefix), os.environ.get(\"VIRTUAL_ENV\"))'"


def persons_python(folder: Path) -> Path:
    """A folder whose python3 is the person's own (the interpreter the venv was made from)."""
    folder.mkdir()
    (folder / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    return folder


def printed(cli: Any, server: FakeServer, cwd: Path | None = None, **config: Any) -> list[str]:
    """What the command printed: the prefix of the python3 it ran, and its VIRTUAL_ENV."""
    server.add(tool_reply(call("run_command", {"command": PRINT_PREFIX}, id="c1")), Reply(text="done"))
    own_bin = Path(sys.executable).parent
    env = {"PATH": os.pathsep.join([str(own_bin), os.environ["PERSONS_BIN"], "/usr/bin", "/bin"]),
           "VIRTUAL_ENV": sys.prefix}  # nanohermes's venv, activated
    r = cli("-p", "which python?", "--yes", server=server, env=env, cwd=cwd, config=config or None)
    assert r.code == 0, r.err
    result = next(m["content"] for m in server.requests[1]["messages"] if m.get("tool_call_id") == "c1")
    lines = result.splitlines()
    return lines[lines.index("stdout:") + 1].split()


def test_a_command_runs_the_persons_python_not_nanohermess(cli: Any, server: FakeServer, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSONS_BIN", str(persons_python(tmp_path / "persons-bin")))
    prefix, virtual_env = printed(cli, server)
    assert prefix == os.path.realpath(sys.base_prefix) != os.path.realpath(sys.prefix)
    assert virtual_env == "None"


def test_a_venv_inside_the_workspace_stays_the_workspaces_own(cli: Any, server: FakeServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # nanohermes installed in the project's own venv (or a clone of it worked on): the venv stays.
    monkeypatch.setenv("PERSONS_BIN", str(persons_python(tmp_path / "persons-bin")))
    prefix, virtual_env = printed(cli, server, cwd=Path(sys.prefix).parent, checkpoints=False)
    assert prefix == os.path.realpath(sys.prefix)
    assert virtual_env == sys.prefix


def test_the_persons_hooks_and_mcp_servers_run_the_persons_python_too(cli: Any, server: FakeServer, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Programs nanohermes starts for the person obey what its commands obey: a hook written as
    # `python3 check.py`, an MCP server started by a shell script, find the person's python3.
    monkeypatch.setenv("PERSONS_BIN", str(persons_python(tmp_path / "persons-bin")))
    hook_out, server_out = tmp_path / "hook.txt", tmp_path / "server.txt"

    def record(out: Path) -> str:
        return f"python3 -c 'import os, sys; open(\"{out}\", \"w\").write(os.path.realpath(sys.prefix))'"

    demo = Path(__file__).parent / "mcp" / "demo_server.py"
    config = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": record(hook_out)}]}]},
              "mcpServers": {"demo": {"command": "sh", "args": ["-c", f"{record(server_out)}; exec {sys.executable} {demo}"]}}}
    server.add(Reply(text="done"))
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PERSONS_BIN"], "/usr/bin", "/bin"]),
           "VIRTUAL_ENV": sys.prefix}
    r = cli("-p", "hi", server=server, env=env, config=config)
    assert r.code == 0, r.err
    assert "mcp__demo__echo" in [t["function"]["name"] for t in server.requests[0]["tools"]]  # the server ran
    assert hook_out.read_text() == server_out.read_text() == os.path.realpath(sys.base_prefix)
