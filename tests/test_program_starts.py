"""The programs nanohermes starts of the person's config (MCP servers, hooks) run no code the
workspace ships: a repository planting a Python package or a `node_modules/.bin` launcher of the
name such a program looks up. Each attack is first run by hand in the workspace, as a control
that proves it works; then nanohermes starts the program and the plant never runs. A trusted
project's own server or hook still runs in the workspace, as the project meant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nanohermes.guard import programs
from nanohermes.testing import FakeServer, Reply

# A real MCP server installed beside nanohermes: the workspace ships a package of its name.
TIME_SERVER = "mcp_server_time"


def plant_package(ws: Path, name: str, marker: Path) -> None:
    """A package `name` in the workspace whose `python -m name` writes `marker`."""
    (ws / name).mkdir()
    (ws / name / "__init__.py").write_text("")
    (ws / name / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('planted code ran')\n")


def plant_launcher(ws: Path, name: str, marker: Path) -> None:
    """A program `name` in the workspace's `node_modules/.bin` (what npx runs first) writing `marker`."""
    bin_dir = ws / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / name).write_text(f"#!/bin/sh\necho ran > '{marker}'\n")
    (bin_dir / name).chmod(0o755)
    (ws / "package.json").write_text('{"name": "planted", "version": "1.0.0"}')


def control(argv: list[str], cwd: Path, marker: Path, env: dict[str, str] | None = None) -> None:
    """Run the attack by hand: it must write the marker (then the marker is removed again)."""
    subprocess.run(argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, timeout=120)
    assert marker.read_text().strip() in ("planted code ran", "ran"), "the control did not run the plant"
    marker.unlink()


def hook(command: str) -> dict[str, object]:
    return {"hooks": [{"type": "command", "command": command, "timeout": 60}]}


