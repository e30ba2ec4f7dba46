"""Where nanohermes keeps its files: the XDG config, data and state folders.

Kept apart from the config models so that code needing only a path (the REPL's input
history, the session list) does not import pydantic.
"""

from __future__ import annotations

import os
from pathlib import Path


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "nanohermes"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "nanohermes"


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "nanohermes"
