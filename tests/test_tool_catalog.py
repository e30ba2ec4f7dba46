"""The built-in pool of a start comes from the declarations shipped with the package: the same
specs and behaviour as the tool modules give, none of those modules imported until a call needs
one, from the first start in a fresh HOME on; the shipped file is the one the code makes now
(the drift check), and a file that cannot be used is not needed."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from tool_support import package_copy, run_python as run, with_registered

from nanohermes.reference import WRITE
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Tool, build_tools
from nanohermes.tools.catalog import BEHAVIOUR, DECLARED, FLAGS, Deferred, shipped_text
from nanohermes.tools.declared import FILE


def test_the_shipped_declarations_are_the_ones_the_code_makes() -> None:
    assert FILE.read_text(encoding="utf-8") == shipped_text(), f"{FILE.name} drifted from the code; run: {WRITE}"


POOL = """
import json, sys
from nanohermes.common.budget import Limits
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


MODULES = POOL.replace("pool = builtin_pool()", "from nanohermes.tools.registry import build_tools; pool = build_tools()")


def test_a_start_declares_the_same_tools_without_importing_them(home: Path) -> None:
    built = json.loads(run(MODULES, home).stdout)
    first = json.loads(run(POOL, home).stdout)  # a fresh HOME: nothing kept from an earlier start
    assert not (home / "cache").exists()  # nor kept for a later one
    assert first["specs"] == built["specs"]  # what the model is offered is the same
    assert first["flags"] == built["flags"]
    assert "ReadFile" in built["kinds"] and not any(k.startswith("Deferred") for k in built["kinds"])
    assert all(k.startswith("Deferred[") for k in first["kinds"]) and len(first["kinds"]) == len(build_tools())
    # No tool's module is imported: only the tool contract the pool is typed by, and the registry
    # (with what a request offers of the pool).
    assert "nanohermes.tools.files" in built["loaded"]
    assert [m for m in first["loaded"] if m not in ("nanohermes.tools.skills", "nanohermes.tools.todo",
                                                   "nanohermes.tools.base", "nanohermes.tools.registry",
                                                   "nanohermes.tools.declared", "nanohermes.tools.offering")] == []


def test_a_declarations_file_broken_or_naming_other_modules_is_not_used(home: Path, tmp_path: Path) -> None:
    root = package_copy(tmp_path / "copy")
    path = root / "nanohermes" / "tools" / "declarations.json"
    stored = json.loads(path.read_text())
    built = json.loads(run(MODULES, home).stdout)

    def with_file(data: Any) -> dict[str, Any]:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        out: dict[str, Any] = json.loads(run(POOL, home, root=root).stdout)
        return out

    planted = json.loads(json.dumps(stored))
    planted["tools"][0]["description"] = "planted"
    assert any("planted" == s["function"]["description"] for s in with_file(planted)["specs"])  # the file is read
    whole = {k: v for k, v in stored.items() if k != "schemas"}  # declarations naming schemas it lacks
    for broken in ("{not json", json.dumps({**stored, "tools": [{"name": "x"}]}), json.dumps(whole), "[]"):
        out = with_file(broken)
        assert "nanohermes.tools.files" in out["loaded"] and out["specs"] == built["specs"]
    # A declaration may only name a built-in tool's module: anything else is not imported.
    elsewhere = json.loads(json.dumps(stored))
    elsewhere["tools"][0]["module"] = "os"
    out = with_file(elsewhere)
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
    out = json.loads(run(ASK_EVERY_METHOD, home, root=root).stdout)
    assert out["kind"] == "Deferred[probe]"
    assert out["answers"] == {name: f"probe {name}" for name in BEHAVIOUR}


def test_the_drift_check_sees_an_edited_tool_until_the_file_is_written_afresh(home: Path, tmp_path: Path) -> None:
    root = package_copy(tmp_path / "copy")
    check = "from nanohermes.tools.catalog import shipped_text; from nanohermes.tools.declared import FILE\n" \
            "print(FILE.read_text() == shipped_text())"
    assert run(check, home, root=root).stdout == "True\n"
    todo = root / "nanohermes" / "tools" / "todo.py"
    source = todo.read_text()
    assert source.count('"most {todo_items} items."') == 1
    todo.write_text(source.replace('"most {todo_items} items."', '"most {todo_items} entries."'))
    assert run(check, home, root=root).stdout == "False\n"
    run(f"from nanohermes.reference import main; main(['--write', {str(FILE.relative_to(FILE.parents[2]))!r}])",
        home, root=root)
    assert run(check, home, root=root).stdout == "True\n"
    stored = json.loads((root / "nanohermes" / "tools" / "declarations.json").read_text())
    assert "most {todo_items} entries." in next(t["description"] for t in stored["tools"] if t["name"] == "todo_write")


PROMPT = """
import sys
sys.argv = ["nanohermes", *sys.argv[1:]]
from nanohermes.cli import main
main()
"""


def test_a_call_to_a_deferred_tool_runs_the_real_one(home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("the secret word is plover\n")
    calls = tool_reply(call("read_file", {"path": "notes.txt"}), call("grep", {"pattern": 5}))
    with FakeServer([calls, Reply(text="done")]) as server:
        p = run(PROMPT, home, "-p", "read it", "--base-url", server.base_url, "--model", "m", "--no-session",
                "--output-format", "json", cwd=workspace)
        sent = server.requests[1]["messages"]
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert "plover" in results[0]
    assert results[1].startswith("ERROR:") and "`pattern`" in results[1]  # validated by the real model
    assert json.loads(p.stdout)["result"] == "done"
