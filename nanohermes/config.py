"""Settings: the config sections (stdlib dataclasses, validated by pydantic) and the layered
loader, and which layer may set what.

Precedence, lowest first: defaults < user file ($XDG_CONFIG_HOME/nanohermes/config.json)
< project file (<workspace>/.nanohermes/config.json) < environment < command-line flags.
Each file is validated on its own so an error names the file and the key; unknown keys
become warnings, never failures.

The sections are plain dataclasses so that a run without config files, whose flags and
environment are plain values, builds its config from the defaults without importing pydantic
(see `_plain_layers`); pydantic is loaded only when there is something to validate
(`Section.from_dict`). A field's metadata holds its description (the README's config
reference is generated from it) and its bounds, which pydantic reads as `Field` arguments.

The project file comes with the repository, so it is treated as written by a stranger: it
may only narrow (`NARROWING` lists every key it may set and how each combines with the
layers below), and every other key is a trust key, applied only when the user config lists
the workspace in `trusted_projects`. The environment and the flags are the person's own.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, Union, get_args, get_origin

from nanohermes.budget import ZERO_ALLOWED, Limits
from nanohermes.dirs import project_config_path, user_config_path
from nanohermes.errors import ConfigError
from nanohermes.modes import Mode
from nanohermes.permissions import DEFAULT_SECRET_FILES
from nanohermes.trust import approved_rules, is_trusted

if TYPE_CHECKING:
    from pydantic import ValidationError

_DIR_NAME = re.compile(r"[^/\\*?\[\]{}!]+")  # a plain folder name: no separators, no glob characters


class _Invalid(ValueError):
    """A section's own check failed (in `__post_init__`). `at` is the key inside the section and
    `value` what it held, so the error names the whole key as a field constraint's would: pydantic
    locates such an error only at the section."""

    def __init__(self, at: tuple[str | int, ...], message: str, value: Any) -> None:
        super().__init__(message)
        self.at = at
        self.value = value


class Section:
    """Base of every config section (each a keyword-only dataclass)."""

    if TYPE_CHECKING:  # what makes it one, to `dataclasses.fields`
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """`data` validated into this section: converted where pydantic converts (text for a
        number), unknown keys ignored; raises pydantic's ValidationError (`_describe` words it)."""
        validated: Self = _adapter(cls).validate_python(data)
        return validated


# Per section, computed once. Plain dicts rather than functools.cache, whose Hashable bound
# mypy checks against a dataclass's instance `__hash__`.
_ADAPTERS: dict[type[Section], Any] = {}
_FIELDS: dict[type[Section], dict[str, dataclasses.Field[Any]]] = {}
_TYPES: dict[type[Section], dict[str, Any]] = {}


def _adapter(cls: type[Section]) -> Any:
    if (adapter := _ADAPTERS.get(cls)) is None:
        # Imported and built on the first validation only: building Config's validator is most
        # of pydantic's cost, and a run without config files never needs it.
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def section_fields(cls: type[Section]) -> dict[str, dataclasses.Field[Any]]:
    """The keys of a section (its init fields: internal state such as `_origins` is not a key)."""
    if (got := _FIELDS.get(cls)) is None:
        got = _FIELDS[cls] = {f.name: f for f in dataclasses.fields(cls) if f.init}
    return got


def section_types(cls: type[Section]) -> dict[str, Any]:
    """Each key's type, evaluated (the annotations are text under `from __future__ import annotations`)."""
    if (got := _TYPES.get(cls)) is None:
        got = _TYPES[cls] = typing.get_type_hints(cls)
    return got


