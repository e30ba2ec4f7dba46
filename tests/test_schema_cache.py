"""Tool parameter schemas come from the tool cache on disk: the same specs as pydantic renders,
no validator built at start for a tool that is never called, and a broken cache, or one of
other code, ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tool_support import run_python as run

from nanohermes.testing import FakeServer, Reply


SPECS = """
import json
from nanohermes.config import Config
from nanohermes.tools import build_tools
print(json.dumps([t.spec() for t in build_tools(Config())], sort_keys=True))
"""


def cache_file(home: Path) -> Path:
    return home / "cache" / "nanohermes" / "tools.json"


def rendered(home: Path) -> Any:
    """The specs as pydantic renders them: with a cache folder that cannot be created (it
    would be inside a file), every start renders them and writes nothing."""
    blocker = home / "not-a-folder"
    blocker.write_text("")
    out = json.loads(run(SPECS, home, cache=blocker / "cache").stdout)
    assert blocker.read_text() == ""
    return out


def test_cached_specs_are_the_specs_pydantic_renders(home: Path) -> None:
    fresh = rendered(home)
    assert not cache_file(home).exists()
    cold = json.loads(run(SPECS, home).stdout)  # renders and stores them
    stored = json.loads(cache_file(home).read_text())["schemas"]
    assert "nanohermes.tools.files.ReadFileParams" in stored
    warm = json.loads(run(SPECS, home).stdout)  # read back
    assert cold == fresh
    assert warm == fresh


def test_a_stored_schema_is_used_only_under_the_key_of_this_code(home: Path) -> None:
    def read_file_params() -> Any:
        specs = json.loads(run(SPECS, home).stdout)
        return next(s["function"]["parameters"] for s in specs if s["function"]["name"] == "read_file")

    first = read_file_params()
    path = cache_file(home)
    stored = json.loads(path.read_text())
    entry = stored["schemas"]["nanohermes.tools.files.ReadFileParams"]
    planted = json.loads(json.dumps(stored))
    planted["schemas"]["nanohermes.tools.files.ReadFileParams"]["properties"]["planted"] = {"type": "string"}
    path.write_text(json.dumps(planted))
    assert "planted" in read_file_params()["properties"]  # the cache is what a start reads
    path.write_text(json.dumps({**planted, "key": stored["key"] + " edited"}))
    assert read_file_params() == first  # the cache of other code: rendered again, and kept afresh
    assert json.loads(path.read_text())["schemas"]["nanohermes.tools.files.ReadFileParams"] == entry
    assert json.loads(path.read_text())["key"] == stored["key"]


def test_a_broken_cache_file_is_rendered_over(home: Path) -> None:
    fresh = rendered(home)
    cache_file(home).parent.mkdir(parents=True)
    cache_file(home).write_text("{not json")
    assert json.loads(run(SPECS, home).stdout) == fresh
    assert "nanohermes.tools.files.ReadFileParams" in json.loads(cache_file(home).read_text())["schemas"]


PROBE = """
import sys
from nanohermes.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]

def report():  # an exit callback: a finished -p run skips the rest of the interpreter's teardown
    # A tool's validator is a pydantic TypeAdapter over its params, made on its first parse.
    print("validators built:", "pydantic.type_adapter" in sys.modules, file=sys.stderr)

at_exit(report)
from nanohermes.cli import main
main()
"""


def test_a_p_turn_without_tool_calls_builds_no_tool_validator(home: Path, workspace: Path) -> None:
    with FakeServer(default=Reply(text="no tools needed")) as server:
        args = ("-p", "hi", "--base-url", server.base_url, "--model", "fake-model", "--no-session")
        run(PROBE, home, *args, cwd=workspace)  # the first start fills the cache
        p = run(PROBE, home, *args, cwd=workspace)
    assert p.stdout == "no tools needed\n"
    assert "validators built: False" in p.stderr


def test_the_cache_is_private(home: Path) -> None:
    run(SPECS, home)
    assert cache_file(home).stat().st_mode & 0o777 == 0o600
    assert cache_file(home).parent.stat().st_mode & 0o777 == 0o700
