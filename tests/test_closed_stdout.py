"""`nanohermes -p … | head`: a reader that closes stdout early ends the run quietly with 141
(as SIGPIPE ends `git log | head`), with no retry of the model call, no traceback and no
"internal error", and the session kept. Real processes on both ends of a real pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nanohermes.turn.session import list_sessions
from nanohermes.testing import FakeServer, Reply

REPO = Path(__file__).resolve().parent.parent
FORMATS = ("text", "json", "stream-json")


def run_into(reader: list[str], server: FakeServer, workspace: Path, fmt: str, *,
             closed_first: bool = False) -> tuple[int, str]:
    """Run `nanohermes -p` with stdout a pipe whose only reader is `reader`; with
    `closed_first`, the reader has closed its end before nanohermes starts."""
    r, w = os.pipe()
    reader_proc = subprocess.Popen(reader, stdin=r, stdout=subprocess.PIPE)
    os.close(r)
    if closed_first:
        assert reader_proc.stdout is not None
        assert reader_proc.stdout.readline() == b"closed\n"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    argv = [sys.executable, "-m", "nanohermes", "--base-url", server.base_url, "--model", "fake-model",
            "-p", "say a lot", "--output-format", fmt]
    try:
        p = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=workspace, env=env,
                           timeout=60)
    finally:
        os.close(w)
        reader_proc.kill()
        reader_proc.wait()
        if reader_proc.stdout is not None:
            reader_proc.stdout.close()
    return p.returncode, p.stderr.decode()


CLOSES_AT_ONCE = [sys.executable, "-c", "import os, time; os.close(0); print('closed', flush=True); time.sleep(60)"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_stdout_closed_before_the_answer_ends_the_run_quietly_with_141(home: Path, server: FakeServer,
                                                                        workspace: Path, fmt: str) -> None:
    server.add(Reply(text="an answer nobody reads"))
    code, err = run_into(CLOSES_AT_ONCE, server, workspace, fmt, closed_first=True)
    assert (code, err) == (141, "")
    # The text and json outputs are written once the answer is in: the turn ran, once.
    # stream-json's first line (`init`) already fails: the turn stops once it has taken the
    # prompt, before the model is asked anything. Either way the session keeps the prompt.
    assert len(server.requests) == (0 if fmt == "stream-json" else 1)
    [session] = list_sessions(workspace)
    assert (session.title, session.turns) == ("say a lot", 1)


def test_a_reader_that_leaves_mid_stream_stops_the_turn_without_a_retry(home: Path, server: FakeServer,
                                                                        workspace: Path) -> None:
    """stream-json writes a line per streamed piece: `head -c 3000` takes the first few and
    leaves while the answer streams. The model call is not retried as a dropped stream; the
    turn is stopped and what was streamed stays in the session."""
    server.add(Reply(text="word " * 40_000, chunk_size=40))
    code, err = run_into(["head", "-c", "3000"], server, workspace, "stream-json")
    assert (code, err) == (141, "")
    assert len(server.requests) == 1
    [session] = list_sessions(workspace)
    lines = [json.loads(line) for line in session.path.read_text().splitlines()]
    said = [m["message"]["content"] for m in lines if m.get("type") == "message" and m["message"]["role"] == "assistant"]
    assert len(said) == 1 and said[0].startswith("word word") and len(said[0]) < len("word " * 40_000)


@pytest.mark.parametrize("fmt", FORMATS)
def test_head_c1_leaves_no_traceback_in_any_format(home: Path, server: FakeServer, workspace: Path, fmt: str) -> None:
    """The plain `| head -c1`: wherever the first failed write falls, nothing is reported."""
    server.add(Reply(text="x" * 300_000, chunk_size=1000))
    code, err = run_into(["head", "-c1"], server, workspace, fmt)
    assert code in (0, 141) and err == "", (code, err)
    assert len(server.requests) <= 1
