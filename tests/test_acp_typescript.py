"""`nanohermes acp` driven by the TypeScript SDK's client (`@agentclientprotocol/sdk` from npm,
pinned by tests/acp_ts/package-lock.json): the editors' own library reads every answer and
update it sends, asks its permission and serves its files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from acp_support import env_for, ts_client
from nanohermes.testing import FakeServer, Reply, call, tool_reply


def test_the_typescript_client_runs_a_session_with_a_read_an_approved_edit_and_a_plan(
        workspace: Path, server: FakeServer) -> None:
    client = ts_client()
    hello = workspace / "hello.py"
    hello.write_text("print('helo')\n")
    server.add(tool_reply(call("read_file", {"path": "hello.py"}),
                          call("todo_write", {"todos": [{"content": "fix the typo", "status": "in_progress"}]})),
               tool_reply(call("edit_file", {"path": "hello.py", "old_string": "helo", "new_string": "hello"})),
               Reply(text="Fixed.", reasoning="a typo"))
    agent = [sys.executable, "-m", "nanohermes", "acp", "--base-url", server.base_url, "--model", "fake-model"]
    p = subprocess.run(["node", str(client), str(workspace), *agent], capture_output=True, text=True, cwd=workspace,
                       env=env_for(server), timeout=120)
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert seen["code"] == 0  # the agent left when its stdin closed
    assert seen["init"]["protocolVersion"] == 1 and seen["init"]["agentInfo"]["name"] == "nanohermes"
    assert seen["prompt"]["stopReason"] == "end_turn"
    assert hello.read_text() == "print('hello')\n"
    assert set(seen["reads"]) == {str(hello)} and seen["writes"] == [str(hello)]  # the buffer, before each step
    (asked,) = seen["asked"]
    assert asked["toolCall"]["kind"] == "edit"
    assert [o["kind"] for o in asked["options"]] == ["allow_once", "allow_always", "reject_once"]
    kinds = [u["sessionUpdate"] for u in seen["updates"]]
    assert {"available_commands_update", "tool_call", "tool_call_update", "plan", "agent_thought_chunk",
            "agent_message_chunk"} <= set(kinds)
    text = "".join(u["content"]["text"] for u in seen["updates"] if u["sessionUpdate"] == "agent_message_chunk")
    assert text == "Fixed."
    diffs = [c for u in seen["updates"] if u["sessionUpdate"] == "tool_call_update" for c in u.get("content") or []
             if c["type"] == "diff"]
    assert diffs == [{"type": "diff", "path": str(hello), "oldText": "print('helo')\n", "newText": "print('hello')\n"}]
    (plan,) = [u for u in seen["updates"] if u["sessionUpdate"] == "plan"]
    assert plan["entries"] == [{"content": "fix the typo", "status": "in_progress", "priority": "high"}]
