"""read_file's window reads only up to its end (plus a bounded count past it), so a window
of a huge file is cheap, and says "at least" when it did not count to the end."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.tools import Attempt, ToolContext, ToolError
from nanohermes.tools.files import ReadFile


def read(ws: Path, limits: Limits | None = None, **args: object) -> str:
    tool = ReadFile()
    ctx = ToolContext(workspace=ws, limits=limits or Limits(), config=Config())
    return asyncio.run(tool.run(tool.parse(args), ctx, Attempt()))  # type: ignore[return-value]


@pytest.mark.timeout(120)
def test_a_window_of_a_20_gib_sparse_file_reads_only_the_window(tmp_path: Path) -> None:
    f = tmp_path / "huge.log"
    head = "".join(f"request {i} served\n" for i in range(1, 1001)).encode()
    with open(f, "wb") as out:
        out.write(head)
        out.truncate(20 * 1024 ** 3)  # 20 GiB, nearly all of it a hole
    st = os.stat(f)
    if st.st_blocks * 512 > 100 * 1024 ** 2:
        pytest.skip("this filesystem does not keep sparse files sparse")
    out = read(tmp_path, path="huge.log", offset=1, limit=5)
    rows = "\n".join(f"{i}\trequest {i} served" for i in range(1, 6))
    # The count past the window stops after read_file_count_bytes (4 MiB): the 995 lines left
    # of the text, and the hole's first bytes as the start of one more line.
    assert out == f"{rows}\n\nshowing lines 1-5 of at least 1001 (not counted to the end); continue with offset=6"


def test_count_bytes_lowered_says_at_least_with_the_exact_count(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"{i:03}\n" for i in range(1, 101)))  # 4 bytes a line
    out = read(tmp_path, Limits(read_file_count_bytes=40), path="f.txt", limit=2)
    # 40 bytes past the window hold lines 3..12 whole, and more follows: at least 12 + 1.
    assert out == "1\t001\n2\t002\n\nshowing lines 1-2 of at least 13 (not counted to the end); continue with offset=3"
    # Within the bound the total is exact, as before.
    out = read(tmp_path, Limits(read_file_count_bytes=1000), path="f.txt", limit=2)
    assert out == "  1\t001\n  2\t002\n\nshowing lines 1-2 of 100; continue with offset=3"


def test_the_last_window_needs_no_count_and_an_offset_past_the_end_is_exact(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc")
    lim = Limits(read_file_count_bytes=1)
    assert read(tmp_path, lim, path="f.txt", offset=2, limit=5) == "2\tb\n3\tc"
    with pytest.raises(ToolError, match=r"^offset 9 is past the end of f.txt \(3 lines\); use an offset from 1 to 3$"):
        read(tmp_path, lim, path="f.txt", offset=9)
    with pytest.raises(ToolError, match=r"^offset 4 is past the end of f.txt \(3 lines\)"):
        read(tmp_path, lim, path="f.txt", offset=4)
