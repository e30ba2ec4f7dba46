"""Questions answered only by keys typed after they appeared: a person typing their next
message when a question comes up (an approval box, the folder-trust question, an MCP form)
must not answer it with that text (the `a` of "add" would be "always"; Codex had this bug).

Keys that reach a question before the keyboard has been quiet for `approval_guard_secs` since
it appeared are kept, in order, for the person's next message, and each starts the wait again.
A person reads a question for longer than that before answering, and someone typing a message
leaves shorter gaps between keys (the default, 0.4 s, is above the gap between keys of all
but the slowest typing, and below the time it takes to read a box and decide). The question's
hint line says that keys are kept, and shows the answer keys once they count. Free of rich,
so the trust question, asked before the agent is built, uses it too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from nanohermes.common.budget import Limits

GUARD_SECS = Limits().approval_guard_secs
HELD_HINT = "  a moment: keys typed now are kept for your next message"


class KeyGuard:
    """Holds back the keys that reach a question too early to be an answer to it: until the
    keyboard has been quiet for `secs` since the question appeared, each key goes to `keep`
    (its raw text, for the typed-ahead input) and starts the wait again. A person reads a
    question for longer than that before answering; someone typing a message types faster."""

    def __init__(self, secs: float, keep: Callable[[str], None] | None = None) -> None:
        self.secs = secs
        self.keep = keep
        self.until = time.monotonic() + secs
        self.held = 0  # keys kept so far
        self._timer: asyncio.TimerHandle | None = None

    def armed(self) -> bool:
        """Do keys answer now?"""
        return time.monotonic() >= self.until

    def start(self, app: Any) -> None:
        """The question is on screen: redraw it when keys start to count (its hint changes)."""
        self._schedule(app)

    def hold(self, event: Any) -> bool:
        """True when the key of `event` is too early: then it is kept, not acted on."""
        if self.armed():
            return False
        self.held += 1
        if self.keep is not None:
            self.keep("".join(press.data for press in event.key_sequence))
        self.until = time.monotonic() + self.secs
        self._schedule(event.app)
        return True

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self, app: Any) -> None:
        self.stop()
        delay = self.until - time.monotonic()
        if delay > 0:
            self._timer = asyncio.get_running_loop().call_later(delay, app.invalidate)


def guarded(guard: KeyGuard | None, handler: Callable[[Any], None]) -> Callable[[Any], None]:
    """`handler` for a key that answers, once `guard` lets keys count."""
    def run(event: Any) -> None:
        if guard is None or not guard.hold(event):
            handler(event)
    return run


def hint(guard: KeyGuard | None, armed: str) -> tuple[str, str]:
    """A question's last line (style, text): `armed`, which says the keys that answer it, or,
    while they would not yet, that they are kept (in another style, so the whole line is drawn
    anew when keys start to count)."""
    if guard is not None and not guard.armed():
        return "italic dim", HELD_HINT
    return "italic", armed
