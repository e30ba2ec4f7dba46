"""REPL commands over the checkpoints: /rewind (list the turns, or go back to before one),
/undo (the last turn's file changes) and /redo (what the last undo replaced). A file changed
since the turn is the person's: they are asked what to keep. Files put back while the
conversation keeps the turns that changed them are named to the model with the next prompt."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from rich.text import Text

from nanohermes.ui.commands import CommandContext, command

if TYPE_CHECKING:
    from nanohermes.turn.checkpoints import Checkpoints, Conflict, Resolution, Resolver

_MODES = ("both", "files", "conversation")


def _checkpoints(ctx: CommandContext) -> Checkpoints | None:
    # the checkpoints load with the agent, behind the first prompt
    from nanohermes.turn.checkpoints import Checkpoints

    return next((h for h in ctx.agent.turn_hooks if isinstance(h, Checkpoints)), None)


def _off(ctx: CommandContext) -> None:
    # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
    from nanohermes.ui import render

    ctx.print(render.info("checkpoints are off (config key checkpoints)"))


def resolver(ctx: CommandContext) -> Resolver | None:
    """Asks the person about each path changed since the step being taken back (None
    without a way to ask: then their version is kept)."""
    choose = ctx.choose
    if choose is None:
        return None

    async def resolve(conflict: Conflict) -> Resolution:
        # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
        from nanohermes.ui import render

        now = "deleted it" if conflict.mine is None else "changed it"
        ctx.print(Text.assemble((f"{conflict.path}", "bold"), f": you (or a later turn) {now} after {conflict.step}"))
        if conflict.diff:
            ctx.print(render.diff(conflict.diff))
        theirs = "delete it, as before" if conflict.theirs is None else "as before"
        options = [("mine", "m", "Keep mine"), ("theirs", "c", f"Take the checkpoint's ({theirs} {conflict.step})")]
        if conflict.mergeable:
            options.append(("merge", "b", "Both: merge the undo into mine (conflicts marked)"))
        picked = await choose(options)
        return "theirs" if picked == "theirs" else "merge" if picked == "merge" else "mine"

    return resolve


@command("rewind", help="List the turns, or go back to before one: its files, its conversation, or both",
         usage="[turn] [both|files|conversation]")
async def _rewind(ctx: CommandContext, arg: str) -> None:
    # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
    from nanohermes.ui import render

    cps = _checkpoints(ctx)
    if cps is None:
        return _off(ctx)
    turns = cps.turns()
    if not turns:
        ctx.print(render.info("no checkpoints yet in this session (one is recorded before each turn)"))
        return
    words = arg.split()
    if not words:
        lines = []
        rows = await cps.listing()
        firsts = [row.turn.prompt.splitlines()[0][:50] if row.turn.prompt else "" for row in rows]
        width = max(map(len, firsts), default=0)  # as wide as the longest prompt shown, at most 50
        for row, first in zip(rows, firsts, strict=True):
            t, files = row.turn, row.paths
            if files is None:
                what = "file changes not recorded"
            elif row.pruned:
                what = "checkpoint pruned"
            elif files:
                what = (f"{len(files)} file{'s' if len(files) != 1 else ''}: " + ", ".join(files[:5])
                        + (" …" if len(files) > 5 else ""))
            else:
                what = "no file changes"
            lines.append(f"{t.turn:>3}  {t.when}  {first:<{width}}  {what}" + ("  (files undone)" if t.undone else ""))
        lines.append("go back with /rewind N [both|files|conversation] (both by default); /undo undoes the last "
                     "turn's files, /redo brings back what it replaced")
        ctx.print(render.lines(lines))
        return
    mode = words[1] if len(words) > 1 else "both"
    turn = next((t for t in turns if words[0].isdigit() and t.turn == int(words[0])), None)
    if turn is None or mode not in _MODES or len(words) > 2:
        ctx.print(Text(f"usage: /rewind N [both|files|conversation], N one of "
                       f"{', '.join(str(t.turn) for t in turns)} (/rewind lists them)", style="red"))
        return
    conversation = mode in ("both", "conversation")
    lines = await cps.rewind(turn, files=mode in ("both", "files"), conversation=conversation, resolve=resolver(ctx))
    ctx.print(render.lines(lines))
    if not conversation:  # the conversation still holds the turns whose files went back
        _tell_model(ctx, f"/rewind {turn.turn} files", lines)
    if conversation and any(line.startswith("conversation rewound") for line in lines):
        # The REPL offers that prompt again, to edit and resend: as typed, without what was
        # attached to it.
        ctx.state["prefill"] = re.split(r"\n\n<(?:file path=|hook-context>)", cps.rewound_prompt, maxsplit=1)[0]


@command("undo", help="Undo the file changes of the last turn (again: the turn before it); yours are kept")
async def _undo(ctx: CommandContext, arg: str) -> None:
    await _step(ctx, "undo")


@command("redo", help="Bring back what the last /undo or /rewind of files replaced")
async def _redo(ctx: CommandContext, arg: str) -> None:
    await _step(ctx, "redo")


async def _step(ctx: CommandContext, way: Literal["undo", "redo"]) -> None:
    # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
    from nanohermes.ui import render

    cps = _checkpoints(ctx)
    if cps is None:
        return _off(ctx)
    step = cps.undo if way == "undo" else cps.redo
    lines = await step(resolve=resolver(ctx))
    ctx.print(render.lines(lines))
    _tell_model(ctx, f"/{way}", lines)


def _tell_model(ctx: CommandContext, said: str, lines: list[str]) -> None:
    """The model's conversation still says its files are as its turns left them: when files
    were put back, it is told which (with the next prompt, as of a `!command`), so it reads
    them again rather than work from what it remembers."""
    restored = [line for line in lines if line.startswith("restored ")]
    if restored:
        ctx.agent.add_context(restore_note(said, restored))


def restore_note(said: str, restored: list[str]) -> str:
    """What the model is told of files the person put back with `said` (/undo, /redo, /rewind)."""
    # A file name that is not UTF-8 holds escaped bytes that no request or transcript can carry:
    # the model reads them as \x escapes, as git would quote them.
    body = "\n".join(restored).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return (f'<user-restore command="{said}">\n{body}\nThese files are no longer as your earlier calls left or read '
            "them: read one again before you rely on it or change it.\n</user-restore>")