def test_a_user_mcp_server_started_by_module_never_runs_the_workspaces_package(
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_package(workspace, TIME_SERVER, marker)
    control([sys.executable, "-m", TIME_SERVER], workspace, marker)
    server.add(Reply(text="ok"))
    config = {"mcp": {"servers": {"time": {"command": sys.executable, "args": ["-m", TIME_SERVER]}}}}
    r = turn("-p", "what time is it?", server=server, config=config)
    assert r.code == 0, r.err
    assert not marker.exists()
    # The real server ran: its tools were offered.
    assert "mcp__time__get_current_time" in [t["function"]["name"] for t in server.requests[0]["tools"]]


def test_a_user_mcp_server_whose_cwd_is_the_workspace_imports_nothing_from_it(
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_package(workspace, TIME_SERVER, marker)
    server.add(Reply(text="ok"))
    # The person chose the workspace as the folder it runs in: Python still takes no module from there.
    config = {"mcp": {"servers": {"time": {"command": sys.executable, "args": ["-m", TIME_SERVER],
                                           "cwd": str(workspace)}}}}
    r = turn("-p", "what time is it?", server=server, config=config)
    assert r.code == 0, r.err
    assert not marker.exists()
    assert "mcp__time__get_current_time" in [t["function"]["name"] for t in server.requests[0]["tools"]]


def test_a_user_hook_started_by_module_never_runs_the_workspaces_package(
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_package(workspace, "planted_hook", marker)
    control([sys.executable, "-m", "planted_hook"], workspace, marker)
    seen = tmp_path / "seen"
    # A second hook records where hooks run and what they are told of the project.
    where = f"pwd > '{seen}'; echo \"$CLAUDE_PROJECT_DIR\" >> '{seen}'; echo \"$NANOHERMES_PROJECT_DIR\" >> '{seen}'"
    server.add(Reply(text="ok"))
    config = {"hooks": {"UserPromptSubmit": [hook(f"{sys.executable} -m planted_hook"), hook(where)]}}
    r = turn("-p", "hi", server=server, config=config)
    assert r.code == 0, r.err
    assert not marker.exists()
    assert "UserPromptSubmit hook" in r.err and "exited with 1" in r.err  # no module of that name outside it
    cwd, claude_dir, own_dir = seen.read_text().splitlines()
    assert not (Path(cwd).resolve() == workspace.resolve() or workspace.resolve() in Path(cwd).resolve().parents)
    assert claude_dir == own_dir == str(workspace)


def test_a_python_path_into_the_workspace_does_not_reach_a_user_hook(
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_package(workspace, "planted_hook", marker)
    control([sys.executable, "-m", "planted_hook"], tmp_path, marker, env={"PYTHONPATH": str(workspace)})
    server.add(Reply(text="ok"))
    config = {"hooks": {"UserPromptSubmit": [hook(f"{sys.executable} -m planted_hook")]}}
    r = turn("-p", "hi", server=server, config=config, env={"PYTHONPATH": f"{workspace}{os.pathsep}."})
    assert r.code == 0, r.err
    assert not marker.exists()


@pytest.mark.parametrize("variable", ["PERL5LIB", "PERLLIB"])
def test_a_perl_library_path_into_the_workspace_does_not_reach_a_user_hook(
        turn, server: FakeServer, workspace: Path, tmp_path: Path, variable: str) -> None:
    """The same for the other languages' search paths (Perl's here, run for real): a person's
    variable naming a folder of the workspace is left out for the programs of their config."""
    perl = shutil.which("perl")
    if perl is None:
        pytest.skip("perl is not installed, so its module search path cannot be tried")
    marker = tmp_path / "marker"
    (workspace / "Planted.pm").write_text(f"package Planted; open(my $f, '>', '{marker}'); "
                                          "print $f 'planted code ran'; close($f); 1;\n")
    control([perl, "-MPlanted", "-e", "1"], tmp_path, marker, env={variable: str(workspace)})
    server.add(Reply(text="ok"))
    config = {"hooks": {"UserPromptSubmit": [hook(f"{perl} -MPlanted -e 1 || exit 1")]}}  # 2 would block the prompt
    r = turn("-p", "hi", server=server, config=config, env={variable: str(workspace)})
    assert r.code == 0, r.err
    assert not marker.exists()
    assert "exited with 1: BEGIN failed" in r.err  # the hook ran, and found no such module


@pytest.fixture
def npx() -> str:
    found = shutil.which("npx")
    if found is None:
        pytest.skip("npx is not installed, so its lookup of node_modules/.bin cannot be tried")
    return found


def test_npx_in_a_user_hook_or_server_never_runs_the_workspaces_node_modules_bin(
        turn, server: FakeServer, workspace: Path, tmp_path: Path, npx: str) -> None:
    marker = tmp_path / "marker"
    plant_launcher(workspace, "planted-tool", marker)
    # --offline: a name npx does not find locally is never fetched from the registry.
    argv = [npx, "--offline", "--no-install", "planted-tool"]
    control(argv, workspace, marker)
    server.add(Reply(text="ok"))
    config = {"hooks": {"UserPromptSubmit": [hook(" ".join(argv))]},
              "mcp": {"servers": {"planted": {"command": "npx", "args": argv[1:]}}}}
    r = turn("-p", "hi", server=server, config=config)
    assert r.code == 0, r.err
    assert not marker.exists()
    assert "MCP server planted failed to start" in r.err


def test_a_trusted_projects_own_hook_and_server_run_in_the_workspace(
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_package(workspace, "planted_hook", marker)
    seen, served = tmp_path / "seen", tmp_path / "served"
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({
        "hooks": {"UserPromptSubmit": [hook(f"{sys.executable} -m planted_hook"), hook(f"pwd > '{seen}'")]},
        "mcp": {"servers": {"time": {"command": "sh", "args": [
            "-c", f"pwd > '{served}'; exec '{sys.executable}' -m {TIME_SERVER}"]}}}}))
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server, config={"trusted_projects": [str(workspace)]})
    assert r.code == 0, r.err
    assert marker.read_text() == "planted code ran"  # the project's code, which its own hook means to run
    assert Path(seen.read_text().strip()).resolve() == workspace.resolve()
    assert Path(served.read_text().strip()).resolve() == workspace.resolve()
    assert "mcp__time__get_current_time" in [t["function"]["name"] for t in server.requests[0]["tools"]]


def test_the_same_project_untrusted_starts_none_of_them(turn, server: FakeServer, workspace: Path,
                                                        tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    plant_package(workspace, "planted_hook", marker)
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({
        "hooks": {"UserPromptSubmit": [hook(f"{sys.executable} -m planted_hook")]}}))
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    assert r.code == 0, r.err
    assert not marker.exists()
    assert "not trusted" in r.err


def test_person_start_drops_search_folders_a_project_could_fill(workspace: Path, tmp_path: Path) -> None:
    outside = str(tmp_path / "tools")
    inside = str(workspace / "node_modules" / ".bin")
    inherited = {name: os.pathsep.join([inside, "rel", "", outside]) for name in programs.SEARCH_PATHS}
    cwd, env = programs.person_start(inherited, {"NODE_PATH": "chosen"}, cwd=None, workspace=workspace,
                                     project_own=False)
    assert Path(cwd).resolve() != workspace.resolve() and os.path.isdir(cwd)
    assert env["PATH"] == env["PYTHONPATH"] == outside
    assert env["NODE_PATH"] == "chosen"  # what the person's config sets for the program is kept as written
    assert "PYTHONSAFEPATH" not in env  # its folder holds nothing of the project's; a script keeps its own folder
    assert env["CLAUDE_PROJECT_DIR"] == env["NANOHERMES_PROJECT_DIR"] == str(workspace)
    cwd, env = programs.person_start(inherited, {}, cwd=".", workspace=workspace, project_own=False)
    assert Path(cwd).resolve() == workspace.resolve() and env["PYTHONSAFEPATH"] == "1"
    cwd, env = programs.person_start(inherited, {}, cwd=None, workspace=workspace, project_own=True)
    assert Path(cwd).resolve() == workspace.resolve() and "PYTHONSAFEPATH" not in env
    assert env["PATH"] == outside and env["PYTHONPATH"] == inherited["PYTHONPATH"]


def test_the_neutral_folder_is_never_inside_the_workspace(home: Path) -> None:
    # A workspace holding nanohermes's state folder (nanohermes run in the home folder).
    assert programs.neutral_folder(home) == "/"
    assert Path(programs.neutral_folder(home / "elsewhere")).is_relative_to(home / ".local" / "state" / "nanohermes")
