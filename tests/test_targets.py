"""One Target per call: the path a rule judges is the path a tool uses (symlinks and `..`
on real files), a tool is judged from what it declares rather than its name, and a patch is
judged on every path it touches."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from tool_support import WriteParams

from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import PROTECTED, Policy, Rule
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.tools import (
    Approval,
    Attempt,
    Effect,
    Params,
    SubjectKind,
    Tool,
    ToolContext,
    build_tools,
)
from nanohermes.tools.patch import touched_paths

R = Rule.parse


def runtime(ws: Path, ui: RecordingUI, policy: Policy, tools: list[Tool] | None = None) -> Runtime:
    return Runtime(tools=tools or build_tools(), config=Config(), workspace=ws, ui=ui, policy=policy)


def run(rt: Runtime, name: str, **args: object) -> str:
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name=name, arguments=json.dumps(args))]))
    return msg.content or ""


@pytest.fixture
def linked(workspace: Path) -> Path:
    """`l -> deep/er`: `l/../x` is `deep/x` to the kernel and `x` to a reader of the text."""
    (workspace / "deep" / "er").mkdir(parents=True)
    (workspace / "secret").mkdir()
    (workspace / "l").symlink_to("deep/er")
    return workspace


def files_under(ws: Path) -> list[str]:
    return sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if p.is_file() and not p.is_symlink())


# -- write_file, edit_file, apply_patch, read_file through a symlink and `..` --------------
def test_write_through_a_link_and_dots_is_refused_by_a_deny_rule_on_either_reading(linked: Path) -> None:
    ui = RecordingUI(answers=["yes"])
    rt = runtime(linked, ui, Policy(mode="accept-edits", deny=(R("write_file(secret/**)"),)))
    assert run(rt, "write_file", path="l/../secret/a", content="x") == "ERROR: denied by rule write_file(secret/**)"
    assert files_under(linked) == [] and ui.of(ApprovalRequest) == []


def test_write_through_a_link_and_dots_is_asked_when_the_allow_rule_covers_one_reading(linked: Path) -> None:
    ui = RecordingUI(answers=["deny", "yes"])
    rt = runtime(linked, ui, Policy(allow=(R("write_file(deep/**)"),)))
    assert run(rt, "write_file", path="l/../x", content="one") == DENIED
    assert files_under(linked) == []
    # Approved, it writes the very file that was judged: deep/x, where the kernel goes.
    assert run(rt, "write_file", path="l/../x", content="two") == "created deep/x (3 bytes, 1 line)"
    assert files_under(linked) == ["deep/x"] and (linked / "deep" / "x").read_text() == "two"
    assert run(rt, "write_file", path="deep/y", content="3") == "created deep/y (1 bytes, 1 line)"  # plainly inside
    assert len(ui.of(ApprovalRequest)) == 2


def test_edit_through_a_link_and_dots(linked: Path) -> None:
    for rel in ("secret/a", "deep/secret/a", "x", "deep/x"):
        (linked / rel).parent.mkdir(parents=True, exist_ok=True)
        (linked / rel).write_text("old\n")
    ui = RecordingUI(answers=["yes"])
    deny = runtime(linked, ui, Policy(mode="accept-edits", deny=(R("edit_file(secret/**)"),)))
    out = run(deny, "edit_file", path="l/../secret/a", old_string="old", new_string="new")
    assert out == "ERROR: denied by rule edit_file(secret/**)"
    allow = runtime(linked, ui, Policy(allow=(R("edit_file(deep/**)"),)))
    out = run(allow, "edit_file", path="l/../x", old_string="old", new_string="new")
    assert out.startswith("edited deep/x: replaced 1 occurrence"), out  # the file the kernel reaches
    [req] = ui.of(ApprovalRequest)  # asked: the rule covers deep/x, not the x the text names
    assert req.tool == "edit_file" and "+new" in req.detail
    assert {rel: (linked / rel).read_text() for rel in ("secret/a", "deep/secret/a", "x", "deep/x")} == {
        "secret/a": "old\n", "deep/secret/a": "old\n", "x": "old\n", "deep/x": "new\n"}


def test_patch_through_a_link_and_dots(linked: Path) -> None:
    (linked / "secret" / "a").write_text("old\n")
    (linked / "x").write_text("old\n")
    (linked / "deep" / "x").write_text("old\n")  # the file the patch reaches: it applies, so it is asked

    def patch(path: str) -> str:
        return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-old\n+new\n"

    ui = RecordingUI(answers=["deny"])
    deny = runtime(linked, ui, Policy(mode="accept-edits", deny=(R("apply_patch(secret/**)"),)))
    assert run(deny, "apply_patch", diff=patch("l/../secret/a")) == "ERROR: denied by rule apply_patch(secret/**)"
    allow = runtime(linked, ui, Policy(allow=(R("apply_patch(deep/**)"),)))
    assert run(allow, "apply_patch", diff=patch("l/../x")) == DENIED  # asked: the rule covers deep/x, not the x the text names
    assert len(ui.of(ApprovalRequest)) == 1
    assert (linked / "secret" / "a").read_text() == "old\n" and (linked / "x").read_text() == "old\n"
    assert (linked / "deep" / "x").read_text() == "old\n"


def test_read_through_a_link_and_dots_is_denied_and_its_secret_check_sees_both_readings(linked: Path) -> None:
    (linked / "secret" / "a").write_text("classified")
    (linked / ".env").write_text("TOKEN=top")
    (linked / "deep" / ".env").write_text("DEEP=1")
    ui = RecordingUI(answers=["deny", "yes"])
    deny = runtime(linked, ui, Policy(deny=(R("read_file(secret/**)"),)))
    assert run(deny, "read_file", path="l/../secret/a") == "ERROR: denied by rule read_file(secret/**)"
    # A rule naming deep/** names deep/.env, not the .env the text also names: asked.
    rt = runtime(linked, ui, Policy(allow=(R("read_file(deep/**)"),)))
    assert run(rt, "read_file", path="l/../.env") == DENIED
    [req] = ui.of(ApprovalRequest)
    assert req.reason.startswith("deep/.env ") and req.reason.endswith(" (permissions.secret_files)"), req.reason
    assert req.rule == "read_file(deep/.env), read_file(.env)"
    assert run(rt, "read_file", path="l/../.env") == "1\tDEEP=1"  # approved: the file judged, where the kernel goes


def test_a_symlink_swapped_in_after_the_check_is_not_followed(linked: Path, tmp_path: Path) -> None:
    """The judged path is opened folder by folder without following links: a link put in
    its place after the question (here: while the person is asked) makes the write fail
    instead of landing elsewhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (linked / "sub").mkdir()

    class SwapWhileAsking(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> object:  # type: ignore[override]
            (linked / "sub").rmdir()
            (linked / "sub").symlink_to(outside)
            return await super().confirm(request)

    ui = SwapWhileAsking(answers=["yes"])
    out = run(runtime(linked, ui, Policy()), "write_file", path="sub/f", content="x")
    assert out.startswith("ERROR: cannot write sub/f: ") and "symlink" in out and "nothing was written" in out, out
    assert list(outside.iterdir()) == []


# -- a tool is judged by what it declares, whatever its name -------------------------------
@dataclass(frozen=True, kw_only=True)
class Scribble(Tool):
    """Like write_file, under a name no permission table knows."""

    name: ClassVar[str] = "scribble"
    description: ClassVar[str] = "write a file"
    params: ClassVar[type[Params]] = WriteParams
    approval: ClassVar[Approval] = "edit"
    kind: ClassVar[SubjectKind] = "path"
    effect: ClassVar[Effect] = "write"

    def rule_subject(self, args: Params) -> str | None:
        assert isinstance(args, WriteParams)
        return args.path

    async def run(self, args: Params, ctx: ToolContext, attempt: Attempt) -> str:
        assert isinstance(args, WriteParams)
        [real] = self.resolved(args, ctx, attempt).paths
        real.write_text(args.content)
        return f"wrote {real}"


def test_a_tool_that_declares_writing_a_path_is_judged_as_a_writer(workspace: Path, tmp_path: Path) -> None:
    ui = RecordingUI(answers=["deny"])
    rt = runtime(workspace, ui, Policy(mode="accept-edits"), tools=[Scribble()])
    assert run(rt, "scribble", path="in.txt", content="x") == f"wrote {workspace / 'in.txt'}"
    assert ui.of(ApprovalRequest) == []  # accept-edits: an edit inside the workspace
    assert run(rt, "scribble", path=str(tmp_path / "out.txt"), content="x") == DENIED
    [req] = ui.of(ApprovalRequest)
    assert req.reason == f"{PROTECTED}: {tmp_path / 'out.txt'} is outside the workspace"
    assert not (tmp_path / "out.txt").exists()
    assert run(rt, "scribble", path="../out.txt", content="x") == DENIED
    for mode in ("debug", "plan"):
        rt.set_mode(mode)
        assert [t["function"]["name"] for t in rt.specs()] == []
        assert run(rt, "scribble", path="in.txt", content="y") == f"ERROR: scribble is not available in {mode} mode"
    assert (workspace / "in.txt").read_text() == "x"


# -- patches: every path they touch --------------------------------------------------------
TWO_FILES = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
             "--- a/secret/k\n+++ b/secret/k\n@@ -1 +1 @@\n-k\n+K\n")
