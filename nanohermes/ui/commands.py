"""The slash-command registry of the REPL, and the built-in commands.

Any module can add a command with the `command` decorator (or `register`):

    from nanohermes.ui.commands import CommandContext, command

    @command("compact", help="Summarise older turns to free context", usage="[focus]")
    async def compact(ctx: CommandContext, arg: str) -> None:
        ...
        ctx.print("compacted: 42,000 -> 9,000 chars")

A handler receives the REPL's `CommandContext` and the text after the command name; it may be
sync or async. The module must be imported before the REPL starts: add its dotted name to
`COMMAND_MODULES` below. `/help` lists every registered command in name order. A name may be
registered once; the built-ins marked `fallback=True` below are plain stand-ins over the core's
functions, and a module registering the same name replaces them.

Lookup (`resolve`): an exact name wins, then a unique prefix (`/mo` -> `/mode`); an ambiguous
prefix lists the candidates; an unknown name gets the closest suggestion.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rich.text import Text

from nanohermes import __version__
from nanohermes.common.modes import CYCLE, Mode
from nanohermes.guard.permissions import blocked
from nanohermes.turn.session import find_session, list_sessions

if TYPE_CHECKING:
    from nanohermes.assemble import Built
    from nanohermes.config import Config
    from nanohermes.turn.agent import Agent
    from nanohermes.turn.meters import Meter

Handler = Callable[["CommandContext", str], Awaitable[None] | None]

GOAL_WARNING = "goal mode: every call runs without asking (mode blocks and deny rules still apply); /mode default to go back"

# Modules that register commands when imported; loaded once by `load_commands()`.
COMMAND_MODULES: list[str] = ["nanohermes.ui.extensions", "nanohermes.ui.rewind"]


@dataclass(frozen=True)
class Command:
    name: str  # without the slash
    help: str  # one line
    handler: Handler
    usage: str = ""  # argument synopsis, e.g. "[name]"
    fallback: bool = False  # a stand-in: a later registration of the same name replaces it
    source: str = ""  # a custom command's file; "" for a built-in


@dataclass
class CommandContext:
    """What a command may touch: the agent (history, runtime, llm), the config, the output,
    and `built` (skills, MCP servers, sub-agents, project docs) when the REPL has it."""

    agent: Agent
    config: Config
    workspace: Path
    print: Callable[[Any], None]  # a string or a rich renderable, printed above the prompt
    registry: Registry
    state: dict[str, Any] = field(default_factory=dict)  # REPL-wide settings (view mode, ...)
    built: Built | None = None
    meter: Meter | None = None  # usage of the last turn and the session
    # Runs a turn with this prompt as the front end runs typed ones (None: agent.ask).
    submit: Callable[[str], Awaitable[Any]] | None = None
    # Asks the person to pick one of (value, key, label) and returns the value; Esc or Ctrl-C
    # give the first, the safe one (None: nobody to ask).
    choose: Callable[[list[tuple[str, str, str]]], Awaitable[str]] | None = None
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
        self.shadowed: list[Command] = []  # custom commands a built-in of the same name hides

    def drop_custom(self) -> None:
        """Forget the custom commands (they are read again when their files change)."""
        self._commands = {n: c for n, c in self._commands.items() if not c.source}
        self.shadowed = []

    def add_custom(self, name: str, help: str, handler: Handler, *, usage: str = "", source: str) -> bool:
        """A custom command (from a Markdown file); a built-in of the same name wins."""
        cmd = Command(name, help, handler, usage, source=source)
        old = self._commands.get(name)
        if old is not None and not old.source:
            self.shadowed.append(cmd)
            return False
        self._commands[name] = cmd
        return True

    def register(self, name: str, help: str, handler: Handler, *, usage: str = "",
                 fallback: bool = False) -> Command:
        name = name.lstrip("/")
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"bad command name {name!r}: one word, no spaces")
        cmd = Command(name, help, handler, usage, fallback)
        old = self._commands.get(name)
        if old is not None and not old.fallback:
            if fallback:
                return old  # the real one is already there
            raise ValueError(f"/{name} is already registered")
        self._commands[name] = cmd
        return cmd

    def command(self, name: str, *, help: str, usage: str = "",
                fallback: bool = False) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            self.register(name, help, fn, usage=usage, fallback=fallback)
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


def repl_command(name: str) -> Command | None:
    """The REPL's command `name` (built in, or a custom one the registry holds), for `-p` and
    an editor's prompt to refuse or run (`custom_commands.ask`)."""
    return load_commands().get(name)


