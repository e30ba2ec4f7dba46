"""REPL commands for the extension points: /hooks (the hooks in force) and the custom
commands read from Markdown files (installed into the registry once the workspace is known)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nanohermes.ui.commands import CommandContext, Handler, Registry, command

if TYPE_CHECKING:
    from nanohermes.custom_commands import CustomCommand


@command("hooks", help="The hooks in force: event, matcher, command, timeout, and where each came from")
def _hooks(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    hooks = ctx.agent.runtime.hooks
    ctx.print(render.lines(hooks.lines() if hooks is not None else ["no hooks configured (config key hooks; see the README)"]))


def install_custom_commands(registry: Registry, workspace: Path) -> list[str]:
    """Add the workspace's and the user's custom commands; returns the warnings to show."""
    from nanohermes.custom_commands import discover

    found = discover(workspace)
    for cmd in found.commands.values():
        summary = cmd.description or (cmd.body.splitlines()[0][:60] if cmd.body else "")
        kind = "project" if cmd.project else "user"
        registry.add_custom(cmd.name, f"{summary} ({kind} command)", _handler(cmd), usage=cmd.argument_hint,
                            source=cmd.where)
    return found.warnings


def _handler(cmd: CustomCommand) -> Handler:
    async def handle(ctx: CommandContext, arg: str) -> None:
        from rich.text import Text

        from nanohermes.custom_commands import prompt_for, run

        text, notes = await prompt_for(cmd, arg, ctx.agent.runtime)
        for note in notes:
            ctx.print(Text(note, style="yellow" if "not attached" in note else "dim"))
        await run(ctx.agent, cmd, text, ctx.submit)

    return handle
