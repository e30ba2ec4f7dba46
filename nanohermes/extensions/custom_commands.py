"""Custom slash commands: prompts kept as Markdown files, run as `/name arguments`.

Found in `<workspace>/.nanohermes/guard/commands`, `<workspace>/.claude/commands`,
`~/.config/nanohermes/guard/commands` and `~/.claude/commands` (the first of a name wins, so a
project's command hides a user's of the same name). `review.md` is `/review`; a file in a
folder is namespaced: `frontend/test.md` is `/frontend:test`. Optional front matter, read
leniently as Claude Code reads it (`nanohermes.common.frontmatter`): `description`, `argument-hint`,
`model`, `allowed-tools`. The body is the prompt, with `$ARGUMENTS` (all the arguments),
`$1`…`$9` (each, split as a shell would), `@path` attachments and `` !`command` `` lines.

The prompt is text; what runs on the machine when a command runs (its `!` commands, its
allowed-tools, its model) is `nanohermes.extensions.command_runs`'s, through the gate, and a project's
command runs nothing unasked unless the project is trusted. Command files, and the files an
`@path` names (in a command, in a prompt), are read through the one reader of
`nanohermes.guard.ownreads`: a project's command file or attachment that reaches outside the
workspace is read only after a person's yes (asked when the command runs), never a secret
file, /proc or a denied path; what is not read is named, and so is a file whose front matter
cannot be read (in the warnings, in /help, in `-p`'s error). A path the person typed outside
the workspace is theirs to attach.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from nanohermes.common.budget import clamp
from nanohermes.common.dirs import config_home
from nanohermes.common.errors import NanohermesError, UsageError
from nanohermes.common.events import Notice, TurnEnded
from nanohermes.guard.ownreads import Owner, OwnReader, Skipped
from nanohermes.tools import ToolContext
from nanohermes.turn.agent import TurnResult
from nanohermes.turn.runtime import DENIED_PREFIX

if TYPE_CHECKING:
    from nanohermes.extensions.command_runs import Shell
    from nanohermes.turn.agent import Agent
    from nanohermes.turn.runtime import Runtime

ATTACH = re.compile(r"(?<!\S)@(\S+)")
_POSITIONAL = re.compile(r"\$([1-9])(?![0-9])")
_NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class CustomCommand:
    """A slash command read from a Markdown file."""

    name: str  # without the slash; folders joined by ":"
    path: Path
    project: bool  # from the workspace (written by the repository's author)
    body: str
    description: str = ""
    argument_hint: str = ""
    model: str | None = None
    allowed_tools: tuple[str, ...] = ()  # Claude Code's rules, granted for its turn
    # The `!` commands of one run of it (`prompt_for` fills them in; the prompt holds their markers).
    shell: tuple[Shell, ...] = ()
    # Its file waits for a person's yes (a project's file reaching outside the workspace): read
    # when the command runs, after the question.
    pending: bool = False

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def owner(self) -> Owner:
        return "project" if self.project else "user"


@dataclass
class Found:
    """The slash commands found in the command folders, and those that cannot run."""

    commands: dict[str, CustomCommand] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Commands that cannot run: their file was not read, or its front matter cannot be read.
    refused: dict[str, Skipped] = field(default_factory=dict)


def folders(workspace: Path) -> list[tuple[Path, bool]]:
    """Where commands are looked for, first wins; with whether each is the project's."""
    home = Path.home()
    return [(workspace / ".nanohermes" / "commands", True), (workspace / ".claude" / "commands", True),
            (config_home() / "commands", False), (home / ".claude" / "commands", False)]


def signature(workspace: Path) -> tuple[tuple[str, int, int], ...]:
    """The command files as they are now (path, mtime, size): what changed since a read shows."""
    out: list[tuple[str, int, int]] = []
    for root, _ in folders(workspace):
        try:
            for path in root.rglob("*.md"):
                st = path.stat()
                out.append((str(path), st.st_mtime_ns, st.st_size))
        except OSError:
            continue
    return tuple(sorted(out))


