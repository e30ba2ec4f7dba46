"""Differential check against real bash: a line the analysis lets run unasked, run by bash in
an empty folder, creates no file. The alphabet mixes a writing command with the lexing
traps (quotes, here-documents, arithmetic, expansions, braces, comments, continuations)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nanohermes.guard.permissions import Policy
from tool_support import decide_call

PIECES = ["echo", " ", " ", ";", "\n", "touch X", "'", '"', "$'", "$\"", "\\", "`", "$(", ")", "(", "$((", "$[", "]",
          "${", "}", "{", ",", "<<", "<<-", "EOF", "<<<", "#", "1", "x", "=", "$x", "*", "?", "[", "|", "&", "&&",
          "!", "~", "-v", "[", "test", "printf", "-eq", "\t", "a", "<", ">", "2>&1", "cat", "true", "X=1", "$1"]
LINES = st.lists(st.sampled_from(PIECES), min_size=1, max_size=14).map("".join)


@settings(max_examples=int(os.environ.get("NANOHERMES_DESYNC_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=LINES)
def test_a_line_allowed_unasked_writes_nothing_when_bash_runs_it(tmp_path: Path, line: str) -> None:
    v = decide_call(Policy(), tool_name="run_command", approval="always", read_only=False, subject=line)
    if v.decision != "allow":
        return
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        subprocess.run(["bash", "-c", line], cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, timeout=5,
                       check=False)
    except subprocess.TimeoutExpired:
        pass
    assert list(folder.iterdir()) == [], (line, v)
