"""Claude Code's words for what hooks see and say, so that a hook written for Claude Code works
unchanged: how a matcher names tools (`Edit|Write`, `Edit, Write`, `mcp__github__.*`), the
older and newer names of a renamed tool, a hook's `if` condition (a rule in Claude Code's
permission syntax: `Bash(git push:*)`, `Write(.env*)`), the shape of a tool's response and
of a hook's replacement of it, and a hook's exec form (`args`). The names of the permission
modes are `modes.CLAUDE_MODES`.

What a call is called is the tool's own declaration (`Tool.claude_calls`); this module only
reads it. An `if` condition is matched as a deny rule of the same text would be (every
simple command of a line, every spelling of a path) and runs the hook when it cannot tell,
as Claude Code does: a condition narrows when a hook runs, and a guard must not be skipped
by a command written to confuse the match.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nanohermes.tools.base import ClaudeCall
from nanohermes.config.claude_files import denial_covers, rule_pattern
from nanohermes.guard.pathrules import PathProblem, compute_target, host_subject
from nanohermes.guard.permissions import Rule, unanalysable
from nanohermes.guard.permissions.commands import could_match, deny_matches
from nanohermes.guard.permissions.rules import match_command_text, match_domain, match_path
from nanohermes.guard.shellparse import ParseError, split

# Claude Code renamed some of its tools; a matcher or condition naming either name means the
# same tool (old or new name -> the name `claude_names` use).
RENAMED = {"Agent": "Task", "KillBash": "KillShell", "TaskStop": "KillShell", "TaskOutput": "BashOutput"}

# The events a tool call fires: the only ones whose hooks may carry an `if` condition.
TOOL_EVENTS = ("PreToolUse", "PostToolUse")

_EXACT = re.compile(r"[A-Za-z0-9_\- ,|]*")  # a matcher of plain names: compared name by name
_RULE = re.compile(r"^\s*([A-Za-z0-9_\-*]+)\s*(?:\((.*)\))?\s*$", re.S)


def call_names(call_name: str, own: str) -> tuple[str, ...]:
    """Every name a call is known by: Claude Code's (`Task`), its other names there (`Agent`),
    and the tool's own (`subagent`)."""
    names = [call_name, *(old for old, new in RENAMED.items() if new == call_name), own]
    return tuple(dict.fromkeys(names))


def matcher_matches(matcher: str, names: Iterable[str]) -> bool:
    """Claude Code's matcher rules: empty or `*` matches everything; letters, digits, `_`, `-`
    and spaces, separated by `|` or `,`, are exact names; anything else is a regular expression
    searched for anywhere in the name (`^Notebook`, `mcp__memory__.*`)."""
    if matcher.strip() in ("", "*"):
        return True
    if _EXACT.fullmatch(matcher):
        wanted = {w.strip() for w in re.split(r"[|,]", matcher)} - {""}
        return any(n in wanted for n in names)
    try:
        pattern = re.compile(matcher)
    except re.error:
        return False  # the config loader refuses such a matcher; one built in code matches nothing
    return any(pattern.search(n) for n in names)


def matcher_problem(matcher: str) -> str | None:
    """Why a matcher can never work (a broken regular expression), or None."""
    if matcher.strip() in ("", "*") or _EXACT.fullmatch(matcher):
        return None
    try:
        re.compile(matcher)
    except re.error as e:
        return f"matcher {matcher!r} is not a regular expression: {e}"
    return None


@dataclass(frozen=True)
class Condition:
    """A hook's `if`: one permission rule, `Tool` or `Tool(pattern)`, naming the tool by
    Claude Code's name or ours."""

    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> Condition:
        """Raises ValueError for text that is no rule (`Bash(git *) || Edit` is two)."""
        m = _RULE.match(text)
        if not m or (m.group(2) is not None and not m.group(2).strip()):
            raise ValueError(f"`if` condition {text!r} is not one permission rule such as `Bash(git *)` or "
                             f"`Edit(*.ts)`; write one handler per condition")
        return cls(m.group(1), m.group(2).strip() if m.group(2) is not None else None)

    def names(self, call: ClaudeCall, own: str) -> bool:
        """Does the condition name the call's tool (`mcp__server` names all of a server's)? A
        file tool's name covers what a deny rule of that name covers, as Claude Code's Edit
        rules cover every tool that edits files: `Write(.env*)` holds for an edit of `.env`
        too, so a guard is not skipped because the model chose another file tool."""
        wanted = RENAMED.get(self.tool, self.tool)
        known = call_names(call.name, own)
        if wanted.startswith("mcp__"):
            return any(n == wanted or n.startswith(wanted.rstrip("*").rstrip("_") + "__") for n in known)
        return wanted in known or self.tool in known or (call.kind == "path" and own in denial_covers(wanted))

    def holds(self, call: ClaudeCall, own: str, workspace: Path) -> bool:
        """Should a hook with this condition run for `call` (a call of our tool `own`)?"""
        if not self.names(call, own):
            return False
        if self.pattern is None or self.pattern == "*":
            return True
        if not call.subjects:
            return False
        if call.kind == "command":
            return any(_command_may_match(self.pattern, line) for line in call.subjects)
        if call.kind == "path":
            return _path_may_match(self.tool, self.pattern, call.subjects, workspace)
        if call.kind == "host":
            return any(match_domain(self.pattern, host_subject(s)) for s in call.subjects)
        return any(fnmatch.fnmatchcase(s, self.pattern) for s in call.subjects)


