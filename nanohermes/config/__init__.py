"""Settings: the config sections and the layered loader, and which layer may set what.

In parts: `schema` the sections, each key's default, description and bounds, and the checks
pydantic cannot make alone; `layers` reading the files and the environment and adding the
layers up (defaults < user < project < environment < flags, in `load_config`); `narrow` what
an untrusted project file may set (it only narrows; any other key is a trust key, applied
only in a trusted project); `validate` what validation does beside pydantic (unknown keys,
errors naming the file and key, plain values that need no pydantic). Import from
`nanohermes.config`, which re-exports them. Trusted projects and saved rules are
`nanohermes.guard.trust`'s; Claude Code's project files are read in `nanohermes.config.claude_files`.
"""

from nanohermes.config.layers import CONFIG_MAX_DEPTH, Loaded, fold_mcp_servers, json_depth, load_config, read_config_file
from nanohermes.config.narrow import (
    ASK_VALUE_CHARS, LIMIT_KEYS, LOWERABLE_LIMITS, MODE_STRICTNESS, NARROWING, USER_ONLY, Narrowed, as_read,
    describe_ask, narrow_project,
)
from nanohermes.config.schema import (
    HOOK_EVENTS, LIMITS_HINT, Config, HookCommand, HookGroup, HooksConfig, McpConfig, McpServerConfig,
    PermissionsConfig, Price, RuleOrigins, SandboxConfig, Section, ShellEnvConfig, SubagentConfig, WebFetchConfig,
    WebSearchConfig, checked_limits, default_of, limit_allows, section_fields, section_types,
)
from nanohermes.config.validate import KeyPath
from nanohermes.common.dirs import project_config_path, user_config_path
from nanohermes.common.modes import Mode

__all__ = [
    "ASK_VALUE_CHARS", "CONFIG_MAX_DEPTH", "HOOK_EVENTS", "LIMITS_HINT", "LIMIT_KEYS", "LOWERABLE_LIMITS",
    "MODE_STRICTNESS", "NARROWING", "USER_ONLY", "Config", "HookCommand", "HookGroup", "HooksConfig", "KeyPath",
    "Loaded", "McpConfig", "McpServerConfig", "Mode", "Narrowed", "PermissionsConfig", "Price", "RuleOrigins",
    "SandboxConfig", "Section", "ShellEnvConfig", "SubagentConfig", "WebFetchConfig", "WebSearchConfig", "as_read",
    "checked_limits", "default_of", "describe_ask", "fold_mcp_servers", "json_depth", "limit_allows", "load_config",
    "narrow_project", "project_config_path", "read_config_file", "section_fields", "section_types",
    "user_config_path",
]
