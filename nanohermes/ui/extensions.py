"""REPL commands for the extension points: /hooks (the hooks in force), /add-dir (a folder for
writes and for the MCP servers' roots), the custom commands read from Markdown files
(installed into the registry once the workspace is known), /init (a turn that writes
AGENTS.md) and /export (the conversation as Markdown or JSON, `export.py`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from nanohermes.ui.commands import CommandContext, Handler, Registry, command

if TYPE_CHECKING:
    from nanohermes.extensions.custom_commands import CustomCommand
    from nanohermes.guard.ownreads import OwnReader


@command("hooks", help="The hooks in force: event, matcher, command, timeout, and where each came from")
def _hooks(ctx: CommandContext, arg: str) -> None:
    # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
    from nanohermes.ui import render

    runtime = ctx.agent.runtime
    hooks = runtime.hooks
    if hooks is None:
        ctx.print(render.lines(["no hooks configured (config key hooks; see docs/hooks.md)"]))
        return
    tools = {t.name: t.claude_names for t in runtime.tools}
    ctx.print(render.lines(hooks.lines(tools, tuple(runtime.config.mcp.servers))))


@command("add-dir", help="Add a folder writes may reach without being protected (extra_write_roots), for this "
                         "session; MCP servers get it as a root", usage="PATH")
async def _add_dir(ctx: CommandContext, arg: str) -> None:
    # the agent's wiring (assemble) loads behind the first prompt, in the worker thread
    from nanohermes.assemble import mcp_roots

    if not arg.strip():
        ctx.print(Text("usage: /add-dir PATH (a folder, absolute or from the workspace)", style="red"))
        return
    def look() -> tuple[Path, bool]:  # file system calls, off the loop
        found = (ctx.workspace / os.path.expanduser(arg.strip())).resolve()
        return found, found.is_dir()

    folder, is_dir = await asyncio.to_thread(look)
    if not is_dir:
        ctx.print(Text(f"{folder} is not a folder; give an existing folder", style="red"))
        return
    roots = ctx.config.extra_write_roots
    if str(folder) not in roots and folder != ctx.workspace.resolve():
        roots.append(str(folder))
    mcp = ctx.built.mcp if ctx.built is not None else None
    if mcp is not None:
        await mcp.set_roots(mcp_roots(ctx.config, ctx.workspace))
    told = "; MCP servers were told (roots/list_changed)" if mcp is not None else ""
    ctx.print(Text(f"added {folder} for this session: writes there are not asked as outside the workspace{told}",
                   style="green"))


def install_custom_commands(registry: Registry, workspace: Path, reader: OwnReader | None = None) -> list[str]:
    """Add the workspace's and the user's custom commands, their files read through `reader`
    (the session's); returns the warnings to show. A command that cannot run is listed too,
    with why, and says so when typed."""
    # the command files' reader loads behind the first prompt
    from nanohermes.extensions.custom_commands import discover

    found = discover(workspace, reader)
    for cmd in found.commands.values():
        summary = cmd.description or (cmd.body.splitlines()[0][:60] if cmd.body else "")
        kind = "project" if cmd.project else "user"
        registry.add_custom(cmd.name, f"{summary} ({kind} command)", _handler(cmd), usage=cmd.argument_hint,
                            source=cmd.where)
    for name, skipped in found.refused.items():
        registry.add_custom(name, f"cannot run: {skipped.reason} ({skipped.path})", _refused(name, str(skipped)),
                            source=str(skipped.path))
    return found.warnings


def _refused(name: str, why: str) -> Handler:
    def handle(ctx: CommandContext, arg: str) -> None:
        ctx.print(Text(f"/{name} cannot run: {why}", style="yellow"))

    return handle


def _handler(cmd: CustomCommand) -> Handler:
    async def handle(ctx: CommandContext, arg: str) -> None:
        # the command files' reader loads behind the first prompt
        from nanohermes.extensions.custom_commands import prompt_for, run

        ready, text, notes = await prompt_for(cmd, arg, ctx.agent.runtime)
        for note in notes:
            ctx.print(Text(note, style="yellow" if ready is None or "not attached" in note else "dim"))
        if ready is not None:
            await run(ctx.agent, ready, text, ctx.submit)

    return handle


@command("init", help="Study the repository and write (or improve) AGENTS.md, in one turn")
async def _init(ctx: CommandContext, arg: str) -> None:
    # the command files' reader loads behind the first prompt
    from nanohermes.extensions.custom_commands import init_prompt

    await (ctx.submit or ctx.agent.ask)(init_prompt(ctx.workspace, arg))


@command("export", help="Write the conversation as Markdown (JSON for a .json name) to a file", usage="[file]")
def _export(ctx: CommandContext, arg: str) -> None:
    # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
    from nanohermes.ui import render

    session = ctx.agent.session
    history = session.whole()
    if not history:
        ctx.print(render.info("nothing to export yet"))
        return
    # only /export writes a transcript out
    from nanohermes.turn.export import export, exported_line

    try:
        path = export(history, session.id, ctx.workspace, arg)
    except OSError as e:
        ctx.print(Text(f"could not write {e.filename or arg}: {e.strerror or e}", style="red"))
        return
    ctx.print(render.info(exported_line(len(history), len(session.earlier), path)))