RENAME_OUT = ("diff --git a/secret/k b/pub/k\nsimilarity index 100%\nrename from secret/k\nrename to pub/k\n")
DELETE_BESIDE = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
                 "--- a/secret/k\n+++ /dev/null\n@@ -1 +0,0 @@\n-k\n")


def test_touched_paths_lists_every_end_of_every_file() -> None:
    assert touched_paths(TWO_FILES) == ["a.txt", "secret/k"]
    assert touched_paths(RENAME_OUT) == ["secret/k", "pub/k"]
    assert touched_paths(DELETE_BESIDE) == ["a.txt", "secret/k"]
    assert touched_paths("--- /dev/null\n+++ b/./n/../new.txt\n@@ -0,0 +1 @@\n+x\n") == ["new.txt"]
    assert touched_paths("not a diff") == []


@pytest.mark.parametrize("diff", [TWO_FILES, RENAME_OUT, DELETE_BESIDE], ids=["two-files", "rename-out", "delete"])
def test_a_path_deny_rule_stops_a_patch_that_touches_the_path_anywhere(workspace: Path, diff: str) -> None:
    (workspace / "secret").mkdir()
    (workspace / "secret" / "k").write_text("k\n")
    (workspace / "a.txt").write_text("a\n")
    for mode in ("default", "accept-edits", "goal"):
        rt = runtime(workspace, RecordingUI(answers=["yes"]), Policy(mode=mode, deny=(R("apply_patch(secret/**)"),)))
        assert run(rt, "apply_patch", diff=diff) == "ERROR: denied by rule apply_patch(secret/**)"
    assert files_under(workspace) == ["a.txt", "secret/k"]
    assert (workspace / "a.txt").read_text() == "a\n" and (workspace / "secret" / "k").read_text() == "k\n"


