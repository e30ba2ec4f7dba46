"""Smaller things real models send, each through the real command line and the fake server: patch
markers with decorations, opencode's `N: ` line numbers, `{a,b}` alternatives in glob and grep's
`include`, and `diff -u` patches that create or delete a file under prefixes other than a/ and b/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply, call

APP = "import os\n\n\ndef main():\n    a = 1\n    b = 2\n    return a + b\n"


def results(server: FakeServer, index: int) -> list[str]:
    return [m["content"] for m in server.requests[index]["messages"] if m["role"] == "tool"]


def run(turn, server: FakeServer, *steps: Any, read: str | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    """The model's calls, one message each (a read_file of `read` first), then "done": the
    results of the last step."""
    first = [Reply(tool_calls=(call("read_file", {"path": read}),))] if read else []
    server.add(*first, *(Reply(tool_calls=tuple(s) if isinstance(s, list) else (s,)) for s in steps), Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server)
    assert r.code == 0, r.err
    return results(server, len(first) + len(steps))[-(len(steps[-1]) if isinstance(steps[-1], list) else 1):]


# -- `*** Begin Patch` markers with decorations --------------------------------------------------

@pytest.mark.parametrize("begin,end", [("*** Begin Patch ***", "*** End Patch ***"), ("***Begin Patch", "***End Patch"),
                                       ("*** BEGIN PATCH", "*** END PATCH")], ids=["trailing-stars", "no-space", "caps"])
def test_decorated_patch_markers_are_the_format(turn, server: FakeServer, workspace: Path, begin: str, end: str) -> None:
    (workspace / "app.py").write_text(APP)
    patch = f"{begin}\n*** Update File: app.py ***\n@@\n-    b = 2\n+    b = 3\n{end}\n"
    [out] = run(turn, server, call("apply_patch", {"diff": patch}), read="app.py")
    assert out.startswith("patched app.py")
    assert (workspace / "app.py").read_text() == APP.replace("b = 2", "b = 3")


def test_a_patch_in_neither_format_gets_an_error_naming_both(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "app.py").write_text(APP)
    patch = "** Begin Patch **\nUpdate app.py: b = 3\n** End Patch **\n"
    [out] = run(turn, server, call("apply_patch", {"diff": patch}))
    assert out.startswith("ERROR: no file sections found: ") and "`** Begin Patch **`" in out, out
    assert (workspace / "app.py").read_text() == APP


# -- opencode's `N: ` line numbers --------------------------------------------------------------

def test_opencodes_colon_numbers_on_every_line_of_old_string_are_stripped_from_both(turn, server: FakeServer,
                                                                                    workspace: Path) -> None:
    (workspace / "app.py").write_text(APP)
    edit = {"path": "app.py", "old_string": "5:     a = 1\n6:     b = 2", "new_string": "5:     a = 10\n6:     b = 20"}
    [out] = run(turn, server, call("edit_file", edit), read="app.py")
    assert out.startswith("edited app.py: replaced 1 occurrence (+2 -2 lines)") and "`12: `" in out, out
    assert out.endswith(" old_string and new_string)")
    assert (workspace / "app.py").read_text() == APP.replace("a = 1", "a = 10").replace("b = 2", "b = 20")


def test_opencodes_older_pipe_numbers_on_new_string_only_are_stripped(turn, server: FakeServer,
                                                                      workspace: Path) -> None:
    (workspace / "app.py").write_text(APP)
    edit = {"path": "app.py", "old_string": "    a = 1\n    b = 2", "new_string": "00005|     a = 7\n00006|     b = 8"}
    [out] = run(turn, server, call("edit_file", edit), read="app.py")
    assert "`00012| `" in out and out.endswith(" new_string)"), out
    assert (workspace / "app.py").read_text() == APP.replace("a = 1", "a = 7").replace("b = 2", "b = 8")


def test_colon_lines_that_are_not_consecutive_numbers_are_content(turn, server: FakeServer, workspace: Path) -> None:
    codes = "codes:\n  200: ok\n  404: missing\n"
    (workspace / "codes.yaml").write_text(codes)
    edit = {"path": "codes.yaml", "old_string": "  404: missing\n", "new_string": "404: missing\n500: broken\n"}
    [out] = run(turn, server, call("edit_file", edit), read="codes.yaml")
    assert out.startswith("edited codes.yaml") and "stripped" not in out
    assert (workspace / "codes.yaml").read_text() == "codes:\n  200: ok\n404: missing\n500: broken\n"


# -- `{a,b}` in glob and in grep's include ------------------------------------------------------

@pytest.fixture
def tree(workspace: Path) -> Path:
    for name in ("AGENTS.md", "README.md", "NOTES.md", "src/a.py", "src/b.ts", "src/c.js", "lib/d.py"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("TODO here\n")
    return workspace


@pytest.mark.parametrize("pattern,found", [
    ("{AGENTS,README}.md", ["AGENTS.md", "README.md"]),
    ("**/*.{py,ts}", ["lib/d.py", "src/a.py", "src/b.ts"]),
    ("{src,lib}/*.py", ["lib/d.py", "src/a.py"]),
])
def test_glob_takes_brace_alternatives(turn, server: FakeServer, tree: Path, pattern: str, found: list[str]) -> None:
    [out] = run(turn, server, call("glob", {"pattern": pattern}))
    assert out.split("\n") == found


def test_greps_include_takes_brace_alternatives(turn, server: FakeServer, tree: Path) -> None:
    [out] = run(turn, server, call("grep", {"pattern": "TODO", "include": "*.{py,ts}"}))
    assert sorted(line.split(":")[0] for line in out.split("\n") if ":" in line) == ["lib/d.py", "src/a.py", "src/b.ts"]


def test_too_many_alternatives_are_refused_with_the_bound(turn, server: FakeServer, tree: Path) -> None:
    [out] = run(turn, server, call("glob", {"pattern": "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}/x"}))
    assert out.startswith("ERROR: invalid glob") and "the braces make more than 256 alternatives" in out


def test_the_alternatives_bound_is_glob_alternatives(turn, server: FakeServer, tree: Path) -> None:
    server.add(Reply(tool_calls=(call("glob", {"pattern": "{AGENTS,README,NOTES}.md"}),
                                 call("glob", {"pattern": "{AGENTS,README}.{md,txt}"}),
                                 call("grep", {"pattern": "TODO", "include": "{src,lib}/*.{py,ts}"}))), Reply(text="done"))
    r = turn("-p", "go", server=server, config={"limits": {"glob_alternatives": 3}})
    assert r.code == 0, r.err
    three, four, include = results(server, 1)
    assert three.split("\n") == ["AGENTS.md", "NOTES.md", "README.md"]
    refusal = ("the braces make more than 3 alternatives (limits.glob_alternatives); write fewer alternatives, or "
               "search in several calls")
    assert four == f"ERROR: invalid glob '{{AGENTS,README}}.{{md,txt}}': {refusal}"
    assert include == f"ERROR: invalid glob '{{src,lib}}/*.{{py,ts}}': {refusal}"


# -- `diff -u` creating or deleting a file under other prefixes --------------------------------

def test_a_deletion_under_another_prefix_deletes_the_file_that_exists(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "old.txt").write_text("a\nb\n")
    patch = "--- orig/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"
    [out] = run(turn, server, call("apply_patch", {"diff": patch}), read="old.txt")
    assert out == "deleted old.txt"
    assert not (workspace / "old.txt").exists()


def test_a_deletion_of_a_file_really_under_that_folder_keeps_the_name(turn, server: FakeServer,
                                                                      workspace: Path) -> None:
    (workspace / "orig").mkdir()
    (workspace / "orig" / "old.txt").write_text("a\n")
    (workspace / "old.txt").write_text("a\n")
    patch = "--- orig/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
    [out] = run(turn, server, call("apply_patch", {"diff": patch}), read="orig/old.txt")
    assert out == "deleted orig/old.txt"
    assert (workspace / "old.txt").exists() and not (workspace / "orig" / "old.txt").exists()


def test_two_prefixes_modify_delete_and_create_as_git_apply_does(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / "b.txt").write_text("gone\n")
    patch = ("--- orig/a.txt\t2024-05-01 10:00:00\n+++ mod/a.txt\t2024-05-01 10:01:00\n@@ -1 +1 @@\n-one\n+two\n"
             "--- orig/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n"
             "--- /dev/null\n+++ mod/c.txt\n@@ -0,0 +1 @@\n+new\n")
    [out] = run(turn, server, [call("read_file", {"path": "a.txt"}), call("read_file", {"path": "b.txt"})],
                call("apply_patch", {"diff": patch}))
    assert out.split("\n") == ["patched a.txt (1 hunk, +1 -1)", "deleted b.txt", "created c.txt (1 hunk, +1 -0)"]
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt", "c.txt"]
    assert (workspace / "a.txt").read_text() == "two\n" and (workspace / "c.txt").read_text() == "new\n"


def test_a_creation_into_a_new_folder_is_kept_as_written(turn, server: FakeServer, workspace: Path) -> None:
    patch = "--- /dev/null\n+++ tests/test_new.py\n@@ -0,0 +1 @@\n+def test(): pass\n"
    [out] = run(turn, server, call("apply_patch", {"diff": patch}))
    assert out.startswith("created tests/test_new.py")
    assert (workspace / "tests" / "test_new.py").read_text() == "def test(): pass\n"


def test_a_creation_whose_folder_exists_without_the_prefix_loses_it(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "src").mkdir()
    patch = "--- /dev/null\n+++ mod/src/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    [out] = run(turn, server, call("apply_patch", {"diff": patch}))
    assert out.startswith("created src/new.py")
    assert (workspace / "src" / "new.py").read_text() == "x = 1\n" and not (workspace / "mod").exists()


def test_a_creation_made_by_diff_u_is_applied_where_git_apply_puts_it(turn, server: FakeServer, workspace: Path,
                                                                      tmp_path: Path) -> None:
    import subprocess

    made = tmp_path / "made"
    (made / "new").mkdir(parents=True)
    (made / "new" / "hello.txt").write_text("hello\n")
    patch = subprocess.run(["diff", "-u", "/dev/null", "new/hello.txt"], cwd=made, capture_output=True, text=True).stdout
    assert patch.startswith("--- /dev/null\t") and "\n+++ new/hello.txt\t" in patch
    control = tmp_path / "control"
    control.mkdir()
    subprocess.run(["git", "apply", "-"], cwd=control, input=patch, text=True, check=True)
    assert sorted(p.name for p in control.iterdir()) == ["hello.txt"]  # git apply strips `new/`
    [out] = run(turn, server, call("apply_patch", {"diff": patch}))
    assert out == "created hello.txt (1 hunk, +1 -0)"
    assert sorted(p.name for p in workspace.iterdir()) == ["hello.txt"]
