"""The session's todo list as state: where it lives in the session-wide `ToolContext.state`,
its accessors (`current`, `restore`), how the list reads (`render`), and `KEPT`, how the
session keeps it (saved with the transcript and each checkpoint as `todos`, put back on a
resume or a rewind, repeated after a compaction: `session.KeptState`, listed by
`tools.registry.kept_state()`). Apart from the tools (`tools.todo`), which a session loads
only when the model calls one.
"""

from __future__ import annotations

from typing import Any

from nanohermes.common.events import TodoItem

STATE_KEY = "todos"
_MARKS = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


def current(state: dict[str, Any]) -> tuple[TodoItem, ...]:
    """The todo list of a session (empty until the first todo_write)."""
    items = state.get(STATE_KEY, ())
    return tuple(items)


def restore(state: dict[str, Any], items: list[TodoItem] | tuple[TodoItem, ...]) -> None:
    """Put a saved list back, e.g. when a session is resumed or compacted."""
    state[STATE_KEY] = tuple(items)


class KeptTodos:
    """The todo list as the session keeps it (`session.KeptState`)."""

    key = STATE_KEY

    def save(self, state: dict[str, Any]) -> Any:
        return [{"content": t.content, "status": t.status} for t in current(state)]

    def restore(self, state: dict[str, Any], saved: Any) -> None:
        items = saved if isinstance(saved, list) else []
        restore(state, [TodoItem(content=str(t["content"]), status=t["status"]) for t in items
                        if isinstance(t, dict) and "content" in t
                        and t.get("status") in ("pending", "in_progress", "completed")])

    def carried(self, state: dict[str, Any]) -> str:
        todos = current(state)
        return f"Current todo list (kept from before compacting):\n{render(todos)}" if todos else ""


KEPT = KeptTodos()


def render(items: tuple[TodoItem, ...] | list[TodoItem]) -> str:
    """The list as the model and people read it: `[x] 1. content`."""
    return "\n".join(f"{_MARKS[t.status]} {i}. {t.content}" for i, t in enumerate(items, 1))