def _command_may_match(pattern: str, line: str) -> bool:
    """A command pattern against a line as a deny rule meets it: each simple command, however
    spelled, and any whose words are known only when it runs; a line that cannot be analysed
    matches (the hook runs)."""
    if match_command_text(pattern, line.strip()):
        return True
    try:
        commands = split(line)
    except ParseError:
        return True
    rule = Rule("Bash", pattern)
    return any(deny_matches(rule, c) or could_match(rule, c) or bool(unanalysable(c)) for c in commands)


def _path_may_match(tool: str, pattern: str, paths: tuple[str, ...], workspace: Path) -> bool:
    """A path pattern in Claude Code's form against the paths as the one resolver judges them
    (links and `..` followed, and as written); a path that cannot be judged matches."""
    ours = rule_pattern(tool, pattern, workspace)
    try:
        target = compute_target("path", "read", list(paths), workspace)
    except (PathProblem, OSError, ValueError):
        return True
    return any(match_path(ours, s) for s in (*target.subjects, *target.aliases))


def claude_response(call: ClaudeCall, text: str) -> Any:
    """A successful call's result as Claude Code's tool of that name returns it to hooks
    (`tool_response`): the fields it has that the result can honestly fill, the text itself
    where Claude Code gives text; other tools' results are their text."""
    inp = call.input
    if call.name == "Bash":
        return _bash_response(text)
    if call.name == "Read":
        return {"type": "text", "file": {"filePath": inp.get("file_path"), **_read_file(text)}}
    if call.name == "Write":
        return {"filePath": inp.get("file_path"), "content": inp.get("content"), "success": True}
    if call.name == "Edit":
        return {"filePath": inp.get("file_path"), "oldString": inp.get("old_string"),
                "newString": inp.get("new_string"), "replaceAll": bool(inp.get("replace_all")), "success": True}
    if call.name == "MultiEdit":
        return {"filePath": inp.get("file_path"), "edits": inp.get("edits"), "success": True}
    if call.name == "WebFetch":
        return {"url": inp.get("url"), "result": text}
    if call.name == "Task":
        return {"status": "completed", "content": [{"type": "text", "text": text}]}
    return text


_NUMBERED = re.compile(r" *(\d+)\t(.*)")
_OF_TOTAL = re.compile(r"^showing lines \d+-\d+ of (\d+);", re.M)


def _read_file(text: str) -> dict[str, Any]:
    """A read_file result (`N<TAB>line` rows, then notes) as Claude Code's Read response gives the
    file: the lines' own text (it numbers them itself, from `startLine`), with the counts."""
    rows: list[str] = []
    start = 1
    for line in text.split("\n"):
        m = _NUMBERED.fullmatch(line)
        if m is None:
            break
        if not rows:
            start = int(m.group(1))
        rows.append(m.group(2))
    total = _OF_TOTAL.search(text)
    return {"content": "\n".join(rows), "numLines": len(rows), "startLine": start,
            "totalLines": int(total.group(1)) if total else start + len(rows) - 1}


_RUN = re.compile(r"exit code: ([^\n]*)\n\nstdout:\n")
_STARTED = re.compile(r"started background task (\S+):")


def _bash_response(text: str) -> dict[str, Any]:
    """A run_command result (`exit code: N`, `stdout:`, `stderr:`, notes) as Claude Code's Bash
    response, with the exit code beside it; any other text (a background task started) is
    its stdout."""
    m = _RUN.match(text)
    if m is None:
        started = _STARTED.match(text)  # a background command: its id, as Claude Code gives it
        return {"stdout": text, "stderr": "", "interrupted": False, "isImage": False,
                **({"backgroundTaskId": started.group(1)} if started else {})}
    out, sep, err = text[m.end():].rpartition("\n\nstderr:\n")
    if not sep:
        out, err = text[m.end():], ""
    err = err.split("\n\nnote: ", 1)[0]
    code = re.match(r"-?\d+", m.group(1))
    return {"stdout": "" if out == "(empty)" else out, "stderr": "" if err == "(empty)" else err,
            "interrupted": "timed out" in m.group(1), "isImage": False,
            "exit_code": int(code.group()) if code else None}


def exec_line(command: str, args: list[str] | None, workspace: Path) -> str:
    """A hook's shell command line. With `args` (Claude Code's exec form) the program and its
    words, each quoted as one word, with the project folder put in for `${CLAUDE_PROJECT_DIR}`."""
    if args is None:
        return command
    return shlex.join(w.replace("${CLAUDE_PROJECT_DIR}", str(workspace)) for w in (command, *args))


def output_text(value: Any) -> str | None:
    """A hook's `updatedToolOutput` as the result text: text as it is, Claude Code's Bash shape
    (stdout, stderr), a content list's text blocks, or a `result`; None for none."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and ("stdout" in value or "stderr" in value):
        return "\n".join(str(value[k]) for k in ("stdout", "stderr") if value.get(k))
    if isinstance(value, dict) and isinstance(value.get("result"), str):
        return str(value["result"])
    blocks = value.get("content") if isinstance(value, dict) else value
    if isinstance(blocks, list):
        return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    return json.dumps(value, ensure_ascii=False)
