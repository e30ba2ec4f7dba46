"""nanohermes's own venv never stands in front of the person's programs in the commands it
runs: run from a venv that is on PATH and activated (as a clone's `.venv` put on PATH is), a
command's `python3` is the person's, not nanohermes's. Real nanohermes processes against the
loopback fake server; the command runs in the real sandbox."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the suite runs from no venv of its own")

PRINT_PREFIX = "python3 -c 'import os, sys; print(os.path.realpath(sys.prefix), os.environ.get(\"VIRTUAL_ENV\"))'"


def persons_python(folder: Path) -> Path:
    """A folder whose python3 is the person's own (the interpreter the venv was made from)."""
    folder.mkdir()
    (folder / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    return folder


def printed(cli: Any, server: FakeServer, cwd: Path | None = None, **config: Any) -> list[str]:
    """What the command printed: the prefix of the python3 it ran, and its VIRTUAL_ENV."""
    server.add(tool_reply(call("run_command", {"command": PRINT_PREFIX}, id="c1")), Reply(text="done"))
    own_bin = Path(sys.executable).parent
    env = {"PATH": os.pathsep.join([str(own_bin), os.environ["PERSONS_BIN"], "/usr/bin", "/bin"]),
           "VIRTUAL_ENV": sys.prefix}  # nanohermes's venv, activated
    r = cli("-p", "which python?", "--yes", server=server, env=env, cwd=cwd, config=config or None)
    assert r.code == 0, r.err
    result = next(m["content"] for m in server.requests[1]["messages"] if m.get("tool_call_id") == "c1")
    lines = result.splitlines()
    return lines[lines.index("stdout:") + 1].split()


def test_a_command_runs_the_persons_python_not_nanohermess(cli: Any, server: FakeServer, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSONS_BIN", str(persons_python(tmp_path / "persons-bin")))
    prefix, virtual_env = printed(cli, server)
    assert prefix == os.path.realpath(sys.base_prefix) != os.path.realpath(sys.prefix)
    assert virtual_env == "None"


def test_a_venv_inside_the_workspace_stays_the_workspaces_own(cli: Any, server: FakeServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # nanohermes installed in the project's own venv (or a clone of it worked on): the venv stays.
    monkeypatch.setenv("PERSONS_BIN", str(persons_python(tmp_path / "persons-bin")))
    prefix, virtual_env = printed(cli, server, cwd=Path(sys.prefix).parent, checkpoints=False)
    assert prefix == os.path.realpath(sys.prefix)
    assert virtual_env == sys.prefix


def test_the_persons_hooks_and_mcp_servers_run_the_persons_python_too(cli: Any, server: FakeServer, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Programs nanohermes starts for the person obey what its commands obey: a hook written as
    # `python3 check.py`, an MCP server started by a shell script, find the person's python3.
    monkeypatch.setenv("PERSONS_BIN", str(persons_python(tmp_path / "persons-bin")))
    hook_out, server_out = tmp_path / "hook.txt", tmp_path / "server.txt"

    def record(out: Path) -> str:
        return f"python3 -c 'import os, sys; open(\"{out}\", \"w\").write(os.path.realpath(sys.prefix))'"

    demo = Path(__file__).parent / "mcp" / "demo_server.py"
    config = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": record(hook_out)}]}]},
              "mcpServers": {"demo": {"command": "sh", "args": ["-c", f"{record(server_out)}; exec {sys.executable} {demo}"]}}}
    server.add(Reply(text="done"))
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PERSONS_BIN"], "/usr/bin", "/bin"]),
           "VIRTUAL_ENV": sys.prefix}
    r = cli("-p", "hi", server=server, env=env, config=config)
    assert r.code == 0, r.err
    assert "mcp__demo__echo" in [t["function"]["name"] for t in server.requests[0]["tools"]]  # the server ran
    assert hook_out.read_text() == server_out.read_text() == os.path.realpath(sys.base_prefix)


def venv_holding(folder: Path, *, persons_package: str) -> Path:
    """A real venv with nanohermes installed in it (its dist-info; its code and what it requires
    come from the suite's venv through a .pth), and, when `persons_package` names a kind of
    metadata folder (dist-info, or egg-info as `setup.py develop` leaves), a package of the
    person's project as well: a project's venv that poetry or pipenv keep outside the project."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    site = Path(subprocess.run([str(folder / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    (site / "suite.pth").write_text(f"{REPO}\n{sysconfig.get_path('purelib')}\n")
    [info] = Path(sysconfig.get_path("purelib")).glob("nanohermes-*.dist-info")  # as pip installed it in the suite's
    shutil.copytree(info, site / info.name)
    if persons_package == "dist-info":
        (site / "Shop.Tools-1.0.dist-info").mkdir()
        (site / "Shop.Tools-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: Shop.Tools\n"
                                                                     "Version: 1.0\nRequires-Dist: nanohermes\n")
    elif persons_package == "egg-info":
        (site / "shop.egg-info").mkdir()
        (site / "shop.egg-info" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: shop\nVersion: 1.0\n")
    return folder


@pytest.mark.skipif(not list(Path(sysconfig.get_path("purelib")).glob("nanohermes-*.dist-info")),
                    reason="nanohermes is not installed in the suite's venv")
@pytest.mark.parametrize("persons_package", ["", "dist-info", "egg-info"],
                         ids=["nanohermes-alone", "with-the-projects-packages", "with-a-develop-install"])
def test_a_venv_that_holds_the_persons_packages_too_stays_theirs(server: FakeServer, tmp_path: Path, home: Path,
                                                                 workspace: Path, persons_package: str) -> None:
    # nanohermes installed in a project's venv kept outside the project (poetry's, pipenv's), and
    # that venv activated: `python3 -m pytest` is the project's. A venv of nanohermes alone is
    # nanohermes's own, and is left out.
    venv = venv_holding(tmp_path / "venv", persons_package=persons_package)
    persons = persons_python(tmp_path / "persons-bin")
    server.add(tool_reply(call("run_command", {"command": PRINT_PREFIX}, id="c1")), Reply(text="done"))
    env = {**os.environ, "PATH": os.pathsep.join([str(venv / "bin"), str(persons), "/usr/bin", "/bin"]),
           "VIRTUAL_ENV": str(venv), "OPENAI_API_KEY": "k"}
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "nanohermes", "-p", "which python?", "--yes",
                        "--base-url", server.base_url, "--model", "fake-model"], cwd=workspace, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    result = next(m["content"] for m in server.requests[1]["messages"] if m.get("tool_call_id") == "c1")
    lines = result.splitlines()
    prefix, virtual_env = lines[lines.index("stdout:") + 1].split()
    if persons_package:
        assert (prefix, virtual_env) == (os.path.realpath(venv), str(venv))
    else:
        assert (prefix, virtual_env) == (os.path.realpath(sys.base_prefix), "None")


# Counts the package metadata files a run opens (an audit hook sees every open), reported by
# one of nanohermes's exit callbacks, which a finished -p run still runs.
COUNT_METADATA = """
import sys
from nanohermes.common.exits import at_exit

opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and
                 str(args[0]).endswith(("/METADATA", "/requires.txt")) else None)
at_exit(lambda: print("metadata read:", len(opened), file=sys.stderr))
sys.argv = ["nanohermes", *sys.argv[1:]]
from nanohermes.cli import main
main()
"""


@pytest.mark.parametrize("activated", [False, True], ids=["venv-not-on-path", "venv-activated"])
def test_a_commands_start_reads_the_venvs_packages_only_when_its_environment_names_the_venv(
        server: FakeServer, tmp_path: Path, workspace: Path, activated: bool) -> None:
    """Whether the venv is nanohermes's own matters only when PATH or VIRTUAL_ENV name it:
    otherwise (pipx's venv behind a link in ~/.local/bin, nothing activated) there is nothing
    to take out, and no package's metadata is read to find out."""
    persons = persons_python(tmp_path / "persons-bin")
    server.add(tool_reply(call("run_command", {"command": PRINT_PREFIX}, id="c1")), Reply(text="done"))
    own = [str(Path(sys.executable).parent)] if activated else []
    env = {**os.environ, "PATH": os.pathsep.join([*own, str(persons), "/usr/bin", "/bin"]), "OPENAI_API_KEY": "k",
           "PYTHONPATH": str(REPO)}
    env.pop("VIRTUAL_ENV", None)
    if activated:
        env["VIRTUAL_ENV"] = sys.prefix
    r = subprocess.run([sys.executable, "-c", COUNT_METADATA, "-p", "which python?", "--yes", "--base-url",
                        server.base_url, "--model", "fake-model"], cwd=workspace, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    result = next(m["content"] for m in server.requests[1]["messages"] if m.get("tool_call_id") == "c1")
    lines = result.splitlines()
    prefix, virtual_env = lines[lines.index("stdout:") + 1].split()
    assert (prefix, virtual_env) == (os.path.realpath(sys.base_prefix), "None")  # the person's python3 either way
    read = int(r.stderr.split("metadata read: ")[1].split()[0])
    assert (read > 0) == activated, r.stderr
