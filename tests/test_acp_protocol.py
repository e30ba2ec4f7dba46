"""`nanohermes acp` as a process on a pipe: bad input answered and survived, stdout holding only
protocol messages, the editor's MCP servers, and nothing left running once stdin closes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


from acp_support import REPO, Editor, agent, env_for, s
from nanohermes.testing import FakeServer, Reply, call, tool_reply

DEMO = str(REPO / "tests" / "mcp" / "demo_server.py")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent is gone in every way that matters here
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_bad_input_gets_its_json_rpc_error_and_the_agent_keeps_serving(workspace: Path, server: FakeServer) -> None:
    """Hand-written lines: what no SDK would send."""
    lines = [
        "this is not json",
        '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}',
        "[1, 2, 3]",
        '{"jsonrpc": "2.0", "id": 2, "method": "no/such/method", "params": {}}',
        '{"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": 42}}',
        '{"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "relative/path", "mcpServers": []}}',
        '{"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": "nope", "prompt": []}}',
        '{"jsonrpc": "2.0", "id": 6, "method": "session/set_mode", "params": {"sessionId": "nope", "modeId": "plan"}}',
        '{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}}',
        '{"jsonrpc": "2.0", "id": 7, "no": "method"}',
        json.dumps({"jsonrpc": "2.0", "id": 8, "method": "session/new",
                    "params": {"cwd": str(workspace), "mcpServers": []}}),
        # An MCP server with a typo, or of a type nobody connects to: said, never left out unsaid.
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": [
            {"name": "typo", "comand": "srv", "args": [], "env": []}]}}),
        json.dumps({"jsonrpc": "2.0", "id": 10, "method": "session/load", "params": {
            "cwd": str(workspace), "sessionId": "x", "mcpServers": [{"type": "websocket", "name": "ws", "url": "ws://x"}]}}),
        '{"broken": ',
    ]
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "nanohermes", "acp", "--base-url", server.base_url, "--model",
                        "fake-model"], input="\n".join(lines) + "\n", capture_output=True, text=True, cwd=workspace,
                       env=env_for(server), timeout=60)
    took = time.monotonic() - started
    assert p.returncode == 0, p.stderr
    assert took < 30
    answers = [json.loads(line) for line in p.stdout.splitlines()]
    by_id = {a["id"]: a for a in answers if a.get("id") is not None and "method" not in a}
    nulls = [a["error"]["code"] for a in answers if "id" in a and a["id"] is None]
    assert nulls == [-32700, -32600, -32700]  # the text, the batch, the cut-off object
    assert by_id[1]["result"]["protocolVersion"] == 1
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3]["error"]["code"] == -32602
    assert by_id[4]["error"]["code"] == -32602
    assert by_id[5]["error"]["code"] == -32002 and by_id[6]["error"]["code"] == -32002
    assert by_id[7]["error"]["code"] == -32600
    assert by_id[8]["result"]["sessionId"]  # still serving after all of it
    typo, websocket = by_id[9]["error"], by_id[10]["error"]
    assert typo["code"] == -32602 and "'typo'" in typo["message"] and "command" in typo["message"]
    assert websocket["code"] == -32602 and "'websocket'" in websocket["message"]


def test_a_client_with_another_protocol_version_gets_the_one_there_is(workspace: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "nanohermes", "acp"], capture_output=True, text=True, cwd=workspace,
                       input='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":7}}\n',
                       env=env_for(None), timeout=60)
    assert p.returncode == 0
    (answer,) = [json.loads(line) for line in p.stdout.splitlines()]
    assert answer["result"]["protocolVersion"] == 1
    # No clientCapabilities: no fs and no terminal, so the agent reads and writes the disk itself.


def test_stdout_holds_only_protocol_messages_while_everything_else_is_noisy(workspace: Path, home: Path,
                                                                          server: FakeServer, tmp_path: Path) -> None:
    config = home / ".config" / "nanohermes" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"no_such_key": 1}))  # a warning
    noisy = "for i in $(seq 1 300); do echo out-$i; echo err-$i >&2; done; printf '\\033[2J\\a'"
    server.add(tool_reply(call("run_command", {"command": noisy})),
               tool_reply(call("mcp__loud__echo", {"text": "hi"})), Reply(text="quiet now"))
    loud = s.McpServerStdio(name="loud", command="sh", args=["-c", f"echo from-mcp-stderr >&2; exec {sys.executable} "
                                                                   f"{DEMO}"], env=[])
    editor = Editor(answers=["allow_once", "allow_once"])

    async def scenario() -> tuple[list[bytes], str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[loud])
            fd1 = os.readlink(f"/proc/{a.process.pid}/fd/1")
            reason = await a.ask(new.session_id, "be noisy")
            assert reason == "end_turn"
            return a.lines, fd1

    lines, fd1 = run(scenario())
    assert fd1 == str(tmp_path / "err")  # fd 1 of the process is stderr: only the protocol's own copy is stdout
    for line in lines:
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0" and line.endswith(b"\n") and line.count(b"\n") == 1
    err = (tmp_path / "err").read_text()
    assert "no_such_key" in err
    assert editor.said().endswith("quiet now")
    out = editor.calls()
    assert "out-300" in next(iter(out.values()))["content"][-1]["content"]["text"]


def test_no_message_carries_a_key_but_the_text_of_a_file_the_editor_writes(workspace: Path, server: FakeServer,
                                                                            tmp_path: Path) -> None:
    key = "sk-live-0123456789-abcdefghij"
    (workspace / "notes.txt").write_text(f"the key is {key}\n")
    server.add(tool_reply(call("read_file", {"path": "notes.txt"}), call("run_command", {"command": f"echo {key}"})),
               tool_reply(call("write_file", {"path": "keep.txt", "content": f"key={key}\n"})),
               Reply(text=f"It is {key}, said twice: {key}.", reasoning=f"The file holds {key} in it.", chunk_size=3))
    editor = Editor(answers=["allow_once"])

    async def scenario() -> list[bytes]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err",
                         env={**env_for(server), "OPENAI_API_KEY": key}) as a:
            _, sid = await a.start(workspace, editor_fs=True)
            assert await a.ask(sid, "what is the key?") == "end_turn"
            return a.lines

    lines = run(scenario())
    assert key in tool_results_of(server, 1)[1]  # the model reads what the command printed
    leaks = [line for line in lines if key.encode() in line]
    assert [json.loads(line)["method"] for line in leaks] == ["fs/write_text_file"]
    # Streamed pieces: no piece holds the whole key, and their text does not either.
    assert key not in editor.thought() and "[REDACTED]" in editor.thought()
    assert editor.said() == "It is [REDACTED], said twice: [REDACTED]."
    (asked, _), = editor.asked  # the write, on its diff
    assert [c.new_text for c in asked.content or [] if c.type == "diff"] == ["key=[REDACTED]\n"]
    echo = next(c for c in editor.calls().values() if c["kind"] == "execute")
    assert echo["title"] == "run_command: echo [REDACTED]" and key not in json.dumps(echo)
    assert (workspace / "keep.txt").read_text() == f"key={key}\n"  # the file is the model's, exactly


def tool_results_of(server: FakeServer, n: int) -> list[str]:
    return [m["content"] for m in server.requests[n]["messages"] if m["role"] == "tool"]


def test_the_editors_mcp_servers_are_offered_from_the_first_request_and_stopped_at_exit(
        workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    server.add(tool_reply(call("mcp__demo__pid", {})),
               tool_reply(call("run_command", {"command": "echo $$ > task.pid; exec sleep 60", "background": True})),
               Reply(text="done"))
    demo = s.McpServerStdio(name="demo", command=sys.executable, args=[DEMO],
                            env=[s.EnvVariable(name="DEMO_INSTRUCTIONS", value="Demo says hello from its env.")])
    editor = Editor(answers=["allow_once", "allow_once"])
    started = time.monotonic()

    async def scenario() -> tuple[int, float]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[demo])
            assert await a.ask(new.session_id, "who are you") == "end_turn"
            while not (workspace / "task.pid").exists() or not (workspace / "task.pid").read_text().strip():
                await asyncio.sleep(0.05)
            agent_pid = a.process.pid
        return agent_pid, time.monotonic()

    agent_pid, closed_at = run(scenario())
    assert closed_at - started < 60
    first = server.requests[0]
    names = [t["function"]["name"] for t in first["tools"]]
    assert "mcp__demo__echo" in names and "mcp__demo__pid" in names
    assert "Demo says hello from its env." in first["messages"][0]["content"]
    mcp_pid = int(server.requests[1]["messages"][-1]["content"].split()[0].strip(",:"))
    task_pid = int((workspace / "task.pid").read_text())
    assert not alive(agent_pid) and not alive(mcp_pid) and not alive(task_pid)


def test_sigterm_closes_the_sessions_and_exits_143(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    demo = s.McpServerStdio(name="demo", command=sys.executable, args=[DEMO], env=[])
    server.add(tool_reply(call("mcp__demo__pid", {})), Reply(text="ok"))
    editor = Editor(answers=["allow_once"])

    async def scenario() -> tuple[int, int]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[demo])
            await a.ask(new.session_id, "pid")
            a.process.terminate()
            code = await asyncio.wait_for(a.process.wait(), 20)
        return code, int(server.requests[1]["messages"][-1]["content"].split()[0].strip(",:"))

    code, mcp_pid = run(scenario())
    assert code == 143
    assert not alive(mcp_pid)


def test_sessions_in_two_folders_never_run_a_program_either_folder_could_write(tmp_path: Path, server: FakeServer) -> None:
    """The first folder's `bin/git` is first on PATH; a session in a second folder must not
    take it for nanohermes's own git (its git_status, its checkpoints), as the first must not."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    mark = tmp_path / "ran"
    (first / "bin").mkdir()
    fake = first / "bin" / "git"
    fake.write_text(f"#!/bin/sh\necho planted >> {mark}\nexit 1\n")
    fake.chmod(0o755)
    server.add(tool_reply(call("git_status", {})), Reply(text="status"))
    editor = Editor()
    env = env_for(server, PATH=f"{first / 'bin'}{os.pathsep}{os.environ['PATH']}")

    async def scenario() -> str:
        async with agent(editor, first, server, stderr=tmp_path / "err", env=env) as a:
            await a.conn.initialize(protocol_version=1)
            await a.conn.new_session(cwd=str(first), mcp_servers=[])
            new = await a.conn.new_session(cwd=str(second), mcp_servers=[])
            return await a.ask(new.session_id, "status?")

    assert run(scenario()) == "end_turn"
    assert not mark.exists()