def default_of(f: dataclasses.Field[Any]) -> Any:
    """A field's default value (a fresh one for a factory); `dataclasses.MISSING` when required."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _d(default: Any = ..., text: str = "", **kw: Any) -> Any:
    """A field with its one-line description and its bounds (ge, gt, le, min_length, ...): the
    config reference in the README is generated from these, and pydantic enforces the bounds."""
    meta = {"description": text, **kw}
    if default is ...:
        return field(metadata=meta)
    if callable(default):  # a type or a lambda: build a fresh value per instance
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(kw_only=True)
class WebSearchConfig(Section):
    provider: Literal["duckduckgo", "searxng", "brave", "tavily"] = _d("duckduckgo", "web_search backend")
    searxng_url: str | None = _d(None, "SearXNG instance URL (its JSON API must be enabled)")
    brave_api_key_env: str = _d("BRAVE_API_KEY", "environment variable holding the Brave Search key")
    tavily_api_key_env: str = _d("TAVILY_API_KEY", "environment variable holding the Tavily key")
    brave_url: str = _d("https://api.search.brave.com/res/v1/web/search", "Brave Search endpoint")
    tavily_url: str = _d("https://api.tavily.com/search", "Tavily endpoint")


@dataclass(kw_only=True)
class WebFetchConfig(Section):
    # Host patterns (fnmatch, case-insensitive); "example.com" also covers its subdomains.
    allowed_hosts: list[str] = _d(list, "when non-empty, web_fetch reaches only these hosts")
    denied_hosts: list[str] = _d(list, "hosts web_fetch always refuses, even if allowed")


@dataclass(kw_only=True)
class ShellEnvConfig(Section):
    keep: list[str] = _d(list, "secret variables (nanohermes's key, *_API_KEY, *_TOKEN, *_SECRET, *_PASSWORD) "
                               "that commands, background tasks and MCP servers still inherit")


@dataclass(kw_only=True)
class PermissionsConfig(Section):
    allow: list[str] = _d(list, "rules that run without asking, e.g. run_command(git log *)")
    ask: list[str] = _d(list, "rules that always ask")
    deny: list[str] = _d(list, "rules that are always refused (checked first)")
    secret_files: list[str] = _d(lambda: list(DEFAULT_SECRET_FILES),
                                 "file names whose contents are asked for before a tool or command reads them")
    # (kind, rule text) -> the file or layer that contributed it; filled by load_config.
    _origins: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def origin(self, kind: str, text: str) -> str:
        return self._origins.get((kind, text), "")


# Names that become part of tool names (mcp__<server>__<tool>): the characters providers accept,
# and no "__", which separates the parts.
_EXT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")


def _check_names(names: dict[str, Any], key: str, what: str) -> None:
    for name in names:
        if not _EXT_NAME.match(name) or len(name) > 40:
            raise _Invalid((key,), f"{what} name {name!r} must be 1-40 letters, digits, - or single _", name)


@dataclass(kw_only=True)
class SandboxConfig(Section):
    mode: Literal["auto", "off"] = _d("auto", "auto: commands nobody approved run under the OS sandbox; off: none "
                                               "do (--sandbox); a project file may not turn it off")
    network: bool = _d(False, "let sandboxed commands use the network (a trust key in project files)")
    writable_roots: list[str] = _d(list, "more folders sandboxed commands may write under workspace-write "
                                         "(a trust key in project files)")


@dataclass(kw_only=True)
class McpServerConfig(Section):
    """One MCP server: `command` (stdio) or `url` (streamable HTTP, or the older HTTP+SSE).
    `${VAR}` and `${VAR:-default}` in command, args, env, cwd, url and headers are read from
    the environment when the server starts (the shape Claude Code's `.mcp.json` uses)."""

    type: Literal["stdio", "http", "sse"] | None = _d(None, "transport: stdio (command), http (streamable HTTP at url) "
                                                            "or sse (the older HTTP+SSE at url); null: by the keys given")
    command: str | None = _d(None, "program to start (stdio transport)")
    args: list[str] = _d(list, "its arguments")
    env: dict[str, str] = _d(dict, "extra environment variables for it")
    cwd: str | None = _d(None, "its working directory")
    url: str | None = _d(None, "server URL (streamable HTTP or SSE transport)")
    headers: dict[str, str] = _d(dict, "HTTP headers sent to it")
    trusted: bool = _d(False, "its tools that declare readOnlyHint run without asking, in parallel")

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise _Invalid((), "set either `command` (a stdio server) or `url` (a streamable HTTP or SSE server)",
                          {"command": self.command, "url": self.url})
        if self.type == "stdio" and self.command is None:
            raise _Invalid(("type",), "a stdio server needs `command` (a `url` is for type http or sse)", self.type)
        if self.type in ("http", "sse") and self.url is None:
            raise _Invalid(("type",), f"a {self.type} server needs `url` (a `command` is for type stdio)", self.type)
        if self.url is not None and not self.url.startswith(("http://", "https://", "${")):
            raise _Invalid(("url",), "`url` must start with http:// or https://", self.url)

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        return self.type or ("stdio" if self.command is not None else "http")


@dataclass(kw_only=True)
class McpConfig(Section):
    servers: dict[str, McpServerConfig] = _d(dict, "MCP servers by name: {command, args, env, cwd} or {url, headers}; "
                                                   "a top-level `mcpServers` (the shape of Claude Code, Claude Desktop "
                                                   "and Cursor) adds to these")

    def __post_init__(self) -> None:
        _check_names(self.servers, "servers", "MCP server")


@dataclass(kw_only=True)
class SubagentConfig(Section):
    description: str = _d(..., "what the sub-agent is for (shown to the model)")
    prompt: str = _d("", "its system prompt")
    tools: list[str] | None = _d(None, "the tools it may use; null: the parent's (except sub-agent tools)")
    model: str | None = _d(None, "its model; null: the parent's")
    max_turns: int | None = _d(None, "its model-call limit per task; null: the parent's", ge=1)


@dataclass(kw_only=True)
class Price(Section):
    """Dollars per million tokens, for the cost meter."""

    input_per_mtok: float = _d(..., "dollars per million prompt tokens", ge=0)
    output_per_mtok: float = _d(..., "dollars per million completion tokens", ge=0)


HOOK_EVENTS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "SessionEnd",
                                 "PreCompact", "Notification")


@dataclass(kw_only=True)
class HookCommand(Section):
    type: Literal["command"] = _d("command", "the only kind: a shell command line")
    command: str = _d(..., "the command line, run by /bin/sh in the workspace", min_length=1)
    timeout: float = _d(60.0, "seconds before it is killed (its whole process group)", gt=0, le=3600)


@dataclass(kw_only=True)
class HookGroup(Section):
    matcher: str = _d("", "regular expression matched against the tool name (the whole name); empty or * matches all")
    hooks: list[HookCommand] = _d(list, "the commands to run, in order")
    _origin: str = field(default="", init=False, repr=False, compare=False)  # the file that defined it, for /hooks

    def __post_init__(self) -> None:
        if self.matcher not in ("", "*"):
            try:
                re.compile(self.matcher)
            except re.error as e:
                raise _Invalid(("matcher",), f"matcher {self.matcher!r} is not a regular expression: {e}",
                              self.matcher) from None

    @property
    def origin(self) -> str:
        return self._origin