def discover(workspace: Path, reader: OwnReader | None = None) -> Found:
    """The command files there are, each read through `reader` (one asking nobody when None)."""
    reader = reader if reader is not None else OwnReader(workspace)
    found = Found()
    for root, project in folders(workspace):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.md")):
            if not path.is_file():
                continue
            parts = path.relative_to(root).with_suffix("").parts
            if not all(_NAME_PART.match(p) for p in parts):
                found.warnings.append(f"{path}: command names are letters, digits, _ . and -; file skipped")
                continue
            name = ":".join(parts)
            if name in found.commands or name in found.refused:
                continue  # an earlier folder has it
            got = reader.read(path, purpose="command file", owner="project" if project else "user", queue=False)
            if isinstance(got, Skipped):
                reader.told(got)
                if got.kind == "asks" and reader.can_ask():
                    found.commands[name] = CustomCommand(
                        name=name, path=path, project=project, body="", pending=True,
                        description=f"its file reaches outside the workspace ({got.real}): asked when run")
                    continue
                found.refused[name] = got
                found.warnings.append(f"/{name}: {got}; command skipped")
                continue
            try:
                found.commands[name] = parse(name, path, project, got.text)
            except ValueError as e:
                found.refused[name] = Skipped(path, str(got.real), "command file", "refused",
                                              f"its front matter cannot be read ({e})")
                found.warnings.append(f"/{name} cannot run: {found.refused[name]}")
    return found


async def read_pending(command: CustomCommand, runtime: Runtime) -> CustomCommand | Skipped:
    """A command whose file waited for a yes: asked now, then read (or why not)."""
    reader = runtime.own_reader
    got = await reader.read_asking(command.path, runtime.confirm_own_read, purpose="command file", owner=command.owner)
    if isinstance(got, Skipped):
        return got
    try:
        return parse(command.name, command.path, command.project, got.text)
    except ValueError as e:
        return Skipped(command.path, str(got.real), "command file", "refused", str(e))


def parse(name: str, path: Path, project: bool, text: str) -> CustomCommand:
    """A command from its file's text (read through the reader); a ValueError says why its
    front matter cannot be read."""
    # only when a command file exists
    from nanohermes.common.frontmatter import FrontMatterError, split

    try:
        front = split(text)
    except FrontMatterError as e:
        raise ValueError(str(e)) from None
    return CustomCommand(name=name, path=path, project=project, body=front.body.strip(),
                         description=front.text("description"), argument_hint=front.text("argument-hint"),
                         model=front.text("model") or None, allowed_tools=tuple(front.names("allowed-tools") or ()))


def _words(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments)
    except ValueError:  # an unbalanced quote: plain words
        return arguments.split()


def fill(text: str, arguments: str) -> str:
    """`$ARGUMENTS` and `$1`…`$9` in `text` replaced by the arguments."""
    arguments = arguments.strip()
    words = _words(arguments)
    text = _POSITIONAL.sub(lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "", text)
    return text.replace("$ARGUMENTS", arguments)


def expand(command: CustomCommand, arguments: str, body: str | None = None) -> str:
    """The prompt: `$ARGUMENTS` and `$1`…`$9` replaced; arguments given to a command that uses
    neither are appended, so they are never lost. `body`: the command's body as it is sent
    (with markers for its `!` commands, whose use of the arguments counts)."""
    arguments = arguments.strip()
    uses = "$ARGUMENTS" in command.body or _POSITIONAL.search(command.body) is not None
    text = fill(command.body if body is None else body, arguments)
    if arguments and not uses:
        text += f"\n\nARGUMENTS: {arguments}"
    return text


def _mentioned(workspace: Path, path: str, owner: Owner | None) -> tuple[Path, str, Owner]:
    """The file an `@path` names (`~` expanded, a relative path from the workspace), why it is
    no file to attach ("" when it is one), and whose it is: `owner`, or for what the person
    typed, theirs when they spelled it outside the workspace, the project's when it is in it."""
    target = Path(os.path.expanduser(path)) if path.startswith(("~", "/")) else workspace / path
    if os.path.isdir(target):
        return target, "is a folder", "user"
    if not os.path.lexists(target):
        return target, "is not a file in the workspace", "user"
    root = os.path.realpath(workspace)
    spelled = os.path.normpath(os.path.abspath(target))
    inside = spelled == root or spelled.startswith(root.rstrip("/") + "/")
    return target, "", owner or ("project" if inside else "user")


