"""apply_patch goes through the one resolver like write_file and edit_file: a patch path with a
`..` after a symlink is judged, read and written where the kernel goes, in both patch
formats, for updates, additions, deletions and renames; real files, real symlinks, the real
runtime and the real `nanohermes -p` process against the loopback fake server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import PROTECTED, Policy, Rule
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import build_tools
from nanohermes.tools.patch import written_paths

R = Rule.parse


def runtime(ws: Path, ui: RecordingUI, policy: Policy) -> Runtime:
    return Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=ui, policy=policy)


def run(rt: Runtime, name: str, **args: object) -> str:
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name=name, arguments=json.dumps(args))]))
    return msg.content or ""


def unified(path: str) -> str:
    return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-old\n+new\n"


def begin(path: str) -> str:
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-old\n+new\n*** End Patch\n"


def contents(ws: Path, *rels: str) -> dict[str, str | None]:
    return {rel: (ws / rel).read_text() if (ws / rel).exists() else None for rel in rels}


@pytest.fixture
def linked(workspace: Path) -> Path:
    """`l -> deep/er` with `x` and `deep/x`: `l/../x` is `deep/x` to the kernel, `x` as text."""
    (workspace / "deep" / "er").mkdir(parents=True)
    (workspace / "l").symlink_to("deep/er")
    (workspace / "x").write_text("old\n")
    (workspace / "deep" / "x").write_text("old\n")
    return workspace


@pytest.fixture
def outward(workspace: Path, tmp_path: Path) -> Path:
    """`l3 -> <tmp>/outside/sub`: `l3/../x` is `<tmp>/outside/x`, outside the workspace."""
    (tmp_path / "outside" / "sub").mkdir(parents=True)
    (workspace / "l3").symlink_to(tmp_path / "outside" / "sub")
    return tmp_path / "outside"


def test_the_subjects_are_the_paths_as_written_for_the_resolver() -> None:
    assert written_paths(unified("l/../x")) == ["l/../x"]
    assert written_paths("*** Begin Patch\n*** Update File: a\n*** Move to: l/../b\n@@\n-o\n+n\n"
                         "*** Delete File: ./c\n*** Add File: ../out\n+x\n*** Add File: ~/h\n+x\n*** End Patch\n") \
        == ["a", "l/../b", "./c"]  # `../out` and `~/h` are refused whatever the file system says


@pytest.mark.parametrize("patch", [unified, begin], ids=["unified", "begin-patch"])
def test_a_deny_rule_on_where_the_kernel_goes_refuses_the_patch_as_it_refuses_the_file_tools(
        linked: Path, patch: object) -> None:
    assert callable(patch)
    ui = RecordingUI()
    rt = runtime(linked, ui, Policy(auto_approve=True, deny=(R("apply_patch(deep/**)"), R("edit_file(deep/**)"),
                                                            R("write_file(deep/**)"))))
    assert run(rt, "apply_patch", diff=patch("l/../x")) == "ERROR: denied by rule apply_patch(deep/**)"
    assert run(rt, "edit_file", path="l/../x", old_string="old", new_string="new") \
        == "ERROR: denied by rule edit_file(deep/**)"
    assert run(rt, "write_file", path="l/../x", content="new\n") == "ERROR: denied by rule write_file(deep/**)"
    assert contents(linked, "x", "deep/x") == {"x": "old\n", "deep/x": "old\n"}
    # The plain spelling of the workspace's own x is not under deep/: patched, and only it.
    assert run(rt, "apply_patch", diff=patch("x")) == "patched x (1 hunk, +1 -1)"
    assert contents(linked, "x", "deep/x") == {"x": "new\n", "deep/x": "old\n"}
    assert ui.of(ApprovalRequest) == []


@pytest.mark.parametrize("form", ["unified", "begin-patch"])
def test_an_approved_patch_writes_the_file_the_kernel_path_names(linked: Path, form: str) -> None:
    ui = RecordingUI(answers=["yes"])
    rt = runtime(linked, ui, Policy(allow=(R("apply_patch(deep/**)"),)))
    diff = unified("l/../x") if form == "unified" else begin("l/../x")
    assert run(rt, "apply_patch", diff=diff) == "patched deep/x (1 hunk, +1 -1)"
    assert contents(linked, "x", "deep/x") == {"x": "old\n", "deep/x": "new\n"}
    [req] = ui.of(ApprovalRequest)  # asked: the allow rule covers deep/x, not the x the text names
    assert req.summary == "l/../x" and "--- a/deep/x\n+++ b/deep/x\n" in req.detail


@pytest.mark.parametrize("form", ["unified", "begin-patch"])
def test_adding_through_a_link_out_of_the_workspace_is_asked_in_accept_edits_like_write_file(
        workspace: Path, outward: Path, form: str) -> None:
    ui = RecordingUI(answers=["deny", "deny"])
    rt = runtime(workspace, ui, Policy(mode="accept-edits"))
    assert run(rt, "write_file", path="l3/../x", content="x\n") == DENIED
    diff = ("--- /dev/null\n+++ b/l3/../x\n@@ -0,0 +1 @@\n+x\n" if form == "unified"
            else "*** Begin Patch\n*** Add File: l3/../x\n+x\n*** End Patch\n")
    assert run(rt, "apply_patch", diff=diff) == DENIED
    wrote, patched = ui.of(ApprovalRequest)
    assert wrote.reason == patched.reason == f"{PROTECTED}: {outward / 'x'} is outside the workspace"
    assert f"+++ {outward / 'x'}" in patched.detail and "+x" in patched.detail  # names <tmp>/outside/x
    assert not (workspace / "x").exists() and not (outward / "x").exists()
    # Approved, it creates the file that was asked about, outside, not the workspace's x.
    ui = RecordingUI(answers=["yes"])
    assert run(runtime(workspace, ui, Policy(mode="accept-edits")), "apply_patch", diff=diff) \
        == f"created {outward / 'x'}" + (" (1 hunk, +1 -0)" if form == "unified" else "")
    assert (outward / "x").read_text() == "x\n" and not (workspace / "x").exists()


def test_a_rename_whose_destination_goes_through_a_link_and_dots(linked: Path) -> None:
    (linked / "a.txt").write_text("a\n")
    move = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: l/../moved.txt\n@@\n-a\n+A\n*** End Patch\n"
    rename = "diff --git a/a.txt b/l/../moved.txt\nsimilarity index 100%\nrename from a.txt\nrename to l/../moved.txt\n"
    ui = RecordingUI()
    deny = runtime(linked, ui, Policy(auto_approve=True, deny=(R("apply_patch(deep/**)"),)))
    for diff in (move, rename):
        assert run(deny, "apply_patch", diff=diff) == "ERROR: denied by rule apply_patch(deep/**)"
    assert contents(linked, "a.txt", "moved.txt", "deep/moved.txt") == {
        "a.txt": "a\n", "moved.txt": None, "deep/moved.txt": None}
    rt = runtime(linked, ui, Policy(mode="accept-edits"))
    assert run(rt, "apply_patch", diff=move) == "renamed a.txt -> deep/moved.txt (1 hunk, +1 -1)"
    assert contents(linked, "a.txt", "moved.txt", "deep/moved.txt") == {
        "a.txt": None, "moved.txt": None, "deep/moved.txt": "A\n"}
    back = ("diff --git a/l/../moved.txt b/a.txt\nsimilarity index 100%\n"
            "rename from l/../moved.txt\nrename to a.txt\n")
    assert run(rt, "apply_patch", diff=back) == "renamed deep/moved.txt -> a.txt"
    assert run(rt, "apply_patch", diff=rename) == "renamed a.txt -> deep/moved.txt"
    assert contents(linked, "a.txt", "moved.txt", "deep/moved.txt") == {
        "a.txt": None, "moved.txt": None, "deep/moved.txt": "A\n"}
    assert ui.of(ApprovalRequest) == []


@pytest.mark.parametrize("diff", [
    "--- a/l/../x\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n",
    "*** Begin Patch\n*** Delete File: l/../x\n*** End Patch\n",
], ids=["unified", "begin-patch"])
def test_a_delete_through_a_link_and_dots_removes_the_judged_file(linked: Path, diff: str) -> None:
    ui = RecordingUI()
    deny = runtime(linked, ui, Policy(auto_approve=True, deny=(R("apply_patch(deep/**)"),)))
    assert run(deny, "apply_patch", diff=diff) == "ERROR: denied by rule apply_patch(deep/**)"
    rt = runtime(linked, ui, Policy(mode="accept-edits"))
    assert run(rt, "apply_patch", diff=diff) == "deleted deep/x"
    assert contents(linked, "x", "deep/x") == {"x": "old\n", "deep/x": None}


def test_two_spellings_of_one_file_are_one_file_to_the_patch(linked: Path) -> None:
    (linked / "deep" / "x").write_text("one\ntwo\n")
    diff = ("--- a/deep/x\n+++ b/deep/x\n@@ -1 +1 @@\n-one\n+1\n"
            "--- a/l/../x\n+++ b/l/../x\n@@ -2 +2 @@\n-two\n+2\n")
    rt = runtime(linked, RecordingUI(), Policy(mode="accept-edits"))
    assert run(rt, "apply_patch", diff=diff).split("\n") == ["patched deep/x (1 hunk, +1 -1)"] * 2
    assert contents(linked, "x", "deep/x") == {"x": "old\n", "deep/x": "1\n2\n"}


def test_all_or_nothing_holds_when_one_path_is_refused(linked: Path, outward: Path) -> None:
    (linked / "a.txt").write_text("old\n")
    both = unified("a.txt") + "--- /dev/null\n+++ b/l3/../x\n@@ -0,0 +1 @@\n+x\n"
    ui = RecordingUI(answers=["deny"])
    rt = runtime(linked, ui, Policy(mode="accept-edits"))
    assert run(rt, "apply_patch", diff=both) == DENIED  # one path outside: the whole patch is asked
    [req] = ui.of(ApprovalRequest)
    assert req.reason == f"{PROTECTED}: {outward / 'x'} is outside the workspace"
    deny = runtime(linked, ui, Policy(auto_approve=True, deny=(R("apply_patch(deep/**)"),)))
    moves = ("*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n"
             "*** Update File: x\n*** Move to: l/../y\n@@\n-old\n+new\n*** End Patch\n")
    assert run(deny, "apply_patch", diff=moves) == "ERROR: denied by rule apply_patch(deep/**)"
    out = run(rt, "apply_patch", diff=unified("a.txt") + unified("l/../../x"))  # leaves the workspace as text
    assert out.startswith("ERROR: l/../../x: ") and "leaves the workspace" in out, out
    assert contents(linked, "a.txt", "x", "deep/x", "deep/y") == {
        "a.txt": "old\n", "x": "old\n", "deep/x": "old\n", "deep/y": None}
    assert not (outward / "x").exists() and len(ui.of(ApprovalRequest)) == 1


# -- the real process ----------------------------------------------------------------------
def results(server: FakeServer, request: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"}


def test_cli_a_deny_rule_refuses_the_patch_through_a_link_and_dots_even_with_yes(
        turn, server: FakeServer, linked: Path) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("apply_patch", {"diff": unified("l/../x")}, id="u"),
                          call("apply_patch", {"diff": begin("l/../x")}, id="b"),
                          call("edit_file", {"path": "l/../x", "old_string": "old", "new_string": "new"}, id="e"),
                          call("write_file", {"path": "l/../x", "content": "new\n"}, id="w")),
               Reply(text="done"))
    deny = ["apply_patch(deep/**)", "edit_file(deep/**)", "write_file(deep/**)"]
    r = turn("-p", "patch it", "--yes", server=server, config={"permissions": {"deny": deny}})
    assert r.code == 0, r.err
    assert results(server, 1) == {"u": "ERROR: denied by rule apply_patch(deep/**)",
                                  "b": "ERROR: denied by rule apply_patch(deep/**)",
                                  "e": "ERROR: denied by rule edit_file(deep/**)",
                                  "w": "ERROR: denied by rule write_file(deep/**)"}
    assert contents(linked, "x", "deep/x") == {"x": "old\n", "deep/x": "old\n"}


def test_cli_accept_edits_refuses_a_patch_through_a_link_out_of_the_workspace_like_write_file(
        turn, server: FakeServer, workspace: Path, outward: Path) -> None:  # type: ignore[no-untyped-def]
    add = "*** Begin Patch\n*** Add File: l3/../x\n+x\n*** End Patch\n"
    server.add(tool_reply(call("apply_patch", {"diff": add}, id="p"),
                          call("write_file", {"path": "l3/../x", "content": "x\n"}, id="w")),
               Reply(text="done"))
    r = turn("-p", "add it", "--mode", "accept-edits", server=server)
    assert r.code == 0, r.err
    assert results(server, 1) == {"p": DENIED, "w": DENIED}  # asked, and no one is there to answer
    assert not (workspace / "x").exists() and not (outward / "x").exists()


ADD = "--- /dev/null\n+++ b/sub/f\n@@ -0,0 +1 @@\n+x\n"
UPDATE = "*** Begin Patch\n*** Update File: sub/f\n@@\n-old\n+new\n*** End Patch\n"


@pytest.mark.parametrize(("diff", "there", "verb"), [(ADD, [], "write"), (ADD, ["f"], "read"), (UPDATE, ["f"], "read")],
                         ids=["add", "add-over-a-file-there", "update"])
def test_a_symlink_swapped_in_while_asking_makes_the_patch_fail_not_land_elsewhere(
        workspace: Path, tmp_path: Path, diff: str, there: list[str], verb: str) -> None:
    """The judged path is opened folder by folder without following links: a link put in
    its place while the person is asked makes the patch fail instead of landing outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in there:
        (outside / name).write_text("old\n")
    (workspace / "sub").mkdir()
    if diff == UPDATE:
        (workspace / "sub" / "f").write_text("old\n")

    class SwapWhileAsking(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> object:  # type: ignore[override]
            if (workspace / "sub" / "f").exists():
                (workspace / "sub" / "f").unlink()
            (workspace / "sub").rmdir()
            (workspace / "sub").symlink_to(outside)
            return await super().confirm(request)

    out = run(runtime(workspace, SwapWhileAsking(answers=["yes"]), Policy()), "apply_patch", diff=diff)
    assert out.startswith(f"ERROR: cannot {verb} sub/f: "), out  # the wording: tests/test_wording_rules.py
    assert sorted(p.name for p in outside.iterdir()) == there
    assert all((outside / name).read_text() == "old\n" for name in there)