@dataclass(kw_only=True)
class HooksConfig(Section):
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


@dataclass(kw_only=True)
class Config(Section):
    model: str = _d("gpt-4.1-mini", "model name sent to the endpoint (env NANOHERMES_MODEL, --model)")
    base_url: str = _d("https://api.openai.com/v1", "OpenAI-compatible endpoint (env OPENAI_BASE_URL, --base-url)")
    api_key: str | None = _d(None, "API key; prefer api_key_env so the key stays out of files (--api-key)")
    api_key_env: str = _d("OPENAI_API_KEY", "environment variable holding the API key")
    permission_mode: Mode = _d(Mode.DEFAULT, "default, accept-edits, plan, debug or goal (--mode)")
    auto_approve: bool = _d(False, "approve every call that would ask; mode blocks still apply (--yes)")
    allowed_tools: list[str] = _d(list, "when non-empty, only these tools are offered and run")
    disallowed_tools: list[str] = _d(list, "tools never offered nor run (mcp__server names a whole server)")
    permissions: PermissionsConfig = _d(PermissionsConfig, "allow / ask / deny rules and secret files")
    trusted_projects: list[str] = _d(list, "workspaces whose project config may widen trust (user config only)")
    max_output: int = _d(20_000, "chars: every tool result is clamped to this", ge=100)
    max_turns: int = _d(50, "model calls in one turn before it stops (exit 3 with -p; --max-turns)", ge=1)
    max_parallel_tools: int = _d(10, "concurrency-safe calls run at once", ge=1, le=64)
    max_tools: int = _d(128, "functions the endpoint takes in one request (OpenAI: 128); past it, MCP tools are found "
                             "with tool_search", ge=2)
    wire_api: Literal["chat", "responses"] = _d("chat", "the endpoint's API: chat (chat completions) or responses "
                                                        "(the Responses API, for models served only there; --wire-api)")
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = _d(
        None, "how hard a reasoning model thinks; sent only when set (--reasoning-effort)")
    request_timeout: float = _d(600.0, "seconds one model request may take", gt=0)
    max_retries: int = _d(4, "retries of 429, 5xx, connection errors and dropped streams", ge=0, le=20)
    session_budget_chars: int | None = _d(None, "chars of history that trigger compaction, whatever the model's "
                                                "context window; null: compact_at_share of the window", ge=1000)
    context_window_tokens: int | None = _d(None, "the model's context window in tokens when the endpoint does not "
                                                 "report one and the model is no known family; null: 32768", ge=1024)
    compact_at_share: float = _d(0.8, "share of the context window the conversation may fill before it is compacted",
                                 ge=0.1, le=0.95)
    aggregate_budget_chars: int | None = _d(None, "tool results answering one message before the largest are "
                                                  "saved to files; null: min(200,000, session budget / 2)", ge=100)
    grep_max_files: int = _d(50_000, "files grep and glob visit before they stop", ge=1)
    task_timeout_secs: float = _d(3600.0, "hard timeout of a background task", gt=0)
    search_ignore_dirs: list[str] | None = _d(
        None, "folder names grep and glob skip at any depth; null: the built-in build and cache folders")
    search_ignore_extra: list[str] = _d(list, "folder names added to that list")
    extra_write_roots: list[str] = _d(list, "folders outside the workspace that writes may reach without being protected")
    sandbox: SandboxConfig = _d(SandboxConfig, "the OS sandbox of commands nobody approved (Landlock)")
    shell_env: ShellEnvConfig = _d(ShellEnvConfig, "the environment of commands, background tasks and MCP servers")
    env: dict[str, str] = _d(dict, "variables set for commands, background tasks, hooks and MCP servers, as Claude "
                                   "Code's `env` setting (a trust key in project files)")
    # Any: each value is read by the limit's own type and bounds (`checked_limits`), so that a
    # true or 2.5 is refused rather than read as 1 or kept as a float where a count is meant.
    limits: dict[str, Any] = _d(dict, "any output limit by name (see Limits below): a whole number, or seconds; "
                                      "null where the limit says so")
    web_search: WebSearchConfig = _d(WebSearchConfig, "web_search provider settings")
    web_fetch: WebFetchConfig = _d(WebFetchConfig, "web_fetch host lists")
    mcp: McpConfig = _d(McpConfig, "MCP servers")
    subagents: dict[str, SubagentConfig] = _d(dict, "sub-agents by name")
    summary_model: str | None = _d(None, "a small model that labels each batch of tool calls in the REPL")
    prices: dict[str, Price] = _d(dict, "prices by model name, for the cost meter")
    checkpoints: bool = _d(True, "record what each turn changed in the files, for /undo, /redo and /rewind")
    images_to_model: bool = _d(False, "the model takes images: images a tool returns (MCP image content) reach it as "
                                      "image parts; off, it reads a note naming the saved file")
    hooks: HooksConfig = _d(HooksConfig, "commands run at points of the session (user config or a trusted project)")

    def __post_init__(self) -> None:
        self.permission_mode = Mode(self.permission_mode)  # the enum also when code passes its text
        _check_names(self.subagents, "subagents", "sub-agent")
        for key in ("search_ignore_dirs", "search_ignore_extra"):
            for i, name in enumerate(getattr(self, key) or ()):
                if not (isinstance(name, str) and _DIR_NAME.fullmatch(name)):
                    raise _Invalid((key, i), f"{name!r} is not a plain folder name (no /, \\ or glob characters "
                                            "*?[]{}!)", name)
        if self.limits:
            try:
                self.limits = checked_limits(self.limits)
            except _Invalid as e:
                raise _Invalid(("limits", *e.at), str(e), e.value) from None

    def resolved_api_key(self) -> str | None:
        return self.api_key or os.environ.get(self.api_key_env) or None

    def build_limits(self) -> Limits:
        """The limits in force: the top-level limit keys, overridden by `limits`. Checked again
        here, as a file's are, for a Config built or changed in code."""
        values: dict[str, Any] = {name: getattr(self, name) for name in _TOP_LIMITS}
        if values["session_budget_chars"] is None:  # not set: the context window's budget replaces it (`window`)
            del values["session_budget_chars"]
        values.update(self.limits)
        try:
            return Limits(**checked_limits(values))
        except _Invalid as e:
            name = str(e.at[0])
            key = f"limits.{name}" if name in self.limits else name
            raise ConfigError(f"config key `{key}`: {e} (got {json.dumps(e.value)[:60]})", hint=LIMITS_HINT) from None


