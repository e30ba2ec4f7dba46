"""What spawned processes inherit: commands, background tasks and MCP servers get none of
nanohermes's keys nor any credential-named variable, unless the user's shell_env.keep lists it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.config import project_config_path
from nanohermes.testing import FakeServer, Reply, call, tool_reply

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")
SECRETS = {"OPENAI_API_KEY": "sk-openai-0123456789", "MY_MODEL_KEY": "sk-mine-0123456789",
           "GITHUB_TOKEN": "ghp_0123456789abcdef", "DB_PASSWORD": "hunter2hunter2", "STRIPE_SECRET": "sec-0123456789",
           "AWS_SECRET_ACCESS_KEY": "aws-0123456789", "BRAVE": "brave-0123456789"}
PLAIN = {"HARMLESS_SETTING": "1", "TOKENIZERS_PARALLELISM": "false"}
BASE = {"api_key_env": "MY_MODEL_KEY", "web_search": {"brave_api_key_env": "BRAVE"}}


def names(path: Path) -> set[str]:
    return {line.split("=", 1)[0] for line in path.read_text().splitlines() if "=" in line}


def run_env_command(turn: Any, server: FakeServer, workspace: Path, config: dict[str, Any],
                    command: str = "env > env.txt", background: bool = False) -> set[str]:
    args: dict[str, Any] = {"command": command}
    if background:
        args["background"] = True
        # The run kills its background tasks when it ends: the turn waits (in a command of its
        # own) for the task to have written its file, however slow the machine is.
        server.add(tool_reply(call("run_command", args)),
                   tool_reply(call("run_command", {"command": "until [ -e env.txt ]; do sleep 0.05; done"})))
    else:
        server.add(tool_reply(call("run_command", args)))
    server.add(Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server, config={**BASE, **config}, env={**SECRETS, **PLAIN})
    assert r.code == 0, r.err
    return names(workspace / "env.txt")


def test_a_command_gets_no_key_variables(turn: Any, server: FakeServer, workspace: Path) -> None:
    got = run_env_command(turn, server, workspace, {})
    assert not got & set(SECRETS)
    assert set(PLAIN) <= got and "PATH" in got and "HOME" in got


def test_shell_env_keep_passes_the_named_variables(turn: Any, server: FakeServer, workspace: Path) -> None:
    got = run_env_command(turn, server, workspace, {"shell_env": {"keep": ["GITHUB_TOKEN", "MY_MODEL_KEY"]}})
    assert got & set(SECRETS) == {"GITHUB_TOKEN", "MY_MODEL_KEY"}


def test_a_project_may_only_shorten_keep(turn: Any, server: FakeServer, workspace: Path) -> None:
    project_config_path(workspace).parent.mkdir()
    project_config_path(workspace).write_text(json.dumps({"shell_env": {"keep": ["GITHUB_TOKEN", "DB_PASSWORD"]}}))
    got = run_env_command(turn, server, workspace, {"shell_env": {"keep": ["GITHUB_TOKEN", "MY_MODEL_KEY"]}})
    assert got & set(SECRETS) == {"GITHUB_TOKEN"}


def test_a_background_task_gets_no_key_variables(turn: Any, server: FakeServer, workspace: Path) -> None:
    got = run_env_command(turn, server, workspace, {}, command="env > env.tmp && mv env.tmp env.txt",
                          background=True)
    assert not got & set(SECRETS) and "HARMLESS_SETTING" in got


@pytest.mark.parametrize("keep", [[], ["GITHUB_TOKEN"]])
def test_an_mcp_server_gets_its_configured_env_and_nothing_secret(turn: Any, server: FakeServer, workspace: Path,
                                                                  keep: list[str]) -> None:
    dump = workspace / "mcp-env.txt"
    servers = {"demo": {"command": "sh", "args": ["-c", f'env > "{dump}"; exec "{sys.executable}" "{DEMO}"'],
                        "env": {"DEMO_SETTING": "on", "DEMO_TOKEN": "given-by-config-123"}}}
    server.add(tool_reply(call("mcp__demo__echo", {"text": "hi"})), Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server, config={**BASE, "mcp": {"servers": servers}, "shell_env": {"keep": keep}},
            env={**SECRETS, **PLAIN})
    assert r.code == 0, r.err
    got = names(dump)
    assert {"DEMO_SETTING", "DEMO_TOKEN", "PATH"} <= got  # what its config names, and the SDK's safe few
    assert got & set(SECRETS) == set(keep)
    assert "HARMLESS_SETTING" not in got
