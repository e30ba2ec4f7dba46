"""permissions.decide() as a table: mode x tool x lists x rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from nanohermes.guard.permissions import Policy, Rule, describe, match_path, visible
from nanohermes.tools import declarations
from tool_support import decide_call

R = Rule.parse

CASES = [
    # policy, tool, approval, read_only, subject, protected, expected
    (Policy(), "read_file", "never", True, "a.py", False, "allow"),
    (Policy(), "write_file", "edit", False, "a.py", False, "ask"),
    (Policy(mode="accept-edits"), "write_file", "edit", False, "a.py", False, "allow"),
    (Policy(mode="accept-edits"), "write_file", "edit", False, "/etc/x", True, "ask"),
    (Policy(mode="accept-edits"), "run_command", "always", False, "make", False, "ask"),
    (Policy(mode="plan"), "write_file", "edit", False, "a.py", False, "deny"),
    (Policy(mode="plan"), "run_command", "always", False, "ls", False, "deny"),
    (Policy(mode="plan"), "mcp__srv__mutate", "always", False, None, False, "deny"),
    (Policy(mode="plan"), "todo_write", "never", False, None, False, "allow"),
    (Policy(mode="plan", allow=(R("write_file"),)), "write_file", "edit", False, "a", False, "deny"),
    (Policy(mode="debug"), "edit_file", "edit", False, "a.py", False, "deny"),
    (Policy(mode="debug"), "run_command", "always", False, "pytest", False, "ask"),
    (Policy(mode="debug"), "git_commit", "always", False, None, False, "deny"),
    (Policy(mode="goal"), "run_command", "always", False, "rm -rf build", False, "allow"),
    (Policy(mode="goal"), "write_file", "edit", False, "/etc/x", True, "deny"),  # nobody to ask: refused
    (Policy(auto_approve=True), "write_file", "edit", False, "/etc/x", True, "deny"),
    (Policy(auto_approve=True), "run_command", "always", False, "echo x > /etc/x", True, "allow"),  # sandboxed
    (Policy(skip_permissions=True), "write_file", "edit", False, "/etc/x", True, "allow"),
    (Policy(skip_permissions=True, mode="plan"), "write_file", "edit", False, "/etc/x", True, "deny"),
    (Policy(skip_permissions=True, deny=(R("write_file(/etc/**)"),)), "write_file", "edit", False, "/etc/x", True,
     "deny"),
    (Policy(mode="plan"), "write_file", "edit", False, "/etc/x", True, "deny"),
    (Policy(auto_approve=True), "run_command", "always", False, "make", False, "allow"),
    (Policy(disallowed_tools=("read_file",)), "read_file", "never", True, "a", False, "deny"),
    (Policy(allowed_tools=("read_file",)), "list_dir", "never", True, ".", False, "deny"),
    (Policy(allowed_tools=("read_file",)), "read_file", "never", True, "a", False, "allow"),
    (Policy(mode="plan", allowed_tools=("write_file",)), "write_file", "edit", False, "a", False, "deny"),
    (Policy(allow=(R("run_command(git *)"),)), "run_command", "always", False, "git log", False, "allow"),
    (Policy(allow=(R("run_command(git *)"),)), "run_command", "always", False, "make", False, "ask"),
    (Policy(deny=(R("run_command(rm *)"),), auto_approve=True), "run_command", "always", False, "rm -rf /", False, "deny"),
    (Policy(ask=(R("read_file"),)), "read_file", "never", True, "a", False, "ask"),
    (Policy(ask=(R("read_file"),), allow=(R("read_file"),)), "read_file", "never", True, "a", False, "ask"),
    (Policy(deny=(R("mcp__srv"),)), "mcp__srv__tool", "always", False, None, False, "deny"),
    (Policy(deny=(R("mcp__srv"),)), "mcp__srv2__tool", "always", False, None, False, "ask"),
    # a rule on reading covers every reader, and a path below a folder it names
    (Policy(deny=(R("read_file(secrets/**)"),)), "grep", "never", True, "secrets/k", False, "deny"),
    (Policy(deny=(R("read_file(secrets/**)"),)), "glob", "never", True, "secrets", False, "deny"),
    (Policy(deny=(R("read_file(secrets/**)"),)), "list_dir", "never", True, "secrets", False, "deny"),
    (Policy(deny=(R("read_file(secrets/**)"),)), "git_diff", "never", True, "secrets/k", False, "deny"),
    (Policy(deny=(R("read_file(secrets/**)"),)), "grep", "never", True, ".", False, "allow"),  # withheld inside
    (Policy(deny=(R("read_file(secrets)"),)), "read_file", "never", True, "secrets/a/k", False, "deny"),
    (Policy(deny=(R("read_file(secrets/**)"),)), "edit_file", "edit", False, "secrets/k", False, "deny"),
    (Policy(deny=(R("read_file(secrets/**)"),), mode="accept-edits"), "write_file", "edit", False, "secrets/new",
     False, "allow"),  # write_file shows no file's text
    (Policy(ask=(R("read_file(secrets/**)"),)), "grep", "never", True, "secrets/k", False, "ask"),
    (Policy(ask=(R("read_file(secrets/**)"),), auto_approve=True), "grep", "never", True, "secrets/k", False, "deny"),
    (Policy(ask=(R("read_file(secrets/**)"),), skip_permissions=True), "grep", "never", True, "secrets/k", False,
     "allow"),  # everything allowed
    (Policy(deny=(R("grep(secrets/**)"),)), "read_file", "never", True, "secrets/k", False, "allow"),  # grep's only
]


@pytest.mark.parametrize("policy,tool,approval,read_only,subject,protected,expected", CASES)
def test_decide(policy: Policy, tool: str, approval: str, read_only: bool, subject: str | None, protected: bool, expected: str) -> None:
    v = decide_call(policy, tool_name=tool, approval=approval, read_only=read_only, subject=subject, protected=protected)
    assert v.decision == expected, v.reason


@pytest.mark.parametrize("policy,tool,shown", [
    (Policy(mode="plan"), "edit_file", False),
    (Policy(mode="plan"), "read_file", True),
    (Policy(mode="debug"), "run_command", True),
    (Policy(disallowed_tools=("mcp__srv",)), "mcp__srv__x", False),
    (Policy(deny=(R("mcp__srv"),)), "mcp__srv__x", False),
    (Policy(deny=(R("run_command(rm *)"),)), "run_command", True),  # a pattern rule does not hide the tool
])
def test_visible_uses_the_same_matcher(policy: Policy, tool: str, shown: bool) -> None:
    effect = declarations().get(tool, ("mcp", "run"))[1]  # what the tool declares it does
    assert visible(policy, tool, effect) is shown


@pytest.mark.parametrize("text", ["", "run_command(", "two words", "(x)"])
def test_malformed_rules_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="malformed permission rule"):
        Rule.parse(text)


# -- the mode x rule precedence matrix -----------------------------------------------------
# For each tool: (approval, read_only, subject) and, per mode, the decision with
# (no rule, an allow rule, an ask rule, a deny rule) naming the tool.
MATRIX = {
    ("write_file", "edit", False, "a.py"): {
        "default": "ask allow ask deny", "accept-edits": "allow allow ask deny", "plan": "deny deny deny deny",
        "debug": "deny deny deny deny", "goal": "allow allow allow deny"},
    ("run_command", "always", False, "make"): {
        "default": "ask allow ask deny", "accept-edits": "ask allow ask deny", "plan": "deny deny deny deny",
        "debug": "ask allow ask deny", "goal": "allow allow allow deny"},
    # A rule asking before a read is no question goal mode answers: nobody is there, and the
    # sandbox withholds the path from its commands.
    ("read_file", "never", True, "a.py"): {
        "default": "allow allow ask deny", "accept-edits": "allow allow ask deny", "plan": "allow allow ask deny",
        "debug": "allow allow ask deny", "goal": "allow allow deny deny"},
    ("mcp__srv__mutate", "always", False, None): {
        "default": "ask allow ask deny", "accept-edits": "ask allow ask deny", "plan": "deny deny deny deny",
        "debug": "ask allow ask deny", "goal": "allow allow allow deny"},
}
MATRIX_CASES = [
    (tool, approval, ro, subject, mode, kind, expected)
    for (tool, approval, ro, subject), modes in MATRIX.items()
    for mode, row in modes.items()
    for kind, expected in zip(("none", "allow", "ask", "deny"), row.split(), strict=True)
]


@pytest.mark.parametrize("tool,approval,read_only,subject,mode,kind,expected", MATRIX_CASES)
def test_mode_by_rule_matrix(tool: str, approval: str, read_only: bool, subject: str | None, mode: str, kind: str,
                             expected: str) -> None:
    rule = (R(tool) if tool.startswith("mcp__") or kind == "deny" else R(f"{tool}({subject})"),)
    policy = Policy(mode=mode, **({} if kind == "none" else {kind: rule}))  # type: ignore[arg-type]
    v = decide_call(policy, tool_name=tool, approval=approval, read_only=read_only, subject=subject)
    assert v.decision == expected, v.reason


@pytest.mark.parametrize("mode,rules,expected", [
    ("default", {}, "ask"),
    ("default", {"allow": (R("write_file"),)}, "ask"),  # an allow rule does not cover a protected write
    ("accept-edits", {}, "ask"),
    ("plan", {}, "deny"),
    ("debug", {}, "deny"),
    ("goal", {}, "deny"),  # nobody to ask: a file tool's protected write is refused
    ("goal", {"deny": (R("write_file(/etc/**)"),)}, "deny"),
])
def test_protected_writes(mode: str, rules: dict[str, tuple[Rule, ...]], expected: str) -> None:
    tool = "run_command" if mode == "debug" else "write_file"  # debug blocks write_file outright
    subject = "echo x > /etc/x" if tool == "run_command" else "/etc/x"
    v = decide_call(Policy(mode=mode, **rules), tool_name=tool, approval="edit", read_only=False,  # type: ignore[arg-type]
               subject=subject, protected="/etc/x is outside the workspace")
    assert v.decision == expected, v.reason
    if expected == "ask":
        assert v.suggest is None  # nothing to remember: it is asked every time


def test_auto_approve_never_beats_a_mode_block_or_deny() -> None:
    assert decide_call(Policy(mode="plan", auto_approve=True), tool_name="write_file", approval="edit", read_only=False,
                  subject="a").decision == "deny"
    assert decide_call(Policy(auto_approve=True, deny=(R("read_file(secrets/**)"),)), tool_name="read_file",
                  approval="never", read_only=True, subject="secrets/k").decision == "deny"


# -- path, domain and secret rules ---------------------------------------------------------
@pytest.mark.parametrize("pattern,subject,hit", [
    ("src/**", "src/a/b.py", True),
    ("src/**", "src", True),
    ("src/**", "srcx/a.py", False),
    ("src/*", "src/a.py", True),
    ("src/*", "src/a/b.py", False),  # * stays inside one folder
    ("*.py", "deep/er/a.py", True),  # a bare name matches at any depth
    (".env", "config/.env", True),
    ("**/*.md", "README.md", True),
    ("**/*.md", "docs/x/y.md", True),
    ("/etc/**", "/etc/passwd", True),
    ("/etc/**", "etc/passwd", False),
    ("docs/[ab].md", "docs/a.md", True),
    ("./src/**", "src/x", True),
])
def test_path_patterns(pattern: str, subject: str, hit: bool) -> None:
    assert match_path(pattern, subject) is hit


@pytest.mark.parametrize("pattern,subject,hit", [
    ("{ws}/secrets/**", "secrets/key.txt", True),  # the workspace's own files, named absolutely
    ("{ws}/secrets/**", "secrets", True),
    ("{ws}/secrets/**", "other/key.txt", False),
    ("{ws}/**", ".", True),
    ("{ws}/*.pem", "deep/a.pem", False),  # anchored: an absolute pattern is no bare name
    ("{link}/secrets/**", "secrets/key.txt", True),  # spelled through a link to the workspace
    ("~/ws/secrets/**", "secrets/key.txt", True),
    ("{ws}/secrets/**", "{ws}/secrets/key.txt", True),  # an absolute subject is matched as before
    ("{ws}x/**", "secrets/key.txt", False),
])
def test_absolute_patterns_meet_the_workspaces_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str,
                                                     subject: str, hit: bool) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "link").symlink_to(ws)
    pattern, subject = (x.format(ws=ws, link=tmp_path / "link") for x in (pattern, subject))
    assert match_path(pattern, subject, str(ws)) is hit
    rule = R(f"read_file({pattern})", root=str(ws))
    assert rule.matches("read_file", subject, "path") is hit
    # Without the workspace it is read for, a rule meets only paths outside it, named absolutely.
    assert R(f"read_file({pattern})").matches("read_file", subject, "path") is (hit and subject.startswith("/"))


@pytest.mark.parametrize("rule,host,hit", [
    ("web_fetch(domain:docs.python.org)", "docs.python.org", True),
    ("web_fetch(domain:docs.python.org)", "evil.org", False),
    ("web_fetch(domain:*.python.org)", "docs.python.org", True),
    ("web_fetch(domain:*.python.org)", "python.org.evil.com", False),
    ("web_fetch(domain:Docs.Python.org)", "docs.python.org", True),
])
def test_domain_rules(rule: str, host: str, hit: bool) -> None:
    assert R(rule).matches("web_fetch", host) is hit


@pytest.mark.parametrize("text,problem", [
    ("web_fetch(docs.python.org)", "web_fetch patterns look like `domain:example.com`"),
    ("run_command()", "empty pattern"),
])
def test_rules_with_the_wrong_pattern_shape_are_malformed(text: str, problem: str) -> None:
    kinds = {name: kind for name, (kind, _) in declarations().items()}  # what the built-in tools declare
    with pytest.raises(ValueError, match=problem):
        Rule.parse(text, kinds=kinds)


@pytest.mark.parametrize("policy,tool,subject,expected", [
    (Policy(), "read_file", ".env", "ask"),
    (Policy(), "read_file", "config/prod.pem", "ask"),
    (Policy(), "grep", ".env.local", "ask"),
    (Policy(), "read_file", "env.py", "allow"),
    (Policy(), "list_dir", ".env", "allow"),  # listing is not reading
    (Policy(allow=(R("read_file"),)), "read_file", ".env", "ask"),  # the whole tool does not name it
    (Policy(allow=(R("read_file(.env)"),)), "read_file", ".env", "allow"),
    (Policy(secret_files=("*.secret",)), "read_file", ".env", "allow"),
    (Policy(secret_files=("*.secret",)), "read_file", "a.secret", "ask"),
    # Nobody to ask: not shown, as the sandbox withholds it from commands, unless a rule names it.
    (Policy(mode="goal"), "read_file", ".env", "deny"),
    (Policy(auto_approve=True), "grep", ".env", "deny"),
    (Policy(mode="goal", allow=(R("read_file(.env)"),)), "read_file", ".env", "allow"),
    (Policy(mode="goal", allow=(R("read_file"),)), "read_file", ".env", "deny"),
    (Policy(mode="goal", skip_permissions=True), "read_file", ".env", "allow"),  # everything allowed
    (Policy(mode="goal", own_secrets=("/home/u/.config/nanohermes/config.json",)), "read_file",
     "/home/u/.config/nanohermes/config.json", "deny"),
])
def test_secret_files_are_asked_before_reading(policy: Policy, tool: str, subject: str, expected: str) -> None:
    v = decide_call(policy, tool_name=tool, approval="never", read_only=True, subject=subject)
    assert v.decision == expected, v.reason
    if expected == "ask":
        assert [str(r) for r in v.suggest or ()] == [f"{tool}({subject})"]
    if expected == "deny":
        assert "nobody is asked in an unattended run" in v.reason and v.reason.endswith(f"{tool}({subject})")


@pytest.mark.parametrize("tool,mode,expected", [
    ("edit_file", "accept-edits", "ask"),  # its near misses quote the file
    ("apply_patch", "accept-edits", "ask"),  # so do a hunk's mismatches
    ("write_file", "accept-edits", "allow"),  # shows nothing of the file
    ("edit_file", "default", "ask"),
    ("edit_file", "goal", "deny"),  # unattended: as read_file is
])
def test_secret_files_are_asked_before_an_edit_that_quotes_them(tool: str, mode: str, expected: str) -> None:
    v = decide_call(Policy(mode=mode), tool_name=tool, approval="edit", read_only=False, subject=".env")
    assert v.decision == expected, v.reason
    if expected == "ask":
        assert "secret-file list" in v.reason and [str(r) for r in v.suggest or ()] == [f"{tool}(.env)"]


def test_describe_lists_rules_with_their_origin() -> None:
    policy = Policy(mode="debug", allow=(Rule("run_command", "git log *", "/home/u/.config/nanohermes/config.json"),),
                    deny=(Rule("web_fetch", "domain:evil.org", "/ws/.nanohermes/config.json"),),
                    ask=(Rule("read_file"),))
    lines = describe(policy, [(n, e) for n, (_, e) in declarations().items()])
    assert lines[0] == "mode: debug"
    assert "blocked by the mode: apply_patch, edit_file, git_commit, write_file" in lines
    assert "deny   web_fetch(domain:evil.org)  — /ws/.nanohermes/config.json" in lines
    assert "ask    read_file  — config" in lines
    assert "allow  run_command(git log *)  — /home/u/.config/nanohermes/config.json" in lines


@pytest.mark.parametrize("mode, shown", [("plan", False), ("debug", True), ("default", True)])
def test_plan_mode_offers_neither_memory_save_nor_task_kill(tmp_path: Path, mode: str, shown: bool) -> None:
    from nanohermes.config import Config
    from nanohermes.common.events import RecordingUI
    from nanohermes.turn.runtime import Runtime
    from nanohermes.tools import build_tools

    rt = Runtime(tools=build_tools(), config=Config(), workspace=tmp_path, ui=RecordingUI(), policy=Policy(mode=mode))
    names = {t.name for t in rt.visible_tools()}
    assert ("memory_save" in names, "task_kill" in names) == (shown, shown)
    assert "todo_write" in names and "memory_search" in names
