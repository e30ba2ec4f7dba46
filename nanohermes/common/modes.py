"""The closed sets of words the config, the CLI and the REPL share: the permission modes, the
reasoning efforts, the wire APIs and the sandbox modes. Each is declared here once; the config's
schema and the command line's choices are made from these.

`Mode` is a `str` enum, so a mode is its own name in JSON, in text and in comparisons
(`Mode.PLAN == "plan"`). What each mode blocks and asks is the permissions' business
(`MODE_BLOCKED_EFFECTS`, `decide`); how strict each is, for a project file that may only narrow,
is the config's. The others are `Literal` types, each with the tuple of its words.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Mode(StrEnum):
    DEFAULT = "default"  # asks for edits, commands (but the read-only ones), commits and hosts
    ACCEPT_EDITS = "accept-edits"  # edits inside the workspace run unasked
    PLAN = "plan"  # nothing is written or run
    DEBUG = "debug"  # nothing is written; commands are asked
    GOAL = "goal"  # nothing is asked (unattended)


# What Shift+Tab steps through in the REPL, in order; debug and goal are chosen by name.
CYCLE: tuple[Mode, ...] = (Mode.DEFAULT, Mode.ACCEPT_EDITS, Mode.PLAN)

# Claude Code's names of the modes (stream-json's permissionMode, a hook's permission_mode);
# debug has none (it asks as default does).
CLAUDE_MODES: dict[Mode, str] = {Mode.DEFAULT: "default", Mode.ACCEPT_EDITS: "acceptEdits", Mode.PLAN: "plan",
                                 Mode.GOAL: "bypassPermissions", Mode.DEBUG: "default"}


# How hard a reasoning model thinks (`reasoning_effort`, --reasoning-effort).
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
EFFORTS: tuple[Effort, ...] = get_args(Effort)

# The endpoint's API: chat completions or the Responses API (`wire_api`, --wire-api).
Wire = Literal["chat", "responses"]
WIRES: tuple[Wire, ...] = get_args(Wire)

# auto: commands nobody approved run in the OS sandbox; off: unconfined (`sandbox.mode`, --sandbox).
SandboxMode = Literal["auto", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)
