"""Claude Code's project files, read as nanohermes config layers: `.mcp.json` (its
`mcpServers`), `.claude/settings.json` and `.claude/settings.local.json` (permission rules,
the default mode, extra folders, `env`, hooks, which `.mcp.json` servers to use); and the
person's own `~/.claude/settings.json`, of which only what guards and narrows applies (hooks,
deny and ask rules: `user_layer`).

Each file becomes a layer in nanohermes's own config shape, which the loader then treats as it
treats `.nanohermes/config.json`: a file that comes with the repository, so its deny and ask
rules always apply (they only narrow), and everything else that widens trust (allow rules,
`env`, hooks, MCP servers, a looser mode, extra folders) applies only in a trusted project.

Claude Code's rules name its tools; each becomes the rules of the tools here that do the same
thing (`Read(...)` covers every tool that reads files, as in Claude Code; a deny or ask rule
is spread over every tool it may mean, an allow rule only over those it surely means). Its
path forms are read as Claude Code reads them (`//abs`, `~/home`, `/from-the-project-root`,
`./here`). A part with no counterpart here is named once in the start's warnings, never
dropped without a word.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanohermes.config.schema import HOOK_TIMEOUT_MAX_SECS
from nanohermes.common.errors import ConfigError
from nanohermes.common.modes import Mode

# The files, lowest precedence first: the shared settings below the person's local ones.
MCP_FILE = ".mcp.json"
SETTINGS_FILES = (".claude/settings.json", ".claude/settings.local.json")

# Claude Code's tool -> (the tools a deny or ask rule covers, the tools an allow rule covers).
_READERS = ("read_file", "grep", "glob", "list_dir")
_WRITERS = ("write_file", "edit_file", "apply_patch")
_TOOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Bash": (("run_command",), ("run_command",)),
    "Read": (_READERS, _READERS),
    "Edit": (_WRITERS, _WRITERS),
    "MultiEdit": (_WRITERS, ("edit_file", "apply_patch")),
    "Write": (_WRITERS, ("write_file",)),
    "NotebookEdit": (_WRITERS, ()),
    "Glob": (("glob",), ("glob",)),
    "Grep": (("grep",), ("grep",)),
    "LS": (("list_dir",), ("list_dir",)),
    "WebFetch": (("web_fetch",), ("web_fetch",)),
    "WebSearch": (("web_search",), ("web_search",)),
    "TodoWrite": (("todo_write",), ("todo_write",)),
    "TodoRead": (("todo_read",), ("todo_read",)),
    "Task": (("subagent",), ("subagent",)),
    "Agent": (("subagent",), ("subagent",)),
    "BashOutput": (("task_output",), ("task_output",)),
    "KillShell": (("task_kill",), ("task_kill",)),
    "KillBash": (("task_kill",), ("task_kill",)),
    "Skill": (("skill",), ("skill",)),
}
_PATH_TOOLS = {"Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "Glob", "Grep", "LS"}
_OURS = re.compile(r"[a-z][a-z0-9_]*")  # how nanohermes names its tools; Claude Code's are capitalised
_RULE = re.compile(r"^\s*([A-Za-z0-9_\-*]+)\s*(?:\((.*)\))?\s*$", re.S)
_MODES = {"default": Mode.DEFAULT, "acceptEdits": Mode.ACCEPT_EDITS, "plan": Mode.PLAN, "bypassPermissions": Mode.GOAL}
_HOOK_EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "PreCompact",
                "Notification")
# Keys that say nothing nanohermes could act on, and are not worth a warning.
_QUIET = {"$schema"}


@dataclass
class Layer:
    """One of Claude Code's files as a config layer."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)  # in nanohermes's config shape
    notes: list[str] = field(default_factory=list)  # what could not be carried over, for the warnings


def project_layers(workspace: Path, read: Callable[[Path], dict[str, Any]]) -> list[Layer]:
    """The layers of the Claude Code files the workspace holds, lowest precedence first; `read`
    reads one JSON file (the config loader's reader, with its errors)."""
    layers: list[Layer] = []
    settings = [(workspace / name, read(workspace / name)) for name in SETTINGS_FILES if (workspace / name).is_file()]
    mcp_path = workspace / MCP_FILE
    if mcp_path.is_file():
        layers.append(_mcp_layer(mcp_path, read(mcp_path), [d for _, d in settings]))
    layers += [_settings_layer(path, data, workspace) for path, data in settings]
    return layers


