"""nanohermes's own exit callbacks: what must happen however the process ends.

Code that leaves something outside the process behind it (a tool's process groups) registers
its cleanup with `at_exit`. `run_exit_callbacks` runs them once, the latest first: `cli.py`
calls it just before it leaves a finished run with `os._exit` (skipping the interpreter's
teardown, which costs a one-shot run more CPU than its model call), and it is registered with
`atexit` for every other way out (typer's commands, an exception escaping, `sys.exit`). Nothing
here imports the rest of nanohermes.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Callable

_callbacks: list[Callable[[], None]] = []
_hooked = False


def at_exit(callback: Callable[[], None]) -> None:
    """Run `callback` when the process ends (once, however often it is registered)."""
    global _hooked
    if not _hooked:
        atexit.register(run_exit_callbacks)
        _hooked = True
    if callback not in _callbacks:
        _callbacks.append(callback)


def run_exit_callbacks() -> None:
    """Run the registered callbacks, the latest first, each once. One that fails is reported
    on stderr (as atexit reports its own) and does not stop the others."""
    while _callbacks:
        callback = _callbacks.pop()
        try:
            callback()
        except Exception as e:  # an exit path must finish whatever one cleanup does
            try:
                sys.stderr.write(f"nanohermes: exit callback {getattr(callback, '__qualname__', callback)} "
                                 f"failed: {type(e).__name__}: {e}\n")
            except (OSError, ValueError):  # stderr is gone too
                pass
