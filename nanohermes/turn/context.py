"""The system prompt: who the agent is, where it works, the facts of its environment, the
project's instructions (the AGENTS.md chain) and the skill index; and the instruction files of
subfolders, loaded when the model first works under them (`NestedDocs`).

The AGENTS.md chain is the person's own files (nanohermes's global AGENTS.md and CLAUDE.md,
Claude Code's `~/.claude/CLAUDE.md`), then every AGENTS.md from the repository root down to the
workspace, de-duplicated by real path. Claude Code's files count as AGENTS.md does, beside it
in each folder of the chain: CLAUDE.md, .claude/CLAUDE.md and CLAUDE.local.md (a repository
written for Claude Code brings its instructions with it). A file's `@path` imports follow it
(as Claude Code reads them: beside the importing file, `~/`, absolute; not in code; at most
`doc_import_depth` hops; each file once). Every file is read through `ownreads`, whose rules
decide what may be read and name what was not. The chain is shown general first, specific
last, but its budget is spent the other way round: the files nearest the workspace are kept
whole first, and what did not fit is named in a note with exact counts.
"""

from __future__ import annotations

import asyncio
import os
import platform
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nanohermes.common.budget import plural
from nanohermes.common.dirs import config_home
from nanohermes.guard.ownreads import Confirm, Owner, OwnReader, OwnText, Skipped

if TYPE_CHECKING:
    from nanohermes.guard.permissions import Target
    from nanohermes.turn.session import Session

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
# The person's own: nanohermes's global files, then Claude Code's user memory.
USER_DOC_NAMES = (DOC_NAME, "CLAUDE.md")
IMPORT_PURPOSE = "imported by {importer}"


@dataclass(frozen=True)
class DocFile:
    """One AGENTS.md of the chain: its size and how much of it the prompt carries."""

    path: Path
    chars: int  # the whole file
    kept: int  # chars in the prompt: == chars when whole, 0 when left out
    via: Path | None = None  # the file that imported it (`@path`), None for a file of the chain
    real: str = ""  # what it resolved to

    @property
    def status(self) -> str:
        if self.kept == self.chars:
            return "whole"
        return "omitted" if self.kept == 0 else "cut"


@dataclass
class ProjectDocs:
    """The instruction files read into the system prompt, and those skipped, with why."""

    files: list[DocFile] = field(default_factory=list)  # general first: global, root, ..., workspace
    text: str = ""  # the prompt section, empty when there is no file
    budget: int = 0
    skipped: list[Skipped] = field(default_factory=list)  # files not read, and why

    @property
    def errors(self) -> list[str]:
        """The files that were not read, each with why."""
        return [str(s) for s in self.skipped]

    @property
    def used(self) -> int:
        """Chars of the budget the prompt's section spends."""
        return sum(f.kept for f in self.files)

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


@dataclass(frozen=True)
class ChainFile:
    """A file of the chain: where it is named, whose it is, and (above the workspace) the
    folder it was named in."""

    path: Path
    owner: Owner
    anchor: Path | None = None


def repo_root(workspace: Path) -> Path | None:
    """The nearest folder at or above the workspace holding `.git` (a folder, or a worktree's file)."""
    for folder in (workspace, *workspace.parents):
        if (folder / ".git").exists():
            return folder
    return None


def claude_home() -> Path:
    """Claude Code's user folder (`~/.claude`), whose CLAUDE.md is the person's own memory."""
    return Path.home() / ".claude"


def chain_files(workspace: Path, config_dir: Path, claude_dir: Path | None = None) -> list[ChainFile]:
    """The AGENTS.md (and CLAUDE.md) files that are there, general first, each real path once:
    the person's own (nanohermes's config folder, then `~/.claude/CLAUDE.md`), then each folder
    from the repository's root down to the workspace."""
    ws = workspace.resolve()
    root = repo_root(ws) or ws
    folders = [ws, *ws.parents]
    folders = folders[: folders.index(root) + 1]
    claude_dir = claude_home() if claude_dir is None else claude_dir
    candidates = [*(ChainFile(config_dir / name, "user") for name in USER_DOC_NAMES),
                  ChainFile(claude_dir / "CLAUDE.md", "user"),
                  *(ChainFile(f / name, "project", None if f == ws else f) for f in reversed(folders) for name in DOC_NAMES)]
    seen: set[str] = set()
    out: list[ChainFile] = []
    for c in candidates:
        # Whatever stands there is named, read or not (a link to nowhere, a FIFO); a folder is no file.
        if not os.path.lexists(c.path) or os.path.isdir(c.path):
            continue
        real = os.path.realpath(c.path)
        if real in seen:
            continue
        seen.add(real)
        out.append(c)
    return out


