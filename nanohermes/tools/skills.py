"""Skills (the Agent Skills format): discovery of SKILL.md folders, the prompt index, the `skill` tool.

A skill is a folder holding `SKILL.md`: YAML front matter with `name` and `description`,
then the instructions. Folders are searched in order (the first skill of a name wins):
`<workspace>/.nanohermes/skills`, `$XDG_CONFIG_HOME/nanohermes/skills`, and, for
compatibility, Claude Code's `<workspace>/.claude/skills` and `~/.claude/skills`. A file whose front matter cannot be read (even leniently,
as Claude Code reads it) is skipped with a warning naming it. The system prompt carries a one-line index; the tool returns the body.
Every SKILL.md is read through the one reader of `nanohermes.guard.ownreads` (a project's skill
that reaches outside the workspace waits for a person's yes, a secret is never read, ...);
what it does not read is named by the reader's caller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanohermes.common.budget import Limits
from nanohermes.guard.ownreads import OwnReader, Owner, Skipped
from nanohermes.tools.base import Attempt, Params, ReadOnlyTool, Tool, ToolContext, ToolError, about
from nanohermes.common.dirs import config_home

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Skill:
    """A skill found on disk: its name, what it is for, its SKILL.md and whose it is."""

    name: str
    description: str
    path: Path  # the SKILL.md file
    owner: Owner = "project"  # the workspace's, or the person's (their config folder)

    @property
    def folder(self) -> Path:
        return self.path.parent


@dataclass
class SkillSet:
    """The skills a session found, what finding them warned of, and their reader."""

    skills: list[Skill] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reader: OwnReader | None = None  # what read them, and reads a skill's body when it is loaded

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


class FrontMatterError(ValueError):
    pass


def parse_skill(text: str) -> tuple[dict[str, Any], str]:
    """Split SKILL.md into its front matter (validated) and its body. The front matter is read
    as Claude Code reads it (`nanohermes.common.frontmatter`): a value YAML cannot parse, such as a
    description with a colon in it, is kept as its text."""
    # only when a skill file exists
    from nanohermes.common import frontmatter

    if not frontmatter.FRONT.match(text):
        raise FrontMatterError("no YAML front matter (the file must start with a line `---`, then `name:` and "
                               "`description:`, then a closing `---`)")
    try:
        front = frontmatter.split(text)
    except frontmatter.FrontMatterError as e:
        raise FrontMatterError(str(e)) from None
    meta: dict[str, Any] = dict(front.values)
    for key in ("name", "description"):
        if not front.text(key):
            raise FrontMatterError(f"front matter needs a non-empty string `{key}`")
        meta[key] = front.text(key)
    return meta, front.body


def skill_roots(workspace: Path, config_dir: Path) -> list[tuple[Path, Owner]]:
    """Where skills are looked for, first wins; with whose they are."""
    return [(workspace / ".nanohermes" / "skills", "project"), (config_dir / "skills", "user"),
            (workspace / ".claude" / "skills", "project"), (Path.home() / ".claude" / "skills", "user")]


def discover_skills(workspace: Path, *, config_dir: Path | None = None, reader: OwnReader | None = None) -> SkillSet:
    """The skills there are, each SKILL.md read through `reader` (one asking nobody when None);
    what it did not read is left for the reader's caller to name."""
    if config_dir is None:
        config_dir = config_home()
    reader = reader if reader is not None else OwnReader(workspace)
    found = SkillSet(reader=reader)
    for root, owner in skill_roots(workspace, config_dir):
        try:
            folders = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue  # no such folder: nothing to find there
        for folder in folders:
            path = folder / SKILL_FILE
            if not os.path.lexists(path):
                continue
            got = reader.read(path, purpose="skill", owner=owner)
            if isinstance(got, Skipped):
                continue  # the reader names it
            try:
                meta, _ = parse_skill(got.text)
            except FrontMatterError as e:
                found.warnings.append(f"{path}: {e}; skill skipped")
                continue
            name = " ".join(meta["name"].split())
            if (first := found.get(name)) is not None:
                found.warnings.append(f"{path}: skill `{name}` is also defined in {first.path}, which wins; skipped")
                continue
            found.skills.append(Skill(name, " ".join(meta["description"].split()), path, owner))
    return found


