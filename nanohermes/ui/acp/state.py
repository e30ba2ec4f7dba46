"""What `nanohermes acp` keeps: the options it was started with, and each open session."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.common.modes import Mode
import nanohermes.ui.acp.updates as updates

if TYPE_CHECKING:
    from nanohermes.assemble import Built
    from nanohermes.config import Config
    from nanohermes.ui.acp.editor import EditorUI


@dataclass(frozen=True)
class Options:
    """What `nanohermes acp` was started with: the same options as the REPL's."""

    flags: dict[str, Any] = field(default_factory=dict)  # config keys set on the command line
    config_file: Path | None = None
    cwd: Path | None = None  # the folder a client's relative view starts from (and images_to_model is read in)
    save_session: bool = True
    verbose: bool = False


@dataclass
class Trust:
    """The project's request for trust keys, asked before the session's first prompt."""

    asks: dict[str, Any]
    project_file: Path
    user_file: Path


@dataclass
class Live:
    """One open session."""

    id: str
    workspace: Path
    config: Config
    built: Built
    ui: EditorUI
    mcp: dict[str, Any]  # the editor's MCP servers, as config (a rebuild after trusting keeps them)
    trust: Trust | None = None
    started: asyncio.Task[None] | None = None  # the session start (MCP servers)
    active: asyncio.Task[Any] | None = None  # the prompt being answered
    chosen_mode: Mode | None = None  # the mode the editor switched to: a config read again does not undo it
    shown_commands: list[updates.Command] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # of reading its config and building it

    @property
    def agent(self) -> Any:
        return self.built.agent


