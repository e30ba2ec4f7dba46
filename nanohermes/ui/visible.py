"""What a person reads must be what runs: control characters shown escaped, and the status
of a finished call (ok, failed, denied, interrupted) read from its result.

Free of rich and prompt_toolkit, so the `-p` sinks use it as the REPL does.
"""

from __future__ import annotations

import re

from nanohermes.events import ToolFinished
from nanohermes.llm.http import CONTROL as _CONTROL
from nanohermes.runtime import DENIED_PREFIX, INTERRUPTED

_EXIT = re.compile(r"\Aexit code: (\S+)")


def _escape_one(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    return {"\r": "\\r", "\x1b": "\\x1b"}.get(ch, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_controls(text: str, *, newlines: bool = False) -> str:
    """`text` with every control character written out (`\\x1b[2K`, `\\r`, `\\u202e`), so a
    terminal shows it instead of acting on it; `newlines` escapes line breaks too (one-line views)."""
    out = _CONTROL.sub(_escape_one, text)
    return out.replace("\n", "\\n") if newlines else out


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