async def attach(text: str, runtime: Runtime, *, owner: Owner | None = None) -> tuple[str, list[str]]:
    """`@path` appends that file's content, numbered and bounded as read_file shows it, as `@`
    does in the REPL; each file read through the one reader. `owner`: who wrote the text, for a
    command file ("project": every file must be the workspace's or a person says yes; "user");
    None for what the person typed (a path they spelled outside the workspace is theirs, one in
    it that links out is the project's). Returns the text and one note per file (attached or
    why not)."""

    workspace = runtime.workspace
    reader = runtime.own_reader
    attached: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    for m in ATTACH.finditer(text):
        path = m.group(1).rstrip(".,;:!?)")
        if path in seen:
            continue
        seen.add(path)
        target, no_file, who = await asyncio.to_thread(_mentioned, workspace, path, owner)
        if no_file:
            notes.append(f"@{path} {no_file}: not attached (sent as text)")
            continue
        got = await reader.read_asking(target, runtime.confirm_own_read, purpose="mention", owner=who)
        if isinstance(got, Skipped):
            notes.append(f"@{path} not attached: {got.reason}")
            continue
        # the file tools' helpers: only for an @ mention
        from nanohermes.tools.fileops import remember_file
        from nanohermes.tools.files import numbered

        body = clamp(numbered(got.text.encode("utf-8"), path, runtime.limits), runtime.limits.max_output)
        remember_file(ToolContext.of(runtime), got.real)  # the model has seen it, as after read_file
        attached.append(f'<file path="{path}">\n{body}\n</file>')
        notes.append(f"attached {path}")
    return text + ("\n\n" + "\n\n".join(attached) if attached else ""), notes


def attach_level(note: str) -> Literal["warning", "info"]:
    """A note of `attach` as a notice: a file refused is a warning, an `@word` that names no
    file only information."""
    return "warning" if "not attached:" in note else "info"


async def prompt_for(command: CustomCommand, arguments: str,
                     runtime: Runtime) -> tuple[CustomCommand | None, str, list[str]]:
    """The command as read (its file read now if it waited for a yes) with its `!` commands
    for this run (`shell`), and the full prompt of `/name arguments`: expanded, with its
    attachments (read as the command's owner's: a project's command may not reach outside the
    workspace unasked) and a marker where each `!` command's output goes (`run` fills them).
    No command, with the reason as the note, when its file cannot be read."""
    if command.pending:
        got = await read_pending(command, runtime)
        if isinstance(got, Skipped):
            return None, "", [f"/{command.name} not run: {got}"]
        command = got
    from nanohermes.extensions.command_runs import (  # what runs when a command runs: not for a plain prompt
        Shell,
        find_shell,
    )

    body, shell = find_shell(command.body)
    command = replace(command, shell=tuple(Shell(s.marker, fill(s.line, arguments)) for s in shell))
    text, notes = await attach(expand(command, arguments, body), runtime, owner=command.owner)
    return command, text, notes


def split(line: str) -> tuple[str, str]:
    """`/name args` -> (name, args); the arguments may span lines."""
    m = re.match(r"/(\S+)\s*(.*)", line.strip(), re.S)
    return (m.group(1), m.group(2).strip()) if m else ("", "")


async def run(agent: Agent, command: CustomCommand, prompt: str, submit: Any = None) -> Any:
    """Run one turn with the command's prompt (from `prompt_for`): its `!` commands first, on
    the model its front matter names, with its allowed-tools, all for this turn only (see
    `command_runs`). `submit`: the front end's way to run a turn (default: agent.ask)."""
    from nanohermes.extensions import command_runs

    return await command_runs.run(agent, command, prompt, submit)


# The REPL's commands that also do their job without a terminal; the others are refused in -p.
PRINT_MODE_COMMANDS = ("init", "export")


class ReplCommand(Protocol):
    """A command of the REPL, as `-p` tells one from a custom command (the REPL's `Command`)."""

    @property
    def source(self) -> str: ...  # its file, for a custom one; "" for a built-in


async def ask(agent: Agent, prompt: str, *, context: str = "",
              repl: Callable[[str], ReplCommand | None] = lambda name: None) -> TurnResult:
    """`-p`: a prompt starting with `/name` runs that custom command, `/init` the turn that
    writes AGENTS.md, `/export` writes the conversation; another REPL command (`repl`: the
    REPL's command of a name, given by the front end, whose commands these are) is refused
    (it would only reach the model as text); anything else is sent as is. `context`: text
    sent after the prompt as it is (files an editor embedded), never read for `@path`
    mentions or as a command's arguments, since nobody typed it."""
    if prompt.lstrip().startswith("/"):
        name, arguments = split(prompt)
        if name == "init":
            return await _init(agent, arguments, context)
        if name == "export":
            return _export(agent, arguments)
        found = discover(agent.runtime.workspace, agent.runtime.own_reader)
        command = found.commands.get(name)
        builtin = repl(name)
        if name in found.refused and builtin is None:
            raise NanohermesError(f"/{name} cannot run: {found.refused[name]}",
                                  hint="see docs/instructions.md for what nanohermes reads by itself")
        if command is not None and (builtin is None or builtin.source):  # a built-in wins, as in the REPL
            ready, text, notes = await prompt_for(command, arguments, agent.runtime)
            if ready is None:
                raise NanohermesError(notes[0], hint="see docs/instructions.md for what nanohermes reads by itself")
            for note in notes:
                agent.ui.emit(Notice(level=attach_level(note), text=note))
            result: TurnResult = await run(agent, ready, _with(text, context))
            return result
        if builtin is not None:
            raise UsageError(f"/{name} is a command of the REPL; with -p only "
                             f"{', '.join('/' + c for c in PRINT_MODE_COMMANDS)} and custom commands run",
                             hint=f"run `nanohermes` for /{name}; to ask the model about it, put the question in words")
    text, notes = await attach(prompt, agent.runtime)
    for note in notes:
        agent.ui.emit(Notice(level=attach_level(note), text=note))
    return await agent.ask(_with(text, context))


