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
from nanohermes.dirs import config_home
from nanohermes.errors import ConfigError
from nanohermes.permissions import DEFAULT_SECRET_FILES

Mode = Literal["default", "accept-edits", "plan", "debug", "goal"]
MODES: tuple[str, ...] = ("default", "accept-edits", "plan", "debug", "goal")
_DIR_NAME = r"^[^/\\*?\[\]{}!]+$"  # a plain folder name: no separators, no glob characters


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", validate_assignment=True)


def _d(default: Any = ..., text: str = "", **kw: Any) -> Any:
    """A field with its one-line description: the config reference in the README is generated from these."""
    if callable(default):  # a type or a lambda: build a fresh value per model
        return Field(default_factory=default, description=text, **kw)
    return Field(default, description=text, **kw)


class WebSearchConfig(_Section):
    provider: Literal["duckduckgo", "searxng", "brave", "tavily"] = _d("duckduckgo", "web_search backend")
    searxng_url: str | None = _d(None, "SearXNG instance URL (its JSON API must be enabled)")
    brave_api_key_env: str = _d("BRAVE_API_KEY", "environment variable holding the Brave Search key")
    tavily_api_key_env: str = _d("TAVILY_API_KEY", "environment variable holding the Tavily key")
    brave_url: str = _d("https://api.search.brave.com/res/v1/web/search", "Brave Search endpoint")
    tavily_url: str = _d("https://api.tavily.com/search", "Tavily endpoint")


class WebFetchConfig(_Section):
    # Host patterns (fnmatch, case-insensitive); "example.com" also covers its subdomains.
    allowed_hosts: list[str] = _d(list, "when non-empty, web_fetch reaches only these hosts")
    denied_hosts: list[str] = _d(list, "hosts web_fetch always refuses, even if allowed")


class PermissionsConfig(_Section):
    allow: list[str] = _d(list, "rules that run without asking, e.g. run_command(git log *)")
    ask: list[str] = _d(list, "rules that always ask")
    deny: list[str] = _d(list, "rules that are always refused (checked first)")
    secret_files: list[str] = _d(lambda: list(DEFAULT_SECRET_FILES),
                                 "file names whose contents are asked for before a tool or command reads them")
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


class SandboxConfig(_Section):
    mode: Literal["auto", "off"] = _d("auto", "auto: commands nobody approved run under the OS sandbox; off: none "
                                               "do (--sandbox); a project file may not turn it off")
    network: bool = _d(False, "let sandboxed commands use the network (a trust key in project files)")
    writable_roots: list[str] = _d(list, "more folders sandboxed commands may write under workspace-write "
                                         "(a trust key in project files)")


class McpServerConfig(_Section):
    """One MCP server: `command` (stdio) or `url` (streamable HTTP)."""

    command: str | None = _d(None, "program to start (stdio transport)")
    args: list[str] = _d(list, "its arguments")
    env: dict[str, str] = _d(dict, "extra environment variables for it")
    cwd: str | None = _d(None, "its working directory")
    url: str | None = _d(None, "server URL (streamable HTTP transport)")
    headers: dict[str, str] = _d(dict, "HTTP headers sent to it")
    trusted: bool = _d(False, "its tools that declare readOnlyHint run without asking, in parallel")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either `command` (a stdio server) or `url` (a streamable HTTP server)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        return self


class McpConfig(_Section):
    servers: dict[str, McpServerConfig] = _d(dict, "MCP servers by name: {command, args, env, cwd} or {url, headers}")

    @field_validator("servers")
    @classmethod
    def _names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        _check_names(v, "MCP server")
        return v


class SubagentConfig(_Section):
    description: str = _d(..., "what the sub-agent is for (shown to the model)")
    prompt: str = _d("", "its system prompt")
    tools: list[str] | None = _d(None, "the tools it may use; null: the parent's (except sub-agent tools)")
    model: str | None = _d(None, "its model; null: the parent's")
    max_turns: int | None = _d(None, "its model-call limit per task; null: the parent's", ge=1)


