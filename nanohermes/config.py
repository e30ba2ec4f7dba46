"""Settings: pydantic models and the layered loader.

Precedence, lowest first: defaults < user file ($XDG_CONFIG_HOME/nanohermes/config.json)
< project file (<workspace>/.nanohermes/config.json) < environment < command-line flags.
Each file is validated on its own so an error names the file and the key; unknown keys
become warnings, never failures.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from nanohermes.budget import Limits
from nanohermes.errors import ConfigError
from nanohermes.permissions import DEFAULT_SECRET_FILES

Mode = Literal["default", "accept-edits", "plan", "debug", "goal"]
MODES: tuple[str, ...] = ("default", "accept-edits", "plan", "debug", "goal")
_DIR_NAME = r"^[^/\\*?\[\]{}!]+$"  # a plain folder name: no separators, no glob characters


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", validate_assignment=True)


class WebSearchConfig(_Section):
    provider: Literal["duckduckgo", "searxng", "brave", "tavily"] = "duckduckgo"
    searxng_url: str | None = None
    brave_api_key_env: str = "BRAVE_API_KEY"
    tavily_api_key_env: str = "TAVILY_API_KEY"
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    tavily_url: str = "https://api.tavily.com/search"


class WebFetchConfig(_Section):
    # Host patterns (fnmatch, case-insensitive); "example.com" also covers its subdomains.
    allowed_hosts: list[str] = Field(default_factory=list)  # non-empty: only these hosts
    denied_hosts: list[str] = Field(default_factory=list)  # always refused, even if allowed


class PermissionsConfig(_Section):
    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    # File names whose contents are asked for before a tool or command reads them.
    secret_files: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_FILES))
    # (kind, rule text) -> the file or layer that contributed it; filled by load_config.
    _origins: dict[tuple[str, str], str] = PrivateAttr(default_factory=dict)

    def origin(self, kind: str, text: str) -> str:
        return self._origins.get((kind, text), "")


# Names that become part of tool names (mcp__<server>__<tool>): the characters providers accept,
# and no "__", which separates the parts.
_EXT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")


def _check_names(names: dict[str, Any], what: str) -> None:
    for name in names:
        if not _EXT_NAME.match(name) or len(name) > 40:
            raise ValueError(f"{what} name {name!r} must be 1-40 letters, digits, - or single _")


class McpServerConfig(_Section):
    """One MCP server: `command` (stdio) or `url` (streamable HTTP)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    trusted: bool = False  # its tools that declare readOnlyHint run without asking, in parallel

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either `command` (a stdio server) or `url` (a streamable HTTP server)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        return self


