"""permissions.decide() as a table: mode x tool x lists x rules."""

from __future__ import annotations

import pytest

from nanohermes.permissions import Policy, Rule, decide, visible

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
    (Policy(mode="goal"), "write_file", "edit", False, "/etc/x", True, "allow"),
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
]


@pytest.mark.parametrize("policy,tool,approval,read_only,subject,protected,expected", CASES)
def test_decide(policy: Policy, tool: str, approval: str, read_only: bool, subject: str | None, protected: bool, expected: str) -> None:
    v = decide(policy, tool_name=tool, approval=approval, read_only=read_only, subject=subject, protected=protected)
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
    assert visible(policy, tool) is shown


@pytest.mark.parametrize("text", ["", "run_command(", "two words", "(x)"])
def test_malformed_rules_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="malformed permission rule"):
        Rule.parse(text)
