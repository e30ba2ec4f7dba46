"""The interactive approval prompt: `await approver.confirm(request) -> ApprovalReply`.

Shows what would run (the exact command, or the coloured diff of an edit) and why it is
asked, then offers: yes once (y), always for this session (a, remembered as the rule the
request names), always in this project (p, saved to the project config), no (n, then an
optional note passed to the model). A request without a rule offers only yes and no. Arrow keys move
the highlight and Enter takes it. Esc is no, and stops the turn: the person is back at the
prompt to say what to do instead (as in Claude Code and Codex); Ctrl-C does the same, and so
do both at the note after an `n` (what was typed of it waits in the next prompt). The turn
stopped is the one that asked: a sub-agent's question stops that sub-agent's run (the reply's
`stop`), even one running in the background while the person is at the prompt, and whatever
runs in the foreground stops too, as Esc always stops it. Requests
are answered one at a time, even when parallel calls ask together.

A question is answered only by keys typed after it appeared (`keyguard.KeyGuard`): a person
typing their next message when the box comes up must not answer it (the `a` of "add" would be
"always"). Esc, Ctrl-C and Ctrl-D are never held back: they only stop.

An MCP server's question (`await approver.elicit(request)`) is asked the same way, one at a
time with the approvals: answer or decline (a one-key choice, guarded as above; Esc declines
and stops the turn), then its form field by field (an answer that does not fit is asked
again; Esc declines it, Ctrl-C or Ctrl-D cancels it, and either stops the turn), or its page to visit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.shortcuts import PromptSession
from rich.console import Console
from rich.text import Text

from nanohermes.common.events import ApprovalReply, ApprovalRequest, Choice, ElicitationReply, ElicitationRequest
from nanohermes.ui import render
from nanohermes.ui.keyguard import GUARD_SECS, KeyGuard, guarded, hint
from nanohermes.ui.visible import escape_controls

INTERRUPT: Final = "interrupt"
STOP: Final = "stop"  # Esc: no, and the turn stops
VIEW: Final = "view"  # show the whole detail the box cut, then ask again
Picked = Choice | Literal["interrupt", "stop"]  # an answer, Esc, or Ctrl-C/Ctrl-D
T = TypeVar("T")
def choices(request: ApprovalRequest) -> list[tuple[Choice, str, str]]:
    """(answer, key, label) in display order; the first one is highlighted at the start.

    A request without a rule is asked every time (a protected write): no "always" then."""
    out: list[tuple[Choice, str, str]] = [("once", "y", request.yes or "Yes, once")]
    if request.rule:
        out.append(("always", "a", f"Always this session ({escape_controls(request.rule, newlines=True)})"))
        out.append(("project", "p", "Always in this project (saved to .nanohermes/config.json)"))
    out.append(("deny", "n", "No, and tell the model what to do instead" if request.note else "No"))
    return out


class Approver:
    """Asks on the terminal. `before`/`after` let the REPL pause its live display around it;
    `on_interrupt` is called when the person stops the turn at a question (Esc, Ctrl-C);
    `keep` receives the keys typed too early to answer one (see `KeyGuard`)."""

    def __init__(self, console: Console, *, before: Callable[[], None] = lambda: None,
                 after: Callable[[], None] = lambda: None, on_interrupt: Callable[[], None] = lambda: None,
                 pt_input: Any = None, pt_output: Any = None, guard_secs: float = GUARD_SECS,
                 keep: Callable[[str], None] | None = None) -> None:
        self.console = console
        self.before = before
        self.after = after
        self.on_interrupt = on_interrupt
        self.guard_secs = guard_secs
        self.keep = keep
        self._input = pt_input  # prompt-toolkit Input/Output: None means the real terminal
        self._output = pt_output
        self._lock = asyncio.Lock()

    async def settled(self) -> None:
        """Returns once no question is open (one asked meanwhile waits for the next)."""
        async with self._lock:
            return

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        async with self._lock:
            self.before()
            try:
                return await self._ask(request)
            finally:
                self.after()

    async def _ask(self, request: ApprovalRequest) -> ApprovalReply:
        self.console.print(render.approval(request))
        picked = await self._choose(request)
        while picked == VIEW:  # the whole of what the box cut, then the same question
            self._show_whole(request)
            picked = await self._choose(request)
        if picked == "deny" and request.note:
            note = await self._note()
            if note is None:  # Esc or Ctrl-C at the note: still no, and the turn stops
                picked = STOP
            else:
                self.console.print(Text("⊘ no" + (f": {note}" if note else ""), style="yellow"))
                return ApprovalReply("deny", note)
        if picked == INTERRUPT or picked == STOP:
            self.console.print(Text("⊘ no (interrupted)" if picked == INTERRUPT else
                                    "⊘ no, and stopped: say what to do instead", style="yellow"))
            await self._stop_turn()
            return ApprovalReply("deny", stop=True)
        if picked == "deny":
            self.console.print(Text("⊘ no", style="yellow"))
            return ApprovalReply("deny")
        if picked in ("always", "project"):
            where = "in this project" if picked == "project" else "this session"
            self.console.print(Text(f"✓ always {where}: {request.rule}", style="green"))
        else:
            self.console.print(Text(f"✓ {(request.yes or 'yes, once').lower()}", style="green"))
        return ApprovalReply(picked)

    async def _choose(self, request: ApprovalRequest) -> Picked | Literal["view"]:
        options: list[tuple[Picked | Literal["view"], str, str]] = list(choices(request))
        if hidden := render.diff_hidden(request.detail):
            what = "diff" if render.looks_like_diff(request.detail.strip("\n")) else "text"
            options.append((VIEW, "v", f"View the whole {what} first ({hidden} more lines than the box shows)"))
        return await pick(options, escape=STOP, interrupt=INTERRUPT, pt_input=self._input, pt_output=self._output,
                          guard=self._guard())

    def _guard(self) -> KeyGuard:
        return KeyGuard(self.guard_secs, self.keep)

    async def _stop_turn(self) -> None:
        self.on_interrupt()
        # The turn was cancelled just now: let that land here, before the runtime could
        # carry on to the next model call (nothing may be sent after a cancelled prompt).
        await asyncio.sleep(0)

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        async with self._lock:
            self.before()
            try:
                return await self._elicit(request)
            finally:
                self.after()

    async def _elicit(self, request: ElicitationRequest) -> ElicitationReply:
        # only an MCP server's elicitation
        from nanohermes.turn.elicitation import fields

        self.console.print(render.elicitation(request))
        if request.url:
            options = [("accept", "y", "I opened it and finished there"), ("decline", "n", "Decline")]
        else:
            options = [("accept", "y", "Answer it"), ("decline", "n", "Decline")]
        picked = await pick(options, escape=STOP, interrupt=INTERRUPT, pt_input=self._input, pt_output=self._output,
                            guard=self._guard())
        if picked in (STOP, INTERRUPT):
            return await self._elicitation_stopped(picked)
        if picked == "decline":
            self.console.print(Text("⊘ declined", style="yellow"))
            return ElicitationReply("decline")
        if request.url:
            self.console.print(Text("✓ done", style="green"))
            return ElicitationReply("accept")
        kb = KeyBindings()

        @kb.add("escape", eager=True)
        def _stop(event: Any) -> None:
            event.app.exit(exception=_Stopped())

        session: PromptSession[str] = PromptSession(input=self._input, output=self._output, key_bindings=kb)
        try:
            content: dict[str, Any] = {}
            for f in fields(request.schema):
                label = escape_controls(f.title, newlines=True)
                while True:
                    text = await session.prompt_async(f"{label}{' *' if f.required else ''} ({f.hint()}): ",
                                                      default=f.default_text(), handle_sigint=False)
                    value, problem = f.read(text)
                    if problem is None:
                        break
                    self.console.print(Text(problem, style="red"))
                if value is not None:
                    content[f.name] = value
            self.console.print(Text("✓ sent", style="green"))
            return ElicitationReply("accept", content)
        except _Stopped:
            return await self._elicitation_stopped(STOP)
        except (KeyboardInterrupt, EOFError):  # as at its first question: cancelled, and the turn stops
            return await self._elicitation_stopped(INTERRUPT)

    async def _elicitation_stopped(self, how: str) -> ElicitationReply:
        """Esc declines the server's question and stops the turn; Ctrl-C cancels it and stops."""
        if how == STOP:
            self.console.print(Text("⊘ declined, and stopped: say what to do instead", style="yellow"))
        else:
            self.console.print(Text("⊘ cancelled (interrupted)", style="yellow"))
        await self._stop_turn()
        return ElicitationReply("decline" if how == STOP else "cancel")

    def _show_whole(self, request: ApprovalRequest) -> None:
        detail = request.detail.strip("\n")
        whole = detail.count("\n") + 1
        if render.looks_like_diff(detail):
            self.console.print(render.diff(detail, max_lines=whole))
        else:
            self.console.print(render.fold(detail, whole, wrap=True))
        self.console.print(Text(f"(the whole {whole} lines above: scroll back to read them)", style="dim"))

    async def _note(self) -> str | None:
        """The note for the model after a no; None when the person stops instead (Esc, Ctrl-C,
        Ctrl-D), keeping what they had typed of it for their next message."""
        kb = KeyBindings()

        @kb.add("escape", eager=True)
        @kb.add("c-c")
        @kb.add("c-d")
        def _stop(event: Any) -> None:
            event.app.exit(exception=_Stopped())

        session: PromptSession[str] = PromptSession(input=self._input, output=self._output, key_bindings=kb)
        try:
            return (await session.prompt_async("note for the model (Enter to skip): ", handle_sigint=False)).strip()
        except _Stopped:
            if (typed := session.default_buffer.text) and self.keep is not None:
                self.keep(typed)
            return None