def skill_index(skills: SkillSet, limits: Limits) -> str:
    """The prompt's one-line-per-skill index, bounded by `skill_index_chars`."""
    if not skills.skills:
        return ""
    lines: list[str] = []
    used = 0
    cap = limits.skill_description_chars
    for i, s in enumerate(skills.skills):
        desc = s.description if len(s.description) <= cap else s.description[:cap] + "…"
        line = f"- {s.name}: {desc}"
        if used + len(line) > limits.skill_index_chars:
            rest = len(skills.skills) - i
            lines.append(f"… {rest} more skills not listed (index limit {limits.skill_index_chars} chars; "
                         f"limit skill_index_chars); the skill tool loads any skill by name")
            break
        lines.append(line)
        used += len(line)
    return ("# Skills\nWhen a task matches one of these, load its instructions with the skill tool first:\n"
            + "\n".join(lines))


@dataclass(frozen=True, kw_only=True)
class SkillParams(Params):
    name: str = field(metadata=about("The skill's name, as listed in the system prompt."))

    non_empty: ClassVar[dict[str, str]] = {"name": "pass one of the skill names listed in the system prompt"}
    claude_fields: ClassVar[dict[str, str]] = {"name": "skill"}  # Claude Code's Skill tool calls it so


@dataclass(frozen=True, kw_only=True)
class SkillTool(ReadOnlyTool[SkillParams]):
    spawns: ClassVar[bool] = False
    name: ClassVar[str] = "skill"
    claude_names: ClassVar[tuple[str, ...]] = ("Skill",)
    group: ClassVar[str] = "skills"
    description: ClassVar[str] = (
        "Load a skill by name: returns its instructions (the body of its SKILL.md, at most 20,000 chars, with "
        "a note when cut) and lists the other files in its folder, to open with read_file when the "
        "instructions mention them. The available skills are listed in the system prompt under Skills."
    )
    params: ClassVar[type[Params]] = SkillParams
    skills: SkillSet

    def output_limit(self) -> str:
        return "skill_body_chars chars, skill_files_listed files"

    def spec(self, limits: Limits | None = None) -> dict[str, Any]:
        spec = super().spec(limits)
        spec["function"]["parameters"]["properties"]["name"]["enum"] = [s.name for s in self.skills.skills]
        return spec

    async def run(self, args: SkillParams, ctx: ToolContext, attempt: Attempt) -> str:
        skill = self.skills.get(args.name.strip())
        if skill is None:
            names = ", ".join(s.name for s in self.skills.skills)
            raise ToolError(f"unknown skill {args.name}; available: {names}")
        reader = self.skills.reader if self.skills.reader is not None else OwnReader(ctx.workspace)
        return await self.in_thread(self._load, skill, ctx.limits, reader)

    @staticmethod
    def _load(skill: Skill, limits: Limits, reader: OwnReader) -> str:
        got = reader.read(skill.path, purpose="skill", owner=skill.owner, queue=False)
        if isinstance(got, Skipped):
            reader.told(got)  # said in the result, which the person sees too
            raise ToolError(str(got))
        try:
            _, body = parse_skill(got.text)
        except FrontMatterError as e:
            raise ToolError(f"{skill.path} changed and is no longer valid: {e}") from None
        body = body.strip("\n")
        cap = limits.skill_body_chars
        out = [f"# Skill {skill.name}  (folder {skill.folder})", "", body[:cap]]
        if len(body) > cap:
            out.append(f"\n… skill body truncated: showing the first {cap} of {len(body)} chars; "
                       f"read the rest with read_file {skill.path}")
        files = _other_files(skill.folder)
        if files:
            shown = files[: limits.skill_files_listed]
            out += ["", f"Other files in {skill.folder} (open them with read_file):", *shown]
            if len(files) > len(shown):
                out.append(f"… {len(files)} files, showing the first {len(shown)}; use list_dir or glob for the rest")
        return "\n".join(out)


def _other_files(folder: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        rel = Path(dirpath).relative_to(folder)
        for f in filenames:
            p = (rel / f).as_posix()
            if p != SKILL_FILE:
                out.append(p)
    return sorted(out)


def tools(skills: SkillSet) -> list[Tool]:
    """The `skill` tool, only when at least one skill was found."""
    return [SkillTool(skills=skills)] if skills.skills else []
