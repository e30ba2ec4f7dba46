"""`-p --output-format json` names a session only when it is kept: a new session whose run
failed before the model answered is not (`--resume` could not find it), so its `session_id` is
null; one whose answer broke off is kept, and named. Through the real command line and the
loopback fake server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nanohermes.testing import Fault, FakeServer, Raw, Reply, sse


def listed(turn: Any) -> list[str]:
    return [json.loads(x)["id"] for x in turn("sessions", "--json").out.splitlines()]


@pytest.mark.parametrize("fmt", ["json", "stream-json"])
def test_a_failed_run_whose_session_is_not_kept_reports_no_session(turn: Any, server: FakeServer, fmt: str) -> None:
    server.add(Fault(status=401, message="bad key"))
    r = turn("-p", "this fails", "--output-format", fmt, server=server)
    assert r.code == 1
    result = json.loads(r.out) if fmt == "json" else r.lines()[-1]
    assert result["is_error"] is True and result["session_id"] is None
    assert listed(turn) == []


def test_a_run_whose_answer_broke_off_is_kept_and_named(turn: Any, server: FakeServer) -> None:
    cut = Raw(body=sse({"choices": [{"index": 0, "delta": {"content": "Half an ans"}}]}, done=False))
    server.add(*([cut] * 4))
    r = turn("-p", "go", "--output-format", "json", server=server, config={"max_retries": 0})
    assert r.code == 1, r.err
    result = json.loads(r.out)
    assert result["is_error"] is True and result["session_id"] is not None
    assert listed(turn) == [result["session_id"]]


def test_a_later_failure_of_a_resumed_session_still_names_it(turn: Any, server: FakeServer) -> None:
    server.add(Reply(text="remembered: 7"))
    good = turn("-p", "remember 7", "--output-format", "json", server=server).json()["session_id"]
    server.add(Fault(status=401, message="bad key"))
    r = turn("-p", "which?", "--continue", "--output-format", "json", server=server)
    assert r.code == 1
    assert json.loads(r.out)["session_id"] == good
