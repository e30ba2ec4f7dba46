"""How nanohermes's tool calls, plans, modes and commands read as the protocol's session updates.

Pure mapping, no I/O: a call's kind comes from its tool's declaration (what it touches and
what it does with it), its title is one line a person reads, its locations are the absolute
paths it names, and its result is the clamped text the model reads, with a `diff` block for
each file an edit changed (read back from the unified diff the edit shows people). A saved
history is turned into the updates a live turn would have sent (`replay`), for `session/load`,
an edit's diff blocks from the diff its result kept (`Message.display`), or else read from its
call's arguments (`edit_blocks`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from acp import schema as s

from nanohermes.common.events import TodoItem, ToolFinished
from nanohermes.common.messages import Message
from nanohermes.common.modes import Mode
from nanohermes.guard.pathrules import compute_target
from nanohermes.llm.thinktags import ThinkSplit
from nanohermes.ui.visible import escape_controls, status_of

if TYPE_CHECKING:
    from nanohermes.tools import Tool

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
Content = s.ContentToolCallContent | s.FileEditToolCallContent | s.TerminalToolCallContent
Update = (s.UserMessageChunk | s.AgentMessageChunk | s.AgentThoughtChunk | s.ToolCallStart | s.ToolCallProgress
          | s.AgentPlanUpdate | s.AvailableCommandsUpdate | s.CurrentModeUpdate)

TITLE_CHARS = 160  # a title is one line; the whole input is in rawInput

# The modes as the editor offers them: nanohermes's own words are the ids.
MODE_TEXT: dict[Mode, tuple[str, str]] = {
    Mode.DEFAULT: ("Default", "Asks before edits, commands (but read-only ones), commits and new hosts"),
    Mode.ACCEPT_EDITS: ("Accept edits", "Edits inside the workspace run without asking; commands still ask"),
    Mode.PLAN: ("Plan", "Reads and plans; nothing is written or run"),
    Mode.DEBUG: ("Debug", "Nothing is written; commands are asked"),
    Mode.GOAL: ("Goal", "Nothing is asked: every call runs unattended (mode blocks and deny rules still apply)"),
}


def text(piece: str) -> s.TextContentBlock:
    return s.TextContentBlock(type="text", text=piece)


def message_chunk(piece: str) -> s.AgentMessageChunk:
    return s.AgentMessageChunk(session_update="agent_message_chunk", content=text(piece))


def thought_chunk(piece: str) -> s.AgentThoughtChunk:
    return s.AgentThoughtChunk(session_update="agent_thought_chunk", content=text(piece))


def modes(current: Mode) -> s.SessionModeState:
    return s.SessionModeState(current_mode_id=current.value, available_modes=[
        s.SessionMode(id=mode.value, name=name, description=about) for mode, (name, about) in MODE_TEXT.items()])


def mode_update(mode: Mode) -> s.CurrentModeUpdate:
    return s.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode.value)


def plan(items: tuple[TodoItem, ...]) -> s.AgentPlanUpdate:
    """The whole todo list, as the protocol wants it every time; the item being worked on is
    the high-priority one."""
    return s.AgentPlanUpdate(session_update="plan", entries=[
        s.PlanEntry(content=i.content, status=i.status, priority="high" if i.status == "in_progress" else "medium")
        for i in items])


@dataclass(frozen=True)
class Command:
    """One command the editor offers after a slash (its name without one)."""

    name: str
    description: str
    hint: str = ""  # what the arguments are; "" when it takes none


def commands(listed: list[Command]) -> s.AvailableCommandsUpdate:
    return s.AvailableCommandsUpdate(session_update="available_commands_update", available_commands=[
        s.AvailableCommand(name=c.name, description=c.description or c.name,
                           input=s.AvailableCommandInput(root=s.UnstructuredCommandInput(hint=c.hint)) if c.hint else None)
        for c in listed])


# -- tool calls ---------------------------------------------------------------------------------

def kind_of(tool: Tool | None, arguments: dict[str, Any] | str | None = None, workspace: Path | None = None) -> ToolKind:
    """The protocol's kind of a call, from what its tool declares it touches and does; a write
    that only deletes files is a `delete`, one that only moves them a `move` (what Claude
    Code's tools would do for it: `rm`, `mv`)."""
    if tool is not None and tool.kind == "path" and tool.effect == "write" and isinstance(arguments, dict) \
            and workspace is not None and (only := _only_removes(tool, arguments, workspace)):
        return only
    if tool is None:
        return "other"
    if tool.group == "search":
        return "search"
    if tool.group == "plan":
        return "think"
    if tool.kind == "command":
        return "execute"
    if tool.kind == "host" or tool.group == "web":  # a page, or a search engine's results
        return "fetch"
    if tool.kind == "path":
        return "edit" if tool.effect == "write" else "read"
    if tool.effect == "read":  # git's status, a task's output, the memories, a read-only MCP tool
        return "read"
    return "other"


def _only_removes(tool: Tool, arguments: dict[str, Any], workspace: Path) -> ToolKind | None:
    """`delete` when every file the call changes is deleted, `move` when every one is moved
    without a change of its text; None otherwise (or for arguments the tool cannot read)."""
    try:
        verbs = {c.input.get("command", "").split(" ", 1)[0] if c.name == "Bash" else c.name
                 for c in tool.claude_calls(tool.parse(arguments), workspace)}
    except Exception:  # arguments a tool cannot read: its kind is what it declares
        return None
    return "delete" if verbs == {"rm"} else "move" if verbs == {"mv"} else None


def title(name: str, summary: str) -> str:
    """`run_command: pytest -q`: the tool and what it is given, on one line, controls escaped."""
    one = escape_controls(summary, newlines=True)
    if len(one) > TITLE_CHARS:
        one = one[: TITLE_CHARS - 1] + "…"
    return f"{name}: {one}" if one else name


def locations(tool: Tool | None, arguments: dict[str, Any] | str, workspace: Path) -> list[s.ToolCallLocation]:
    """The absolute paths a call touches, as the one resolver the gate judges them by gives
    them (`pathrules.compute_target`: `~`, `..`, links and Windows spellings resolved), with
    the line a read starts at."""

    if tool is None or tool.kind != "path" or not isinstance(arguments, dict):
        return []
    try:
        parsed = tool.parse(arguments)
        target = compute_target("path", "read", tool.subjects(parsed), workspace, base=tool.base_dir(parsed))
    except Exception:  # arguments a tool cannot read, or a path it cannot judge, name nothing to show
        return []
    line = arguments.get("offset")
    return [s.ToolCallLocation(path=str(p), line=line if isinstance(line, int) and line >= 1 else None)
            for p in dict.fromkeys(target.paths)]


def status(ev: ToolFinished) -> Literal["completed", "failed"]:
    return "completed" if status_of(ev) == "ok" else "failed"


_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def diffs(diff: str, workspace: Path) -> list[s.FileEditToolCallContent]:
    """One `diff` block per hunk of a unified diff (as edits show people): the lines the hunk
    had and has, under the file's absolute path; a created file has no old text. A hunk is
    read by the counts its header gives, so a line that looks like a header inside it is text."""
    out: list[s.FileEditToolCallContent] = []
    old_name = new_name = ""
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("--- "):
            old_name = _name(line[4:])
        elif line.startswith("+++ "):
            new_name = _name(line[4:])
        elif (m := _HUNK.match(line)) and new_name:
            want_old = int(m.group(2)) if m.group(2) is not None else 1
            want_new = int(m.group(4)) if m.group(4) is not None else 1
            old: list[str] = []
            new: list[str] = []
            while i < len(lines) and (len(old) < want_old or len(new) < want_new):
                body, tag = lines[i][1:], lines[i][:1]
                if tag == "\\":  # "\ No newline at end of file": the line before had none
                    for side in (old, new):
                        if side and side[-1].endswith("\n"):
                            side[-1] = side[-1][:-1]
                elif tag in (" ", "-", "+"):
                    if tag != "+":
                        old.append(body)
                    if tag != "-":
                        new.append(body)
                else:
                    break  # a cut diff: the rest of the hunk is not there
                i += 1
            if i < len(lines) and lines[i].startswith("\\"):
                for side in (old, new):
                    if side and side[-1].endswith("\n"):
                        side[-1] = side[-1][:-1]
                i += 1
            path = new_name if new_name != "/dev/null" else old_name
            out.append(s.FileEditToolCallContent(type="diff", path=_absolute(path, workspace),
                                                 old_text=None if old_name == "/dev/null" else "".join(old),
                                                 new_text="".join(new)))
    return out


def _name(header: str) -> str:
    name = header.rstrip("\n").split("\t", 1)[0]
    return name[2:] if name[:2] in ("a/", "b/") else name


def _absolute(shown: str, workspace: Path) -> str:
    return shown if os.path.isabs(shown) else os.path.normpath(workspace / shown)


def result_content(result: str, display: str | None, workspace: Path) -> list[Content]:
    """What a finished call shows: the diff blocks of an edit, then the result the model reads."""
    blocks: list[Content] = list(diffs(display, workspace)) if display else []
    blocks.append(s.ContentToolCallContent(type="content", content=text(result)))
    return blocks


def tool_start(call_id: str, tool: Tool | None, name: str, arguments: dict[str, Any] | str, summary: str,
               workspace: Path) -> s.ToolCallStart:
    return s.ToolCallStart(session_update="tool_call", tool_call_id=call_id, title=title(name, summary),
                           kind=kind_of(tool, arguments, workspace), status="pending",
                           locations=locations(tool, arguments, workspace),
                           raw_input=arguments)


def tool_end(call_id: str, ev: ToolFinished, workspace: Path, extra: list[Content] | None = None) -> s.ToolCallProgress:
    return s.ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, status=status(ev),
                              content=[*(extra or []), *result_content(ev.result, ev.display, workspace)],
                              raw_output=ev.result)