def doc_chain(workspace: Path, config_dir: Path, claude_dir: Path | None = None) -> list[Path]:
    """The paths of `chain_files`."""
    return [c.path for c in chain_files(workspace, config_dir, claude_dir)]


# `@path` as Claude Code reads it in a memory file: after a space or at a line's start, up
# to the next space (`\ ` escapes one), in text that is not code.
_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
_LOOKS_LIKE_PATH = re.compile(r"[A-Za-z0-9._~/-]")


def import_refs(text: str) -> list[str]:
    """The `@path` imports of a Markdown file, in order: not in fenced code blocks or code
    spans, and only what could be a path (`@` alone, `@@`, an email's `a@b` are not)."""
    out: list[str] = []
    fence = ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
                fence = ""
            continue
        if m:
            fence = m.group(1)
            continue
        for ref in _IMPORT.findall(_CODE_SPAN.sub(" ", line)):
            ref = ref.replace("\\ ", " ")
            if _LOOKS_LIKE_PATH.match(ref) and ref != "/":
                out.append(ref)
    return out


def import_path(ref: str, importer: Path) -> Path:
    """Where an import points: `~/...` in the home folder, an absolute path as it is, anything
    else beside the importing file."""
    if ref.startswith("~/"):
        return Path(os.path.normpath(os.path.expanduser(ref)))
    return Path(os.path.normpath(ref if ref.startswith("/") else importer.parent / ref))


def import_steps(got: OwnText, level: int, depth: int, seen: set[str]) -> Iterator[Path | Skipped]:
    """The files `got` (read `level` hops from its chain file) imports, to read in order, or a
    `Skipped` for one more than `depth` hops away. A file already in (`seen`, which the caller
    grows as it reads, between steps), a folder, or an `@word` of prose naming no file is not
    one of them."""
    for ref in import_refs(got.text):
        target = import_path(ref, got.path)
        if not os.path.lexists(target) and ref.rstrip(".,;:!?)") != ref:  # `see @docs/a.md.`
            target = import_path(ref.rstrip(".,;:!?)"), got.path)
        real = os.path.realpath(target)
        if real in seen or not os.path.lexists(target) or os.path.isdir(target):
            continue  # a cycle, a file already in, or an `@word` of prose
        if level + 1 > depth:
            yield Skipped(target, real, IMPORT_PURPOSE.format(importer=got.path), "refused",
                          f"imports are followed {plural(depth, 'level')} deep (limit doc_import_depth)")
            continue
        yield target


