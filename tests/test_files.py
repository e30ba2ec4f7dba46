"""read_file, list_dir, write_file, edit_file and the write path policy, on real files."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import struct
import zlib
from dataclasses import dataclass, fields
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nanohermes.common.budget import Limits
from nanohermes.config import Config, user_config_path
from nanohermes.common.events import ApprovalRequest, RecordingUI, ToolFinished
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import PROTECTED, Policy, Rule
from nanohermes.guard.permissions.policy import UNATTENDED
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.tools import Attempt, Tool, ToolContext, ToolError, ToolResult, build_tools
from nanohermes.tools.artefacts import all_numbered, omission
from nanohermes.tools.fileops import TextFile, unified_diff
from nanohermes.tools.files import ListDir, ReadFile
from nanohermes.tools.writes import EditFile, WriteFile
from nanohermes.tools.patch import ApplyPatch
from nanohermes.tools.patches.unified import apply, parse


_SESSIONS: dict[Path, dict[str, Any]] = {}


def ctx_for(ws: Path, config: Config | None = None, **limits: Any) -> ToolContext:
    # One session per workspace: what the tools read and wrote is remembered between calls.
    return ToolContext(workspace=ws, limits=Limits(**limits), config=config or Config(),
                       state=_SESSIONS.setdefault(ws, {}))


def run(tool: Tool, ws: Path, args: dict[str, Any], config: Config | None = None, **limits: Any) -> str:
    out = asyncio.run(tool.run(tool.parse(args), ctx_for(ws, config, **limits), Attempt()))
    return out.text if isinstance(out, ToolResult) else out


def error(tool: Tool, ws: Path, args: dict[str, Any], **limits: Any) -> str:
    with pytest.raises(ToolError) as e:
        run(tool, ws, args, **limits)
    return str(e.value)


def window(out: str) -> tuple[list[str], str]:
    """read_file's numbered lines, and the note after them."""
    body, _, note = out.partition("\n\n")
    return body.split("\n"), note


