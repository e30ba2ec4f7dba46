"""Tool parameter schemas ship with the package: the same specs as pydantic renders from the
code, no validator built at start for a tool that is never called, from the first start in a
fresh HOME on, and nothing kept in the HOME for a later start."""

from __future__ import annotations

import json
from pathlib import Path

from tool_support import package_copy, run_python as run

from nanohermes.testing import FakeServer, Reply

SPECS = """
import json, sys
from nanohermes.config import Config
from nanohermes.tools import build_tools
print(json.dumps([t.spec() for t in build_tools(Config())], sort_keys=True))
print("pydantic" in sys.modules)
"""

def test_shipped_specs_are_the_specs_pydantic_renders(home: Path, tmp_path: Path) -> None:
    specs, loaded = run(SPECS, home).stdout.splitlines()
    assert loaded == "False"  # read from the package: no pydantic to render them
    root = package_copy(tmp_path / "copy")
    (root / "nanohermes" / "tools" / "declarations.json").unlink()  # every schema rendered from the code
    rendered, loaded = run(SPECS, home, root=root).stdout.splitlines()
    assert loaded == "True"
    assert json.loads(specs) == json.loads(rendered)
    assert not (home / "cache").exists()


def test_a_schema_the_package_does_not_ship_is_rendered(home: Path, tmp_path: Path) -> None:
    root = package_copy(tmp_path / "copy")
    shipped = root / "nanohermes" / "tools" / "declarations.json"
    data = json.loads(shipped.read_text())
    del data["schemas"]["nanohermes.tools.todo.TodoWriteParams"]
    shipped.write_text(json.dumps(data))
    specs, loaded = run(SPECS, home, root=root).stdout.splitlines()
    assert loaded == "True"
    ours = json.loads(run(SPECS, home).stdout.splitlines()[0])
    assert json.loads(specs) == ours
    for broken in ("{not json", "[]"):  # a file that cannot be read: every schema rendered, the same
        shipped.write_text(broken)
        specs, loaded = run(SPECS, home, root=root).stdout.splitlines()
        assert json.loads(specs) == ours and loaded == "True"


PROBE = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]

def report():  # an exit callback: a finished -p run skips the rest of the interpreter's teardown
    # A tool's validator is a pydantic TypeAdapter over its params, made on its first parse.
    print("validators built:", "pydantic.type_adapter" in sys.modules, file=sys.stderr)

at_exit(report)
from nanohermes.cli import main
main()
"""


def test_a_p_turn_without_tool_calls_builds_no_tool_validator_from_a_fresh_home(home: Path, workspace: Path) -> None:
    with FakeServer(default=Reply(text="no tools needed")) as server:
        args = ("-p", "hi", "--base-url", server.base_url, "--model", "fake-model", "--no-session")
        p = run(PROBE, home, *args, cwd=workspace)
    assert p.stdout == "no tools needed\n"
    assert "validators built: False" in p.stderr
    assert not (home / "cache" / "nanohermes" / "tools.json").exists()
