"""The gate's table: mode x rule x answer x tool effect -> verdict, its basis and the
confinement of the call's processes, judged in-process with real tools, files and answers."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.guard.gate import Grant, Refusal
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import Tool, ToolContext
from nanohermes.tools.files import ReadFile
from nanohermes.tools.git import GitCommit, GitStatus
from nanohermes.tools.shell import RunCommand
from nanohermes.tools.writes import WriteFile

TOOLS: dict[str, Tool] = {t.name: t for t in (RunCommand(), ReadFile(), WriteFile(), GitStatus(), GitCommit())}


@dataclass(frozen=True)
class Row:
    tool: str
    args: dict[str, Any]
    mode: str = "default"
    yes: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    answer: str | None = None  # the person's answer, when asked
    sandbox_mode: str = "auto"
    # expected: the kind of the refusal, or (basis, confinement policy or None when no process
    # is started)
    want: str | tuple[str, str | None] = "person"
    asked: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


ROWS = [
    # commands: what runs unasked, and how confined
    Row("run_command", {"command": "ls"}, want=("read-only", "read-only")),
    Row("run_command", {"command": "ls"}, yes=True, want=("read-only", "read-only")),
    Row("run_command", {"command": "ls"}, allow=("run_command(ls *)",), want=("read-only", "read-only")),
    Row("run_command", {"command": "touch x"}, answer="deny", asked=True),
    Row("run_command", {"command": "touch x"}, answer="once", asked=True, want=("person", "off")),
    Row("run_command", {"command": "touch x"}, allow=("run_command(touch *)",), want=("rule", "workspace-write")),
    Row("run_command", {"command": "touch x"}, yes=True, want=("unattended", "workspace-write")),
    Row("run_command", {"command": "touch x"}, mode="goal", want=("unattended", "workspace-write")),
    Row("run_command", {"command": "echo x > f"}, mode="accept-edits", want=("mode", "workspace-write")),
    Row("run_command", {"command": "touch x"}, yes=True, sandbox_mode="off", want=("unattended", "off")),
    Row("run_command", {"command": "ls"}, deny=("run_command(ls *)",), want="rule"),
    Row("run_command", {"command": "ls"}, mode="plan", want="mode"),
    Row("run_command", {"command": "touch x"}, mode="debug", answer="once", asked=True, want=("person", "off")),
    Row("run_command", {"command": "touch x"}, mode="goal", deny=("run_command(touch *)",), want="rule"),
    # nobody to ask, and only a question could clear a line the deny rules cannot see into
    Row("run_command", {"command": "rm $X"}, mode="goal", deny=("run_command(rm -rf *)",), want="unattended"),
    # a secret read allowed by a rule spelling it out runs with the file not withheld
    Row("run_command", {"command": "cat .env"}, allow=("run_command(cat .env)",), want=("rule", "workspace-write"),
        extra={"withheld": False}),
    Row("run_command", {"command": "touch x"}, yes=True, want=("unattended", "workspace-write"),
        extra={"withheld": True}),
    # reading tools: no process, no question
    Row("read_file", {"path": "a.txt"}, want=("read-only", None)),
    Row("read_file", {"path": "a.txt"}, mode="plan", want=("read-only", None)),
    Row("read_file", {"path": ".env"}, answer="deny", asked=True),
    # writing tools
    Row("write_file", {"path": "b.txt", "content": "b"}, answer="deny", asked=True),
    Row("write_file", {"path": "b.txt", "content": "b"}, answer="once", asked=True, want=("person", None)),
    Row("write_file", {"path": "b.txt", "content": "b"}, mode="accept-edits", want=("mode", None)),
    Row("write_file", {"path": "b.txt", "content": "b"}, allow=("write_file",), want=("rule", None)),
    Row("write_file", {"path": "b.txt", "content": "b"}, mode="plan", want="mode"),
    Row("write_file", {"path": "b.txt", "content": "b"}, mode="debug", want="mode"),
    Row("write_file", {"path": "../out.txt", "content": "o"}, mode="accept-edits", answer="deny", asked=True),  # protected
    Row("write_file", {"path": "../out.txt", "content": "o"}, yes=True, want="protected"),  # nobody to ask
    Row("write_file", {"path": "../out.txt", "content": "o"}, mode="goal", want="protected"),
    # git: the read-only tools start read-only processes; a commit earns what a command does
    Row("git_status", {}, want=("read-only", "read-only")),
    Row("git_status", {}, yes=True, want=("read-only", "read-only")),
    Row("git_commit", {"message": "m", "all": True}, yes=True, want=("unattended", "workspace-write")),
    Row("git_commit", {"message": "m", "all": True}, allow=("git_commit",), want=("rule", "workspace-write")),
    Row("git_commit", {"message": "m", "all": True}, answer="once", asked=True, want=("person", "off")),
    Row("git_commit", {"message": "m"}, mode="plan", want="mode"),
]


@pytest.fixture
def repo(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("a\n")
    (workspace / ".env").write_text("TOKEN=x\n")
    subprocess.run(["git", "add", "a.txt"], cwd=workspace, check=True)
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "a"],
                   cwd=workspace, check=True)
    (workspace / "a.txt").write_text("changed\n")  # something to commit
    return workspace


def judge(ws: Path, row: Row) -> tuple[Grant | Refusal, RecordingUI]:
    ui = RecordingUI(answers=[row.answer] if row.answer else [])
    policy = Policy(mode=row.mode, auto_approve=row.yes, allow=tuple(map(Rule.parse, row.allow)),
                    deny=tuple(map(Rule.parse, row.deny)))
    config = Config.from_dict({"sandbox": {"mode": row.sandbox_mode}})
    rt = Runtime(tools=list(TOOLS.values()), config=config, workspace=ws, ui=ui, policy=policy)
    tool = TOOLS[row.tool]
    args = tool.parse(row.args)
    return asyncio.run(rt.gate.judge(tool, args, ToolContext.of(rt, "c1"), tool.summary(args))), ui


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.mode}{'+yes' if r.yes else ''}-{r.tool}-"
                         f"{'/'.join(r.allow + r.deny) or 'norule'}-{r.answer or 'unasked'}-{r.args}")
def test_the_gate_decides_by_mode_rule_answer_and_effect(repo: Path, row: Row) -> None:
    verdict, ui = judge(repo, row)
    assert bool(ui.of(ApprovalRequest)) == row.asked
    if isinstance(row.want, str):
        assert isinstance(verdict, Refusal) and verdict.kind == row.want, verdict
        assert verdict.is_error == (row.want != "person")
        return
    assert isinstance(verdict, Grant), verdict
    basis, policy = row.want
    conf = verdict.attempt.confinement
    assert verdict.basis == basis and verdict.attempt.target is not None
    assert (conf.policy if conf is not None else None) == policy
    if "withheld" in row.extra:
        assert conf is not None
        hidden = {p for p, _, _ in conf.hidden}
        assert (str((repo / ".env").resolve()) in hidden) == row.extra["withheld"]


def test_always_remembers_the_rule_and_the_next_call_runs_on_it(repo: Path) -> None:
    ui = RecordingUI(answers=["always"])
    rt = Runtime(tools=list(TOOLS.values()), config=Config(), workspace=repo, ui=ui, policy=Policy())
    tool = TOOLS["run_command"]
    for _ in range(2):
        args = tool.parse({"command": "touch x"})
        verdict = asyncio.run(rt.gate.judge(tool, args, ToolContext.of(rt, "c"), "touch x"))
        assert isinstance(verdict, Grant)
    assert len(ui.of(ApprovalRequest)) == 1 and verdict.basis == "rule"
    assert [str(r) for r in rt.policy.allow] == ["run_command(touch <args>)"]


def test_a_parallel_call_an_always_answered_meanwhile_runs_on_the_rule_confined(repo: Path) -> None:
    """Two calls asked together: the person's "always" to the first answers the second too,
    which then runs as the learned rule lets it (in the sandbox), never as a person's yes."""
    ui = RecordingUI(answers=["always"])
    rt = Runtime(tools=list(TOOLS.values()), config=Config(), workspace=repo, ui=ui, policy=Policy())
    tool = TOOLS["run_command"]

    async def both() -> list[Grant | Refusal]:
        calls = []
        for i, line in enumerate(("touch x", "touch y")):
            args = tool.parse({"command": line})
            calls.append(rt.gate.judge(tool, args, ToolContext.of(rt, f"c{i}"), line))
        return list(await asyncio.gather(*calls))

    grants = asyncio.run(both())
    assert len(ui.of(ApprovalRequest)) == 1
    # Whichever reached the question first was answered by the person; the other by the rule.
    assert all(isinstance(g, Grant) for g in grants) and sorted(g.basis for g in grants if isinstance(g, Grant)) == [
        "person", "rule"]
    [second] = [g for g in grants if isinstance(g, Grant) and g.basis == "rule"]
    conf = second.attempt.confinement
    assert conf is not None and conf.policy == "workspace-write"
