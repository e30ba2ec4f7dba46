"""Command files as Claude Code runs them, through `-p` and the fake server, with real files and
real git: `!` commands run through the gate before the prompt is sent, `allowed-tools` granted
for the command's turn, front matter read leniently, and `model:` looked up at the endpoint."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def git_repo(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "config", "user.email", "dev@example.invalid"], check=True)
    subprocess.run(["git", "-C", str(ws), "config", "user.name", "Dev"], check=True)
    (ws / "a.txt").write_text("one\n")


def log(ws: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(ws), "log", "--format=%s"], capture_output=True, text=True)
    return out.stdout.split("\n")[:-1] if out.returncode == 0 else []


def prompt_of(server: FakeServer, i: int = 0) -> str:
    return str(server.requests[i]["messages"][-1]["content"])


def trusting(ws: Path, **more: Any) -> dict[str, Any]:
    return {"trusted_projects": [str(ws)], **more}


# -- `!` commands ------------------------------------------------------------------------------
def test_bang_commands_run_before_the_prompt_and_their_output_is_inlined(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                                         home: Path) -> None:
    git_repo(workspace)
    write(home / ".claude" / "commands" / "gather.md",
          "---\ndescription: Gather context\n---\n## Context\n- Status: !`git status --short`\n"
          "- Branch: !`git branch --show-current`\n```!\necho block for $1\n```\nNow do $ARGUMENTS.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "/gather the work", server=server)
    assert ran.code == 0, ran.err
    assert prompt_of(server).split("\n") == ["## Context", "- Status: ?? a.txt", "- Branch: main", "block for the",
                                             "Now do the work."]


def test_a_bang_command_the_gate_would_ask_about_is_not_run_without_a_person(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                             workspace: Path, home: Path) -> None:
    write(home / ".claude" / "commands" / "make.md", "Made: !`touch made.txt`\nListed: !`ls`")
    server.add(Reply(text="ok"), Reply(text="ok"))
    ran = turn("-p", "/make", server=server)
    assert ran.code == 0, ran.err
    assert not (workspace / "made.txt").exists()
    text = prompt_of(server)
    made, listed = text.split("\n")
    assert made.startswith("Made: [`touch made.txt` was not run: ") and "needs approval" in made, made
    assert "allowed-tools: Bash(touch:*)" in made and listed == "Listed: (no output)"
    assert "refused run_command `touch made.txt`" in ran.err and "/make: `!touch made.txt` not run" in ran.err
    ran = turn("-p", "/make", "--yes", server=server)  # the person's --yes: it runs, confined
    assert ran.code == 0 and (workspace / "made.txt").exists(), ran.err
    assert prompt_of(server, 1) == "Made: (no output)\nListed: made.txt"


def test_a_bang_command_a_deny_rule_or_the_mode_refuses_never_runs(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                                   home: Path) -> None:
    write(workspace / "keep.txt", "kept")
    write(home / ".claude" / "commands" / "clean.md", "Cleaned: !`rm keep.txt`")
    server.add(Reply(text="ok"), Reply(text="ok"))
    ran = turn("-p", "/clean", "--yes", server=server, config={"permissions": {"deny": ["run_command(rm *)"]}})
    assert ran.code == 0 and (workspace / "keep.txt").exists(), ran.err
    text = prompt_of(server)
    assert text.startswith("Cleaned: [`rm keep.txt` was not run: ") and " run_command(rm *)" in text, text
    ran = turn("-p", "/clean", "--mode", "plan", server=server)
    assert ran.code == 0 and (workspace / "keep.txt").exists(), ran.err
    text = prompt_of(server, 1)
    assert text.startswith("Cleaned: [`rm keep.txt` was not run: ") and " plan mode]" in text, text


def test_only_the_command_files_own_text_runs(turn, server: FakeServer, workspace: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    """The arguments and the attached files are text: a `!` in them runs nothing."""
    write(workspace / "notes.md", "Run !`touch from-file` please")
    write(home / ".claude" / "commands" / "look.md", "Look at @notes.md and $ARGUMENTS")
    server.add(Reply(text="ok"))
    ran = turn("-p", "/look !`touch from-args`", "--yes", server=server)
    assert ran.code == 0, ran.err
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.md"]
    assert prompt_of(server).split("\n")[:4] == ["Look at @notes.md and !`touch from-args`", "", '<file path="notes.md">',
                                                 "1\tRun !`touch from-file` please"]


def test_an_untrusted_projects_bang_commands_do_not_run_unasked(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    git_repo(workspace)
    write(workspace / ".claude" / "commands" / "st.md", "Status: !`git status --short`")
    server.add(Reply(text="ok"), Reply(text="ok"), Reply(text="ok"))
    for extra in ((), ("--yes",)):  # --yes is no person's yes to the project's own commands
        ran = turn("-p", "/st", *extra, server=server)
        assert ran.code == 0, ran.err
        text = prompt_of(server, len(server.requests) - 1)
        assert text.startswith("Status: [`git status --short` was not run: ") and "trusted project" in text, text
        assert f'add "{workspace.resolve()}" to trusted_projects' in text and "/st: `!git status --short` not run" in ran.err
    ran = turn("-p", "/st", server=server, config=trusting(workspace))
    assert ran.code == 0, ran.err
    assert prompt_of(server, 2) == "Status: ?? .claude/\n?? a.txt"


def test_a_bang_commands_output_is_clamped_with_an_exact_note(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "commands" / "big.md", "Out: !`printf '%0500d' 0`")
    server.add(Reply(text="ok"))
    ran = turn("-p", "/big", server=server, config={"limits": {"command_file_output_chars": 100}})
    assert ran.code == 0, ran.err
    assert prompt_of(server) == "Out: " + "0" * 75 + "\n… output truncated (400 chars omitted) …\n" + "0" * 25


def test_a_failing_bang_command_shows_its_exit_code_and_stderr(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "commands" / "miss.md", "Missing: !`cat nothing-here.txt`")
    server.add(Reply(text="ok"))
    ran = turn("-p", "/miss", server=server)
    assert ran.code == 0, ran.err
    text = prompt_of(server)
    assert text.startswith("Missing: exit code: 1\n\nstdout:\n(empty)\n\nstderr:\n") and "nothing-here.txt" in text


# -- allowed-tools -----------------------------------------------------------------------------
COMMIT = ("---\nallowed-tools: Bash(git add:*), Bash(git commit:*), Bash(git status:*)\nargument-hint: [message]\n"
          "description: Create a git commit\n---\n## Context\n- Current status: !`git status --short`\n\n"
          "## Your task\nCommit the changes with the message: $ARGUMENTS")


def script_commit(server: FakeServer) -> None:
    server.add(tool_reply(call("run_command", {"command": "git add a.txt"})),
               tool_reply(call("run_command", {"command": "git commit -q -m 'first commit'"})),
               Reply(text="committed"))


def test_allowed_tools_let_a_trusted_projects_commit_command_commit(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    git_repo(workspace)
    write(workspace / ".claude" / "commands" / "commit.md", COMMIT)
    script_commit(server)
    ran = turn("-p", "/commit first commit", server=server, config=trusting(workspace))
    assert ran.code == 0, ran.err
    assert log(workspace) == ["first commit"]
    assert "- Current status: ?? .claude/\n?? a.txt" in prompt_of(server)
    results = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert all(r.startswith("exit code: 0") for r in results), results


def test_an_untrusted_projects_allowed_tools_grant_nothing(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    git_repo(workspace)
    write(workspace / ".claude" / "commands" / "commit.md", COMMIT)
    script_commit(server)
    ran = turn("-p", "/commit first commit", server=server)
    assert ran.code == 0, ran.err
    assert log(workspace) == []
    [ignored] = [line for line in ran.err.splitlines() if "/commit: allowed-tools ignored " in line]
    assert all(f"Bash(git {what}:*)" in ignored for what in ("add", "commit", "status")) and "not trusted" in ignored
    assert "refused run_command `git add a.txt`" in ran.err and "refused run_command `git commit" in ran.err


def test_allowed_tools_hold_for_the_commands_turn_only(server: FakeServer, workspace: Path, home: Path) -> None:
    """A user's command grants its tools for its turn; the next turn of the session, and
    /permissions after it, no longer have them."""
    from nanohermes.extensions import custom_commands
    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI

    git_repo(workspace)
    write(home / ".claude" / "commands" / "commit.md", COMMIT)
    script_commit(server)
    server.add(tool_reply(call("run_command", {"command": "git commit -q --allow-empty -m second"})), Reply(text="no"))
    config = Config(base_url=server.base_url, api_key="k", model="fake-model", checkpoints=False)
    built = build_agent(config, workspace, RecordingUI(), save_session=False)

    async def session() -> list[str]:
        async with built.session() as agent:
            await custom_commands.ask(agent, "/commit first commit")
            granted = [str(r) for r in agent.runtime.policy.allow]
            await agent.ask("commit again")
            return granted

    assert asyncio.run(session()) == []
    assert log(workspace) == ["first commit"]
    last = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert last[-1].startswith("Denied by the user")  # asked, and nobody answered yes


# -- front matter ------------------------------------------------------------------------------
# The shape of a popular collection's commands: a bracketed hint YAML cannot read.
COLLECTION = ("---\nallowed-tools: Bash(git branch:*), Bash(git push:*)\nargument-hint: [--no-delete] [--no-tag]\n"
              "description: Finish the current feature branch: merge it, then clean up\n---\n"
              "Finish the branch with the options: $ARGUMENTS")


def test_a_bracketed_argument_hint_keeps_the_command(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    from nanohermes.extensions.custom_commands import discover

    write(workspace / ".claude" / "commands" / "git" / "finish.md", COLLECTION)
    found = discover(workspace)
    finish = found.commands["git:finish"]
    assert (finish.argument_hint, finish.allowed_tools) == ("[--no-delete] [--no-tag]",
                                                           ("Bash(git branch:*)", "Bash(git push:*)"))
    assert finish.description == COLLECTION.split("description: ")[1].split("\n")[0] and not found.warnings
    assert finish.description.endswith(": merge it, then clean up")  # past the colon: read leniently
    server.add(Reply(text="finished"))
    ran = turn("-p", "/git:finish --no-tag", server=server)
    assert ran.code == 0 and ran.out.strip() == "finished", ran.err
    assert prompt_of(server) == "Finish the branch with the options: --no-tag"


def test_a_command_file_that_cannot_be_read_is_named_everywhere(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from nanohermes.turn.agent import Agent
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.guard.permissions import Policy
    from nanohermes.turn.runtime import Runtime
    from nanohermes.testing import ScriptedLLM
    from nanohermes.ui.commands import REGISTRY, CommandContext, Registry, load_commands
    from nanohermes.ui.extensions import install_custom_commands

    path = write(workspace / ".claude" / "commands" / "broken.md", "---\nJust prose, no keys\n---\nDo it.")
    ran = turn("-p", "/broken now", server=server)
    assert ran.code == 1 and server.requests == []
    [said] = [line for line in ran.err.splitlines() if "/broken cannot run: " in line]
    assert f" {path} (command file) " in said and " line 2 " in said and "'Just prose, no keys'" in said, said
    load_commands()
    registry = Registry()
    for c in REGISTRY.all():
        registry.register(c.name, c.help, c.handler, usage=c.usage)
    warnings = install_custom_commands(registry, workspace)
    assert warnings == [said.split(": ", 1)[1].split(": ", 1)[1]]  # as -p said it, without "nanohermes: error: "
    console = Console(width=300, record=True, color_system=None)
    ui = RecordingUI()
    runtime = Runtime(tools=[], config=Config(), workspace=workspace, ui=ui, policy=Policy())
    agent = Agent(llm=ScriptedLLM([]), runtime=runtime, ui=ui, system_prompt="sys")
    ctx = CommandContext(agent=agent, config=Config(), workspace=workspace, print=console.print, registry=registry)
    asyncio.run(registry.run("/help", ctx))
    assert re.search(r"^/broken +cannot run: ", console.export_text(), re.M)
    asyncio.run(registry.run("/broken", ctx))
    assert "/broken cannot run:" in console.export_text().split("/help")[-1]


# -- model -------------------------------------------------------------------------------------
def test_a_claude_model_without_an_alias_is_ignored_with_a_note(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "commands" / "think.md", "---\nmodel: claude-sonnet-4-0\n---\nThink.")
    server.add(Reply(text="thought"))
    ran = turn("-p", "/think", server=server)
    assert ran.code == 0 and ran.out.strip() == "thought", ran.err
    assert server.requests[0]["model"] == "fake-model"
    [note] = [line for line in ran.err.splitlines() if "/think: model 'claude-sonnet-4-0' ignored" in line]
    assert "model_aliases" in note and "'sonnet'" in note


@pytest.mark.parametrize("named, aliases, sent", [
    ("claude-sonnet-4-0", {"sonnet": "big-model"}, "big-model"),  # a full id goes by its family
    ("opus", {"Opus": "big-model"}, "big-model"),
    ("claude-3-5-haiku-20241022", {"claude-3-5-haiku-20241022": "small-model", "haiku": "big-model"}, "small-model"),
    ("small-model", {}, "small-model"),  # a model the endpoint lists is used as written
    ("inherit", {"sonnet": "big-model"}, "fake-model"),
])
def test_a_model_alias_maps_to_the_endpoints_model(turn, home: Path, named: str, aliases: dict[str, str],  # type: ignore[no-untyped-def]
                                                   sent: str) -> None:
    write(home / ".claude" / "commands" / "think.md", f"---\nmodel: {named}\n---\nThink.")
    with FakeServer(models=("fake-model", "big-model", "small-model")) as server:
        server.add(Reply(text="thought"), Reply(text="plain"))
        ran = turn("-p", "/think", server=server, config={"model_aliases": aliases})
        assert ran.code == 0 and "ignored" not in ran.err, ran.err
        assert server.requests[0]["model"] == sent


@pytest.mark.parametrize("named, listed, sent, note", [
    ("sonnet", ("fake-model", "claude-sonnet-4-5-20250929", "claude-3-5-haiku-latest"), "claude-sonnet-4-5-20250929", ""),
    ("claude-3-5-haiku-20241022", ("fake-model", "anthropic/claude-3.5-haiku"), "anthropic/claude-3.5-haiku", ""),
    ("opus", ("fake-model", "claude-opus-4-1", "claude-opus-4-0"), "claude-opus-4-1",
     "/think: model 'opus' is 'claude-opus-4-1' here, the last by name of the endpoint's opus models "
     "(claude-opus-4-0, claude-opus-4-1); model_aliases chooses another"),
])
def test_a_claude_name_goes_to_the_endpoints_model_of_its_family(turn, home: Path, named: str,  # type: ignore[no-untyped-def]
                                                                  listed: tuple[str, ...], sent: str, note: str) -> None:
    """An endpoint serving Claude's models under its own ids (a proxy) needs no alias."""
    write(home / ".claude" / "commands" / "think.md", f"---\nmodel: {named}\n---\nThink.")
    with FakeServer(models=listed) as server:
        server.add(Reply(text="thought"))
        ran = turn("-p", "/think", server=server)
        assert ran.code == 0, ran.err
        assert server.requests[0]["model"] == sent
        assert (note in ran.err) if note else ("/think: model" not in ran.err)


