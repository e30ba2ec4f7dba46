"""REPL commands for the extension points: /hooks (the hooks in force)."""

from __future__ import annotations

from nanohermes.ui.commands import CommandContext, command


@command("hooks", help="The hooks in force: event, matcher, command, timeout, and where each came from")
def _hooks(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    hooks = ctx.agent.runtime.hooks
    ctx.print(render.lines(hooks.lines() if hooks is not None else ["no hooks configured (config key hooks; see the README)"]))
