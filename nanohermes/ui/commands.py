"""The slash-command registry of the REPL, and the built-in commands.

Any module can add a command with the `command` decorator (or `register`):

    from nanohermes.ui.commands import CommandContext, command

    @command("compact", help="Summarise older turns to free context", usage="[focus]")
    async def compact(ctx: CommandContext, arg: str) -> None:
        ...
        ctx.print("compacted: 42,000 -> 9,000 chars")

A handler receives the REPL's `CommandContext` and the text after the command name; it may be
sync or async. The module must be imported before the REPL starts: add its dotted name to
`COMMAND_MODULES` below. `/help` lists every registered command in name order.

Lookup (`resolve`): an exact name wins, then a unique prefix (`/mo` -> `/mode`); an ambiguous
prefix lists the candidates; an unknown name gets the closest suggestion.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Union

if TYPE_CHECKING:
    from nanohermes.agent import Agent
    from nanohermes.config import Config

Handler = Callable[["CommandContext", str], Union[None, Awaitable[None]]]

# Modules that register commands when imported; loaded once by `load_commands()`.
COMMAND_MODULES: list[str] = []


@dataclass(frozen=True)
class Command:
    name: str  # without the slash
    help: str  # one line
    handler: Handler
    usage: str = ""  # argument synopsis, e.g. "[name]"


@dataclass
class CommandContext:
    """What a command may touch: the agent (history, runtime, llm), the config, the output."""

    agent: Agent
    config: Config
    workspace: Path
    print: Callable[[Any], None]  # a string or a rich renderable, printed above the prompt
    registry: Registry
    state: dict[str, Any] = field(default_factory=dict)  # REPL-wide settings (view mode, ...)
    exit_requested: bool = False

    def request_exit(self) -> None:
        self.exit_requested = True


@dataclass(frozen=True)
class Resolved:
    command: Command | None
    arg: str
    error: str = ""  # why nothing ran, with the next step


class Registry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def register(self, name: str, help: str, handler: Handler, *, usage: str = "") -> Command:  # noqa: A002
        name = name.lstrip("/")
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"bad command name {name!r}: one word, no spaces")
        if name in self._commands:
            raise ValueError(f"/{name} is already registered")
        cmd = Command(name, help, handler, usage)
        self._commands[name] = cmd
        return cmd

    def command(self, name: str, *, help: str, usage: str = "") -> Callable[[Handler], Handler]:  # noqa: A002
        def deco(fn: Handler) -> Handler:
            self.register(name, help, fn, usage=usage)
            return fn

        return deco

    def names(self) -> list[str]:
        return sorted(self._commands)

    def all(self) -> list[Command]:
        return [self._commands[n] for n in self.names()]

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def resolve(self, line: str) -> Resolved:
        """Parse `/name arg...` and find the command."""
        body = line.strip()[1:] if line.strip().startswith("/") else line.strip()
        name, _, arg = body.partition(" ")
        name, arg = name.strip(), arg.strip()
        if not name:
            return Resolved(None, arg, "type a command after /; /help lists them")
        if name in self._commands:
            return Resolved(self._commands[name], arg)
        matches = [n for n in self.names() if n.startswith(name)]
        if len(matches) == 1:
            return Resolved(self._commands[matches[0]], arg)
        if matches:
            return Resolved(None, arg, f"/{name} is ambiguous: " + ", ".join("/" + m for m in matches))
        close = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.5)
        hint = f"did you mean /{close[0]}?" if close else "/help lists the commands"
        return Resolved(None, arg, f"unknown command /{name}; {hint}")

    async def run(self, line: str, ctx: CommandContext) -> None:
        r = self.resolve(line)
        if r.command is None:
            ctx.print(_error_text(r.error))
            return
        out = r.command.handler(ctx, r.arg)
        if inspect.isawaitable(out):
            await out


REGISTRY = Registry()
register = REGISTRY.register
command = REGISTRY.command
_loaded = False


def load_commands() -> Registry:
    """Import every module listed in COMMAND_MODULES once; return the shared registry."""
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in COMMAND_MODULES:
            importlib.import_module(mod)
    return REGISTRY


def _error_text(text: str) -> Any:
    from rich.text import Text

    return Text(text, style="red")


# -- built-in commands ---------------------------------------------------------------------

@command("help", help="List the commands and the keys")
def _help(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    ctx.print(render.help_table(ctx.registry.all()))


@command("tools", help="The tool pool: group, flags, output limit, source; hidden tools with the reason")
def _tools(ctx: CommandContext, arg: str) -> None:
    from nanohermes.permissions import blocked
    from nanohermes.ui import render

    runtime = ctx.agent.runtime
    rows = [render.ToolRow(name=t.name, group=t.group, read_only=render.flag(t, "read_only"),
                           concurrency_safe=render.flag(t, "concurrency_safe"),
                           output_limit=render.limit_text(t.output_limit(), runtime.limits),
                           source=t.source, hidden=blocked(runtime.policy, t.name) or "")
            for t in runtime.tools]
    ctx.print(render.tools_table(rows, mode=runtime.policy.mode))


@command("mode", help="Show the permission mode, or switch it (Shift+Tab cycles)", usage="[name]")
def _mode(ctx: CommandContext, arg: str) -> None:
    from nanohermes.config import MODES
    from nanohermes.ui import render

    runtime = ctx.agent.runtime
    if not arg:
        ctx.print(render.info(f"mode: {runtime.policy.mode} (modes: {', '.join(MODES)})"))
        return
    matches = [m for m in MODES if m == arg] or [m for m in MODES if m.startswith(arg)]
    if len(matches) != 1:
        ctx.print(_error_text(f"unknown mode {arg!r}; choose one of: {', '.join(MODES)}"))
        return
    runtime.set_mode(matches[0])
    ctx.print(render.info(f"mode: {matches[0]}"))


@command("model", help="Show the model, or switch it for the next call", usage="[name]")
def _model(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    llm = ctx.agent.llm
    if arg:
        llm.model = arg
        ctx.print(render.info(f"model: {arg} (from the next call)"))
    else:
        ctx.print(render.info(f"model: {llm.model}"))


@command("clear", help="Start a new conversation (the old one stays saved)")
def _clear(ctx: CommandContext, arg: str) -> None:
    from nanohermes.session import Transcript
    from nanohermes.ui import render

    agent = ctx.agent
    agent.history.clear()
    if agent.transcript is not None:
        agent.transcript.close()
        agent.transcript = Transcript.create(ctx.workspace, model=agent.llm.model, mode=agent.runtime.policy.mode)
        agent.runtime.session_dir = agent.transcript.dir
    ctx.print(render.info("conversation cleared"))


@command("context", help="What fills the context: system prompt, tool specs, history, tool results")
def _context(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    agent = ctx.agent
    parts: dict[str, int] = {"system prompt": len(agent.system_prompt),
                             "tool specs": len(json.dumps(agent.runtime.specs(), ensure_ascii=False))}
    counts = {"user messages": 0, "assistant messages": 0, "tool calls": 0, "tool results": 0}
    sizes = {k: 0 for k in counts}
    for m in agent.history:
        if m.role == "tool":
            key = "tool results"
        elif m.role == "user":
            key = "user messages"
        else:
            key = "assistant messages"
        counts[key] += 1
        sizes[key] += len(m.content or "")
        for c in m.tool_calls:
            counts["tool calls"] += 1
            sizes["tool calls"] += len(c.name) + len(c.arguments)
    budget = agent.runtime.limits.session_budget_chars
    ctx.print(render.context_table(parts, counts, sizes, budget))


@command("cost", help="Tokens used in this session")
def _cost(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    ctx.print(render.usage_text(ctx.agent.usage, ctx.agent.llm.model))


@command("view", help="full: one line per tool call; compact: one label per batch", usage="[full|compact]")
def _view(ctx: CommandContext, arg: str) -> None:
    from nanohermes.ui import render

    if arg and arg not in ("full", "compact"):
        ctx.print(_error_text(f"unknown view {arg!r}; choose full or compact"))
        return
    if arg:
        ctx.state["view"] = arg
    ctx.print(render.info(f"view: {ctx.state.get('view', 'full')}"))


@command("exit", help="Leave nanohermes (also Ctrl-D)")
def _exit(ctx: CommandContext, arg: str) -> None:
    ctx.request_exit()