def refuse_other_models(body: dict[str, Any]) -> Reply | Fault:
    """An endpoint serving only fake-model, as it answers a request for another."""
    if body["model"] != "fake-model":
        return Fault(status=404, message=f"The model `{body['model']}` does not exist", code="model_not_found")
    return Reply(text=f"answered by {body['model']}")


def test_a_model_the_endpoint_refuses_falls_back_to_the_configured_one(turn, home: Path) -> None:  # type: ignore[no-untyped-def]
    """An endpoint that cannot list its models takes the file's name as written; when it then
    refuses that model, the turn goes on with the configured one and says so: never a failed run."""
    write(home / ".claude" / "commands" / "think.md", "---\nmodel: gpt-4o-mini\n---\nThink.")
    with FakeServer([refuse_other_models] * 3, models_answer=Fault(status=404)) as server:
        ran = turn("-p", "/think", server=server)
        assert ran.code == 0 and ran.out.strip() == "answered by fake-model", ran.err
        assert [r["model"] for r in server.requests] == ["gpt-4o-mini", "fake-model"]
        [note] = [line for line in ran.err.splitlines() if "/think: " in line]
        assert "`gpt-4o-mini`" in note and "fake-model" in note, note


def test_an_alias_to_a_model_the_endpoint_does_not_serve_is_ignored(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "commands" / "think.md", "---\nmodel: opus\n---\nThink.")
    server.add(Reply(text="thought"))
    ran = turn("-p", "/think", server=server, config={"model_aliases": {"opus": "gone-model"}})
    assert ran.code == 0, ran.err
    assert server.requests[0]["model"] == "fake-model"
    [note] = [line for line in ran.err.splitlines() if "/think: model 'opus' ignored" in line]
    assert "'gone-model'" in note


