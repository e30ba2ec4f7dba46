"""apply_patch: golden fixtures (each also run through real `git apply`), parse(), and the
tool's path rules.

A fixture is tests/fixtures/patch/NNN_name/{before/, patch.diff, after/} with an optional
fixture.json: {"git": "same" | "rejects", "git_args": [...], "error": [...], "notes": [...]}.
"same" (the default) means git apply must produce after/ too; "rejects" marks a leniency
(git refuses, nanohermes applies) or a failure case (both refuse, nothing changes).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI, ToolFinished
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import Attempt, ToolContext, ToolError, ToolResult, build_tools
from nanohermes.tools.fileops import unified_diff
from nanohermes.tools.patch import ApplyPatch
from nanohermes.tools.patches.common import PatchError
from nanohermes.tools.patches.unified import apply, parse

FIXTURES = sorted(p for p in (Path(__file__).parent / "fixtures" / "patch").iterdir() if p.is_dir())


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file under root (but .git) with its bytes and whether it is executable."""
    out: dict[str, tuple[bytes, bool]] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = (p.read_bytes(), bool(p.stat().st_mode & 0o100))
    return out


def copy_tree(src: Path, dst: Path) -> None:
    if src.exists():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        dst.mkdir(parents=True, exist_ok=True)


def ctx_for(ws: Path, **limits: int) -> ToolContext:
    return ToolContext(workspace=ws, limits=Limits(**limits), config=Config())


def run_patch(ws: Path, diff: str, **limits: int) -> ToolResult:
    tool = ApplyPatch()
    return asyncio.run(tool.run(tool.parse({"diff": diff}), ctx_for(ws, **limits), Attempt()))


def test_there_are_at_least_twenty_fixtures() -> None:
    assert len(FIXTURES) >= 20


