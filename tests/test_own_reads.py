"""What nanohermes reads into the prompt by itself (instruction files, command files, skills,
`@` mentions) goes through the one reader, `nanohermes.guard.ownreads`, with the file tools' rules.

Each attack is first run as a control (the link really reaches the content, which is
readable), then through nanohermes: what the fake server received never holds the content,
and the file is named to the person.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.common.budget import Limits
from nanohermes.common.events import ApprovalReply, ApprovalRequest
from nanohermes.common.modes import Mode
from nanohermes.guard.ownreads import OwnReader, OwnText, Skipped
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.testing import FakeServer, Reply

MARK = "OWNREADS-MARK-7f3a91"
# What a secret holds: shaped as a skill and a command would be, so only the rules keep it out.
CONTENT = f"---\nname: leak\ndescription: {MARK}\n---\n{MARK} body\n"


def sent(server: FakeServer) -> str:
    """Everything the model was sent."""
    return json.dumps(server.requests)


def targets(tmp_path: Path, home: Path) -> dict[str, Path]:
    """Files a project must not reach unasked: a secret, the user's config holding api_key,
    and a plain file outside the workspace."""
    secret = home / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text(CONTENT)
    outside = tmp_path / "outside.md"
    outside.write_text(CONTENT)
    return {"secret": secret, "config": home / ".config" / "nanohermes" / "config.json", "outside": outside}


def reason(err: str, named: str) -> str:
    """Why the file `named` (its path, or an @ mention) was left out, as the run told the person."""
    for line in err.splitlines():
        at = line.find(named)
        rest = line[at + len(named):] if at >= 0 else ""
        for said in (" not read: ", " not attached: "):
            if said in rest:
                return rest.split(said, 1)[1]
    raise AssertionError(f"{named} is not named as left out in:\n{err}")


# The user's config: the run reads it as its config, and it holds the key and the mark.
USER_CONFIG = {"api_key": f"sk-{MARK}", "trusted_projects": [f"/nowhere/{MARK}"]}

# Where a project plants a link, and how the run reaches it.
PLANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "AGENTS.md": ("AGENTS.md", ("-p", "hi")),
    "CLAUDE.md": ("CLAUDE.md", ("-p", "hi")),
    ".claude/CLAUDE.md": (".claude/CLAUDE.md", ("-p", "hi")),
    "CLAUDE.local.md": ("CLAUDE.local.md", ("-p", "hi")),
    "command": (".claude/commands/review.md", ("-p", "/review")),
    "skill": (".claude/skills/leak/SKILL.md", ("-p", "hi")),
    "mention": ("notes.md", ("-p", "look at @notes.md")),
}


def plant(workspace: Path, where: str, target: Path) -> Path:
    link = workspace / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def control(link: Path, target: Path) -> None:
    """The link reaches the file, and the file gives its content to any plain reader."""
    assert os.path.realpath(link) == os.path.realpath(target)
    assert MARK in link.read_text()


@pytest.mark.parametrize("kind", ["secret", "config", "outside"])
@pytest.mark.parametrize("plant_at", list(PLANTS))
def test_a_link_out_of_the_project_is_not_read_into_the_prompt(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                               tmp_path: Path, home: Path, kind: str,
                                                               plant_at: str) -> None:
    where, argv = PLANTS[plant_at]
    server.add(Reply(text="ok"))
    target = targets(tmp_path, home)[kind]
    if kind == "config":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(USER_CONFIG))
    link = plant(workspace, where, target)
    control(link, target)
    r = turn(*argv, server=server)
    assert MARK not in sent(server)
    if plant_at == "command":  # the command cannot run: said, and nothing is sent
        assert r.code != 0 and server.requests == []
        assert f"/review cannot run: {link} (command file) " in r.err and str(target) in reason(r.err, str(link))
        return
    assert r.code == 0, r.err
    if plant_at == "mention":
        assert str(target) in reason(r.err, "@notes.md")
    else:
        assert f"{link} ({'skill' if plant_at == 'skill' else 'instruction file'}) " in r.err
        assert str(target) in reason(r.err, str(link))
    if plant_at == "skill":
        assert "skill" not in [t["function"]["name"] for t in server.requests[0]["tools"]]


@pytest.mark.parametrize("plant_at", ["AGENTS.md", "command", "skill", "mention"])
def test_a_link_to_proc_self_environ_is_never_read(cli, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                   plant_at: str) -> None:
    """The process's own environment: the real process, holding the mark in its environment."""
    where, argv = PLANTS[plant_at]
    server.add(Reply(text="ok"))
    link = plant(workspace, where, Path("/proc/self/environ"))
    env = {"OWNREADS_PROBE": MARK}
    # Control: a process started with this environment reads the mark through the link.
    probe = subprocess.run([sys.executable, "-c", f"print(open({str(link)!r}, 'rb').read())"],
                           env={**os.environ, **env}, capture_output=True, text=True, check=True)
    assert MARK in probe.stdout
    r = cli(*argv, server=server, env=env)
    assert MARK not in sent(server)
    said = reason(r.err, "@notes.md" if plant_at == "mention" else str(link))
    assert "/proc/" in said and "/proc, /sys and /dev" in said, said


