"""Who may run what: modes, tool lists, rules, and `decide()` -> allow | ask | deny.

Pure functions over plain values, table-tested. The same matcher filters the tool specs the
model sees (`visible`) and checks every call at run time (`decide`), because a model can
replay a tool name from history after the mode changed.

Check order (`decision.STEPS`, one named function a step; a command line's in
`lines.LINE_STEPS`): mode block list, `disallowed_tools`, `allowed_tools` (when non-empty,
only those), then deny rules (read rules' too: `reading`), then plan-mode read-only check,
then protected writes (refused for a file tool when nobody is asked), then goal mode /
--yes, then ask rules (read rules' too), then allow rules (learned ones included), the
built-in read-only commands, the secret-file list, the question per web host (default and
accept-edits modes) and the tool's own approval level.

Rules are `tool` or `tool(pattern)`. What the pattern is matched against comes from the
tool's declared subject kind (carried by the call's `Target`): a command prefix with `*` for
a command tool, checked against every simple command of the line (see shellparse); a path
glob relative to the workspace for path tools (`*` stays inside a folder, `**` crosses
folders, a pattern without `/` matches the file name at any depth), checked against every
path the call touches; `domain:host` for host tools, compared in canonical form; a name
prefix `mcp__server` for MCP tools. Modes block by effect, never by name: plan blocks every
tool that writes or runs, debug every tool that writes.

Commands fail closed: a line the shell analysis cannot follow exactly (see shellparse) is
asked every time, and refused when nobody will be asked and a deny rule applies; deny and
ask rules see through git's global options; the built-in read-only list checks each
program's arguments the way the program parses them; "always" learns the exact line for
programs whose arguments run code. Facts that need the file system (protected paths,
secret files reached through links, globs and folders) are computed by pathrules and
passed in on the `Target`.

Parts: `rules` (rule shape, `Target`, the matchers), `commands` (how command rules meet a
simple command, suggestions), `policy` (`Policy`, `Verdict`, `blocked`), `decision` (`decide`
as its ordered steps, `STEPS`), `lines` (a command line's steps, `LINE_STEPS`), `reading`
(which rules cover reading a path, for every reader) and `report` (`describe`). What is known of each
command (read-only or not, which files it reads, what "always" learns) is the catalogue of
commands, `nanohermes.guard.commands`, whose queries are re-exported here.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from nanohermes.guard.permissions.policy import PROTECTED, Basis, Denial, Policy, Verdict, blocked, unattended, visible
from nanohermes.guard.permissions.reading import READER, ReadRules, folders_of, read_rules
from nanohermes.guard.permissions.rules import (
    DEFAULT_SECRET_FILES, MODE_BLOCKED_EFFECTS, Decision, Effect, Rule, SubjectKind, Target,
    escape_pattern, is_secret, match_command_text, match_domain, match_path, names_tool, real_pattern,
    rule_problem,
)

if TYPE_CHECKING:
    from nanohermes.guard.commands import (
        CATALOGUE, ENTRIES, Command, Leading, Options, Reads, Wraps, git_globals, is_read_only, lookup, option_reads,
        read_operands, reads_secret, unanalysable,
    )
    from nanohermes.guard.permissions.commands import suggest_command_rule
    from nanohermes.guard.permissions.decision import (
        decide, policy_read_rules, read_verdict, reading_asked, secret_subjects,
    )
    from nanohermes.guard.permissions.lines import UNANALYSABLE_HELP, read_only_line
    from nanohermes.guard.permissions.report import describe

# The rest loads on first use: the decision steps, the command catalogue and the shell
# analysis they read are a first call's to judge, and a turn that calls no tool (or
# builds a policy, a tool list, a config) never needs them.
_LATER = {
    **dict.fromkeys(("CATALOGUE", "ENTRIES", "Command", "Leading", "Options", "Reads", "Wraps", "git_globals",
                     "is_read_only", "lookup", "option_reads", "read_operands", "reads_secret", "unanalysable"),
                    "catalogue"),
    "suggest_command_rule": "commands",
    **dict.fromkeys(("decide", "policy_read_rules", "read_verdict", "reading_asked", "secret_subjects"), "decision"),
    **dict.fromkeys(("UNANALYSABLE_HELP", "read_only_line"), "lines"),
    "describe": "report",
}


def _part(part: str | None) -> ModuleType | None:
    """The module of a part that loads on first use (None: no such part)."""
    if part == "catalogue":
        import nanohermes.guard.commands as catalogue  # the command catalogue: at the first command judged

        return catalogue
    if part == "commands":
        from nanohermes.guard.permissions import commands  # command rules: at the first command judged

        return commands
    if part == "decision":
        from nanohermes.guard.permissions import decision  # the decision steps: at the first call judged

        return decision
    if part == "lines":
        from nanohermes.guard.permissions import lines  # a command line's steps: at the first command judged

        return lines
    if part == "report":
        from nanohermes.guard.permissions import report  # /permissions and the blocked-tool report

        return report
    return None


def __getattr__(name: str) -> Any:
    """A name of the parts that load on first use (`_LATER`), from its part."""
    module = _part(_LATER.get(name))
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value  # found once: later lookups skip this function
    return value


__all__ = [
    "Basis", "CATALOGUE", "Command", "DEFAULT_SECRET_FILES", "Decision", "Denial", "ENTRIES", "Effect", "Leading",
    "MODE_BLOCKED_EFFECTS", "Options", "PROTECTED", "Policy", "READER", "ReadRules", "Reads", "Rule", "SubjectKind",
    "Target", "UNANALYSABLE_HELP", "Verdict", "Wraps", "blocked", "decide", "describe", "escape_pattern", "folders_of",
    "git_globals", "is_read_only", "is_secret", "lookup", "match_command_text", "match_domain", "match_path",
    "names_tool", "option_reads", "policy_read_rules", "read_only_line", "read_operands", "read_rules", "read_verdict",
    "reading_asked", "reads_secret", "real_pattern", "rule_problem", "secret_subjects", "suggest_command_rule",
    "unanalysable", "unattended", "visible",
]
