"""The config's shape: every section (a keyword-only stdlib dataclass, validated by pydantic)
with each key's default, description and bounds, and the checks pydantic cannot make alone
(a section's own `__post_init__`, and the `limits` key, read by each limit's own type).

The sections are plain dataclasses so that a run without config files, whose flags and
environment are plain values, builds its config from the defaults without importing pydantic
(see `validate.plain_layers`), and a file whose values already have their keys' types is
built without it too (`nanohermes.common.plaindata`); pydantic is loaded only when there is something
to convert or refuse (`Section.from_dict`). A field's metadata holds its description (the config reference in
docs/config.md is generated from it) and its bounds, which pydantic reads as `Field` arguments.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import operator
import os
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field
from types import UnionType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, Union, get_args, get_origin

from nanohermes.common.budget import ZERO_ALLOWED, Limits
from nanohermes.common.errors import ConfigError
from nanohermes.common.modes import Effort, Mode, SandboxMode, Wire
from nanohermes.common.plaindata import NOT_PLAIN, made
from nanohermes.guard.secrets import DEFAULT_SECRET_FILES

_DIR_NAME = re.compile(r"[^/\\*?\[\]{}!]+")  # a plain folder name: no separators, no glob characters
# Where each layer's permission rules came from: (allow, ask or deny; the rule's text) -> the
# file or layer ("environment", "command line") that contributed it.
RuleOrigins = Mapping[tuple[str, str], str]


class Invalid(ValueError):
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
        number), unknown keys ignored; raises pydantic's ValidationError (`validate.validated` words it).
        Data whose every value already has its key's type is built without pydantic (`plaindata`)."""
        validated: Self = made(cls, data)
        if validated is NOT_PLAIN:
            validated = _adapter(cls).validate_python(data)
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
    """The keys of a section: its init fields (neither internal state such as `_origins` nor what
    only the loader passes, such as `origins`, is a key)."""
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
    config reference in docs/config.md is generated from these, and pydantic enforces the bounds."""
    meta = {"description": text, **kw}
    if default is ...:
        return field(metadata=meta)
    if callable(default):  # a type or a lambda: build a fresh value per instance
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(kw_only=True)
class WebSearchConfig(Section):
    """`web_search`: which search service web_search asks, and where its key is."""

    provider: Literal["duckduckgo", "searxng", "brave", "tavily"] = _d("duckduckgo", "web_search backend")
    searxng_url: str | None = _d(None, "SearXNG instance URL (its JSON API must be enabled)")
    brave_api_key_env: str = _d("BRAVE_API_KEY", "environment variable holding the Brave Search key")
    tavily_api_key_env: str = _d("TAVILY_API_KEY", "environment variable holding the Tavily key")
    brave_url: str = _d("https://api.search.brave.com/res/v1/web/search", "Brave Search endpoint")
    tavily_url: str = _d("https://api.tavily.com/search", "Tavily endpoint")


@dataclass(kw_only=True)
class WebFetchConfig(Section):
    """`web_fetch`: the hosts web_fetch may and may not reach."""

    # Host patterns (fnmatch, case-insensitive); "example.com" also covers its subdomains.
    allowed_hosts: list[str] = _d(list, "when non-empty, web_fetch reaches only these hosts")
    denied_hosts: list[str] = _d(list, "hosts web_fetch always refuses, even if allowed")


@dataclass(kw_only=True)
class ShellEnvConfig(Section):
    """`shell_env`: the secret variables commands still inherit."""

    keep: list[str] = _d(list, "secret variables (nanohermes's key, *_API_KEY, *_TOKEN, *_SECRET, *_PASSWORD) "
                               "that commands, background tasks and MCP servers still inherit")


@dataclass(kw_only=True)
class PermissionsConfig(Section):
    """`permissions`: the allow, ask and deny rules, added up across the config files."""

    allow: list[str] = _d(list, "rules that run without asking, e.g. run_command(git log *)")
    ask: list[str] = _d(list, "rules that always ask")
    deny: list[str] = _d(list, "rules that are always refused (checked first)")
    secret_files: list[str] = _d(lambda: list(DEFAULT_SECRET_FILES),
                                 "file names whose contents are asked for before a tool or command reads them")
    # Not a key (`section_fields` lists none, and a file's `origins` is dropped as unknown before
    # it is validated): the loader passes where each rule came from when it builds the section.
    origins: InitVar[RuleOrigins | None] = None
    _origins: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self, origins: RuleOrigins | None) -> None:
        self._origins = dict(origins or {})

    def origin(self, kind: str, text: str) -> str:
        """The file or layer that contributed rule `text` of `kind` (allow, ask, deny); "" if unknown."""
        return self._origins.get((kind, text), "")


# Names that become part of tool names (mcp__<server>__<tool>): the characters providers accept,
# and no "__", which separates the parts.
_EXT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")


def _check_names(names: dict[str, Any], key: str, what: str) -> None:
    for name in names:
        if not _EXT_NAME.match(name) or len(name) > 40:
            raise Invalid((key,), f"{what} name {name!r} must be 1-40 letters, digits, - or single _", name)


@dataclass(kw_only=True)
class SandboxConfig(Section):
    """`sandbox`: the OS sandbox of the commands nobody approved."""

    mode: SandboxMode = _d("auto", "auto: commands nobody approved run under the OS sandbox; off: none "
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
    cwd: str | None = _d(None, "its working directory, relative to the workspace; null: the workspace for a trusted "
                               "project's own server, else a private folder (see docs/mcp.md)")
    url: str | None = _d(None, "server URL (streamable HTTP or SSE transport)")
    headers: dict[str, str] = _d(dict, "HTTP headers sent to it")
    trusted: bool = _d(False, "its tools that declare readOnlyHint run without asking, in parallel")
    # Not a key, as `PermissionsConfig.origins`: the loader says whether a project file defined
    # it (a trusted project's own server starts in the workspace; see `programs.person_start`).
    from_project: InitVar[bool] = False
    _project: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self, from_project: bool) -> None:
        self._project = from_project
        if (self.command is None) == (self.url is None):
            raise Invalid((), "set either `command` (a stdio server) or `url` (a streamable HTTP or SSE server)",
                         {"command": self.command, "url": self.url})
        if self.type == "stdio" and self.command is None:
            raise Invalid(("type",), "a stdio server needs `command` (a `url` is for type http or sse)", self.type)
        if self.type in ("http", "sse") and self.url is None:
            raise Invalid(("type",), f"a {self.type} server needs `url` (a `command` is for type stdio)", self.type)
        if self.url is not None and not self.url.startswith(("http://", "https://", "${")):
            raise Invalid(("url",), "`url` must start with http:// or https://", self.url)

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        return self.type or ("stdio" if self.command is not None else "http")

    @property
    def project_own(self) -> bool:
        """Defined (or last changed) by a project file, which applies only in a trusted project."""
        return self._project


@dataclass(kw_only=True)
class McpConfig(Section):
    """`mcp`: the MCP servers, by name."""

    servers: dict[str, McpServerConfig] = _d(dict, "MCP servers by name: {command, args, env, cwd} or {url, headers}; "
                                                   "a top-level `mcpServers` (the shape of Claude Code, Claude Desktop "
                                                   "and Cursor) adds to these")

    def __post_init__(self) -> None:
        _check_names(self.servers, "servers", "MCP server")


@dataclass(kw_only=True)
class SubagentConfig(Section):
    """One sub-agent of `subagents`: what it is for, its prompt, tools, model and limit."""

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


HOOK_TIMEOUT_MAX_SECS = 3600  # the longest a hook may run


@dataclass(kw_only=True)
class HookCommand(Section):
    """One command of a hook group."""

    type: Literal["command"] = _d("command", "the only kind: a shell command line")
    command: str = _d(..., "the command line, run by /bin/sh (in the workspace for a trusted project's own "
                                 "hook, in a folder of its own for yours; see docs/hooks.md)", min_length=1)
    timeout: float = _d(60.0, "seconds before it is killed (its whole process group)", gt=0, le=HOOK_TIMEOUT_MAX_SECS)
    args: list[str] | None = _d(None, "arguments: `command` is then the program, run with exactly these words (no "
                                      "shell), ${CLAUDE_PROJECT_DIR} in any of them replaced by the workspace")
    # Claude Code's `if` (a file may spell it so: the loader reads it as this key).
    condition: str = _d("", "PreToolUse/PostToolUse only: run only for calls this permission rule matches, such as "
                            "Bash(git push:*) or Write(.env*) (Claude Code's `if`, which may be written instead)")


@dataclass(kw_only=True)
class HookGroup(Section):
    """A hook event's group: which tools it matches, and its commands."""

    matcher: str = _d("", "tool names (Bash|Edit, run_command) or a regular expression searched in the tool name; "
                          "empty or * matches all")
    hooks: list[HookCommand] = _d(list, "the commands to run, in order")
    # Not keys, as `PermissionsConfig.origins`: the file that defined the group, for /hooks, and
    # whether it is a project file (a trusted project's own hooks run in the workspace).
    defined_in: InitVar[str] = ""
    from_project: InitVar[bool] = False
    _origin: str = field(default="", init=False, repr=False, compare=False)
    _project: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self, defined_in: str, from_project: bool) -> None:
        self._origin = defined_in
        self._project = from_project
        if self.matcher.strip() not in ("", "*") and not re.fullmatch(r"[A-Za-z0-9_\- ,|]*", self.matcher):
            try:
                re.compile(self.matcher)
            except re.error as e:
                raise Invalid(("matcher",), f"matcher {self.matcher!r} is not a regular expression: {e}",
                             self.matcher) from None

    @property
    def origin(self) -> str:
        """The file that defined the group; "" for one built in code."""
        return self._origin

    @property
    def project_own(self) -> bool:
        """Defined by a project file, which applies only in a trusted project."""
        return self._project


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
    """The whole config: every layer (files, environment, flags) added up and validated."""

    model: str = _d("gpt-4.1-mini", "model name sent to the endpoint (env NANOHERMES_MODEL, --model)")
    base_url: str = _d("https://api.openai.com/v1", "OpenAI-compatible endpoint (env OPENAI_BASE_URL, --base-url)")
    api_key: str | None = _d(None, "API key; prefer api_key_env so the key stays out of files (--api-key)")
    api_key_env: str = _d("OPENAI_API_KEY", "environment variable holding the API key")
    permission_mode: Mode = _d(Mode.DEFAULT, "default, accept-edits, plan, debug or goal (--mode)")
    auto_approve: bool = _d(False, "approve every call that would ask; mode blocks still apply (--yes)")
    dangerously_skip_permissions: bool = _d(
        False, "run every call as if a person approved it: protected writes too, commands outside the sandbox; "
        "deny rules and mode blocks still apply. For a throwaway machine only (user config or "
        "--dangerously-skip-permissions)")
    allowed_tools: list[str] = _d(list, "when non-empty, only these tools are offered and run")
    disallowed_tools: list[str] = _d(list, "tools never offered nor run (mcp__server names a whole server)")
    permissions: PermissionsConfig = _d(PermissionsConfig, "allow / ask / deny rules and secret files")
    trusted_projects: list[str] = _d(list, "workspaces whose project config may widen trust (user config only)")
    max_output: int = _d(20_000, "chars: every tool result is clamped to this", ge=100)
    max_turns: int = _d(50, "model calls in one turn before it stops (exit 3 with -p; --max-turns)", ge=1)
    max_parallel_tools: int = _d(10, "concurrency-safe calls run at once", ge=1, le=64)
    max_tools: int = _d(128, "functions the endpoint takes in one request (OpenAI: 128); past it, MCP tools are found "
                             "with tool_search", ge=2)
    wire_api: Wire = _d("chat", "the endpoint's API: chat (chat completions) or responses "
                                                        "(the Responses API, for models served only there; --wire-api)")
    reasoning_effort: Effort | None = _d(
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
    limits: dict[str, Any] = _d(dict, "any output limit by name (see docs/limits.md): a whole number, or seconds; "
                                      "null where the limit says so")
    web_search: WebSearchConfig = _d(WebSearchConfig, "web_search provider settings")
    web_fetch: WebFetchConfig = _d(WebFetchConfig, "web_fetch host lists")
    mcp: McpConfig = _d(McpConfig, "MCP servers")
    subagents: dict[str, SubagentConfig] = _d(dict, "sub-agents by name")
    model_aliases: dict[str, str] = _d(dict, "models that command and agent files name (Claude Code's sonnet, opus, "
                                             "haiku; a full id such as claude-sonnet-4-0 goes by its family) mapped "
                                             "to models of this endpoint")
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
                    raise Invalid((key, i), f"{name!r} is not a plain folder name (no /, \\ or glob characters "
                                           "*?[]{}!)", name)
        if self.limits:
            try:
                self.limits = checked_limits(self.limits)
            except Invalid as e:
                raise Invalid(("limits", *e.at), str(e), e.value) from None

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
        except Invalid as e:
            name = str(e.at[0])
            key = f"limits.{name}" if name in self.limits else name
            raise ConfigError(f"config key `{key}`: {e} (got {json.dumps(e.value)[:60]})", hint=LIMITS_HINT) from None


LIMITS_HINT = "every limit is listed, with its default, in docs/limits.md"
# Limits that are also top-level keys: `limits.<name>` overrides the key and obeys its bounds.
_TOP_LIMITS = ("max_output", "session_budget_chars", "aggregate_budget_chars", "grep_max_files", "task_timeout_secs")
_SIGNS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
# A bound of field metadata (as pydantic reads it) as a check: BOUNDS["ge"](value, bound).
BOUNDS: dict[str, Callable[[Any, Any], bool]] = {"ge": operator.ge, "gt": operator.gt, "le": operator.le,
                                                  "lt": operator.lt}
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
    converts it elsewhere in a file ("2" is 2), anything else refused with `Invalid` naming the
    limit and what it takes: an unknown name, true/false, 2.5 for a whole number, a value out of
    its bounds, null where the limit has no null."""

    rules = _limit_rules()
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name not in rules:
            close = difflib.get_close_matches(name, list(rules), n=1)
            raise Invalid((name,), "no limit has this name" + (f"; did you mean {close[0]}?" if close else ""),
                         value)
        kind, nullable, bounds = rules[name]
        got: Any = value
        if value is None and nullable:
            out[name] = None
            continue
        if type(value) is not kind and not (kind is float and type(value) is int):
            got = None if value is None or isinstance(value, bool) else _converted(kind, value)
        if got is None or (isinstance(got, float) and not math.isfinite(got)) or \
                not all(BOUNDS[k](got, bound) for k, bound in bounds.items()):
            raise Invalid((name,), f"must be {limit_allows(name)}", value)
        out[name] = got
    return out


def _converted(kind: type, value: Any) -> Any:
    """`value` as pydantic reads it for `kind` (int or float) in lax mode, or None."""
    # pydantic only for a value that needs converting: off the -p start
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return None

