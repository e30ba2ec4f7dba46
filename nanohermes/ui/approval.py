"""The interactive approval prompt: `await approver.confirm(request) -> ApprovalReply`.

Shows what would run (the exact command, or the coloured diff of an edit) and why it is
asked, then offers: yes once (y), always for this session (a, remembered as the rule the
request names), always in this project (p, saved to the project config), no (n, then an
optional note passed to the model). A request without a rule offers only yes and no. Arrow keys move
the highlight and Enter takes it; Esc is no; Ctrl-C is no and interrupts the turn. Requests
are answered one at a time, even when parallel calls ask together.

An MCP server's question (`await approver.elicit(request)`) is asked the same way, one at a
time with the approvals: its form field by field (an answer that does not fit is asked
again), or its page to visit; Ctrl-C or Ctrl-D cancels it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.shortcuts import PromptSession
from rich.console import Console
from rich.text import Text

from nanohermes.events import ApprovalReply, ApprovalRequest, Choice, ElicitationReply, ElicitationRequest
from nanohermes.ui import render
from nanohermes.ui.visible import escape_controls

INTERRUPT: Final = "interrupt"
VIEW: Final = "view"  # show the whole detail the box cut, then ask again
Picked = Choice | Literal["interrupt"]  # an answer, or Ctrl-C/Ctrl-D
T = TypeVar("T")


def choices(request: ApprovalRequest) -> list[tuple[Choice, str, str]]:
    """(answer, key, label) in display order; the first one is highlighted at the start.

    A request without a rule is asked every time (a protected write): no "always" then."""
    out: list[tuple[Choice, str, str]] = [("once", "y", "Yes, once")]
    if request.rule:
        out.append(("always", "a", f"Always this session ({escape_controls(request.rule, newlines=True)})"))
        out.append(("project", "p", "Always in this project (saved to .nanohermes/config.json)"))
    out.append(("deny", "n", "No, and tell the model what to do instead"))
    return out


class Approver:
    """Asks on the terminal. `before`/`after` let the REPL pause its live display around it;
    `on_interrupt` is called when the user presses Ctrl-C at the prompt."""

    def __init__(self, console: Console, *, before: Callable[[], None] = lambda: None,
                 after: Callable[[], None] = lambda: None, on_interrupt: Callable[[], None] = lambda: None,
                 pt_input: Any = None, pt_output: Any = None) -> None:
        self.console = console
        self.before = before
        self.after = after
        self.on_interrupt = on_interrupt
        self._input = pt_input  # prompt-toolkit Input/Output: None means the real terminal
        self._output = pt_output
        self._lock = asyncio.Lock()
        self._always: set[str] = set()  # rules answered "always" in this session

    async def confirm(self, request: ApprovalRequest) -> ApprovalReply:
        async with self._lock:
            if request.rule and request.rule in self._always:
                # A parallel call asked before its sibling's "always" was remembered.
                return ApprovalReply("once")
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
        if picked == INTERRUPT:
            self.console.print(Text("⊘ no (interrupted)", style="yellow"))
            self.on_interrupt()
            # The turn was cancelled just now: let that land here, before the runtime could
            # carry on to the next model call (nothing may be sent after a cancelled prompt).
            await asyncio.sleep(0)
            return ApprovalReply("deny")
        if picked == "deny":
            note = await self._note()
            self.console.print(Text("⊘ no" + (f": {note}" if note else ""), style="yellow"))
            return ApprovalReply("deny", note)
        if picked in ("always", "project"):
            if request.rule:
                self._always.add(request.rule)
            where = "in this project" if picked == "project" else "this session"
            self.console.print(Text(f"✓ always {where}: {request.rule}", style="green"))
        else:
            self.console.print(Text("✓ yes, once", style="green"))
        return ApprovalReply(picked)

    async def _choose(self, request: ApprovalRequest) -> Picked | Literal["view"]:
        options: list[tuple[Picked | Literal["view"], str, str]] = list(choices(request))
        if hidden := render.diff_hidden(request.detail):
            what = "diff" if render.looks_like_diff(request.detail.strip("\n")) else "text"
            options.append((VIEW, "v", f"View the whole {what} first ({hidden} more lines than the box shows)"))
        return await pick(options, escape="deny", interrupt=INTERRUPT, pt_input=self._input, pt_output=self._output)

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        async with self._lock:
            self.before()
            try:
                return await self._elicit(request)
            finally:
                self.after()

    async def _elicit(self, request: ElicitationRequest) -> ElicitationReply:
        from nanohermes.elicitation import fields

        self.console.print(render.elicitation(request))
        session: PromptSession[str] = PromptSession(input=self._input, output=self._output)
        try:
            if request.url:
                done = await session.prompt_async("opened it and finished there? [y]es / [n]o (Enter = no): ",
                                                  handle_sigint=False)
                accepted = done.strip().lower() in ("y", "yes")
                self.console.print(Text("✓ done" if accepted else "⊘ declined", style="green" if accepted else "yellow"))
                return ElicitationReply("accept" if accepted else "decline")
            answer = await session.prompt_async("answer it? [y]es / [n]o (Enter = yes): ", handle_sigint=False)
            if answer.strip().lower() in ("n", "no"):
                self.console.print(Text("⊘ declined", style="yellow"))
                return ElicitationReply("decline")
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
        except (KeyboardInterrupt, EOFError):
            self.console.print(Text("⊘ cancelled", style="yellow"))
            return ElicitationReply("cancel")

    def _show_whole(self, request: ApprovalRequest) -> None:
        detail = request.detail.strip("\n")
        whole = detail.count("\n") + 1
        if render.looks_like_diff(detail):
            self.console.print(render.diff(detail, max_lines=whole))
        else:
            self.console.print(render.fold(detail, whole, wrap=True))
        self.console.print(Text(f"(the whole {whole} lines above: scroll back to read them)", style="dim"))

    async def _note(self) -> str:
        session: PromptSession[str] = PromptSession(input=self._input, output=self._output)
        try:
            return (await session.prompt_async("note for the model (Enter to skip): ", handle_sigint=False)).strip()
        except (KeyboardInterrupt, EOFError):
            return ""


async def pick(options: list[tuple[T, str, str]], *, escape: T, interrupt: T, pt_input: Any = None,
               pt_output: Any = None) -> T:
    """One of `options` ((value, key, label), the first highlighted): its key, or the arrows
    and Enter. Esc gives `escape`, Ctrl-C and Ctrl-D `interrupt`."""
    selected = [0]

    def text() -> FormattedText:
        parts: list[tuple[str, str]] = []
        for i, (_, key, label) in enumerate(options):
            on = i == selected[0]
            parts.append(("bold reverse" if on else "", f"{'❯' if on else ' '} [{key}] {label}"))
            parts.append(("", "\n"))
        keys = " / ".join(key for _, key, _ in options)
        parts.append(("italic", f"  ↑/↓ and Enter, or press {keys}"))
        return FormattedText(parts)

    kb = KeyBindings()

    def choose(value: T) -> Callable[[Any], None]:
        return lambda event: event.app.exit(result=value)

    for value, key, _ in options:
        kb.add(key)(choose(value))
        kb.add(key.upper())(choose(value))
    kb.add("escape", eager=True)(choose(escape))
    kb.add("c-c")(choose(interrupt))
    kb.add("c-d")(choose(interrupt))

    @kb.add("up")
    @kb.add("left")
    @kb.add("s-tab")
    def _up(event: Any) -> None:
        selected[0] = (selected[0] - 1) % len(options)

    @kb.add("down")
    @kb.add("right")
    @kb.add("tab")
    def _down(event: Any) -> None:
        selected[0] = (selected[0] + 1) % len(options)

    @kb.add("enter")
    def _enter(event: Any) -> None:
        event.app.exit(result=options[selected[0]][0])

    app: Application[T] = Application(
        layout=Layout(Window(FormattedTextControl(text, focusable=True, show_cursor=False), height=len(options) + 1)),
        key_bindings=kb, full_screen=False, erase_when_done=True, input=pt_input, output=pt_output,
    )
    # handle_sigint=False: prompt-toolkit would otherwise take the SIGINT handler and, on
    # leaving, remove it, so Ctrl-C during the approved command would do nothing.
    return await app.run_async(handle_sigint=False)
