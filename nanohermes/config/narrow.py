"""The project file, read as written by a stranger: it comes with the repository, so it may
only narrow what the layers below it (defaults and the user file) allow. `NARROWING` lists
every key it may set and how each combines with the layers below; every other key is a trust
key, applied only in a trusted project and otherwise asked about (`Narrowed.asks`). Claude
Code's project files are judged the same way."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nanohermes.common.budget import Limits
from nanohermes.common.modes import Mode
from nanohermes.config.schema import Config, section_fields
from nanohermes.guard.permissions import names_tool

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
    "grep_max_files", "glob_results", "glob_alternatives", "run_command_capture_bytes", "task_capture_bytes",
    "task_timeout_secs",
    "command_kill_grace_secs", "command_pipe_grace_secs", "git_timeout_secs", "web_fetch_body_bytes",
    "web_fetch_timeout_secs", "web_fetch_max_redirects", "web_search_timeout_secs", "web_search_snippet_chars",
    "skill_body_chars", "project_docs_chars", "todo_items", "memory_text_chars", "memory_search_max_results",
    "memory_busy_timeout_secs", "agent_preview_chars", "session_budget_chars", "aggregate_budget_chars",
    "persisted_preview_chars", "skill_description_chars", "skill_index_chars", "skill_files_listed",
    "mcp_startup_timeout_secs", "mcp_call_timeout_secs", "mcp_log_max_bytes", "mcp_instructions_chars",
    "compact_keep_chars", "compact_item_chars", "compact_summary_chars",
    "read_file_count_bytes", "run_command_max_timeout_secs", "web_search_max_results", "tool_args_max_depth",
    "mcp_tool_specs_chars", "tool_search_results", "doc_import_depth", "own_file_max_bytes",
    "command_file_output_chars", "agent_description_chars",
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
# Keys no project file may set, trusted or not: the list of trusted folders itself, the URLs
# a search key is sent to (a key goes only where the user's own config says), and turning
# every permission off.
USER_ONLY: tuple[str, ...] = ("trusted_projects", "web_search.brave_url", "web_search.tavily_url",
                               "dangerously_skip_permissions")
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


@dataclass(frozen=True)
class _Below:
    """What a project's value is judged against: the layers below it, and whether the person
    trusts the project (then every value applies)."""

    config: Config
    limits: Limits
    trusted: bool


def narrow_project(project: dict[str, Any], base: Config, *, trusted: bool,
                   approved: frozenset[str] = frozenset()) -> Narrowed:
    """Combine a project file's settings with `base` (defaults and user file): see NARROWING.
    `project` holds values as validation reads them (`as_read`), so that a narrowing value
    written as text ("3") is judged as the number it sets.
    `approved`: allow rules the person saved to this project ("always in this project")."""
    out = Narrowed()
    below = _Below(base, base.build_limits(), trusted)
    for key, value in _leaves(project):
        kind = NARROWING.get(key)
        if key in USER_ONLY:
            out.user_only.append(key)
        elif key == "permissions.allow" and not trusted and isinstance(value, list):
            _saved_allow_rules(out, key, value, approved)
        elif kind is None:  # a trust key
            _applies(out, key, value, trusted)
        else:
            _COMBINE[kind](out, key, value, below)
    for key, extra in out.block.items():
        section, _, name = key.rpartition(".")
        have = (out.data.get(section, {}) if section else out.data).get(name)
        _set(out.data, key, [*(have if have is not None else _get(base, key)), *extra])
    return out


def _applies(out: Narrowed, key: str, value: Any, allowed: bool) -> None:
    """The value applies when `allowed` (it narrows, or the project is trusted); otherwise it
    is a request for trust."""
    if allowed:
        _set(out.data, key, value)
    else:
        out.asks[key] = value


def _saved_allow_rules(out: Narrowed, key: str, rules: list[Any], approved: frozenset[str]) -> None:
    """An untrusted project's allow rules apply as far as the person saved them to it."""
    if mine := [r for r in rules if r in approved]:
        _set(out.data, key, mine)
    if others := [r for r in rules if r not in approved]:
        out.asks[key] = others


