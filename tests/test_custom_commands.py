"""Custom slash commands from Markdown files: discovery, expansion, attachments, the REPL and -p."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from prompt_toolkit.document import Document
from rich.console import Console

from nanohermes.turn.agent import Agent
from nanohermes.config import Config
from nanohermes.extensions.custom_commands import CustomCommand, discover, expand
from nanohermes.common.events import RecordingUI
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.extensions.custom_commands import INIT_PROMPT
from nanohermes.testing import FakeServer, Reply, ScriptedLLM
from nanohermes.tools.files import ListDir, ReadFile
from nanohermes.ui.commands import CommandContext, Registry
from nanohermes.ui.extensions import install_custom_commands
from nanohermes.ui.repl.prompt import InputCompleter


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def builtin_registry() -> Registry:
    from nanohermes.ui.commands import REGISTRY, load_commands

    load_commands()
    reg = Registry()
    for c in REGISTRY.all():
        if not c.source:
            reg.register(c.name, c.help, c.handler, usage=c.usage)
    return reg


def make_ctx(ws: Path, llm: ScriptedLLM, registry: Registry) -> tuple[CommandContext, Console]:
    console = Console(width=200, record=True, force_terminal=False, color_system=None)
    cfg = Config()
    ui = RecordingUI()
    runtime = Runtime(tools=[ListDir(), ReadFile()], config=cfg, workspace=ws, ui=ui, policy=Policy())
    agent = Agent(llm=llm, runtime=runtime, ui=ui, system_prompt="sys")
    return CommandContext(agent=agent, config=cfg, workspace=ws, print=console.print, registry=registry), console


def sent(llm: ScriptedLLM, i: int = 0) -> str:
    return str(llm.requests[i]["messages"][-1]["content"])


def test_file_names_become_commands_with_namespaces(workspace: Path, home: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "review.md", "Review the code.")
    write(workspace / ".nanohermes" / "commands" / "frontend" / "test.md", "Run the frontend tests.")
    write(workspace / ".claude" / "commands" / "review.md", "hidden by the .nanohermes one")
    write(workspace / ".claude" / "commands" / "explain.md", "Explain.")
    write(home / ".config" / "nanohermes" / "commands" / "deploy.md", "Deploy.")
    write(home / ".config" / "nanohermes" / "commands" / "explain.md", "hidden by the project's")
    write(workspace / ".nanohermes" / "commands" / "bad name.md", "x")
    found = discover(workspace)
    assert sorted(found.commands) == ["deploy", "explain", "frontend:test", "review"]
    assert found.commands["review"].body == "Review the code." and found.commands["review"].project
    assert found.commands["explain"].body == "Explain."
    assert not found.commands["deploy"].project
    [skipped] = found.warnings
    assert skipped.startswith(f"{workspace / '.nanohermes' / 'commands' / 'bad name.md'}: ") and "skipped" in skipped


def test_front_matter_gives_description_hint_and_model(workspace: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "fix.md",
          "---\ndescription: Fix an issue\nargument-hint: <issue> [priority]\nmodel: big-model\n---\nFix issue $1.\n")
    write(workspace / ".nanohermes" / "commands" / "broken.md", "---\njust some prose\n---\nbody")
    found = discover(workspace)
    fix = found.commands["fix"]
    assert (fix.description, fix.argument_hint, fix.model, fix.body) == (
        "Fix an issue", "<issue> [priority]", "big-model", "Fix issue $1.")
    assert "broken" not in found.commands and found.refused["broken"].kind == "refused"
    [unread] = found.warnings
    assert unread.startswith("/broken cannot run: ") and f" {workspace / '.nanohermes' / 'commands' / 'broken.md'} " in unread
    assert " line 2 " in unread and "'just some prose'" in unread


@pytest.mark.parametrize("body, args, expected", [
    ("Fix $ARGUMENTS now", "issue 12", "Fix issue 12 now"),
    ("From $1 to $2, not $3.", "'a b' c", "From a b to c, not ."),
    ("$1 and $10", "x", "x and $10"),
    ("Review the diff.", "carefully please", "Review the diff.\n\nARGUMENTS: carefully please"),
    ("Review the diff.", "", "Review the diff."),
    ("Quote: $1", "'unbalanced", "Quote: 'unbalanced"),
])
def test_arguments_are_substituted(body: str, args: str, expected: str) -> None:
    assert expand(CustomCommand(name="x", path=Path("x.md"), project=True, body=body), args) == expected


def test_a_command_runs_a_turn_with_its_prompt_and_model(workspace: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "frontend" / "test.md",
          "---\nmodel: big-model\n---\nRun the tests of $1 with care.")
    llm = ScriptedLLM([Reply(text="done"), Reply(text="next")], model="small-model")
    reg = builtin_registry()
    assert install_custom_commands(reg, workspace) == []
    ctx, _ = make_ctx(workspace, llm, reg)
    asyncio.run(reg.run("/frontend:test web", ctx))
    assert sent(llm) == "Run the tests of web with care."
    assert llm.requests[0]["model"] == "big-model"
    assert ctx.agent.llm.model == "small-model"  # for that turn only
    asyncio.run(ctx.agent.ask("plain"))
    assert llm.requests[1]["model"] == "small-model"


def test_at_path_attaches_files_bounded_like_the_repl(workspace: Path, tmp_path: Path) -> None:
    write(workspace / "src" / "a.py", "\n".join(f"line {i}" for i in range(1, 8)) + "\n")
    write(workspace / ".nanohermes" / "commands" / "review.md", "Review @src/a.py and @missing.py.")
    llm = ScriptedLLM([Reply(text="ok")])
    reg = builtin_registry()
    install_custom_commands(reg, workspace)
    ctx, console = make_ctx(workspace, llm, reg)
    ctx.agent.runtime.limits = type(ctx.agent.runtime.limits)(read_file_window_lines=3)
    asyncio.run(reg.run("/review", ctx))
    text = sent(llm)
    assert text.split("\n")[:3] == ["Review @src/a.py and @missing.py.", "", '<file path="src/a.py">']
    assert "line 3" in text and "line 4" not in text and " 1-3 of 7; " in text and " offset=4" in text
    assert text.endswith("</file>") and "attached src/a.py" in console.export_text()


def test_a_project_command_attaches_only_the_workspaces_non_secret_files(workspace: Path, tmp_path: Path,
                                                                         home: Path) -> None:
    outside = write(tmp_path / "outside.txt", "PRIVATE")
    write(workspace / ".env", "TOKEN=abc")
    (workspace / "link.txt").symlink_to(outside)
    write(workspace / ".nanohermes" / "commands" / "leak.md", f"Look at @{outside} @.env @link.txt")
    write(home / ".config" / "nanohermes" / "commands" / "mine.md", f"Look at @{outside}")
    llm = ScriptedLLM([Reply(text="ok"), Reply(text="ok")])
    reg = builtin_registry()
    install_custom_commands(reg, workspace)
    ctx, console = make_ctx(workspace, llm, reg)
    asyncio.run(reg.run("/leak", ctx))
    assert "PRIVATE" not in sent(llm) and "TOKEN" not in sent(llm)
    shown = " ".join(console.export_text().split())  # as said, whatever the console wrapped
    assert shown.count("not attached:") == 3
    assert "@.env not attached: " in shown and f" {workspace / '.env'}, a secret file" in shown
    assert shown.count(f" {outside}, outside the workspace") == 2  # named, and through a link
    asyncio.run(reg.run("/mine", ctx))  # the person's own command attaches what they named
    assert "PRIVATE" in sent(llm, 1)


def test_a_builtin_wins_a_clash_and_help_says_so(workspace: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "help.md", "Not the help.")
    write(workspace / ".nanohermes" / "commands" / "review.md", "---\ndescription: Review the diff\n"
                                                               "argument-hint: '[focus]'\n---\nReview.")
    llm = ScriptedLLM([])
    reg = builtin_registry()
    install_custom_commands(reg, workspace)
    ctx, console = make_ctx(workspace, llm, reg)
    asyncio.run(reg.run("/help", ctx))
    out = console.export_text()
    [row] = [line for line in out.splitlines() if line.startswith("/review ")]
    assert re.split(r"\s{2,}", row.strip()) == ["/review [focus]", "Review the diff (project command)"]
    path = workspace / ".nanohermes" / "commands" / "help.md"
    [hidden] = [line for line in out.splitlines() if str(path) in line]
    assert hidden.startswith(f"/help from {path} ") and "built-in /help" in hidden
    assert llm.requests == []  # the built-in ran


def test_tab_completes_custom_commands(workspace: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "frontend" / "test.md", "---\ndescription: Frontend tests\n---\nx")
    reg = builtin_registry()
    install_custom_commands(reg, workspace)
    completer = InputCompleter(reg, lambda: workspace)
    got = [(c.text, c.display_meta_text) for c in completer.get_completions(Document("/fro"), None)]
    assert got == [("/frontend:test", "Frontend tests (project command)")]


def test_print_mode_expands_a_leading_command(turn, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    with FakeServer(models=("fake-model", "other-model")) as server:
        print_mode_expands_a_leading_command(turn, server, workspace)


def print_mode_expands_a_leading_command(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    write(workspace / "notes.txt", "NOTES")
    write(workspace / ".nanohermes" / "commands" / "ops" / "explain.md",
          "---\ndescription: Explain\nmodel: other-model\n---\nExplain $1 in $2 words. See @notes.txt")
    server.add(Reply(text="explained"), Reply(text="plain"))
    ran = turn("-p", "/ops:explain 'the cache' 10", server=server)
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "explained"
    body = server.requests[0]
    assert body["model"] == "other-model"
    assert body["messages"][-1]["content"] == ('Explain the cache in 10 words. See @notes.txt\n\n'
                                               '<file path="notes.txt">\n1\tNOTES\n</file>')
    ran = turn("-p", "/unknown stays as typed", server=server)
    assert ran.code == 0 and server.requests[1]["messages"][-1]["content"] == "/unknown stays as typed"


def test_init_writes_agents_md_through_the_fake_server(server: FakeServer, workspace: Path) -> None:
    from nanohermes.assemble import build_agent
    from nanohermes.testing import call, tool_reply

    write(workspace / "pyproject.toml", "[project]\nname = 'demo'\n")
    server.add(tool_reply(call("read_file", {"path": "pyproject.toml"})),
               tool_reply(call("write_file", {"path": "AGENTS.md", "content": "# demo\n\nTest: `pytest`\n"})),
               Reply(text="wrote AGENTS.md"))
    config = Config(base_url=server.base_url, api_key="k", model="fake-model", permission_mode="accept-edits",
                    checkpoints=False)
    built = build_agent(config, workspace, RecordingUI())
    reg = builtin_registry()
    console = Console(width=200, record=True, color_system=None)
    ctx = CommandContext(agent=built.agent, config=config, workspace=workspace, print=console.print, registry=reg,
                         built=built)
    asyncio.run(reg.run("/init mention the demo", ctx))
    assert (workspace / "AGENTS.md").read_text() == "# demo\n\nTest: `pytest`\n"
    prompt = server.requests[0]["messages"][-1]["content"]
    assert prompt.startswith(INIT_PROMPT.split("{action}")[0] + "write ")  # write, not improve: there is none
    assert prompt.endswith("\nAlso: mention the demo") and "exists already" not in prompt
    server.add(Reply(text="improved"))
    asyncio.run(reg.run("/init", ctx))
    assert server.requests[-1]["messages"][-1]["content"].startswith("Study this repository and improve an AGENTS.md")
    assert "An AGENTS.md exists already: read it first" in server.requests[-1]["messages"][-1]["content"]


def test_export_writes_the_conversation_as_markdown(workspace: Path) -> None:
    from nanohermes.testing import call, tool_reply

    write(workspace / "a.txt", "has ``` fences\n")
    llm = ScriptedLLM([tool_reply(call("read_file", {"path": "a.txt"}), text="Let me look."), Reply(text="It has fences.")])
    reg = builtin_registry()
    ctx, console = make_ctx(workspace, llm, reg)
    asyncio.run(reg.run("/export", ctx))
    assert "nothing to export yet" in console.export_text()
    asyncio.run(ctx.agent.ask("what is in a.txt?"))
    asyncio.run(reg.run("/export out/chat.md", ctx))
    text = (workspace / "out" / "chat.md").read_text()
    assert [part.split("\n") for part in text.split("\n\n")] == [
        ["# nanohermes conversation"], ["## You"], ["what is in a.txt?"], ["## nanohermes"], ["Let me look."],
        ["Tool call: **read_file**"], ["```json", '{"path": "a.txt"}', "```"],
        ["Result:"], ["````", "1\thas ``` fences", "````"], ["## nanohermes"], ["It has fences.", ""]]
    assert f"exported 4 messages to {workspace / 'out' / 'chat.md'}" in console.export_text()


def test_export_after_a_compaction_writes_the_whole_session_and_says_where_the_summary_starts(
        workspace: Path, turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    from test_checkpoints import ask, build, command

    built = build(workspace, ScriptedLLM([Reply(text="answer one"), Reply(text="answer two"),
                                          Reply(text="answer three"), Reply(text="THE SUMMARY"),
                                          Reply(text="answer four")]))
    ask(built, "first question", "second question", "third question")
    command(built, "/compact")
    ask(built, "fourth question")
    said = command(built, "/export all.md")
    text = (workspace / "all.md").read_text()
    order = ["first question", "answer one", "second question", "answer two", "third question",
             "## Summary (the conversation above was compacted", "THE SUMMARY", "answer three", "fourth question",
             "answer four"]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "exported 9 messages " in said and " the first 5 " in said, said
    built.agent.session.close()
    ran = turn("-p", "/export again.md", "--continue", server=server)  # read back from the transcript: the same
    assert ran.code == 0, ran.err
    assert (workspace / "again.md").read_text() == text and server.requests == []


@pytest.mark.parametrize("line", ["/help", "/help me", "/model other", "/rewind"])
def test_print_mode_refuses_a_repl_command_instead_of_sending_it(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                                line: str) -> None:
    write(workspace / ".nanohermes" / "commands" / "help.md", "Not the help.")  # a built-in's name: the built-in wins
    ran = turn("-p", line, server=server)
    assert ran.code == 2 and server.requests == [], ran.err
    name = line.split()[0]
    assert f"{name} is a command of the REPL;" in ran.err


def test_print_mode_exports_the_conversation_it_continues(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    ran = turn("-p", "/export out.md", server=server)
    assert ran.code == 2 and "nothing to export" in ran.err and server.requests == []  # a usage error
    server.add(Reply(text="the answer"))
    assert turn("-p", "a question", server=server).code == 0
    ran = turn("-p", "/export out.md", "--continue", "--output-format", "json", server=server)
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["result"] == f"exported 2 messages to {workspace / 'out.md'}"
    assert (workspace / "out.md").read_text().startswith("# nanohermes conversation")
    assert len(server.requests) == 1  # no model call for an export


def test_print_mode_init_that_cannot_write_says_so_and_fails(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    from nanohermes.testing import call, tool_reply

    server.add(tool_reply(call("write_file", {"path": "AGENTS.md", "content": "# demo\n"})), Reply(text="tried"))
    ran = turn("-p", "/init", server=server)  # no --yes, no terminal: the write is refused
    assert ran.code == 1 and not (workspace / "AGENTS.md").exists()
    assert "/init did not write AGENTS.md: " in ran.err and "needs approval" in ran.err
    assert "--yes" in ran.err
    ran = turn("-p", "/init", "--mode", "plan", server=server)
    assert ran.code == 1 and "plan mode writes nothing" in ran.err and len(server.requests) == 2


def test_print_mode_runs_project_claude_and_user_commands(turn, workspace: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    with FakeServer(models=("fake-model", "user-model")) as server:
        print_mode_runs_project_claude_and_user_commands(turn, server, workspace, home)


def print_mode_runs_project_claude_and_user_commands(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                     home: Path) -> None:
    write(workspace / ".claude" / "commands" / "a" / "b" / "deep.md", "Deep: [$ARGUMENTS] first=[$1] third=[$3]")
    write(home / ".config" / "nanohermes" / "commands" / "mine.md",
          "---\nmodel: user-model\nargument-hint: '<what>'\n---\nMine: $ARGUMENTS")
    server.add(Reply(text="deep"), Reply(text="mine"), Reply(text="plain"))
    ran = turn("-p", """/a:b:deep "two words" 'it''s' """, server=server)
    assert ran.code == 0, ran.err
    # $ARGUMENTS is the text as typed (quotes kept); $1.. are the words a shell would see,
    # and one not given is empty.
    assert server.requests[0]["messages"][-1]["content"] == """Deep: ["two words" 'it''s'] first=[two words] third=[]"""
    assert server.requests[0]["model"] == "fake-model"
    ran = turn("-p", "/mine the cache", server=server)
    assert ran.code == 0 and ran.out.strip() == "mine", ran.err
    assert server.requests[1]["messages"][-1]["content"] == "Mine: the cache"
    assert server.requests[1]["model"] == "user-model"
    ran = turn("-p", "/a:b:nothing here", server=server)
    assert ran.code == 0 and server.requests[2]["messages"][-1]["content"] == "/a:b:nothing here"


def test_a_front_matter_model_is_for_that_turn_only(workspace: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "big.md", "---\nmodel: big-model\n---\nThink hard.")
    reg = builtin_registry()
    install_custom_commands(reg, workspace)
    llm = ScriptedLLM([Reply(text="a"), Reply(text="b")], model="small-model")
    ctx, _ = make_ctx(workspace, llm, reg)
    asyncio.run(reg.run("/big", ctx))
    asyncio.run(ctx.agent.ask("and now"))
    assert [r["model"] for r in llm.requests] == ["big-model", "small-model"]
    assert llm.model == "small-model"


def test_tab_shows_the_argument_hint(workspace: Path) -> None:
    write(workspace / ".nanohermes" / "commands" / "review.md", "---\nargument-hint: '[focus]'\n---\nReview.")
    reg = builtin_registry()
    install_custom_commands(reg, workspace)
    got = [(c.text, c.display_text) for c in InputCompleter(reg, lambda: workspace).get_completions(Document("/rev"), None)]
    assert got == [("/review", "/review [focus]")]


def test_print_mode_init_writes_agents_md(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    from nanohermes.testing import call, tool_reply

    server.add(tool_reply(call("write_file", {"path": "AGENTS.md", "content": "# demo\n"})), Reply(text="written"))
    ran = turn("-p", "/init keep it short", "--yes", server=server)
    assert ran.code == 0, ran.err
    assert (workspace / "AGENTS.md").read_text() == "# demo\n"
    prompt = server.requests[0]["messages"][-1]["content"]
    assert prompt.startswith("Study this repository and write an AGENTS.md") and prompt.endswith("\nAlso: keep it short")