LIMITS_HINT = "every limit is listed, with its default, in the Limits table of the README"
# Limits that are also top-level keys: `limits.<name>` overrides the key and obeys its bounds.
_TOP_LIMITS = ("max_output", "session_budget_chars", "aggregate_budget_chars", "grep_max_files", "task_timeout_secs")
_SIGNS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
# name -> (int or float, whether null is allowed, bounds as in field metadata); computed once.
_LIMIT_RULES: dict[str, tuple[type, bool, dict[str, Any]]] = {}


def _limit_rules() -> dict[str, tuple[type, bool, dict[str, Any]]]:
    """Each limit's type from `Limits`, and its bounds: a top-level key's own, else those of
    `Limits`' docstring (at least 1, more than 0 seconds, or 0 for `ZERO_ALLOWED`)."""
    if not _LIMIT_RULES:
        top, hints = section_fields(Config), typing.get_type_hints(Limits)
        for name in Limits.names():
            ann = hints[name]
            args = get_args(ann) if get_origin(ann) in (Union, UnionType) else (ann,)
            kind = next(a for a in args if a is not type(None))
            if name in top:
                bounds = {k: v for k, v in top[name].metadata.items() if k in _SIGNS}
            elif name in ZERO_ALLOWED:
                bounds = {"ge": 0}
            else:  # a count or a size lets at least one through; a time is more than none
                bounds = {"ge": 1} if kind is int else {"gt": 0}
            _LIMIT_RULES[name] = (kind, type(None) in args, bounds)
    return _LIMIT_RULES


def limit_allows(name: str) -> str:
    """What limit `name` takes, in words: "a whole number >= 1", "a number > 0 or null"."""
    kind, nullable, bounds = _limit_rules()[name]
    text = ("a whole number" if kind is int else "a number") + "".join(
        f" {_SIGNS[k]} {v}" for k, v in bounds.items())
    return text + (" or null" if nullable else "")


def checked_limits(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (limits by name) read as `Limits` takes them: text converted where validation
    converts it elsewhere in a file ("2" is 2), anything else refused with `_Invalid` naming the
    limit and what it takes: an unknown name, true/false, 2.5 for a whole number, a value out of
    its bounds, null where the limit has no null."""
    import math

    rules = _limit_rules()
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in rules:
            import difflib

            close = difflib.get_close_matches(name, list(rules), n=1)
            raise _Invalid((name,), "no limit has this name" + (f"; did you mean {close[0]}?" if close else ""),
                          value)
        kind, nullable, bounds = rules[name]
        got: Any = value
        if value is None and nullable:
            out[name] = None
            continue
        if type(value) is not kind and not (kind is float and type(value) is int):
            got = None if value is None or isinstance(value, bool) else _converted(kind, value)
        if got is None or (isinstance(got, float) and not math.isfinite(got)) or \
                not all(_BOUNDS[k](got, bound) for k, bound in bounds.items()):
            raise _Invalid((name,), f"must be {limit_allows(name)}", value)
        out[name] = got
    return out


def _converted(kind: type, value: Any) -> Any:
    """`value` as pydantic reads it for `kind` (int or float) in lax mode, or None."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return None


KeyPath = tuple[str | int, ...]  # where a key is in a file: names, and indexes into lists


def _unknown_keys(section: type[Section], data: dict[str, Any], at: KeyPath = ()) -> list[KeyPath]:
    """Every key of `data` no section declares, in sections at any depth: nested ones, and those
    held in a dict (an MCP server, a sub-agent, a price) or a list (a hook group, a hook command)."""
    out: list[KeyPath] = []
    keys, types = section_fields(section), section_types(section)
    for key, value in data.items():
        if key not in keys:
            out.append((*at, key))
        else:
            out.extend(_unknown_within(types[key], value, (*at, key)))
    return out


def _unknown_within(ann: Any, value: Any, at: KeyPath) -> list[KeyPath]:
    if isinstance(ann, type) and issubclass(ann, Section):
        return _unknown_keys(ann, value, at) if isinstance(value, dict) else []
    origin, args = get_origin(ann), get_args(ann)
    if origin is dict and isinstance(value, dict):
        return [p for k, v in value.items() for p in _unknown_within(args[1], v, (*at, k))]
    if origin is list and isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unknown_within(args[0], v, (*at, i))]
    if origin is Union or origin is UnionType:
        return [p for a in args for p in _unknown_within(a, value, at)]
    return []