class _Stopped(Exception):
    """Esc in a form field or at the note after a no: the turn stops."""


async def pick(options: list[tuple[T, str, str]], *, escape: T, interrupt: T, pt_input: Any = None,
               pt_output: Any = None, guard: KeyGuard | None = None) -> T:
    """One of `options` ((value, key, label), the first highlighted): its key, or the arrows
    and Enter, once `guard` lets keys count (earlier keys go to its `keep`). Esc gives
    `escape`, Ctrl-C and Ctrl-D `interrupt`, at any time."""
    selected = [0]

    def text() -> FormattedText:
        parts: list[tuple[str, str]] = []
        for i, (_, key, label) in enumerate(options):
            on = i == selected[0]
            parts.append(("bold reverse" if on else "", f"{'❯' if on else ' '} [{key}] {label}"))
            parts.append(("", "\n"))
        parts.append(hint(guard, f"  ↑/↓ and Enter, or press {' / '.join(key for _, key, _ in options)}"))
        return FormattedText(parts)

    kb = KeyBindings()

    def choose(value: T) -> Callable[[Any], None]:
        return lambda event: event.app.exit(result=value)

    for value, key, _ in options:
        kb.add(key)(guarded(guard, choose(value)))
        kb.add(key.upper())(guarded(guard, choose(value)))
    kb.add("escape", eager=True)(choose(escape))
    kb.add("c-c")(choose(interrupt))
    kb.add("c-d")(choose(interrupt))

    def up(event: Any) -> None:
        selected[0] = (selected[0] - 1) % len(options)

    def down(event: Any) -> None:
        selected[0] = (selected[0] + 1) % len(options)

    for keys, move in ((("up", "left", "s-tab"), up), (("down", "right", "tab"), down)):
        for key in keys:
            kb.add(key)(guarded(guard, move))
    kb.add("enter")(guarded(guard, lambda event: event.app.exit(result=options[selected[0]][0])))

    # Any other key answers nothing, but one typed too early is still the person's text.
    kb.add(Keys.Any)(guarded(guard, lambda event: None))
    kb.add(Keys.BracketedPaste)(guarded(guard, lambda event: None))

    app: Application[T] = Application(
        layout=Layout(Window(FormattedTextControl(text, focusable=True, show_cursor=False), height=len(options) + 1)),
        key_bindings=kb, full_screen=False, erase_when_done=True, input=pt_input, output=pt_output,
    )
    try:
        # handle_sigint=False: prompt-toolkit would otherwise take the SIGINT handler and, on
        # leaving, remove it, so Ctrl-C during the approved command would do nothing.
        return await app.run_async(handle_sigint=False, pre_run=(lambda: guard.start(app)) if guard else None)
    finally:
        if guard is not None:
            guard.stop()
