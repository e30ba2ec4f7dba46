"""The prompt between turns: prompt-toolkit's session and its keys (Alt+Enter for a new line,
a long paste shown as one label and Ctrl-O to expand it, Ctrl-C, Shift+Tab for the mode), the
input history (0600, keys redacted), and completion of /commands and @paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys

from nanohermes.common.dirs import open_private, state_home
from nanohermes.guard.redact import redact
from nanohermes.ui.commands import Registry

PATH_COMPLETIONS = 200  # entries offered when completing an @path
PASTE_LINES = 5  # a paste with more lines shows as one `[pasted N lines, S]` label (Ctrl-O expands it)


class InputCompleter(Completer):
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


def paste_label(data: str, index: int = 0) -> str:
    """`[pasted 4,000 lines, 224 KB]`: what a long paste shows in the input."""
    lines = data.count("\n") + (0 if data.endswith("\n") else 1)
    size = len(data.encode("utf-8"))
    shown = f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{max(1, round(size / 1024)):,} KB"
    return f"[pasted {lines:,} lines, {shown}{f' #{index + 1}' if index else ''}]"


def prompt_session(registry: Registry, workspace: Callable[[], Path], pastes: Callable[[], dict[str, str]],
                   cycle_mode: Callable[[], bool], toolbar: Callable[[], str]) -> PromptSession[str]:
    """The prompt's session. `pastes`: the labels of long pastes and their text (a paste adds
    one); `cycle_mode`: Shift+Tab, True when it changed the mode; `toolbar`: the bottom line."""
    kb = KeyBindings()

    @kb.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add(Keys.BracketedPaste)
    def _paste(event: Any) -> None:
        # A long paste is one short label in the input; the text goes with the message.
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        if data.count("\n") < PASTE_LINES:
            event.current_buffer.insert_text(data)
            return
        held = pastes()
        label = paste_label(data, len(held))
        held[label] = data
        event.current_buffer.insert_text(label)

    @kb.add("c-o")
    def _expand(event: Any) -> None:
        buf = event.current_buffer
        text = buf.text
        for label, data in pastes().items():
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
        if cycle_mode():
            event.app.invalidate()

    class _History(FileHistory):
        """The input history: 0600, and a pasted key is stored redacted."""

        def store_string(self, string: str) -> None:
            super().store_string(redact(string))

    try:
        path = state_home() / "history"
        open_private(path, "a").close()  # created 0600 before prompt-toolkit appends to it
        history: Any = _History(str(path))
    except OSError:
        history = InMemoryHistory()
    # The /command menu opens as you type; @paths complete on Tab (a folder scan per key
    # would be noise).
    commands_typed = Condition(lambda: get_app().current_buffer.text.startswith("/"))
    return PromptSession(history=history, key_bindings=kb, completer=InputCompleter(registry, workspace),
                         complete_while_typing=commands_typed, bottom_toolbar=toolbar,
                         enable_history_search=False)
