"""Tools: the contract (`base`), the built-in tools' modules and their registry (`registry`),
the pool a start builds from the shipped declarations (`catalog`, `declared`). Tool modules import the
contract from `nanohermes.tools.base`; everything else may import it from here."""

from __future__ import annotations

from nanohermes.tools.base import (
    Approval, Attempt, ClaudeCall, Effect, P, Params, ReadOnlyTool, SubjectKind, Target, Tool, ToolContext, ToolError,
    ToolHost, ToolResult, about, describe_validation, limit_value, params_schema, render_limits,
)
from nanohermes.tools.catalog import declarations
from nanohermes.tools.registry import build_tools

__all__ = ["Approval", "Attempt", "ClaudeCall", "Effect", "P", "Params", "ReadOnlyTool", "SubjectKind", "Target",
           "Tool", "ToolContext", "ToolError", "ToolHost", "ToolResult", "about", "build_tools", "declarations",
           "describe_validation", "limit_value", "params_schema", "render_limits"]
