"""Sub-agents from Claude Code's agent files (`.claude/agents/*.md`, `~/.claude/agents/*.md`),
through `-p` and the fake server: offered with their tool lists mapped to nanohermes's tools,
held to those tools, a project's only in a trusted project, their `model` looked up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nanohermes.testing import FakeServer, Reply, call, tool_reply

READER = ("---\nname: code-reader\ndescription: Reads code and reports what it found\ntools: Read, Grep\n"
          "model: sonnet\ncolor: blue\n---\nYou only read. Report file names and line numbers.")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def trusting(ws: Path, **more: Any) -> dict[str, Any]:
    return {"trusted_projects": [str(ws)], **more}


def test_an_agent_with_a_restricted_tool_list_cannot_use_another_tool(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                      workspace: Path) -> None:
    write(workspace / ".claude" / "agents" / "code-reader.md", READER)
    write(workspace / "a.py", "x = 1\n")
    server.add(tool_reply(call("subagent", {"agent": "code-reader", "task": "look at a.py", "wait": True})),
               tool_reply(call("write_file", {"path": "pwned.txt", "content": "x"}),
                          call("run_command", {"command": "touch ran.txt"}),
                          call("read_file", {"path": "a.py"})),
               Reply(text="child: read it"), Reply(text="parent: done"))
    # --yes: were the tools offered, these calls would run; the tool list alone holds them.
    ran = turn("-p", "go", "--yes", server=server, config=trusting(workspace))
    assert ran.code == 0 and ran.out.strip() == "parent: done", ran.err
    assert not (workspace / "pwned.txt").exists() and not (workspace / "ran.txt").exists()
    parent, child, child_after = server.requests[0], server.requests[1], server.requests[2]
    spec = next(t["function"] for t in parent["tools"] if t["function"]["name"] == "subagent")
    assert spec["parameters"]["properties"]["agent"]["enum"] == ["code-reader"]
    assert "code-reader: Reads code and reports what it found" in spec["description"]
    assert tool_names(child) == ["grep", "read_file"]
    assert READER.split("---\n")[-1].strip() in child["messages"][0]["content"]  # the file's body is its role
    results = [m["content"] for m in child_after["messages"] if m["role"] == "tool"]
    assert results[0].startswith("ERROR: unknown tool `write_file`;") and results[0].endswith(": grep, read_file")
    assert results[1].startswith("ERROR: unknown tool `run_command`")
    assert results[2] == "1\tx = 1"
    assert child["model"] == "fake-model"  # `sonnet` with no alias: the configured model
    assert "sub-agent code-reader: model 'sonnet' ignored" in ran.err


def test_an_untrusted_projects_agents_are_not_offered_and_are_named(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                    workspace: Path) -> None:
    write(workspace / ".claude" / "agents" / "code-reader.md", READER)
    write(workspace / ".claude" / "agents" / "writer.md", "---\nname: writer\ndescription: Writes\n---\nWrite.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "go", server=server)
    assert ran.code == 0, ran.err
    assert "subagent" not in tool_names(server.requests[0])
    [said] = [line for line in ran.err.splitlines() if f"{workspace / '.claude' / 'agents'}: " in line]
    assert "(code-reader, writer)" in said and f'"{workspace.resolve()}"' in said and "trusted_projects" in said


def test_a_users_agent_is_offered_in_any_project_on_its_aliased_model(turn, workspace: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "agents" / "code-reader.md", READER)
    with FakeServer(models=("fake-model", "mid-model")) as server:
        server.add(tool_reply(call("subagent", {"agent": "code-reader", "task": "look", "wait": True})),
                   Reply(text="child: nothing"), Reply(text="parent: done"))
        ran = turn("-p", "go", server=server, config={"model_aliases": {"sonnet": "mid-model"}})
        assert ran.code == 0, ran.err
        assert [r["model"] for r in server.requests] == ["fake-model", "mid-model", "fake-model"]
        assert "ignored" not in ran.err


def test_an_agents_model_the_endpoint_refuses_falls_back_to_the_configured_one(turn, home: Path) -> None:  # type: ignore[no-untyped-def]
    from nanohermes.testing import Fault

    write(home / ".claude" / "agents" / "helper.md", "---\ndescription: Helps\nmodel: gpt-4o-mini\n---\nHelp.")

    def serve(body: dict[str, Any]) -> Any:
        if body["model"] != "fake-model":
            return Fault(status=404, message=f"The model `{body['model']}` does not exist", code="model_not_found")
        return script.pop(0)

    script = [tool_reply(call("subagent", {"agent": "helper", "task": "help", "wait": True})),
              Reply(text="child: helped"), Reply(text="parent: done")]
    with FakeServer([serve] * 4, models_answer=Fault(status=404)) as server:
        ran = turn("-p", "go", server=server)
        assert ran.code == 0 and ran.out.strip() == "parent: done", ran.err
        assert [r["model"] for r in server.requests] == ["fake-model", "gpt-4o-mini", "fake-model", "fake-model"]
        assert "sub-agent helper: " in ran.err and " model `gpt-4o-mini`" in ran.err
        assert "child: helped" in str(server.requests[3]["messages"])


def test_claude_and_nanohermes_tool_names_and_what_does_not_exist(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                                  home: Path) -> None:
    write(home / ".claude" / "agents" / "runner.md",
          "---\ndescription: Runs the tests\ntools:\n  - Bash\n  - list_dir\n  - NotebookRead\n---\nRun them.")
    server.add(tool_reply(call("subagent", {"agent": "runner", "task": "run", "wait": True})),
               Reply(text="child: ran"), Reply(text="parent: done"))
    ran = turn("-p", "go", server=server)
    assert ran.code == 0, ran.err
    # The name is the file's when the front matter gives none; Bash is run_command, and the git
    # tools (Claude Code runs git through its shell).
    assert tool_names(server.requests[1]) == ["git_commit", "git_diff", "git_log", "git_status", "list_dir",
                                              "run_command"]
    assert "sub-agent runner lists tools " in ran.err and ": NotebookRead;" in ran.err


def test_an_agent_file_that_cannot_be_read_is_named(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write(home / ".claude" / "agents" / "odd.md", "---\nname: odd\nthis is no key\n---\nBody.")
    write(home / ".claude" / "agents" / "bad name.md", "---\nname: bad name\ndescription: x\n---\nBody.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "go", server=server)
    assert ran.code == 0, ran.err
    assert "subagent" not in tool_names(server.requests[0])
    [odd] = [line for line in ran.err.splitlines() if f"{path}: " in line]
    assert "not offered" in odd and " line 3 " in odd and "'this is no key'" in odd, odd
    assert "sub-agent name 'bad name' " in ran.err and "; not offered" in ran.err


def test_a_config_sub_agent_wins_a_name_clash_with_a_file(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write(home / ".claude" / "agents" / "explore.md", "---\ndescription: From the file\n---\nFile.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "go", server=server, config={"subagents": {"explore": {"description": "From the config"}}})
    assert ran.code == 0, ran.err
    spec = next(t["function"] for t in server.requests[0]["tools"] if t["function"]["name"] == "subagent")
    assert "explore: From the config" in spec["description"] and "From the file" not in spec["description"]
    [clash] = [line for line in ran.err.splitlines() if f"{path}: " in line]
    assert "sub-agent explore " in clash and "(subagents)" in clash and clash.endswith("; not offered"), clash


def test_an_agent_file_reaching_outside_waits_for_a_yes_then_joins(server: FakeServer, workspace: Path,
                                                                    tmp_path: Path) -> None:
    """A trusted project's agent file linked outside the workspace is read only after a
    person's yes, asked before the first prompt is sent; then it is offered."""
    import asyncio

    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import ApprovalRequest, RecordingUI

    shared = write(tmp_path / "shared" / "scout.md", "---\ndescription: Scouts\n---\nLook around.")
    (workspace / ".claude" / "agents").mkdir(parents=True)
    (workspace / ".claude" / "agents" / "scout.md").symlink_to(shared)
    server.add(Reply(text="ok"))
    ui = RecordingUI(answers=["once"])
    config = Config(base_url=server.base_url, api_key="k", model="fake-model", checkpoints=False,
                    trusted_projects=[str(workspace)])
    built = build_agent(config, workspace, ui, save_session=False, asks=True)
    assert built.subagents is None  # nothing read yet: the file waits for the question

    async def session() -> None:
        async with built.session() as agent:
            await agent.ask("hi")

    asyncio.run(session())
    [question] = ui.of(ApprovalRequest)
    assert question.summary == str(shared) and "(agent file)" in question.detail
    assert "subagent" in tool_names(server.requests[0])


def test_a_long_description_is_cut_in_the_tool_description(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "agents" / "long.md",
          "---\ndescription: Use this agent when the tests fail.\\n\\nExamples: a b c d e\n---\nBody.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "go", server=server, config={"limits": {"agent_description_chars": 20}})
    assert ran.code == 0, ran.err
    spec = next(t["function"] for t in server.requests[0]["tools"] if t["function"]["name"] == "subagent")
    assert spec["description"].endswith(" Sub-agents: long: Use this agent when… (38 more chars).")