def _as_is(out: Narrowed, key: str, value: Any, below: _Below) -> None:
    _set(out.data, key, value)


def _union(out: Narrowed, key: str, value: Any, below: _Below) -> None:
    if key in ("permissions.deny", "permissions.ask"):
        _set(out.data, key, value)  # rules add up across layers in the loader, each with its origin
        return
    have = _get(below.config, key)
    _set(out.data, key, [*have, *(v for v in value if v not in have)])


def _intersect(out: Narrowed, key: str, value: Any, below: _Below) -> None:
    mine, have = list(value), list(_get(below.config, key))
    if key == "shell_env.keep":
        _keep(out, key, mine, have, below.trusted)
        return
    if not mine:
        return  # an empty list means "no restriction": it must not lift the user's
    if not have:
        _set(out.data, key, mine)
        return
    covers = names_tool if key == "allowed_tools" else _host_covers
    both = [v for v in mine if covers(have, v)] + [v for v in have if covers(mine, v) and v not in mine]
    if both:
        _set(out.data, key, both)
        return
    _set(out.data, key, have)  # nothing is in both lists: nothing may run or be reached, never "everything"
    if key == "allowed_tools":
        out.block["disallowed_tools"] = have
        out.notes.append(f"allowed_tools share no tool with the user's ({', '.join(have)}): no tool is allowed")
    else:  # web_fetch.allowed_hosts
        out.block["web_fetch.denied_hosts"] = ["*"]
        out.notes.append(f"web_fetch.allowed_hosts share no host with the user's ({', '.join(have)}): "
                         "web_fetch reaches no host")


def _keep(out: Narrowed, key: str, mine: list[str], have: list[str], trusted: bool) -> None:
    """Keeping a secret variable for commands widens: the project may drop names from the
    user's list; adding one is a trust request."""
    extra = [v for v in mine if v not in have]
    if extra and trusted:
        _set(out.data, key, mine)
        return
    if extra:
        out.asks[key] = extra
    _set(out.data, key, [v for v in have if v in mine])


def _stricter(out: Narrowed, key: str, value: Any, below: _Below) -> None:
    base = below.config
    if key == "permission_mode":
        looser = MODE_STRICTNESS.index(value) > MODE_STRICTNESS.index(base.permission_mode)
    else:  # auto_approve
        looser = bool(value) and not base.auto_approve
    _applies(out, key, value, not looser or below.trusted)


def _sandbox(out: Narrowed, key: str, value: Any, below: _Below) -> None:
    have = below.config.sandbox
    value = value if isinstance(value, dict) else {}
    narrows = (value.get("mode", have.mode) in ("auto", have.mode)
               and value.get("network", have.network) in (False, have.network)
               and all(r in have.writable_roots for r in value.get("writable_roots", [])))
    _applies(out, key, value, narrows or below.trusted)


def _lower(out: Narrowed, key: str, value: Any, below: _Below) -> None:
    name, limits = key.removeprefix("limits."), below.limits
    have = getattr(limits, name, None) if name in Limits.names() else getattr(below.config, name)
    if name == "aggregate_budget_chars" and have is None:
        have = limits.aggregate_chars
    elif name == "compact_keep_chars" and have is None:
        have = limits.keep_chars
    lowers = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
        and (have is None or value <= have)
    _applies(out, key, value, lowers or below.trusted)


# How each kind of NARROWING key combines with the layers below.
_COMBINE: dict[str, Callable[[Narrowed, str, Any, _Below], None]] = {
    "union": _union, "intersect": _intersect, "stricter": _stricter, "lower": _lower, "project": _as_is,
    "sandbox": _sandbox,
}


def _get(base: Config, dotted: str) -> Any:
    node: Any = base
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


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