# -- a saved history, replayed -----------------------------------------------------------------

def replay(history: list[Message], tools: dict[str, Tool], workspace: Path) -> Iterator[Update]:
    """The updates a live session would have sent for `history`: each prompt, the thinking
    and answer of each model reply, each call with its result."""

    ids: dict[str, str] = {}  # a call's id in the history -> in the updates (ids repeat across replies)
    edits: dict[str, list[s.FileEditToolCallContent]] = {}  # a call's id -> the diff blocks its arguments make
    for n, m in enumerate(history):
        if m.role == "user":
            if m.content:
                yield s.UserMessageChunk(session_update="user_message_chunk", content=text(m.content))
            for img in m.images:
                yield s.UserMessageChunk(session_update="user_message_chunk",
                                         content=s.ImageContentBlock(type="image", data=img.data, mime_type=img.mime))
        elif m.role == "assistant":
            if m.reasoning:
                yield thought_chunk(m.reasoning)
            if m.content:
                yield from _answer(m.content)
            for c in m.tool_calls:
                ids[c.id] = f"{c.id}@h{n}"
                try:
                    args: dict[str, Any] | str = json.loads(c.arguments)
                except ValueError:
                    args = c.arguments
                tool = tools.get(c.name)
                summary = ""
                if tool is not None and isinstance(args, dict):
                    try:
                        summary = tool.summary(tool.parse(args))
                    except Exception:  # arguments the tool refuses: the title is its name
                        summary = ""
                yield tool_start(ids[c.id], tool, c.name, args if isinstance(args, dict) else c.arguments, summary,
                                 workspace)
                edits[c.id] = edit_blocks(tool, args, workspace)
        elif m.role == "tool" and m.tool_call_id is not None:
            result = m.content or ""
            ev = ToolFinished(call_id=m.tool_call_id, name="", result=result, is_error=False, elapsed=0.0)
            rebuilt = edits.pop(m.tool_call_id, [])
            if m.display:  # the diff shown live, kept in the transcript
                ev = replace(ev, display=m.display)
            done = rebuilt if not m.display and not result.startswith("ERROR") else []
            yield tool_end(ids.get(m.tool_call_id, m.tool_call_id), ev, workspace, list(done))


