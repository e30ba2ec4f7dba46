"""The interactive REPL: prompt-toolkit input, rich output, slash commands, approvals, Ctrl-C.

Between turns prompt-toolkit owns the terminal (history, multi-line input, completion of
/commands and @paths, the bottom toolbar). During a turn the agent runs as an asyncio task and
its events are drawn by `live.TurnView`; the terminal stops echoing so typed-ahead text waits
in the kernel's buffer and is sent when the turn ends. Ctrl-C during a turn cancels the task:
the agent answers every pending call with "interrupted by user", so the history stays valid,
and the prompt comes back.

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
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from nanohermes.budget import Limits
from nanohermes.controls import escape_controls, has_controls
from nanohermes.dirs import state_home
from nanohermes.modes import CYCLE, Mode
from nanohermes.ui.commands import GOAL_WARNING, CommandContext, Registry, load_commands

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from nanohermes.agent import Agent
    from nanohermes.assemble import Built
    from nanohermes.config import Config
    from nanohermes.messages import Usage
    from nanohermes.ui.live import ReplUI
    from nanohermes.ui.summaries import BatchCall
    from nanohermes.ui.trust import TrustQuestion

PATH_COMPLETIONS = 200  # entries offered when completing an @path
PASTE_LINES = 5  # a paste with more lines shows as one `[pasted N lines, S]` label (Ctrl-O expands it)
_ATTACH = re.compile(r"(?<!\S)@(\S+)")
_ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|O.|.)", re.S)
STARTING = " nanohermes · starting…"  # the toolbar until the agent is built
EXIT_TERMINATED = 143  # as the CLI's: ended by SIGTERM or SIGHUP
ESC_WAIT_SECS = 0.1  # an Esc with no key after it within this is the Esc key itself


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


# -- type-ahead ----------------------------------------------------------------------------

def split_typeahead(raw: str) -> tuple[list[str], str]:
    """Keys typed during a turn -> (finished lines to send, the unfinished rest).

    Applies the line editing the terminal would have done (backspace, Ctrl-U, Ctrl-W) and
    drops escape sequences (arrow keys) and other control characters.
    """
    raw = _ESCAPES.sub("", raw)
    lines: list[str] = []
    cur: list[str] = []
    for ch in raw:
        if ch in "\r\n":
            if "".join(cur).strip():
                lines.append("".join(cur))
            cur = []
        elif ch in "\x7f\b":
            if cur:
                cur.pop()
        elif ch == "\x15":  # Ctrl-U
            cur = []
        elif ch == "\x17":  # Ctrl-W
            while cur and cur[-1] == " ":
                cur.pop()
            while cur and cur[-1] != " ":
                cur.pop()
        elif ch == "\t" or ch >= " ":
            cur.append(ch)
    return lines, "".join(cur)


class Terminal:
    """The controlling terminal's input side during a turn (POSIX; a no-op elsewhere)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    @contextlib.contextmanager
    def turn_mode(self) -> Iterator[None]:
        """No echo and no line editing (type-ahead waits unseen in the kernel buffer), but
        Ctrl-C still raises SIGINT."""
        fd = self.fd
        try:
            import termios

            old = termios.tcgetattr(fd) if fd is not None else None
        except Exception:
            old = None
        if fd is None or old is None:
            yield
            return
        new = list(old)
        new[3] &= ~(termios.ECHO | termios.ICANON)
        new[3] |= termios.ISIG | termios.NOFLSH  # NOFLSH: Ctrl-C keeps what was typed ahead
        new[6] = list(old[6])
        new[6][termios.VMIN] = 1
        new[6][termios.VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, new)
        try:
            yield
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, old)

    def pending(self) -> int:
        """Bytes typed and not yet read."""
        if self.fd is None:
            return 0
        try:
            import fcntl
            import struct
            import termios

            count: int = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            return count
        except Exception:
            return 0

    def drain(self) -> str:
        n = self.pending()
        if n <= 0 or self.fd is None:
            return ""
        try:
            return os.read(self.fd, n).decode("utf-8", errors="replace")
        except OSError:
            return ""


