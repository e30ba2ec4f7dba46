"""What the person sends, made ready to run: a message's long pastes (in full, or saved to a
file the model can read when over the per-message budget) and its `@path` attachments, and a
`!command` run as the person's own (unconfined: they typed it) with what it showed and what
the model is told of it. The REPL runs each as its foreground task (`keys.Foreground`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.text import Text

from nanohermes.common.budget import Limits, clamp
from nanohermes.common.dirs import state_home
from nanohermes.guard.redact import redact

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.tools.process import Finished
    from nanohermes.turn.runtime import Runtime

Print = Callable[[Any], None]


def expand_pastes(text: str, pastes: dict[str, str], runtime: Runtime, print: Print) -> str:
    """The labels of long pastes replaced by what was pasted. A message that would then
    be over the per-message budget gets each paste saved to a file the model can read
    (in the session folder), with a note saying where, instead of its text."""
    used = [(label, data) for label, data in pastes.items() if label in text]
    full = text
    for label, data in used:
        full = full.replace(label, data)
    rt = runtime
    if len(full) <= rt.limits.aggregate_chars or not used:
        return full

    folder = rt.session.folder / "pastes" if rt.session.folder is not None else state_home() / "pastes"
    for label, data in used:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            n = 1
            while (path := folder / f"paste-{n}.txt").exists():
                n += 1
            path.write_text(redact(data), encoding="utf-8")  # a session file: no keys in it
            os.chmod(path, 0o600)
        except OSError as e:
            print(Text(f"the paste could not be saved ({e}); it is sent cut to the budget", style="yellow"))

            text = text.replace(label, clamp(data, rt.limits.aggregate_chars // max(1, len(used))))
            continue
        note = (f"{label[:-1]}: over the per-message budget of {rt.limits.aggregate_chars:,} chars, "
                f"saved to {path}; read it with read_file (offset/limit)]")
        text = text.replace(label, note)
        print(Text(f"pasted text saved to {path} (over the per-message budget); the model is told where",
                   style="yellow"))
    return text


async def attach_files(text: str, runtime: Runtime, print: Print) -> str:
    """`@path` appends that file's content, bounded and noted exactly as read_file does."""
    # the command files' reader loads behind the first prompt
    from nanohermes.extensions.custom_commands import attach

    text, notes = await attach(text, runtime)
    for note in notes:
        print(Text(note, style="yellow" if "not attached" in note else "dim"))
    return text


def shell_run(command: str, workspace: Path, config: Config, limits: Limits) -> Coroutine[Any, Any, Finished]:
    """`!command`: the person's own command, run without asking (they typed it)."""
    from nanohermes.guard.sandbox import confine
    from nanohermes.tools.process import command_env, run_capped, shell_argv

    return run_capped(shell_argv(command), cwd=workspace, env=command_env(), limits=limits,
                      timeout=limits.task_timeout_secs, out_cap=limits.run_command_capture_bytes,
                      err_cap=limits.run_command_capture_bytes,
                      confinement=confine("person", workspace=workspace, config=config, limits=limits))  # their yes


def shell_report(command: str, fin: Finished, limits: Limits) -> tuple[list[RenderableType], str]:
    """What a finished `!command` shows the person, and what the conversation is told of it
    (so the model knows what they saw)."""
    # a tool module: only a person's own command (!) loads it; the session and the renderer load
    # behind the first prompt
    from nanohermes.tools.process import describe_exit
    from nanohermes.turn.session import shell_context
    from nanohermes.ui import render

    out = (fin.out.text() + fin.err.text()).rstrip("\n")
    code = describe_exit(fin.exit_code, fin.timed_out)
    mark, style = ("✓", "green") if code == "0" else ("✗", "red")
    shown: list[RenderableType] = [Text.assemble((f"{mark} ", style), ("!", "bold"), render.one_line(command),
                                                 (f" · exit {code}" if code != "0" else "", style))]
    if out:
        shown.append(render.fold(out, max(1, out.count("\n") + 1)))
    body = clamp(out, limits.max_output) if out else "(no output)"
    return shown, shell_context(command, code, body)
