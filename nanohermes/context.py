"""The system prompt: who the agent is, where it works, the facts of its environment, the
project's instructions (the AGENTS.md chain) and the skill index.

The AGENTS.md chain is the user's global file, then every AGENTS.md from the repository root
down to the workspace, de-duplicated by real path. Claude Code's files count as AGENTS.md
does, beside it in each folder of the chain: CLAUDE.md, .claude/CLAUDE.md and CLAUDE.local.md
(a repository written for Claude Code brings its instructions with it). It is shown general first, specific last,
but its budget is spent the other way round: the files nearest the workspace are kept whole
first, and what did not fit is named in a note with exact counts.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from nanohermes.budget import plural

# At most 4,000 chars (checked by a test): the reminders that make agents finish the task.
IDENTITY = """You are nanohermes, a coding agent working in the user's repository through tools. You and
the user share one workspace; your job is to finish what they ask, correctly.

# Keep going until it is done
Work until the task is solved before you end your turn. In a one-shot run (`-p`) and in goal
mode nobody is there to answer: make reasonable assumptions, note them, and carry on. Ask only
when you are truly blocked (a choice only the user can make, missing access or credentials).
If an approach fails, find out why and try another; do not stop at the first error.

# Use tools, do not guess
Never guess file contents, names, APIs or command output: look. Search with grep (contents)
and glob (names), read with read_file before you edit, and check how the code is used before
you change it. Paths are relative to the workspace (absolute ones inside it work too).
Tool results may be truncated; when a result says so, follow its note (offset/limit, a
narrower pattern) instead of guessing. When a tool returns ERROR, read the message and
adjust; do not repeat the same failing call. When a call is denied by the user, do not retry
it: ask what to do instead.

# Plan, then act
For work of more than a couple of steps, write a todo list with todo_write first and keep it
current: one item in_progress, items completed as soon as they are done. Before each step,
think briefly about what you will do and why; after it, check the result against the plan.

# Edit with care
Keep changes small, focused and in the style of the surrounding code. Use edit_file for a
local change, apply_patch for several hunks or files, write_file for new files. Re-read a file
that may have changed (a command, a formatter, the user) before editing it again.

# Verify
Run the checks that exist (tests, linters, type checkers, a build) for what you changed, and
fix what fails. If you cannot run them, say so. Do not claim something works without evidence.

# Git and workspace safety
The workspace may hold changes that are not yours: never revert, overwrite or delete them
unless asked. No destructive commands (git reset --hard, git checkout -- ., git clean, rm -rf,
force pushes, history rewrites) unless the user asked for exactly that. Do not commit unless
asked. Stay inside the workspace; never print or copy secrets.

