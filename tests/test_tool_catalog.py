"""The built-in pool of a start comes from declarations on disk: the same specs and behaviour as
the tool modules give, none of those modules imported until a call needs one, and a stale,
broken or tampered cache ignored."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from tool_support import run_python as run

from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Tool, build_tools
from nanohermes.tools.catalog import Deferred


POOL = """
import json, sys
from nanohermes.budget import Limits
from nanohermes.tools.catalog import builtin_pool
pool = builtin_pool()
# Every whole-number limit halved: a description or schema default that states a limit shows it.
base = Limits()
lowered = Limits(**{n: getattr(base, n) // 2 for n in Limits.names()
                    if type(getattr(base, n)) is int and getattr(base, n) > 1})
specs = [t.spec() for t in pool] + [t.spec(lowered) for t in pool]
loaded = sorted(m for m in sys.modules if m.startswith("nanohermes.tools.") and m != "nanohermes.tools.catalog")
print(json.dumps({"specs": specs, "kinds": sorted(type(t).__name__ for t in pool), "loaded": loaded,
                  "flags": {t.name: [t.group, t.approval, t.kind, t.effect, t.output_limit()] for t in pool}}))
"""


def cache_file(home: Path) -> Path:
    return home / "cache" / "nanohermes" / "tools.json"


def test_a_warm_start_declares_the_same_tools_without_importing_them(home: Path) -> None:
    cold = json.loads(run(POOL, home).stdout)
    assert cache_file(home).is_file() and cache_file(home).stat().st_mode & 0o777 == 0o600
    warm = json.loads(run(POOL, home).stdout)
    assert warm["specs"] == cold["specs"]  # what the model is offered is the same
    assert warm["flags"] == cold["flags"]
    assert "ReadFile" in cold["kinds"] and not any(k.startswith("Deferred") for k in cold["kinds"])
    assert all(k.startswith("Deferred[") for k in warm["kinds"]) and len(warm["kinds"]) == len(build_tools())
    # No tool's module is imported: only the tool contract the pool is typed by, and the registry.
    assert "nanohermes.tools.files" in cold["loaded"]
    assert [m for m in warm["loaded"] if m not in ("nanohermes.tools.skills", "nanohermes.tools.todo",
                                                  "nanohermes.tools.base", "nanohermes.tools.registry")] == []


def test_a_cache_of_other_code_or_broken_or_naming_other_modules_is_not_used(home: Path) -> None:
    run(POOL, home)
    path = cache_file(home)
    stored = json.loads(path.read_text())

    def with_cache(data: Any) -> dict[str, Any]:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        out: dict[str, Any] = json.loads(run(POOL, home).stdout)
        return out

    planted = json.loads(json.dumps(stored))
    planted["tools"][0]["description"] = "planted"
    assert any("planted" == s["function"]["description"] for s in with_cache(planted)["specs"])  # the cache is read
    other = {**planted, "stamp": stored["stamp"] + " edited"}
    assert not any("planted" == s["function"]["description"] for s in with_cache(other)["specs"])
    assert json.loads(path.read_text()) == stored  # written afresh from the modules
    for broken in ("{not json", json.dumps({"stamp": stored["stamp"], "tools": [{"name": "x"}]}), "[]"):
        out = with_cache(broken)
        assert "nanohermes.tools.files" in out["loaded"] and json.loads(path.read_text()) == stored
    # A declaration may only name a built-in tool's module: anything else is not imported.
    elsewhere = json.loads(json.dumps(stored))
    elsewhere["tools"][0]["module"] = "os"
    out = with_cache(elsewhere)
    assert "nanohermes.tools.files" in out["loaded"]


def test_every_behaviour_of_a_deferred_tool_is_the_real_tools() -> None:
    # Methods that answer from the declaration; every other public method takes the call's
    # arguments (or runs it) and must come from the real tool, so a method added to Tool later
    # cannot silently keep the base class's default on a deferred tool.
    declared = {"describe", "spec", "parameters", "output_limit", "in_thread"}
    public = {n for n, v in inspect.getmembers(Tool, inspect.isfunction) if not n.startswith("_")}
    assert public - declared <= set(vars(Deferred)), sorted(public - declared - set(vars(Deferred)))
    # What a declaration holds is all a built-in may vary: a built-in overriding how its spec
    # is made would be offered differently once deferred (limit-valued defaults are declared
    # in `limit_defaults` instead).
    for tool in build_tools():
        for name in ("describe", "spec", "parameters"):
            assert getattr(type(tool), name) is getattr(Tool, name), f"{tool.name} overrides {name}"


PROMPT = """
import sys
sys.argv = ["nanohermes", *sys.argv[1:]]
from nanohermes.cli import main
main()
"""


@pytest.mark.parametrize("warm", [False, True])
def test_a_call_to_a_deferred_tool_runs_the_real_one(home: Path, workspace: Path, warm: bool) -> None:
    (workspace / "notes.txt").write_text("the secret word is plover\n")
    if warm:
        run(POOL, home)
    calls = tool_reply(call("read_file", {"path": "notes.txt"}), call("grep", {"pattern": 5}))
    with FakeServer([calls, Reply(text="done")]) as server:
        p = run(PROMPT, home, "-p", "read it", "--base-url", server.base_url, "--model", "m", "--no-session",
                "--output-format", "json", cwd=workspace)
        sent = server.requests[1]["messages"]
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert "plover" in results[0]
    assert results[1].startswith("ERROR:") and "`pattern`" in results[1]  # validated by the real model
    assert json.loads(p.stdout)["result"] == "done"
