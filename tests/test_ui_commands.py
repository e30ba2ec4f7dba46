"""The slash-command registry and the built-in commands, run in-process on a real Agent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from nanohermes.turn.agent import Agent
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.turn.meters import Meter
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.turn.session import Session
from nanohermes.testing import Reply, ScriptedLLM
from nanohermes.tools.files import ListDir, ReadFile
from nanohermes.ui.commands import REGISTRY, CommandContext, Registry
from nanohermes.ui.repl import split_typeahead


class FanOut:
    """Events to the recording UI and to a meter, as the REPL's UI does."""

    def __init__(self, ui: RecordingUI, meter: Meter) -> None:
        self.ui, self.meter = ui, meter

    def emit(self, event: Any) -> None:
        self.meter.on_event(event)
        self.ui.emit(event)

    async def confirm(self, request: Any) -> Any:
        return await self.ui.confirm(request)


def noop(ctx: CommandContext, arg: str) -> None:
    pass


@pytest.fixture
def reg() -> Registry:
    r = Registry()
    for name in ("compact", "context", "cost", "mode", "model", "help"):
        r.register(name, f"{name} help", noop)
    return r


@pytest.mark.parametrize("line, found, arg", [
    ("/mode plan", "mode", "plan"), ("/mod", None, ""), ("/h", "help", ""), ("/cos", "cost", ""),
    ("/context  extra words ", "context", "extra words"), ("/model", "model", ""),
])
def test_resolve_exact_then_unique_prefix(reg: Registry, line: str, found: str | None, arg: str) -> None:
    r = reg.resolve(line)
    assert (r.command.name if r.command else None) == found
    assert r.arg == arg


def test_ambiguous_prefix_lists_candidates(reg: Registry) -> None:
    assert reg.resolve("/co").error == "/co is ambiguous: /compact, /context, /cost"


def test_unknown_command_gets_a_suggestion(reg: Registry) -> None:
    assert reg.resolve("/hepl").error == "unknown command /hepl; did you mean /help?"
    assert reg.resolve("/zzz").error == "unknown command /zzz; /help lists the commands"
    assert reg.resolve("/").error == "type a command after /; /help lists them"


def test_register_rejects_duplicates_and_bad_names(reg: Registry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        reg.register("mode", "again", noop)
    with pytest.raises(ValueError, match="one word"):
        reg.register("two words", "x", noop)


def test_a_module_replaces_a_fallback_but_never_a_real_command(reg: Registry) -> None:
    def real(ctx: CommandContext, arg: str) -> None:
        pass

    reg.register("memory", "stand-in", noop, fallback=True)
    reg.register("memory", "the real one", real)
    assert reg.get("memory").handler is real  # type: ignore[union-attr]
    reg.register("memory", "another stand-in", noop, fallback=True)  # ignored: the real one stays
    assert reg.get("memory").help == "the real one"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="already registered"):
        reg.register("memory", "a second real one", real)


def test_decorator_registers_async_handlers(reg: Registry, tmp_path: Path) -> None:
    seen: list[str] = []

    @reg.command("resume", help="resume a session", usage="[id]")
    async def resume(ctx: CommandContext, arg: str) -> None:
        seen.append(arg)

    ctx = make_ctx(tmp_path, reg)[0]
    asyncio.run(reg.run("/res 42", ctx))
    assert seen == ["42"]
    assert reg.get("resume") is not None and reg.get("resume").usage == "[id]"  # type: ignore[union-attr]


def make_ctx(ws: Path, registry: Registry = REGISTRY, *, session: Session | None = None,
             **config: Any) -> tuple[CommandContext, Console]:
    console = Console(width=160, record=True, force_terminal=False, color_system=None)
    cfg = Config.from_dict(config)
    ui = RecordingUI()
    runtime = Runtime(tools=[ListDir(), ReadFile()], config=cfg, workspace=ws, ui=ui,
                      policy=Policy(disallowed_tools=tuple(cfg.disallowed_tools)), session=session or Session(workspace=ws))
    agent = Agent(llm=ScriptedLLM([Reply(text="hi")], model="m1"), runtime=runtime, ui=ui, system_prompt="sys")
    ctx = CommandContext(agent=agent, config=cfg, workspace=ws, print=console.print, registry=registry)
    return ctx, console


def run(ctx: CommandContext, line: str) -> None:
    asyncio.run(ctx.registry.run(line, ctx))


def test_tools_lists_every_tool_and_why_one_is_hidden(tmp_path: Path) -> None:
    ctx, console = make_ctx(tmp_path, disallowed_tools=["list_dir"])
    run(ctx, "/tools")
    out = console.export_text()
    assert "read_file   files   yes         yes        2,000 lines, 4 MiB, 2,000 chars a line, 20,000 chars   built-in   yes" in out
    assert "list_dir" in out and "hidden list_dir: is disallowed by config (disallowed_tools)" in out


def test_mode_shows_and_switches_the_runtime_mode(tmp_path: Path) -> None:
    ctx, console = make_ctx(tmp_path)
    run(ctx, "/mode")
    run(ctx, "/mode pl")
    run(ctx, "/mode nope")
    assert ctx.agent.runtime.policy.mode == "plan"
    out = console.export_text()
    assert "mode: default (modes: default, accept-edits, plan, debug, goal)" in out
    assert "mode: plan" in out
    assert "unknown mode 'nope'; choose one of: default, accept-edits, plan, debug, goal" in out


def test_model_switches_the_next_call(tmp_path: Path) -> None:
    ctx, _console = make_ctx(tmp_path)
    run(ctx, "/model other-model")
    asyncio.run(ctx.agent.ask("hello"))
    assert ctx.agent.llm.requests[0]["model"] == "other-model"  # type: ignore[attr-defined]


