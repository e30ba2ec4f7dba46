"""The layers and how they add up. Precedence, lowest first: defaults < user file
($XDG_CONFIG_HOME/nanohermes/config.json) < project files (Claude Code's, then
<workspace>/.nanohermes/config.json) < environment < command-line flags.

Each file is validated on its own so an error names the file and the key; unknown keys
become warnings, never failures. A project file is narrowed before it joins the others
(`narrow`). A later layer's value replaces an earlier one's, key by key, except where a
project must not drop what the user set: permission rules and hooks add up across layers,
each remembering the file or layer it came from.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from nanohermes.common.dirs import project_config_path, user_config_path
from nanohermes.common.errors import ConfigError
from nanohermes.config.claude_files import Layer, fold_conditions, project_layers, user_layer
from nanohermes.config.narrow import NARROWING, Narrowed, as_read, narrow_project
from nanohermes.config.schema import HOOK_EVENTS, Config, RuleOrigins
from nanohermes.config.validate import (
    KeyPath,
    dotted,
    guard_search_keys,
    near_miss,
    plain_layers,
    unknown_keys,
    validated,
    without,
)
from nanohermes.guard.trust import approved_rules, is_trusted

# Nesting levels a config file may have. Settings are at most a few levels deep; the parser
# recurses per level, so a hostile file of 100,000 `[` would crash it instead of being an error.
CONFIG_MAX_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_RULE_KINDS = ("allow", "ask", "deny")
Layers = list[tuple[str, dict[str, Any]]]  # (where a layer came from: a file, "environment", "command line"; its data)


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


@dataclass
class Loaded:
    """The config as loaded, with what loading it found: the files read, warnings, trust asks."""

    config: Config
    files: list[Path] = field(default_factory=list)  # files that existed and were read
    warnings: list[str] = field(default_factory=list)
    # What the project file asked for that needs trust (dotted key -> value); empty when the
    # project is trusted or asks for nothing.
    asks: dict[str, Any] = field(default_factory=dict)
    user_file: Path | None = None  # where trusted_projects is read from (and saved to)
    project_file: Path | None = None
    # Where the model key came from, in the words of Claude Code's `apiKeySource`: the variable's
    # name (OPENAI_API_KEY, or the one api_key_env names), "user" (the person's config file or
    # --config), "project" (a project file), "--api-key", or "none".
    key_source: str = "none"


def load_config(workspace: Path, *, config_file: Path | None = None, flags: dict[str, Any] | None = None) -> Loaded:
    """Merge every layer and validate. `config_file` (from --config) replaces the user file."""
    files = _Files(workspace, user_file=config_file or user_config_path())
    for source in _sources(workspace, config_file):
        files.read(source)
    layers = [*files.layers, ("environment", _env_layer()),
              ("command line", {k: v for k, v in (flags or {}).items() if v is not None})]
    config, warnings = _built(layers, from_files=bool(files.read_paths), project=frozenset(files.project_layers))
    return Loaded(config, files=files.read_paths, warnings=files.warnings + warnings, asks=files.asks,
                  user_file=files.user_file, project_file=files.project_file,
                  key_source=_key_source(layers, config, files.user_file))


def _key_source(layers: Layers, config: Config, user_file: Path) -> str:
    """Where `config.resolved_api_key()` takes the key from: the last layer that sets api_key,
    else the variable api_key_env names (see `Loaded.key_source`)."""
    for where, data in reversed(layers):
        if data.get("api_key"):
            return "--api-key" if where == "command line" else "user" if where == str(user_file) else "project"
    return config.api_key_env if os.environ.get(config.api_key_env) else "none"


class _Source(NamedTuple):
    file: Path | Layer  # a file to read, or one of Claude Code's, already read into our shape
    project: bool  # it came with the repository: narrowed before it applies
    required: bool = False  # --config: its absence is an error


def _sources(workspace: Path, config_file: Path | None) -> list[_Source]:
    project = project_config_path(workspace)
    # The person's Claude Code settings, below their own nanohermes file; --config replaces both.
    claude = user_layer(Path.home(), workspace, read_config_file) if config_file is None else None
    out = [_Source(claude, project=False)] if claude is not None else []
    out.append(_Source(config_file, project=False, required=True) if config_file else _Source(user_config_path(), False))
    # A --config naming the project file makes it the person's own file, read once, as theirs.
    if not (config_file is not None and config_file.resolve() == project.resolve()):
        out += [_Source(layer, project=True) for layer in project_layers(workspace, read_config_file)]  # below ours
        out.append(_Source(project, project=True))
    return out


def guards(key: str) -> bool:
    """Does the key (dotted) restrict what runs: one a project may narrow (the mode, deny and
    ask rules, tool lists, the sandbox, limits...), or the hooks?"""
    return key in NARROWING or key == "hooks" or key.split(".", 1)[0] == "sandbox"


def misspelled(path: Path, unknown: list[KeyPath]) -> str:
    """The unknown keys of a file, each with the key it is likely a misspelling of. One that
    is close to a key restricting what runs is a ConfigError: the run does not go on with
    that setting silently at its default."""
    shown = []
    for at in unknown:
        near = near_miss(at)
        if near is not None and guards(dotted(near)):
            raise ConfigError(f"{path}: unknown key `{dotted(at)}`; did you mean `{dotted(near)}`?",
                              hint=f"fix its spelling: `{dotted(near)}` restricts what runs, and nanohermes does not "
                                   "run with it left at its default; config.example.json lists every key")
        shown.append(dotted(at) + (f" (did you mean {dotted(near)}?)" if near is not None else ""))
    return ", ".join(shown)


@dataclass
class _Files:
    """The config files as they are read, lowest first, and what reading them found."""

    workspace: Path
    user_file: Path  # the person's own file (or --config)
    layers: Layers = field(default_factory=list)
    read_paths: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    asks: dict[str, Any] = field(default_factory=dict)
    project_file: Path | None = None
    user: dict[str, Any] = field(default_factory=dict)  # the user file's data: what a project file narrows
    project_layers: list[str] = field(default_factory=list)  # the layers (by name) that came with the repository

    def read(self, source: _Source) -> None:
        """One file: its unknown keys dropped, validated on its own, narrowed if it is a project's."""

        got = self._contents(source)
        if got is None:
            return
        path, data = got
        if unknown := unknown_keys(Config, data):
            self.warnings.append(f"{path}: unknown config keys ignored: {misspelled(path, unknown)}")
            data = without(data, unknown)
        try:
            read = validated(data, f"{path}: ", hint="see config.example.json for every key")
        except ConfigError as e:
            if source.project or not isinstance(source.file, Layer):
                raise
            # The person's Claude Code settings: Claude Code's to complain about, never fatal here.
            self.warnings.append(f"{e.message}; not read")
            return
        if source.project:
            data = self._narrowed(source, path, as_read(data, read))
            self.project_layers.append(str(path))
        elif not isinstance(source.file, Layer):
            self.user = data
        self.read_paths.append(path)
        self.layers.append((str(path), data))

    def _contents(self, source: _Source) -> tuple[Path, dict[str, Any]] | None:
        if isinstance(source.file, Layer):
            self.warnings += source.file.notes
            return source.file.path, source.file.data
        path = source.file
        if not path.is_file():
            if source.required:
                raise ConfigError(f"{path}: no such config file", hint="check the --config path")
            return None
        return path, fold_conditions(fold_mcp_servers(read_config_file(path), path))

    def _narrowed(self, source: _Source, path: Path, data: dict[str, Any]) -> dict[str, Any]:
        """A project file as it applies over the user file; what needs trust joins `asks`."""
        ours = isinstance(source.file, Path)  # .nanohermes/config.json, not one of Claude Code's files
        trusted = is_trusted(self.workspace, list(self.user.get("trusted_projects") or []))
        approved = approved_rules(self.workspace) if ours else frozenset()
        narrowed = narrow_project(data, Config.from_dict(self.user), trusted=trusted, approved=approved)
        if ours:
            self.project_file = path
            self.asks.update(narrowed.asks)
        elif narrowed.asks:
            # Claude Code's files ask under their own names, so the question says where each
            # ask is from; their MCP servers one by one, so it lists them.
            self.project_file = self.project_file or path
            self.asks.update(_asks_of(path.relative_to(self.workspace), narrowed.asks))
        self.warnings += self._ignored(path, narrowed)
        return narrowed.data

    def _ignored(self, path: Path, narrowed: Narrowed) -> list[str]:
        """The warnings of a narrowed file: what did not apply, and why."""
        out: list[str] = []
        if narrowed.asks:
            out.append(f"{path}: ignored {', '.join(narrowed.asks)} because this project is not trusted; to allow "
                       f'them, add "{self.workspace.resolve()}" to trusted_projects in {self.user_file}')
        if narrowed.user_only:
            out.append(f"{path}: ignored {', '.join(narrowed.user_only)}: only the user config ({self.user_file}) "
                       "may set them")
        return out + [f"{path}: {n}" for n in narrowed.notes]