def _dotted(at: KeyPath) -> str:
    return ".".join(str(p) for p in at)


def _located(err: ValidationError) -> tuple[tuple[Any, ...], Any]:
    """The whole key of a validation's first error, and the value it held."""
    e = err.errors()[0]
    if isinstance(own := (e.get("ctx") or {}).get("error"), _Invalid):  # a section's own check: name its key
        return tuple(e["loc"]) + own.at, own.value
    return tuple(e["loc"]), e.get("input")


def _describe(err: ValidationError) -> str:
    """The first error of a validation, naming its dotted key, what is wrong and the value given."""
    e = err.errors()[0]
    loc, got = _located(err)
    key = ".".join(str(p) for p in loc) or "(top level)"
    shown = json.dumps(got)[:60] if not isinstance(got, dict) else "an object"
    return f"key `{key}`: {e['msg'].lower()} (got {shown})"


def _validated(data: dict[str, Any], where: str, hint: str) -> Config:
    """`data` validated into a Config; a ConfigError naming `where` (a file, or "" for the
    environment and flags) and the key otherwise."""
    from pydantic import ValidationError

    try:
        return Config.from_dict(data)
    except ValidationError as e:
        if _located(e)[0][:1] == ("limits",):  # the example file lists no limit
            hint = LIMITS_HINT
        raise ConfigError(f"{where}{_describe(e)}", hint=hint) from None
    except RecursionError:
        raise ConfigError(f"{where}nested too deeply", hint="fix the file or move it away") from None


# Nesting levels a config file may have. Settings are at most a few levels deep; the parser
# recurses per level, so a hostile file of 100,000 `[` would crash it instead of being an error.
CONFIG_MAX_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in JSON `text` (brackets inside strings do not count)."""
    depth = deepest = 0
    for m in _BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def read_config_file(path: Path, *, max_depth: int = CONFIG_MAX_DEPTH) -> dict[str, Any]:
    """One config file as a dict; every way it can be wrong is a ConfigError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}", hint="check the path and its permissions") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text", hint="save the file as UTF-8 JSON") from None
    if (depth := json_depth(text)) > max_depth:
        raise ConfigError(f"{path}: nested {depth} levels deep, more than the {max_depth} a config file may have",
                          hint="fix the file or move it away") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}",
                          hint="fix the file or move it away") from None
    except RecursionError:  # the depth check counts what the parser recurses on; kept as a backstop
        raise ConfigError(f"{path}: nested too deeply", hint="fix the file or move it away") from None
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


# -- what a project file may set -------------------------------------------------------------
# Modes from the one that lets the least happen to the one that lets the most: plan refuses
# edits and commands; debug refuses edits but asks for commands; default asks for both;
# accept-edits runs edits unasked; goal runs everything unasked.
MODE_STRICTNESS: tuple[Mode, ...] = (Mode.PLAN, Mode.DEBUG, Mode.DEFAULT, Mode.ACCEPT_EDITS, Mode.GOAL)
# Top-level keys that are limits (a project may lower them, never raise them).
LIMIT_KEYS = ("max_output", "max_turns", "max_parallel_tools", "max_tools", "request_timeout", "max_retries",
              "session_budget_chars", "aggregate_budget_chars", "grep_max_files", "task_timeout_secs")
# The `limits` a project may lower, listed (not "all but some") so that a limit added later
# is a trust key until someone decides. Not edit_diff_chars: it bounds the diff a person
# approves, and a shorter one hides part of what runs.
LOWERABLE_LIMITS: tuple[str, ...] = (
    "max_output", "read_file_max_bytes", "read_file_window_lines", "read_file_line_chars", "binary_sniff_bytes",
    "list_dir_entries", "edit_file_max_bytes", "grep_matches", "grep_file_max_bytes", "grep_line_chars",
    "grep_max_files", "glob_results", "run_command_capture_bytes", "task_capture_bytes", "task_timeout_secs",
    "command_kill_grace_secs", "command_pipe_grace_secs", "git_timeout_secs", "web_fetch_body_bytes",
    "web_fetch_timeout_secs", "web_fetch_max_redirects", "web_search_timeout_secs", "web_search_snippet_chars",
    "skill_body_chars", "project_docs_chars", "todo_items", "memory_text_chars", "memory_search_max_results",
    "memory_busy_timeout_secs", "agent_preview_chars", "session_budget_chars", "aggregate_budget_chars",
    "persisted_preview_chars", "skill_description_chars", "skill_index_chars", "skill_files_listed",
    "mcp_startup_timeout_secs", "mcp_call_timeout_secs", "mcp_log_max_bytes", "mcp_instructions_chars",
    "compact_keep_chars", "compact_item_chars", "compact_summary_chars",
    "read_file_count_bytes", "run_command_max_timeout_secs", "web_search_max_results", "tool_args_max_depth",
    "mcp_tool_specs_chars", "tool_search_results",
)

