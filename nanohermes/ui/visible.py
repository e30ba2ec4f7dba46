"""What a person reads must be what runs: control characters shown escaped, and the status
of a finished call (ok, failed, denied, interrupted) read from its result.

Everything nanohermes writes to a terminal is inert: `escape_controls` (`nanohermes.common.controls`)
is the one way text is made so; `-p` writes through its `InertWriter` (`inert_output`), the
REPL's console escapes every piece of text it draws. Free of rich and prompt_toolkit, so the
`-p` sinks use it as the REPL does.
"""

from __future__ import annotations

import re

from nanohermes.common.controls import InertWriter, escape_controls, has_controls, inert_output
from nanohermes.common.events import ToolFinished
from nanohermes.turn.runtime import DENIED_PREFIX, INTERRUPTED

__all__ = ["InertWriter", "escape_controls", "has_controls", "inert_output", "status_of"]

_EXIT = re.compile(r"\Aexit code: (\S+)")


def status_of(ev: ToolFinished) -> str:
    """ok | failed | error | denied | interrupted. A command that exited non-zero (or was
    killed) failed, even though the tool itself worked."""
    if ev.is_error or ev.result.startswith("ERROR:"):
        return "error"
    if ev.result.startswith(DENIED_PREFIX):
        return "denied"
    if ev.result == INTERRUPTED:
        return "interrupted"
    m = _EXIT.match(ev.result)
    if m and m.group(1) != "0":
        return "failed"
    return "ok"
