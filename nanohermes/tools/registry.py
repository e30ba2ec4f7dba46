"""The built-in tools: the one list of their modules.

A tool module holds everything of its tools (name, parameters, kind, effect, the limits that
bound them, description, behaviour) and lists them in `tools()`; registering a new module is
its import and its tools in the list of `build_tools` here, nothing else (the reference, the
example config and the shipped declarations are generated from it: `tests/test_new_tool.py`).
The modules are imported when the pool is built from them (a start builds it from the
shipped declarations, `catalog.py`, and imports a module only when one of its tools is called).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nanohermes.tools.base import Tool

if TYPE_CHECKING:
    from nanohermes.config import Config


def build_tools(config: Config | None = None, workspace: Path | None = None) -> list[Tool]:
    """The built-in pool, sorted by name. Conditional tools are added by their owners."""
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
