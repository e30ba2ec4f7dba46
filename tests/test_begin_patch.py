"""apply_patch in the `*** Begin Patch` format: golden fixtures applied through the runtime,
the paths a patch touches, and absolute paths inside the workspace.

A fixture is tests/fixtures/begin_patch/NNN_name/{before/, patch.txt, after/, fixture.json}.
fixture.json may hold "error" (parts of the error text; every file must stay as it was),
"notes" (parts of the success text) and "read" (files read with read_file first, as a
model reads before it replaces a file).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_patch import tree

from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, tool_reply
from nanohermes.testing import call as llm_call
from nanohermes.tools import build_tools
from nanohermes.tools.patch import touched_paths
from nanohermes.tools.patches.begin_patch import is_begin_patch

FIXTURES = sorted(p for p in (Path(__file__).parent / "fixtures" / "begin_patch").iterdir() if p.is_dir())


def runtime(ws: Path) -> Runtime:
    return Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"))


def call(rt: Runtime, name: str, **args: object) -> str:
    [out] = asyncio.run(rt.run_calls([ToolCall("c", name, json.dumps(args))]))
    return out.content or ""


def test_there_are_at_least_thirty_fixtures() -> None:
    assert len(FIXTURES) >= 30


@pytest.mark.parametrize("fx", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixture(fx: Path, tmp_path: Path) -> None:
    meta = json.loads((fx / "fixture.json").read_text())
    patch = (fx / "patch.txt").read_text()
    ws = tmp_path / "ws"
    if (fx / "before").exists():
        shutil.copytree(fx / "before", ws)
    else:
        ws.mkdir()
    before = tree(ws)
    rt = runtime(ws)
    for path in meta.get("read", []):
        assert not call(rt, "read_file", path=path).startswith("ERROR")
    out = call(rt, "apply_patch", diff=patch)
    if meta.get("error"):
        assert out.startswith("ERROR: "), out
        for part in meta["error"]:
            assert part in out, out
        assert tree(ws) == before, "a failed patch must leave every file untouched"
        assert not [p for p in ws.rglob("*.tmp")]
    else:
        assert not out.startswith("ERROR"), out
        assert tree(ws) == tree(fx / "after")
        for part in meta.get("notes", []):
            assert part in out, out


def test_format_is_detected_from_the_text() -> None:
    assert is_begin_patch("*** Begin Patch\n*** End Patch\n")
    assert is_begin_patch("\n  *** Begin Patch \n")
    assert is_begin_patch("<<'EOF'\n*** Begin Patch\n")
    assert not is_begin_patch("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-*** Begin Patch\n+y\n")


def test_touched_paths_lists_both_ends_of_a_move_and_deletions() -> None:
    patch = ("*** Begin Patch\n*** Update File: secret/a.txt\n*** Move to: public/a.txt\n@@\n-a\n+b\n"
             "*** Delete File: secret/b.txt\n*** Add File: c.txt\n+c\n*** End Patch\n")
    assert touched_paths(patch) == ["secret/a.txt", "public/a.txt", "secret/b.txt", "c.txt"]
    absolute = "*** Begin Patch\n*** Delete File: /ws/secret/k\n*** Add File: ../out\n+x\n*** End Patch\n"
    assert touched_paths(absolute) == ["/ws/secret/k"]  # kept for the permission check; `..` is refused anyway
    unified = ("diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n"
               "diff --git a/gone b/gone\ndeleted file mode 100644\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n")
    assert touched_paths(unified) == ["x", "y", "gone"]
    assert touched_paths("no patch at all") == []


def test_absolute_paths_inside_the_workspace_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    rt = runtime(tmp_path)
    out = call(rt, "apply_patch", diff=f"*** Begin Patch\n*** Update File: {tmp_path}/a.txt\n@@\n-one\n+two\n*** End Patch\n")
    assert out == "patched a.txt (1 hunk, +1 -1)"
    out = call(rt, "apply_patch", diff=f"--- {tmp_path}/a.txt\n+++ {tmp_path}/a.txt\n@@ -1 +1 @@\n-two\n+three\n")
    assert out == "patched a.txt (1 hunk, +1 -1)"
    assert (tmp_path / "a.txt").read_text() == "three\n"
    outside = tmp_path.parent / "elsewhere.txt"
    out = call(rt, "apply_patch", diff=f"*** Begin Patch\n*** Add File: {outside}\n+x\n*** End Patch\n")
    assert out.startswith("ERROR: writes a protected path: ") and f" {outside} is outside " in out, out
    assert not outside.exists()


def test_a_file_changed_since_it_was_read_is_not_patched(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    rt = runtime(tmp_path)
    call(rt, "read_file", path="a.txt")
    (tmp_path / "a.txt").write_text("one\ntwo\nthree, added by the user\n")
    for diff in ("*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch\n",
                 "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n"):
        out = call(rt, "apply_patch", diff=diff)
        assert out.startswith("ERROR: a.txt changed on disk "), out
        assert "read_file" in out
    assert (tmp_path / "a.txt").read_text() == "one\ntwo\nthree, added by the user\n"
    call(rt, "read_file", path="a.txt")
    out = call(rt, "apply_patch", diff="*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch\n")
    assert out == "patched a.txt (1 hunk, +1 -1)"
    # Its own write counts as seen: a second patch right after needs no new read.
    out = call(rt, "apply_patch", diff="*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+TWO\n*** End Patch\n")
    assert out == "patched a.txt (1 hunk, +1 -1)"


def _begin_patch(path: str, before: list[str], after: list[str]) -> str:
    """An update in the `*** Begin Patch` format, as a model would write it from a diff."""
    out = ["*** Begin Patch", f"*** Update File: {path}"]
    for group in difflib.SequenceMatcher(None, before, after).get_grouped_opcodes(2):
        out.append("@@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(" " + ln for ln in before[i1:i2])
            else:
                out.extend("-" + ln for ln in before[i1:i2])
                out.extend("+" + ln for ln in after[j1:j2])
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), edits=st.lists(st.tuples(st.integers(0, 39), st.sampled_from(["drop", "change", "add"])),
                                             min_size=1, max_size=6), crlf=st.booleans())
def test_a_patch_made_from_any_diff_applies_back(n: int, edits: list[tuple[int, str]], crlf: bool) -> None:
    before = [f"line {i}" for i in range(n)]
    after = list(before)
    for k, (at, op) in enumerate(sorted(edits, reverse=True)):
        if at >= len(after):
            continue
        if op == "drop" and len(after) > 1:
            del after[at]
        elif op == "change":
            after[at] = f"changed {k} {after[at]}"
        else:
            after.insert(at, f"added {k}")
    if after == before:
        return
    eol = "\r\n" if crlf else "\n"
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "f.txt").write_bytes(eol.join(before).encode() + eol.encode())
        out = call(runtime(ws), "apply_patch", diff=_begin_patch("f.txt", before, after))
        assert not out.startswith("ERROR"), out
        assert (ws / "f.txt").read_bytes() == (eol.join(after) + eol).encode()


@pytest.mark.parametrize("key", ["input", "patch"])
def test_the_argument_may_come_under_the_names_other_tools_use(tmp_path: Path, key: str) -> None:
    (tmp_path / "f.txt").write_text("one\n")
    [out] = asyncio.run(runtime(tmp_path).run_calls([ToolCall("c", "apply_patch", json.dumps(
        {key: "*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+two\n*** End Patch\n"}))]))
    assert out.content == "patched f.txt (1 hunk, +1 -1)"


def test_end_to_end_a_model_sends_a_begin_patch_and_a_slipped_edit(cli, server: FakeServer, workspace: Path) -> None:
    """A real `nanohermes -p` process and the fake server: the patch format OpenAI models
    write, an edit with curly quotes and read_file's numbers, and arguments with a trailing comma."""
    (workspace / "app.py").write_text("def main():\n    print('hi')\n    return 0\n")
    (workspace / "notes.md").write_text("Say \u201chello\u201d.\n")
    patch = "*** Begin Patch\n*** Update File: app.py\n@@ def main():\n-    print('hi')\n+    print('hello')\n*** End Patch\n"
    server.add(
        tool_reply(llm_call("apply_patch", {"diff": patch}, id="p"),
                   llm_call("edit_file", '{"path": "notes.md", "old_string": "1\\tSay \\"hello\\".", '
                                     '"new_string": "1\\tSay \\"goodbye\\".",}', id="e")),
        Reply(text="done"),
    )
    r = cli("-p", "fix it", "--mode", "accept-edits", server=server)
    assert r.code == 0, r.err
    results = {m["tool_call_id"]: m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert results == {
        "p": "patched app.py (1 hunk, +1 -1)",
        "e": "edited notes.md: replaced 1 occurrence (+1 -1 lines) (read_file's line numbers stripped from "
             "old_string and new_string; matched with Unicode punctuation mapped to ASCII; new_string's quotes written curly like the "
             "file's)",
    }
    assert (workspace / "app.py").read_text() == "def main():\n    print('hello')\n    return 0\n"
    assert (workspace / "notes.md").read_text() == "Say \u201cgoodbye\u201d.\n"
