"""Paths written for Windows (`src\\app.py`, `C:\\Users\\me\\proj\\notes.md`): read as the workspace
path they name when it exists, with a note, else refused with the path to write; no file tool ever
creates a name holding a backslash or a drive letter. Through the real command line and the loopback
fake server: the files on disk and what the model was sent next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply, call


def results(server: FakeServer, index: int = 1) -> list[str]:
    return [m["content"] for m in server.requests[index]["messages"] if m["role"] == "tool"]


def names(ws: Path) -> list[str]:
    """Every path under the workspace, relative."""
    return sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*"))


@pytest.fixture
def app(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def main():\n    return 1\n")
    return workspace / "src" / "app.py"


def test_a_backslash_path_to_an_existing_file_is_read_as_it_with_a_note(turn, server: FakeServer, app: Path) -> None:
    server.add(Reply(tool_calls=(call("read_file", {"path": "src\\app.py"}),)), Reply(text="read"))
    r = turn("-p", "read it", server=server)
    assert r.code == 0, r.err
    [out] = results(server)
    assert "def main():" in out
    assert out.endswith("(Windows path read `src\\app.py` as `src/app.py`: paths here use `/`)")


def test_an_edit_through_a_drive_path_changes_the_workspace_file(turn, server: FakeServer, workspace: Path,
                                                                   app: Path) -> None:
    drive = f"C:\\Users\\me\\{workspace.name}\\src\\app.py"
    server.add(Reply(tool_calls=(call("read_file", {"path": drive}),)),
               Reply(tool_calls=(call("edit_file", {"path": drive, "old_string": "return 1", "new_string": "return 2"}),)),
               Reply(text="done"))
    r = turn("-p", "edit", "--mode", "accept-edits", server=server)
    assert r.code == 0, r.err
    assert app.read_text() == "def main():\n    return 2\n"
    [edited] = results(server, 2)[1:]
    assert edited.startswith("edited src/app.py: replaced 1 occurrence")
    assert names(workspace) == ["src", "src/app.py"]


@pytest.mark.parametrize("path,suggestion", [
    ("C:\\Users\\me\\notes.md", "perhaps `notes.md`"),
    ("docs\\new.md", "`docs/new.md`"),
    ("src\\new.py", "`src/new.py`"),
    ("C:notes.md", "perhaps `notes.md`"),
    ("C:\\Users\\me\\proj\\src\\new.py", "perhaps `src/new.py`"),
], ids=["drive", "relative", "existing-folder", "drive-relative", "drive-into-an-existing-folder"])
def test_a_windows_path_naming_nothing_is_refused_with_the_path_to_write(turn, server: FakeServer, workspace: Path,
                                                                         app: Path, path: str, suggestion: str) -> None:
    server.add(Reply(tool_calls=(call("write_file", {"path": path, "content": "hello\n"}),)), Reply(text="refused"))
    r = turn("-p", "write", "--yes", server=server)
    assert r.code == 0, r.err
    [out] = results(server)
    assert out.startswith(f"ERROR: {path} is a Windows path (a backslash or a drive letter)")
    assert out.endswith(f"relative to the workspace: {suggestion}")
    assert names(workspace) == ["src", "src/app.py"]  # nothing created, under no name


@pytest.mark.parametrize("patch", [
    "*** Begin Patch\n*** Add File: docs\\notes.md\n+hello\n*** End Patch\n",
    "--- /dev/null\n+++ b/docs\\notes.md\n@@ -0,0 +1 @@\n+hello\n",
], ids=["begin-patch", "unified"])
def test_a_patch_never_creates_a_windows_name(turn, server: FakeServer, workspace: Path, app: Path, patch: str) -> None:
    server.add(Reply(tool_calls=(call("apply_patch", {"diff": patch}),)), Reply(text="refused"))
    r = turn("-p", "patch", "--yes", server=server)
    assert r.code == 0, r.err
    [out] = results(server)
    assert out.startswith("ERROR: docs\\notes.md is a Windows path") and out.endswith("`docs/notes.md`")
    assert names(workspace) == ["src", "src/app.py"]


def test_a_patch_updating_a_backslash_path_patches_the_workspace_file(turn, server: FakeServer, app: Path) -> None:
    patch = "*** Begin Patch\n*** Update File: src\\app.py\n@@\n-    return 1\n+    return 3\n*** End Patch\n"
    server.add(Reply(tool_calls=(call("read_file", {"path": "src/app.py"}),)),
               Reply(tool_calls=(call("apply_patch", {"diff": patch}),)), Reply(text="ok"))
    r = turn("-p", "patch", "--yes", server=server)
    assert r.code == 0, r.err
    assert app.read_text() == "def main():\n    return 3\n"
    [out] = results(server, 2)[1:]
    assert out.startswith("patched src/app.py") and "`src\\app.py` as `src/app.py`" in out


def test_a_file_whose_name_really_holds_a_backslash_is_used_as_written(turn, server: FakeServer,
                                                                       workspace: Path) -> None:
    (workspace / "odd\\name.txt").write_text("content\n")
    server.add(Reply(tool_calls=(call("read_file", {"path": "odd\\name.txt"}),)), Reply(text="ok"))
    r = turn("-p", "read", server=server)
    assert r.code == 0, r.err
    [out] = results(server)
    assert out == "1\tcontent"


def test_grep_and_list_dir_take_a_backslash_folder(turn, server: FakeServer, app: Path) -> None:
    calls: list[Any] = [call("list_dir", {"path": "src\\"}), call("grep", {"pattern": "main", "path": ".\\src"})]
    server.add(Reply(tool_calls=tuple(calls)), Reply(text="ok"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    listed, grepped = results(server)
    assert listed.startswith("app.py  ") and "`src\\` as `src`" in listed
    assert "src/app.py:1:def main():" in grepped and "`.\\src` as `src`" in grepped


def git(ws: Path, *argv: str) -> None:
    import subprocess

    subprocess.run(["git", "-c", "user.email=a@b.c", "-c", "user.name=n", *argv], cwd=ws, check=True,
                   capture_output=True)


def test_git_diff_and_git_log_look_at_the_file_a_backslash_path_names(turn, server: FakeServer, workspace: Path,
                                                                       app: Path) -> None:
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "first")
    app.write_text("def main():\n    return 2\n")
    server.add(Reply(tool_calls=(call("git_diff", {"path": "src\\app.py"}), call("git_log", {"path": "src\\app.py"}))),
               Reply(text="ok"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    diffed, logged = results(server)
    assert "+    return 2" in diffed and diffed.endswith("(Windows path read `src\\app.py` as `src/app.py`: paths here "
                                                         "use `/`)")
    assert logged.split("\n")[0].endswith(": first")


def test_a_commands_backslash_cwd_is_the_folder_it_names_or_refused(turn, server: FakeServer, workspace: Path,
                                                                    app: Path) -> None:
    server.add(Reply(tool_calls=(call("run_command", {"command": "pwd > where.txt", "cwd": "src\\"}),)),
               Reply(tool_calls=(call("run_command", {"command": "pwd > where.txt", "cwd": "build\\out"}),)),
               Reply(text="ok"))
    r = turn("-p", "run", "--yes", server=server)
    assert r.code == 0, r.err
    [ran] = results(server)
    assert ran.endswith("(Windows path read `src\\` as `src`: paths here use `/`)")
    assert (app.parent / "where.txt").read_text().strip() == str(app.parent.resolve())
    [refused] = results(server, 2)[1:]
    assert refused.startswith("ERROR: build\\out is a Windows path") and refused.endswith("`build/out`")
    assert names(workspace) == ["src", "src/app.py", "src/where.txt"]


def test_a_glob_written_with_backslashes_that_matches_nothing_says_what_to_try(turn, server: FakeServer,
                                                                              app: Path) -> None:
    server.add(Reply(tool_calls=(call("glob", {"pattern": "src\\*.py"}),
                                 call("grep", {"pattern": "main", "include": "src\\*.py"}))), Reply(text="ok"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    globbed, grepped = results(server)
    hint = "`\\` escapes the next character in a glob, and folders are separated by `/`: try 'src/*.py'"
    assert globbed.startswith("no files match") and hint in globbed
    assert grepped.startswith("no matches") and f"{hint} as include" in grepped
