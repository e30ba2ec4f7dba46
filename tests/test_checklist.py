"""The SPEC §10 verification checklist, one test per item, through the real tools and runtime.

Each test fails on the behaviour the original agent had (errors that bypassed the clamp, byte
counts called chars, unread stderr, silent caps, ...). Detailed cases live in each tool's own
tests; this module is the checklist in one place.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import zlib
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits, truncation_note
from nanohermes.config import Config, WebSearchConfig
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import build_tools
from exec_support import acall, make_runtime, no_leftover_processes  # noqa: F401
from exec_support import call as run_tool
from localweb import LocalSite

NOTE = re.compile(r"\n… output truncated \((\d+) chars omitted\) …\n")


def git_repo(ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\n")
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first commit"]):
        subprocess.run(["git", *cmd], cwd=ws, check=True)
    (ws / "a.txt").write_text("alpha\nbeta\ngamma\n")


def every_tool_call() -> dict[str, dict[str, object]]:
    """One ordinary call for each of the 21 built-in tools."""
    return {
        "apply_patch": {"diff": "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+created by a patch\n"},
        "edit_file": {"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
        "git_commit": {"message": "second commit", "all": True},
        "git_diff": {}, "git_log": {}, "git_status": {},
        "glob": {"pattern": "**/*"}, "grep": {"pattern": "a"}, "list_dir": {},
        "memory_save": {"text": "The project builds with make and tests with pytest."},
        "memory_search": {"query": "build"},
        "read_file": {"path": "a.txt"},
        "run_command": {"command": "echo hello from the shell"},
        "task_list": {}, "task_output": {"task_id": "nope"}, "task_kill": {"task_id": "nope"},
        "todo_write": {"todos": [{"content": "write the checklist", "status": "in_progress"}]}, "todo_read": {},
        "web_fetch": {"url": "http://127.0.0.1:9/"},  # connection refused: an error result
        "web_search": {"query": "nanohermes"},  # searxng without a URL: an error result
        "write_file": {"path": "b.txt", "content": "hello world, written in full\n"},
    }


def test_exit_clamp_applies_to_every_tool_result_and_error(workspace: Path) -> None:
    git_repo(workspace)
    calls = every_tool_call()
    assert sorted(calls) == sorted(t.name for t in build_tools())  # all 21 built-ins, no more, no less
    cfg = Config(web_search=WebSearchConfig(provider="searxng"))
    rt = Runtime(tools=build_tools(cfg, workspace), config=cfg, workspace=workspace, ui=RecordingUI(),
                 policy=Policy(mode="goal"), limits=Limits(max_output=10))
    for name, args in calls.items():
        out = run_tool(rt, name, **args)
        m = NOTE.search(out)
        assert m, f"{name} was not clamped: {out!r}"
        assert len(out) - len(truncation_note(int(m.group(1)))) == 10, name


OWN_CAPS = [  # tool, its own limit lowered to 3, arguments, the tool's own note
    ("read_file", {"read_file_window_lines": 3}, {"path": "many.txt"}, "showing lines 1-3 of 10; continue with offset=4"),
    ("list_dir", {"list_dir_entries": 3}, {}, "entries, showing first 3"),
    ("grep", {"grep_matches": 3}, {"pattern": "line"}, "… stopped after 3 matches"),
    ("glob", {"glob_results": 3}, {"pattern": "**/*"}, "showing first 3"),
    ("run_command", {"run_command_capture_bytes": 3}, {"command": "seq 1 100"}, "bytes dropped where marked"),
]


@pytest.mark.parametrize("tool,limit,args,note", OWN_CAPS, ids=[c[0] for c in OWN_CAPS])
def test_every_read_and_exec_tool_has_its_own_cap(workspace: Path, tool: str, limit: dict[str, int],
                                                  args: dict[str, object], note: str) -> None:
    (workspace / "many.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    for i in range(5):
        (workspace / f"f{i}.txt").write_text("line\n")
    out = run_tool(make_runtime(workspace, limits=Limits(**limit)), tool, **args)
    assert note in out
    assert not NOTE.search(out)  # the tool's own cap, not the exit clamp


def test_web_fetch_has_its_own_body_cap(workspace: Path) -> None:
    with LocalSite() as site:
        site.static("/big", "x" * 5000, "text/plain")
        out = run_tool(make_runtime(workspace, limits=Limits(web_fetch_body_bytes=3)), "web_fetch", url=site.url("/big"))
    assert "[response truncated at 3 bytes" in out


def test_units_are_characters_not_bytes(workspace: Path) -> None:
    (workspace / "u.txt").write_text("é" * 50)
    out = run_tool(make_runtime(workspace, limits=Limits(max_output=10)), "read_file", path="u.txt")
    # "1\t" + 50 two-byte chars = 52 chars (102 bytes): 42 chars omitted, not 92 bytes.
    assert NOTE.search(out).group(1) == "42"  # type: ignore[union-attr]


def png_bytes() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
    ihdr = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b"")


def test_reading_a_png_is_refused(workspace: Path) -> None:
    (workspace / "logo.png").write_bytes(png_bytes())
    out = run_tool(make_runtime(workspace), "read_file", path="logo.png")
    assert out.startswith(f"ERROR: logo.png looks like a binary file ({len(png_bytes())} bytes)")


def test_a_10_mb_log_is_refused_with_the_offset_limit_hint(workspace: Path) -> None:
    (workspace / "big.log").write_text("log line of some length\n" * 440_000)
    size = (workspace / "big.log").stat().st_size
    assert size > 10_000_000
    out = run_tool(make_runtime(workspace), "read_file", path="big.log")
    assert out == f"ERROR: big.log is {size} bytes (> 4194304); read it in chunks with offset/limit"


def test_a_5000_file_listing_is_capped_with_a_note(workspace: Path) -> None:
    d = workspace / "many"
    d.mkdir()
    for i in range(5000):
        (d / f"f{i:04}").touch()
    out = run_tool(make_runtime(workspace), "list_dir", path="many")
    assert out.endswith("\n\n5000 entries, showing first 300")
    assert out.count("\n") == 300 + 1


def vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_command_printing_forever_is_killed_at_its_timeout_and_memory_stays_flat(workspace: Path, no_leftover_processes: str) -> None:
    before = vm_hwm_kib()
    out = run_tool(make_runtime(workspace), "run_command", command="yes 'printing for minutes'", timeout_secs=1)
    assert "exit code: killed (timed out after 1s)" in out
    assert vm_hwm_kib() - before < 64 * 1024


def test_a_background_command_writing_1_mb_to_stderr_finishes(workspace: Path, no_leftover_processes: str) -> None:
    rt = make_runtime(workspace)

    async def go() -> str:

        started = await acall(rt, "run_command", command="head -c 1000000 /dev/zero | tr '\\0' e >&2; echo done", background=True)
        task_id = re.search(r"task (\w+)", started).group(1)  # type: ignore[union-attr]
        for _ in range(400):
            out = await acall(rt, "task_output", task_id=task_id)
            if "exited" in out or "exit code: 0" in out:
                return out
            await asyncio.sleep(0.05)
        raise AssertionError("the task never finished: " + out)

    out = asyncio.run(go())
    assert "done" in out and "eeee" in out


@pytest.mark.parametrize("tool,args,error", [
    ("run_command", {"command": "   "}, "command must not be empty"),
    ("grep", {"pattern": ""}, "pattern must not be empty"),
    ("apply_patch", {"diff": ""}, "diff must not be empty"),
    ("git_commit", {"message": " "}, "message must not be empty"),
    ("web_search", {"query": ""}, "query must not be empty"),
    ("edit_file", {"path": "x", "old_string": "", "new_string": "y"}, "old_string must not be empty; use write_file to create a file"),
])
def test_empty_arguments_fail_before_any_io(workspace: Path, tool: str, args: dict[str, object], error: str) -> None:
    ui = RecordingUI()
    out = run_tool(make_runtime(workspace, ui=ui), tool, **args)
    assert out.startswith(f"ERROR: {tool}: {error}")
    assert list(workspace.iterdir()) == []  # nothing was created, nothing ran


def test_plan_mode_hides_and_refuses_write_tools(workspace: Path) -> None:
    rt = make_runtime(workspace, mode="plan")
    shown = {s["function"]["name"] for s in rt.specs()}
    for name in ("write_file", "edit_file", "apply_patch", "run_command", "git_commit"):
        assert name not in shown
        out = asyncio.run(rt.run_calls([ToolCall(id="w", name=name, arguments="{}")]))[0].content
        assert out is not None and out.startswith("ERROR: "), out
    assert run_tool(rt, "write_file", path="x", content="no") == "ERROR: write_file is not available in plan mode"
    assert not (workspace / "x").exists()


def test_a_denied_command_is_not_run_and_the_model_is_told_not_to_retry(cli, server: FakeServer, workspace: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch made-it"}, id="r")), Reply(text="I will ask."))
    r = cli("-p", "make a file", server=server)
    assert r.code == 0, r.err
    assert server.requests[1]["messages"][-1] == {"role": "tool", "content": DENIED, "tool_call_id": "r"}
    assert not (workspace / "made-it").exists()


def test_with_a_cap_lowered_to_3_the_note_and_count_are_exact(workspace: Path) -> None:
    for name in "abcdefg":
        (workspace / f"{name}.txt").write_text("needle\n")
    out = run_tool(make_runtime(workspace, limits=Limits(grep_matches=3)), "grep", pattern="needle")
    assert out.splitlines()[:3] == ["a.txt:1:needle", "b.txt:1:needle", "c.txt:1:needle"]
    assert "… stopped after 3 matches" in out
    assert sum(":1:needle" in line for line in out.splitlines()) == 3


def test_denied_approval_is_recorded_once(workspace: Path) -> None:
    ui = RecordingUI(answers=["deny"])
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=ui, policy=Policy(), limits=Limits())
    assert run_tool(rt, "run_command", command="touch x") == DENIED
    assert len(ui.of(ApprovalRequest)) == 1 and not (workspace / "x").exists()