@pytest.mark.parametrize("fx", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixture(fx: Path, tmp_path: Path) -> None:
    meta = json.loads((fx / "fixture.json").read_text()) if (fx / "fixture.json").exists() else {}
    diff_bytes = (fx / "patch.diff").read_bytes()
    before, after = tree(fx / "before"), tree(fx / "after")

    ws = tmp_path / "ws"
    copy_tree(fx / "before", ws)
    if meta.get("error"):
        with pytest.raises(ToolError) as err:
            run_patch(ws, diff_bytes.decode("utf-8"))
        for part in meta["error"]:
            assert part in str(err.value)
        assert tree(ws) == before, "a failed patch must leave every file untouched"
    else:
        result = run_patch(ws, diff_bytes.decode("utf-8"))
        assert tree(ws) == after
        for note in meta.get("notes", []):
            assert note in result.text
        assert result.display is not None

    # The same input through real git apply.
    g = tmp_path / "git"
    copy_tree(fx / "before", g)
    subprocess.run(["git", "init", "-q"], cwd=g, check=True)
    (tmp_path / "p.diff").write_bytes(diff_bytes)
    ran = subprocess.run(["git", "apply", *meta.get("git_args", []), str(tmp_path / "p.diff")], cwd=g,
                         capture_output=True, text=True)
    if meta.get("git", "same") == "same":
        assert ran.returncode == 0, ran.stderr
        assert tree(g) == after
    else:
        assert ran.returncode != 0, "git accepts this patch: mark the fixture as \"same\""
        assert tree(g) == before


def test_drift_is_reported_with_the_stated_and_found_lines(tmp_path: Path) -> None:
    fx = next(f for f in FIXTURES if f.name.endswith("drifted_line_numbers"))
    copy_tree(fx / "before", tmp_path)
    text = run_patch(tmp_path, (fx / "patch.diff").read_text()).text
    assert text == (
        "patched a.txt (2 hunks, +2 -2)\n"
        "hunk 1 of a.txt (@@ -7,7 +7,7 @@) matched at line 11, not 7 (line numbers drifted by +4)\n"
        "hunk 2 of a.txt (@@ -17,7 +17,7 @@) matched at line 21, not 17 (line numbers drifted by +4)"
    )


def test_nearest_match_to_the_stated_line_wins(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("x\ny\n" * 5)  # the same two lines at 1, 3, 5, 7, 9
    run_patch(tmp_path, "--- a/r.txt\n+++ b/r.txt\n@@ -6,2 +6,2 @@\n x\n-y\n+Y\n")
    assert (tmp_path / "r.txt").read_text() == "x\ny\n" * 2 + "x\nY\n" + "x\ny\n" * 2


def test_failure_shows_the_lines_actually_there(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    with pytest.raises(ToolError) as err:
        run_patch(tmp_path, "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 2\n+    return 3\n")
    assert str(err.value) == (
        "a.py: hunk 1 (@@ -1,2 +1,2 @@) does not match; no file was changed.\n"
        "First line that did not match, line 2: the hunk expects `    return 2` but the file has `    return 1`.\n"
        "The file has there:\n"
        "     1 | def f():\n"
        "     2 |     return 1\n"
        "     3 | \n"
        "Read the file again and regenerate the diff from its current content, or use edit_file."
    )


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../x", "~/x"])
def test_paths_leaving_the_workspace_are_refused(tmp_path: Path, path: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(ToolError) as err:
        run_patch(ws, f"--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n+x\n")
    assert path in str(err.value) and "relative to the workspace" in str(err.value)
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "x").exists()


def test_empty_diff_is_rejected_before_any_io(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="diff must not be empty; pass a unified diff"):
        ApplyPatch().parse({"diff": "  \n"})


def test_text_without_file_sections_is_rejected() -> None:
    with pytest.raises(PatchError, match="no file sections found"):
        parse("just some prose\n")
    with pytest.raises(PatchError, match="comes before any file header"):
        parse("@@ -1 +1 @@\n-a\n+b\n")


def test_binary_patch_is_refused() -> None:
    with pytest.raises(PatchError, match="binary patches are not supported"):
        parse("diff --git a/i.png b/i.png\nindex 1..2 100644\nBinary files a/i.png and b/i.png differ\n")


def test_a_rename_from_dev_null_is_refused_with_the_header_named() -> None:
    with pytest.raises(PatchError, match=r"^`rename from /dev/null`: a rename or copy names a file, not /dev/null"):
        parse("diff --git a/x b/y\nsimilarity index 100%\nrename from /dev/null\nrename to y\n")
    with pytest.raises(PatchError, match=r"^`copy to /dev/null`: a rename or copy names a file"):
        parse("diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to /dev/null\n")


def test_apply_is_pure_and_sees_earlier_sections() -> None:
    diff = ("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-one\n+two\n"
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-two\n+three\n")
    reads: list[str] = []

    def read(path: str) -> str | None:
        reads.append(path)
        return "one\n"

    out = apply(parse(diff), read)
    assert [o.new_text for o in out] == ["two\n", "three\n"]
    assert reads == ["f"]  # the second section saw the first one's result


def test_bom_and_crlf_survive_a_patch(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    run_patch(tmp_path, "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,3 @@\n one\n+one and a half\n two\n")
    assert (tmp_path / "b.txt").read_bytes() == b"\xef\xbb\xbfone\r\none and a half\r\ntwo\r\n"


def test_patch_keeps_file_mode(tmp_path: Path) -> None:
    f = tmp_path / "s.sh"
    f.write_text("a\n")
    f.chmod(0o750)
    run_patch(tmp_path, "--- a/s.sh\n+++ b/s.sh\n@@ -1 +1 @@\n-a\n+b\n")
    assert (f.stat().st_mode & 0o777, f.read_text()) == (0o750, "b\n")


def test_edit_file_max_bytes_applies_to_patches(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x\n" * 10)
    with pytest.raises(ToolError) as err:
        run_patch(tmp_path, "--- a/big.txt\n+++ b/big.txt\n@@ -1 +1 @@\n-x\n+y\n", edit_file_max_bytes=3)
    assert str(err.value) == "big.txt is 20 bytes (> 3); too big to patch in memory"


def _runtime(ws: Path, mode: str, answers: list[str]) -> tuple[Runtime, RecordingUI]:
    ui = RecordingUI(answers=list(answers))  # type: ignore[arg-type]
    return Runtime(tools=[ApplyPatch()], config=Config(), workspace=ws, ui=ui, policy=Policy(mode=mode)), ui


def test_patch_into_dot_git_is_asked_even_in_accept_edits(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    rt, ui = _runtime(ws, "accept-edits", ["deny"])
    diff = "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n [core]\n+\tbare = true\n"
    out = asyncio.run(rt.run_calls([ToolCall("1", "apply_patch", json.dumps({"diff": diff}))]))
    assert out[0].content.startswith("Denied by the user.")
    req = ui.events[1]
    assert req.reason.startswith("writes a protected path")  # type: ignore[union-attr]
    assert "+\tbare = true" in req.detail  # type: ignore[union-attr]
    assert (ws / ".git" / "config").read_text() == "[core]\n"


def test_plain_patch_runs_without_asking_in_accept_edits_and_shows_a_diff(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    rt, ui = _runtime(tmp_path, "accept-edits", [])
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"
    out = asyncio.run(rt.run_calls([ToolCall("1", "apply_patch", json.dumps({"diff": diff}))]))
    assert out[0].content == "patched a.txt (1 hunk, +1 -1)"
    fin = ui.of(ToolFinished)[0]
    assert fin.display == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"


def test_plan_mode_refuses_apply_patch(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    rt, _ = _runtime(tmp_path, "plan", [])
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"
    out = asyncio.run(rt.run_calls([ToolCall("1", "apply_patch", json.dumps({"diff": diff}))]))
    assert out[0].content == "ERROR: apply_patch is not available in plan mode"
    assert (tmp_path / "a.txt").read_text() == "a\n"


def test_rule_subject_is_the_single_path_of_a_one_file_patch(tmp_path: Path) -> None:
    tool = ApplyPatch()
    one = tool.parse({"diff": "--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-a\n+b\n"})
    two = tool.parse({"diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n"})
    assert tool.rule_subject(one) == "src/x.py"
    assert tool.rule_subject(two) is None


_LINE = st.one_of(st.text(st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=12),
                  st.sampled_from(["", "-- ", "--- a/x", "+++ b/x", "@@ -1 +1 @@", "\\ No newline", " ", "diff --git a/x b/x"]))


@settings(max_examples=200, deadline=None)
@given(old=st.lists(_LINE, max_size=30), new=st.lists(_LINE, max_size=30),
       old_nl=st.booleans(), new_nl=st.booleans(), crlf=st.booleans())
def test_unified_diff_applies_back_exactly(old: list[str], new: list[str], old_nl: bool, new_nl: bool, crlf: bool) -> None:
    eol = "\r\n" if crlf else "\n"
    before = eol.join(old) + (eol if old and old_nl else "")
    after = eol.join(new) + (eol if new and new_nl else "")
    diff = unified_diff(before, after, "a/f", "b/f")
    if not diff:
        assert before == after
        return
    assert apply(parse(diff), lambda p: before)[0].new_text == after


@settings(max_examples=40, deadline=None)
@given(n_files=st.integers(1, 4), broken=st.one_of(st.none(), st.integers(0, 3)), new_file=st.booleans(),
       lines=st.lists(st.text("abc xyz", min_size=1, max_size=8), min_size=3, max_size=8))
def test_apply_patch_changes_every_file_or_none(n_files: int, broken: int | None, new_file: bool, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        before = {f"f{i}.txt": "".join(f"{i}:{line}\n" for line in lines) for i in range(n_files)}
        for name, text in before.items():
            (ws / name).write_text(text)
        parts = []
        for i, (name, text) in enumerate(before.items()):
            old = text.splitlines()[0]
            ctx = old if broken != i else old + " (not what the file says)"
            parts.append(f"--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-{ctx}\n+changed {i}\n")
        if new_file:
            parts.append("--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1 @@\n+made\n")
        rt = Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"))
        [out] = asyncio.run(rt.run_calls([ToolCall("p", "apply_patch", json.dumps({"diff": "".join(parts)}))]))
        after = {name: (ws / name).read_text() for name in before}
        if broken is not None and broken < n_files:
            assert out.content is not None and out.content.startswith("ERROR: "), out.content
            assert after == before and not (ws / "made.txt").exists()
        else:
            assert all(after[f"f{i}.txt"].splitlines()[0] == f"changed {i}" for i in range(n_files)), out.content
            assert (ws / "made.txt").exists() == new_file
