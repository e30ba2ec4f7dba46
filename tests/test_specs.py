"""What the model reads: the size and shape of the built-in tool specs, descriptions that
follow the limits in force, and the system prompt's budget and reminders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.turn.context import IDENTITY, system_prompt
from nanohermes.common.events import RecordingUI
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools

SPEC_BUDGET_CHARS = 11_000


def _walk(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        out.append(node)
        for v in node.values():
            out.extend(_walk(v))
    elif isinstance(node, list):
        for v in node:
            out.extend(_walk(v))
    return out


def test_the_built_in_specs_fit_the_budget() -> None:
    specs = [t.spec() for t in build_tools()]
    assert len(specs) == 21
    sizes = {s["function"]["name"]: len(json.dumps(s, ensure_ascii=False)) for s in specs}
    total = sum(sizes.values())
    print(f"\ntool specs: {total} chars for {len(specs)} tools (budget {SPEC_BUDGET_CHARS})")
    for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<14} {n:>5}  {n * 100 / total:4.1f}%")
    assert total <= SPEC_BUDGET_CHARS


def test_specs_use_the_portable_schema_subset() -> None:
    for tool in build_tools():
        params = tool.spec()["function"]["parameters"]
        text = json.dumps(params)
        assert "$ref" not in text and "$defs" not in text and "anyOf" not in text and '"title"' not in text, tool.name
        for node in _walk(params):
            if node.get("type") == "object":
                # strict mode's subset: closed objects; their required keys are properties
                assert node.get("additionalProperties") is False, tool.name
                assert set(node.get("required", [])) <= set(node["properties"]), tool.name
            assert node.get("default", 0) is not None, tool.name


def test_optional_parameters_are_plain_typed_and_not_required() -> None:
    by = {t.name: t.spec()["function"]["parameters"] for t in build_tools()}
    assert by["grep"]["properties"]["path"] == {"type": "string"}
    assert "path" not in by["grep"]["required"]
    assert by["git_commit"]["properties"]["paths"] == {"items": {"type": "string"}, "type": "array"}
    item = by["todo_write"]["properties"]["todos"]["items"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]


def test_every_cross_pointer_of_the_spec_survives() -> None:
    d = {t.name: t.describe() for t in build_tools()}
    assert "Prefer edit_file for small changes" in d["write_file"]
    assert "instead of edit_file" in d["apply_patch"] and "*** Begin Patch" in d["apply_patch"]
    assert "literal substring" in d["grep"] and "glob" in d["grep"] and "grep" in d["glob"]
    assert "background=true" in d["run_command"] and "task_output" in d["run_command"]
    assert "web_fetch" in d["web_search"] and "replaces any previous list" in d["todo_write"]
    assert "one concise, self-contained sentence" in d["memory_save"]
    assert "Asks the user to confirm unless auto-approval is on" in d["git_commit"]


def test_a_lowered_grep_limit_changes_the_description(tmp_path: Path) -> None:
    rt = Runtime(tools=build_tools(), config=Config(), workspace=tmp_path, ui=RecordingUI(), policy=Policy(),
                 limits=Limits(grep_matches=7, grep_file_max_bytes=3 * 1024))
    grep = next(s for s in rt.specs() if s["function"]["name"] == "grep")["function"]["description"]
    assert "At most 7 matches" in grep and "files over 3 KiB" in grep
    assert "At most 200 matches" in next(t for t in build_tools() if t.name == "grep").describe()


def test_other_limits_reach_their_descriptions() -> None:
    lim = Limits(read_file_window_lines=30, read_file_max_bytes=1024, list_dir_entries=9, todo_items=4,
                 run_command_max_timeout_secs=60, web_search_max_results=3, web_fetch_timeout_secs=2.5)
    d = {t.name: t.describe(lim) for t in build_tools()}
    assert "(default 30)" in d["read_file"] and "files over 1 KiB need offset/limit" in d["read_file"]
    read_file = next(t for t in build_tools() if t.name == "read_file")
    assert read_file.spec(lim)["function"]["parameters"]["properties"]["limit"]["default"] == 30
    assert "(500..20000)" in d["web_fetch"] and "(500..900)" in next(
        t for t in build_tools() if t.name == "web_fetch").describe(Limits(max_output=900))
    assert "at most 9." in d["list_dir"] and "At most 4 items" in d["todo_write"]
    assert "(1..60;" in d["run_command"] and "`count` is 1..3." in d["web_search"]
    assert "times out after 2.5 s" in d["web_fetch"]
    assert not any("{" in text and "}" in text and "_" in text.split("{")[1].split("}")[0] for text in d.values())


def test_the_system_prompt_carries_the_reminders_within_budget(tmp_path: Path) -> None:
    assert len(IDENTITY) <= 4000
    for words in ("until the task is solved", "-p", "goal mode", "truly blocked", "do not guess", "read_file before",
                  "todo_write", "Run the checks", "never revert", "destructive", "files you changed", "line"):
        assert words in " ".join(IDENTITY.split()), words
    prompt = system_prompt(tmp_path)
    assert prompt.startswith(IDENTITY) and f"Workspace: {tmp_path}" in prompt