class _Completer(Completer):
    """/commands at the start of the input; workspace paths after @."""

    def __init__(self, registry: Registry, workspace: Callable[[], Path]) -> None:
        self.registry = registry
        self.workspace = workspace  # known only once the REPL's start has run

    def get_completions(self, document: Document, complete_event: Any) -> Iterator[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before:
            for c in self.registry.all():
                if c.name.startswith(before[1:]):
                    # The usage (a custom command's argument-hint) shows next to the name.
                    yield Completion("/" + c.name, start_position=-len(before), display_meta=c.help,
                                     display=f"/{c.name} {c.usage}" if c.usage else None)
            return
        word = document.get_word_before_cursor(WORD=True)
        if not word.startswith("@"):
            return
        typed = word[1:]
        folder, _, prefix = typed.rpartition("/")
        base = self.workspace() / folder
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return
        shown = 0
        for e in entries:
            if not e.name.startswith(prefix) or (e.name.startswith(".") and not prefix.startswith(".")):
                continue
            rel = (folder + "/" if folder else "") + e.name + ("/" if e.is_dir() else "")
            yield Completion("@" + rel, start_position=-len(word), display=e.name + ("/" if e.is_dir() else ""))
            shown += 1
            if shown >= PATH_COMPLETIONS:
                return


# -- the REPL ------------------------------------------------------------------------------

class Repl:
    def __init__(self, start: Callable[[], Start], console: Console, registry: Registry, terminal: Terminal) -> None:
        self.start = start
        self.workspace = Path(".")  # the process's folder until start() names the workspace
        self.console = console
        self.registry = registry
        self.terminal = terminal
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
        self.typed_raw = ""
        self.pastes: dict[str, str] = {}  # label shown in the input -> the pasted text
        self.turn: asyncio.Task[Any] | None = None
        self.prompting = False
        self.terminated = False  # by SIGTERM or SIGHUP
        self._session: PromptSession[str] | None = None
        self._building: asyncio.Task[None] | None = None
        self._arrow = "› " if _can_encode("›") else "> "
        self.closing = False
        self._trust_done: asyncio.Event | None = None  # set when the trust question is answered
        self._trust_stopped = False  # Esc or Ctrl-C at it: the message on its way is held back
        self._trust_app: Any = None  # the question while it is on screen (SIGTERM ends it)
        self._watching = False  # keys are read as they come (during a turn)
        self._model_check: asyncio.Task[None] | None = None
        self._commands_seen: tuple[tuple[str, int, int], ...] | None = None  # the custom commands' files, as read
        self._esc: asyncio.TimerHandle | None = None  # an Esc just came: alone, unless a key follows
        self.guard_secs = Limits().approval_guard_secs  # how long a question takes no key (the config's, once read)

    # -- building the agent behind the first prompt ------------------------------------------
    def _construct(self, s: Start) -> tuple[Start, Built, ReplUI]:
        """The agent and its UI. Runs in a worker thread: these imports, the config models
        and the tool schemas are most of the start-up cost, and the prompt stays responsive
        meanwhile."""
        from nanohermes.assemble import build_agent
        from nanohermes.ui.approval import Approver
        from nanohermes.ui.live import ReplUI, TurnView
        from nanohermes.ui.summaries import LABEL_WIRE, BatchSummarizer

        self.workspace = s.workspace
        config = s.config
        if config.summary_model:
            self.state["view"] = "compact"
        view = TurnView(self.console, view=lambda: self.state.get("view", "full"), typed_ahead=self.typed_ahead,
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
            self._out(Text(f"model: {s.config.model} at {s.config.base_url}", style="dim"))
            self._out(Text(f"workspace: {s.workspace}", style="dim"))
            if s.resume is not None:
                from nanohermes.ui import render

                self._out(render.resumed(s.resume.stem, built.agent.session.history))
            for w in (*s.warnings, *built.warnings, *custom_warnings):
                self._out(Text(f"warning: {w}", style="yellow"))
            if built.agent.runtime.policy.mode == Mode.GOAL:
                self._out(Text(f"warning: {GOAL_WARNING}", style="yellow"))
            if (hint := no_key_hint(s.config)) is not None:
                self._out(Text(hint, style="yellow"))
            self.started = asyncio.get_running_loop().create_task(built.start())
            self._model_check = asyncio.get_running_loop().create_task(self._check_model(keyless=hint is not None))
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
        from nanohermes.ui import trust
        from nanohermes.ui.keyguard import KeyGuard

        if self.closing:
            return s
        session = self._session
        app = session.app if session is not None else None
        # A prompt whose answer is already set is ending by itself (its line was just sent).
        paused = self.prompting and session is not None and app is not None and app.is_running \
            and app.future is not None and not app.future.done()
        if paused:
            assert session is not None and app is not None
            self._trust_done = asyncio.Event()
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

    async def _check_model(self, keyless: bool = False) -> None:
        """The endpoint, asked for its models at start behind the prompt: one that cannot be
        reached or refuses the key (unless the missing key was just said) is said at once, and
        a model it does not list is named, not at the first answer."""
        from nanohermes.errors import AuthError, TimedOutError, UnreachableError
        from nanohermes.ui.commands import MODEL_LIST_SECS

        lister = getattr(self.agent.llm, "list_models", None) if self.agent is not None else None
        if self.agent is None or lister is None:
            return
        model = self.agent.llm.model
        try:
            models = list(await asyncio.wait_for(lister(), MODEL_LIST_SECS))
        except (UnreachableError, TimedOutError, AuthError) as e:
            if not (keyless and isinstance(e, AuthError)):
                from nanohermes.redact import redact

                self._out(Text(f"warning: {redact(e.message)}", style="yellow"))
                self._out(Text(f"hint: {e.hint}", style="dim"))
            return
        except TimeoutError:
            where = getattr(self.agent.llm, "base_url", "the endpoint")
            self._out(Text(f"warning: the model endpoint at {where} did not list its models within "
                           f"{MODEL_LIST_SECS:g} s; it may be unreachable or busy (`nanohermes doctor` checks it)",
                           style="yellow"))
            return
        except Exception:  # a list that cannot be had says nothing more here (doctor tells why)
            return
        if models and model not in models:
            import difflib

            close = difflib.get_close_matches(model, models, n=3)
            self._out(Text(f"warning: the endpoint does not list the model {model!r}"
                           + (f"; did you mean {', '.join(close)}?" if close else "")
                           + " (/model lists the ones it serves and switches)", style="yellow"))

    def refresh_commands(self) -> list[str]:
        """The custom commands, read again when one of their files was added, changed or
        removed since (so a new command needs no restart); returns the warnings of a read."""
        from nanohermes.custom_commands import signature
        from nanohermes.ui.extensions import install_custom_commands

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
            from prompt_toolkit.application import run_in_terminal

            run_in_terminal(lambda: self.console.print(renderable))
        else:
            self.console.print(renderable)

    async def choose(self, options: list[tuple[str, str, str]]) -> str:
        """A question of a command (an undo's conflict): Esc and Ctrl-C pick the first option;
        keys typed before it could be read wait in the next prompt."""
        from nanohermes.ui.approval import pick
        from nanohermes.ui.keyguard import KeyGuard

        guard = KeyGuard(self.guard_secs, self.keep_typed)
        try:
            return await pick(options, escape=options[0][0], interrupt=options[0][0], guard=guard)
        finally:
            self._keep_in_prompt()

    def keep_typed(self, keys: str) -> None:
        """Keys that reached a question before they could answer it: the person's text, kept
        with what they typed ahead (sent or offered when the turn ends)."""
        self.typed_raw += keys

    def _keep_in_prompt(self) -> None:
        """Outside a turn, what was kept goes into the next prompt, unsent."""
        if self.turn is None and self.typed_raw:
            lines, partial = split_typeahead(self.typed_raw)
            self.typed_raw = ""
            self.partial = "\n".join(x for x in (self.partial, *lines, partial) if x)

    def on_label(self, label: str, batch: list[BatchCall]) -> None:
        from nanohermes.ui import render

        if self.state.get("view") == "compact":
            self.print(render.batch_label(label or _fallback_label(batch), len(batch)))

    def interrupt(self) -> None:
        if self.turn is not None and not self.turn.done():
            self.turn.cancel()
            # Ctrl-C at an approval asked by a sub-agent: its own task stops too, before it
            # could carry on to its next model call.
            with contextlib.suppress(RuntimeError):
                current = asyncio.current_task()
                if current is not None and current is not self.turn:
                    current.cancel()

    def _show_error(self, err: BaseException) -> None:
        from nanohermes.errors import NanohermesError
        from nanohermes.redact import redact

        if isinstance(err, NanohermesError):
            self.print(Text(f"error: {redact(err.message)}", style="red"))
            if err.hint:
                self.print(Text(f"hint: {err.hint}", style="dim"))
        else:
            self.print(Text(f"internal error: {type(err).__name__}: {redact(str(err))}", style="red"))

    # -- input -----------------------------------------------------------------------------
    def _prompt_session(self) -> PromptSession[str]:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        kb = KeyBindings()

        @kb.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        from prompt_toolkit.keys import Keys

        @kb.add(Keys.BracketedPaste)
        def _paste(event: Any) -> None:
            # A long paste is one short label in the input; the text goes with the message.
            data = event.data.replace("\r\n", "\n").replace("\r", "\n")
            if data.count("\n") < PASTE_LINES:
                event.current_buffer.insert_text(data)
                return
            label = paste_label(data, len(self.pastes))
            self.pastes[label] = data
            event.current_buffer.insert_text(label)

        @kb.add("c-o")
        def _expand(event: Any) -> None:
            buf = event.current_buffer
            text = buf.text
            for label, data in self.pastes.items():
                text = text.replace(label, data)
            buf.text = text
            buf.cursor_position = len(text)

        @kb.add("c-c")
        def _cancel(event: Any) -> None:
            buf = event.app.current_buffer
            if buf.text:
                buf.reset()
            else:
                event.app.exit(exception=KeyboardInterrupt())

        @kb.add("s-tab")
        def _cycle(event: Any) -> None:
            # Only the attended modes: goal (nothing asked) is reached on purpose, by /mode
            # goal or --mode goal, never by a key pressed once too often.
            if self.agent is None:
                return
            runtime = self.agent.runtime
            mode = runtime.policy.mode
            i = CYCLE.index(mode) if mode in CYCLE else -1
            runtime.set_mode(CYCLE[(i + 1) % len(CYCLE)])
            event.app.invalidate()

        class _History(FileHistory):
            """The input history: 0600, and a pasted key is stored redacted."""

            def store_string(self, string: str) -> None:
                from nanohermes.redact import redact

                super().store_string(redact(string))

        try:
            from nanohermes.dirs import open_private

            path = state_home() / "history"
            open_private(path, "a").close()  # created 0600 before prompt-toolkit appends to it
            history: Any = _History(str(path))
        except OSError:
            history = InMemoryHistory()
        from prompt_toolkit.application import get_app
        from prompt_toolkit.filters import Condition

        # The /command menu opens as you type; @paths complete on Tab (a folder scan per key
        # would be noise).
        commands_typed = Condition(lambda: get_app().current_buffer.text.startswith("/"))
        return PromptSession(history=history, key_bindings=kb, completer=_Completer(self.registry, lambda: self.workspace),
                             complete_while_typing=commands_typed, bottom_toolbar=self._toolbar,
                             enable_history_search=False)

    def _toolbar(self) -> str:
        a = self.agent
        if a is None:
            return STARTING
        from nanohermes.meters import cost_of

        chars = sum(m.chars() for m in a.session.history)  # what the budget and /context count
        cost = cost_of(a.session.usage_by_model, a.runtime.config, a.llm.model)  # None: no price
        window = a.compactor.budget.report(a.session) if a.compactor is not None and a.compactor.budget else None
        last = self.ui.meter.last if self.ui is not None else None
        return toolbar(a.llm.model, a.runtime.policy.mode, chars, a.runtime.limits.session_budget_chars, a.session.usage,
                       cost, window, last)

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
    def expand_pastes(self, text: str) -> str:
        """The labels of long pastes replaced by what was pasted. A message that would then
        be over the per-message budget gets each paste saved to a file the model can read
        (in the session folder), with a note saying where, instead of its text."""
        used = [(label, data) for label, data in self.pastes.items() if label in text]
        self.pastes = {}
        full = text
        for label, data in used:
            full = full.replace(label, data)
        assert self.agent is not None
        rt = self.agent.runtime
        if len(full) <= rt.limits.aggregate_chars or not used:
            return full
        from nanohermes.redact import redact

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
                self.print(Text(f"the paste could not be saved ({e}); it is sent cut to the budget", style="yellow"))
                from nanohermes.budget import clamp

                text = text.replace(label, clamp(data, rt.limits.aggregate_chars // max(1, len(used))))
                continue
            note = (f"{label[:-1]}: over the per-message budget of {rt.limits.aggregate_chars:,} chars, "
                    f"saved to {path}; read it with read_file (offset/limit)]")
            text = text.replace(label, note)
            self.print(Text(f"pasted text saved to {path} (over the per-message budget); the model is told where",
                            style="yellow"))
        return text

    async def run_turn(self, text: str, *, attach: bool = True) -> None:
        """`attach`: expand @paths (a custom command's prompt comes with its own attachments)."""
        assert self.agent is not None and self.ui is not None
        if (hint := no_key_hint(self.agent.runtime.config)) is not None:
            self.print(Text(hint, style="yellow"))  # nothing is sent: it could only be refused
            return
        await self._started()
        text = self.expand_pastes(text)
        text = await self.attach_files(text) if attach else text
        loop = asyncio.get_running_loop()
        self.ui.view.start()
        self.turn = loop.create_task(self.agent.ask(text))
        sigint = True
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (NotImplementedError, RuntimeError, ValueError):
            sigint = False
        try:
            with self.terminal.turn_mode():
                self.watch_keys(True)
                try:
                    await asyncio.wait({self.turn})
                finally:
                    self.watch_keys(False)
                self.typed_raw += self.terminal.drain()
        finally:
            if sigint:
                loop.remove_signal_handler(signal.SIGINT)
            self.ui.view.stop()
        task, self.turn = self.turn, None
        if not task.cancelled() and (err := task.exception()) is not None:
            self._show_error(err)
        self._take_typeahead(interrupted=task.cancelled())

    def _take_typeahead(self, *, interrupted: bool) -> None:
        """What was typed during a turn: finished lines are sent next, the rest waits in the
        prompt; after an interrupt nothing is sent by itself, it all waits in the prompt."""
        lines, partial = split_typeahead(self.typed_raw)
        self.typed_raw = ""
        if interrupted:
            self.partial = "\n".join([*lines, partial]) if partial else "\n".join(lines)
        else:
            self.queue.extend(lines)
            self.partial = partial

    async def shell(self, command: str) -> None:
        """`!command`: the person's own command, run without asking (they typed it), shown,
        and added to the conversation so the model knows what they saw."""
        from nanohermes.tools.process import describe_exit, run_capped, shell_argv, command_env
        from nanohermes.budget import clamp
        from nanohermes.sandbox import confine
        from nanohermes.ui import render

        assert self.agent is not None
        if not command:
            self.print(Text("usage: !command (runs it in the workspace; the output joins the conversation)",
                            style="yellow"))
            return
        rt = self.agent.runtime
        lim = rt.limits
        task = asyncio.get_running_loop().create_task(run_capped(
            shell_argv(command), cwd=self.workspace, env=command_env(), limits=lim, timeout=lim.task_timeout_secs,
            out_cap=lim.run_command_capture_bytes, err_cap=lim.run_command_capture_bytes,
            confinement=confine("person", workspace=self.workspace, config=rt.config, limits=lim)))  # their own yes
        self.turn = task  # Ctrl-C stops it like a turn
        sigint = True
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
        except (NotImplementedError, RuntimeError, ValueError):
            sigint = False
        try:
            with self.terminal.turn_mode():
                self.watch_keys(True)
                try:
                    await asyncio.wait({task})
                finally:
                    self.watch_keys(False)
                self.typed_raw += self.terminal.drain()
        finally:
            self.turn = None
            if sigint:
                loop.remove_signal_handler(signal.SIGINT)
        self._take_typeahead(interrupted=task.cancelled())
        if task.cancelled():
            self.print(Text(f"⊘ !{command} · interrupted", style="yellow"))
            return
        fin = task.result()
        out = (fin.out.text() + fin.err.text()).rstrip("\n")
        code = describe_exit(fin.exit_code, fin.timed_out)
        mark, style = ("✓", "green") if code == "0" else ("✗", "red")
        self.print(Text.assemble((f"{mark} ", style), ("!", "bold"), render.one_line(command),
                                 (f" · exit {code}" if code != "0" else "", style)))
        if out:
            self.print(render.fold(out, max(1, out.count("\n") + 1)))
        body = clamp(out, lim.max_output) if out else "(no output)"
        from nanohermes.session import shell_context

        self.agent.add_context(shell_context(command, code, body))

    def before_approval(self) -> None:
        # Keys typed ahead must never answer the prompt: keep them for the next message.
        self.watch_keys(False)  # the prompt reads the keys now
        self.typed_raw += self.terminal.drain()
        if self.ui is not None:
            self.ui.view.pause()

    def after_approval(self) -> None:
        if self.ui is not None:
            self.ui.view.resume()
        if self.turn is not None and not self.turn.done():
            self.watch_keys(True)

    # -- keys during a turn ----------------------------------------------------------------
    def watch_keys(self, on: bool) -> None:
        """While a turn (or a `!command`) runs, keys are read as they come: Esc, alone or
        twice, interrupts it as Ctrl-C does; anything else is kept as typed-ahead text.
        An arrow key or Alt+key starts with Esc too, so a lone Esc is one that nothing
        follows within a moment."""
        fd = self.terminal.fd
        if fd is None:
            return
        loop = asyncio.get_running_loop()
        if on and not self._watching:
            try:
                loop.add_reader(fd, self._on_keys)
            except (NotImplementedError, RuntimeError, ValueError, OSError):
                return
            self._watching = True
        elif not on and self._watching:
            loop.remove_reader(fd)
            self._watching = False
            self._esc_wait(None)

    def _on_keys(self) -> None:
        assert self.terminal.fd is not None
        try:
            raw = os.read(self.terminal.fd, 4096)
        except OSError:
            raw = b""
        if not raw:  # the terminal is gone: nothing more to read (SIGHUP ends the session)
            self.watch_keys(False)
            return
        data = raw.decode("utf-8", errors="replace")
        self.typed_raw += data
        for ch in data:
            if self._esc is not None:  # the key after an Esc
                self._esc_wait(None)
                if ch == "\x1b":
                    self.interrupt()  # Esc Esc
                    return
            elif ch == "\x1b":
                self._esc_wait(asyncio.get_running_loop().call_later(ESC_WAIT_SECS, self._lone_esc))

    def _esc_wait(self, timer: asyncio.TimerHandle | None) -> None:
        if self._esc is not None:
            self._esc.cancel()
        self._esc = timer

    def _lone_esc(self) -> None:
        self._esc = None
        self.interrupt()

    def typed_ahead(self) -> int:
        """Characters typed during the turn, to be sent (or offered) when it ends."""
        lines, partial = split_typeahead(self.typed_raw)
        return sum(len(line) + 1 for line in lines) + len(partial) + self.terminal.pending()

    async def attach_files(self, text: str) -> str:
        """`@path` appends that file's content, bounded and noted exactly as read_file does."""
        from nanohermes.custom_commands import attach

        assert self.agent is not None
        text, notes = await attach(text, self.agent.runtime)
        for note in notes:
            self.print(Text(note, style="yellow" if "not attached" in note else "dim"))
        return text

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


DEFAULT_BASE_URL = "https://api.openai.com/v1"


def no_key_hint(config: Config) -> str | None:
    """How to set up an endpoint, when the default one would be asked without a key."""
    if config.resolved_api_key() or config.base_url.rstrip("/") != DEFAULT_BASE_URL:
        return None
    return (f"no API key for {DEFAULT_BASE_URL}: set {config.api_key_env} (or pass --api-key), or point "
            f"--base-url / `base_url` in ~/.config/nanohermes/config.json at another endpoint "
            f"(a local one such as http://localhost:11434/v1 needs no key); nothing is sent until then")


class _TrustPause(Exception):
    """Ends the prompt for a moment so the folder-trust question can use the terminal."""


def paste_label(data: str, index: int = 0) -> str:
    """`[pasted 4,000 lines, 224 KB]`: what a long paste shows in the input."""
    lines = data.count("\n") + (0 if data.endswith("\n") else 1)
    size = len(data.encode("utf-8"))
    shown = f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{max(1, round(size / 1024)):,} KB"
    return f"[pasted {lines:,} lines, {shown}{f' #{index + 1}' if index else ''}]"


def toolbar(model: str, mode: str, history_chars: int, budget_chars: int, usage: Usage,
            cost: float | None = None, window: dict[str, Any] | None = None, last: Usage | None = None) -> str:
    """The bottom toolbar once the agent is built: model, mode, what the context holds now as
    a share of the model's window (and where the window came from; without one, of the
    session budget in chars, with the tokens the last request held when the endpoint reports
    them), every token sent and received over the session, and its cost (only when `prices`
    has the model). Plain text: prompt-toolkit draws it. docs/repl.md says what each counts."""
    tokens = f" · session {'~' if usage.estimated else ''}{usage.total_tokens:,} tokens" if usage.total_tokens else ""
    dollars = f" · ${cost:.4f}" if cost is not None else ""
    if window is not None and window["session_budget_chars_override"] is None:
        from nanohermes.window import short_tokens

        source = re.split(r"\W", str(window["source"]), maxsplit=1)[0].replace("known", "family")
        used = f"context {round(100 * window['used_share'])}% of {short_tokens(window['tokens'])} window ({source})"
    else:
        share = 100 * history_chars / max(1, budget_chars)
        pct = "<1%" if 0 < share < 0.5 else f"{round(share)}%"  # as /context rounds it
        held = f" (last request {_size(last.total_tokens)} tokens)" if last is not None and last.total_tokens \
            and not last.estimated else ""
        used = f"context {pct} of {_size(budget_chars)} chars{held}"
    return f" {model} · mode: {mode} · {used}{tokens}{dollars}"


def _size(n: int) -> str:
    """512, 1.2k, 12k, 1.5M: a count the toolbar can show in a few characters."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def _can_encode(text: str) -> bool:
    try:
        text.encode(sys.stdout.encoding or "ascii")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


# How the built-in label counts calls of a few tools: (verb, noun) -> "read 3 files".
_LABEL_WORDS = {"read_file": ("read", "file"), "write_file": ("wrote", "file"), "edit_file": ("edited", "file"),
                "list_dir": ("listed", "folder"), "web_fetch": ("fetched", "page")}


def _fallback_label(batch: list[BatchCall]) -> str:
    """`read 3 files, grep ×2`: the calls of a batch counted by tool, in their order."""
    counts: dict[str, int] = {}
    for c in batch:
        counts[c.name] = counts.get(c.name, 0) + 1
    parts = []
    for name, k in counts.items():
        if name in _LABEL_WORDS:
            verb, noun = _LABEL_WORDS[name]
            parts.append(f"{verb} {k} {noun}{'s' if k != 1 else ''}" if k > 1 else f"{verb} {noun}")
        else:
            parts.append(name + (f" ×{k}" if k > 1 else ""))
    return ", ".join(parts)


def _warm_imports() -> None:
    def work() -> None:
        with contextlib.suppress(Exception):
            from nanohermes.llm.http import import_httpx

            import_httpx()  # what the first model call needs
            import rich.markdown  # noqa: F401

    threading.Thread(target=work, name="warm-imports", daemon=True).start()


class InertConsole(Console):
    """The REPL's console: the text of everything it draws (an answer, a warning naming a
    project's file, an error quoting a server) shows control characters escaped
    (`controls.escape_controls`), whatever renderable carries it: rich passes ESC through. Text
    is escaped before it is laid out (so a line wraps as it is shown); a segment some other
    renderable yields is escaped as it comes. Rich's own control segments (the live display's
    cursor moves) are kept, and its colours are added after this, when the segments are written."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterator[Segment]:
        if isinstance(renderable, Text) and has_controls(renderable.plain):
            renderable = self._inert(renderable)
        elif isinstance(renderable, str) and has_controls(renderable):
            renderable = escape_controls(renderable)
        for segment in super().render(renderable, options):
            if segment.control is None and has_controls(segment.text):
                yield Segment(escape_controls(segment.text), segment.style)
            else:
                yield segment

    def _inert(self, text: Text) -> Text:
        """`text` with its control characters escaped, each piece keeping its style."""
        out = Text(justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap, end=text.end,
                   tab_size=text.tab_size)
        for piece in text.render(self, end=""):
            out.append(escape_controls(piece.text), piece.style)
        return out


def make_console() -> Console:
    # A terminal that cannot encode a character shows "?" instead of crashing.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a text file's, not every stream's
        with contextlib.suppress(Exception):
            if reconfigure is not None:
                reconfigure(errors="replace")
    return InertConsole(highlight=False)


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
