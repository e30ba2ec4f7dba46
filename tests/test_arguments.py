"""Tool-call arguments as models really send them: repaired when the intent is clear,
explained when not, and refused when nested past the limit without harming sibling calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools


def runtime(ws: Path, limits: Limits | None = None) -> Runtime:
    return Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"),
                   limits=limits or Limits())


def results(rt: Runtime, *calls: tuple[str, str]) -> list[str]:
    out = asyncio.run(rt.run_calls([ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)]))
    return [m.content or "" for m in out]


@pytest.mark.parametrize("raw", [
    '{"path": "a.txt",}',                        # a trailing comma
    '{"path": "a.txt", "limit": 1 , }',
    json.dumps(json.dumps({"path": "a.txt"})),   # the object encoded again as a JSON string
    json.dumps(json.dumps({"path": "a.txt", "limit": 1,})),
    json.dumps('{"path": "a.txt",}'),            # both slips at once
], ids=["trailing-comma", "trailing-comma-spaced", "double-encoded", "double-encoded-with-field", "both"])
def test_repaired_shapes_run(tmp_path: Path, raw: str) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    assert results(runtime(tmp_path), ("read_file", raw)) == ["1\thello"]


def test_a_comma_inside_a_string_is_not_touched(tmp_path: Path) -> None:
    [out] = results(runtime(tmp_path), ("write_file", '{"path": "b.txt", "content": "x,}\\n",}'))
    assert out == "created b.txt (4 bytes, 1 line)"
    assert (tmp_path / "b.txt").read_text() == "x,}\n"


def test_text_that_is_not_json_is_quoted_back(tmp_path: Path) -> None:
    [out] = results(runtime(tmp_path), ("read_file", "path=a.txt limit=5"))
    assert out.startswith("ERROR: arguments for read_file ") and "not valid JSON" in out, out
    assert out.endswith(" 'path=a.txt limit=5'")  # what was received, quoted back
    long = '{"path": "' + "x" * 200
    [out] = results(runtime(tmp_path), ("read_file", long))
    assert out.endswith(f"Received: {long[:80] + '…'!r}")


def test_a_json_string_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    [out] = results(runtime(tmp_path), ("read_file", '"just words"'))
    assert out.startswith("ERROR: arguments for read_file ") and out.endswith(" got str"), out


def test_deep_nesting_is_an_error_naming_the_field_and_siblings_still_run(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    deep = '{"todos": ' + "[" * 3000 + "]" * 3000 + "}"
    out = results(runtime(tmp_path), ("todo_write", deep), ("read_file", '{"path": "a.txt"}'))
    assert out[0].startswith("ERROR: arguments for todo_write ") and " 64 levels " in out[0] and "`todos`" in out[0]
    assert out[1] == "1\thello"  # the next call still runs


def test_depth_limit_lowered_to_three(tmp_path: Path) -> None:
    rt = runtime(tmp_path, Limits(tool_args_max_depth=3))
    ok = '{"todos": [{"content": "a", "status": "pending"}]}'  # object, list, object: 3 levels
    [saved] = results(rt, ("todo_write", ok))
    assert saved.split("\n")[1:] == ["[ ] 1. a"]
    [out] = results(rt, ("todo_write", '{"todos": [[{"content": "a"}]]}'))
    assert out == ("ERROR: arguments for todo_write nest deeper than 3 levels (limit tool_args_max_depth) in field "
                   "`todos`; send flatter arguments")