def png_bytes() -> bytes:
    """A real 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


# -- read_file -------------------------------------------------------------------------

def test_read_numbers_lines_to_the_width_of_the_files_line_count(workspace: Path) -> None:
    (workspace / "f.txt").write_text("".join(f"l{i}\n" for i in range(1, 121)))
    rows, note = window(run(ReadFile(), workspace, {"path": "f.txt", "limit": 2}))
    assert rows == ["  1\tl1", "  2\tl2"] and " 1-2 of 120;" in note and note.endswith(" offset=3")
    rows, note = window(run(ReadFile(), workspace, {"path": "f.txt", "offset": 99, "limit": 2}))
    assert rows == [" 99\tl99", "100\tl100"] and " 99-100 of 120;" in note and note.endswith(" offset=101")
    assert run(ReadFile(), workspace, {"path": "f.txt", "offset": 120}) == "120\tl120"


def test_read_window_limit_lowered_to_three(workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\nc\nd\ne\n")
    out = run(ReadFile(), workspace, {"path": "f.txt"}, read_file_window_lines=3)
    assert out == "1\ta\n2\tb\n3\tc\n\nshowing lines 1-3 of 5; continue with offset=4"


def test_read_stops_inside_max_output_so_continue_is_exact(workspace: Path) -> None:
    (workspace / "f.txt").write_text("".join(f"{i:04}" + "x" * 96 + "\n" for i in range(1, 1001)))
    out = run(ReadFile(), workspace, {"path": "f.txt"}, max_output=1000)
    body, note = out.split("\n\n")
    rows = body.split("\n")
    assert len(out) <= 1000  # the exit clamp never has to cut the window
    assert rows[-1].startswith(f"{len(rows):>4}\t{len(rows):04}")
    assert f" 1-{len(rows)} of 1000;" in note and note.endswith(f" offset={len(rows) + 1}")


def test_read_clips_long_lines_with_a_note(workspace: Path) -> None:
    (workspace / "f.txt").write_text("short\n" + "y" * 50 + "\n" + "z" * 7 + "\n")
    out = run(ReadFile(), workspace, {"path": "f.txt"}, read_file_line_chars=6)
    assert out == "1\tshort\n2\tyyyyyy…\n3\tzzzzzz…\n\n2 lines longer than 6 chars clipped with …"


def test_read_huge_single_line_streams_without_loading_it(workspace: Path) -> None:
    (workspace / "one.txt").write_bytes(b"q" * (3 * 1024 * 1024) + b"\nend\n")
    rows, note = window(run(ReadFile(), workspace, {"path": "one.txt", "offset": 1, "limit": 5}, read_file_line_chars=10))
    assert rows == ["1\tqqqqqqqqqq…", "2\tend"] and note.startswith("1 line ") and " 10 chars " in note


def test_ten_megabyte_log_is_refused_with_the_offset_limit_hint(workspace: Path) -> None:
    line = "2024-05-01T10:00:00 INFO request served in 12ms\n"
    with open(workspace / "app.log", "w") as f:
        f.write(line * (10_000_000 // len(line) + 1))
    size = (workspace / "app.log").stat().st_size
    refused = error(ReadFile(), workspace, {"path": "app.log"})
    assert refused.startswith(f"app.log is {size} bytes (> 4194304)") and "offset/limit" in refused, refused
    total = size // len(line)
    rows, note = window(run(ReadFile(), workspace, {"path": "app.log", "offset": 200_000, "limit": 2}))
    w = len(str(total))
    assert rows == [f"{200_000:>{w}}\t{line.rstrip()}", f"{200_001:>{w}}\t{line.rstrip()}"]
    assert f" 200000-200001 of {total};" in note and note.endswith(" offset=200002")


def test_read_gate_lowered(workspace: Path) -> None:
    (workspace / "f.txt").write_text("0123456789\n")
    assert error(ReadFile(), workspace, {"path": "f.txt"}, read_file_max_bytes=3) == (
        "f.txt is 11 bytes (> 3); read it in chunks with offset/limit")
    assert run(ReadFile(), workspace, {"path": "f.txt", "limit": 1}, read_file_max_bytes=3) == "1\t0123456789"


def test_png_is_refused_as_binary_with_its_size(workspace: Path) -> None:
    data = png_bytes()
    (workspace / "logo.png").write_bytes(data)
    refused = error(ReadFile(), workspace, {"path": "logo.png"})
    assert refused.startswith("logo.png ") and f"binary file ({len(data)} bytes)" in refused, refused


def test_binary_sniff_window_lowered(workspace: Path) -> None:
    (workspace / "late.bin").write_bytes(b"abcd\x00")
    assert "1\tabcd\x00" == run(ReadFile(), workspace, {"path": "late.bin"}, binary_sniff_bytes=4)
    assert "looks like a binary file (5 bytes)" in error(ReadFile(), workspace, {"path": "late.bin"}, binary_sniff_bytes=5)


def test_invalid_utf8_is_shown_with_replacement_characters(workspace: Path) -> None:
    (workspace / "gbk.txt").write_bytes("中文".encode("gbk") + b"\nok\n")
    assert run(ReadFile(), workspace, {"path": "gbk.txt"}) == "1\t\ufffd\ufffd\ufffd\ufffd\n2\tok"


def test_crlf_and_bom_are_not_shown(workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    assert run(ReadFile(), workspace, {"path": "w.txt"}) == "1\tone\n2\ttwo"


@pytest.mark.parametrize("setup,path,expected", [
    (lambda ws: (ws / "d").mkdir(), "d", "d is a directory; use list_dir to see its entries"),
    (lambda ws: None, "nope.txt", "nope.txt does not exist; check the path with list_dir or glob"),
    (lambda ws: (ws / "e.txt").write_text(""), "e.txt", None),
    (lambda ws: os.mkfifo(ws / "pipe"), "pipe",
     "pipe is not a regular file (a device, pipe or socket); read_file reads regular files only"),
])
def test_read_errors_name_the_path_and_the_next_step(workspace: Path, setup: Any, path: str, expected: str | None) -> None:
    setup(workspace)
    if expected is None:
        assert run(ReadFile(), workspace, {"path": path}) == "e.txt is empty (0 lines)"
    else:
        assert error(ReadFile(), workspace, {"path": path}) == expected


def test_nul_in_a_path_is_a_clear_error(workspace: Path) -> None:
    for tool, args in ((ReadFile(), {"path": "a\x00b"}), (ListDir(), {"path": "\x00"}),
                       (WriteFile(), {"path": "a\x00", "content": ""})):
        assert error(tool, workspace, args).endswith("contains a NUL byte; pass a plain file path")


def test_offset_past_the_end(workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\n")
    refused = error(ReadFile(), workspace, {"path": "f.txt", "offset": 5})
    assert refused.startswith("offset 5 ") and "f.txt (2 lines)" in refused and refused.endswith(" 1 to 2"), refused


def test_read_file_reads_outside_the_workspace(tmp_path: Path, workspace: Path) -> None:
    (tmp_path / "out.txt").write_text("hi\n")
    assert run(ReadFile(), workspace, {"path": str(tmp_path / "out.txt")}) == "1\thi"


# -- list_dir --------------------------------------------------------------------------

def test_list_dir_dirs_first_sizes_and_symlinks(workspace: Path) -> None:
    (workspace / "b_dir").mkdir()
    (workspace / "a_dir").mkdir()
    (workspace / "z.txt").write_text("12345")
    (workspace / ".hidden").write_text("")
    (workspace / ".gitignore").write_text("z.txt\n")
    (workspace / "link.txt").symlink_to("z.txt")
    (workspace / "dirlink").symlink_to("a_dir")
    (workspace / "dangling").symlink_to("missing")
    assert run(ListDir(), workspace, {}).split("\n") == [
        "a_dir/", "b_dir/", "dirlink/ -> a_dir",
        ".gitignore  6", ".hidden  0", "dangling -> missing (broken link)", "link.txt  5 -> z.txt", "z.txt  5"]


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder on tmpfs when there is one: creating thousands of entries on a busy disk is slow."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        d = Path(tempfile.mkdtemp(dir="/dev/shm"))
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield tmp_path


def test_five_thousand_entries_are_capped_with_the_exact_note(fast_dir: Path) -> None:
    big = fast_dir / "big"
    big.mkdir()
    for i in range(5000):
        os.close(os.open(big / f"f{i:04}", os.O_CREAT | os.O_WRONLY, 0o644))
    out = run(ListDir(), fast_dir, {"path": "big"})
    rows, note = out.split("\n\n")
    assert rows.split("\n") == [f"f{i:04}  0" for i in range(300)]
    assert note == "5000 entries, showing first 300"


def test_list_dir_cap_lowered_to_three(workspace: Path) -> None:
    for name in ("a", "b", "c", "d"):
        (workspace / name).touch()
    (workspace / "sub").mkdir()
    assert run(ListDir(), workspace, {}, list_dir_entries=3) == "sub/\na  0\nb  0\n\n5 entries, showing first 3"


def test_list_dir_errors(workspace: Path) -> None:
    (workspace / "f").write_text("x")
    refused = error(ListDir(), workspace, {"path": "f"})
    assert refused.startswith("f is not a directory") and "read_file" in refused
    refused = error(ListDir(), workspace, {"path": "no"})
    assert refused.startswith("no does not exist") and "parent directory" in refused
    (workspace / "e").mkdir()
    assert run(ListDir(), workspace, {"path": "e"}) == "e/ is empty"


# -- path policy -----------------------------------------------------------------------

def test_protected_writes_follow_the_shared_policy(tmp_path: Path, workspace: Path, home: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (workspace / "out").symlink_to(tmp_path)
    ctx = ctx_for(workspace, Config(extra_write_roots=[str(extra)]))

    def is_protected_write(ctx: ToolContext, path: str) -> bool:  # what the runtime judges a write_file call on
        tool = WriteFile()
        return tool.target(tool.parse({"path": path, "content": ""}), ctx).protected

    assert not is_protected_write(ctx, "src/a.py")
    assert not is_protected_write(ctx, str(workspace / "a.py"))
    assert not is_protected_write(ctx, str(extra / "x.txt"))
    assert is_protected_write(ctx, "../elsewhere.txt")
    assert is_protected_write(ctx, "out/escape.txt")  # a symlink out of the workspace
    assert is_protected_write(ctx, ".git/config")
    assert is_protected_write(ctx, "sub/.git/hooks/pre-commit")
    assert is_protected_write(ctx, str(extra / ".git" / "HEAD"))
    assert is_protected_write(ctx, ".nanohermes/config.json")
    assert is_protected_write(ctx, str(user_config_path()))


def test_path_rules_see_the_real_workspace_relative_path(workspace: Path) -> None:
    """A deny rule on src/** holds however the model spells the path (.., symlinks, absolute)."""
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("x\n")
    (workspace / "alias").symlink_to("src")
    ui = RecordingUI()
    rt = Runtime(tools=[WriteFile(), EditFile(), ApplyPatch()], config=Config(), workspace=workspace, ui=ui,
                 policy=Policy(mode="accept-edits", deny=(Rule.parse("edit_file(src/**)"), Rule.parse("write_file(src/**)"),
                                                          Rule.parse("apply_patch(src/**)"))))
    for path in ("src/a.py", "alias/a.py", "lib/../src/a.py", str(workspace / "alias" / "a.py")):
        assert call(rt, "edit_file", {"path": path, "old_string": "x", "new_string": "y"}).startswith("ERROR: denied by rule")
        assert call(rt, "write_file", {"path": path, "content": "y"}).startswith("ERROR: denied by rule")
    diff = "--- a/alias/a.py\n+++ b/alias/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert call(rt, "apply_patch", {"diff": diff}).startswith("ERROR: denied by rule")
    assert (workspace / "src" / "a.py").read_text() == "x\n"
    assert call(rt, "write_file", {"path": "other.py", "content": "y"}) == "created other.py (1 bytes, 1 line)"


def test_write_path_errors(workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "file").write_text("")
    assert error(WriteFile(), workspace, {"path": "d", "content": "x"}).startswith("d is a directory")
    refused = error(WriteFile(), workspace, {"path": "file/x.txt", "content": "x"})
    assert refused.startswith("cannot write file/x.txt: file ") and "not a directory" in refused
    assert sorted(p.name for p in workspace.iterdir()) == ["d", "file"] and (workspace / "file").read_text() == ""


# -- write_file ------------------------------------------------------------------------

def test_write_creates_parents_and_reports_bytes_and_lines(workspace: Path) -> None:
    out = run(WriteFile(), workspace, {"path": "a/b/c.txt", "content": "héllo\nworld\n"})
    assert out == "created a/b/c.txt (13 bytes, 2 lines)"
    assert (workspace / "a/b/c.txt").read_bytes() == "héllo\nworld\n".encode()
    assert run(WriteFile(), workspace, {"path": "a/b/c.txt", "content": "x"}) == "overwrote a/b/c.txt (1 bytes, 1 line)"
    assert run(WriteFile(), workspace, {"path": "empty", "content": ""}) == "created empty (0 bytes, 0 lines)"


def test_write_keeps_mode_and_new_files_follow_the_umask(workspace: Path) -> None:
    f = workspace / "run.sh"
    f.write_text("old")
    f.chmod(0o751)
    run(ReadFile(), workspace, {"path": "run.sh"})
    run(WriteFile(), workspace, {"path": "run.sh", "content": "new"})
    assert f.stat().st_mode & 0o777 == 0o751
    old = os.umask(0o027)
    try:
        run(WriteFile(), workspace, {"path": "fresh.txt", "content": "x"})
    finally:
        os.umask(old)
    assert (workspace / "fresh.txt").stat().st_mode & 0o777 == 0o640


def test_write_through_a_symlink_updates_the_target_and_keeps_the_link(workspace: Path) -> None:
    (workspace / "real.txt").write_text("old")
    (workspace / "link.txt").symlink_to("real.txt")
    run(ReadFile(), workspace, {"path": "real.txt"})  # the link and its target are one file
    run(WriteFile(), workspace, {"path": "link.txt", "content": "new"})
    assert (workspace / "link.txt").is_symlink() and (workspace / "real.txt").read_text() == "new"


def test_write_leaves_no_temp_files(workspace: Path) -> None:
    run(WriteFile(), workspace, {"path": "a.txt", "content": "x" * 100_000})
    assert os.listdir(workspace) == ["a.txt"]


def test_approval_detail_is_the_diff_and_writes_nothing(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    ctx = ctx_for(workspace)
    w = WriteFile()
    detail = w.approval_detail(w.parse({"path": "a.txt", "content": "one\n2\n"}), ctx, Attempt())
    assert detail.split("\n") == ["--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+2", ""]
    e = EditFile()
    detail = e.approval_detail(e.parse({"path": "a.txt", "old_string": "one", "new_string": "1"}), ctx, Attempt())
    assert detail.split("\n") == ["--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", "-one", "+1", " two", ""]
    new = w.approval_detail(w.parse({"path": "n.txt", "content": "x"}), ctx, Attempt())
    assert new.split("\n") == ["--- /dev/null", "+++ b/n.txt", "@@ -0,0 +1 @@", "+x", "\\ No newline at end of file", ""]
    assert (workspace / "a.txt").read_text() == "one\ntwo\n" and not (workspace / "n.txt").exists()


def test_diff_shown_to_people_is_bounded(workspace: Path) -> None:
    (workspace / "a.txt").write_text("")
    w = WriteFile()
    content = "".join(f"{i}\n" for i in range(100))
    out = asyncio.run(w.run(w.parse({"path": "a.txt", "content": content}), ctx_for(workspace, edit_diff_chars=40), Attempt()))
    full = unified_diff("", content, "a/a.txt", "b/a.txt")
    assert isinstance(out, ToolResult) and out.display == (
        full[:30] + f"\n… output truncated ({len(full) - 40} chars omitted) …\n" + full[-10:])


# -- edit_file -------------------------------------------------------------------------

def test_edit_replaces_one_occurrence_and_reports(workspace: Path) -> None:
    (workspace / "a.py").write_text("def f():\n    return 1\n")
    out = run(EditFile(), workspace, {"path": "a.py", "old_string": "return 1", "new_string": "return 2\n    # done"})
    assert out == "edited a.py: replaced 1 occurrence (+2 -1 lines)"
    assert (workspace / "a.py").read_text() == "def f():\n    return 2\n    # done\n"


def test_edit_errors_say_what_to_do(workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\nx = 1\ny = 2\n    z = 3\nx = 1\n")
    refused = error(EditFile(), workspace, {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert refused.startswith("old_string occurs 3 times in a.py (lines 1, 2, 5)") and "replace_all" in refused
    refused = error(EditFile(), workspace, {"path": "a.py", "old_string": "w = 0", "new_string": "w = 1"})
    first, *shown, last = refused.split("\n")
    assert first.startswith("old_string not found in a.py;") and "lines 1-5:" in shown[0]
    assert shown[1:] == ["1\tx = 1", "2\tx = 1", "3\ty = 2", "4\t    z = 3", "5\tx = 1"] and "old_string" in last
    # Differing only in indentation is no longer an error: the unique whitespace-blind match is
    # taken, with the model's indentation, and the result says so (see test_edit_tiers).
    out = run(EditFile(), workspace, {"path": "a.py", "old_string": "\tz = 3", "new_string": "\tz = 4"})
    assert out.startswith("edited a.py: replaced 1 occurrence (+1 -1 lines)") and "re-indented" in out, out
    assert (workspace / "a.py").read_text() == "x = 1\nx = 1\ny = 2\n    z = 4\nx = 1\n"
    assert error(EditFile(), workspace, {"path": "a.py", "old_string": "y", "new_string": "y"}).startswith(
        "old_string and new_string are identical")
    refused = error(EditFile(), workspace, {"path": "new.py", "old_string": "a", "new_string": "b"})
    assert refused.startswith("new.py does not exist") and "write_file" in refused
    out = run(EditFile(), workspace, {"path": "a.py", "old_string": "x = 1", "new_string": "x = 9", "replace_all": True})
    assert out == "edited a.py: replaced 3 occurrences (+3 -3 lines)"


def test_empty_old_string_fails_before_any_io(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"^old_string must not be empty; use write_file to create a file$"):
        EditFile().parse({"path": "missing/x", "old_string": "", "new_string": "y"})


def test_whitespace_old_string_is_a_real_edit(workspace: Path) -> None:
    (workspace / "t.py").write_text("if x:\n\tpass\n")
    run(EditFile(), workspace, {"path": "t.py", "old_string": "\t", "new_string": "    "})
    assert (workspace / "t.py").read_text() == "if x:\n    pass\n"


def test_edit_keeps_crlf_when_the_model_sends_lf(workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    run(EditFile(), workspace, {"path": "w.txt", "old_string": "one\ntwo\n", "new_string": "one\n1.5\ntwo\n"})
    assert (workspace / "w.txt").read_bytes() == b"one\r\n1.5\r\ntwo\r\nthree\r\n"


def test_edit_keeps_bom_and_final_newline_state(workspace: Path) -> None:
    (workspace / "b.txt").write_bytes(b"\xef\xbb\xbfa\nb\n")
    run(EditFile(), workspace, {"path": "b.txt", "old_string": "b\n", "new_string": "c"})
    assert (workspace / "b.txt").read_bytes() == b"\xef\xbb\xbfa\nc\n"
    (workspace / "n.txt").write_bytes(b"a\nb")
    run(EditFile(), workspace, {"path": "n.txt", "old_string": "b", "new_string": "c\n"})
    assert (workspace / "n.txt").read_bytes() == b"a\nc"


def test_edit_keeps_bytes_of_a_non_utf8_file(workspace: Path) -> None:
    data = "café = 1\nnaïve = 2\n".encode("latin-1")
    (workspace / "l1.txt").write_bytes(data)
    run(EditFile(), workspace, {"path": "l1.txt", "old_string": "= 2", "new_string": "= 3"})
    assert (workspace / "l1.txt").read_bytes() == data.replace(b"= 2", b"= 3")
    refused = error(EditFile(), workspace, {"path": "l1.txt", "old_string": "= 3", "new_string": "= é"})
    assert refused.startswith("l1.txt is not UTF-8") and "ASCII" in refused, refused
    assert (workspace / "l1.txt").read_bytes() == data.replace(b"= 2", b"= 3")


def test_edit_refuses_binary_and_oversized_files(workspace: Path) -> None:
    (workspace / "i.png").write_bytes(png_bytes())
    assert "i.png looks like a binary file" in error(EditFile(), workspace, {"path": "i.png", "old_string": "PNG", "new_string": "x"})
    (workspace / "big.txt").write_text("abc\n" * 5)
    assert error(EditFile(), workspace, {"path": "big.txt", "old_string": "abc", "new_string": "x"}, edit_file_max_bytes=10) == (
        "big.txt is 20 bytes (> 10); too big to edit in memory")


def test_edit_display_diff_applies_back_with_apply_patch(workspace: Path) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 40))
    (workspace / "a.txt").write_text(text)
    e = EditFile()
    out = asyncio.run(e.run(e.parse({"path": "a.txt", "old_string": "line 20\n", "new_string": "twenty\n"}), ctx_for(workspace), Attempt()))
    assert isinstance(out, ToolResult) and out.display is not None
    outcome = apply(parse(out.display), lambda p: text)[0]
    assert outcome.new_text == (workspace / "a.txt").read_text()


# -- through the runtime: approvals and modes ------------------------------------------

def runtime(ws: Path, mode: str, answers: list[str] | None = None, config: Config | None = None) -> tuple[Runtime, RecordingUI]:
    ui = RecordingUI(answers=list(answers or []))  # type: ignore[arg-type]
    tools = [ReadFile(), ListDir(), WriteFile(), EditFile()]
    return Runtime(tools=tools, config=config or Config(), workspace=ws, ui=ui, policy=Policy(mode=mode)), ui


def call(rt: Runtime, name: str, args: dict[str, Any]) -> str:
    return asyncio.run(rt.run_calls([ToolCall("c1", name, json.dumps(args))]))[0].content or ""


def test_accept_edits_writes_without_asking_but_asks_for_protected_paths(tmp_path: Path, workspace: Path) -> None:
    rt, ui = runtime(workspace, "accept-edits", ["deny"])
    assert call(rt, "write_file", {"path": "ok.txt", "content": "x"}) == "created ok.txt (1 bytes, 1 line)"
    assert ui.of(ApprovalRequest) == []
    assert call(rt, "write_file", {"path": "../outside.txt", "content": "x"}) == DENIED
    req = ui.of(ApprovalRequest)[0]
    assert (req.tool, req.summary, req.reason) == (
        "write_file", "../outside.txt", f"{PROTECTED}: {tmp_path / 'outside.txt'} is outside the workspace")
    assert req.detail == "--- /dev/null\n+++ b/" + str(tmp_path / "outside.txt") + "\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
    assert not (tmp_path / "outside.txt").exists()


def test_extra_write_roots_are_not_protected(tmp_path: Path, workspace: Path) -> None:
    rt, ui = runtime(workspace, "accept-edits", config=Config(extra_write_roots=[str(tmp_path / "shared")]))
    assert call(rt, "write_file", {"path": str(tmp_path / "shared" / "x.txt"), "content": "x"}).startswith("created")
    assert ui.of(ApprovalRequest) == []


def test_default_mode_asks_for_edits_with_the_diff(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    rt, ui = runtime(workspace, "default", ["once"])
    assert call(rt, "edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}) == (
        "edited a.txt: replaced 1 occurrence (+1 -1 lines)")
    req = ui.of(ApprovalRequest)[0]
    assert (req.reason, req.detail) == ("edits a file", "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n")
    assert ui.of(ToolFinished)[0].display == req.detail


def test_a_change_that_cannot_apply_fails_with_its_own_error_before_anyone_is_asked(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("old notes\n")
    (workspace / "a.txt").write_text("a\n")
    ui = RecordingUI(answers=["once"])
    rt = Runtime(tools=[ReadFile(), WriteFile(), EditFile(), ApplyPatch()], config=Config(), workspace=workspace,
                 ui=ui, policy=Policy())
    refused = call(rt, "write_file", {"path": "notes.txt", "content": "new"})
    assert refused.startswith("ERROR: notes.txt already exists") and "not read it" in refused, refused
    assert call(rt, "edit_file", {"path": "a.txt", "old_string": "zzz", "new_string": "b"}).startswith(
        "ERROR: old_string not found in a.txt;")
    bad = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-not there\n+b\n"
    assert call(rt, "apply_patch", {"diff": bad}).startswith("ERROR: ")
    assert ui.of(ApprovalRequest) == []  # nobody was asked about a call that could only fail
    assert [e.is_error for e in ui.of(ToolFinished)] == [True, True, True]
    assert (workspace / "notes.txt").read_text() == "old notes\n" and (workspace / "a.txt").read_text() == "a\n"
    # A change that can apply is asked as before, and the answer decides.
    assert call(rt, "edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}).startswith("edited a.txt")
    assert [r.tool for r in ui.of(ApprovalRequest)] == ["edit_file"]
    assert call(rt, "apply_patch", {"diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-b\n+c\n"}) == DENIED
    assert [r.tool for r in ui.of(ApprovalRequest)] == ["edit_file", "apply_patch"]
    assert (workspace / "a.txt").read_text() == "b\n"


@dataclass(frozen=True, kw_only=True)
class BrokenCheck(WriteFile):
    """A write whose check itself breaks: that decides nothing, so the person is still asked."""

    def precheck(self, args: Any, ctx: ToolContext, attempt: Attempt) -> None:
        raise RuntimeError("the check broke")


def test_a_precheck_that_breaks_still_asks(workspace: Path) -> None:
    ui = RecordingUI(answers=["once"])
    rt = Runtime(tools=[BrokenCheck()], config=Config(), workspace=workspace, ui=ui, policy=Policy())
    assert call(rt, "write_file", {"path": "n.txt", "content": "x"}) == "created n.txt (1 bytes, 1 line)"
    assert [r.tool for r in ui.of(ApprovalRequest)] == ["write_file"]


def test_without_a_terminal_a_change_that_cannot_apply_gets_its_own_error_not_needs_approval(
        cli: Any, server: Any, workspace: Path) -> None:
    from nanohermes.testing import Reply, call as model_call, tool_reply

    (workspace / "notes.txt").write_text("old notes\n")
    server.add(tool_reply(model_call("write_file", {"path": "notes.txt", "content": "new"}),
                          model_call("edit_file", {"path": "notes.txt", "old_string": "zzz", "new_string": "b"})),
               Reply(text="done"))
    r = cli("-p", "go", "--no-session", server=server)
    assert r.code == 0, r.err
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("ERROR: notes.txt already exists") and "not read it" in results[0]
    assert results[1].startswith("ERROR: old_string not found in notes.txt")
    assert "needs approval" not in r.err
    assert (workspace / "notes.txt").read_text() == "old notes\n"


@pytest.mark.parametrize("mode", ["plan", "debug"])
def test_plan_and_debug_refuse_writes(workspace: Path, mode: str) -> None:
    rt, _ = runtime(workspace, mode)
    assert call(rt, "write_file", {"path": "a.txt", "content": "x"}) == f"ERROR: write_file is not available in {mode} mode"
    assert call(rt, "edit_file", {"path": "a.txt", "old_string": "x", "new_string": "y"}) == (
        f"ERROR: edit_file is not available in {mode} mode")
    assert not (workspace / "a.txt").exists()


def test_goal_mode_refuses_protected_paths_without_asking(workspace: Path) -> None:
    rt, ui = runtime(workspace, "goal")
    exclude = workspace.resolve() / ".git" / "info" / "exclude"
    assert call(rt, "write_file", {"path": ".git/info/exclude", "content": "x\n"}) == (
        f"ERROR: {PROTECTED}: {exclude} is git's metadata; {UNATTENDED}")
    assert ui.of(ApprovalRequest) == [] and not (workspace / ".git").exists()


def test_flags_and_registry() -> None:
    names = [t.name for t in build_tools()]
    assert {"read_file", "write_file", "edit_file", "apply_patch", "list_dir"} <= set(names)
    by = {t.name: t for t in build_tools()}
    for name in ("write_file", "edit_file", "apply_patch"):
        t = by[name]
        every = {"path": "a", "content": "", "old_string": "a", "new_string": "b", "diff": "x"}
        args = t.parse({k: v for k, v in every.items() if k in {f.name for f in fields(t.params)}})
        assert (t.approval_for(args), t.concurrency_safe(args), t.read_only(args)) == ("edit", False, False)
    for name in ("read_file", "list_dir"):
        t = by[name]
        args = t.parse({"path": "a"})
        assert (t.approval_for(args), t.concurrency_safe(args), t.read_only(args)) == ("never", True, True)
    assert "Prefer edit_file for small changes" in by["write_file"].description
    assert "instead of edit_file" in by["apply_patch"].description
    assert "list_dir" in by["read_file"].description and "glob" in by["list_dir"].description


# -- exactness and atomicity -----------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_characters="\r\x00", blacklist_categories=("Cs",)), max_size=80)
_RAW = st.lists(st.one_of(_TEXT.map(lambda t: t.encode()), st.sampled_from([b"\xe9", b"\xff\xfe", b"\xef\xbb\xbf"])),
                max_size=4).map(b"".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=_RAW, old=_TEXT.filter(bool), suffix=_RAW,
       new=st.text(st.characters(min_codepoint=9, max_codepoint=126, blacklist_characters="\r\x0b\x0c"), max_size=40))
def test_edit_changes_no_byte_outside_the_replaced_span(workspace: Path, prefix: bytes, old: str, suffix: bytes, new: str) -> None:
    data = prefix + old.encode() + suffix
    assume(b"\x00" not in data and old != new)
    assume(TextFile.decode(data).text.count(old) == 1)
    # Not the edits nanohermes repairs or refuses on purpose: line numbers copied into the new
    # text (`1<TAB>x`), a placeholder standing for dropped lines.
    assume(not all_numbered(new) and omission(old, new) is None)
    f = workspace / "p.txt"
    f.write_bytes(data)
    run(ReadFile(), workspace, {"path": "p.txt"})  # each example rewrites the file: read it again
    run(EditFile(), workspace, {"path": "p.txt", "old_string": old, "new_string": new})
    after = f.read_bytes()
    assert after.startswith(prefix) and after.endswith(suffix)
    middle = after[len(prefix): len(after) - len(suffix)]
    if suffix:
        assert middle == new.encode()
    else:  # at the very end only the final newline may be kept as it was
        assert middle.rstrip(b"\n") == new.encode().rstrip(b"\n")
        if middle:
            assert after.endswith(b"\n") == data.endswith(b"\n")


_WRITER = """
import asyncio, sys
from pathlib import Path
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.tools import Attempt, ToolContext
from nanohermes.tools.files import ReadFile
from nanohermes.tools.writes import EditFile, WriteFile

ws, which, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ToolContext(workspace=ws, limits=Limits(edit_file_max_bytes=1 << 30), config=Config())
w, e = WriteFile(), EditFile()
r = ReadFile()
asyncio.run(r.run(r.parse({"path": "f.txt", "limit": 1}), ctx, Attempt()))  # read before replacing it
flip = {"X": "Y", "Y": "X"}
n = 0
while True:
    if which == "write":
        args = w.parse({"path": "f.txt", "content": "AB"[n % 2] * size})
        asyncio.run(w.run(args, ctx, Attempt()))
    else:
        first = (ws / "f.txt").read_bytes()[:1].decode()
        asyncio.run(e.run(e.parse({"path": "f.txt", "old_string": first, "new_string": flip[first]}), ctx, Attempt()))
    n += 1
    if n == 1:
        print("ready", flush=True)
"""


@pytest.mark.parametrize("which", ["write", "edit"])
def test_a_write_killed_midway_never_leaves_a_partial_file(tmp_path: Path, which: str) -> None:
    size = 4 * 1024 * 1024
    ws = tmp_path / "ws"
    ws.mkdir()
    target = ws / "f.txt"
    start = b"X" + b"a" * size
    target.write_bytes(start if which == "edit" else b"A" * size)
    whole = ({b"A" * size, b"B" * size} if which == "write" else {start, b"Y" + b"a" * size})
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    rng = random.Random(4)
    killed_mid_write = 0
    for _attempt in range(12):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(ws), which, str(size)],
                                stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        # Kill while a temp file exists, i.e. while the new content is being written.
        while time.monotonic() < deadline and not any(p.name.endswith(".tmp") for p in ws.iterdir()):
            pass
        time.sleep(rng.random() * 0.003)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        temps = [p for p in ws.iterdir() if p.name.endswith(".tmp")]
        killed_mid_write += bool(temps)
        assert target.read_bytes() in whole, "the target must hold the old or the new content, whole"
        for p in temps:
            p.unlink()
        if killed_mid_write >= 2:
            break
    assert killed_mid_write >= 2, "no kill landed during a write; the test did not test anything"


def test_overwriting_a_binary_or_huge_file_does_not_diff_its_old_content(workspace: Path) -> None:
    (workspace / "i.png").write_bytes(png_bytes())
    (workspace / "big.txt").write_text("z\n" * 100)
    w = WriteFile()
    ctx = ctx_for(workspace, edit_file_max_bytes=50)
    run(ReadFile(), workspace, {"path": "big.txt"})
    for name in ("i.png", "big.txt"):
        assert w.approval_detail(w.parse({"path": name, "content": "new\n"}), ctx, Attempt()) == (
            f"--- a/{name}\n+++ b/{name}\n@@ -0,0 +1 @@\n+new\n")
        assert run(w, workspace, {"path": name, "content": "new\n"}, edit_file_max_bytes=50) == f"overwrote {name} (4 bytes, 1 line)"
