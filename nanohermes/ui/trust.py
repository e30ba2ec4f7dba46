"""The folder-trust question: asked once in the REPL when a project's config asks for
settings only a trusted folder may use (see `nanohermes.config.NARROWING`).

It lists what the project asks for, escaped so a value cannot draw on the terminal, and
offers "trust this folder" (saved to trusted_projects in the user config) or "continue
without" (remembered until the project asks for something else). Ctrl-C, Ctrl-D and Esc
continue without, and nothing is remembered then. Keys typed before the question could be
read (the first message, typed while the REPL starts) answer nothing: they are kept for the
prompt (`keyguard.KeyGuard`), so the `t` of "tell me" never trusts a folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from rich.console import Console
from rich.text import Text

from nanohermes.config import describe_ask
from nanohermes.guard.trust import decline_trust, trust_folder
from nanohermes.ui.keyguard import KeyGuard, guarded, hint

Answer = Literal["trust", "without", "interrupted"]
# Keys listed by the question; the rest are counted. Not a config limit: the project being
# asked about must not be able to shorten its own listing.
MAX_ASKS_SHOWN = 20


@dataclass(frozen=True)
class TrustQuestion:
    """What the REPL needs to ask, and to act on the answer."""

    workspace: Path
    project_file: Path
    user_file: Path
    asks: dict[str, Any]  # dotted key -> the project's value
    reload: Callable[[], Any]  # the REPL's Start once the folder is trusted (reads the config again)


def lines(q: TrustQuestion, max_keys: int = MAX_ASKS_SHOWN) -> list[str]:
    shown = [describe_ask(k, v) for k, v in list(q.asks.items())[:max_keys]]
    if len(q.asks) > max_keys:
        shown.append(f"… and {len(q.asks) - max_keys} more keys")
    return shown


def show(console: Console, q: TrustQuestion) -> None:
    console.print(Text(f"This folder's config ({q.project_file}) asks for settings that apply only in a "
                       "folder you trust:", style="bold yellow"))
    for line in lines(q):
        console.print(Text(f"  • {line}"))
    console.print(Text(f"Trusting {q.workspace} lets them apply now and on later starts "
                       f"(saved to trusted_projects in {q.user_file}).", style="dim"))


async def choose(pt_input: Any = None, pt_output: Any = None,
                 started: Callable[[Application[Answer]], None] = lambda app: None,
                 guard: KeyGuard | None = None) -> Answer:
    """The two answers as a one-key choice, once `guard` lets keys count; `started` receives
    the running question (so a signal can end it)."""
    options: list[tuple[Answer, str, str]] = [("without", "c", "Continue without them"),
                                              ("trust", "t", "Trust this folder")]
    selected = [0]  # the safe answer is the one Enter takes

    def text() -> FormattedText:
        parts: list[tuple[str, str]] = []
        for i, (_, key, label) in enumerate(options):
            on = i == selected[0]
            parts += [("bold reverse" if on else "", f"{'>' if on else ' '} [{key}] {label}"), ("", "\n")]
        parts.append(hint(guard, "  up/down and Enter, or press c / t"))
        return FormattedText(parts)

    kb = KeyBindings()

    def pick(value: Answer) -> Callable[[Any], None]:
        return lambda event: event.app.exit(result=value)

    for answer, key, _ in options:
        kb.add(key)(guarded(guard, pick(answer)))
        kb.add(key.upper())(guarded(guard, pick(answer)))
    for key in ("escape", "c-c", "c-d"):
        kb.add(key, eager=True)(pick("interrupted"))

    def move(event: Any) -> None:
        selected[0] = 1 - selected[0]

    for key in ("up", "down", "tab", "s-tab"):
        kb.add(key)(guarded(guard, move))
    kb.add("enter")(guarded(guard, lambda event: event.app.exit(result=options[selected[0]][0])))
    kb.add(Keys.Any)(guarded(guard, lambda event: None))  # an early key of the person's message is kept
    kb.add(Keys.BracketedPaste)(guarded(guard, lambda event: None))

    app: Application[Answer] = Application(
        layout=Layout(Window(FormattedTextControl(text, focusable=True, show_cursor=False), height=len(options) + 1)),
        key_bindings=kb, full_screen=False, erase_when_done=True, input=pt_input, output=pt_output)
    started(app)
    try:
        return await app.run_async(pre_run=(lambda: guard.start(app)) if guard is not None else None)
    finally:
        if guard is not None:
            guard.stop()


def settle(q: TrustQuestion, answer: Answer) -> Any:
    """Act on the answer (blocking file work: run it off the event loop). Returns the Start
    to build on: re-read after trusting, None to keep the one the question came with."""

    if answer == "trust":
        trust_folder(q.workspace, q.user_file)
        return q.reload()
    if answer == "without":
        decline_trust(q.workspace, q.asks)
    return None
