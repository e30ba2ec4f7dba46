"""What a refusal by the permission rules says, each message once, through `-p` against the fake
server. The other tests assert the refusal's kind, its subject and the rule; rewording a message
changes one row here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply, call, tool_reply

# (id, the call, the command line's options, config, where the text is: "result" or "denial")
RULES: list[tuple[str, tuple[str, dict[str, Any]], tuple[str, ...], dict[str, Any], str, str]] = [
    ("reads-what-a-rule-denies", ("run_command", {"command": "cat secrets/key.txt"}), ("--yes", "--sandbox", "off"),
     {"permissions": {"deny": ["read_file(secrets/**)"]}}, "result",
     "ERROR: the command reads secrets/key.txt, which rule read_file(secrets/**) denies"),
    ("denied-by-rule", ("read_file", {"path": "secrets/key.txt"}), (),
     {"permissions": {"deny": ["read_file(secrets/**)"]}}, "result", "ERROR: denied by rule read_file(secrets/**)"),
    ("secret-needs-approval", ("edit_file", {"path": ".env", "old_string": "A", "new_string": "B"}), (), {}, "denial",
     "needs approval (.env is on the secret-file list (permissions.secret_files))"),
    ("plan-mode", ("write_file", {"path": "a.txt", "content": "x"}), ("--mode", "plan"), {}, "result",
     "ERROR: write_file is not available in plan mode"),
]


@pytest.mark.parametrize("made,options,config,seen,text", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_a_refusal_says(turn, server: FakeServer, workspace: Path, made: tuple[str, dict[str, Any]],  # type: ignore[no-untyped-def]
                        options: tuple[str, ...], config: dict[str, Any], seen: str, text: str) -> None:
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.txt").write_text("k")
    (workspace / ".env").write_text("A=1\n")
    server.add(tool_reply(call(*made, id="x")), Reply(text="done"))
    ran = turn("-p", "go", "--output-format", "json", *options, server=server, config=config)
    assert ran.code == 0, ran.err
    if seen == "result":
        [out] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    else:
        [out] = [d["reason"] for d in json.loads(ran.out)["permission_denials"]]
    assert out == text