class McpConfig(_Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        _check_names(v, "MCP server")
        return v


class SubagentConfig(_Section):
    description: str
    prompt: str = ""
    tools: list[str] | None = None  # None: the parent's tools (except sub-agent tools)
    model: str | None = None  # None: the parent's model
    max_turns: int | None = Field(None, ge=1)
class Price(_Section):
    """Dollars per million tokens, for the cost meter."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class Config(_Section):
    model: str = "gpt-4.1-mini"
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    permission_mode: Mode = "default"
    auto_approve: bool = False
    allowed_tools: list[str] = Field(default_factory=list)
    disallowed_tools: list[str] = Field(default_factory=list)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    trusted_projects: list[str] = Field(default_factory=list)
    max_output: int = Field(20_000, ge=100)
    max_turns: int = Field(50, ge=1)
    max_parallel_tools: int = Field(10, ge=1, le=64)
    request_timeout: float = Field(600.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    session_budget_chars: int = Field(120_000, ge=1000)
    aggregate_budget_chars: int | None = Field(None, ge=100)
    grep_max_files: int = Field(50_000, ge=1)
    task_timeout_secs: float = Field(3600.0, gt=0)
    # Folder names grep and glob skip at any depth: None keeps the built-in list of build and
    # cache folders (nanohermes.tools.search.DEFAULT_IGNORE_DIRS), a list replaces it.
    search_ignore_dirs: list[Annotated[str, Field(pattern=_DIR_NAME)]] | None = None
    search_ignore_extra: list[Annotated[str, Field(pattern=_DIR_NAME)]] = Field(default_factory=list)  # added to it
    extra_write_roots: list[str] = Field(default_factory=list)
    limits: dict[str, int | float] = Field(default_factory=dict)  # any Limits field, by name
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    subagents: dict[str, SubagentConfig] = Field(default_factory=dict)
    summary_model: str | None = None  # a small model that labels each batch of tool calls in the REPL

    @field_validator("subagents")
    @classmethod
    def _subagent_names(cls, v: dict[str, SubagentConfig]) -> dict[str, SubagentConfig]:
        _check_names(v, "sub-agent")
        return v
    prices: dict[str, Price] = Field(default_factory=dict)  # by model name

    def resolved_api_key(self) -> str | None:
        return self.api_key or os.environ.get(self.api_key_env) or None

    def build_limits(self) -> Limits:
        unknown = set(self.limits) - set(Limits.names())
        if unknown:
            raise ConfigError(
                f"config key `limits` names unknown limits: {', '.join(sorted(unknown))}",
                hint=f"known limits: {', '.join(Limits.names())}",
            )
        values: dict[str, Any] = {
            "max_output": self.max_output,
            "session_budget_chars": self.session_budget_chars,
            "aggregate_budget_chars": self.aggregate_budget_chars,
            "grep_max_files": self.grep_max_files,
            "task_timeout_secs": self.task_timeout_secs,
        }
        values.update(self.limits)
        return Limits(**values)


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "nanohermes"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "nanohermes"


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "nanohermes"


def user_config_path() -> Path:
    return config_home() / "config.json"


def project_config_path(workspace: Path) -> Path:
    return workspace / ".nanohermes" / "config.json"


@dataclass
class Loaded:
    config: Config
    files: list[Path] = field(default_factory=list)  # files that existed and were read
    warnings: list[str] = field(default_factory=list)


def _unknown_keys(model: type[BaseModel], data: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        f = model.model_fields.get(key)
        if f is None:
            out.append(prefix + key)
            continue
        ann = f.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and isinstance(value, dict):
            out.extend(_unknown_keys(ann, value, prefix + key + "."))
    return out


def _describe(err: ValidationError) -> str:
    e = err.errors()[0]
    key = ".".join(str(p) for p in e["loc"]) or "(top level)"
    got = e.get("input")
    shown = json.dumps(got)[:60] if not isinstance(got, dict) else "an object"
    return f"key `{key}`: {e['msg'].lower()} (got {shown})"


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", hint="fix the file or move it away") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}", hint="check the path and its permissions") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level", hint='start the file with "{"')
    return data


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _env_layer() -> dict[str, Any]:
    env: dict[str, Any] = {}
    if v := os.environ.get("OPENAI_BASE_URL"):
        env["base_url"] = v
    if v := os.environ.get("NANOHERMES_MODEL"):
        env["model"] = v
    # OPENAI_API_KEY is read through api_key_env at use time so a file's api_key_env wins.
    return env


# Keys a project file may set only when the user trusts the project: a cloned repository
# must not turn off approvals, send the user's key to another host, or start programs.
PROJECT_TRUST_KEYS = ("auto_approve", "permission_mode", "base_url", "api_key", "api_key_env", "mcp",
                      "extra_write_roots", "trusted_projects")


def _untrusted_project_keys(data: dict[str, Any]) -> list[str]:
    risky = [k for k in PROJECT_TRUST_KEYS if k in data]
    if data.get("permission_mode") in ("default", "plan", "debug"):  # narrowing is always fine
        risky.remove("permission_mode")
    if "auto_approve" in risky and data["auto_approve"] is False:
        risky.remove("auto_approve")
    return risky


def is_trusted(workspace: Path, trusted: list[str]) -> bool:
    real = workspace.resolve()
    return any(real == Path(t).expanduser().resolve() for t in trusted)


def load_config(workspace: Path, *, config_file: Path | None = None, flags: dict[str, Any] | None = None) -> Loaded:
    """Merge every layer and validate. `config_file` (from --config) replaces the user file."""
    loaded = Loaded(Config())
    layers: list[tuple[str, dict[str, Any]]] = []
    files = [config_file] if config_file else [user_config_path()]
    files.append(project_config_path(workspace))
    for path in files:
        if path is None or not path.is_file():
            if path is config_file and config_file is not None:
                raise ConfigError(f"{config_file}: no such config file", hint="check the --config path")
            continue
        data = _read_file(path)
        try:
            Config.model_validate(data)
        except ValidationError as e:
            raise ConfigError(f"{path}: {_describe(e)}", hint="see config.example.json for every key") from None
        if unknown := _unknown_keys(Config, data):
            loaded.warnings.append(f"{path}: unknown config keys ignored: {', '.join(unknown)}")
        if path == project_config_path(workspace):
            trusted = [t for _, d in layers for t in d.get("trusted_projects") or []]
            risky = _untrusted_project_keys(data)
            if risky and not is_trusted(workspace, trusted):
                data = {k: v for k, v in data.items() if k not in risky}
                loaded.warnings.append(
                    f"{path}: ignored {', '.join(risky)} because this project is not trusted; to allow them, add "
                    f'"{workspace.resolve()}" to trusted_projects in {user_config_path()}')
        loaded.files.append(path)
        layers.append((str(path), data))
    layers.append(("environment", _env_layer()))
    layers.append(("command line", {k: v for k, v in (flags or {}).items() if v is not None}))
    merged: dict[str, Any] = {}
    for _, data in layers:
        merged = _merge(merged, data)
    # Permission rules add up across layers: a project file must not drop the user's deny rules.
    origins: dict[tuple[str, str], str] = {}
    for where, data in layers:
        perms = data.get("permissions")
        for kind in ("allow", "ask", "deny"):
            for text in (perms.get(kind) or []) if isinstance(perms, dict) else []:
                if isinstance(text, str) and (kind, text) not in origins:
                    origins[(kind, text)] = where
    if origins:
        merged["permissions"] = dict(merged.get("permissions") or {})
        for kind in ("allow", "ask", "deny"):
            merged["permissions"][kind] = [t for (k, t) in origins if k == kind]
    try:
        loaded.config = Config.model_validate(merged)
    except ValidationError as e:  # env or flags
        raise ConfigError(f"{_describe(e)}", hint="check the environment variables and flags") from None
    loaded.config.permissions._origins = origins
    loaded.config.build_limits()  # reject unknown limit names early
    return loaded
