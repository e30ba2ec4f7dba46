"""git_commit's `paths` written for Windows (`src\\app.py`): staged as the workspace path they
name, with the note the file tools give, or refused with the path to write before anyone is
asked. Real git, the real command line, the loopback fake server."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from nanohermes.testing import FakeServer, Reply, call


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def repo(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    app = workspace / "src" / "app.py"
    app.write_text("one\n")
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "T"),
                 ("add", "-A"), ("commit", "-qm", "first")):
        git(workspace, *args)
    app.write_text("two\n")
    return app


def test_a_backslash_path_is_staged_as_the_file_it_names(turn: Any, server: FakeServer, workspace: Path) -> None:
    repo(workspace)
    server.add(Reply(tool_calls=(call("git_commit", {"message": "second", "paths": ["src\\app.py"]}),)),
               Reply(text="ok"))
    r = turn("-p", "commit", "--yes", server=server)
    assert r.code == 0, r.err
    [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert result.startswith("committed ") and result.endswith(
        "(Windows path read `src\\app.py` as `src/app.py`: paths here use `/`)")
    assert git(workspace, "log", "--format=%s").split() == ["second", "first"]
    assert git(workspace, "show", "HEAD:src/app.py") == "two\n"


def test_a_drive_path_is_staged_too(turn: Any, server: FakeServer, workspace: Path) -> None:
    repo(workspace)
    path = f"C:\\Users\\me\\{workspace.name}\\src\\app.py"
    server.add(Reply(tool_calls=(call("git_commit", {"message": "second", "paths": [path]}),)), Reply(text="ok"))
    r = turn("-p", "commit", "--yes", server=server)
    assert r.code == 0, r.err
    assert git(workspace, "show", "HEAD:src/app.py") == "two\n"


def test_one_that_names_nothing_is_refused_with_the_path_to_write(turn: Any, server: FakeServer,
                                                                 workspace: Path) -> None:
    repo(workspace)
    server.add(Reply(tool_calls=(call("git_commit", {"message": "second", "paths": ["src\\missing.py"]}),)),
               Reply(text="ok"))
    r = turn("-p", "commit", server=server, stdin=None)  # nobody to ask: refused before any question
    assert r.code == 0, r.err
    [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert result.startswith("ERROR: src\\missing.py is a Windows path") and result.endswith("`src/missing.py`")
    assert "pathspec" not in result
    assert git(workspace, "log", "--format=%s").split() == ["first"]
