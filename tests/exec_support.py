"""Support for tests that run commands: process-leak checks and calls through the runtime.

Every test using `no_leftover_processes` gets a unique marker in its environment, which
every process it starts (and their children, and nanohermes subprocesses) inherits. After
the test, no live process may carry it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools

MARK_VAR = "NH_TEST_PROC_MARK"


def _state_and_pgid(pid: str) -> tuple[str, int] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parens: the fields start after the last ")".
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[2])


def marked_pids(marker: str) -> list[int]:
    """Live (not zombie) processes whose environment carries `marker`, except this one."""
    needle = f"{MARK_VAR}={marker}".encode()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        info = _state_and_pgid(entry)
        if needle in env.split(b"\0") and info is not None and info[0] != "Z":
            found.append(int(entry))
    return found


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    out: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _state_and_pgid(entry)
            if info is not None and info[1] == pgid and info[0] != "Z":
                out.append(int(entry))
    return out


def wait_until(predicate, timeout: float = 20.0, step: float = 0.02) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


@pytest.fixture(autouse=True)
def no_leftover_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARK_VAR, marker)
    yield marker
    # A killed process needs a moment to disappear; a leaked one never does.
    gone = wait_until(lambda: not marked_pids(marker), timeout=10)
    survivors = marked_pids(marker)
    for pid in survivors:  # do not let one failing test pollute the machine
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert gone, f"processes left running by the test: {survivors}"


# -- running tools through the real runtime ------------------------------------------------

_ids = itertools.count(1)


def make_runtime(ws: Path, *, limits: Limits | None = None, ui: RecordingUI | None = None,
                 mode: str = "goal", config: Config | None = None) -> Runtime:
    """The real built-in pool behind the real runtime; goal mode approves everything."""
    return Runtime(tools=build_tools(), config=config or Config(), workspace=ws, ui=ui or RecordingUI(),
                   policy=Policy(mode=mode), limits=limits or Limits())


async def acall(rt: Runtime, name: str, **args: Any) -> str:
    [msg] = await rt.run_calls([ToolCall(id=f"c{next(_ids)}", name=name, arguments=json.dumps(args))])
    assert msg.content is not None
    return msg.content


def call(rt: Runtime, name: str, **args: Any) -> str:
    """One call in its own event loop: for foreground tools only (tasks live on their loop)."""
    return asyncio.run(acall(rt, name, **args))


# -- a command run in a confinement of the test's choosing --------------------------------
class Confined:
    """What a command run by `run_confined` gave: its result text and what the sandbox refused
    (`found`: each `sandbox.Refused`, its kind and subject; `refused`: each as its text says it)."""

    def __init__(self, text: str, refused: tuple[Any, ...]) -> None:
        self.text, self.found, self.refused = text, tuple(refused), [str(r) for r in refused]


def confined_context(ws: Path, policy: str, *, config: Config | None = None, limits: Limits | None = None,
                     withhold: bool = True) -> tuple[Any, Any]:
    """A tool context, and an attempt whose processes run as the gate would confine a call
    granted `policy`."""
    from nanohermes.guard.sandbox import confine
    from nanohermes.tools import Attempt, ToolContext

    cfg, lim = config or Config(), limits or Limits()
    return (ToolContext(workspace=ws, limits=lim, config=cfg),
            Attempt(confinement=confine(policy, workspace=ws, config=cfg, limits=lim, withhold=withhold)))


def run_confined(ws: Path, command: str, policy: str, *, config: Config | None = None,
                 limits: Limits | None = None, withhold: bool = True) -> Confined:
    """run_command, its processes confined as the gate would confine a call granted `policy`."""
    from nanohermes.tools.shell import RunCommand, RunCommandParams

    ctx, attempt = confined_context(ws, policy, config=config, limits=limits, withhold=withhold)
    out = asyncio.run(RunCommand().run(RunCommandParams(command=command), ctx, attempt))
    return Confined(out, ()) if isinstance(out, str) else Confined(out.text, out.refused)