class Price(_Section):
    """Dollars per million tokens, for the cost meter."""

    input_per_mtok: float = _d(..., "dollars per million prompt tokens", ge=0)
    output_per_mtok: float = _d(..., "dollars per million completion tokens", ge=0)


HOOK_EVENTS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "SessionEnd",
                                 "PreCompact", "Notification")


class HookCommand(_Section):
    type: Literal["command"] = _d("command", "the only kind: a shell command line")
    command: str = _d(..., "the command line, run by /bin/sh in the workspace", min_length=1)
    timeout: float = _d(60.0, "seconds before it is killed (its whole process group)", gt=0, le=3600)


class HookGroup(_Section):
    matcher: str = _d("", "regular expression matched against the tool name (the whole name); empty or * matches all")
    hooks: list[HookCommand] = _d(list, "the commands to run, in order")
    _origin: str = PrivateAttr(default="")  # the file that defined it, for /hooks

    @field_validator("matcher")
    @classmethod
    def _regex(cls, v: str) -> str:
        if v not in ("", "*"):
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"matcher {v!r} is not a regular expression: {e}") from None
        return v

    @property
    def origin(self) -> str:
        return self._origin


class HooksConfig(_Section):
    """Commands run at points of a session; each event takes a list of {matcher, hooks}."""

    PreToolUse: list[HookGroup] = _d(list, "before a tool call: may allow, deny, ask or rewrite it")
    PostToolUse: list[HookGroup] = _d(list, "after a tool call succeeded: may add a reason for the model")
    UserPromptSubmit: list[HookGroup] = _d(list, "before a prompt is sent: may block it or add context")
    Stop: list[HookGroup] = _d(list, "when the model has answered: may send it back to work with a reason")
    SessionStart: list[HookGroup] = _d(list, "when a session starts or is resumed: may add context")
    SessionEnd: list[HookGroup] = _d(list, "when a session ends")
    PreCompact: list[HookGroup] = _d(list, "before the history is compacted")
    Notification: list[HookGroup] = _d(list, "when nanohermes waits for you (an approval, a finished turn)")

    def groups(self, event: str) -> list[HookGroup]:
        groups: list[HookGroup] = getattr(self, event)
        return groups


