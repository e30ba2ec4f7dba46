"""The built-in pool of a start comes from declarations on disk: the same specs and behaviour as
the tool modules give, none of those modules imported until a call needs one; a cache of other
code (told by its content, not its files' times), broken or tampered, ignored."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tool_support import package_copy, run_python as run, with_registered

from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Tool, build_tools
from nanohermes.tools.catalog import BEHAVIOUR, DECLARED, FLAGS, Deferred


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
                                                  "nanohermes.tools.base", "nanohermes.tools.registry",
                                                  "nanohermes.tools.cache")] == []


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
    other = {**planted, "key": stored["key"] + " edited"}
    assert not any("planted" == s["function"]["description"] for s in with_cache(other)["specs"])
    assert json.loads(path.read_text()) == stored  # written afresh from the modules
    whole = {k: v for k, v in stored.items() if k != "schemas"}  # declarations naming schemas it lacks
    for broken in ("{not json", json.dumps({**stored, "tools": [{"name": "x"}]}), json.dumps(whole), "[]"):
        out = with_cache(broken)
        assert "nanohermes.tools.files" in out["loaded"] and json.loads(path.read_text()) == stored
    # A declaration may only name a built-in tool's module: anything else is not imported.
    elsewhere = json.loads(json.dumps(stored))
    elsewhere["tools"][0]["module"] = "os"
    out = with_cache(elsewhere)
    assert "nanohermes.tools.files" in out["loaded"]


def test_every_method_and_flag_of_the_tool_contract_is_on_the_deferred_proxy() -> None:
    # Every public method of Tool is either answered from the declaration or handed to the
    # real tool: one added to Tool later cannot silently keep the base class's default on a
    # deferred tool.
    public = {n for n, v in inspect.getmembers(Tool, inspect.isfunction) if not n.startswith("_")}
    assert public == DECLARED | set(BEHAVIOUR) and not DECLARED & set(BEHAVIOUR)
    for name in BEHAVIOUR:
        assert getattr(Deferred, name) is not getattr(Tool, name), f"Deferred does not hand {name} to the real tool"
        assert inspect.iscoroutinefunction(getattr(Deferred, name)) == inspect.iscoroutinefunction(getattr(Tool, name))
    assert Deferred.output_limit is not Tool.output_limit and Deferred.parameters is not Tool.parameters
    # Every class attribute the contract declares travels with the declaration (the params
    # class is the real tool's, loaded with it).
    declared = {n for n, a in Tool.__annotations__.items() if str(a).startswith("ClassVar")}
    assert set(FLAGS) == declared - {"params"}
    # What a declaration holds is all a built-in may vary: a built-in overriding how its spec
    # is made would be offered differently once deferred (limit-valued defaults are declared
    # in `limit_defaults` instead).
    for tool in build_tools():
        for name in DECLARED - {"output_limit"}:
            assert getattr(type(tool), name) is getattr(Tool, name), f"{tool.name} overrides {name}"


PROBE_TOOL = """
from dataclasses import dataclass
from typing import ClassVar

from nanohermes.tools.base import Params, Tool
from nanohermes.tools.catalog import BEHAVIOUR


@dataclass(frozen=True, kw_only=True)
class ProbeParams(Params):
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class Probe(Tool[ProbeParams]):
    name: ClassVar[str] = "probe"
    description: ClassVar[str] = "Answers every method of the tool contract with its own name."
    params: ClassVar[type[Params]] = ProbeParams


def _answer(name: str):
    async def awaited(self, *args, **kwargs):
        return f"probe {name}"

    def called(self, *args, **kwargs):
        return f"probe {name}"

    return awaited if name in ("run", "precheck") else called


for _name in BEHAVIOUR:
    setattr(Probe, _name, _answer(_name))


def tools():
    return [Probe()]
"""

ASK_EVERY_METHOD = """
import asyncio, inspect, json
from nanohermes.tools.catalog import BEHAVIOUR, builtin_pool
from nanohermes.tools.base import Tool
tool = next(t for t in builtin_pool() if t.name == "probe")
out = {}
for name in BEHAVIOUR:
    nargs = len(inspect.signature(getattr(Tool, name)).parameters) - 1
    got = getattr(tool, name)(*[None] * nargs)
    out[name] = asyncio.run(got) if inspect.iscoroutine(got) else got
print(json.dumps({"kind": type(tool).__name__, "answers": out}))
"""


def test_a_deferred_tool_hands_every_method_of_the_contract_to_the_real_one(home: Path, tmp_path: Path) -> None:
    root = package_copy(tmp_path / "copy")
    with_registered(root, "probe", PROBE_TOOL)
    run("from nanohermes.tools.catalog import builtin_pool; builtin_pool()", home, root=root)  # the cache is kept
    out = json.loads(run(ASK_EVERY_METHOD, home, root=root).stdout)
    assert out["kind"] == "Deferred[probe]"
    assert out["answers"] == {name: f"probe {name}" for name in BEHAVIOUR}


def test_the_cache_is_told_by_the_code_it_was_made_from_not_by_its_files_times(home: Path, tmp_path: Path) -> None:
    root = package_copy(tmp_path / "copy")
    kinds = "from nanohermes.tools.catalog import builtin_pool; print(type(builtin_pool()[0]).__name__)"
    assert run(kinds, home, root=root).stdout == "ApplyPatch\n"  # the first start: built from the modules
    assert run(kinds, home, root=root).stdout == "Deferred[apply_patch]\n"
    key = json.loads(cache_file(home).read_text())["key"]
    todo = root / "nanohermes" / "tools" / "todo.py"
    os.utime(todo, ns=(todo.stat().st_atime_ns, todo.stat().st_mtime_ns + 10**9))  # touched, not changed
    assert run(kinds, home, root=root).stdout == "Deferred[apply_patch]\n"
    source = todo.read_text()
    assert source.count('"most {todo_items} items."') == 1
    todo.write_text(source.replace('"most {todo_items} items."', '"most {todo_items} entries."'))
    assert run(kinds, home, root=root).stdout == "ApplyPatch\n"  # edited: built from the modules again
    stored = json.loads(cache_file(home).read_text())
    assert stored["key"] != key
    assert "most {todo_items} entries." in next(t["description"] for t in stored["tools"] if t["name"] == "todo_write")


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