@dataclass
class _Loading:
    """The instruction files being read, with the imports they follow."""

    reader: OwnReader
    depth: int  # hops of imports followed
    texts: list[tuple[Path, str, Path | None, str]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def add(self, got: OwnText, owner: Owner, via: Path | None, level: int) -> None:
        self.seen.add(str(got.real))
        self.texts.append((got.path, got.text, via, str(got.real)))
        for target in import_steps(got, level, self.depth, self.seen):
            if isinstance(target, Skipped):
                self.skipped.append(target)
                continue
            imported = self.reader.read(target, purpose=IMPORT_PURPOSE.format(importer=got.path), owner=owner)
            if isinstance(imported, Skipped):
                if imported.kind != "missing":
                    self.skipped.append(imported)
                continue
            self.add(imported, owner, got.path, level + 1)


def load_project_docs(workspace: Path, max_chars: int, *, config_dir: Path | None = None,
                      claude_dir: Path | None = None, reader: OwnReader | None = None) -> ProjectDocs:
    """The chain's files and what they import, read through the one reader, within `max_chars`."""
    if config_dir is None:
        config_dir = config_home()
    reader = reader if reader is not None else OwnReader(workspace)
    loading = _Loading(reader, reader.limits.doc_import_depth)
    for c in chain_files(workspace, config_dir, claude_dir):
        got = reader.read(c.path, purpose="instruction file", owner=c.owner, anchor=c.anchor)
        if isinstance(got, Skipped):
            loading.skipped.append(got)
        elif str(got.real) not in loading.seen:  # imported already by a file before it
            loading.add(got, c.owner, None, 0)
    for s in loading.skipped:
        reader.unnamed.setdefault(str(s), s)  # named at the next turn, as every skip of the reader
    texts = loading.texts
    docs = ProjectDocs(budget=max_chars, skipped=loading.skipped)
    left = max_chars
    kept: dict[int, int] = {}
    for i in reversed(range(len(texts))):  # most specific first
        n = len(texts[i][1])
        kept[i] = min(n, left)
        left -= kept[i]
    sections: list[str] = []
    for i, (p, text, via, real) in enumerate(texts):
        docs.files.append(DocFile(p, len(text), kept[i], via, real))
        if kept[i]:
            body = text[: kept[i]].rstrip()
            if kept[i] < len(text):
                body += f"\n… ({len(text) - kept[i]} chars of this file cut)"
            sections.append(f"## {p}" + (f" (imported by {via})" if via is not None else "") + f"\n{body}")
    if sections:
        docs.text = "# Project instructions (AGENTS.md, CLAUDE.md)\n\n" + "\n\n".join(sections)
        if docs.note:
            docs.text += "\n\n" + docs.note
    return docs


# Session state: the nested instruction files loaded, by real path -> (the call whose result
# carries it, the chars it spends of the project docs budget).
NESTED_STATE = "nested_docs"
NESTED_PURPOSE = "nested instruction file"


@dataclass(frozen=True)
class _Nested:
    """A subfolder's instruction file, found by a call working under it."""

    path: Path
    real: str
    shown: str  # from the workspace
    folder: str  # its folder, from the workspace


@dataclass
class NestedDocs:
    """The instruction files of a subfolder of the workspace (the chain's names: AGENTS.md,
    CLAUDE.md, ...), added to the result of the first call that reads or edits a file under
    that subfolder, each once, within what the chain left of `project_docs_chars`.

    What was loaded is kept in the session state with the call that carried it: a file whose
    call is no longer in the history (compacted, rewound, another conversation) is loaded
    again the next time it applies, so the model never loses a file it was told about."""

    workspace: Path
    reader: OwnReader
    session: Session
    docs: Callable[[], ProjectDocs]  # the chain in the system prompt now
    budget: Callable[[], int]  # project_docs_chars
    notify: Callable[[str], None] = lambda text: None  # a file not loaded, for the person
    confirm: Confirm | None = None  # asks a person; None when nobody is there

    def for_session(self, session: Session) -> NestedDocs:
        """The same files for a sub-agent's conversation: loaded once in it, as in the parent's."""

        return replace(self, session=session)

    def folders(self, target: Target) -> list[Path]:
        """The subfolders of the workspace holding the files a reading or editing call touches,
        outermost first."""
        if target.kind != "path" or not (target.effect == "write" or (target.effect == "read" and target.shows_contents)):
            return []
        root = os.path.realpath(self.workspace)
        out: list[Path] = []
        for p in target.paths:
            folder = str(p) if os.path.isdir(p) else os.path.dirname(str(p))
            chain: list[Path] = []
            while folder != root and folder.startswith(root.rstrip("/") + "/"):
                chain.append(Path(folder))
                folder = os.path.dirname(folder)
            out += [f for f in reversed(chain) if f not in out]
        return out

    def candidates(self, target: Target) -> list[_Nested]:
        """The instruction files of those folders, outermost first."""
        out: list[_Nested] = []
        for folder in self.folders(target):
            for name in DOC_NAMES:
                path = folder / name
                if os.path.lexists(path) and not os.path.isdir(path):
                    out.append(_Nested(path, os.path.realpath(path), os.path.relpath(path, self.workspace),
                                       os.path.relpath(folder, self.workspace)))
        return out

    def _live(self) -> set[str]:
        """The calls whose results the history still holds."""
        return {c.id for m in self.session.history for c in m.tool_calls}

    async def after(self, target: Target, call_id: str) -> str:
        """What to add to the call's result: the nested files it is the first to need."""
        if target.kind != "path":
            return ""
        found = await asyncio.to_thread(self.candidates, target)
        if not found:
            return ""
        state: dict[str, tuple[str, int]] = self.session.state.setdefault(NESTED_STATE, {})
        live = self._live() | {call_id}
        for real in [r for r, (by, _) in state.items() if by not in live]:
            del state[real]  # its result is gone from the history: loaded again when it applies
        chain = {f.real for f in self.docs().files}
        mine = list({n.real: n for n in found if n.real not in chain and n.real not in state}.values())
        for n in mine:
            state[n.real] = (call_id, 0)  # claimed before any wait: a parallel call does not load it too
        return "".join([await self._load(n, call_id, state) for n in mine])

    async def _read(self, path: Path, purpose: str) -> OwnText | Skipped:
        if self.confirm is not None:
            return await self.reader.read_asking(path, self.confirm, purpose=purpose)
        return self.reader.read(path, purpose=purpose)

    async def _imports(self, got: OwnText, level: int, seen: set[str], into: list[str]) -> None:
        """What `got` imports, as the chain's files import (`import_steps`), appended to `into`:
        each file's section, or the line saying why it was not loaded."""
        for target in import_steps(got, level, self.reader.limits.doc_import_depth, seen):
            imported = target if isinstance(target, Skipped) else \
                await self._read(target, IMPORT_PURPOSE.format(importer=self._shown(got.path)))
            if isinstance(imported, Skipped):
                if imported.kind != "missing":
                    self.reader.told(imported)
                    self.notify(str(imported))
                    into.append(f"[{self._shown(imported.path)} ({imported.purpose}) not loaded: {imported.reason}]")
                continue
            seen.add(str(imported.real))
            into.append(f"[{self._shown(imported.path)}, imported by {self._shown(got.path)}]\n"
                        f"{imported.text.rstrip()}")
            await self._imports(imported, level + 1, seen, into)

    def _shown(self, path: Path) -> str:
        """A path as the result names it: from the workspace when inside it."""
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(self.workspace))
        return str(path) if rel.startswith("..") else rel

    async def _load(self, n: _Nested, call_id: str, state: dict[str, tuple[str, int]]) -> str:
        path, real, shown, where = n.path, n.real, n.shown, n.folder
        got = await self._read(path, NESTED_PURPOSE)
        if isinstance(got, Skipped):
            self.reader.told(got)
            self.notify(str(got))
            return f"\n\n[{shown} ({NESTED_PURPOSE}) not loaded: {got.reason}]"
        # Its `@path` imports follow it, each file once a session (one the chain or another
        # nested file brought in already is not repeated); they share its budget.
        seen = {f.real for f in self.docs().files} | set(state) | {str(got.real)}
        parts = [got.text.rstrip()]
        await self._imports(got, 0, seen, parts)
        for imported in seen - {f.real for f in self.docs().files} - set(state):
            state[imported] = (call_id, 0)
        left = max(0, self.budget() - self.docs().used - sum(n for _, n in state.values()))
        text = "\n\n".join(parts)
        kept = min(len(text), left)
        state[real] = (call_id, kept)
        if not kept:
            return (f"\n\n[{shown} ({NESTED_PURPOSE} for work under {where}/) not loaded: the project instructions "
                    f"budget is spent ({self.budget()} chars, limit project_docs_chars); read it with read_file]")
        body = text[:kept]
        if kept < len(text):
            body += (f"\n… ({len(text) - kept} chars of this file cut: the project instructions budget is "
                     f"{self.budget()} chars, limit project_docs_chars; read the rest with read_file)")
        return f"\n\n[instructions of {shown}, for work under {where}/ (loaded once: {NESTED_PURPOSE})]\n{body}"


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
