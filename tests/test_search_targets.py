"""grep, glob and list_dir search the folder their call was judged on: through a symlink and
`..` the permission decision and the folder walked agree, a link changed after the check
does not move the walk, and a run outside the runtime resolves the same way."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.tools import Attempt, Tool, ToolContext, ToolResult
from nanohermes.tools.files import ListDir
from nanohermes.tools.search.glob import Glob
from nanohermes.tools.search.grep import Grep
from nanohermes.tools.search.ripgrep import AUTO, find_ripgrep

R = Rule.parse

# Both grep backends: ripgrep (where a binary is found) and pure Python.
BACKENDS = [pytest.param(None, id="python"),
            pytest.param(AUTO, id="ripgrep", marks=pytest.mark.skipif(find_ripgrep() is None, reason="no ripgrep"))]


def runtime(ws: Path, ui: RecordingUI, policy: Policy, tools: list[Tool]) -> Runtime:
    return Runtime(tools=tools, config=Config(), workspace=ws, ui=ui, policy=policy)


def run(rt: Runtime, name: str, **args: object) -> str:
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name=name, arguments=json.dumps(args))]))
    return msg.content or ""


@pytest.fixture
def linked(workspace: Path) -> Path:
    """`l -> deep/er`: `l/../t` is `deep/t` to the kernel and `t` to a reader of the text;
    both folders hold a file saying which one it is."""
    (workspace / "deep" / "er").mkdir(parents=True)
    (workspace / "l").symlink_to("deep/er")
    for folder in ("deep/t", "t"):
        (workspace / folder).mkdir()
        (workspace / folder / "f.txt").write_text(f"needle in {folder}\n")
    return workspace


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_searches_the_folder_the_kernel_reaches_and_the_rules_judged(linked: Path, backend: str | None) -> None:
    tools: list[Tool] = [Grep(ripgrep=backend), Glob(ripgrep=backend), ListDir()]
    ui = RecordingUI()
    rt = runtime(linked, ui, Policy(), tools)
    assert run(rt, "grep", pattern="needle", path="l/../t") == "deep/t/f.txt:1:needle in deep/t"
    assert run(rt, "glob", pattern="*.txt", path="l/../t") == "deep/t/f.txt"
    assert run(rt, "list_dir", path="l/../t") == "f.txt  17"
    assert run(rt, "grep", pattern="needle", path="t") == "t/f.txt:1:needle in t"  # plainly named: the other one
    assert ui.of(ApprovalRequest) == []
    # A deny rule on the folder searched refuses the call, whichever reading of the text it names.
    for rule in ("deep/**", "t/**"):
        for name, args in (("grep", {"pattern": "needle"}), ("glob", {"pattern": "*.txt"}), ("list_dir", {})):
            deny = runtime(linked, ui, Policy(deny=(R(f"{name}({rule})"),)), tools)
            assert run(deny, name, path="l/../t", **args) == f"ERROR: denied by rule {name}({rule})"
    assert ui.of(ApprovalRequest) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_link_changed_while_asking_does_not_move_the_search(linked: Path, backend: str | None) -> None:
    """The person is asked about `deep/t`; the link then points elsewhere (here: changed
    while the question is open). The search walks the folder that was judged, and names it."""
    (linked / "other" / "er").mkdir(parents=True)
    (linked / "other" / "t").mkdir()
    (linked / "other" / "t" / "f.txt").write_text("needle in other/t\n")

    class RelinkWhileAsking(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> object:  # type: ignore[override]  # answers like the base
            (linked / "l").unlink()
            (linked / "l").symlink_to("other/er")
            return await super().confirm(request)

    tools: list[Tool] = [Grep(ripgrep=backend), Glob(ripgrep=backend), ListDir()]
    for name, args, expected in (("grep", {"pattern": "needle"}, "deep/t/f.txt:1:needle in deep/t"),
                                 ("glob", {"pattern": "*.txt"}, "deep/t/f.txt"),
                                 ("list_dir", {}, "f.txt  17")):
        (linked / "l").unlink()
        (linked / "l").symlink_to("deep/er")
        ui = RelinkWhileAsking(answers=["yes"])
        rt = runtime(linked, ui, Policy(ask=(R(f"{name}(deep/**)"),)), tools)
        assert run(rt, name, path="l/../t", **args) == expected
        [req] = ui.of(ApprovalRequest)
        assert req.tool == name and (linked / "l").readlink() == Path("other/er")


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_of_a_secret_file_through_a_link_asks_about_the_file_it_reads(linked: Path, backend: str | None) -> None:
    (linked / ".env").write_text("TOKEN=top\n")
    (linked / "deep" / ".env").write_text("TOKEN=deep\n")
    ui = RecordingUI(answers=["deny", "yes"])
    rt = runtime(linked, ui, Policy(), [Grep(ripgrep=backend)])
    assert run(rt, "grep", pattern="TOKEN", path="l/../.env") == DENIED
    [req] = ui.of(ApprovalRequest)
    assert req.reason.startswith("deep/.env ") and req.reason.endswith(" (permissions.secret_files)"), req.reason
    assert run(rt, "grep", pattern="TOKEN", path="l/../.env") == "deep/.env:1:TOKEN=deep"  # approved: the file judged


@pytest.mark.parametrize("backend", BACKENDS)
def test_outside_the_runtime_the_tools_resolve_as_the_runtime_does(linked: Path, backend: str | None) -> None:
    ctx = ToolContext(workspace=linked, limits=Limits(), config=Config())
    rt = runtime(linked, RecordingUI(), Policy(), [Grep(ripgrep=backend), Glob(ripgrep=backend), ListDir()])
    for tool, args, expected in ((Grep(ripgrep=backend), {"pattern": "needle", "path": "l/../t"},
                                  "deep/t/f.txt:1:needle in deep/t"),
                                 (Glob(ripgrep=backend), {"pattern": "**/*.txt", "path": "l/../t"}, "deep/t/f.txt"),
                                 (ListDir(), {"path": "l/../t"}, "f.txt  17")):
        out = asyncio.run(tool.run(tool.parse(args), ctx, Attempt()))  # no Target: the tool resolves it
        assert (out.text if isinstance(out, ToolResult) else out) == expected == run(rt, tool.name, **args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_symlink_swapped_into_the_judged_path_is_not_followed(linked: Path, tmp_path: Path,
                                                               backend: str | None) -> None:
    """`sub` is a folder when judged; while the person is asked it becomes a link to a folder
    outside. The search refuses instead of walking where the link now points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("needle outside\n")

    class SwapWhileAsking(RecordingUI):
        async def confirm(self, request: ApprovalRequest) -> object:  # type: ignore[override]  # answers like the base
            (linked / "sub" / "f.txt").unlink()
            (linked / "sub").rmdir()
            (linked / "sub").symlink_to(outside)
            return await super().confirm(request)

    tools: list[Tool] = [Grep(ripgrep=backend), Glob(ripgrep=backend), ListDir()]
    for name, args, verb in (("grep", {"pattern": "needle"}, "search"), ("glob", {"pattern": "*.txt"}, "search"),
                             ("list_dir", {}, "list")):
        if (linked / "sub").is_symlink():
            (linked / "sub").unlink()
        (linked / "sub").mkdir()
        (linked / "sub" / "f.txt").write_text("needle inside\n")
        ui = SwapWhileAsking(answers=["yes"])
        rt = runtime(linked, ui, Policy(ask=(R(f"{name}(sub)"),)), tools)
        out = run(rt, name, path="sub", **args)
        assert out.startswith(f"ERROR: cannot {verb} sub: ") and "symlink" in out and out.endswith(f" {verb} it again")
        assert len(ui.of(ApprovalRequest)) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_grep_of_a_file_named_through_a_link_shows_the_name_it_was_given(workspace: Path, backend: str | None) -> None:
    (workspace / "real.txt").write_text("needle\n")
    (workspace / "alias.txt").symlink_to("real.txt")
    rt = runtime(workspace, RecordingUI(), Policy(), [Grep(ripgrep=backend)])
    assert run(rt, "grep", pattern="needle", path="alias.txt") == "alias.txt:1:needle"
    assert run(rt, "grep", pattern="needle", path="./real.txt") == "real.txt:1:needle"


def test_grep_of_a_fifo_does_not_wait_for_a_writer(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    rt = runtime(workspace, RecordingUI(), Policy(), [Grep(ripgrep=None), ListDir()])
    out = run(rt, "grep", pattern="needle", path="pipe")
    assert out.startswith("no matches ") and out.endswith(" in pipe (0 files searched)"), out  # never waited on
    assert run(rt, "list_dir", path="pipe").startswith("ERROR: pipe is not a directory")
