"""Files nanohermes writes: folders 0700 and files 0600 under umask 022, owned by the user,
and no key in a memory or a sub-agent's result."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from nanohermes.common.dirs import data_home, state_home
from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent
DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")
KEY = "sk-test-0123456789abcdef"


def modes(root: Path) -> dict[str, tuple[str, int]]:
    """Every folder and file under `root` (root included): (kind and mode, owner uid)."""
    out = {".": (oct(root.stat().st_mode & 0o777), root.stat().st_uid)}
    for path in root.rglob("*"):
        st = path.lstat()
        kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
        out[str(path.relative_to(root))] = (f"{kind} {oct(st.st_mode & 0o777)}", st.st_uid)
    return out


def run_under_umask_022(workspace: Path, server: FakeServer, config: dict[str, object], *args: str) -> str:
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": KEY}
    argv = [sys.executable, "-m", "nanohermes", "--base-url", server.base_url, "--model", "m", "--yes", *args]
    p = subprocess.run(["sh", "-c", 'umask 022; exec "$@"', "sh", *argv], cwd=workspace, env=env,
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_every_file_written_is_private_and_holds_no_key(workspace: Path, server: FakeServer) -> None:
    (workspace / "big.txt").write_text("line of text\n" * 400)
    server.add(
        tool_reply(call("subagent", {"agent": "helper", "task": "find the key", "wait": True})),
        Reply(text=f"the key is {KEY}"),  # the sub-agent's answer
        tool_reply(call("memory_save", {"text": f"the API key is {KEY}"}), call("run_command", {"command": "cat big.txt"}),
                   call("mcp__demo__echo", {"text": "hi"})),
        Reply(text="done"),
    )
    config = {"subagents": {"helper": {"description": "helps", "tools": ["read_file"]}},
              "aggregate_budget_chars": 100, "mcp": {"servers": {"demo": {"command": sys.executable, "args": [DEMO]}}}}
    run_under_umask_022(workspace, server, config, "-p", "go")

    data, state = data_home(), state_home()
    written = {**{f"data/{k}": v for k, v in modes(data).items()}, **{f"state/{k}": v for k, v in modes(state).items()}}
    uid = os.getuid()
    assert {owner for _, owner in written.values()} == {uid}
    kinds = {k: v[0] for k, v in written.items()}
    assert kinds["data/."] == kinds["state/."] == "0o700"
    for name, mode in kinds.items():
        if name.endswith("/."):
            continue
        if "/checkpoints/" in name and "/git/objects/" in name and mode.startswith("file"):
            assert mode == "file 0o400", (name, mode)  # git makes its objects read-only
            continue
        assert mode == ("dir 0o700" if mode.startswith("dir") else "file 0o600"), (name, mode)
    names = sorted(kinds)
    # What this run wrote: the transcript, a persisted result, the sub-agent's result, the
    # memory store and the MCP server's log.
    assert any(n.endswith(".jsonl") for n in names)
    assert any("/tool-results/" in n for n in names), names
    assert any("/agents/" in n and n.endswith(".md") for n in names)
    assert "data/memory.db" in names and "state/mcp/demo.log" in names
    assert any(n.startswith("data/checkpoints/") and "/git/objects/" in n for n in names)  # the shadow store
    assert any(n.endswith("/checkpoints.jsonl") for n in names)

    # No key anywhere on disk: not in the memory store, not in the sub-agent's result.
    for root in (data, state):
        for path in root.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
    [agent_file] = list(data.rglob("agents/*.md"))
    assert agent_file.read_text() == "the key is [REDACTED]"
    with sqlite3.connect(data / "memory.db") as conn:
        assert conn.execute("SELECT text FROM memories").fetchall() == [("the API key is [REDACTED]",)]
    # The model was told what was stored.
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert any("Remembered (#1" in r and "[REDACTED]" in r and KEY not in r for r in results)


def test_existing_loose_folders_and_store_are_tightened(workspace: Path, server: FakeServer) -> None:
    data = data_home()
    data.mkdir(parents=True)
    os.chmod(data, 0o755)
    (data / "memory.db").touch()
    os.chmod(data / "memory.db", 0o644)
    server.add(tool_reply(call("memory_save", {"text": "the tests run with make check"})), Reply(text="done"))
    run_under_umask_022(workspace, server, {}, "-p", "go")
    assert data.stat().st_mode & 0o777 == 0o700
    assert (data / "memory.db").stat().st_mode & 0o777 == 0o600


def test_an_mcp_servers_log_is_redacted(workspace: Path, server: FakeServer) -> None:
    token = "given-by-config-0123456789"
    servers = {
        "demo": {"command": "sh", "args": ["-c", f'echo "starting with $DEMO_TOKEN" >&2; exec "{sys.executable}" "{DEMO}"'],
                 "env": {"DEMO_TOKEN": token}},
        "broken": {"command": "sh", "args": ["-c", 'echo "failing with $DEMO_TOKEN" >&2; exit 1'],
                   "env": {"DEMO_TOKEN": token}},
    }
    server.add(tool_reply(call("mcp__demo__echo", {"text": "hi"})), Reply(text="done"))
    err = run_under_umask_022(workspace, server, {"mcp": {"servers": servers}}, "-p", "go")
    demo = (state_home() / "mcp" / "demo.log").read_text()
    broken = (state_home() / "mcp" / "broken.log").read_text()
    assert "starting with [REDACTED]\n" in demo and token not in demo
    assert "failing with [REDACTED]\n" in broken and token not in broken
    assert "its stderr ends with: failing with [REDACTED]" in err and token not in err
    for log in ("demo.log", "broken.log"):
        assert (state_home() / "mcp" / log).stat().st_mode & 0o777 == 0o600
