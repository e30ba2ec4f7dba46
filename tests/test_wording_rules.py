"""What a refusal by the permission rules says, each message once, through `-p` against the fake
server. The other tests assert the refusal's kind, its subject and the rule; rewording a message
changes one row here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from exec_support import call as run_tool
from exec_support import make_runtime

from nanohermes.config import Config
from nanohermes.common.events import ApprovalReply, ApprovalRequest, RecordingUI
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import build_tools

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


def test_a_symlink_that_appears_while_a_person_is_asked_says(workspace: Path, tmp_path: Path) -> None:
    (workspace / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()

    class SwapWhileAsking(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> object:  # type: ignore[override]
            (workspace / "sub").rmdir()
            (workspace / "sub").symlink_to(outside)
            return await super().confirm(request)

    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=SwapWhileAsking(answers=["yes"]),
                 policy=Policy())
    assert run_tool(rt, "write_file", path="sub/f", content="x") == (
        "ERROR: cannot write sub/f: a symlink appeared in its path after it was checked; nothing was written: check "
        "the path and try again")


# apply_patch: a link put in the judged path's place while the person is asked, met while
# reading the file to patch (nothing changed yet) or while writing (what was written put back).
SWAPPED_PATCH = [
    ("add", "--- /dev/null\n+++ b/sub/f\n@@ -0,0 +1 @@\n+x\n", False,
     "ERROR: cannot write sub/f: a symlink appeared in its path after it was checked; every file was restored: check "
     "the path and try again"),
    ("update", "*** Begin Patch\n*** Update File: sub/f\n@@\n-old\n+new\n*** End Patch\n", True,
     "ERROR: cannot read sub/f: a symlink appeared in its path after it was checked; no file was changed: check the "
     "path and try again"),
]


@pytest.mark.parametrize("diff,there,text", [r[1:] for r in SWAPPED_PATCH], ids=[r[0] for r in SWAPPED_PATCH])
def test_a_symlink_that_appears_while_a_patch_is_asked_about_says(workspace: Path, tmp_path: Path, diff: str,
                                                                 there: bool, text: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "sub").mkdir()
    if there:
        (workspace / "sub" / "f").write_text("old\n")
        (outside / "f").write_text("old\n")

    class SwapWhileAsking(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> object:  # type: ignore[override]
            if (workspace / "sub" / "f").exists():
                (workspace / "sub" / "f").unlink()
            (workspace / "sub").rmdir()
            (workspace / "sub").symlink_to(outside)
            return await super().confirm(request)

    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=SwapWhileAsking(answers=["yes"]),
                 policy=Policy())
    assert run_tool(rt, "apply_patch", diff=diff) == text


def test_a_tool_that_cannot_say_what_it_touches_says(workspace: Path) -> None:
    from test_targets import Unsure

    rt = Runtime(tools=[Unsure()], config=Config(), workspace=workspace, ui=RecordingUI(), policy=Policy(mode="goal"))
    assert run_tool(rt, "unsure", path="a", content="x") == (
        "ERROR: unsure cannot say what this call touches (RuntimeError: no idea); the call was refused")


def test_a_path_with_a_nul_byte_says(workspace: Path) -> None:
    assert run_tool(make_runtime(workspace), "write_file", path="a\x00b", content="x") == (
        "ERROR: path 'a\\x00b' contains a NUL byte; pass a plain file path")


def test_a_secret_file_asks_saying_why(workspace: Path) -> None:
    (workspace / ".env").write_text("A=1\n")
    ui = RecordingUI(answers=["deny"])
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=ui, policy=Policy())
    run_tool(rt, "read_file", path=".env")
    [asked] = ui.of(ApprovalRequest)
    assert asked.reason == ".env is on the secret-file list (permissions.secret_files)"


def test_a_persons_no_with_a_note_says(workspace: Path) -> None:
    ui = RecordingUI(answers=[ApprovalReply("deny", "use a temp dir")])
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=ui, policy=Policy())
    assert run_tool(rt, "write_file", path="x", content="y") == (
        "Denied by the user, who said: use a temp dir\nDo not retry the call as it was; follow what they said.")
