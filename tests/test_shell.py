"""run_command with real processes: caps, timeouts, inherited pipes, stdin, progress, no leaks."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exec_support import acall, call, make_runtime, marked_pids, no_leftover_processes, wait_until  # noqa: F401
from nanohermes.common.budget import KiB, MiB, Limits
from nanohermes.common.events import ApprovalRequest, RecordingUI, ToolProgress, ToolStarted
from nanohermes.tools import ToolError
from nanohermes.tools.process import Capture, gap_marker, utf8_boundary
from nanohermes.tools.shell import RunCommand, RunCommandParams


def test_exit_code_and_both_sections(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command", command="echo hi; echo oops >&2; exit 3")
    assert out == "exit code: 3\n\nstdout:\nhi\n\nstderr:\noops"


def test_empty_stream_says_empty(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command", command="true")
    assert out == "exit code: 0\n\nstdout:\n(empty)\n\nstderr:\n(empty)"


def test_huge_output_keeps_its_start_and_its_end_with_the_exact_dropped_count(workspace: Path) -> None:
    size = 64 * MiB  # big enough to prove the cap, small enough to be quick on a shared machine
    out = call(make_runtime(workspace), "run_command", command=f"yes | head -c {size}; echo 3 failed, 97 passed")
    cap = 256 * KiB
    total = size + len("3 failed, 97 passed\n")
    assert out.startswith("exit code: 0\n\nstdout:\ny\ny\n")
    assert "y\ny\n3 failed, 97 passed\n\nstderr:\n(empty)" in out  # a build's final summary survives
    note = out.split("\n")[-1]
    assert note.startswith(f"note: stdout was {total} bytes;") and f" {cap // 2} and the last {cap // 2} " in note
    assert f"({total - cap} bytes dropped " in note, note
    assert len(out) <= Limits().max_output


def test_capture_lowered_to_3_bytes(workspace: Path) -> None:
    rt = make_runtime(workspace, limits=Limits(run_command_capture_bytes=3))
    out = call(rt, "run_command", command="printf abcdef; printf 12345 >&2")
    assert out == (
        "exit code: 0\n\nstdout:\na\n[… 3 bytes dropped here …]\nef\n\nstderr:\n1\n[… 2 bytes dropped here …]\n45\n\n"
        "note: stdout was 6 bytes; the first 1 and the last 2 were kept (3 bytes dropped where marked); "
        "filter it (grep, head, tail) or redirect it to a file and read that\n\n"
        "note: stderr was 5 bytes; the first 1 and the last 2 were kept (2 bytes dropped where marked); "
        "filter it (grep, head, tail) or redirect it to a file and read that"
    )


def test_long_stdout_never_pushes_stderr_out(workspace: Path) -> None:
    rt = make_runtime(workspace, limits=Limits(max_output=1000))
    out = call(rt, "run_command", command="head -c 5000 /dev/zero | tr '\\0' a; echo THE-ERROR >&2")
    assert len(out) <= 1000
    assert out.endswith("\n\nstderr:\nTHE-ERROR")
    stdout = out.split("\n\nstdout:\n", 1)[1].split("\n\nstderr:\n", 1)[0]
    m = re.fullmatch(r"(a*)\n… (\d+) chars omitted …\n(a*)", stdout)
    assert m, stdout
    assert len(m.group(1)) + int(m.group(2)) + len(m.group(3)) == 5000  # every char accounted for


def test_printing_forever_is_killed_at_the_timeout_and_memory_stays_flat(workspace: Path) -> None:
    def status(key: str) -> int:
        text = Path("/proc/self/status").read_text()
        return int(re.search(rf"^{key}:\s+(\d+) kB", text, re.M).group(1)) * 1024  # type: ignore[union-attr]

    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = status("VmRSS")
    out = call(make_runtime(workspace), "run_command", command="yes 'a line printed forever'", timeout_secs=1)
    growth = status("VmHWM") - before
    assert out.startswith("exit code: killed (timed out after 1s)") and "\nstdout:\na line printed forever\n" in out
    total = int(re.search(r"note: stdout was (\d+) bytes", out).group(1))  # type: ignore[union-attr]
    assert total > 4 * MiB  # it really printed a lot while we drained it
    assert growth < 64 * MiB, f"peak RSS grew by {growth} bytes"


def test_timeout_kills_the_whole_group_even_when_the_shell_ignores_term(workspace: Path, no_leftover_processes: str) -> None:
    rt = make_runtime(workspace, limits=Limits(command_kill_grace_secs=0.3))
    out = call(rt, "run_command", command="trap '' TERM; sleep 300 & sleep 301 & wait", timeout_secs=1)
    assert out.startswith("exit code: killed (timed out after 1s)")
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


def test_background_child_holding_the_pipes_does_not_hang_the_call(workspace: Path) -> None:
    rt = make_runtime(workspace, limits=Limits(command_pipe_grace_secs=0.2))
    out = call(rt, "run_command", command="sleep 300 & echo started")
    assert out == (
        "exit code: 0\n\nstdout:\nstarted\n\nstderr:\n(empty)\n\n"
        "note: processes the command left running still held its output 0.2s after it exited and were killed; "
        "use background=true for servers and other long-running processes"
    )


def test_leftover_process_not_holding_the_pipes_is_killed_too(workspace: Path, no_leftover_processes: str) -> None:
    out = call(make_runtime(workspace), "run_command", command="sleep 300 >/dev/null 2>&1 & echo $!")
    assert out.startswith("exit code: 0\n\nstdout:\n")
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


def test_read_from_stdin_returns_promptly(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command", command="read x; echo status=$? x=[$x]", timeout_secs=60)
    assert out.startswith("exit code: 0\n") and "\nstdout:\nstatus=1 x=[]\n" in out, out


def test_no_controlling_terminal_to_prompt_on(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command", command="read x < /dev/tty", timeout_secs=60)
    assert out.startswith("exit code: 1\n")
    assert "/dev/tty" in out


def test_environment_has_pagers_off_and_no_colour_requests(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("MY_SETTING", "kept")
    out = call(make_runtime(workspace), "run_command",
               command='echo "$PAGER|$GIT_PAGER|$NO_COLOR|${FORCE_COLOR-unset}|$MY_SETTING"')
    assert "stdout:\ncat|cat|1|unset|kept\n" in out


def test_falls_back_to_sh_without_bash(workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = call(make_runtime(workspace), "run_command", command="echo $0")
    assert "stdout:\n/bin/sh\n" in out


def test_cwd_inside_the_workspace(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    out = call(make_runtime(workspace), "run_command", command="pwd", cwd="sub")
    assert f"stdout:\n{(workspace / 'sub').resolve()}\n" in out


@pytest.mark.parametrize("cwd,message", [
    ("..", "is outside the workspace"),
    ("missing", "is not an existing directory; create it first or omit cwd"),
])
def test_bad_cwd_is_refused_before_running(workspace: Path, cwd: str, message: str) -> None:
    out = call(make_runtime(workspace), "run_command", command="touch ran", cwd=cwd)
    assert out.startswith(f"ERROR: cwd {cwd} ") and message in out
    assert not (workspace / "ran").exists() and not (workspace.parent / "ran").exists()


def test_empty_command_fails_before_anything_runs(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command", command="   ")
    assert out.startswith("ERROR: run_command: command ") and "empty" in out, out


# The upper clamp moved into Limits (run_command_max_timeout_secs) and is applied when the
# command runs, with a note; parsing keeps only the lower bound.
@pytest.mark.parametrize("given,expected", [(0, 1), (-5, 1), (120, 120), (99999, 99999)])
def test_timeout_is_clamped(given: int, expected: int) -> None:
    assert RunCommand().parse({"command": "x", "timeout_secs": given}).timeout_secs == expected  # type: ignore[attr-defined]


def test_timeout_clamp_lowered_to_one_second(workspace: Path) -> None:
    rt = make_runtime(workspace, limits=Limits(run_command_max_timeout_secs=1))
    out = call(rt, "run_command", command="sleep 30", timeout_secs=3600)
    assert out.startswith("exit code: killed (timed out after 1s)")
    assert out.endswith("\n(timeout_secs 3600 was clamped to 1, limit run_command_max_timeout_secs)")
    assert "1..1;" in rt.specs()[[s["function"]["name"] for s in rt.specs()].index("run_command")]["function"]["description"]


def test_output_lines_stream_as_progress(workspace: Path) -> None:
    ui = RecordingUI()
    call(make_runtime(workspace, ui=ui), "run_command", command="echo one; sleep 0.4; echo two >&2; printf three")
    started = ui.of(ToolStarted)[0]
    progress = ui.of(ToolProgress)
    assert [p.text for p in progress] == ["one", "two", "three"]
    assert {(p.call_id, p.name) for p in progress} == {(started.call_id, "run_command")}


def test_a_flood_gives_few_progress_events(workspace: Path) -> None:
    ui = RecordingUI()
    call(make_runtime(workspace, ui=ui), "run_command", command="seq 1 200000")
    texts = [p.text for p in ui.of(ToolProgress)]
    assert texts[-1] == "200000"
    assert len(texts) < 2000  # a few per tick, not one per line


def test_cancelling_the_call_kills_the_process_group(workspace: Path, no_leftover_processes: str) -> None:
    ui = RecordingUI()
    rt = make_runtime(workspace, ui=ui)

    async def go() -> None:
        task = asyncio.create_task(acall(rt, "run_command", command="sleep 300 & sleep 301; echo never"))
        await asyncio.to_thread(wait_until, lambda: len(marked_pids(no_leftover_processes)) >= 3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)


def test_approval_shows_the_command_and_remembers_a_narrow_rule(workspace: Path) -> None:
    ui = RecordingUI(answers=["always"])
    rt = make_runtime(workspace, ui=ui, mode="default")
    first = call(rt, "run_command", command="npm run build --silent\n")
    [req] = ui.of(ApprovalRequest)
    assert (req.summary, req.detail, req.rule) == (
        "npm run build --silent", "npm run build --silent\n", "run_command(npm run build --silent <args>)")
    assert first.startswith("exit code: ")
    call(rt, "run_command", command="npm run build --silent")  # covered by the remembered rule: not asked again
    assert len(ui.of(ApprovalRequest)) == 1
    call(rt, "run_command", command="npm run build --prod")  # another option: asked, refused by the empty queue
    assert len(ui.of(ApprovalRequest)) == 2
    call(rt, "run_command", command="npm test")  # not covered either
    assert len(ui.of(ApprovalRequest)) == 3


@pytest.mark.parametrize("command,rule", [
    ("npm run build --silent", "npm run build --silent <args>"),  # one simple command: the command analysis decides
    ("git log | head", "git log | head"),  # anything else: exactly this line
    ("rm -rf * ; echo", "rm -rf [*] ; echo"),
])
def test_suggested_rule_is_narrow(command: str, rule: str) -> None:
    suggested = RunCommand().suggest_rule(RunCommandParams(command=command))
    assert (suggested.tool, suggested.pattern) == ("run_command", rule)


def test_capture_keeps_the_start_and_the_newest_bytes_and_marks_the_gap() -> None:
    cap = Capture(6)
    for chunk in (b"ab", b"cdef", b"ghij"):
        cap.feed(chunk)
    assert (cap.text(), cap.total, cap.dropped, cap.unread) == ("abc\n[… 4 bytes dropped here …]\nhij", 10, 4, 6)
    assert cap.take(2) == ("ab", 0)
    assert cap.take(5) == ("c\n[… 4 bytes dropped here …]\nhij", 4)  # reading on passes the gap
    cap.feed(b"XYZ")  # read empty: new bytes start a fresh buffer
    assert (cap.text(), cap.dropped, cap.unread) == ("XYZ", 4, 3)
    for _ in range(1000):  # a flood keeps memory at the cap
        cap.feed(b"0123456789")
        assert cap.unread <= 6
    assert (cap.text(), cap.dropped) == ("XYZ\n[… 9997 bytes dropped here …]\n789", 4 + 9997)


def test_take_never_splits_a_utf8_character() -> None:
    data = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    assert [utf8_boundary(data, n) for n in range(11)] == [0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10]


def test_missing_cwd_error_is_a_tool_error(workspace: Path) -> None:
    from nanohermes.config import Config
    from nanohermes.tools import ToolContext
    from nanohermes.tools.shell import resolve_cwd

    ctx = ToolContext(workspace=workspace, limits=Limits(), config=Config())
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_cwd(ctx, "/")
    assert resolve_cwd(ctx, None) == workspace


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(0, 40),
       steps=st.lists(st.one_of(st.text("abcxyz-", min_size=1, max_size=30).map(lambda t: ("feed", t.encode())),
                                st.integers(1, 50).map(lambda n: ("take", n))), max_size=40))
def test_capture_loses_nothing_it_does_not_count(cap: int, steps: list[tuple[str, Any]]) -> None:
    """Any mix of writes and reads: memory stays within the cap, and every byte written is
    read, still unread, or dropped and counted at a marker that sits where it was."""
    c = Capture(cap)
    written = bytearray()
    read: list[str] = []
    for op, arg in steps:
        if op == "feed":
            c.feed(arg)
            written += arg
        else:
            text, gap = c.take(arg)
            assert (gap_marker(gap) in text) if gap else "dropped here" not in text
            read.append(text)
        assert c.unread <= cap
    read.append(c.text())
    pieces = re.split(r"\n\[… (\d+) bytes dropped here …\]\n", "".join(read))
    kept, dropped = pieces[::2], [int(n) for n in pieces[1::2]]
    assert sum(dropped) == c.dropped and c.total == len(written)
    expected, pos = written.decode(), 0
    for segment, gap in zip(kept, [*dropped, 0], strict=True):
        assert expected[pos:pos + len(segment)] == segment  # in order, nothing altered
        pos += len(segment) + gap
    assert pos == len(written)



def test_a_call_cancelled_while_its_pipes_connect_ends_and_leaves_nothing(workspace: Path,
                                                                         no_leftover_processes: str) -> None:
    """Cancelled in the moment between the command's start and asyncio's connecting its
    pipes, with a background member already holding them: the call still ends at once and
    kills the whole group. (The loop is held still right after the start, so the moment is
    caught every time; asyncio's own clean-up would wait for the pipes for ever.)"""
    rt = make_runtime(workspace)

    async def go() -> None:
        task = asyncio.create_task(acall(rt, "run_command", command="sleep 300 & sleep 301"))
        while not marked_pids(no_leftover_processes):
            await asyncio.sleep(0)  # each loop step: the start shows as the first marked process
        assert wait_until(lambda: len(marked_pids(no_leftover_processes)) >= 3)  # the loop held still
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=20)
        assert done, "the cancelled call did not end"

    asyncio.run(go())
    assert wait_until(lambda: not marked_pids(no_leftover_processes), timeout=10)
