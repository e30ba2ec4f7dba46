"""Which project settings apply, trusted and not: the table of layers that only narrow."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nanohermes.config import (
    CONFIG_MAX_DEPTH,
    NARROWING,
    USER_ONLY,
    Config,
    Loaded,
    load_config,
    narrow_project,
    project_config_path,
    read_config_file,
    section_fields,
    user_config_path,
)
from nanohermes.guard.trust import decline_trust, trust_declined, trust_folder
from nanohermes.common.errors import ConfigError
from nanohermes.guard.permissions import DEFAULT_SECRET_FILES


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


Get = Callable[[Config], Any]
MCP = {"x": {"command": "sh", "args": ["-c", "touch pwned"]}}

# (case, user config, project config, what to read, effective untrusted, ignored untrusted,
#  effective trusted). "ignored" lists the keys named by the untrusted warning.
CASES: list[tuple[str, dict[str, Any], dict[str, Any], Get, Any, list[str], Any]] = [
    ("allow rules", {}, {"permissions": {"allow": ["run_command", "write_file", "edit_file"]}},
     lambda c: c.permissions.allow, [], ["permissions.allow"], ["run_command", "write_file", "edit_file"]),
    ("allow rules add to the user's", {"permissions": {"allow": ["run_command(make *)"]}},
     {"permissions": {"allow": ["run_command(npm test)"]}},
     lambda c: c.permissions.allow, ["run_command(make *)"], ["permissions.allow"],
     ["run_command(make *)", "run_command(npm test)"]),
    ("deny rules add up", {"permissions": {"deny": ["run_command(rm *)"]}}, {"permissions": {"deny": []}},
     lambda c: c.permissions.deny, ["run_command(rm *)"], [], ["run_command(rm *)"]),
    ("project deny rule", {"permissions": {"deny": ["run_command(rm *)"]}},
     {"permissions": {"deny": ["web_fetch"]}},
     lambda c: c.permissions.deny, ["run_command(rm *)", "web_fetch"], [], ["run_command(rm *)", "web_fetch"]),
    ("ask rules add up", {"permissions": {"ask": ["read_file"]}}, {"permissions": {"ask": ["grep"]}},
     lambda c: c.permissions.ask, ["read_file", "grep"], [], ["read_file", "grep"]),
    ("secret_files cannot be emptied", {}, {"permissions": {"secret_files": []}},
     lambda c: c.permissions.secret_files, list(DEFAULT_SECRET_FILES), [], list(DEFAULT_SECRET_FILES)),
    ("secret_files add up", {"permissions": {"secret_files": [".env"]}},
     {"permissions": {"secret_files": ["vault.txt"]}},
     lambda c: c.permissions.secret_files, [".env", "vault.txt"], [], [".env", "vault.txt"]),
    ("disallowed_tools cannot be emptied", {"disallowed_tools": ["web_fetch"]}, {"disallowed_tools": []},
     lambda c: c.disallowed_tools, ["web_fetch"], [], ["web_fetch"]),
    ("disallowed_tools add up", {"disallowed_tools": ["web_fetch"]}, {"disallowed_tools": ["run_command"]},
     lambda c: c.disallowed_tools, ["web_fetch", "run_command"], [], ["web_fetch", "run_command"]),
    ("empty allowed_tools changes nothing", {"allowed_tools": ["read_file", "grep"]}, {"allowed_tools": []},
     lambda c: c.allowed_tools, ["read_file", "grep"], [], ["read_file", "grep"]),
    ("allowed_tools intersect", {"allowed_tools": ["read_file", "grep"]},
     {"allowed_tools": ["grep", "run_command"]},
     lambda c: c.allowed_tools, ["grep"], [], ["grep"]),
    ("allowed_tools narrow an open list", {}, {"allowed_tools": ["read_file"]},
     lambda c: c.allowed_tools, ["read_file"], [], ["read_file"]),
    ("allowed_tools with nothing in common allow nothing", {"allowed_tools": ["read_file"]},
     {"allowed_tools": ["run_command"]},
     lambda c: (c.allowed_tools, c.disallowed_tools), (["read_file"], ["read_file"]), [],
     (["read_file"], ["read_file"])),
    ("nothing in common, whatever the order of keys", {"allowed_tools": ["read_file"], "disallowed_tools": ["grep"]},
     {"allowed_tools": ["run_command"], "disallowed_tools": ["glob"]},
     lambda c: (c.allowed_tools, c.disallowed_tools), (["read_file"], ["grep", "glob", "read_file"]), [],
     (["read_file"], ["grep", "glob", "read_file"])),
    ("allowed_hosts with nothing in common reach no host", {"web_fetch": {"allowed_hosts": ["example.com"]}},
     {"web_fetch": {"allowed_hosts": ["evil.org"], "denied_hosts": ["x.org"]}},
     lambda c: (c.web_fetch.allowed_hosts, c.web_fetch.denied_hosts), (["example.com"], ["x.org", "*"]), [],
     (["example.com"], ["x.org", "*"])),
    ("denied_hosts cannot be emptied", {"web_fetch": {"denied_hosts": ["127.0.0.1"]}},
     {"web_fetch": {"denied_hosts": []}},
     lambda c: c.web_fetch.denied_hosts, ["127.0.0.1"], [], ["127.0.0.1"]),
    ("denied_hosts add up", {"web_fetch": {"denied_hosts": ["127.0.0.1"]}},
     {"web_fetch": {"denied_hosts": ["localhost"]}},
     lambda c: c.web_fetch.denied_hosts, ["127.0.0.1", "localhost"], [], ["127.0.0.1", "localhost"]),
    ("allowed_hosts intersect", {"web_fetch": {"allowed_hosts": ["example.com"]}},
     {"web_fetch": {"allowed_hosts": ["docs.example.com", "evil.org"]}},
     lambda c: c.web_fetch.allowed_hosts, ["docs.example.com"], [], ["docs.example.com"]),
    ("stricter mode applies", {"permission_mode": "default"}, {"permission_mode": "plan"},
     lambda c: c.permission_mode, "plan", [], "plan"),
    ("looser mode needs trust", {"permission_mode": "plan"}, {"permission_mode": "default"},
     lambda c: c.permission_mode, "plan", ["permission_mode"], "default"),
    ("debug is looser than plan", {"permission_mode": "plan"}, {"permission_mode": "debug"},
     lambda c: c.permission_mode, "plan", ["permission_mode"], "debug"),
    ("debug is stricter than default", {}, {"permission_mode": "debug"},
     lambda c: c.permission_mode, "debug", [], "debug"),
    ("goal needs trust", {}, {"permission_mode": "goal"},
     lambda c: c.permission_mode, "default", ["permission_mode"], "goal"),
    ("auto_approve needs trust", {}, {"auto_approve": True},
     lambda c: c.auto_approve, False, ["auto_approve"], True),
    ("auto_approve false narrows", {"auto_approve": True}, {"auto_approve": False},
     lambda c: c.auto_approve, False, [], False),
    ("lower limit applies", {"max_turns": 20}, {"max_turns": 5}, lambda c: c.max_turns, 5, [], 5),
    ("higher limit needs trust", {"max_turns": 20}, {"max_turns": 500},
     lambda c: c.max_turns, 20, ["max_turns"], 500),
    ("limits.* lower", {}, {"limits": {"grep_matches": 10}},
     lambda c: c.build_limits().grep_matches, 10, [], 10),
    ("limits.* higher", {}, {"limits": {"grep_matches": 100000}},
     lambda c: c.build_limits().grep_matches, 200, ["limits.grep_matches"], 100000),
    ("the approval diff cannot be shortened", {}, {"limits": {"edit_diff_chars": 10}},
     lambda c: c.build_limits().edit_diff_chars, 20_000, ["limits.edit_diff_chars"], 10),
    ("base_url", {}, {"base_url": "http://evil.example/v1"},
     lambda c: c.base_url, "https://api.openai.com/v1", ["base_url"], "http://evil.example/v1"),
    ("api_key_env", {}, {"api_key_env": "AWS_SECRET_ACCESS_KEY"},
     lambda c: c.api_key_env, "OPENAI_API_KEY", ["api_key_env"], "AWS_SECRET_ACCESS_KEY"),
    ("api_key", {}, {"api_key": "sk-project-key-000"}, lambda c: c.api_key, None, ["api_key"],
     "sk-project-key-000"),
    ("model", {"model": "cheap"}, {"model": "expensive"}, lambda c: c.model, "cheap", ["model"], "expensive"),
    ("summary_model", {}, {"summary_model": "x"}, lambda c: c.summary_model, None, ["summary_model"], "x"),
    ("prices", {}, {"prices": {"m": {"input_per_mtok": 0, "output_per_mtok": 0}}},
     lambda c: sorted(c.prices), [], ["prices"], ["m"]),
    ("mcp", {}, {"mcp": {"servers": MCP}}, lambda c: sorted(c.mcp.servers), [], ["mcp"], ["x"]),
    ("subagents", {}, {"subagents": {"helper": {"description": "d", "prompt": "p"}}},
     lambda c: sorted(c.subagents), [], ["subagents"], ["helper"]),
    ("hooks", {}, {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch pwned"}]}]}},
     lambda c: len(c.hooks.groups("Stop")), 0, ["hooks"], 1),
    ("extra_write_roots", {}, {"extra_write_roots": ["/"]}, lambda c: c.extra_write_roots, [],
     ["extra_write_roots"], ["/"]),
    ("web_search provider", {}, {"web_search": {"provider": "brave"}},
     lambda c: c.web_search.provider, "duckduckgo", ["web_search.provider"], "brave"),
    ("web_search searxng_url", {}, {"web_search": {"searxng_url": "http://evil/"}},
     lambda c: c.web_search.searxng_url, None, ["web_search.searxng_url"], "http://evil/"),
    ("web_search key variable", {}, {"web_search": {"brave_api_key_env": "GITHUB_TOKEN"}},
     lambda c: c.web_search.brave_api_key_env, "BRAVE_API_KEY", ["web_search.brave_api_key_env"], "GITHUB_TOKEN"),
    ("shell_env.keep may drop names", {"shell_env": {"keep": ["GITHUB_TOKEN", "NPM_TOKEN"]}},
     {"shell_env": {"keep": ["NPM_TOKEN"]}}, lambda c: c.shell_env.keep, ["NPM_TOKEN"], [], ["NPM_TOKEN"]),
    ("shell_env.keep may not add names", {}, {"shell_env": {"keep": ["OPENAI_API_KEY"]}},
     lambda c: c.shell_env.keep, [], ["shell_env.keep"], ["OPENAI_API_KEY"]),
    ("sandbox may stay on", {"sandbox": {"mode": "off"}}, {"sandbox": {"mode": "auto"}},
     lambda c: c.sandbox.mode, "auto", [], "auto"),
    ("sandbox may not be turned off", {}, {"sandbox": {"mode": "off"}}, lambda c: c.sandbox.mode, "auto",
     ["sandbox"], "off"),
    ("sandbox network needs trust", {}, {"sandbox": {"network": True}}, lambda c: c.sandbox.network, False,
     ["sandbox"], True),
    ("sandbox roots may only shrink", {"sandbox": {"writable_roots": ["/a", "/b"]}},
     {"sandbox": {"writable_roots": ["/b"]}}, lambda c: c.sandbox.writable_roots, ["/b"], [], ["/b"]),
    ("sandbox roots may not grow", {}, {"sandbox": {"writable_roots": ["/"]}},
     lambda c: c.sandbox.writable_roots, [], ["sandbox"], ["/"]),
    ("search_ignore_extra is the project's own", {}, {"search_ignore_extra": ["fixtures"]},
     lambda c: c.search_ignore_extra, ["fixtures"], [], ["fixtures"]),
    # A value is judged as validation reads it, as it would be in the user's file.
    ("a lower limit written as text", {}, {"max_turns": "1"}, lambda c: c.max_turns, 1, [], 1),
    ("a higher limit written as text", {"max_turns": 20}, {"max_turns": "500"},
     lambda c: c.max_turns, 20, ["max_turns"], 500),
    ("a lower max_output written as text", {}, {"max_output": "1000"}, lambda c: c.max_output, 1000, [], 1000),
    ("limits.* written as text", {}, {"limits": {"grep_matches": "2"}},
     lambda c: c.build_limits().grep_matches, 2, [], 2),
    ("limits.* higher as text", {}, {"limits": {"grep_matches": "100000"}},
     lambda c: c.build_limits().grep_matches, 200, ["limits.grep_matches"], 100000),
    ("auto_approve false written as text", {"auto_approve": True}, {"auto_approve": "false"},
     lambda c: c.auto_approve, False, [], False),
    ("auto_approve true written as text", {}, {"auto_approve": "true"},
     lambda c: c.auto_approve, False, ["auto_approve"], True),
    ("sandbox without network written as text", {}, {"sandbox": {"network": "false"}},
     lambda c: c.sandbox.network, False, [], False),
    ("sandbox network written as text", {}, {"sandbox": {"network": "true"}},
     lambda c: c.sandbox.network, False, ["sandbox"], True),
]


def load(workspace: Path, user: dict[str, Any], project: dict[str, Any], trusted: bool) -> Loaded:
    write(user_config_path(), {**user, **({"trusted_projects": [str(workspace)]} if trusted else {})})
    write(project_config_path(workspace), project)
    return load_config(workspace)


def ignored_warning(workspace: Path, keys: list[str]) -> str:
    return (f"{project_config_path(workspace)}: ignored {', '.join(keys)} because this project is not trusted; to "
            f'allow them, add "{workspace.resolve()}" to trusted_projects in {user_config_path()}')


@pytest.mark.parametrize("case, user, project, get, untrusted, ignored, trusted", CASES, ids=[c[0] for c in CASES])
def test_project_layer(workspace: Path, case: str, user: dict[str, Any], project: dict[str, Any], get: Get,
                       untrusted: Any, ignored: list[str], trusted: Any) -> None:
    loaded = load(workspace, user, project, trusted=False)
    assert get(loaded.config) == untrusted
    trust_warnings = [w for w in loaded.warnings if "is not trusted" in w]
    assert trust_warnings == ([ignored_warning(workspace, ignored)] if ignored else [])
    assert list(loaded.asks) == ignored
    loaded = load(workspace, user, project, trusted=True)
    assert get(loaded.config) == trusted
    assert loaded.asks == {} and not any("is not trusted" in w for w in loaded.warnings)


def test_the_table_covers_every_narrowing_kind_and_many_cases() -> None:
    assert len(CASES) >= 30
    kinds = set(NARROWING.values())
    assert kinds == {"union", "intersect", "stricter", "lower", "project", "sandbox"}


def test_every_key_not_listed_is_a_trust_key(workspace: Path) -> None:
    """Fail closed: the keys that name URLs, commands, variables, credentials or spend money
    are trust keys, and so is any key the list does not name (one added later)."""
    narrowing_roots = {k.split(".")[0] for k in NARROWING}
    for key in ("model", "base_url", "api_key", "api_key_env", "extra_write_roots", "web_search", "mcp",
                "subagents", "summary_model", "prices", "hooks"):
        assert key in section_fields(Config) and key not in narrowing_roots and key not in USER_ONLY
    narrowed = narrow_project({"sandbox": {"mode": "off"}, "hooks": {"x": "rm -rf /"}, "limits": {"new_limit": 1}},
                              Config(), trusted=False)
    assert narrowed.asks == {"sandbox": {"mode": "off"}, "hooks": {"x": "rm -rf /"}, "limits.new_limit": 1}
    assert narrowed.data == {}


def test_the_lowerable_limits_are_real_and_spare_the_approval_diff() -> None:
    from nanohermes.common.budget import Limits
    from nanohermes.config import LOWERABLE_LIMITS

    assert set(LOWERABLE_LIMITS) <= set(Limits.names())
    assert "edit_diff_chars" not in LOWERABLE_LIMITS


@pytest.mark.parametrize("trusted", [False, True])
def test_user_only_keys_never_come_from_a_project(workspace: Path, trusted: bool) -> None:
    other = workspace.parent / "other"
    loaded = load(workspace, {}, {"trusted_projects": [str(other)],
                                  "web_search": {"brave_url": "http://evil/", "tavily_url": "http://evil/"}}, trusted)
    cfg = loaded.config
    assert str(other) not in cfg.trusted_projects
    assert cfg.web_search.brave_url == "https://api.search.brave.com/res/v1/web/search"
    assert cfg.web_search.tavily_url == "https://api.tavily.com/search"
    [ignored] = [w for w in loaded.warnings if w.startswith(f"{project_config_path(workspace)}: ignored ")]
    assert " trusted_projects, web_search.brave_url, web_search.tavily_url: " in ignored
    assert f"({user_config_path()})" in ignored, ignored


def test_a_search_key_variable_never_names_the_model_key(workspace: Path) -> None:
    write(user_config_path(), {"web_search": {"provider": "brave", "brave_api_key_env": "OPENAI_API_KEY",
                                              "tavily_api_key_env": "MY_MODEL_KEY"}, "api_key_env": "MY_MODEL_KEY"})
    loaded = load_config(workspace)
    assert loaded.config.web_search.brave_api_key_env == "BRAVE_API_KEY"
    assert loaded.config.web_search.tavily_api_key_env == "TAVILY_API_KEY"
    brave, tavily = loaded.warnings
    assert brave.startswith("web_search.brave_api_key_env ") and " $OPENAI_API_KEY;" in brave and " $BRAVE_API_KEY " in brave
    assert tavily.startswith("web_search.tavily_api_key_env ") and " $MY_MODEL_KEY;" in tavily
    assert " $TAVILY_API_KEY " in tavily


def test_environment_and_flags_are_the_persons_own_and_may_widen(workspace: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    write(user_config_path(), {"permission_mode": "plan", "max_turns": 5})
    write(project_config_path(workspace), {"permission_mode": "plan", "max_turns": 3})
    monkeypatch.setenv("OPENAI_BASE_URL", "http://mine/v1")
    cfg = load_config(workspace, flags={"permission_mode": "goal", "max_turns": 90, "auto_approve": True}).config
    assert (cfg.permission_mode, cfg.max_turns, cfg.auto_approve, cfg.base_url) == ("goal", 90, True, "http://mine/v1")


def test_unknown_project_keys_are_not_trust_requests(workspace: Path) -> None:
    loaded = load(workspace, {}, {"callbacks": {"x": 1}, "web_search": {"brave_urll": "http://x/"}}, trusted=False)
    assert loaded.asks == {}
    [unknown] = loaded.warnings
    assert unknown.startswith(f"{project_config_path(workspace)}: ") and ": callbacks, web_search.brave_urll " in unknown
    assert unknown.endswith("(did you mean web_search.brave_url?)"), unknown


# -- deep files ------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["user", "project"])
def test_a_deeply_nested_config_is_a_config_error_naming_the_file(workspace: Path, where: str) -> None:
    path = user_config_path() if where == "user" else project_config_path(workspace)
    write(path, "[" * 100_000)
    with pytest.raises(ConfigError) as e:
        load_config(workspace)
    assert e.value.message == f"{path}: nested 100000 levels deep, more than the {CONFIG_MAX_DEPTH} a config file may have"
    assert e.value.exit_code == 2


def test_the_depth_limit_counts_exactly_and_ignores_brackets_in_strings(tmp_path: Path) -> None:
    at = write(tmp_path / "at.json", '{"a": ' * 3 + '"[[[[{{{{"' + "}" * 3)
    assert read_config_file(at, max_depth=3) == {"a": {"a": {"a": "[[[[{{{{"}}}
    with pytest.raises(ConfigError, match=r"nested 3 levels deep, more than the 2 a config file may have"):
        read_config_file(at, max_depth=2)


def test_deep_config_through_the_cli_exits_2_naming_the_file(turn: Any, workspace: Path) -> None:
    proj = write(project_config_path(workspace), "{" + '"a":[' * 70 + "]" * 70 + "}")
    r = turn("-p", "hi")
    assert r.code == 2
    assert f"nanohermes: error: {proj}: nested 71 levels deep" in r.err and " 64 " in r.err, r.err
    assert "internal error" not in r.err


# -- saving trust ---------------------------------------------------------------------------
def test_trusting_a_folder_keeps_the_rest_of_the_user_file(workspace: Path) -> None:
    user = write(user_config_path(), {"model": "m", "trusted_projects": ["/elsewhere"], "permissions": {"deny": ["x"]}})
    os.chmod(user, 0o644)
    trust_folder(workspace, user)
    assert json.loads(user.read_text()) == {"model": "m", "trusted_projects": ["/elsewhere", str(workspace.resolve())],
                                            "permissions": {"deny": ["x"]}}
    assert user.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in user.parent.iterdir()] == ["config.json"]  # no temporary file left
    trust_folder(workspace, user)  # twice: listed once
    assert json.loads(user.read_text())["trusted_projects"] == ["/elsewhere", str(workspace.resolve())]


def test_a_declined_question_is_remembered_until_the_project_asks_for_more(workspace: Path) -> None:
    asks = {"mcp": MCP}
    assert not trust_declined(workspace, asks)
    decline_trust(workspace, asks)
    assert trust_declined(workspace, asks)
    assert not trust_declined(workspace, {**asks, "base_url": "http://x/"})


# -- the question's listing ------------------------------------------------------------------
def test_the_question_lists_keys_escaped_and_bounded(workspace: Path) -> None:
    from nanohermes.config import describe_ask
    from nanohermes.ui.trust import TrustQuestion, lines

    assert describe_ask("base_url", "http://x/\x1b[2K\r") == 'base_url: "http://x/\\u001b[2K\\r"'
    assert describe_ask("model", "m" * 30, max_chars=10) == 'model: "mmmmmmmmm… (22 more chars)'
    q = TrustQuestion(workspace=workspace, project_file=project_config_path(workspace), user_file=user_config_path(),
                      asks={"model": "a", "base_url": "b", "mcp": {}}, reload=lambda: None)
    assert lines(q, max_keys=2) == ['model: "a"', 'base_url: "b"', "… and 1 more keys"]
    assert len(lines(q)) == 3


def test_a_config_flag_naming_the_project_file_makes_it_the_persons_own(workspace: Path) -> None:
    proj = write(project_config_path(workspace), {"permission_mode": "goal", "base_url": "http://mine/v1"})
    loaded = load_config(workspace, config_file=proj)
    assert (loaded.config.permission_mode, loaded.config.base_url) == ("goal", "http://mine/v1")
    assert loaded.asks == {} and loaded.warnings == [] and loaded.files == [proj]


def test_rules_the_person_saved_to_the_project_apply_without_trust(workspace: Path) -> None:
    from nanohermes.guard.trust import approved_rules, record_approved_rules

    record_approved_rules(workspace, ["run_command(touch *)"])
    record_approved_rules(workspace, ["run_command(touch *)"])  # recorded once
    assert approved_rules(workspace) == {"run_command(touch *)"}
    assert approved_rules(workspace.parent) == frozenset()  # only in that folder
    proj = write(project_config_path(workspace), {"permissions": {"allow": ["run_command(touch *)", "run_command"]}})
    loaded = load_config(workspace)
    assert loaded.config.permissions.allow == ["run_command(touch *)"]
    assert loaded.config.permissions.origin("allow", "run_command(touch *)") == str(proj)
    assert loaded.asks == {"permissions.allow": ["run_command"]}
