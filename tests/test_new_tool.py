"""A new built-in tool is one module plus its entry in the registry: added so to a copy of the
package, its spec reaches the model, permissions know it by its declared kind and effect, its
limits are the ones in force, and the generated reference lists it."""

from __future__ import annotations

import json
from pathlib import Path

from tool_support import package_copy, run_python as run, with_registered

from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent

TOY = '''"""count_lines: how many lines a text file has."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from nanohermes.tools.base import Attempt, Params, ReadOnlyTool, SubjectKind, Tool, ToolContext, ToolError, about


@dataclass(frozen=True, kw_only=True)
class CountLinesParams(Params):
    path: str = field(metadata=about("the file, relative to the workspace"))
    most: int | None = field(default=None, metadata=about("stop counting there", ge=1))
    non_empty: ClassVar[dict[str, str]] = {"path": "name a file"}


@dataclass(frozen=True, kw_only=True)
class CountLines(ReadOnlyTool[CountLinesParams]):
    name: ClassVar[str] = "count_lines"
    group: ClassVar[str] = "files"
    description: ClassVar[str] = "Count the lines of a text file, at most {read_file_window_lines} unless `most` says."
    params: ClassVar[type[Params]] = CountLinesParams
    kind: ClassVar[SubjectKind] = "path"
    spawns: ClassVar[bool] = False
    limit_defaults: ClassVar[dict[str, str]] = {"most": "read_file_window_lines"}

    def rule_subject(self, args: CountLinesParams) -> str | None:
        return args.path

    def output_limit(self) -> str:
        return "read_file_window_lines lines"

    async def run(self, args: CountLinesParams, ctx: ToolContext, attempt: Attempt) -> str:
        most = args.most or ctx.limits.read_file_window_lines
        try:
            lines = self.resolved(args, ctx, attempt).paths[0].read_text().splitlines()  # the file judged
        except OSError as e:
            raise ToolError(f"cannot read {args.path}: {e.strerror}") from None
        if len(lines) > most:
            return f"more than {most} lines"
        return f"{len(lines)} lines"


def tools() -> list[Tool]:
    return [CountLines()]
'''

PROMPT = """
import sys
sys.argv = ["nanohermes", *sys.argv[1:]]
from nanohermes.cli import main
main()
"""

DECLARED = """
import json, sys
from nanohermes.common.budget import Limits
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.tools.catalog import builtin_pool, declarations
from nanohermes.tools.registry import build_tools
tool = next(t for t in (build_tools() if "modules" in sys.argv else builtin_pool()) if t.name == "count_lines")
print(json.dumps({"class": type(tool).__name__, "kinds": declarations()["count_lines"], "spec": tool.spec(),
                  "lowered": tool.spec(Limits(read_file_window_lines=7)),
                  "rule": Rule.parse("count_lines(*.secret)", kinds={"count_lines": tool.kind}).pattern}))
"""


def changed_files(root: Path) -> list[str]:
    """The files of the package copied to `root` that differ from this repository's, or are new."""
    ours, copy = REPO / "nanohermes", root / "nanohermes"

    def files(base: Path) -> set[str]:
        return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts}

    def same(f: str) -> bool:
        return (ours / f).is_file() and (copy / f).is_file() and (ours / f).read_bytes() == (copy / f).read_bytes()

    return sorted(f for f in files(ours) | files(copy) if not same(f))


def test_a_tool_module_and_its_registry_entry_make_a_whole_built_in_tool(home: Path, tmp_path: Path,
                                                                          workspace: Path) -> None:
    root = package_copy(tmp_path / "copy")
    with_registered(root, "count", TOY)
    assert changed_files(root) == ["tools/count.py", "tools/declarations.json", "tools/registry.py"]
    before = (REPO / "nanohermes" / "tools" / "registry.py").read_text().splitlines()
    after = (root / "nanohermes" / "tools" / "registry.py").read_text().splitlines()
    # The registry entry: the module's import, and its tools in the list.
    assert [line for line in after if line not in before] == [
        "    from nanohermes.tools.count import tools as count",
        next(line for line in after if line.startswith("    tools: list[Tool] = [*files(), *count(), "))]

    # Its spec, with the limits in force; the permissions know it as a path reader.
    for made in ("CountLines", "Deferred[count_lines]"):  # built from the module, then as a start builds it
        out = json.loads(run(DECLARED, home, *(["modules"] if made == "CountLines" else []), root=root).stdout)
        assert out["class"] == made
        assert out["kinds"] == ["path", "read"]
        assert out["rule"] == "*.secret"  # a path rule: the pattern of the tool's declared kind
        fn = out["spec"]["function"]
        assert fn["description"] == "Count the lines of a text file, at most 2000 unless `most` says."
        assert fn["parameters"]["properties"]["most"]["default"] == 2000 and fn["parameters"]["required"] == ["path"]
        assert out["lowered"]["function"]["description"].endswith("at most 7 unless `most` says.")
        assert out["lowered"]["function"]["parameters"]["properties"]["most"]["default"] == 7

    # The reference lists it, with its limit.
    tables = run("import sys; from nanohermes.reference import main; main([])", home, root=root).stdout
    assert "| `count_lines` | files | `path`, `[most=2000]` | yes | yes | no | 2,000 lines |" in tables

    # A real run: the model is offered it and calls it; a deny rule on its path kind refuses one
    # call; a lowered limit is what it counts to.
    (workspace / "notes.txt").write_text("one\ntwo\nthree\nfour\n")
    (workspace / "keys.secret").write_text("k\n")
    config = home / ".config" / "nanohermes" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permissions": {"deny": ["count_lines(*.secret)"]},
                                  "limits": {"read_file_window_lines": 3}}))
    calls = tool_reply(call("count_lines", {"path": "notes.txt"}), call("count_lines", {"path": "keys.secret"}),
                       call("count_lines", {"path": "notes.txt", "most": 10}))
    with FakeServer([calls, Reply(text="counted")]) as server:
        p = run(PROMPT, home, "-p", "count them", "--base-url", server.base_url, "--model", "m", "--no-session",
                cwd=workspace, root=root)
        offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
        results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert p.stdout == "counted\n"
    assert offered["count_lines"]["description"].endswith("at most 3 unless `most` says.")
    assert results[0] == "more than 3 lines"
    assert results[1].startswith("ERROR:") and "count_lines(*.secret)" in results[1]
    assert results[2] == "4 lines"
