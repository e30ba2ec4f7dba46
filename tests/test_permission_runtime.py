"""Permissions at run time: real commands, real files and symlinks, learned and saved rules,
and keys kept out of transcripts and `-p` output."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from nanohermes.assemble import build_policy
from nanohermes.config import Config, load_config, project_config_path, user_config_path
from nanohermes.common.events import ApprovalReply, ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.common.events import PermissionDenied
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Params
from nanohermes.tools.files import ReadFile
from nanohermes.tools.shell import RunCommand
from tool_support import TinyWrite

R = Rule.parse


def runtime(ws: Path, ui: RecordingUI, policy: Policy, config: Config | None = None) -> Runtime:
    return Runtime(tools=[RunCommand(), ReadFile()], config=config or Config(), workspace=ws, ui=ui, policy=policy)


def run(rt: Runtime, name: str, **args: object) -> str:
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name=name, arguments=json.dumps(args))]))
    return msg.content or ""


def ok(stdout: str = "(empty)") -> str:
    """What the real run_command returns for a command that succeeded."""
    return f"exit code: 0\n\nstdout:\n{stdout}\n\nstderr:\n(empty)"


def asked(ui: RecordingUI) -> list[ApprovalRequest]:
    return ui.of(ApprovalRequest)


# -- commands ------------------------------------------------------------------------------
def test_chained_command_is_asked_and_always_remembers_each_part(workspace: Path) -> None:
    ui = RecordingUI(answers=["always"])
    rt = runtime(workspace, ui, Policy(allow=(R("run_command(git log *)"),)))
    out = run(rt, "run_command", command="touch made && ls made")
    assert out == ok("made")
    [req] = asked(ui)
    assert req.rule == "run_command(touch <args>)"  # ls is read-only: only touch needed approval
    assert req.reason == "`touch made` is not allowed by a rule"
    assert run(rt, "run_command", command="touch other && ls other") == ok("other")
    assert len(asked(ui)) == 1  # learned: not asked again


def test_always_to_a_dry_run_does_not_let_the_destructive_form_run(workspace: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "untracked.txt").write_text("keep me\n")
    ui = RecordingUI(answers=["always", "deny"])
    rt = runtime(workspace, ui, Policy())
    assert "Would remove untracked.txt" in run(rt, "run_command", command="git clean -n")
    [req] = asked(ui)
    assert req.rule == "run_command(git clean -n <args>)"  # the rule is in the question, before the answer
    assert "Would remove untracked.txt" in run(rt, "run_command", command="git clean -n .")  # learned
    assert len(asked(ui)) == 1
    assert run(rt, "run_command", command="git clean -f -x -d") == DENIED  # asked, and refused
    assert [r.summary for r in asked(ui)][1:] == ["git clean -f -x -d"]
    assert (workspace / "untracked.txt").read_text() == "keep me\n"


class SlowToAnswer(RecordingUI):
    waited = 0.0  # how long the person took, as measured

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        started = time.monotonic()
        await asyncio.sleep(1.0)  # a person reading the prompt
        self.waited = time.monotonic() - started
        return await super().confirm(request)


def test_the_time_shown_for_a_call_leaves_out_the_approval_wait(workspace: Path) -> None:
    from nanohermes.common.events import ToolFinished

    ui = SlowToAnswer(answers=["yes"])
    started = time.monotonic()
    assert run(runtime(workspace, ui, Policy()), "run_command", command="touch made") == ok()
    whole = time.monotonic() - started
    [done] = ui.of(ToolFinished)
    # What the call shows fits in what the run took besides the person's wait, however slow the
    # machine made the command: no fixed bound.
    assert 0 < done.elapsed <= whole - ui.waited


def test_read_only_commands_run_without_asking(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    ui = RecordingUI()
    out = run(runtime(workspace, ui, Policy()), "run_command", command="cat a.txt | grep -c o && pwd")
    assert out == ok(f"2\n{workspace}")
    assert asked(ui) == []


def test_a_redirection_is_asked_and_refusal_leaves_no_file(workspace: Path) -> None:
    ui = RecordingUI(answers=["deny"])
    out = run(runtime(workspace, ui, Policy()), "run_command", command="ls > listing.txt")
    assert out == DENIED
    assert not (workspace / "listing.txt").exists()
    assert asked(ui)[0].reason == "`ls > listing.txt` writes listing.txt"


def test_accept_edits_lets_a_workspace_redirection_through(workspace: Path) -> None:
    ui = RecordingUI()
    out = run(runtime(workspace, ui, Policy(mode="accept-edits")), "run_command", command="echo hi > out.txt")
    assert out == ok()
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert asked(ui) == []


@pytest.mark.parametrize("command", [
    "echo x > ../outside.txt",  # outside the workspace
    "echo x >> .git/config",  # inside .git/
    "echo '{}' | tee .nanohermes/config.json",  # nanohermes's own config
    "echo x > escape/f",  # a symlink inside the workspace that points outside
    "cd .. && echo x > f",  # relative to a folder changed on the way
    'echo x > "$TARGET"',  # only known at run time
])
def test_protected_redirections_are_asked_even_in_accept_edits(workspace: Path, tmp_path: Path, command: str) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".nanohermes").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "escape").symlink_to(outside)
    ui = RecordingUI(answers=["deny"])
    out = run(runtime(workspace, ui, Policy(mode="accept-edits", allow=(R("run_command"),))), "run_command",
              command=command)
    assert out == DENIED
    [req] = asked(ui)
    assert req.reason.startswith("writes a protected path")
    assert req.rule == ""  # nothing to remember: protected writes are asked every time
    assert not (outside / "f").exists() and not (tmp_path / "outside.txt").exists()


def test_protected_redirection_is_refused_in_debug_mode(workspace: Path) -> None:
    ui = RecordingUI()
    out = run(runtime(workspace, ui, Policy(mode="debug")), "run_command", command="echo x > /tmp/x-debug")
    assert out.startswith("ERROR: protected path: ") and "(/tmp/x-debug " in out, out
    assert [(d.kind, d.tool) for d in ui.of(PermissionDenied)] == [("protected", "run_command")]
    assert asked(ui) == []


def test_learned_rules_survive_mode_changes(workspace: Path) -> None:
    ui = RecordingUI(answers=["always"])
    rt = runtime(workspace, ui, Policy())
    assert run(rt, "run_command", command="touch one") == ok()
    rt.set_mode("debug")  # commands are asked in debug mode, but the rule was learned
    assert run(rt, "run_command", command="touch two") == ok()
    rt.set_mode("plan")
    assert run(rt, "run_command", command="touch three").startswith("ERROR: run_command is not available in plan mode")
    rt.set_mode("default")
    assert run(rt, "run_command", command="touch four") == ok()
    assert len(asked(ui)) == 1
    assert [p.name for p in sorted(workspace.iterdir())] == ["four", "one", "two"]
    assert ["allow", "run_command(touch <args>)", "— learned this session"] in [
        re.split(r"\s{2,}", line.strip()) for line in rt.permissions_report()]


# -- paths ---------------------------------------------------------------------------------
@pytest.fixture
def tree(workspace: Path, tmp_path: Path) -> Path:
    (workspace / "docs").mkdir()
    (workspace / "private").mkdir()
    (workspace / "docs" / "a.md").write_text("doc")
    (workspace / "private" / "k").write_text("key material")
    (workspace / "docs" / "link").symlink_to(workspace / "private" / "k")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    (workspace / "docs" / "out").symlink_to(outside)
    return workspace


@pytest.mark.parametrize("path,expected", [
    ("docs/a.md", "1\tdoc"),
    ("docs/../private/k", "ERROR: denied by rule read_file(private/**)"),  # `..` resolved first
    ("docs/link", "ERROR: denied by rule read_file(private/**)"),  # a symlink is the file it points to
    ("./private//k", "ERROR: denied by rule read_file(private/**)"),
])
def test_path_rules_resolve_dots_and_symlinks(tree: Path, path: str, expected: str) -> None:
    ui = RecordingUI()
    assert run(runtime(tree, ui, Policy(deny=(R("read_file(private/**)"),))), "read_file", path=path) == expected


def test_a_symlink_out_of_the_workspace_is_matched_by_its_real_path(tree: Path, tmp_path: Path) -> None:
    ui = RecordingUI()
    policy = Policy(ask=(R("read_file(docs/**)"),), allow=(R(f"read_file({tmp_path}/*.txt)"),))
    rt = runtime(tree, ui, policy)
    assert run(rt, "read_file", path="docs/out") == "1\toutside"  # matched as /tmp/.../outside.txt
    assert asked(ui) == []


def test_reading_a_secret_file_asks_first(workspace: Path) -> None:
    (workspace / ".env").write_text("TOKEN=abc")
    ui = RecordingUI(answers=["deny", "always"])
    rt = runtime(workspace, ui, Policy())
    assert run(rt, "read_file", path=".env") == DENIED
    assert run(rt, "read_file", path=".env") == "1\tTOKEN=abc"
    assert [r.rule for r in asked(ui)] == ["read_file(.env)", "read_file(.env)"]
    assert run(rt, "read_file", path=".env") == "1\tTOKEN=abc"  # remembered
    assert len(asked(ui)) == 2


# -- always for this project ---------------------------------------------------------------
def test_always_for_this_project_is_saved_and_loaded_next_time(workspace: Path) -> None:
    cfg = project_config_path(workspace)
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"model": "m1", "permissions": {"deny": ["run_command(rm *)"]}}))
    ui = RecordingUI(answers=[ApprovalReply("project")])
    rt = runtime(workspace, ui, Policy())
    assert run(rt, "run_command", command="touch a && mkdir -p b") == ok()
    saved = json.loads(cfg.read_text())
    assert saved == {"model": "m1", "permissions": {"deny": ["run_command(rm *)"],
                                                    "allow": ["run_command(touch <args>)", "run_command(mkdir -p <args>)"]}}
    [learned] = [line for line in rt.permissions_report() if "run_command(touch <args>)" in line]
    assert re.split(r"\s{2,}", learned.strip())[:2] == ["allow", "run_command(touch <args>)"]
    assert learned.endswith(f" {cfg}") and "saved" in learned
    # A new session loads it, with the file as its origin.
    warnings: list[str] = []
    policy = build_policy(load_config(workspace).config, warnings)
    assert warnings == []
    assert [(str(r), r.origin) for r in policy.allow] == [("run_command(touch <args>)", str(cfg)),
                                                          ("run_command(mkdir -p <args>)", str(cfg))]
    ui2 = RecordingUI()
    assert run(runtime(workspace, ui2, policy), "run_command", command="touch c") == ok()
    assert asked(ui2) == []


def test_an_unreadable_project_config_is_not_overwritten(workspace: Path) -> None:
    cfg = project_config_path(workspace)
    cfg.parent.mkdir()
    cfg.write_text("{ not json")
    ui = RecordingUI(answers=[ApprovalReply("project")])
    rt = runtime(workspace, ui, Policy())
    assert run(rt, "run_command", command="touch a") == ok()
    assert cfg.read_text() == "{ not json"
    notes = [e.text for e in ui.events if type(e).__name__ == "Notice"]
    assert len(notes) == 1 and notes[0].startswith(f"could not save to {cfg} (")
    assert notes[0].endswith("remembered for this session only")
    assert run(rt, "run_command", command="touch b") == ok()
    assert len(asked(ui)) == 1


def test_rules_add_up_across_config_files_and_keep_their_origin(workspace: Path, home: Path) -> None:
    user = user_config_path()
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"permissions": {"deny": ["run_command(rm *)"], "allow": ["run_command(make *)"]},
                                "trusted_projects": [str(workspace)]}))
    proj = project_config_path(workspace)
    proj.parent.mkdir()
    proj.write_text(json.dumps({"permissions": {"allow": ["run_command(npm test)", "run_command(make *)"],
                                                "deny": ["web_fetch(evil.org)"]}}))
    warnings: list[str] = []
    policy = build_policy(load_config(workspace).config, warnings)
    assert [(str(r), r.origin) for r in policy.deny] == [("run_command(rm *)", str(user))]
    assert [(str(r), r.origin) for r in policy.allow] == [("run_command(make *)", str(user)),
                                                          ("run_command(npm test)", str(proj))]
    [malformed] = warnings
    assert malformed.startswith(f"{proj}: permissions.deny: ") and " 'web_fetch(evil.org)';" in malformed
    assert "`domain:example.com`" in malformed, malformed


# -- no terminal, and secrets kept out of what is written ----------------------------------
def test_malformed_rule_is_reported_at_startup_with_its_file(turn, server: FakeServer, home: Path) -> None:
    server.add(Reply(text="ok"))
    r = turn("-p", "x", server=server, config={"permissions": {"allow": ["run_command(", "read_file"]}})
    assert r.code == 0, r.err
    cfg = home / ".config" / "nanohermes" / "config.json"
    assert f"nanohermes: warning: {cfg}: permissions.allow: " in r.err and " 'run_command(';" in r.err


def test_secret_file_read_is_refused_without_a_terminal(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / ".env").write_text("DB_PASSWORD=hunter2hunter2")
    server.add(tool_reply(call("read_file", {"path": ".env"}, id="r")), Reply(text="ok"))
    r = turn("-p", "read .env", server=server)
    assert r.code == 0, r.err
    assert server.requests[1]["messages"][-1]["content"] == DENIED


KEY = "sk-live-0123456789abcdefXYZ"


def test_keys_are_redacted_in_json_output_and_transcript(cli, server: FakeServer, workspace: Path, home: Path) -> None:
    (workspace / "notes.txt").write_text(f"the key is {KEY}\n")
    server.add(tool_reply(call("read_file", {"path": "notes.txt"}, id="r")), Reply(text=f"I found {KEY} in notes."))
    r = cli("-p", f"where is {KEY}?", "--output-format", "json", server=server,
            env={"OPENAI_API_KEY": KEY, "GITHUB_TOKEN": "ghp_abcdefghijklmnop"})
    assert r.code == 0, r.err
    assert r.json()["result"] == "I found [REDACTED] in notes."
    assert KEY not in r.out and KEY not in r.err
    [transcript] = (home / ".local" / "share" / "nanohermes" / "sessions").glob("*/*.jsonl")
    text = transcript.read_text()
    assert KEY not in text
    lines = [json.loads(line) for line in text.splitlines()]
    contents = [m["message"].get("content") for m in lines if m["type"] == "message"]
    assert contents[0] == "where is [REDACTED]?"
    assert "1\tthe key is [REDACTED]" in contents
    # The model itself still got the real text: redaction is for what is written down.
    assert server.requests[1]["messages"][-1]["content"] == f"1\tthe key is {KEY}"


def test_keys_are_redacted_in_stream_json(cli, server: FakeServer, workspace: Path) -> None:
    (workspace / "notes.txt").write_text(f"token: {KEY}\n")
    server.add(tool_reply(call("read_file", {"path": "notes.txt"}, id="r")), Reply(text="done"))
    r = cli("-p", "read", "--output-format", "stream-json", server=server, config={"api_key": KEY})
    assert r.code == 0, r.err
    assert KEY not in r.out
    finished = next(e for e in r.lines() if e["type"] == "tool_finished")
    assert finished["result"] == "1\ttoken: [REDACTED]"


@pytest.mark.parametrize("fmt", ["text", "stream-json"])
def test_a_key_streamed_in_pieces_is_redacted_in_plain_and_streamed_output(cli, server: FakeServer, fmt: str) -> None:
    agents = {"helper": {"description": "Helps", "tools": []}}
    server.add(tool_reply(call("subagent", {"agent": "helper", "task": "say it", "wait": True})),
               Reply(text=f"child says {KEY}", chunk_size=3), Reply(text=f"The key: {KEY}!\nEnd.", chunk_size=3))
    r = cli("-p", "go", "--output-format", fmt, server=server, env={"OPENAI_API_KEY": KEY},
            config={"subagents": agents})
    assert r.code == 0, r.err
    assert KEY[:8] not in r.out  # no piece of the key either
    if fmt == "text":
        assert r.out == "The key: [REDACTED]!\nEnd.\n"
        return
    events = r.lines()
    text = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert text == "The key: [REDACTED]!\nEnd."
    child = "".join(e["event"]["text"] for e in events if e["type"] == "subagent_event"
                    and e["event"]["type"] == "text_delta")
    assert child == "child says [REDACTED]"


@dataclass(frozen=True, kw_only=True)
class PlainWrite(TinyWrite):
    """A writing tool with a rule subject that declares nothing about protected paths: the
    runtime still checks."""

    def rule_subject(self, args: Params) -> str | None:
        return args.path  # type: ignore[attr-defined]


@pytest.mark.parametrize("path,protected", [
    ("src.py", False), (".git/hooks/pre-commit", True), (".nanohermes/config.json", True), ("escape/x", True),
    ("../x", True), ("sub/../../x", True), ("extra/x", False),
])
def test_file_writes_to_protected_paths_are_asked_in_accept_edits(workspace: Path, tmp_path: Path, path: str,
                                                                   protected: bool) -> None:
    for d in (".git/hooks", ".nanohermes", "sub"):
        (workspace / d).mkdir(parents=True)
    (tmp_path / "away").mkdir()
    (workspace / "escape").symlink_to(tmp_path / "away")
    (tmp_path / "extra").mkdir()
    (workspace / "extra").symlink_to(tmp_path / "extra")
    ui = RecordingUI(answers=["deny"])
    rt = Runtime(tools=[PlainWrite()], config=Config(extra_write_roots=[str(tmp_path / "extra")]), workspace=workspace,
                 ui=ui, policy=Policy(mode="accept-edits"))
    out = run(rt, "write_file", path=path, content="x")
    assert out == (DENIED if protected else f"wrote {path}")
    assert len(asked(ui)) == (1 if protected else 0)


def test_project_answer_on_a_terminal_saves_the_rule(workspace: Path, home: Path, server: FakeServer) -> None:
    import os
    import sys

    import pexpect

    (workspace / ".env").write_text("A=1\n")
    server.add(tool_reply(call("read_file", {"path": ".env"}, id="r1")), Reply(text="first"),
               tool_reply(call("read_file", {"path": ".env"}, id="r2")), Reply(text="second"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "OPENAI_API_KEY": "k"}
    argv = ["-m", "nanohermes", "--base-url", server.base_url, "--model", "m", "-p", "read .env"]
    children: list[pexpect.spawn[str]] = []

    def spawn() -> pexpect.spawn[str]:
        children.append(pexpect.spawn(sys.executable, argv, cwd=str(workspace), env=env, encoding="utf-8", timeout=60))
        return children[-1]

    try:
        child = spawn()
        child.expect(r"\(\.env is on the secret-file list \(permissions\.secret_files\)\)")
        child.expect(r"\[a\]lways \(remembers read_file\(\.env\)\) / \[p\]roject")
        child.expect(r"\(Enter = yes\): ")  # the whole question is out: the answer is read after it
        child.sendline("p")
        child.expect("first")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        assert json.loads(project_config_path(workspace).read_text()) == {"permissions": {"allow": ["read_file(.env)"]}}
        assert server.requests[1]["messages"][-1]["content"] == "1\tA=1"
        # The next run reads it without asking (a prompt would never be answered): the rule was saved.
        child = spawn()
        assert child.expect(["Allow\\?", "second"]) == 1
        child.expect(pexpect.EOF)
        assert server.requests[3]["messages"][-1]["content"] == "1\tA=1"
    finally:
        for c in children:  # a failed expectation leaves no process behind
            if c.isalive():
                c.terminate(force=True)


def test_p_runs_read_only_commands_and_refuses_the_rest_without_a_terminal(turn, server: FakeServer,
                                                                           workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\ny\n")
    server.add(tool_reply(call("run_command", {"command": "cat a.txt | wc -l"}, id="r"),
                          call("run_command", {"command": "wc -l a.txt && touch made"}, id="w")),
               Reply(text="ok"))
    r = turn("-p", "count", server=server, config={"permissions": {"allow": ["run_command(git log *)"]}})
    assert r.code == 0, r.err
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert results == {"r": ok("2"), "w": DENIED}
    assert not (workspace / "made").exists()
