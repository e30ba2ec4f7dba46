"""The permission modes: one enum for the config, the permissions, the CLI and the REPL.

A `str` enum, so a mode is its own name in JSON, in text and in comparisons (`Mode.PLAN ==
"plan"`). What each mode blocks and asks is the permissions' business (`MODE_BLOCKED_EFFECTS`,
`decide`); how strict each is, for a project file that may only narrow, is the config's.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    DEFAULT = "default"  # asks for edits, commands (but the read-only ones), commits and hosts
    ACCEPT_EDITS = "accept-edits"  # edits inside the workspace run unasked
    PLAN = "plan"  # nothing is written or run
    DEBUG = "debug"  # nothing is written; commands are asked
    GOAL = "goal"  # nothing is asked (unattended)


# What Shift+Tab steps through in the REPL, in order; debug and goal are chosen by name.
CYCLE: tuple[Mode, ...] = (Mode.DEFAULT, Mode.ACCEPT_EDITS, Mode.PLAN)