def test_the_editors_http_and_sse_servers_are_reached_with_their_headers(workspace: Path, server: FakeServer,
                                                                          tmp_path: Path) -> None:
    import npm_mcp

    bin_dir = npm_mcp.install()
    proc = subprocess.Popen([sys.executable, DEMO, "--http"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("PORT "), line
        http = s.HttpMcpServer(type="http", name="web", url=f"http://127.0.0.1:{int(line.split()[1])}/mcp",
                               headers=[s.HttpHeader(name="X-Editor", value="zed")])
        with npm_mcp.everything(bin_dir, "sse") as sse_url:
            sse = s.SseMcpServer(type="sse", name="every", url=sse_url, headers=[])
            server.add(tool_reply(call("mcp__web__header", {"name": "X-Editor"})),
                       tool_reply(call("mcp__every__echo", {"message": "over sse"})), Reply(text="both"))
            editor = Editor(answers=["allow_once", "allow_once"])

            async def scenario() -> str:
                async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
                    await a.conn.initialize(protocol_version=1)
                    new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[http, sse])
                    return await a.ask(new.session_id, "headers")

            assert run(scenario()) == "end_turn"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    names = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert "mcp__web__header" in names and "mcp__every__echo" in names
    assert "zed" in server.requests[1]["messages"][-1]["content"]
    assert "over sse" in server.requests[2]["messages"][-1]["content"]


def test_a_folder_whose_config_is_wrong_is_refused_with_the_error_and_its_hint(workspace: Path, tmp_path: Path,
                                                                              server: FakeServer) -> None:
    from acp import RequestError

    bad = workspace / ".nanohermes" / "config.json"
    bad.parent.mkdir()
    bad.write_text('{"max_turns": "many"}')
    good = tmp_path / "good"
    good.mkdir()
    editor = Editor()

    async def scenario() -> tuple[RequestError, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            try:
                await a.conn.new_session(cwd=str(workspace), mcp_servers=[])
            except RequestError as e:
                error = e
            new = await a.conn.new_session(cwd=str(good), mcp_servers=[])
            return error, new.session_id

    error, other = run(scenario())
    assert error.code == -32603 and "max_turns" in str(error) and str(bad) in str(error)
    assert isinstance(error.data, dict) and error.data.get("hint")
    assert other  # the agent serves the next folder
