"""Sub-agents defined in Markdown files, as Claude Code defines them.

Found in `<workspace>/.nanohermes/agents`, `<workspace>/.claude/agents` (the project's),
`~/.config/nanohermes/agents` and `~/.claude/agents` (the user's); the first of a name wins,
and a sub-agent of the config (`subagents`) wins over a file's. Each `*.md` file is one
sub-agent: front matter (read leniently, `nanohermes.common.frontmatter`) with `name` (default: the
file's name), `description` (what the parent model reads to pick it; default: the body's first
line), `tools` (Claude Code's tool names, comma separated or a list, such as `Read, Grep, Glob,
Bash`, matched to the tools here through the names each declares, `claude_names`; nanohermes's
own names and `mcp__server__tool` work too; left out: every tool of the parent) and `model`
(looked up as a command's is, `model_names`); the body is its prompt. Keys Claude Code has
beyond these (`color`, ...) change nothing here.

A project's agents are offered only in a trusted project (`trusted_projects`): an agent's
prompt and tools are the repository author's words given to a model that acts. Otherwise each
folder's files are named in a warning, unread. Every file is read through the one reader
(`nanohermes.guard.ownreads`, purpose "agent file"); what it does not read is named by its caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from nanohermes.config import SubagentConfig
from nanohermes.guard.ownreads import OwnReader, Owner, Skipped
from nanohermes.common.dirs import config_home

# The names the config allows a sub-agent (letters, digits, - and single _), at most 40 chars.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")
_DESCRIPTION_CHARS = 300  # a description taken from the body's first line


@dataclass
class AgentFiles:
    """The sub-agents the files define, where each came from, and what to tell the person."""

    configs: dict[str, SubagentConfig] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def folders(workspace: Path) -> list[tuple[Path, Owner]]:
    """Where agent files are looked for, first wins; with whose they are."""
    home = Path.home()
    return [(workspace / ".nanohermes" / "agents", "project"), (workspace / ".claude" / "agents", "project"),
            (config_home() / "agents", "user"), (home / ".claude" / "agents", "user")]


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".md" and p.is_file())
    except OSError:
        return []  # no such folder: nothing to find there


def discover_agents(workspace: Path, reader: OwnReader, *, trusted: bool, taken: set[str] | None = None) -> AgentFiles:
    """The agent files there are, each read through `reader` (a project's only when `trusted`);
    `taken`: names already defined (by the config), which a file does not replace."""
    found = AgentFiles()
    taken = set(taken or ())
    for folder, owner in folders(workspace):
        files = _files(folder)
        if not files:
            continue
        if owner == "project" and not trusted:
            found.warnings.append(
                f"{folder}: sub-agents not offered ({', '.join(p.stem for p in files)}): a project's agent files are "
                f'used only in a trusted project; to allow them, add "{workspace.resolve()}" to trusted_projects in '
                "your config")
            continue
        for path in files:
            got = reader.read(path, purpose="agent file", owner=owner)
            if isinstance(got, Skipped):
                continue  # the reader names it
            _add(found, taken, path, got.text)
    return found


def _add(found: AgentFiles, taken: set[str], path: Path, text: str) -> None:
    # only when an agent file exists
    from nanohermes.common.frontmatter import FrontMatterError, split

    try:
        front = split(text)
    except FrontMatterError as e:
        found.warnings.append(f"{path}: sub-agent not offered: its front matter cannot be read ({e})")
        return
    name = front.text("name") or path.stem
    if not _NAME.match(name) or len(name) > 40:
        found.warnings.append(f"{path}: sub-agent name {name!r} must be 1-40 letters, digits, - or single _; "
                              "not offered")
        return
    if name in taken or name in found.configs:
        first = found.paths.get(name)
        found.warnings.append(f"{path}: sub-agent {name} is also defined in {first or 'the config (subagents)'}, "
                              "which wins; not offered")
        return
    body = front.body.strip()
    description = " ".join(front.text("description").split()) or next(
        (line.strip() for line in body.splitlines() if line.strip()), "")[:_DESCRIPTION_CHARS]
    if not description:
        found.warnings.append(f"{path}: sub-agent {name} has neither a description nor a body; not offered")
        return
    found.configs[name] = SubagentConfig(description=description, prompt=body, tools=front.names("tools") or None,
                                         model=front.text("model") or None)
    found.paths[name] = path
