"""The glob tool: files by a glob over their relative path."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from nanohermes.guard.pathrules import held, swapped
from nanohermes.tools.base import Attempt, Params, ReadOnlyTool, ToolContext, ToolError, about
from nanohermes.tools.fileops import Withheld, shown_path
from nanohermes.tools.search.globs import backslash_hint, compile_glob
from nanohermes.tools.search.ripgrep import AUTO, RipgrepFailed, capped, find_ripgrep, list_ripgrep
from nanohermes.tools.search.walk import Walk, ignore_dir_names, one_line_path, shown_prefix, walk_note, walk_python

# -- glob ----------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class GlobParams(Params):
    pattern: str = field(metadata=about("e.g. `**/*.py`, `src/*/index.ts`."))
    path: str | None = None

    non_empty: ClassVar[dict[str, str]] = {"pattern": "pass a glob such as **/*.py"}


@dataclass(frozen=True, kw_only=True)
class Glob(ReadOnlyTool[GlobParams]):
    spawns: ClassVar[bool] = False  # ripgrep is nanohermes's own helper, started with fixed options on the judged paths
    name: ClassVar[str] = "glob"
    claude_names: ClassVar[tuple[str, ...]] = ("Glob",)
    group: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Find files by name: paths under `path` (default the workspace) whose relative path matches "
        "`pattern`, sorted. `**` spans folders, `*` and `?` stay in one: `*.py` is top level only, "
        "`**/*.py` any depth; `{a,b}` is either. Honours .gitignore; at most {glob_results} paths, the walk stops after "
        "{grep_max_files} files. Use grep to search file contents."
    )
    params: ClassVar[type[Params]] = GlobParams
    kind = "path"
    shows_contents = False  # file names only
    ripgrep: str | None = AUTO

    def rule_subject(self, args: GlobParams) -> str | None:
        return args.path or "."

    def output_limit(self) -> str:
        return "glob_results paths, grep_max_files files"

    async def _candidates(self, root: Path, ctx: ToolContext, suffix: str) -> tuple[list[str], Callable[[], int], bool]:
        """The walked files that end with `suffix`, how many files were walked (asked only
        for an empty answer), and whether the walk hit its cap. From a whole ripgrep listing the few that end so are picked
        out of the one string, without a string made for every file walked."""
        lim = ctx.limits
        dirs = ignore_dir_names(ctx.config)
        rg = find_ripgrep() if self.ripgrep == AUTO else self.ripgrep
        walk: Walk | None = None
        if rg is not None:
            try:
                listing = await list_ripgrep(rg, root, dirs)
            except RipgrepFailed:
                pass
            else:
                if listing.within(lim.grep_max_files):
                    return (listing.ending(suffix) if suffix else listing.files()), lambda: listing.count, False
                walk = capped(listing.files(), lim.grep_max_files)
        if walk is None:
            walk = await self.in_thread(walk_python, root, dirs, lim.grep_max_files)
        files = [r for r in walk.files if r.endswith(suffix)] if suffix else walk.files
        n = len(walk.files)
        return files, lambda: n, walk.truncated

    async def run(self, args: GlobParams, ctx: ToolContext, attempt: Attempt) -> str:
        rx = compile_glob(args.pattern, ctx.limits.glob_alternatives)
        root = self.resolved(args, ctx, attempt).paths[0]  # the folder (or file) the rules judged
        shown = shown_path(ctx, args.path or ".", root)
        if not root.exists():
            raise ToolError(f"{shown} does not exist; check the path with list_dir")
        if not root.is_dir():
            raise ToolError(f"{shown} is a file, not a directory; pass its folder as path")
        last = args.pattern.rsplit("/", 1)[-1]
        suffix = ""  # `**/*.py`: a cheap test of the name before the regex
        if last.startswith("*") and last != "*" and not any(c in last[1:] for c in "*?[\\{"):
            suffix = last[1:]
        try:
            with held(root) as (where, _):  # walked through `where`: what was judged, even if relinked since
                candidates, walked, truncated = await self._candidates(where, ctx, suffix)
        except OSError as e:  # from opening the root; the walk itself skips what it cannot read
            if swapped(e):
                raise ToolError(f"cannot search {shown}: a symlink appeared in its path after it was checked; "
                                "search it again") from None
            raise ToolError(f"cannot search {shown}: {e.strerror}; check its permissions") from None
        lim = ctx.limits
        if suffix and args.pattern == "**/" + last:
            found = candidates  # the suffix is the whole answer
        else:
            match = rx.fullmatch
            found = [r for r in candidates if match(r)]
        withheld = Withheld(ctx, attempt, root)
        found = [r for r in found if withheld.keeps(r)] if withheld else found
        found.sort()
        prefix = shown_prefix(shown)
        notes: list[str] = []
        if len(found) > lim.glob_results:
            notes.append(f"… {len(found)} files match, showing first {lim.glob_results}; narrow the pattern or path")
            found = found[: lim.glob_results]
        if truncated:
            notes.append(walk_note(lim))
        if note := withheld.note("path", "not listed"):
            notes.append(note)
        if not found:
            n = walked()
            return "\n".join([f"no files match {args.pattern!r} under {shown} ({n} file{'' if n == 1 else 's'} walked)"
                              f"{backslash_hint(args.pattern)}", *notes])
        return "\n".join(one_line_path(prefix + r) for r in found) + ("\n\n" + "\n".join(notes) if notes else "")