def _with(text: str, context: str) -> str:
    return f"{text}\n\n{context}" if context and text else text or context


async def _init(agent: Agent, arguments: str, context: str = "") -> TurnResult:
    """/init's turn. Its job is the file: a turn that ends without writing it failed, and
    says why (most often: the write needs an approval nobody is there to give)."""
    path = agent.runtime.workspace / "AGENTS.md"
    if agent.runtime.policy.mode == "plan":
        raise NanohermesError("/init writes AGENTS.md, and plan mode writes nothing",
                              hint="run it in another mode, e.g. --mode accept-edits")
    before = _contents(path)
    start = len(agent.session.history)
    result = await agent.ask(_with(init_prompt(agent.runtime.workspace, arguments), context))
    if result.reason != "completed" or _contents(path) != before:
        return result
    refused = any(m.role == "tool" and (m.content or "").startswith(DENIED_PREFIX)
                  for m in agent.session.history[start:])
    if refused and agent.runtime.own_reader.asks:  # a person was asked (the REPL, an editor) and said no
        raise NanohermesError("/init did not write AGENTS.md: its write was refused when you were asked",
                              hint="run /init again and allow the write, or switch to accept-edits mode first")
    if refused:
        raise NanohermesError("/init did not write AGENTS.md: the write needs approval, and nobody was there to give it",
                              hint="rerun with --yes or --mode accept-edits, or run /init in the REPL")
    raise NanohermesError("/init did not write AGENTS.md: the model ended the turn without writing it",
                          hint="run it again (--verbose shows what it did)")


def _contents(path: Path) -> tuple[int, int, int] | None:
    """What says the file changed (it is not read: only the reader reads AGENTS.md)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _export(agent: Agent, arguments: str) -> TurnResult:
    # only /export writes a transcript out
    from nanohermes.turn.export import export, exported_line

    session = agent.session
    history = session.whole()
    if not history:
        raise UsageError("nothing to export: this session has no conversation yet",
                         hint="export a saved one with --continue or --resume ID")
    try:
        path = export(history, session.id, agent.runtime.workspace, arguments)
    except OSError as e:
        raise NanohermesError(f"could not write {e.filename or arguments}: {e.strerror or e}",
                              hint="name a file in a folder you can write") from None
    text = exported_line(len(history), len(session.earlier), path)
    agent.ui.emit(TurnEnded(reason="completed", turns=0, tool_calls=0, text=text))
    return TurnResult("completed", text, 0, 0)


INIT_PROMPT = """Study this repository and {action} an AGENTS.md at its root: the instructions a coding agent (or a new
contributor) needs to work here. Look before you write: the build and package files, the test set-up, the CI
configuration, the README, the layout of the source folders, a few representative modules and tests.

Then write AGENTS.md with, in this order and only what is true of this repository:
- Set up, build and test: the exact commands (how to run one test file, too), and any needed services.
- Layout: the main folders and modules, one line each on what they own.
- Conventions: code style, naming, error handling, typing, how tests are written, commit habits you can see.
- Pitfalls: anything surprising a newcomer would trip over.
Keep it short (well under 200 lines), concrete and checkable; no generic advice.{existing}"""


def init_prompt(workspace: Path, arg: str = "") -> str:
    """The prompt of `/init` (in the REPL and in `-p`): write AGENTS.md, or improve the one there."""
    path = workspace / "AGENTS.md"
    existing = ("\nAn AGENTS.md exists already: read it first, keep what is right, fix what is wrong or stale, and add what"
                " is missing.") if path.exists() else ""
    prompt = INIT_PROMPT.format(action="improve" if path.exists() else "write", existing=existing)
    if arg.strip():
        prompt += f"\nAlso: {arg.strip()}"
    return prompt
