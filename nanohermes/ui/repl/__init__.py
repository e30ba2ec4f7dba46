"""The interactive REPL: prompt-toolkit input, rich output, slash commands, approvals, Ctrl-C.

Between turns prompt-toolkit owns the terminal (history, multi-line input, completion of
/commands and @paths, the bottom toolbar). During a turn the agent runs as an asyncio task and
its events are drawn by `live.TurnView`; the terminal stops echoing so typed-ahead text waits
in the kernel's buffer and is sent when the turn ends. Ctrl-C during a turn cancels the task:
the agent answers every pending call with "interrupted by user", so the history stays valid,
and the prompt comes back.

The parts: `loop` (the `Repl`: reading and running, the agent built behind the first prompt,
the folder-trust question, closing; `run_repl`), `prompt` (the prompt, its keys and
completion), `keys` (the terminal during a turn or a `!command`: type-ahead, Esc and Ctrl-C,
`Foreground`), `turn` (a message's pastes and attachments, a `!command`'s run and report),
`welcome` (the welcome, the endpoint check, the toolbar), `console` (the escaping console).
"""

from __future__ import annotations

from nanohermes.ui.repl.keys import split_typeahead
from nanohermes.ui.repl.loop import Start, run_repl
from nanohermes.ui.repl.welcome import no_key_hint, toolbar

__all__ = ["Start", "no_key_hint", "run_repl", "split_typeahead", "toolbar"]