def test_an_allow_rule_must_cover_every_path_of_a_patch(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    both = ("--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
            "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n")
    ui = RecordingUI(answers=["deny"])
    rt = runtime(workspace, ui, Policy(allow=(R("apply_patch(src/**)"),)))
    assert run(rt, "apply_patch", diff=both) == DENIED
    assert len(ui.of(ApprovalRequest)) == 1
    assert run(rt, "apply_patch", diff=both.split("--- a/b.txt")[0]) == "patched src/a.txt (1 hunk, +1 -1)"
    assert len(ui.of(ApprovalRequest)) == 1  # one path, covered: not asked
    assert (workspace / "b.txt").read_text() == "b\n"


def test_a_patch_writing_a_protected_path_among_others_is_asked_in_accept_edits(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / "a.txt").write_text("a\n")
    diff = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
            "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+evil\n")
    ui = RecordingUI(answers=["deny"])
    assert run(runtime(workspace, ui, Policy(mode="accept-edits")), "apply_patch", diff=diff) == DENIED
    [req] = ui.of(ApprovalRequest)
    assert req.reason.startswith("writes a protected path")
    assert not (workspace / ".git" / "hooks").exists() and (workspace / "a.txt").read_text() == "a\n"


@pytest.mark.parametrize("path", [".husky/pre-commit", "scripts/hooks/pre-commit", "shared.gitconfig", "sub/HEAD"])
def test_a_file_git_reads_outside_dot_git_is_asked_in_accept_edits(workspace: Path, path: str) -> None:
    """husky's hooks, a core.hooksPath folder (made or not yet) and a file include.path names
    run code at the person's next commit, as .git/hooks does: a file tool's write there is
    asked, in every mode. (A folder that only looks like a repository, `sub/HEAD`, is no
    repository to any git nanohermes runs or confines: an edit as any other.)"""
    import subprocess

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    for key, value in (("core.hooksPath", "scripts/hooks"), ("include.path", "../shared.gitconfig")):
        subprocess.run(["git", "-C", str(workspace), "config", key, value], check=True)
    (workspace / "shared.gitconfig").write_text("[user]\n\tname = x\n")
    ui = RecordingUI(answers=["deny"])
    rt = runtime(workspace, ui, Policy(mode="accept-edits"))
    if (workspace / path).exists():
        run(rt, "read_file", path=path)  # read first, as a write over a file needs
    result = run(rt, "write_file", path=path, content="touch owned\n")
    if path == "sub/HEAD":
        assert ui.of(ApprovalRequest) == [] and (workspace / path).read_text() == "touch owned\n"
        return
    assert result == DENIED
    [req] = ui.of(ApprovalRequest)
    assert req.reason.startswith("writes a protected path")
    assert not (workspace / path).exists() or (workspace / path).read_text() != "touch owned\n"


@dataclass(frozen=True, kw_only=True)
class Unsure(Scribble):
    """A tool whose declaration fails: what it touches cannot be told."""

    name: ClassVar[str] = "unsure"

    def subjects(self, args: Params) -> list[str]:
        raise RuntimeError("no idea")


@pytest.mark.parametrize("mode", ["default", "goal"])
def test_a_call_whose_target_cannot_be_computed_is_refused(workspace: Path, mode: str) -> None:
    ui = RecordingUI(answers=["yes"])
    out = run(runtime(workspace, ui, Policy(mode=mode), tools=[Unsure()]), "unsure", path="a", content="x")
    assert out.startswith("ERROR: unsure ") and "(RuntimeError: no idea)" in out and "refused" in out, out
    assert ui.of(ApprovalRequest) == [] and list(workspace.iterdir()) == []


def test_a_path_with_a_nul_byte_is_refused_before_any_question(workspace: Path) -> None:
    ui = RecordingUI(answers=["yes"])
    out = run(runtime(workspace, ui, Policy()), "write_file", path="a\u0000b", content="x")
    assert out.startswith("ERROR: path 'a\\x00b' ") and "NUL byte" in out, out
    assert ui.of(ApprovalRequest) == []
