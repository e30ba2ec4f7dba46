"""What a turn leaves on the terminal: the REPL's live area (the spinner and what is running)
is redrawn in place and erased at the end, so the scrollback holds each finished call's line
once and no running call's line, however calls start and finish around each other and
however loaded the machine is. The view draws to a real rich Console whose bytes a small
terminal model replays (the cursor movements and erasures rich's live display uses)."""

from __future__ import annotations

import asyncio
import io
import re
import threading

from rich.console import Console

from nanohermes.common.events import ModelStarted, ToolFinished, ToolStarted, TurnEnded
from nanohermes.ui.live import STOP_HINT, TurnView

_CODE = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\r|\n|[^\x1b\r\n]+")


def screen(output: str) -> list[str]:
    """The lines a terminal shows after `output` (what the scrollback keeps included)."""
    lines, row, col = [""], 0, 0
    for m in _CODE.finditer(output):
        text = m.group(0)
        if text == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif text == "\r":
            col = 0
        elif m.group(2) is not None:
            arg, op = m.group(1), m.group(2)
            if op == "A":
                row = max(0, row - int(arg or 1))
            elif op == "K" and arg == "2":
                lines[row] = ""
            elif op == "K":
                lines[row] = lines[row][:col]
            elif op == "G":
                col = int(arg or 1) - 1
            # colours, cursor show/hide: nothing on the screen
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + text + line[col + len(text):]
            col += len(text)
    return [line.rstrip() for line in lines if line.strip()]


class Terminal(io.StringIO):
    """What a console writes, and which thread wrote each piece."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()

    def write(self, text: str) -> int:
        self.writers.add(threading.current_thread().name)
        return super().write(text)


def test_a_turn_leaves_each_finished_calls_line_once_and_no_spinner_line() -> None:
    """Calls run in batches (several start before the first finishes), so the live area grows
    and shrinks between redraws. Every write comes from the thread handling the events: a
    redraw from another thread could land between a printed line's erasing of the live area
    and its drawing, and leave a running call's line behind."""
    out = Terminal()
    console = Console(file=out, force_terminal=True, width=100, color_system=None, legacy_windows=False)
    view = TurnView(console, view=lambda: "full", typed_ahead=lambda: 0)
    batches, size = 12, 3

    def finished(i: int) -> ToolFinished:
        return ToolFinished(call_id=f"c{i}", name="read_file", result="", is_error=False, elapsed=0.1)

    async def turn() -> None:
        view.start()
        view.handle(ModelStarted(turn=1, model="m"))
        for b in range(batches):
            for i in range(b * size, (b + 1) * size):
                view.handle(ToolStarted(call_id=f"c{i}", name="read_file", arguments={}, summary=f"file{i}.txt"))
                await asyncio.sleep(0.01)  # long enough for the spinner to be redrawn now and then
            for i in range(b * size, (b + 1) * size):
                view.handle(finished(i))
                await asyncio.sleep(0.01)
        view.handle(TurnEnded(reason="completed", turns=1, tool_calls=batches * size, text=""))
        view.stop()

    asyncio.run(turn())
    assert out.writers == {threading.main_thread().name}
    shown = screen(out.getvalue())
    assert [line.split(" · ")[0] for line in shown] == [f"✓ read_file file{i}.txt" for i in range(batches * size)], shown
    assert not any(STOP_HINT in line or "waiting for" in line for line in shown)