def test_without_a_model_list_an_alias_is_trusted_and_a_claude_name_is_not(turn, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "commands" / "a.md", "---\nmodel: sonnet\n---\nA.")
    write(home / ".claude" / "commands" / "b.md", "---\nmodel: haiku\n---\nB.")
    with FakeServer(models_answer=Fault(status=404)) as server:
        server.add(Reply(text="a"), Reply(text="b"))
        config = {"model_aliases": {"sonnet": "served-model"}}
        assert turn("-p", "/a", server=server, config=config).code == 0
        ran = turn("-p", "/b", server=server, config=config)
        assert ran.code == 0, ran.err
        assert [r["model"] for r in server.requests] == ["served-model", "fake-model"]
        assert "/b: model 'haiku' ignored" in ran.err


# -- user-level files --------------------------------------------------------------------------
def test_user_level_claude_commands_skills_and_agents_are_found(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    write(home / ".claude" / "commands" / "mine.md", "Mine: $ARGUMENTS")
    write(home / ".claude" / "skills" / "release" / "SKILL.md",
          "---\nname: release\ndescription: How we cut a release\n---\nTag, then push.")
    write(home / ".claude" / "agents" / "scout.md",
          "---\nname: scout\ndescription: Finds where things are\ntools: Read, Grep\n---\nOnly look.")
    server.add(Reply(text="ok"))
    ran = turn("-p", "/mine the cache", server=server)
    assert ran.code == 0, ran.err
    body = server.requests[0]
    assert body["messages"][-1]["content"] == "Mine: the cache"
    assert "- release: How we cut a release" in body["messages"][0]["content"]
    specs = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert specs["skill"]["parameters"]["properties"]["name"]["enum"] == ["release"]
    assert specs["subagent"]["parameters"]["properties"]["agent"]["enum"] == ["scout"]
    assert "scout: Finds where things are" in specs["subagent"]["description"]


def test_the_config_key_reads_in_the_user_file(turn, server: FakeServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    """`model_aliases` is a key of the user's file; an untrusted project's is not applied."""
    from nanohermes.config import load_config

    (home / ".config" / "nanohermes").mkdir(parents=True)
    (home / ".config" / "nanohermes" / "config.json").write_text(json.dumps({"model_aliases": {"sonnet": "a"}}))
    ws = home / "proj"
    write(ws / ".nanohermes" / "config.json", json.dumps({"model_aliases": {"sonnet": "b"}}))
    loaded = load_config(ws)
    assert loaded.config.model_aliases == {"sonnet": "a"} and "model_aliases" in loaded.asks


def test_a_sub_agent_the_commands_turn_starts_gets_no_grant(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                             home: Path) -> None:
    git_repo(workspace)
    write(home / ".claude" / "commands" / "commit.md", COMMIT)
    write(home / ".claude" / "agents" / "committer.md", "---\ndescription: Commits\ntools: Bash\n---\nCommit.")
    server.add(tool_reply(call("subagent", {"agent": "committer", "task": "commit a.txt", "wait": True})),
               tool_reply(call("run_command", {"command": "git add a.txt"})),
               Reply(text="child: tried"), Reply(text="parent: done"))
    ran = turn("-p", "/commit first", server=server)
    assert ran.code == 0, ran.err
    staged = subprocess.run(["git", "-C", str(workspace), "diff", "--cached", "--name-only"], capture_output=True,
                            text=True, check=True).stdout
    assert staged == "" and log(workspace) == []
    child_results = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert child_results[0].startswith("Denied by the user") and "refused run_command `git add a.txt`" in ran.err


# -- the REPL ----------------------------------------------------------------------------------
def test_in_the_repl_a_bang_command_the_gate_asks_about_is_asked_and_runs_on_a_yes(workspace: Path,
                                                                                  home: Path) -> None:
    from test_repl_pty import Term

    write(home / ".claude" / "commands" / "mk.md", "Made: !`touch made.txt`\nRefused: !`touch never.txt`")
    write(workspace / ".claude" / "commands" / "look.md", "Look: !`ls`")  # an untrusted project's: asked
    with FakeServer() as server:
        server.add(Reply(text="all done"), Reply(text="looked"))
        t = Term(workspace, home, server)
        try:
            t.prompt()
            t.type("/mk")
            t.wait("run_command touch made.txt")
            t.wait("a `!` command of a command file, run before the prompt of /mk")
            t.armed()
            t.child.send("y")
            t.wait("run_command touch never.txt")
            t.armed()
            t.child.send("n")
            t.wait("note for the model")
            t.type("not that one")
            t.wait("all done")
            t.prompt()
            t.type("/look")
            t.wait("a `!` command of a command file of this project, which is not trusted")
            t.armed()
            t.child.send("y")
            t.wait("looked")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
        assert (workspace / "made.txt").exists() and not (workspace / "never.txt").exists()
        made, refused = prompt_of(server).split("\n")
        assert made == "Made: (no output)" and refused.startswith("Refused: [`touch never.txt` was not run: ")
        assert refused.endswith(": not that one]")  # the person's note
        assert prompt_of(server, 1) == "Look: made.txt"


@pytest.mark.parametrize("body, lines", [
    ("Status: !`git status`, branch !`git branch`", ["git status", "git branch"]),
    ("```!\ngit log -1\necho two\n```", ["git log -1\necho two"]),
    ("Wow!`not this` and $!`nor this`", []),
    ("Type `!` then `ls` to run a shell line", []),  # prose about `!` itself
    ("!` spaced`", []),
])
def test_which_spans_of_a_command_file_are_commands(body: str, lines: list[str]) -> None:
    from nanohermes.extensions.command_runs import find_shell

    text, found = find_shell(body)
    assert [s.line for s in found] == lines
    assert all(text.count(s.marker) == 1 for s in found) and (found or text == body)