def _error_text(text: str) -> Any:
    return Text(text, style="red")


def _render() -> ModuleType:
    """The renderer, loaded by the first command that prints: rich's markdown and syntax (about
    60 ms) load after the first prompt is drawn."""
    from nanohermes.ui import render

    return render


# -- built-in commands ---------------------------------------------------------------------

@command("help", help="List the commands and the keys")
def _help(ctx: CommandContext, arg: str) -> None:
    render = _render()

    rows = [("/" + c.name + (f" {c.usage}" if c.usage else ""), c.help) for c in ctx.registry.all()]
    ctx.print(render.help_table(rows))
    for c in ctx.registry.shadowed:
        ctx.print(render.info(f"/{c.name} from {c.source} is hidden by the built-in /{c.name}; rename the file to use it"))


@command("status", help="The version, model, endpoint, workspace, session, config files, mode and sandbox")
def _status(ctx: CommandContext, arg: str) -> None:
    # the sandbox's probe of the kernel: only /status reports it
    from nanohermes.guard.sandbox import describe_availability

    render = _render()

    agent, config = ctx.agent, ctx.config
    session = agent.session
    key = (f"key from ${config.api_key_env}" if config.api_key is None else "key from the config or --api-key") \
        if config.resolved_api_key() else "no key"
    files = [str(p) for p in ctx.state.get("config_files", ())]
    checkpoints = "off (config key checkpoints)"
    if ctx.built is not None and ctx.built.checkpoints is not None:
        cps = ctx.built.checkpoints
        checkpoints = f"off for this session: {cps.disabled}" if cps.disabled else f"on, {len(cps.turns())} turns recorded"
    ctx.print(render.lines([
        f"nanohermes {__version__}",
        f"model: {agent.llm.model} ({config.wire_api} wire"
        + (f", reasoning effort {config.reasoning_effort}" if config.reasoning_effort else "") + ")",
        f"endpoint: {config.base_url} ({key})",
        f"workspace: {ctx.workspace}",
        f"session: {session.id} (saved to {session.path})" if session.path is not None
        else f"session: {session.id or '-'} (not saved)",
        "config: " + (", ".join(files) if files else "no config files (defaults, environment and flags only)"),
        f"mode: {agent.runtime.policy.mode}",
        f"checkpoints: {checkpoints}",
        *describe_availability(config.sandbox.mode),
    ]))


@command("tools", help="The tool pool: group, flags, output limit, source; hidden tools with the reason")
def _tools(ctx: CommandContext, arg: str) -> None:
    render = _render()

    runtime = ctx.agent.runtime
    rows = [render.ToolRow(name=t.name, group=t.group, read_only=render.flag(t, "read_only"),
                           concurrency_safe=render.flag(t, "concurrency_safe"),
                           output_limit=render.limit_text(t.output_limit(), runtime.limits),
                           source=t.source, hidden=blocked(runtime.policy, t.name, t.effect) or "")
            for t in runtime.tools]
    ctx.print(render.tools_table(rows, mode=runtime.policy.mode))


@command("mode", help=f"Show the permission mode, or switch it (Shift+Tab cycles {', '.join(CYCLE)})",
         usage="[name]")