def test_clear_empties_history_and_context_counts_it(tmp_path: Path) -> None:
    ctx, console = make_ctx(tmp_path)
    asyncio.run(ctx.agent.ask("hello there"))
    run(ctx, "/context")
    run(ctx, "/clear")
    assert ctx.agent.session.history == []
    out = console.export_text()
    assert "system prompt          3 chars  ~       1 tokens" in out
    assert "history               13 chars  ~       4 tokens" in out  # "hello there" + "hi"
    assert "conversation cleared" in out


def metered_turn(ws: Path) -> tuple[CommandContext, Console]:
    """A priced context whose meter sees the events, as the REPL's does, after one turn."""
    ctx, console = make_ctx(ws, prices={"m1": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}})
    ctx.meter = Meter()
    ctx.agent.ui = ctx.agent.runtime.ui = FanOut(ctx.agent.ui, ctx.meter)  # type: ignore[assignment]
    asyncio.run(ctx.agent.ask("x"))
    return ctx, console


def test_cost_and_help(tmp_path: Path) -> None:
    ctx, console = metered_turn(tmp_path)
    run(ctx, "/cost")
    run(ctx, "/help")
    out = console.export_text()
    assert "this turn: 15 tokens (10 sent, 5 received), $0.0200" in out  # 10 * 1000 / 1e6 + 5 * 2000 / 1e6
    assert "session: 15 tokens (10 sent, 5 received), $0.0200" in out
    for name in ("/clear", "/context", "/cost", "/exit", "/help", "/mode [name]", "/model [name]", "/tools"):
        assert name in out


def test_clear_starts_the_meters_over(tmp_path: Path) -> None:
    ctx, console = metered_turn(tmp_path)
    run(ctx, "/clear")
    console.export_text()
    run(ctx, "/cost")
    out = console.export_text()
    assert "this turn: 0 tokens (0 sent, 0 received), $0.0000" in out
    assert "session: 0 tokens (0 sent, 0 received), $0.0000" in out


def test_permissions_and_mcp_reports(tmp_path: Path) -> None:
    ctx, console = make_ctx(tmp_path)
    run(ctx, "/permissions")
    run(ctx, "/mcp")
    out = console.export_text()
    assert "mode: default" in out and "no allow/ask/deny rules" in out
    assert "no MCP servers configured (config key mcp.servers)" in out


def test_compact_summarises_the_older_turns(tmp_path: Path) -> None:
    from nanohermes.turn.compact import Compactor

    ctx, console = make_ctx(tmp_path)
    agent = ctx.agent
    agent.llm.add(Reply(text="second answer"), Reply(text="Goal: test compaction."))  # type: ignore[attr-defined]
    agent.compactor = Compactor(agent.llm, agent.runtime.limits, agent.ui)
    asyncio.run(agent.ask("first question " * 20))
    asyncio.run(agent.ask("second question"))
    run(ctx, "/compact")
    assert "Goal: test compaction." in (agent.session.history[0].content or "")
    # One line says it: the compactor's notice (the command adds no second one).
    from nanohermes.common.events import Notice

    assert [n.text.split(" older")[0] for n in agent.ui.of(Notice)] == ["compacted 3"]  # type: ignore[attr-defined]
    assert console.export_text() == ""


def test_resume_lists_and_continues_a_saved_session(tmp_path: Path) -> None:
    from nanohermes.turn.session import Transcript

    first, _ = make_ctx(tmp_path, session=Session(Transcript.create(tmp_path, model="m1", mode="default")))
    asyncio.run(first.agent.ask("remember the number 7"))
    first.agent.session.transcript.close()
    sid = first.agent.session.transcript.id
    ctx, console = make_ctx(tmp_path)
    run(ctx, "/resume")
    listing = console.export_text()
    assert sid in listing
    assert "TURNS" in listing and "remember the number 7" in listing  # title, time and turns
    run(ctx, f"/resume {sid[:-2]}")
    assert [m.content for m in ctx.agent.session.history] == ["remember the number 7", "hi"]
    assert f"resumed {sid}: 2 messages" in console.export_text()


def test_memory_lists_and_deletes(tmp_path: Path) -> None:
    from nanohermes.tools.memory import MemoryStore, project_root

    MemoryStore().save("the tests run with pytest -q", project_root(tmp_path))
    ctx, console = make_ctx(tmp_path)
    run(ctx, "/memory")
    out = console.export_text()
    assert "the tests run with pytest -q" in out
    run(ctx, "/memory delete 1")
    run(ctx, "/memory delete 1")
    run(ctx, "/memory")
    out = console.export_text()
    assert "memory 1 deleted" in out and "no memory 1" in out and "no memories yet" in out


def test_exit_requests_exit(tmp_path: Path) -> None:
    ctx, _ = make_ctx(tmp_path)
    run(ctx, "/exi")  # "/ex" is ambiguous now: /exit, /export
    assert ctx.exit_requested


@pytest.mark.parametrize("raw, lines, partial", [
    ("hello\r", ["hello"], ""),
    ("one\rtwo\rthr", ["one", "two"], "thr"),
    ("helo\x7flo\r", ["hello"], ""),
    ("abc\x15xyz", [], "xyz"),
    ("git push now\x17later", [], "git push later"),
    ("\x1b[Aup\x1b[Barrow\r\r\r", ["uparrow"], ""),
    ("tab\there\x01", [], "tab\there"),
])
def test_typeahead_applies_line_editing(raw: str, lines: list[str], partial: str) -> None:
    assert split_typeahead(raw) == (lines, partial)