def test_a_fifo_or_a_device_is_named_and_never_waited_on(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    os.mkfifo(workspace / "AGENTS.md")
    (workspace / "CLAUDE.md").symlink_to("/dev/zero")
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server, timeout=30)
    assert r.code == 0, r.err
    fifo = reason(r.err, f"{workspace / 'AGENTS.md'} (instruction file)")
    assert str(workspace / "AGENTS.md") in fifo and "not a regular file" in fifo, fifo
    assert "/dev/zero" in reason(r.err, f"{workspace / 'CLAUDE.md'} (instruction file)")


def test_deny_rules_for_reading_cover_what_nanohermes_reads_itself(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                   workspace: Path) -> None:
    """nanohermes's read_file rule, and Claude Code's Read rule from .claude/settings.json."""
    private = workspace / "docs" / "private"
    private.mkdir(parents=True)
    (private / "plan.md").write_text(MARK)
    (workspace / "vault").mkdir()
    (workspace / "vault" / "keys.md").write_text(MARK)
    (workspace / "CLAUDE.md").write_text("Read @docs/private/plan.md and @vault/keys.md first.")
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(./vault/**)"]}}))
    server.add(Reply(text="ok"), Reply(text="ok"))
    r = turn("-p", "hi", server=server, config={"permissions": {"deny": ["read_file(docs/private/**)"]}})
    assert r.code == 0, r.err
    assert MARK not in sent(server)
    imported = f" (imported by {workspace / 'CLAUDE.md'})"
    assert reason(r.err, f"{private / 'plan.md'}{imported}").endswith(" read_file(docs/private/**)")
    assert reason(r.err, f"{workspace / 'vault' / 'keys.md'}{imported}").endswith(" read_file(./vault/**)")
    r = turn("-p", "summarise @vault/keys.md", server=server)
    assert MARK not in sent(server)
    assert reason(r.err, "@vault/keys.md").endswith(" read_file(./vault/**)")


def test_the_persons_own_files_may_link_anywhere_but_not_to_secrets(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                                    home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "my-notes" / "prefs.md"
    notes.parent.mkdir()
    notes.write_text("I like tabs.")
    claude = home / ".claude"
    claude.mkdir()
    (claude / "CLAUDE.md").symlink_to(notes)
    cfg = home / ".config" / "nanohermes"
    cfg.mkdir(parents=True)
    secret = targets(tmp_path, home)["secret"]
    (cfg / "AGENTS.md").symlink_to(secret)
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    assert r.code == 0, r.err
    system = server.requests[0]["messages"][0]["content"]
    assert f"## {claude / 'CLAUDE.md'}\nI like tabs." in system
    assert MARK not in sent(server)
    said = reason(r.err, f"{cfg / 'AGENTS.md'} (instruction file)")
    assert str(secret) in said and "secret file" in said, said


def test_stream_json_names_a_skipped_file_as_a_notice(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path, home: Path) -> None:
    outside = targets(tmp_path, home)["outside"]
    plant(workspace, "AGENTS.md", outside)
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    lines = r.lines()
    assert lines[0]["type"] == "system" and lines[0]["subtype"] == "init"
    notices = [x for x in lines if x.get("type") == "notice"]
    assert [n["level"] for n in notices] == ["warning"]
    assert notices[0]["text"].startswith(f"{workspace / 'AGENTS.md'} (instruction file) ")
    assert str(outside) in reason(notices[0]["text"], str(workspace / "AGENTS.md"))
    assert MARK not in sent(server)


def test_the_size_limit_lowered_names_the_file_with_exact_counts(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    (workspace / "AGENTS.md").write_text("x" * 11)
    (workspace / "CLAUDE.md").write_text("y" * 10)
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server, config={"limits": {"own_file_max_bytes": 10}})
    assert r.code == 0, r.err
    assert f"{workspace / 'AGENTS.md'} (instruction file) not read: it is 11 bytes, over the 10-byte limit for files " \
           "read into the prompt (limit own_file_max_bytes)" in r.err
    system = server.requests[0]["messages"][0]["content"]
    assert "y" * 10 in system and "x" * 11 not in system


# -- the reader itself ----------------------------------------------------------------------

def reader_for(workspace: Path, home: Path, **kw: Any) -> OwnReader:
    return OwnReader(workspace, store=home / "own-reads.json", **kw)


def test_what_the_reader_reads_and_refuses(workspace: Path, tmp_path: Path, home: Path) -> None:
    (workspace / "ok.md").write_text("fine")
    (workspace / "bin.md").write_bytes(b"a\x00b")
    (workspace / "folder.md").mkdir()
    (workspace / "loop.md").symlink_to("loop.md")
    (workspace / ".env").write_text(MARK)
    reader = reader_for(workspace, home, limits=Limits(own_file_max_bytes=100))
    got = reader.read(workspace / "ok.md", purpose="test")
    assert isinstance(got, OwnText) and got.text == "fine"
    # Each refused for what it is, named by where it leads (the wording: tests/test_wording_reads.py).
    cases = {"bin.md": ("refused", "binary"), "folder.md": ("refused", f"{workspace / 'folder.md'}, a folder"),
             "loop.md": ("error", "symlink"), ".env": ("refused", f"{workspace / '.env'}, a secret file"),
             "gone.md": ("missing", "")}
    for name, (kind, named) in cases.items():
        skipped = reader.read(workspace / name, purpose="test")
        assert isinstance(skipped, Skipped), name
        assert skipped.kind == kind and named in skipped.reason, (name, skipped)
    again = reader.read(workspace / "bin.md", purpose="command file")
    assert isinstance(again, Skipped) and str(again).startswith(f"{workspace / 'bin.md'} (command file) ")
    # What was skipped is named once (a missing file is no news).
    assert sorted(s.path.name for s in reader.take_unnamed()) == [".env", "bin.md", "bin.md", "folder.md", "loop.md"]
    assert reader.take_unnamed() == []


def test_a_yes_is_remembered_per_project_and_target(workspace: Path, tmp_path: Path, home: Path) -> None:
    outside = tmp_path / "shared.md"
    outside.write_text("shared rules")
    asked: list[ApprovalRequest] = []

    def answering(choice: str) -> Any:
        async def confirm(request: ApprovalRequest) -> ApprovalReply:
            asked.append(request)
            return ApprovalReply(choice)  # type: ignore[arg-type]
        return confirm

    reader = reader_for(workspace, home, asks=True)
    first = reader.read(outside, purpose="import")
    assert isinstance(first, Skipped) and first.kind == "asks" and list(reader.pending) == [str(outside)]
    assert asyncio.run(reader.ask(answering("once"))) == [str(outside)]
    assert asked[0].target == str(outside) and asked[0].rule == ""  # a yes or a no, nothing else
    assert isinstance(reader.read(outside, purpose="import"), OwnText)
    # A new session of the same project: read without a question.
    again = reader_for(workspace, home, asks=True)
    assert isinstance(again.read(outside, purpose="import"), OwnText) and not again.pending
    # Another project, or another file: asked again.
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    assert isinstance(reader_for(other_ws, home, asks=True).read(outside, purpose="import"), Skipped)
    (tmp_path / "second.md").write_text("more")
    assert isinstance(again.read(tmp_path / "second.md", purpose="import"), Skipped)
    # A no holds for the session, and is not remembered.
    no = reader_for(workspace, home, asks=True)
    no.read(tmp_path / "second.md", purpose="import")
    assert asyncio.run(no.ask(answering("deny"))) == []
    refused = no.read(tmp_path / "second.md", purpose="import")
    assert isinstance(refused, Skipped) and refused.reason.endswith("you answered no in this session")
    assert not no.pending
    assert isinstance(reader_for(workspace, home, asks=True).read(tmp_path / "second.md", purpose="import"), Skipped)


def test_nobody_is_asked_in_an_unattended_mode(workspace: Path, tmp_path: Path, home: Path) -> None:
    outside = tmp_path / "shared.md"
    outside.write_text("shared rules")
    for policy in (Policy(mode=Mode.GOAL), Policy(auto_approve=True)):
        reader = reader_for(workspace, home, asks=True, policy=lambda p=policy: p)  # type: ignore[misc]
        got = reader.read(outside, purpose="import")
        assert isinstance(got, Skipped) and "nobody is here to allow it" in got.reason
        assert not reader.pending


def test_an_ask_rule_for_reading_needs_a_yes_each_session(workspace: Path, home: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "x.md").write_text("x")
    policy = Policy(ask=(Rule("read_file", "docs/**"),))
    reader = reader_for(workspace, home, asks=True, policy=lambda: policy)
    got = reader.read(workspace / "docs" / "x.md", purpose="import")
    assert isinstance(got, Skipped) and (got.kind, got.rule) == ("asks", "read_file(docs/**)")

    async def yes(request: ApprovalRequest) -> ApprovalReply:
        return ApprovalReply("once")

    asyncio.run(reader.ask(yes))
    assert isinstance(reader.read(workspace / "docs" / "x.md", purpose="import"), OwnText)
    assert not (home / "own-reads.json").exists()  # not remembered past the session


def test_a_yes_before_the_first_turn_brings_the_file_and_the_skill_in(workspace: Path, tmp_path: Path,
                                                                     home: Path) -> None:
    """Asked through the UI's approval seam before the prompt is sent; the instructions and
    skills are read again, so the first request already carries them."""
    from nanohermes.assemble import build_agent
    from nanohermes.config import Config
    from nanohermes.common.events import ApprovalRequest as Request, Notice, RecordingUI
    from nanohermes.testing import ScriptedLLM

    shared = tmp_path / "shared"
    (shared / "deploy").mkdir(parents=True)
    (shared / "rules.md").write_text("SHARED rules")
    (shared / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it.\n---\nShip.")
    (workspace / "AGENTS.md").write_text("@../shared/rules.md")
    (workspace / ".claude" / "skills").mkdir(parents=True)
    (workspace / ".claude" / "skills" / "deploy").symlink_to(shared / "deploy")
    llm = ScriptedLLM([Reply(text="ok")])
    ui = RecordingUI(answers=["once", "once"])
    built = build_agent(Config(), workspace, ui, llm=llm, save_session=False, asks=True)
    assert "SHARED" not in built.agent.full_prompt()
    asyncio.run(built.agent.ask("hi"))
    assert sorted(r.target for r in ui.of(Request)) == [str(shared / "deploy" / "SKILL.md"), str(shared / "rules.md")]
    system = llm.requests[0]["messages"][0]["content"]
    assert "SHARED rules" in system and "- deploy: Ship it." in system
    assert "skill" in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert ui.of(Notice) == []  # nothing left unread to name


def test_a_project_command_reaching_out_is_asked_when_it_runs(workspace: Path, tmp_path: Path, home: Path) -> None:
    from nanohermes.turn.agent import Agent
    from nanohermes.config import Config
    from nanohermes.extensions.custom_commands import discover, prompt_for
    from nanohermes.common.events import RecordingUI
    from nanohermes.turn.runtime import Runtime
    from nanohermes.testing import ScriptedLLM

    shared = tmp_path / "review.md"
    shared.write_text("---\nmodel: big\n---\nReview $1 with care.")
    (workspace / ".claude" / "commands").mkdir(parents=True)
    (workspace / ".claude" / "commands" / "review.md").symlink_to(shared)
    ui = RecordingUI(answers=["deny", "once"])
    reader = reader_for(workspace, home, asks=True)
    runtime = Runtime(tools=[], config=Config(), workspace=workspace, ui=ui, policy=Policy(), reader=reader)
    Agent(llm=ScriptedLLM(), runtime=runtime, ui=ui, system_prompt="sys")
    pending = discover(workspace, reader).commands["review"]
    assert pending.pending and pending.body == "" and str(shared) in pending.description
    ready, _, notes = asyncio.run(prompt_for(pending, "a.py", runtime))  # answered no
    assert ready is None and notes[0].startswith("/review not run: ")
    assert str(shared) in reason(notes[0], f"{workspace / '.claude/commands/review.md'} (command file)")
    reader = reader_for(workspace, home, asks=True)  # a new session asks again after a no
    runtime.reader = reader
    ready, text, _ = asyncio.run(prompt_for(discover(workspace, reader).commands["review"], "a.py", runtime))
    assert ready is not None and ready.model == "big" and text == "Review a.py with care."
    assert not discover(workspace, reader_for(workspace, home, asks=True)).commands["review"].pending  # remembered


def test_a_read_rule_naming_a_folder_covers_the_files_in_it(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                            workspace: Path) -> None:
    """As for every reading tool: `read_file(notes)` covers notes/a.md, so an import of it is left out."""
    (workspace / "notes").mkdir()
    (workspace / "notes" / "a.md").write_text(MARK)
    (workspace / "AGENTS.md").write_text("See @notes/a.md.")
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server, config={"permissions": {"deny": ["read_file(notes)"]}})
    assert r.code == 0, r.err
    assert MARK not in sent(server)
    assert "denied by rule read_file(notes)" in r.err


@pytest.mark.parametrize("rule", ["read_file({ws}/notes/**)", "Read(/{ws}/notes/**)"])
def test_a_read_rule_naming_the_workspace_absolutely_covers_what_nanohermes_reads(  # type: ignore[no-untyped-def]
        turn, server: FakeServer, workspace: Path, rule: str) -> None:
    """The folder named by its absolute path (Claude Code's `//` is the file system's root):
    an import and a mention under it are left out."""
    (workspace / "notes").mkdir()
    (workspace / "notes" / "a.md").write_text(MARK)
    (workspace / "AGENTS.md").write_text("See @notes/a.md.")
    rule = rule.format(ws=workspace.resolve())
    server.add(Reply(text="ok"), Reply(text="ok"))
    r = turn("-p", "hi", server=server, config={"permissions": {"deny": [rule]}})
    assert r.code == 0, r.err
    assert MARK not in sent(server)
    assert "read_file(" in reason(r.err, f"{workspace / 'notes' / 'a.md'} (imported by {workspace / 'AGENTS.md'})")
    r = turn("-p", "summarise @notes/a.md", server=server, config={"permissions": {"deny": [rule]}})
    assert r.code == 0, r.err
    assert MARK not in sent(server)
    assert "read_file(" in reason(r.err, "@notes/a.md")