def _asks_of(name: Path, asks: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in asks.items():
        servers = value.get("servers") if key == "mcp" and isinstance(value, dict) else None
        if isinstance(servers, dict) and len(value) == 1:
            out.update({f"{name}: MCP server {server}": entry for server, entry in servers.items()})
        else:
            out[f"{name}: {key}"] = value
    return out


def _env_layer() -> dict[str, Any]:
    env: dict[str, Any] = {}
    if v := os.environ.get("OPENAI_BASE_URL"):
        env["base_url"] = v
    if v := os.environ.get("NANOHERMES_MODEL"):
        env["model"] = v
    # OPENAI_API_KEY is read through api_key_env at use time so a file's api_key_env wins.
    return env


def _built(layers: Layers, *, from_files: bool, project: frozenset[str] = frozenset()) -> tuple[Config, list[str]]:
    """The layers merged into one Config, with the warnings its values earn. `project`: the
    names of the layers that came with the repository."""
    merged: dict[str, Any] = {}
    for _, data in layers:
        merged = _merge(merged, data)
    rules = _add_up_rules(layers, merged)
    hooks = _add_up_hooks(layers, merged)
    servers = _server_origins(layers)
    # Without files, the layers are the environment and flags: plain values, mostly.
    if not from_files and plain_layers(merged):
        config = Config(**merged)
    else:  # each file was validated on its own, so an error here comes from the environment or a flag
        config = validated(merged, "", hint="check the environment variables and flags")
    config, warnings = guard_search_keys(_with_origins(config, rules, hooks, servers, project))
    config.build_limits()  # reject unknown limit names early
    return config, warnings


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _add_up_rules(layers: Layers, merged: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Permission rules add up across layers (a project file must not drop the user's deny
    rules): `merged` gets every layer's; returns the layer each came from."""
    origins: dict[tuple[str, str], str] = {}
    for where, data in layers:
        perms = data.get("permissions")
        for kind in _RULE_KINDS:
            for text in (perms.get(kind) or []) if isinstance(perms, dict) else []:
                if isinstance(text, str) and (kind, text) not in origins:
                    origins[(kind, text)] = where
    if origins:
        merged["permissions"] = {**(merged.get("permissions") or {}),
                                 **{kind: [t for (k, t) in origins if k == kind] for kind in _RULE_KINDS}}
    return origins


def _add_up_hooks(layers: Layers, merged: dict[str, Any]) -> dict[str, list[str]]:
    """Hooks add up across layers (a project's never drop the user's): `merged` gets every
    layer's groups; returns each event's group origins, in order."""
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


def _server_origins(layers: Layers) -> dict[str, str]:
    """The layer that last set each MCP server (a later layer's keys replace an earlier one's)."""
    origins: dict[str, str] = {}
    for where, data in layers:
        mcp = data.get("mcp")
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
        for name in servers if isinstance(servers, dict) else ():
            origins[name] = where
    return origins


def _with_origins(config: Config, rules: RuleOrigins, hooks: dict[str, list[str]], servers: dict[str, str],
                  project: frozenset[str]) -> Config:
    """`config` with its rule section, hook groups and MCP servers built knowing the layer each
    came from (and whether that layer is a project file)."""
    if not rules and not hooks and not (project & set(servers.values())):
        return config
    groups = {event: [replace(g, defined_in=wheres[i], from_project=wheres[i] in project) if i < len(wheres) else g
                      for i, g in enumerate(config.hooks.groups(event))] for event, wheres in hooks.items()}
    mcp = replace(config.mcp, servers={name: replace(s, from_project=servers.get(name) in project) if
                                       servers.get(name) in project else s for name, s in config.mcp.servers.items()})
    return replace(config, permissions=replace(config.permissions, origins=rules), hooks=replace(config.hooks, **groups),
                   mcp=mcp)