def _mode(ctx: CommandContext, arg: str) -> None:
    render = _render()

    runtime = ctx.agent.runtime
    if not arg:
        ctx.print(render.info(f"mode: {runtime.policy.mode} (modes: {', '.join(Mode)})"))
        return
    matches = [m for m in Mode if m == arg] or [m for m in Mode if m.startswith(arg)]
    if len(matches) != 1:
        ctx.print(_error_text(f"unknown mode {arg!r}; choose one of: {', '.join(Mode)}"))
        return
    runtime.set_mode(matches[0])
    ctx.print(render.info(f"mode: {matches[0]}"))
    if matches[0] == Mode.GOAL:
        ctx.print(_warning_text(GOAL_WARNING))


MODEL_LIST_SECS = 10.0  # how long /model waits for the endpoint's model list


async def endpoint_models(llm: Any) -> tuple[list[str] | None, str]:
    """The endpoint's model ids, or None and why they could not be listed."""

    lister = getattr(llm, "list_models", None)
    if lister is None:
        return None, "this endpoint type cannot list its models"
    try:
        return list(await asyncio.wait_for(lister(), MODEL_LIST_SECS)), ""
    except asyncio.CancelledError:
        raise
    except Exception as e:
        return None, getattr(e, "message", None) or f"{type(e).__name__}: {e}"


@command("model", help="Show the model and the endpoint's models, or switch (checked against that list)",
         usage="[name]")