def user_layer(home: Path, workspace: Path, read: Callable[[Path], dict[str, Any]]) -> Layer | None:
    """The person's own Claude Code settings (`~/.claude/settings.json`) as a layer of what guards
    and narrows: its hooks (the person's own commands, as those of their nanohermes config) and its
    deny and ask rules. What would widen what nanohermes does unasked (allow rules, a mode, `env`,
    extra folders, MCP servers) is named and not applied: it was written for another program, so
    it must not change every session without a word. None when there is no such file; a file that
    cannot be read is named, never fatal (it is Claude Code's to complain about)."""
    path = home / SETTINGS_FILES[0]
    if not path.is_file():
        return None
    try:
        data = read(path)
    except ConfigError as e:
        return Layer(path, notes=[f"{e.message}; not read{f' ({e.hint})' if e.hint else ''}"])
    full = _settings_layer(path, data, workspace)
    perms: dict[str, Any] = data["permissions"] if isinstance(data.get("permissions"), dict) else {}
    withheld: list[str] = [k for k in ("env", "mcpServers") if k in data]
    withheld += [f"permissions.{k}" for k in ("allow", "defaultMode", "additionalDirectories") if k in perms]
    notes = [n for n in full.notes if "permissions.allow rule" not in n]
    if withheld:
        notes.append(f"{path}: only its hooks and its deny and ask rules apply here; not applied: "
                     f"{', '.join(withheld)} (set them in nanohermes's own config to use them)")
    kept: dict[str, Any] = {"hooks": full.data["hooks"]} if "hooks" in full.data else {}
    narrowing = {k: v for k, v in (full.data.get("permissions") or {}).items() if k in ("deny", "ask")}
    if narrowing:
        kept["permissions"] = narrowing
    return Layer(path, kept, notes)


def _mcp_layer(path: Path, data: dict[str, Any], settings: list[dict[str, Any]]) -> Layer:
    layer = Layer(path)
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: `mcpServers` must be an object of servers by name",
                          hint="see Claude Code's .mcp.json shape: {\"mcpServers\": {\"name\": {...}}}")
    if other := sorted(k for k in data if k != "mcpServers" and k not in _QUIET):
        layer.notes.append(f"{path}: not used by nanohermes, ignored: {', '.join(other)}")
    # The settings' choice of .mcp.json servers (Claude Code asks about each; here the folder's
    # trust covers them, and these lists only take servers away).
    disabled = {n for s in settings for n in _names(s.get("disabledMcpjsonServers"))}
    enabled = {n for s in settings for n in _names(s.get("enabledMcpjsonServers"))}
    every = any(s.get("enableAllProjectMcpServers") is True for s in settings)
    chosen = {name: entry for name, entry in servers.items()
              if name not in disabled and (every or not enabled or name in enabled)}
    if left := sorted(set(servers) - set(chosen)):
        layer.notes.append(f"{path}: MCP servers not used, as the Claude Code settings say: {', '.join(left)}")
    if chosen:
        layer.data["mcp"] = {"servers": chosen}
    return layer


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _settings_layer(path: Path, data: dict[str, Any], workspace: Path) -> Layer:
    layer = Layer(path)
    out = layer.data
    unused: list[str] = []
    for key, value in data.items():
        if key == "permissions" and isinstance(value, dict):
            _permissions(layer, value, workspace, unused)
        elif key == "env" and isinstance(value, dict):
            out["env"] = {str(k): str(v) for k, v in value.items()}
        elif key == "hooks" and isinstance(value, dict):
            out["hooks"] = fold_conditions({"hooks": _hooks(layer, value)})["hooks"]
        elif key == "mcpServers" and isinstance(value, dict):
            out.setdefault("mcp", {})["servers"] = value
        elif key in ("enabledMcpjsonServers", "disabledMcpjsonServers", "enableAllProjectMcpServers") or key in _QUIET:
            continue  # read with .mcp.json
        else:
            unused.append(key)
    if unused:
        layer.notes.append(f"{path}: not used by nanohermes, ignored: {', '.join(unused)}")
    return layer


def _permissions(layer: Layer, perms: dict[str, Any], workspace: Path, unused: list[str]) -> None:
    out: dict[str, Any] = {}
    for kind in ("allow", "ask", "deny"):
        texts = perms.get(kind)
        if texts is None:
            continue
        rules: list[str] = []
        for text in texts if isinstance(texts, list) else [texts]:
            got = translate_rule(text, kind, workspace) if isinstance(text, str) else None
            if got is None:
                layer.notes.append(f"{layer.path}: permissions.{kind} rule {json.dumps(text)} has no counterpart in "
                                   f"nanohermes; ignored")
            else:
                rules += [r for r in got if r not in rules]
        if rules:
            out[kind] = rules
    if out:
        layer.data["permissions"] = out
    mode = perms.get("defaultMode")
    if mode is not None:
        if mode in _MODES:
            layer.data["permission_mode"] = _MODES[mode]
        else:
            layer.notes.append(f"{layer.path}: permissions.defaultMode {json.dumps(mode)} has no counterpart in "
                               f"nanohermes (default, acceptEdits, plan, bypassPermissions); ignored")
    dirs = perms.get("additionalDirectories")
    if isinstance(dirs, list) and dirs:
        layer.data["extra_write_roots"] = [_claude_path(d, workspace) for d in dirs if isinstance(d, str)]
    unused += [f"permissions.{k}" for k in perms if k not in ("allow", "ask", "deny", "defaultMode",
                                                                 "additionalDirectories")]


