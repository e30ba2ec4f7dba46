"""The built-in tools: the one list of their modules.

A tool module holds everything of its tools (name, parameters, kind, effect, the limits that
bound them, description, behaviour) and lists them in `tools()`; registering a new module is
its import and its tools in the list of `build_tools` here, nothing else (the reference, the
example config and the shipped declarations are generated from it: `tests/test_new_tool.py`).
The modules are imported when the pool is built from them (a start builds it from the
shipped declarations, `catalog.py`, and imports a module only when one of its tools is called).

What tool modules add to the session and the runtime is listed here too, for whoever builds
them (`assemble`): the parts of the tool state a session keeps (`kept_state`: the todo list)
and how a runtime offers the tools and reads calls (`conventions`: MCP tools found with
tool_search past `max_tools`, a patch sent through the shell read as apply_patch). The core
imports no tool module: it knows these only by their protocols (`session.KeptState`,
`runtime.ToolConventions`).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.tools.base import Tool
from nanohermes.tools.offering import offered

if TYPE_CHECKING:
    from nanohermes.common.budget import Limits
    from nanohermes.config import Config
    from nanohermes.common.messages import ToolCall
    from nanohermes.tools.todo_list import KeptTodos


def build_tools(config: Config | None = None, workspace: Path | None = None) -> list[Tool]:
    """The built-in pool, sorted by name. Conditional tools are added by their owners."""
    # Here, not at the top: a start builds the pool from the shipped declarations and imports a
    # tool's module only when one of its tools is called (tests/test_tool_catalog.py).
    from nanohermes.tools.files import tools as files
    from nanohermes.tools.writes import tools as writes
    from nanohermes.tools.git import tools as git
    from nanohermes.tools.memory import tools as memory
    from nanohermes.tools.patch import tools as patch
    from nanohermes.tools.search import tools as search
    from nanohermes.tools.shell import tools as shell
    from nanohermes.tools.tasks import tools as tasks
    from nanohermes.tools.todo import tools as todo
    from nanohermes.tools.web import tools as web

    tools: list[Tool] = [*files(), *writes(), *patch(), *web(), *todo(), *memory(), *shell(), *tasks(), *git()]
    tools += search(config)
    return sorted(tools, key=lambda t: t.name)


def kept_state() -> tuple[KeptTodos, ...]:
    """The parts of the tool state a session keeps with itself (`session.KeptState`)."""
    from nanohermes.tools.todo_list import KEPT  # the list, not its tools: imported when a session is made

    return (KEPT,)


class BuiltinConventions:
    """How a runtime offers the built-in tools and reads calls (`runtime.ToolConventions`)."""

    def offered(self, allowed: list[Tool], state: dict[str, Any], max_tools: int, limits: Limits,
                notice: Callable[[str], None]) -> list[Tool]:
        return offered(allowed, state, max_tools, limits, notice)

    def reread(self, call: ToolCall, names: Container[str]) -> tuple[ToolCall, str] | None:
        if call.name != "run_command" or "apply_patch" not in names:
            return None
        if "pply" not in call.arguments and "\\u" not in call.arguments:
            return None  # names neither apply_patch nor applypatch, not even in JSON's escapes: a plain command
        from nanohermes.tools.patches.command import NOTE, patch_call  # only for a call that may read as a patch

        patched = patch_call(call)
        return (patched, NOTE) if patched is not None else None


def conventions() -> BuiltinConventions:
    """How a runtime offers the tools and reads calls (`runtime.ToolConventions`)."""
    return BuiltinConventions()
