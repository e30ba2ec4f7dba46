"""MCP configs in the shapes people bring from Claude Code, Claude Desktop and Cursor: a
top-level `mcpServers`, `type: stdio | http | sse`, `${VAR}` expansion; against real servers
(the SDK-written demo server, and server-everything from the npm registry over SSE and
streamable HTTP)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.assemble import build_agent
from nanohermes.config import load_config
from nanohermes.common.events import RecordingUI
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply
from npm_mcp import everything, npm_bin  # noqa: F401

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


def write_user_config(home: Path, data: dict[str, Any]) -> None:
    cfg = home / ".config" / "nanohermes" / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps(data))


def start(workspace: Path) -> tuple[Any, list[str]]:
    loaded = load_config(workspace)
    built = build_agent(loaded.config, workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    return built, loaded.warnings


def test_mcp_servers_at_the_top_with_variables_reach_a_real_server(workspace: Path, home: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_PY", sys.executable)
    monkeypatch.setenv("DEMO_WORD", "expanded")
    monkeypatch.delenv("DEMO_UNSET", raising=False)
    write_user_config(home, {"mcpServers": {"demo": {
        "type": "stdio", "command": "${DEMO_PY}", "args": [DEMO],
        "env": {"DEMO_INSTRUCTIONS": "word=${DEMO_WORD} default=${DEMO_UNSET:-fallback}"}}}})
    built, warnings = start(workspace)
    assert warnings == []

    async def go() -> None:
        async with built.session():
            assert built.mcp is not None
            s = built.mcp.servers["demo"]
            assert s.status == "connected", s.error
            assert s.instructions == "word=expanded default=fallback"
            # What /mcp shows is the config as written: an expanded token never shows there.
            assert built.mcp_lines()[0].endswith(f"(stdio '${{DEMO_PY}}' {DEMO})")

    asyncio.run(go())


def test_an_unset_variable_without_a_default_fails_that_server_naming_it(workspace: Path, home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    write_user_config(home, {"mcpServers": {
        "broken": {"command": sys.executable, "args": [DEMO], "env": {"TOKEN": "${NO_SUCH_TOKEN}"}},
        "fine": {"command": sys.executable, "args": [DEMO]}}})
    built, _ = start(workspace)

    async def go() -> None:
        async with built.session():
            assert built.mcp is not None
            broken, fine = built.mcp.servers["broken"], built.mcp.servers["fine"]
            assert broken.status == "failed"
            assert broken.error == ("${NO_SUCH_TOKEN} in `env.TOKEN` is not set and has no default; set NO_SUCH_TOKEN "
                                    "in the environment, or write ${NO_SUCH_TOKEN:-default}")
            assert fine.status == "connected"

    asyncio.run(go())


def test_mcp_servers_and_mcp_servers_key_both_count(workspace: Path, home: Path) -> None:
    write_user_config(home, {"mcpServers": {"a": {"command": "x"}, "both": {"command": "from-mcpServers"}},
                             "mcp": {"servers": {"b": {"url": "http://127.0.0.1:9/mcp", "type": "http"},
                                                 "both": {"command": "from-mcp"}}}})
    loaded = load_config(workspace)
    assert loaded.warnings == []
    servers = loaded.config.mcp.servers
    assert sorted(servers) == ["a", "b", "both"] and servers["both"].command == "from-mcp"
    assert servers["b"].transport == "http" and servers["a"].transport == "stdio"


@pytest.mark.parametrize(("entry", "message"), [
    ({"type": "sse", "command": "x"}, "a sse server needs `url`"),
    ({"type": "stdio", "url": "http://127.0.0.1:1/"}, "a stdio server needs `command`"),
    ({"type": "websocket", "url": "http://127.0.0.1:1/"}, "mcp.servers.s.type"),
])
def test_a_type_that_does_not_fit_is_an_error_naming_the_key(workspace: Path, home: Path, entry: dict[str, Any],
                                                             message: str) -> None:
    from nanohermes.common.errors import ConfigError

    write_user_config(home, {"mcpServers": {"s": entry}})
    with pytest.raises(ConfigError) as e:
        load_config(workspace)
    assert message in str(e.value)


@pytest.mark.parametrize("transport", ["sse", "streamableHttp"])
def test_server_everything_over_http_transports_through_the_cli(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                npm_bin: Path, transport: str) -> None:
    kind = {"sse": "sse", "streamableHttp": "http"}[transport]
    with everything(npm_bin, transport) as url:
        server.add(tool_reply(call("mcp__everything__echo", {"message": "over " + kind}, id="e")), Reply(text="done"))
        ran = turn("-p", "echo", "--yes", server=server,
                  config={"mcpServers": {"everything": {"type": kind, "url": url}}})
    assert ran.code == 0, ran.err
    tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"mcp__everything__echo", "mcp__everything__get-sum"} <= tools
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert results["e"] == f"Echo: over {kind}"