# Every key an untrusted project may set, and how it combines with the user's value:
#   union      the project's entries are added to the user's (deny and ask rules, secret files, ...)
#   intersect  a non-empty project list keeps only what both lists allow; an empty one changes nothing
#   stricter   applies only when stricter than the user's (permission_mode by MODE_STRICTNESS;
#              auto_approve false)
#   lower      a limit: applies only when lower than the user's
#   project    only about the repository's own files (which folders search skips)
#   sandbox    the whole section applies when it only narrows (mode auto, no network, writable
#              roots the user's list holds); otherwise it is a trust request
# Any other key is a trust key: it names a URL, a command, an environment variable or a
# credential, spends the user's money (models, sub-agents) or changes what the user is told
# (prices); a key added later is a trust key until it is listed here. A value that widens a
# narrowing key (a looser mode, a higher limit, a longer shell_env.keep) is a trust request too.
NARROWING: dict[str, str] = {
    "permissions.deny": "union", "permissions.ask": "union", "permissions.secret_files": "union",
    "disallowed_tools": "union", "web_fetch.denied_hosts": "union",
    "allowed_tools": "intersect", "web_fetch.allowed_hosts": "intersect", "shell_env.keep": "intersect",
    "permission_mode": "stricter", "auto_approve": "stricter",
    "search_ignore_dirs": "project", "search_ignore_extra": "project",
    "sandbox": "sandbox",  # judged whole: it may keep the sandbox on, never turn it off or widen it
    **{k: "lower" for k in LIMIT_KEYS},
    **{f"limits.{n}": "lower" for n in LOWERABLE_LIMITS},
}
# Keys no project file may set, trusted or not: the list of trusted folders itself, and the
# URLs a search key is sent to (a key goes only where the user's own config says).
USER_ONLY: tuple[str, ...] = ("trusted_projects", "web_search.brave_url", "web_search.tavily_url")
# Sections whose keys are judged one by one; any other object (mcp, subagents, prices) is one key.
_SECTIONS = ("permissions", "web_fetch", "web_search", "shell_env", "limits")