class Config(_Section):
    model: str = _d("gpt-4.1-mini", "model name sent to the endpoint (env NANOHERMES_MODEL, --model)")
    base_url: str = _d("https://api.openai.com/v1", "OpenAI-compatible endpoint (env OPENAI_BASE_URL, --base-url)")
    api_key: str | None = _d(None, "API key; prefer api_key_env so the key stays out of files (--api-key)")
    api_key_env: str = _d("OPENAI_API_KEY", "environment variable holding the API key")
    permission_mode: Mode = _d("default", "default, accept-edits, plan, debug or goal (--mode)")
    auto_approve: bool = _d(False, "approve every call that would ask; mode blocks still apply (--yes)")
    allowed_tools: list[str] = _d(list, "when non-empty, only these tools are offered and run")
    disallowed_tools: list[str] = _d(list, "tools never offered nor run (mcp__server names a whole server)")
    permissions: PermissionsConfig = _d(PermissionsConfig, "allow / ask / deny rules and secret files")
    trusted_projects: list[str] = _d(list, "workspaces whose project config may widen trust (user config only)")
    max_output: int = _d(20_000, "chars: every tool result is clamped to this", ge=100)
    max_turns: int = _d(50, "model calls in one turn before it stops (exit 3 with -p; --max-turns)", ge=1)
    max_parallel_tools: int = _d(10, "concurrency-safe calls run at once", ge=1, le=64)
    wire_api: Literal["chat", "responses"] = _d("chat", "the endpoint's API: chat (chat completions) or responses "
                                                        "(the Responses API, for models served only there; --wire-api)")
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = _d(
        None, "how hard a reasoning model thinks; sent only when set (--reasoning-effort)")
    request_timeout: float = _d(600.0, "seconds one model request may take", gt=0)
    max_retries: int = _d(4, "retries of 429, 5xx, connection errors and dropped streams", ge=0, le=20)
    session_budget_chars: int = _d(120_000, "history size that triggers compaction", ge=1000)
    aggregate_budget_chars: int | None = _d(None, "tool results answering one message before the largest are "
                                                  "saved to files; null: min(200,000, session budget / 2)", ge=100)
    grep_max_files: int = _d(50_000, "files grep and glob visit before they stop", ge=1)
    task_timeout_secs: float = _d(3600.0, "hard timeout of a background task", gt=0)
    search_ignore_dirs: list[Annotated[str, Field(pattern=_DIR_NAME)]] | None = _d(
        None, "folder names grep and glob skip at any depth; null: the built-in build and cache folders")
    search_ignore_extra: list[Annotated[str, Field(pattern=_DIR_NAME)]] = _d(list, "folder names added to that list")
    extra_write_roots: list[str] = _d(list, "folders outside the workspace that writes may reach without being protected")
    sandbox: SandboxConfig = _d(SandboxConfig, "the OS sandbox of commands nobody approved (Landlock)")
    limits: dict[str, int | float] = _d(dict, "any output limit by name (see Limits below)")
    web_search: WebSearchConfig = _d(WebSearchConfig, "web_search provider settings")
    web_fetch: WebFetchConfig = _d(WebFetchConfig, "web_fetch host lists")
    mcp: McpConfig = _d(McpConfig, "MCP servers")
    subagents: dict[str, SubagentConfig] = _d(dict, "sub-agents by name")
    summary_model: str | None = _d(None, "a small model that labels each batch of tool calls in the REPL")
    prices: dict[str, Price] = _d(dict, "prices by model name, for the cost meter")
    checkpoints: bool = _d(True, "record the files before each turn, for /rewind and /undo")
    hooks: HooksConfig = _d(HooksConfig, "commands run at points of the session (user config or a trusted project)")

    @field_validator("subagents")
    @classmethod
    def _subagent_names(cls, v: dict[str, SubagentConfig]) -> dict[str, SubagentConfig]:
        _check_names(v, "sub-agent")
        return v

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
                      "extra_write_roots", "trusted_projects", "hooks")


def _untrusted_project_keys(data: dict[str, Any]) -> list[str]:
    risky = [k for k in PROJECT_TRUST_KEYS if k in data]
    if data.get("permission_mode") in ("default", "plan", "debug"):  # narrowing is always fine
        risky.remove("permission_mode")
    if "auto_approve" in risky and data["auto_approve"] is False:
        risky.remove("auto_approve")
    sandbox = data.get("sandbox")
    if isinstance(sandbox, dict) and (sandbox.get("mode", "auto") != "auto" or sandbox.get("network", False) is not False
                                      or sandbox.get("writable_roots", []) != []):
        risky.append("sandbox")  # a project may keep the sandbox on, never turn it off or widen it
    return risky


def _merge_hooks(layers: list[tuple[str, dict[str, Any]]], merged: dict[str, Any]) -> dict[str, list[str]]:
    """Hooks add up across layers (a project's never drop the user's); returns each event's
    group origins, in order."""
    origins: dict[str, list[str]] = {}
    groups: dict[str, list[Any]] = {}
    for where, data in layers:
        hooks = data.get("hooks")
        for event in HOOK_EVENTS:
            for group in (hooks.get(event) or []) if isinstance(hooks, dict) else []:
                groups.setdefault(event, []).append(group)
                origins.setdefault(event, []).append(where)
    if groups:
        merged["hooks"] = {**(merged.get("hooks") or {}), **groups}
    return origins


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
    hook_origins = _merge_hooks(layers, merged)
    try:
        loaded.config = Config.model_validate(merged)
    except ValidationError as e:  # env or flags
        raise ConfigError(f"{_describe(e)}", hint="check the environment variables and flags") from None
    loaded.config.permissions._origins = origins
    for event, sources in hook_origins.items():
        for group, origin in zip(loaded.config.hooks.groups(event), sources):
            group._origin = origin
    loaded.config.build_limits()  # reject unknown limit names early
    return loaded
