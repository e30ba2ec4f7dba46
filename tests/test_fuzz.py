"""Random and malformed tool arguments never crash a tool or the loop, and every call gets
exactly one result, in order, within the clamp."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nanohermes.common.budget import Limits, truncation_note
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools

TOOLS = build_tools(Config(), Path("."))
NAMES = [t.name for t in TOOLS]
FIELDS = {t.name: [f.name for f in fields(t.params)] for t in TOOLS}
# Nothing reaches the network, and nothing that asks gets a yes (RecordingUI denies).
OFFLINE = ("web_fetch", "web_search")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False, width=32),
                    st.text(max_size=30), st.sampled_from(["", " ", ".", "..", "a.txt", "*", "**/*", "\x00", "../../etc"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=3), max_leaves=6)


@st.composite
def arguments(draw: Any, name: str) -> str:
    kind = draw(st.sampled_from(["fields", "fields", "json", "garbage"]))
    if kind == "garbage":
        return draw(st.text(max_size=40))
    if kind == "json":
        return json.dumps(draw(values))
    keys = draw(st.lists(st.sampled_from(FIELDS.get(name) or ["x"]) | st.text(max_size=6), max_size=4, unique=True))
    return json.dumps({k: draw(values) for k in keys})


@st.composite
def calls(draw: Any) -> list[ToolCall]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(NAMES) | st.text(max_size=10))
        out.append(ToolCall(id=f"c{i}", name=name, arguments=draw(arguments(name))))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=calls(), mode=st.sampled_from(["default", "plan", "accept-edits"]))
def test_random_calls_get_one_bounded_result_each(workspace: Path, batch: list[ToolCall], mode: str) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    limits = Limits(max_output=300)
    rt = Runtime(tools=build_tools(Config(), workspace), config=Config(), workspace=workspace, ui=RecordingUI(),
                 policy=Policy(mode=mode, disallowed_tools=OFFLINE), limits=limits)
    results = asyncio.run(asyncio.wait_for(rt.run_calls(batch), 60))
    assert [m.tool_call_id for m in results] == [c.id for c in batch]
    for m in results:
        assert isinstance(m.content, str)
        if len(m.content) > limits.max_output:  # only the clamp's own note may exceed the budget
            omitted = int(re.search(r"… output truncated \((\d+) chars omitted\) …", m.content).group(1))  # type: ignore[union-attr]
            assert len(m.content) - len(truncation_note(omitted)) == limits.max_output