def _answer(content: str) -> list[s.AgentThoughtChunk | s.AgentMessageChunk]:
    """A saved answer as it streamed: thinking written into its text as thought chunks
    (`llm.thinktags`), the rest as the answer."""

    out: list[s.AgentThoughtChunk | s.AgentMessageChunk] = []
    split = ThinkSplit(lambda piece: out.append(message_chunk(piece)), lambda piece: out.append(thought_chunk(piece)),
                       lone=True)
    split.feed(content)
    split.flush()
    return out


def edit_blocks(tool: Tool | None, arguments: dict[str, Any] | str, workspace: Path) -> list[s.FileEditToolCallContent]:
    """The `diff` blocks a saved edit shows when replayed and its result kept no diff (a
    transcript of an earlier version): each file's change read from the call's arguments as
    Claude Code's tools would make it (a whole new text, or the old and new text of each place)."""
    if tool is None or tool.kind != "path" or tool.effect != "write" or not isinstance(arguments, dict):
        return []
    try:
        calls = tool.claude_calls(tool.parse(arguments), workspace)
    except Exception:  # arguments the tool refuses: nothing was written
        return []
    out: list[s.FileEditToolCallContent] = []
    for c in calls:
        path = c.input.get("file_path")
        if not isinstance(path, str):
            continue
        pairs = c.input.get("edits") if c.name == "MultiEdit" else [c.input] if c.name == "Edit" else []
        if c.name == "Write":
            out.append(s.FileEditToolCallContent(type="diff", path=_absolute(path, workspace), old_text=None,
                                                 new_text=str(c.input.get("content", ""))))
        for pair in pairs if isinstance(pairs, list) else []:
            out.append(s.FileEditToolCallContent(type="diff", path=_absolute(path, workspace),
                                                 old_text=str(pair.get("old_string", "")),
                                                 new_text=str(pair.get("new_string", ""))))
    return out