def translate_rule(text: str, kind: str, workspace: Path) -> list[str] | None:
    """A Claude Code permission rule as nanohermes rules (`kind`: allow, ask or deny), or None
    when nothing here corresponds to it. A rule already in nanohermes's own words
    (`run_command(git *)`: its tool names are lower case) is kept as it is."""
    m = _RULE.match(text)
    if not m:
        return None
    tool, pattern = m.group(1), m.group(2)
    pattern = pattern.strip() if pattern is not None else None
    if tool.startswith("mcp__"):
        name = tool.removesuffix("__*").removesuffix("*").rstrip("_")  # mcp__server__* is the whole server
        return [name] if pattern is None and "*" not in name and name.count("__") <= 2 else None
    if _OURS.fullmatch(tool):
        return [text.strip()]
    spread = _TOOLS.get(tool)
    if spread is None:
        return None
    ours = spread[0] if kind in ("ask", "deny") else spread[1]
    if pattern is None:
        return list(ours)
    if not pattern:
        return None
    if tool in _PATH_TOOLS:
        pattern = _claude_path(pattern, workspace)
    elif tool in ("Task", "Agent", "Skill", "BashOutput", "KillShell", "KillBash", "TodoWrite", "TodoRead",
                  "WebSearch"):
        # A pattern here names something these tools do not match on: a denial covers the
        # whole tool (it only narrows); an allow cannot be made as narrow as written.
        return list(ours) if kind in ("ask", "deny") else None
    return [f"{t}({pattern})" for t in ours]


def denial_covers(tool: str) -> tuple[str, ...]:
    """The tools here that a deny rule naming Claude Code's `tool` covers (`Edit` and `Write`:
    every tool that writes files; `Read`: every one that reads them), () for a name that is
    not one of Claude Code's tools."""
    return _TOOLS.get(tool, ((), ()))[0]


def rule_pattern(tool: str, pattern: str, workspace: Path) -> str:
    """The pattern of Claude Code's rule `tool(pattern)` as nanohermes's rules read it: a path
    of a file tool's rule in our path form (see `_claude_path`), anything else as it is."""
    return _claude_path(pattern, workspace) if tool in _PATH_TOOLS else pattern


def _claude_path(pattern: str, workspace: Path) -> str:
    """A path of Claude Code's rules in the form nanohermes's rules read: `//x` is the absolute
    `/x`, `/x` is from the project root (the workspace), `~/x` and `./x` stay as they are."""
    if pattern.startswith("//"):
        return pattern[1:]
    if pattern.startswith("/"):
        return pattern.lstrip("/") or "."
    return pattern


def fold_conditions(data: dict[str, Any]) -> dict[str, Any]:
    """A config in which each hook command's `if` (Claude Code's key, a Python keyword) is
    spelled `condition`, the key it is known by; `data` itself is left as it is."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict) or '"if"' not in json.dumps(hooks):
        return data

    def command(h: Any) -> Any:
        if not isinstance(h, dict) or "if" not in h:
            return h
        return {("condition" if k == "if" else k): v for k, v in h.items()}

    def group(g: Any) -> Any:
        if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
            return g
        return {**g, "hooks": [command(h) for h in g["hooks"]]}

    folded = {event: [group(g) for g in groups] if isinstance(groups, list) else groups
              for event, groups in hooks.items()}
    return {**data, "hooks": folded}


def _hooks(layer: Layer, hooks: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's hooks have nanohermes's shape; what they have beyond it (events, hook
    types) is named and left out."""
    out: dict[str, Any] = {}
    for event, groups in hooks.items():
        if event not in _HOOK_EVENTS:
            layer.notes.append(f"{layer.path}: hooks.{event}: no such event in nanohermes; its hooks never run")
            continue
        kept: list[Any] = []
        for group in groups if isinstance(groups, list) else []:
            if not isinstance(group, dict):
                kept.append(group)  # validation names what is wrong with it
                continue
            commands = group.get("hooks", [])
            plain = [h for h in commands if not (isinstance(h, dict) and h.get("type", "command") != "command")] \
                if isinstance(commands, list) else commands
            if isinstance(commands, list) and len(plain) < len(commands):
                layer.notes.append(f"{layer.path}: hooks.{event}: only command hooks run in nanohermes; "
                                   f"{len(commands) - len(plain)} other hook(s) left out")
            if plain:
                kept.append({**group, "hooks": [_timeout_kept(layer, event, h) for h in plain]
                             if isinstance(plain, list) else plain})
        if kept:
            out[event] = kept
    return out


def _timeout_kept(layer: Layer, event: str, hook: Any) -> Any:
    """A hook with a timeout past nanohermes's bound (Claude Code takes any, and some files
    write milliseconds there) keeps the bound, with a note, rather than failing the file."""
    timeout = hook.get("timeout") if isinstance(hook, dict) else None
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= HOOK_TIMEOUT_MAX_SECS:
        return hook
    layer.notes.append(f"{layer.path}: hooks.{event}: a timeout of {timeout:g} s is more than the "
                       f"{HOOK_TIMEOUT_MAX_SECS} s a hook may take here; {HOOK_TIMEOUT_MAX_SECS} s is used")
    return {**hook, "timeout": HOOK_TIMEOUT_MAX_SECS}
