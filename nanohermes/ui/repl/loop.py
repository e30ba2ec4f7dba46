"""The REPL's loop: reading what the person sends and running it (a message, a /command, a
`!command`), the agent built behind the first prompt, the folder-trust question, and closing.

Start-up draws the prompt first. Right after that first draw a worker thread runs `start`
(the CLI's flag parsing, which imports pydantic, and the config) and builds the agent
(the core, the tools and their schemas); MCP servers start behind the prompt and the HTTP
client is imported in a background thread. Input typed meanwhile waits for them; an error
there (a bad flag or config) ends the REPL and is reported like any run-ending error. When
the project's config asks for trust keys, the folder-trust question comes between reading
the config and building the agent: the prompt steps aside for it and comes back with what
was typed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit.application import run_in_terminal
from rich.console import Console, RenderableType
from rich.text import Text

from nanohermes.common.budget import Limits
from nanohermes.common.errors import NanohermesError
from nanohermes.common.modes import CYCLE, Mode
from nanohermes.guard.redact import redact
from nanohermes.ui.commands import CommandContext, Registry, load_commands
from nanohermes.ui.extensions import install_custom_commands
from nanohermes.ui.keyguard import KeyGuard
from nanohermes.ui.repl.console import can_encode, make_console
from nanohermes.ui.repl.keys import Foreground, Terminal
from nanohermes.ui.repl.prompt import prompt_session
from nanohermes.ui.repl.turn import attach_files, expand_pastes, shell_report, shell_run
from nanohermes.ui.repl.welcome import STARTING, agent_toolbar, check_model, fallback_label, no_key_hint, welcome

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from nanohermes.assemble import Built
    from nanohermes.config import Config
    from nanohermes.turn.agent import Agent
    from nanohermes.ui.live import ReplUI
    from nanohermes.ui.summaries import BatchCall
    from nanohermes.ui.trust import TrustQuestion

EXIT_TERMINATED = 143  # as the CLI's: ended by SIGTERM or SIGHUP


@dataclass(frozen=True)
class Start:
    """What a REPL session runs on: made by the `start` callable given to `run_repl`."""

    config: Config
    workspace: Path
    save_session: bool = True
    resume: Path | None = None  # a saved transcript to continue
    warnings: tuple[str, ...] = ()  # from loading the config, shown once the prompt is up
    trust: TrustQuestion | None = None  # the project asks for trust keys: asked before the agent is built
    config_files: tuple[Path, ...] = ()  # the files the config was read from (/status names them)


class Repl:
    def __init__(self, start: Callable[[], Start], console: Console, registry: Registry, terminal: Terminal) -> None:
        self.start = start
        self.workspace = Path(".")  # the process's folder until start() names the workspace
        self.console = console
        self.registry = registry
        self.fg = Foreground(terminal)  # the turn or `!command` running, and what is typed meanwhile
        self.state: dict[str, Any] = {"view": "full"}
        # Set by build(), right after the first prompt is drawn.
        self.agent: Agent | None = None
        self.built: Built | None = None
        self.ui: ReplUI | None = None
        self.ctx: CommandContext | None = None
        self.ready = asyncio.Event()
        self.build_error: BaseException | None = None
        self.started: asyncio.Task[None] | None = None  # the session start (MCP servers)
        self.queue: list[str] = []  # typed-ahead lines waiting to be sent
        self.partial = ""  # typed-ahead text without Enter: the next prompt starts with it
        self.pastes: dict[str, str] = {}  # label shown in the input -> the pasted text
        self.prompting = False
        self.terminated = False  # by SIGTERM or SIGHUP
        self._session: PromptSession[str] | None = None
        self._building: asyncio.Task[None] | None = None
        self._arrow = "› " if can_encode("›") else "> "
        self.closing = False
        self._trust_done: asyncio.Event | None = None  # set when the trust question is answered
        self._trust_stopped = False  # Esc or Ctrl-C at it: the message on its way is held back
        self._trust_app: Any = None  # the question while it is on screen (SIGTERM ends it)
        self._model_check: asyncio.Task[None] | None = None
        self._commands_seen: tuple[tuple[str, int, int], ...] | None = None  # the custom commands' files, as read
        self.guard_secs = Limits().approval_guard_secs  # how long a question takes no key (the config's, once read)

    # -- building the agent behind the first prompt ------------------------------------------
    def _construct(self, s: Start) -> tuple[Start, Built, ReplUI]:
        """The agent and its UI. Runs in a worker thread: these imports, the config models
        and the tool schemas are most of the start-up cost, and the prompt stays responsive
        meanwhile."""
        # the question's modules load behind the first prompt
        from nanohermes.assemble import build_agent
        from nanohermes.ui.approval import Approver
        from nanohermes.ui.live import ReplUI, TurnView
        from nanohermes.ui.summaries import LABEL_WIRE, BatchSummarizer

        self.workspace = s.workspace
        config = s.config
        if config.summary_model:
            self.state["view"] = "compact"
        view = TurnView(self.console, view=lambda: self.state.get("view", "full"), typed_ahead=self.fg.typed_ahead,
                        thinking=lambda: bool(self.state.get("thinking")))
        view.out = self._out
        self.guard_secs = config.build_limits().approval_guard_secs
        approver = Approver(self.console, before=self.before_approval, after=self.after_approval,
                            on_interrupt=self.interrupt, guard_secs=self.guard_secs, keep=self.keep_typed)
        ui = ReplUI(view=view, approver=approver)
        built = build_agent(config, s.workspace, ui, save_session=s.save_session, resume=s.resume,
                            asks=True, idle_between_turns=True)
        # Without summary_model the batches still get a label in the compact view: the built-in one.
        labeller = built.make_llm(config.summary_model, **LABEL_WIRE) if config.summary_model else None
        ui.summarizer = BatchSummarizer(llm=labeller, on_label=self.on_label, on_usage=built.agent.count_usage)
        return s, built, ui

    async def build(self) -> None:
        """Build the agent behind the first prompt, then start its session (MCP servers)."""
        try:
            loop = asyncio.get_running_loop()
            s = await loop.run_in_executor(None, self.start)
            if s.trust is not None:
                s = await self._ask_trust(s, s.trust)
            s, built, ui = await loop.run_in_executor(None, self._construct, s)
            self.agent, self.built, self.ui = built.agent, built, ui
            self.ctx = CommandContext(agent=built.agent, config=s.config, workspace=s.workspace,
                                      print=self.print, registry=self.registry, state=self.state, built=built,
                                      meter=ui.meter, submit=lambda text: self.run_turn(text, attach=False),
                                      choose=self.choose)
            self.state["config_files"] = s.config_files
            custom_warnings = self.refresh_commands()
            for line in welcome(s.config, s.workspace, s.resume, built, (*s.warnings, *built.warnings,
                                                                        *custom_warnings)):
                self._out(line)
            keyless = no_key_hint(s.config) is not None
            self.started = asyncio.get_running_loop().create_task(built.start())
            self._model_check = asyncio.get_running_loop().create_task(check_model(built.agent, self._out, keyless))
            _warm_imports()
        except Exception as e:  # shown as the run-ending error it is, once the prompt is gone
            self.build_error = e
            if self.prompting and self._session is not None and self._session.app.is_running:
                self.partial = self._session.default_buffer.text  # what was typed: kept (`keep_unsent`)
                self._session.app.exit(exception=e)
        finally:
            self.ready.set()
            if self.prompting and self._session is not None:
                self._session.app.invalidate()  # the toolbar can show the real numbers now

    async def _ask_trust(self, s: Start, q: TrustQuestion) -> Start:
        """The folder-trust question, before the agent is built with the project's keys. The
        first prompt is already up: it steps aside (keeping what was typed), the question
        is answered, and it comes back."""
        # the trust question (rich's layout) only when a project asks for trusted keys
        from nanohermes.ui import trust
        if self.closing:
            return s
        session = self._session
        app = session.app if session is not None else None
        self._trust_done = asyncio.Event()  # a prompt that starts meanwhile waits for the answer
        # A prompt whose answer is already set is ending by itself (its line was just sent).
        paused = self.prompting and session is not None and app is not None and app.is_running \
            and app.future is not None and not app.future.done()
        if paused:
            assert session is not None and app is not None
            self.partial = session.default_buffer.text
            app.exit(exception=_TrustPause())
        while self.prompting:  # let the prompt finish leaving the screen
            await asyncio.sleep(0.01)
        try:
            trust.show(self.console, q)
            self.guard_secs = s.config.build_limits().approval_guard_secs
            answer = await trust.choose(started=self._hold_trust_app,
                                        guard=KeyGuard(self.guard_secs, self.keep_typed))
            if self.terminated:
                answer = "interrupted"
            # Esc or Ctrl-C is the safe answer, and a stop: a message already sent (or given on
            # the command line) waits in the prompt instead of going to the model.
            self._trust_stopped = answer == "interrupted" and not paused and not self.terminated
            label = {"trust": "✓ trusted this folder", "without": "continuing without them",
                     "interrupted": "continuing without them (asked again next time)"}[answer]
            if self._trust_stopped:
                label += "; nothing was sent: your message waits at the prompt"
            self.console.print(Text(label, style="green" if answer == "trust" else "yellow"))
            fresh = await asyncio.get_running_loop().run_in_executor(None, trust.settle, q, answer)
            return fresh if fresh is not None else s
        finally:
            self._trust_app = None
            self._keep_in_prompt()
            if self._trust_done is not None:
                self._trust_done.set()

    def refresh_commands(self) -> list[str]:
        """The custom commands, read again when one of their files was added, changed or
        removed since (so a new command needs no restart); returns the warnings of a read."""
        # the command files' reader loads behind the first prompt
        from nanohermes.extensions.custom_commands import signature
        now = signature(self.workspace)
        if now == self._commands_seen:
            return []
        self._commands_seen = now
        self.registry.drop_custom()
        return install_custom_commands(self.registry, self.workspace,
                                       self.agent.runtime.own_reader if self.agent is not None else None)

    def _hold_trust_app(self, app: Any) -> None:
        self._trust_app = app

    async def _ready(self) -> None:
        if self._building is None:  # a first message given on the command line: no prompt was drawn
            self._building = asyncio.get_running_loop().create_task(self.build())
        await self.ready.wait()
        if self.build_error is not None:
            raise self.build_error

    async def _started(self) -> None:
        """MCP servers finish starting (and their tools join the pool) before the first turn."""
        if self.started is None:
            return
        task, self.started = self.started, None
        await asyncio.wait({task})
        if not task.cancelled() and (err := task.exception()) is not None:
            self._show_error(err)

    # -- output ----------------------------------------------------------------------------
    def print(self, renderable: Any) -> None:
        if isinstance(renderable, str):
            renderable = Text(renderable)  # plain text from a command, never read as markup
        if self.ui is not None:
            self.ui.view.print(renderable)
        else:
            self._out(renderable)

    def _out(self, renderable: RenderableType) -> None:
        """Output can arrive while the prompt is showing (a batch label, an MCP server's
        warning): then it is printed above the prompt, which is redrawn below it."""
        if self.prompting:
            run_in_terminal(lambda: self.console.print(renderable))
        else:
            self.console.print(renderable)

    async def choose(self, options: list[tuple[str, str, str]]) -> str:
        """A question of a command (an undo's conflict): Esc and Ctrl-C pick the first option;
        keys typed before it could be read wait in the next prompt."""
        # the question's modules load behind the first prompt
        from nanohermes.ui.approval import pick
        guard = KeyGuard(self.guard_secs, self.keep_typed)
        try:
            return await pick(options, escape=options[0][0], interrupt=options[0][0], guard=guard)
        finally:
            self._keep_in_prompt()

    def keep_typed(self, keys: str) -> None:
        """Keys that reached a question before they could answer it: the person's text, kept
        with what they typed ahead (sent or offered when the turn ends)."""
        self.fg.typed_raw += keys

    def _keep_in_prompt(self) -> None:
        """Outside a turn, what was kept goes into the next prompt, unsent."""
        if self.fg.task is None and self.fg.typed_raw:
            lines, partial = self.fg.take()
            self.partial = "\n".join(x for x in (self.partial, *lines, partial) if x)

    def on_label(self, label: str, batch: list[BatchCall]) -> None:
        # the renderer (rich's markdown and syntax, about 60 ms) loads after the first prompt is drawn
        from nanohermes.ui import render

        if self.state.get("view") == "compact":
            self.print(render.batch_label(label or fallback_label(batch), len(batch)))

    def interrupt(self) -> None:
        self.fg.interrupt()

    def _show_error(self, err: BaseException) -> None:
        if isinstance(err, NanohermesError):
            self.print(Text(f"error: {redact(err.message)}", style="red"))
            if err.hint:
                self.print(Text(f"hint: {err.hint}", style="dim"))
        else:
            self.print(Text(f"internal error: {type(err).__name__}: {redact(str(err))}", style="red"))

    # -- input -----------------------------------------------------------------------------
    def _prompt_session(self) -> PromptSession[str]:
        return prompt_session(self.registry, lambda: self.workspace, lambda: self.pastes, self._cycle_mode,
                              self._toolbar)

    def _cycle_mode(self) -> bool:
        """Shift+Tab: the next of the attended modes; goal (nothing asked) is reached on
        purpose, by /mode goal or --mode goal, never by a key pressed once too often."""
        if self.agent is None:
            return False
        runtime = self.agent.runtime
        mode = runtime.policy.mode
        i = CYCLE.index(mode) if mode in CYCLE else -1
        runtime.set_mode(CYCLE[(i + 1) % len(CYCLE)])
        return True

    def _toolbar(self) -> str:
        if self.agent is None:
            return STARTING
        return agent_toolbar(self.agent, self.ui.meter.last if self.ui is not None else None)

    def _message(self) -> Any:
        mode = self.agent.runtime.policy.mode if self.agent is not None else Mode.DEFAULT
        prefix = [("ansiyellow", f"{mode} ")] if mode != Mode.DEFAULT else []
        return [*prefix, ("bold", self._arrow)]

    async def read(self) -> str | None:
        """The next message or command; None at Ctrl-D or a second Ctrl-C on an empty prompt."""
        if self.queue:
            await self._ready()  # the welcome (model, workspace, warnings) before the first message
            if not self._hold_back():
                line = self.queue.pop(0)
                self.print(Text(self._arrow + line, style="dim"))
                return line
        if self.ctx is not None:  # a command file added meanwhile completes at this prompt
            for w in self.refresh_commands():
                self.print(Text(f"warning: {w}", style="yellow"))
        if self._session is None:
            self._session = self._prompt_session()
        ctrl_c = 0
        while True:
            await self._keyboard_free()
            self.prompting = True
            paused = None
            try:
                default, self.partial = self.partial, ""
                return await self._session.prompt_async(self._message, default=default, pre_run=self._pre_run)
            except EOFError:
                return None
            except KeyboardInterrupt:
                ctrl_c += 1
                if ctrl_c >= 2:
                    return None
                self.console.print(Text("press Ctrl-C again or Ctrl-D to exit", style="dim"))
            except _TrustPause:  # the folder-trust question needs the terminal
                paused = self._trust_done
            finally:
                self.prompting = False
            if paused is not None:
                await paused.wait()
                if self.terminated:
                    return None

    async def _keyboard_free(self) -> None:
        """A question already on the screen (the folder's trust, a background sub-agent's
        approval) keeps the keys until it is answered: a prompt started beside it would take
        every key, as the application started last does, and the question could not be
        answered. A question that comes while the prompt is up takes the keys from it."""
        if self._trust_done is not None:
            await self._trust_done.wait()
        if self.ui is not None:
            await self.ui.approver.settled()

    def _hold_back(self, line: str = "") -> bool:
        """After Esc or Ctrl-C at the folder-trust question: `line` (the message that was on
        its way) and the rest typed ahead go back into the prompt, unsent. False otherwise."""
        if not self._trust_stopped:
            return False
        self._trust_stopped = False
        self.partial = "\n".join(x for x in (line, *self.queue, self.partial) if x)
        self.queue.clear()
        return True

    def _pre_run(self) -> None:
        # prompt-toolkit draws the prompt right after pre_run; the task's first step (which
        # hands the build to a thread) runs after that draw.
        if self._building is None:
            self._building = asyncio.get_running_loop().create_task(self.build())

    # -- a turn ----------------------------------------------------------------------------
    async def run_turn(self, text: str, *, attach: bool = True) -> None:
        """`attach`: expand @paths (a custom command's prompt comes with its own attachments)."""
        assert self.agent is not None and self.ui is not None
        if (hint := no_key_hint(self.agent.runtime.config)) is not None:
            self.print(Text(hint, style="yellow"))  # nothing is sent: it could only be refused
            return
        await self._started()
        pastes, self.pastes = self.pastes, {}
        text = expand_pastes(text, pastes, self.agent.runtime, self.print)
        text = await attach_files(text, self.agent.runtime, self.print) if attach else text
        self.ui.view.start()
        task = asyncio.get_running_loop().create_task(self.agent.ask(text))
        try:
            await self.fg.run(task)
        finally:
            self.ui.view.stop()
        if not task.cancelled() and (err := task.exception()) is not None:
            self._show_error(err)
        self._take_typeahead(interrupted=task.cancelled())

    def _take_typeahead(self, *, interrupted: bool) -> None:
        """What was typed during a turn: finished lines are sent next, the rest waits in the
        prompt; after an interrupt nothing is sent by itself, it all waits in the prompt."""
        lines, partial = self.fg.take()
        if interrupted:
            self.partial = "\n".join([*lines, partial]) if partial else "\n".join(lines)
        else:
            self.queue.extend(lines)
            self.partial = partial

    async def shell(self, command: str) -> None:
        """`!command`: the person's own command, run without asking (they typed it), shown,
        and added to the conversation so the model knows what they saw."""
        assert self.agent is not None
        if not command:
            self.print(Text("usage: !command (runs it in the workspace; the output joins the conversation)",
                            style="yellow"))
            return
        limits = self.agent.runtime.limits
        task = asyncio.get_running_loop().create_task(shell_run(command, self.workspace, self.agent.runtime.config,
                                                                limits))
        await self.fg.run(task)  # Ctrl-C stops it like a turn
        self._take_typeahead(interrupted=task.cancelled())
        if task.cancelled():
            self.print(Text(f"⊘ !{command} · interrupted", style="yellow"))
            return
        shown, context = shell_report(command, task.result(), limits)
        for renderable in shown:
            self.print(renderable)
        self.agent.add_context(context)

    def before_approval(self) -> None:
        # Keys typed ahead must never answer the prompt: keep them for the next message.
        self.fg.pause()
        if self.ui is not None:
            self.ui.view.pause()

    def after_approval(self) -> None:
        if self.ui is not None:
            self.ui.view.resume()
        self.fg.resume()

    # -- the loop --------------------------------------------------------------------------
    async def run(self) -> int:
        """Read and run until Ctrl-D, /exit or SIGTERM/SIGHUP; returns the exit code."""
        self.console.print(Text.assemble(("nanohermes", "bold"), (" · /help for commands", "dim")))
        try:
            while not self.terminated:
                line = await self.read()
                if line is None or self.terminated:
                    break
                if not line.strip():
                    continue
                await self._ready()
                if self.terminated:
                    break
                if self._hold_back(line):
                    continue
                assert self.ctx is not None
                if line.lstrip().startswith("!"):
                    try:
                        await self.shell(line.lstrip()[1:].strip())
                    except Exception as e:  # a broken command must not end the session
                        self._show_error(e)
                    continue
                if line.lstrip().startswith("/"):
                    try:
                        for w in self.refresh_commands():
                            self.print(Text(f"warning: {w}", style="yellow"))
                        await self.registry.run(line.strip(), self.ctx)
                    except Exception as e:  # a broken command must not end the session
                        self._show_error(e)
                    self.partial = self.state.pop("prefill", None) or self.partial  # e.g. /rewind's prompt
                    if self.ctx.exit_requested:
                        break
                    continue
                await self.run_turn(line)
        finally:
            await self.close()
            self.keep_unsent()
        return EXIT_TERMINATED if self.terminated else 0

    def keep_unsent(self) -> None:
        """The REPL ends on an error before the agent could be built (a bad config): what the
        person typed meanwhile is not lost. It is printed back and put in the input history
        (Up brings it back at the next start)."""
        if self.build_error is None:
            return
        for text in [t for t in (*self.queue, self.partial) if t.strip()]:
            kept = ""
            if self._session is not None:  # typed at the prompt (not given on the command line)
                with contextlib.suppress(Exception):  # a history that cannot be written: printed all the same
                    self._session.history.append_string(text)
                    kept = " (Up brings it back at the next start)"
            self.console.print(Text.assemble((f"not sent{kept}: ", "yellow"), text))

    def terminate(self) -> None:
        """SIGTERM or SIGHUP (the terminal was closed): end the session as /exit does, so its
        background tasks, sub-agents and MCP servers are closed, from wherever the REPL is."""
        self.terminated = True
        self.interrupt()
        app = self._trust_app
        if app is not None and app.is_running and app.future is not None and not app.future.done():
            app.exit(result="interrupted")
        if self.prompting and self._session is not None and self._session.app.is_running:
            self._session.app.exit(exception=EOFError())

    async def close(self) -> None:
        self.closing = True  # no trust question once the REPL is on its way out
        if self._building is not None:
            await asyncio.wait({self._building})
        if self._model_check is not None:
            self._model_check.cancel()
            await asyncio.wait({self._model_check})
        if self.ui is not None and self.ui.summarizer is not None:
            await self.ui.summarizer.aclose()
        if self.built is not None:
            if self.started is not None:
                self.started.cancel()
                await self._started()
            await self.built.aclose()
        if self.agent is not None and (path := self.agent.session.path) is not None:
            self.agent.session.close()
            if path.exists():  # something was said: the way back
                with contextlib.suppress(Exception):  # the terminal may be gone (SIGHUP)
                    self.console.print(Text(f"session {path.stem} · resume with: nanohermes --resume {path.stem}",
                                            style="dim"))


class _TrustPause(Exception):
    """Ends the prompt for a moment so the folder-trust question can use the terminal."""


def _warm_imports() -> None:
    def work() -> None:
        with contextlib.suppress(Exception):
            # the warm-up thread's whole point: import what the first turn needs
            from nanohermes.llm.http import import_httpx

            import_httpx()  # what the first model call needs
            import rich.markdown  # noqa: F401

    threading.Thread(target=work, name="warm-imports", daemon=True).start()


def run_repl(start: Callable[[], Start], first: str | None = None) -> int:
    """Run the REPL until Ctrl-D or /exit; returns the exit code. `start` runs in a worker
    thread once the first prompt is drawn; a run-ending error from it or from building the
    agent (a bad flag or config) is raised for the CLI to report."""
    console = make_console()
    terminal = Terminal(sys.stdin.fileno() if sys.stdin.isatty() else None)
    loop = asyncio.new_event_loop()
    # Our own pool for blocking tool bodies, so exit can abandon a thread stuck in one.
    executor = ThreadPoolExecutor(thread_name_prefix="tool")
    loop.set_default_executor(executor)
    try:
        repl = Repl(start, console, load_commands(), terminal)
        if first is not None and first.strip():  # `nanohermes "fix it"`: sent as the first message
            repl.queue.append(first)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, repl.terminate)
        return loop.run_until_complete(repl.run())
    finally:
        _close_loop(loop, executor)


def _close_loop(loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor) -> None:
    """Like asyncio.run's cleanup, but a tool thread stuck in a blocking call cannot hang
    exit: the pool is shut down without waiting (the CLI exits past such a thread)."""
    try:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        loop.close()
