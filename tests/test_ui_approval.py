"""The approval prompt, driven through prompt-toolkit's pipe input: keys in, ApprovalReply out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from nanohermes.common.events import ApprovalReply, ApprovalRequest
from nanohermes.ui.approval import Approver, choices

REQ = ApprovalRequest(call_id="c1", tool="run_command", summary="git push", detail="git push origin main",
                      rule="run_command(git push *)", reason="runs a shell command")


def ask(keys: list[str], *requests: ApprovalRequest, **kw: Any) -> tuple[list[ApprovalReply], str]:
    console = Console(width=80, record=True, force_terminal=False)

    async def go() -> list[ApprovalReply]:
        with create_pipe_input() as inp:
            # No guard unless a test sets one: these keys are sent as a person answering would.
            approver = Approver(console, pt_input=inp, pt_output=DummyOutput(), **{"guard_secs": 0.0, **kw})

            async def feed() -> None:
                for k in keys:  # one answer at a time, as a person would type them
                    await asyncio.sleep(0.05)
                    inp.send_text(k)

            feeder = asyncio.create_task(feed())
            replies = await asyncio.wait_for(asyncio.gather(*(approver.confirm(r) for r in requests)), 30)
            await feeder
            return list(replies)

    replies = asyncio.run(go())
    return replies, console.export_text()


@pytest.mark.parametrize("key, choice", [("y", "once"), ("a", "always"), ("p", "project"), ("\r", "once"),
                                         ("\x1b[B\r", "always"), ("\x1b[B\x1b[B\r", "project"),
                                         ("\x1b[B\x1b[B\x1b[B\x1b[B\r", "once"), ("\x1b[A\r\r", "deny")])
def test_keys_pick_the_answer(key: str, choice: str) -> None:
    replies, _ = ask([key], REQ)
    assert replies == [ApprovalReply(choice)]  # type: ignore[arg-type]


def test_a_request_without_a_rule_offers_only_yes_and_no() -> None:
    protected = ApprovalRequest(call_id="c1", tool="write_file", summary="edit .git/config", rule="",
                                reason="writes a protected path")
    replies, _ = ask(["a", "p", "\x1b[B\r", "\r"], protected)  # a and p do nothing; down reaches No
    assert replies == [ApprovalReply("deny", "")]
    assert [answer for answer, _, _ in choices(protected)] == ["once", "deny"]


def test_a_sub_agent_request_names_the_agent() -> None:
    req = ApprovalRequest(call_id="c1", tool="run_command", summary="make", rule="run_command(make)",
                          agent="explore agent-1")
    _, shown = ask(["y"], req)
    assert "sub-agent explore agent-1: run_command make" in shown


def test_no_takes_a_note_for_the_model() -> None:
    replies, shown = ask(["n", "use git status instead\r"], REQ)
    assert replies == [ApprovalReply("deny", "use git status instead")]
    assert "⊘ no: use git status instead" in shown


def test_escape_is_no_and_stops_the_turn_without_a_note() -> None:
    stopped: list[bool] = []
    replies, shown = ask(["\x1b"], REQ, on_interrupt=lambda: stopped.append(True))
    assert replies == [ApprovalReply("deny", stop=True)]
    assert stopped == [True]
    assert "⊘ no, and stopped: say what to do instead" in shown


def test_prompt_shows_the_command_the_reason_and_the_rule() -> None:
    _, shown = ask(["y"], REQ)
    assert "run_command git push" in shown
    assert "git push origin main" in shown
    assert "asked because: runs a shell command" in shown
    assert "✓ yes, once" in shown


def test_ctrl_c_refuses_and_interrupts_the_turn() -> None:
    interrupted: list[bool] = []
    replies, _ = ask(["\x03"], REQ, on_interrupt=lambda: interrupted.append(True))
    assert replies == [ApprovalReply("deny", stop=True)]
    assert interrupted == [True]


def test_parallel_requests_are_asked_one_at_a_time() -> None:
    events: list[str] = []
    second = ApprovalRequest(call_id="c2", tool="run_command", summary="git tag v1", rule="run_command(git tag *)")
    replies, shown = ask(["y", "n", "\r"], REQ, second, before=lambda: events.append("open"),
                         after=lambda: events.append("close"))
    assert replies == [ApprovalReply("once"), ApprovalReply("deny", "")]
    assert events == ["open", "close", "open", "close"]
    assert shown.index("git push") < shown.index("✓ yes, once") < shown.index("git tag v1")


def test_keys_that_reach_the_box_before_it_takes_answers_are_kept_in_order() -> None:
    kept: list[str] = []
    stopped: list[bool] = []
    replies, shown = ask(["a", "y", "\r", "\x1b[A", "\x1b"], REQ, guard_secs=60, keep=kept.append,
                         on_interrupt=lambda: stopped.append(True))
    assert replies == [ApprovalReply("deny", stop=True)] and stopped == [True]  # only Esc acted: no, and stop
    assert kept == ["a", "y", "\r", "\x1b[A"]
    assert "✓" not in shown


def test_a_guard_of_zero_lets_the_first_key_answer() -> None:
    kept: list[str] = []
    replies, _ = ask(["a"], REQ, guard_secs=0.0, keep=kept.append)
    assert replies == [ApprovalReply("always")] and kept == []
