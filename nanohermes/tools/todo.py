"""The session's plan: todo_write (replaces the whole list) and todo_read.

The list as state (where it lives, `current()`, `restore()`, `render()`, and `KEPT`, how the
session keeps it) is `tools.todo_list`. Every write emits `TodoUpdated` so
front ends can show the list as it changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from nanohermes.common.events import TodoItem, TodoUpdated
from nanohermes.tools.base import Attempt, Approval, Params, ReadOnlyTool, Tool, ToolContext, ToolError
from nanohermes.tools.todo_list import current, render, restore


def _counts(items: tuple[TodoItem, ...]) -> str:
    done = sum(t.status == "completed" for t in items)
    doing = sum(t.status == "in_progress" for t in items)
    return f"{len(items)} items: {done} completed, {doing} in progress, {len(items) - done - doing} pending"


@dataclass(frozen=True, kw_only=True)
class TodoEntry:
    # Validated with the params that hold it; unknown keys are refused as there.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    content: str
    status: Literal["pending", "in_progress", "completed"]

    def __post_init__(self) -> None:
        if not self.content.strip():
            raise ValueError("todo content must not be empty; describe the step")
        object.__setattr__(self, "content", self.content.strip())  # kept without its blanks (frozen)


@dataclass(frozen=True, kw_only=True)
class TodoWriteParams(Params):
    todos: list[TodoEntry]


@dataclass(frozen=True, kw_only=True)
class TodoWrite(Tool[TodoWriteParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "todo_write"
    claude_names: ClassVar[tuple[str, ...]] = ("TodoWrite",)
    group: ClassVar[str] = "plan"
    description: ClassVar[str] = (
        "Write the todo list for multi-step work. This replaces any previous list: send every item with "
        "`content` and `status`. Keep one item in_progress; mark items completed as soon as done. At "
        "most {todo_items} items."
    )
    params: ClassVar[type[Params]] = TodoWriteParams
    approval: ClassVar[Approval] = "never"  # session bookkeeping: plan mode must allow it
    effect = "state"

    def output_limit(self) -> str:
        return "todo_items items"

    def summary(self, args: TodoWriteParams) -> str:
        return f"{len(args.todos)} items"

    async def run(self, args: TodoWriteParams, ctx: ToolContext, attempt: Attempt) -> str:
        cap = ctx.limits.todo_items
        if len(args.todos) > cap:
            raise ToolError(
                f"todo_write got {len(args.todos)} items (> {cap}); the list was not changed. "
                f"Send at most {cap}: merge small steps or drop completed ones"
            )
        items = tuple(TodoItem(content=t.content, status=t.status) for t in args.todos)
        restore(ctx.state, items)
        ctx.emit(TodoUpdated(items=items))
        if not items:
            return "Todo list cleared."
        text = f"Todo list saved ({_counts(items)}):\n{render(items)}"
        doing = [str(i) for i, t in enumerate(items, 1) if t.status == "in_progress"]
        if len(doing) > 1:
            text += (f"\n\nwarning: {len(doing)} items are in_progress ({', '.join(doing)}); "
                     "keep exactly one in progress and finish it before starting the next")
        return text


@dataclass(frozen=True, kw_only=True)
class TodoReadParams(Params):
    pass


@dataclass(frozen=True, kw_only=True)
class TodoRead(ReadOnlyTool[TodoReadParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "todo_read"
    claude_names: ClassVar[tuple[str, ...]] = ("TodoRead",)
    group: ClassVar[str] = "plan"
    description: ClassVar[str] = (
        "Show the session's todo list with each item's status. Change it with todo_write."
    )
    params: ClassVar[type[Params]] = TodoReadParams

    async def run(self, args: TodoReadParams, ctx: ToolContext, attempt: Attempt) -> str:
        items = current(ctx.state)
        if not items:
            return "No todo list yet; create one with todo_write."
        return f"Todo list ({_counts(items)}):\n{render(items)}"


def tools() -> list[Tool]:
    return [TodoRead(), TodoWrite()]