async def _model(ctx: CommandContext, arg: str) -> None:
    render = _render()

    llm = ctx.agent.llm
    models, why = await endpoint_models(llm)
    if not arg:
        ctx.print(render.info(f"model: {llm.model}"))
        if models:
            ctx.print(render.lines([f"the endpoint serves {len(models)}: " + ", ".join(models[:40])
                                    + (f" … and {len(models) - 40} more" if len(models) > 40 else "")]))
        elif models is None:
            ctx.print(_warning_text(f"could not list the endpoint's models ({why})"))
        return
    if models is not None and arg not in models:
        close = difflib.get_close_matches(arg, models, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; /model lists them"
        ctx.print(_error_text(f"the endpoint does not serve {arg!r}{hint} (model unchanged: {llm.model})"))
        return
    ctx.agent.set_model(arg)
    ctx.print(render.info(f"model: {arg} (from the next call)"))
    if models is None:
        ctx.print(_warning_text(f"could not check the name against the endpoint ({why})"))


@command("clear", help="Start a new conversation (the old one stays saved)")
async def _clear(ctx: CommandContext, arg: str) -> None:
    render = _render()

    agent = ctx.agent
    if ctx.built is not None:  # the SessionEnd and SessionStart hooks fire around it
        await ctx.built.clear()
    else:
        agent.session.clear(model=agent.llm.model, mode=agent.runtime.policy.mode)
    if ctx.meter is not None:
        ctx.meter.reset()
    ctx.print(render.info("conversation cleared"))


@command("context", help="What fills the context: system prompt, tool specs, history, tool results")
def _context(ctx: CommandContext, arg: str) -> None:
    # the meters load with the first turn's view, after the first prompt is drawn
    from nanohermes.turn.meters import context_breakdown, format_context

    render = _render()

    ctx.print(render.lines(format_context(context_breakdown(ctx.agent)).splitlines()))
    if ctx.built is not None:
        ctx.print(render.lines(ctx.built.context_lines()))


@command("permissions", help="The mode and the allow/ask/deny rules in force, with where each came from")
def _permissions(ctx: CommandContext, arg: str) -> None:
    render = _render()

    ctx.print(render.lines(ctx.agent.runtime.permissions_report()))


@command("mcp", help="Each MCP server: status, number of tools, error")
def _mcp(ctx: CommandContext, arg: str) -> None:
    render = _render()

    lines = ctx.built.mcp_lines() if ctx.built is not None else ["no MCP servers configured (config key mcp.servers)"]
    ctx.print(render.lines(lines))


@command("cost", help="Tokens (and cost, when `prices` has the model) of the last turn and the session")
def _cost(ctx: CommandContext, arg: str) -> None:
    # the meters load with the first turn's view, after the first prompt is drawn
    from nanohermes.turn.meters import Meter, cost_report, format_cost

    render = _render()

    meter = ctx.meter if ctx.meter is not None else Meter()
    report = cost_report(meter.turn_by_model, ctx.agent.session.usage_by_model, ctx.config, ctx.agent.llm.model)
    ctx.print(render.lines(format_cost(report).splitlines()))


@command("view", help="full: one line per tool call; compact: one label per batch", usage="[full|compact]")
def _view(ctx: CommandContext, arg: str) -> None:
    render = _render()

    if arg and arg not in ("full", "compact"):
        ctx.print(_error_text(f"unknown view {arg!r}; choose full or compact"))
        return
    if arg:
        ctx.state["view"] = arg
    ctx.print(render.info(f"view: {ctx.state.get('view', 'full')}"))


@command("thinking", help="Show the model's reasoning whole, or fold it to one line", usage="[on|off]")
def _thinking(ctx: CommandContext, arg: str) -> None:
    render = _render()

    if arg and arg not in ("on", "off"):
        ctx.print(_error_text(f"unknown setting {arg!r}; choose on or off"))
        return
    ctx.state["thinking"] = (arg == "on") if arg else not ctx.state.get("thinking")
    ctx.print(render.info(f"thinking: {'shown' if ctx.state['thinking'] else 'folded'}"))


@command("exit", help="Leave nanohermes (also Ctrl-D)")
def _exit(ctx: CommandContext, arg: str) -> None:
    ctx.request_exit()


# -- stand-ins over the core's functions (a module registering the same name replaces them) --

@command("compact", help="Summarise the older turns now to free context", usage="[focus]", fallback=True)
async def _compact(ctx: CommandContext, arg: str) -> None:
    agent = ctx.agent
    if agent.compactor is None:
        ctx.print(_error_text("compaction is not available in this session"))
        return
    # The compactor's own notice is the one line this prints (what was compacted, or why not).
    await agent.compactor.manual(agent.session, focus=arg)


@command("resume", help="List this project's saved sessions, numbered, or continue one", usage="[N|id]",
         fallback=True)
async def _resume(ctx: CommandContext, arg: str) -> None:
    # only /resume lists sessions
    from nanohermes.ui.sessions import format_sessions

    render = _render()

    sessions = list_sessions(ctx.workspace)
    if not arg:
        if not sessions:
            ctx.print(render.info("no saved sessions in this project"))
            return
        rows = format_sessions(sessions[:20]).splitlines()
        ctx.print(render.lines([" " * 5 + rows[0]] + [f"{n:>3}. {row}" for n, row in enumerate(rows[1:], 1)]
                               + ([f"… {len(sessions) - 20} older"] if len(sessions) > 20 else [])
                               + ["continue one with /resume N (its number) or /resume ID"]))
        return
    if arg.isdigit() and len(arg) <= 2:  # a number from the list above
        if not 1 <= int(arg) <= min(20, len(sessions)):
            ctx.print(_error_text(f"no session number {arg}; /resume lists them"))
            return
        path = sessions[int(arg) - 1].path
    else:
        path = find_session(ctx.workspace, arg)
    # With the session built around it, the SessionEnd and SessionStart hooks fire around it.
    warnings = await ctx.built.resume(path) if ctx.built is not None else ctx.agent.session.resume(path)
    if ctx.meter is not None:
        ctx.meter.reset()
    for w in warnings:
        ctx.print(_warning_text(w))
    ctx.print(render.resumed(path.stem, ctx.agent.session.history))


@command("memory", help="List the memories of this project and the global ones, or delete one",
         usage="[delete ID]", fallback=True)
def _memory(ctx: CommandContext, arg: str) -> None:
    # the memory tool's module: only /memory reads the store outside a turn
    from nanohermes.tools.memory import delete_entry, list_entries, project_root

    render = _render()

    words = arg.split()
    if words[:1] == ["delete"]:
        if len(words) != 2 or not words[1].isdigit():
            ctx.print(_error_text("usage: /memory delete ID (the number /memory shows)"))
            return
        found = delete_entry(int(words[1]))
        ctx.print(render.info(f"memory {words[1]} deleted") if found else _error_text(f"no memory {words[1]}"))
        return
    entries = list_entries(ctx.workspace)
    if not entries:
        ctx.print(render.info("no memories yet (the model saves them with memory_save)"))
        return
    project = project_root(ctx.workspace)
    ctx.print(render.lines([f"{m.id:>4}  {m.date}  {'global ' if m.scope == 'global' else 'project'}  {m.text}"
                            + (f"  (saved in {m.origin or 'an unrecorded project'})" if m.foreign(project) else "")
                            for m in entries] + ["delete one with /memory delete ID"]))


async def _run_tool(ctx: CommandContext, name: str, **args: Any) -> str:
    """Run one of the session's tools for the person (their own command: nothing is asked)."""
    # the tool contract loads with the agent, behind the first prompt
    from nanohermes.tools import Attempt, ToolContext, ToolError

    rt = ctx.agent.runtime
    tool = next((t for t in rt.tools if t.name == name), None)
    if tool is None:
        return f"{name} is not in this session's tools"
    tctx = ToolContext.of(rt, emit=lambda event: None)  # what it says is what the command prints
    try:
        out = await tool.run(tool.parse(args), tctx, Attempt())  # outside the gate: the person's own
    except ToolError as e:
        return f"ERROR: {e}"
    return out if isinstance(out, str) else out.text


@command("tasks", help="The background tasks with their state; kill one", usage="[kill ID]")
async def _tasks(ctx: CommandContext, arg: str) -> None:
    render = _render()

    words = arg.split()
    if words[:1] == ["kill"]:
        if len(words) != 2:
            ctx.print(_error_text("usage: /tasks kill ID (the id /tasks shows)"))
            return
        out = await _run_tool(ctx, "task_kill", task_id=words[1])
    else:
        out = await _run_tool(ctx, "task_list")
        if not out.startswith(("ERROR", "no background")):
            out += "\nkill one with /tasks kill ID"
    ctx.print(render.lines(out.splitlines()) if not out.startswith("ERROR") else _error_text(out))


def tool_results(agent: Agent) -> list[tuple[str, str, str]]:
    """(tool name, arguments, result) of every call in the history, oldest first: what
    /show numbers."""
    calls = {c.id: c for m in agent.session.history if m.role == "assistant" for c in m.tool_calls}
    out = []
    for m in agent.session.history:
        if m.role == "tool":
            call = calls.get(m.tool_call_id or "")
            out.append((call.name if call else "?", call.arguments if call else "", m.content or ""))
    return out


@command("show", help="A tool call's whole result (the rows show a preview); without N, the last calls",
         usage="[N]")
def _show(ctx: CommandContext, arg: str) -> None:
    render = _render()

    results = tool_results(ctx.agent)
    if not results:
        ctx.print(render.info("no tool calls yet"))
        return
    if not arg.strip():
        start = max(0, len(results) - 10)
        ctx.print(render.lines([f"{i + 1:>4}  {name} {args[:60]}" for i, (name, args, _) in
                                enumerate(results[start:], start)] + ["show one whole with /show N"]))
        return
    if not arg.strip().isdigit() or not 1 <= int(arg) <= len(results):
        ctx.print(_error_text(f"/show takes a call number from 1 to {len(results)} (/show lists them)"))
        return
    name, args, text = results[int(arg) - 1]
    m = re.match(r'<persisted-output path="([^"]+)">', text)
    if m is not None:  # the whole output was kept in a file: show that
        try:
            text = Path(m.group(1)).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            ctx.print(_warning_text(f"the saved output {m.group(1)} cannot be read ({e}); showing the preview"))
    ctx.print(render.lines([f"{name} {args}"]))
    ctx.print(render.fold(text, max(1, text.count("\n") + 1), wrap=True))


def _warning_text(text: str) -> Any:
    return Text(f"warning: {text}", style="yellow")