def _leaves(data: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key in _SECTIONS and isinstance(value, dict):
            out += [(f"{key}.{k}", v) for k, v in value.items()]
        else:
            out.append((key, value))
    return out


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        data = data.setdefault(p, {})
    data[last] = value


def _host_covers(patterns: list[str], host: str) -> bool:
    import fnmatch

    return any(fnmatch.fnmatchcase(host.lower(), p.lower()) or host.lower().endswith("." + p.lower()) or
               host.lower() == p.lower() for p in patterns)


@dataclass
class Narrowed:
    """The project layer as it applies, and what it asked for that needs trust."""

    data: dict[str, Any] = field(default_factory=dict)
    asks: dict[str, Any] = field(default_factory=dict)  # dotted key -> the project's value, in file order
    user_only: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how a narrowing value was combined, when it is not obvious
    # Added after every key is read (so a later union of the same list cannot drop them):
    # allow lists with nothing in common leave nothing allowed.
    block: dict[str, list[str]] = field(default_factory=dict)


def as_read(project: dict[str, Any], read: Config) -> dict[str, Any]:
    """The project file's narrowing values as validation read them (`read`): "3" for max_turns
    is 3 there, as in a user file, so it is judged as the 3 it sets, never as a request for trust.
    Other keys keep the file's own values (the trust question shows what the file says)."""
    out = dict(project)
    for key, value in project.items():
        if key == "limits" and isinstance(value, dict):
            out[key] = {name: read.limits[name] for name in value}
        elif key in _SECTIONS or key == "sandbox":
            if isinstance(value, dict):
                section = getattr(read, key)
                known = section_fields(type(section))
                out[key] = {k: getattr(section, k) if k in known else v for k, v in value.items()}
        elif key in NARROWING:
            out[key] = getattr(read, key)
    return out


def narrow_project(project: dict[str, Any], base: Config, *, trusted: bool,
                   approved: frozenset[str] = frozenset()) -> Narrowed:
    """Combine a project file's settings with `base` (defaults and user file): see NARROWING.
    `project` holds values as validation reads them (`as_read`), so that a narrowing value
    written as text ("3") is judged as the number it sets.
    `approved`: allow rules the person saved to this project ("always in this project")."""
    out = Narrowed()
    limits = base.build_limits()
    for key, value in _leaves(project):
        if key in USER_ONLY:
            out.user_only.append(key)
            continue
        if key == "permissions.allow" and not trusted and isinstance(value, list):
            mine = [r for r in value if r in approved]
            if mine:
                _set(out.data, key, mine)
            if others := [r for r in value if r not in approved]:
                out.asks[key] = others
            continue
        kind = NARROWING.get(key)
        if kind is None:  # a trust key
            if trusted:
                _set(out.data, key, value)
            else:
                out.asks[key] = value
            continue
        if kind == "project" or key in ("permissions.deny", "permissions.ask"):
            _set(out.data, key, value)  # rules add up across layers in load_config
        elif kind == "union":
            have = _get(base, key)
            _set(out.data, key, [*have, *(v for v in value if v not in have)])
        elif kind == "intersect":
            _intersect(out, key, list(value), list(_get(base, key)), base, trusted)
        elif kind == "stricter":
            looser = (MODE_STRICTNESS.index(value) > MODE_STRICTNESS.index(base.permission_mode)
                      if key == "permission_mode" else bool(value) and not base.auto_approve)
            if looser and not trusted:
                out.asks[key] = value
            else:
                _set(out.data, key, value)
        elif kind == "sandbox":
            have = base.sandbox
            value = value if isinstance(value, dict) else {}
            narrows = (value.get("mode", have.mode) in ("auto", have.mode)
                       and value.get("network", have.network) in (False, have.network)
                       and all(r in have.writable_roots for r in value.get("writable_roots", [])))
            if narrows or trusted:
                _set(out.data, key, value)
            else:
                out.asks[key] = value
        elif kind == "lower":
            name = key.removeprefix("limits.")
            have = getattr(limits, name, None) if name in Limits.names() else getattr(base, name)
            if name == "aggregate_budget_chars" and have is None:
                have = limits.aggregate_chars
            elif name == "compact_keep_chars" and have is None:
                have = limits.keep_chars
            lowers = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
                and (have is None or value <= have)
            if lowers or trusted:
                _set(out.data, key, value)
            else:
                out.asks[key] = value
    for key, extra in out.block.items():
        section, _, name = key.rpartition(".")
        have = (out.data.get(section, {}) if section else out.data).get(name)
        _set(out.data, key, [*(have if have is not None else _get(base, key)), *extra])
    return out


def _get(base: Config, dotted: str) -> Any:
    node: Any = base
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def _intersect(out: Narrowed, key: str, mine: list[str], have: list[str], base: Config, trusted: bool) -> None:
    if key == "shell_env.keep":
        # Keeping a secret variable for commands widens: the project may drop names from the
        # user's list; adding one is a trust request.
        extra = [v for v in mine if v not in have]
        if extra and trusted:
            _set(out.data, key, mine)
            return
        if extra:
            out.asks[key] = extra
        _set(out.data, key, [v for v in have if v in mine])
        return
    if not mine:
        return  # an empty list means "no restriction": it must not lift the user's
    if not have:
        _set(out.data, key, mine)
        return
    if key == "allowed_tools":
        from nanohermes.permissions import names_tool

        both = [t for t in mine if names_tool(have, t)] + [t for t in have if names_tool(mine, t) and t not in mine]
        if not both:  # nothing is in both lists: nothing may run, never "everything"
            _set(out.data, key, have)
            out.block["disallowed_tools"] = have
            out.notes.append(f"allowed_tools share no tool with the user's ({', '.join(have)}): no tool is allowed")
            return
    else:  # web_fetch.allowed_hosts
        both = [h for h in mine if _host_covers(have, h)] + [h for h in have if _host_covers(mine, h) and h not in mine]
        if not both:
            _set(out.data, key, have)
            out.block["web_fetch.denied_hosts"] = ["*"]
            out.notes.append(f"web_fetch.allowed_hosts share no host with the user's ({', '.join(have)}): "
                             "web_fetch reaches no host")
            return
    _set(out.data, key, both)


# Chars of one value shown in the trust question. Not a config limit: the question is about
# the project's config, which must not be able to shorten it.
ASK_VALUE_CHARS = 200


def describe_ask(key: str, value: Any, max_chars: int = ASK_VALUE_CHARS) -> str:
    """One line of the trust question: the key and its value as JSON, so control characters
    and escapes are shown escaped (`\u001b`), never drawn; a long value is cut with a marker."""
    shown = json.dumps(value, ensure_ascii=True)
    if len(shown) > max_chars:
        shown = shown[:max_chars] + f"… ({len(shown) - max_chars} more chars)"
    return f"{key}: {shown}"


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


@dataclass
class Loaded:
    config: Config
    files: list[Path] = field(default_factory=list)  # files that existed and were read
    warnings: list[str] = field(default_factory=list)
    # What the project file asked for that needs trust (dotted key -> value); empty when the
    # project is trusted or asks for nothing.
    asks: dict[str, Any] = field(default_factory=dict)
    user_file: Path | None = None  # where trusted_projects is read from (and saved to)
    project_file: Path | None = None


def _accepts(annotation: Any, value: Any) -> bool:
    """Would validation keep `value` exactly as it is for a field of this type? Only the plain
    types flags and environment variables give are recognised; anything else is left to pydantic."""
    if annotation is str or annotation is bool or annotation is int:
        return type(value) is annotation
    if isinstance(annotation, type) and issubclass(annotation, Enum):  # a mode: its text, which the section reads
        return type(value) in (str, annotation) and value in tuple(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        return type(value) is str and value in get_args(annotation)
    if origin is Union or origin is UnionType:
        return any(value is None if arg is type(None) else _accepts(arg, value) for arg in get_args(annotation))
    return False


_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {"ge": operator.ge, "gt": operator.gt, "le": operator.le,
                                                   "lt": operator.lt}


def _plain_layers(merged: dict[str, Any]) -> bool:
    """True when every value is one validation would accept unchanged (a known top-level key,
    its exact plain type, within its bounds): then `Config(**merged)` is what validating would
    give, without importing pydantic."""
    keys, types = section_fields(Config), section_types(Config)
    for key, value in merged.items():
        if key not in keys or not _accepts(types[key], value):
            return False
        for name, bound in keys[key].metadata.items():
            if name == "description" or value is None:
                continue
            check = _BOUNDS.get(name)  # another constraint (a length, a pattern): left to pydantic
            if check is None or not check(value, bound):
                return False
    return True


def load_config(workspace: Path, *, config_file: Path | None = None, flags: dict[str, Any] | None = None) -> Loaded:
    """Merge every layer and validate. `config_file` (from --config) replaces the user file."""
    from nanohermes.claude_files import Layer, project_layers

    loaded = Loaded(Config(), user_file=config_file or user_config_path())
    layers: list[tuple[str, dict[str, Any]]] = []
    project = project_config_path(workspace)
    files: list[Path | Layer] = [config_file] if config_file else [user_config_path()]
    # A --config naming the project file makes it the person's own file, read once, as theirs.
    if not (config_file is not None and config_file.resolve() == project.resolve()):
        files += [*project_layers(workspace, read_config_file), project]  # Claude Code's files below ours
    user: dict[str, Any] = {}
    for source in files:
        if isinstance(source, Layer):  # one of Claude Code's files, already in our shape
            path, data = source.path, source.data
            loaded.warnings += source.notes
        elif not source.is_file():
            if source is config_file and config_file is not None:
                raise ConfigError(f"{config_file}: no such config file", hint="check the --config path")
            continue
        else:
            path, data = source, fold_mcp_servers(read_config_file(source), source)
        read = _validated(data, f"{path}: ", hint="see config.example.json for every key")
        if unknown := _unknown_keys(Config, data):
            loaded.warnings.append(f"{path}: unknown config keys ignored: {', '.join(map(_dotted, unknown))}")
            data = _drop(data, unknown)
        if source is project or isinstance(source, Layer):
            trusted = is_trusted(workspace, list(user.get("trusted_projects") or []))
            below = Config.from_dict(user)  # the user file, validated above
            approved = approved_rules(workspace) if source is project else frozenset()
            narrowed = narrow_project(as_read(data, read), below, trusted=trusted, approved=approved)
            data = narrowed.data
            if source is project:
                loaded.project_file = path
                loaded.asks.update(narrowed.asks)
            elif narrowed.asks:
                # Claude Code's files ask under their own names, so the question says where each
                # ask is from; their MCP servers one by one, so it lists them.
                loaded.project_file = loaded.project_file or path
                loaded.asks.update(_asks_of(path.relative_to(workspace), narrowed.asks))
            if narrowed.asks:
                loaded.warnings.append(
                    f"{path}: ignored {', '.join(narrowed.asks)} because this project is not trusted; to allow them, "
                    f'add "{workspace.resolve()}" to trusted_projects in {loaded.user_file}')
            if narrowed.user_only:
                loaded.warnings.append(f"{path}: ignored {', '.join(narrowed.user_only)}: only the user config "
                                       f"({loaded.user_file}) may set them")
            loaded.warnings += [f"{path}: {n}" for n in narrowed.notes]
        else:
            user = data
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
    # Without files, the layers are the environment and flags: plain values, mostly.
    if not loaded.files and _plain_layers(merged):
        loaded.config = Config(**merged)
    else:  # each file was validated on its own above, so an error here comes from the environment or a flag
        loaded.config = _validated(merged, "", hint="check the environment variables and flags")
    loaded.config.permissions._origins = origins
    for event, sources in hook_origins.items():
        for group, origin in zip(loaded.config.hooks.groups(event), sources, strict=False):
            group._origin = origin
    loaded.warnings += _guard_search_keys(loaded.config)
    loaded.config.build_limits()  # reject unknown limit names early
    return loaded


def _asks_of(name: Path, asks: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in asks.items():
        servers = value.get("servers") if key == "mcp" and isinstance(value, dict) else None
        if isinstance(servers, dict) and len(value) == 1:
            out.update({f"{name}: MCP server {server}": entry for server, entry in servers.items()})
        else:
            out[f"{name}: {key}"] = value
    return out


def fold_mcp_servers(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """A top-level `mcpServers` (the shape of Claude Code's `.mcp.json` and `~/.claude.json`, of
    Claude Desktop and Cursor) is `mcp.servers`; a name both hold keeps the `mcp.servers` entry."""
    if "mcpServers" not in data:
        return data
    out = dict(data)
    extra = out.pop("mcpServers")
    mcp = out.get("mcp", {})
    if not isinstance(extra, dict) or not isinstance(mcp, dict) or not isinstance(mcp.get("servers", {}), dict):
        raise ConfigError(f"{path}: `mcpServers` and `mcp.servers` must be objects of servers by name",
                          hint="see config.example.json for the shape")
    out["mcp"] = {**mcp, "servers": {**extra, **mcp.get("servers", {})}}
    return out


def _drop(data: dict[str, Any], keys: list[KeyPath]) -> dict[str, Any]:
    """`data` without the unknown keys (so they never count as a project's trust request)."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    for *parents, last in keys:
        node: Any = out
        for p in parents:
            node = node[p]  # the path was found in this same data
        node.pop(last, None)
    return out


def _guard_search_keys(config: Config) -> list[str]:
    """A search provider's key variable must not be the model's key: that key would go to the
    search provider's URL."""
    ws = config.web_search
    own = {config.api_key_env, "OPENAI_API_KEY"}
    warnings: list[str] = []
    for name in ("brave_api_key_env", "tavily_api_key_env"):
        if getattr(ws, name) in own:
            default = section_fields(WebSearchConfig)[name].default
            warnings.append(f"web_search.{name} names the model's key variable ${getattr(ws, name)}; "
                            f"using ${default} instead, so the model key never goes to a search provider")
            setattr(ws, name, default)
    return warnings
