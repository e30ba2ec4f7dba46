"""A secret file that appears while a command nobody approved runs in the foreground is covered
in its sandbox as it runs (as a background task's is), not only when the next command starts:
the command reads it only in the moment before the next look. Real kernel sandbox, real files."""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

import pytest

from exec_support import acall, make_runtime
from nanohermes.guard import sandbox

AVAIL = sandbox.probe()


@pytest.mark.skipif(not (AVAIL.landlock and AVAIL.namespaces), reason="needs Landlock and user namespaces")
def test_a_secret_file_that_appears_during_a_foreground_command_is_covered_while_it_runs(
        workspace: Path, tmp_path: Path) -> None:
    value = "tok-" + secrets.token_hex(16)
    held = tmp_path / "held"
    os.mkfifo(held)
    # Waits until the test has made .env, then reads it until the sandbox covers it there.
    line = f"read go < {held}; while cat .env > /dev/null 2>&1; do sleep 0.05; done; echo covered"

    def put() -> None:
        with open(held, "w") as f:  # opened once the command reads it: it has started
            (workspace / ".env").write_text(f"API_TOKEN={value}\n")
            f.write("go\n")

    async def go() -> str:
        rt = make_runtime(workspace)  # goal mode: the command runs unasked, confined
        putter = asyncio.create_task(asyncio.to_thread(put))
        out = await acall(rt, "run_command", command=line, timeout_secs=60)
        await putter
        await rt.close()
        return out

    out = asyncio.run(go())
    assert "covered" in out and "exit code: 0" in out, out
    assert value not in out