# The final answer
End with a short answer: what you did and why, the files you changed with paths (and line
numbers where useful), what you ran to verify it and with what result, and anything left
undone or uncertain. Be concise; no filler, no repeating the whole diff."""

DOC_NAME = "AGENTS.md"
# Read in each folder of the chain, in this order: ours, then Claude Code's (the shared file,
# then the person's own local one, which Claude Code reads last).
DOC_NAMES = (DOC_NAME, "CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md")


@dataclass(frozen=True)
class DocFile:
    """One AGENTS.md of the chain: its size and how much of it the prompt carries."""

    path: Path
    chars: int  # the whole file
    kept: int  # chars in the prompt: == chars when whole, 0 when left out

    @property
    def status(self) -> str:
        if self.kept == self.chars:
            return "whole"
        return "omitted" if self.kept == 0 else "cut"


@dataclass
class ProjectDocs:
    files: list[DocFile] = field(default_factory=list)  # general first: global, root, ..., workspace
    text: str = ""  # the prompt section, empty when there is no file
    budget: int = 0
    errors: list[str] = field(default_factory=list)  # files that exist but could not be read

    @property
    def note(self) -> str:
        """What was cut, with exact counts, or "" when every file is whole."""
        cut = [f for f in reversed(self.files) if f.status != "whole"]
        if not cut:
            return ""
        parts = [f"{f.path} kept {f.kept} of {f.chars} chars" if f.kept else f"{f.path} left out ({f.chars} chars)"
                 for f in cut]
        return (f"[project instructions over the {self.budget}-char budget (limit project_docs_chars); the files "
                f"nearest the workspace were kept whole first: " + "; ".join(parts) + "]")


def repo_root(workspace: Path) -> Path | None:
    """The nearest folder at or above the workspace holding `.git` (a folder, or a worktree's file)."""
    for folder in (workspace, *workspace.parents):
        if (folder / ".git").exists():
            return folder
    return None


def doc_chain(workspace: Path, config_dir: Path) -> list[Path]:
    """The AGENTS.md (and CLAUDE.md) files that exist, general first, each real path once."""
    ws = workspace.resolve()
    root = repo_root(ws) or ws
    folders = [ws, *ws.parents]
    folders = folders[: folders.index(root) + 1]
    candidates = [config_dir / DOC_NAME, config_dir / "CLAUDE.md",
                  *(f / name for f in reversed(folders) for name in DOC_NAMES)]
    seen: set[str] = set()
    out: list[Path] = []
    for p in candidates:
        if not p.is_file():
            continue
        real = os.path.realpath(p)
        if real in seen:
            continue
        seen.add(real)
        out.append(p)
    return out


def load_project_docs(workspace: Path, max_chars: int, *, config_dir: Path | None = None) -> ProjectDocs:
    if config_dir is None:
        from nanohermes.dirs import config_home

        config_dir = config_home()
    texts: list[tuple[Path, str]] = []
    docs = ProjectDocs(budget=max_chars)
    for p in doc_chain(workspace, config_dir):
        try:
            texts.append((p, p.read_text(encoding="utf-8", errors="replace")))
        except OSError as e:
            docs.errors.append(f"{p}: cannot read: {e.strerror}")
    left = max_chars
    kept: dict[int, int] = {}
    for i in reversed(range(len(texts))):  # most specific first
        n = len(texts[i][1])
        kept[i] = min(n, left)
        left -= kept[i]
    sections: list[str] = []
    for i, (p, text) in enumerate(texts):
        docs.files.append(DocFile(p, len(text), kept[i]))
        if kept[i]:
            body = text[: kept[i]].rstrip()
            if kept[i] < len(text):
                body += f"\n… ({len(text) - kept[i]} chars of this file cut)"
            sections.append(f"## {p}\n{body}")
    if sections:
        docs.text = "# Project instructions (AGENTS.md, CLAUDE.md)\n\n" + "\n\n".join(sections)
        if docs.note:
            docs.text += "\n\n" + docs.note
    return docs


def context_lines(docs: ProjectDocs) -> list[str]:
    """For `/context`: each AGENTS.md loaded, its size, and whether it was cut."""
    if not docs.files:
        return ["no AGENTS.md or CLAUDE.md loaded (looked in the config folder and from the repository root to "
                "the workspace)"]
    total = sum(f.kept for f in docs.files)
    lines = [f"project instructions: {plural(len(docs.files), 'file')}, {total} of {docs.budget} chars used"]
    for f in docs.files:
        state = "" if f.status == "whole" else f" ({f.status}: {f.kept} kept)"
        lines.append(f"  {f.path}  {f.chars} chars{state}")
    lines.extend(f"  {e}" for e in docs.errors)
    return lines


def environment_facts(workspace: Path) -> str:
    return "\n".join([
        f"Workspace: {workspace}",
        f"Platform: {platform.system()} {platform.release()} ({platform.machine()})",
        f"Date: {time.strftime('%Y-%m-%d')}",
    ])


def system_prompt(workspace: Path, *, extra: list[str] | None = None, docs: ProjectDocs | None = None,
                  skill_index: str = "") -> str:
    parts = [IDENTITY, environment_facts(workspace), docs.text if docs else "", skill_index, *(extra or [])]
    return "\n\n".join(p for p in parts if p)
