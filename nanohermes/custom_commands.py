"""Custom slash commands: prompts kept as Markdown files, run as `/name arguments`.

Found in `<workspace>/.nanohermes/commands`, `<workspace>/.claude/commands`,
`~/.config/nanohermes/commands` and `~/.claude/commands` (the first of a name wins, so a
project's command hides a user's of the same name). `review.md` is `/review`; a file in a
folder is namespaced: `frontend/test.md` is `/frontend:test`. Optional YAML front matter:
`description`, `argument-hint`, `model`. The body is the prompt, with `$ARGUMENTS` (all the
arguments), `$1`…`$9` (each, split as a shell would) and `@path` attachments.

A command is a prompt, not a program: nothing in it runs on the machine, so a project's
commands need no trust. Their `@path` attachments stay inside the workspace and off the
secret-file list, since the repository's author, not the person, wrote them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.budget import clamp
from nanohermes.dirs import config_home

if TYPE_CHECKING:
    from nanohermes.agent import Agent, TurnResult
    from nanohermes.runtime import Runtime

ATTACH = re.compile(r"(?<!\S)@(\S+)")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_POSITIONAL = re.compile(r"\$([1-9])(?![0-9])")
_NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class CustomCommand:
    name: str  # without the slash; folders joined by ":"
    path: Path
    project: bool  # from the workspace (written by the repository's author)
    body: str
    description: str = ""
    argument_hint: str = ""
    model: str | None = None

    @property
    def where(self) -> str:
        return str(self.path)


@dataclass
class Found:
    commands: dict[str, CustomCommand] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


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


def discover(workspace: Path) -> Found:
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
            if name in found.commands:
                continue  # an earlier folder has it
            try:
                found.commands[name] = parse(name, path, project)
            except (OSError, ValueError) as e:
                found.warnings.append(f"{path}: {e}; command skipped")
    return found


def parse(name: str, path: Path, project: bool) -> CustomCommand:
    text = path.read_text(encoding="utf-8", errors="replace")
    meta: dict[str, Any] = {}
    if m := _FRONT.match(text):
        import yaml

        try:
            loaded = yaml.safe_load(m.group(1))
        except yaml.YAMLError as e:
            raise ValueError(f"front matter is not valid YAML: {getattr(e, 'problem', None) or e}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ValueError("front matter must be a mapping (description, argument-hint, model)")
        meta = loaded or {}
        text = text[m.end():]

    def string(key: str) -> str:
        value = meta.get(key)
        return "" if value is None else str(value).strip()

    return CustomCommand(name=name, path=path, project=project, body=text.strip(), description=string("description"),
                         argument_hint=string("argument-hint"), model=string("model") or None)


def expand(command: CustomCommand, arguments: str) -> str:
    """The prompt: `$ARGUMENTS` and `$1`…`$9` replaced; arguments given to a body that uses
    neither are appended, so they are never lost."""
    arguments = arguments.strip()
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unbalanced quote: plain words
        words = arguments.split()
    body = command.body
    uses = "$ARGUMENTS" in body or _POSITIONAL.search(body) is not None
    body = _POSITIONAL.sub(lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "", body)
    body = body.replace("$ARGUMENTS", arguments)
    if arguments and not uses:
        body += f"\n\nARGUMENTS: {arguments}"
    return body


async def attach(text: str, runtime: Runtime, *, confined: bool = False) -> tuple[str, list[str]]:
    """`@path` appends that file's content, bounded and noted as read_file does, as `@` does in
    the REPL. `confined`: only files inside the workspace and off the secret-file list.
    Returns the text and one note per file (attached or why not)."""
    from nanohermes.permissions import is_secret
    from nanohermes.tools import ToolContext, ToolError

    tool = next((t for t in runtime.tools if t.name == "read_file"), None)
    if tool is None:
        return text, []
    workspace = runtime.workspace
    attached: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    for m in ATTACH.finditer(text):
        path = m.group(1).rstrip(".,;:!?)")
        if path in seen:
            continue
        seen.add(path)
        target = workspace / path
        if not target.is_file():
            what = "is a folder" if target.is_dir() else "is not a file in the workspace"
            notes.append(f"@{path} {what}: not attached (sent as text)")
            continue
        if confined:
            real = target.resolve()
            if not real.is_relative_to(workspace.resolve()) or is_secret(str(real), runtime.policy.secret_files):
                notes.append(f"@{path} not attached: a project command may attach only the workspace's "
                             "non-secret files")
                continue
        ctx = ToolContext(workspace=workspace, limits=runtime.limits, config=runtime.config, state=runtime.session.state)
        try:
            args = tool.parse({"path": path, "limit": runtime.limits.read_file_window_lines})
            out = await tool.run(args, ctx)
        except ToolError as e:
            notes.append(f"@{path} not attached: {e}")
            continue
        body = clamp(out if isinstance(out, str) else out.text, runtime.limits.max_output)
        attached.append(f'<file path="{path}">\n{body}\n</file>')
        notes.append(f"attached {path}")
    return text + ("\n\n" + "\n\n".join(attached) if attached else ""), notes


async def prompt_for(command: CustomCommand, arguments: str, runtime: Runtime) -> tuple[str, list[str]]:
    """The full prompt of `/name arguments`: expanded, with its attachments (confined for a
    project's command, whose body the person did not write)."""
    return await attach(expand(command, arguments), runtime, confined=command.project)


def split(line: str) -> tuple[str, str]:
    """`/name args` -> (name, args); the arguments may span lines."""
    m = re.match(r"/(\S+)\s*(.*)", line.strip(), re.S)
    return (m.group(1), m.group(2).strip()) if m else ("", "")


async def run(agent: Agent, command: CustomCommand, prompt: str, submit: Any = None) -> Any:
    """Run one turn with the command's prompt, on its front-matter model if it names one
    (for this turn only). `submit`: the front end's way to run a turn (default: agent.ask)."""
    old = agent.llm.model
    if command.model:
        agent.llm.model = command.model
    try:
        return await (submit or agent.ask)(prompt)
    finally:
        agent.llm.model = old


# The REPL's commands that also do their job without a terminal; the others are refused in -p.
PRINT_MODE_COMMANDS = ("init", "export")


async def ask(agent: Agent, prompt: str) -> TurnResult:
    """`-p`: a prompt starting with `/name` runs that custom command, `/init` the turn that
    writes AGENTS.md, `/export` writes the conversation; another REPL command is refused
    (it would only reach the model as text); anything else is sent as is."""
    from nanohermes.events import Notice

    if prompt.lstrip().startswith("/"):
        from nanohermes.ui.commands import load_commands

        name, arguments = split(prompt)
        if name == "init":
            return await _init(agent, arguments)
        if name == "export":
            return _export(agent, arguments)
        command = discover(agent.runtime.workspace).commands.get(name)
        builtin = load_commands().get(name)
        if command is not None and (builtin is None or builtin.source):  # a built-in wins, as in the REPL
            text, notes = await prompt_for(command, arguments, agent.runtime)
            for note in notes:
                agent.ui.emit(Notice(level="warning" if "not attached" in note else "info", text=note))
            result: TurnResult = await run(agent, command, text)
            return result
        if builtin is not None:
            from nanohermes.errors import UsageError

            raise UsageError(f"/{name} is a command of the REPL; with -p only "
                             f"{', '.join('/' + c for c in PRINT_MODE_COMMANDS)} and custom commands run",
                             hint=f"run `nanohermes` for /{name}; to ask the model about it, put the question in words")
    return await agent.ask(prompt)


async def _init(agent: Agent, arguments: str) -> TurnResult:
    """/init's turn. Its job is the file: a turn that ends without writing it failed, and
    says why (most often: the write needs an approval nobody is there to give)."""
    from nanohermes.errors import NanohermesError
    from nanohermes.runtime import DENIED_PREFIX

    path = agent.runtime.workspace / "AGENTS.md"
    if agent.runtime.policy.mode == "plan":
        raise NanohermesError("/init writes AGENTS.md, and plan mode writes nothing",
                              hint="run it in another mode, e.g. --mode accept-edits")
    before = _contents(path)
    start = len(agent.session.history)
    result = await agent.ask(init_prompt(agent.runtime.workspace, arguments))
    if result.reason != "completed" or _contents(path) != before:
        return result
    refused = any(m.role == "tool" and (m.content or "").startswith(DENIED_PREFIX)
                  for m in agent.session.history[start:])
    if refused:
        raise NanohermesError("/init did not write AGENTS.md: the write needs approval, and nobody was there to give it",
                              hint="rerun with --yes or --mode accept-edits, or run /init in the REPL")
    raise NanohermesError("/init did not write AGENTS.md: the model ended the turn without writing it",
                          hint="run it again (--verbose shows what it did)")


def _contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _export(agent: Agent, arguments: str) -> TurnResult:
    from nanohermes.agent import TurnResult
    from nanohermes.errors import NanohermesError, UsageError
    from nanohermes.events import TurnEnded
    from nanohermes.export import export, exported_line

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
