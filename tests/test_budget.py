"""The exit clamp: exact notes, exact counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nanohermes.common.budget import Limits, clamp, truncation_note


def test_clamp_keeps_three_quarters_head_and_one_quarter_tail() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    out = clamp(text, 20)
    assert out == text[:15] + "\n… output truncated (80 chars omitted) …\n" + text[-5:]


def test_clamp_lowered_to_3() -> None:
    assert clamp("0123456789", 3) == "01\n… output truncated (7 chars omitted) …\n9"


def test_clamp_leaves_short_text_alone() -> None:
    assert clamp("abc", 3) == "abc"


def test_aggregate_defaults_to_half_the_session_budget() -> None:
    assert Limits().aggregate_chars == 60_000
    assert Limits(session_budget_chars=1_000_000).aggregate_chars == 200_000
    assert Limits(aggregate_budget_chars=5).aggregate_chars == 5


@given(st.text(max_size=400), st.integers(min_value=1, max_value=300))
def test_clamp_never_exceeds_limit_and_counts_exactly(text: str, limit: int) -> None:
    out = clamp(text, limit)
    if len(text) <= limit:
        assert out == text
        return
    omitted = len(text) - limit
    note = truncation_note(omitted)
    assert len(out) - len(note) == limit
    head = limit * 3 // 4
    assert out[:head] == text[:head] and out[head:head + len(note)] == note
