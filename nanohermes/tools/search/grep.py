"""The grep tool: parameters, the ripgrep-or-Python search, and the output (notes, secret
files held back, paths on one line)."""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanohermes.common.budget import KiB, MiB, Limits
from nanohermes.guard.pathrules import held, swapped
from nanohermes.guard.permissions import is_secret
from nanohermes.tools.base import Attempt, Params, ReadOnlyTool, ToolContext, ToolError, about
from nanohermes.tools.fileops import Withheld, shown_path
from nanohermes.tools.search.globs import backslash_hint, compile_glob
from nanohermes.tools.search.ripgrep import (
    AUTO, RipgrepFailed, find_ripgrep, prefilter_glob, rg_common_args, rg_paths, rg_stats, run_rg, walk_ripgrep,
)
from nanohermes.tools.search.scan import Matcher, Scan, scan, scan_walk
from nanohermes.tools.search.walk import Walk, ignore_dir_names, one_line_path, shown_prefix, walk_note

# -- grep ----------------------------------------------------------------------------------

EARLY_PROBE = 32  # files read in path order before the early read may give up on filling the cap

def _size_text(n: int) -> str:
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= KiB and n % KiB == 0:
        return f"{n // KiB} KiB"
    return f"{n} bytes"


def skipped_note(large: int, binary: int, limits: Limits) -> str:
    total = large + binary
    return (f"{total} file{'' if total == 1 else 's'} skipped: {large} larger than "
            f"{_size_text(limits.grep_file_max_bytes)}, {binary} binary")


def include_filter(include: str | None, root_shown: str, most: int) -> Callable[[str], bool]:
    """Try the include glob (at most `most` `{a,b}` alternatives) against the root-relative
    path, the shown path and the name."""
    if not include:
        return lambda rel: True
    rx = compile_glob(include, most)
    prefix = "" if root_shown == "." else root_shown.rstrip("/") + "/"

    def ok(rel: str) -> bool:
        return bool(rx.fullmatch(rel) or rx.fullmatch(rel.rpartition("/")[2]) or (prefix and rx.fullmatch(prefix + rel)))

    return ok


@dataclass(frozen=True, kw_only=True)
class GrepParams(Params):
    pattern: str = field(metadata=about("A literal substring (a regex with regex=true)."))
    path: str | None = None
    include: str | None = None
    case_insensitive: bool = False
    regex: bool = False

    non_empty: ClassVar[dict[str, str]] = {"pattern": "pass the text to search for"}
    claude_fields: ClassVar[dict[str, str]] = {"include": "glob", "case_insensitive": "-i"}


@dataclass(frozen=True, kw_only=True)
class Grep(ReadOnlyTool[GrepParams]):
    spawns: ClassVar[bool] = False  # ripgrep is nanohermes's own helper, started with fixed options on the judged paths
    name: ClassVar[str] = "grep"
    claude_names: ClassVar[tuple[str, ...]] = ("Grep",)
    group: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Search file contents for a literal substring (regex=true: a regular expression, within one "
        "line); returns sorted `path:line:text`. Walks `path` (default the workspace) honouring "
        ".gitignore; `include` is a glob. At most {grep_matches} matches, lines clipped at "
        "{grep_line_chars} chars; files over {grep_file_max_bytes} and binary ones are only counted; the "
        "walk stops after {grep_max_files} files. Secret files (.env, keys) are searched only when named "
        "in `path`. Use glob to find files by name."
    )
    params: ClassVar[type[Params]] = GrepParams
    kind = "path"
    ripgrep: str | None = AUTO  # a binary path, AUTO to look for one, None for pure Python
    early_files: int = 256  # files read in path order while ripgrep searches the rest

    def rule_subject(self, args: GrepParams) -> str | None:
        return args.path or "."

    def output_limit(self) -> str:
        return "grep_matches matches, grep_line_chars, grep_file_max_bytes, grep_max_files files"

    def _binary(self) -> str | None:
        return find_ripgrep() if self.ripgrep == AUTO else self.ripgrep

    async def run(self, args: GrepParams, ctx: ToolContext, attempt: Attempt) -> str:
        matcher = Matcher.build(args.pattern, args.regex, args.case_insensitive)
        root = self.resolved(args, ctx, attempt).paths[0]  # the folder (or file) the rules judged
        shown = shown_path(ctx, args.path or ".", root)
        included = include_filter(args.include, shown, ctx.limits.glob_alternatives)  # a bad glob fails here, before any I/O
        if not root.exists():
            raise ToolError(f"{shown} does not exist; check the path with list_dir or glob")
        withheld = Withheld(ctx, attempt, root)  # files a read rule covers are not searched

        def keep(rel: str) -> bool:
            return included(rel) and withheld.keeps(rel)

        chosen = keep if args.include or withheld else None  # None: every walked file is searched
        try:
            with held(root) as (where, st):  # searched through `where`: what was judged, even if relinked since
                return await self._search(args, ctx, matcher, where, st, shown, chosen, withheld)
        except OSError as e:  # from opening the root; the search itself reports what it could not read
            if swapped(e):
                raise ToolError(f"cannot search {shown}: a symlink appeared in its path after it was checked; "
                                "search it again") from None
            raise ToolError(f"cannot search {shown}: {e.strerror}; check its permissions") from None

    async def _search(self, args: GrepParams, ctx: ToolContext, matcher: Matcher, root: Path, st: os.stat_result,
                      shown: str, keep: Callable[[str], bool] | None, withheld: Withheld) -> str:
        lim = ctx.limits
        if stat.S_ISREG(st.st_mode):
            res = await self.in_thread(scan, root.parent, [root.name], matcher, lim, False)
            res.hits = [(shown, lineno, line) for _, lineno, line in res.hits]  # named as the call named it
            return _format_grep(args, ctx, "", shown, res, False, searched_dir=False)
        dirs = ignore_dir_names(ctx.config)
        rg = self._binary()
        if rg is not None:
            try:
                return await self._with_ripgrep(rg, args, ctx, matcher, root, shown, keep, dirs, withheld)
            except RipgrepFailed:
                pass
        res, truncated = await self.in_thread(scan_walk, root, dirs, keep, matcher, lim, lim.grep_max_files)
        return _format_grep(args, ctx, shown_prefix(shown), shown, res, truncated, withheld=withheld)

    async def _with_ripgrep(self, rg: str, args: GrepParams, ctx: ToolContext, matcher: Matcher, root: Path,
                            shown: str, keep: Callable[[str], bool] | None, dirs: frozenset[str],
                            withheld: Withheld) -> str:
        """With read rules (`withheld`), `keep` holds more than the include glob: the walk's
        listing decides which of ripgrep's files are read, as it does for an include glob."""
        lim = ctx.limits
        argv = [rg, "--files-with-matches", "--null", "--stats", "--text", *rg_common_args(dirs)]
        if not args.regex:
            argv.append("--fixed-strings")
        if args.case_insensitive:
            argv.append("--ignore-case")
        if args.include and (g := prefilter_glob(args.include)):
            argv += ["--glob", g]
        argv += ["--regexp", args.pattern, "--", "."]
        tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(run_rg(argv, root))]
        listed = bool(args.include) or bool(withheld)  # the count of walked files and the filter need the listing
        if listed:
            tasks.append(asyncio.ensure_future(walk_ripgrep(rg, root, dirs, lim.grep_max_files)))
        try:
            # A common pattern fills the cap within the first files in path order, long before
            # ripgrep has visited every file: walk and read the start of the tree meanwhile.
            budget = min(self.early_files, lim.grep_max_files)
            need = lim.grep_matches + 1

            def hopeless(files: int, hits: int) -> bool:
                # A rare pattern will not fill the cap from these files: stop reading, so that
                # ripgrep has the cores to itself (its answer is the same one).
                return files >= EARLY_PROBE and hits * budget < need * files // 2

            probe = hopeless if budget < lim.grep_max_files else None  # else these files are the answer
            res, truncated = await self.in_thread(scan_walk, root, dirs, keep, matcher, lim, budget, probe)
            if len(res.hits) > lim.grep_matches or not truncated or budget == lim.grep_max_files:
                return _format_grep(args, ctx, shown_prefix(shown), shown, res, truncated, withheld=withheld)
            code, out, err = await tasks[0]
            if code not in (0, 1) and b"files searched" not in out:
                raise RipgrepFailed(err.decode(errors="replace").strip())
            found, total = rg_stats(out)
            candidates = rg_paths(found, "\0")
            if listed:
                listing: Walk = await tasks[1]
                walked = listing.files if keep is None else [r for r in listing.files if keep(r)]
                allowed: set[str] | None = set(walked)  # ripgrep's -g also admits ignored files
                truncated, searched = listing.truncated, len(walked)
            elif total > lim.grep_max_files:
                listing = await walk_ripgrep(rg, root, dirs, lim.grep_max_files)
                allowed, truncated, searched = set(listing.files), True, len(listing.files)
            else:
                allowed, truncated, searched = None, False, total
        finally:
            for t in tasks:  # answered early, failed or cancelled: stop ripgrep
                if not t.done():
                    t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if allowed is not None:
            candidates = [c for c in candidates if c in allowed]
        candidates.sort()
        res = await self.in_thread(scan, root, candidates, matcher, lim, True)
        res.searched = searched
        return _format_grep(args, ctx, shown_prefix(shown), shown, res, truncated, withheld=withheld)




# What gives a pattern away as a regular expression written for a literal search: an escaped
# metacharacter (grep's `foo\|bar`, `\d`, `\.`), `.*` or `.+`, an anchor at an end, a
# character range, an alternation in parentheses, a repeat count.
_REGEX_SIGNS = re.compile(r"\\[|()dDwWsSbB.+*?\[\]{}]|\.[*+?]|^\^|(?<!\\)\$$|\[\^?[^\]]*\w-\w[^\]]*\]"
                          r"|\([^()]*\|[^()]*\)|\w\{\d+(?:,\d*)?\}")


def looks_like_regex(pattern: str) -> bool:
    """Is this literal pattern most likely meant as a regular expression (and a valid one)?"""
    if not _REGEX_SIGNS.search(pattern):
        return False
    try:
        re.compile(pattern.replace("\\|", "|"))
    except re.error:
        return False
    return True


def _format_grep(args: GrepParams, ctx: ToolContext, prefix: str, shown: str, res: Scan, truncated: bool,
                 searched_dir: bool = True, withheld: Withheld | None = None) -> str:
    lim = ctx.limits
    notes: list[str] = []
    hits = res.hits
    if searched_dir:  # a secret file shows only when named (and then the user is asked first)
        secret = {rel for rel, _, _ in hits if is_secret(rel, ctx.config.permissions.secret_files)}
        if secret:
            hits = [h for h in hits if h[0] not in secret]
            notes.append(f"{len(secret)} secret file{'' if len(secret) == 1 else 's'} with matches not shown "
                         f"(permissions.secret_files); grep one by its path to be asked for it")
    if len(hits) > lim.grep_matches:
        hits = hits[: lim.grep_matches]
        notes.append(f"… stopped after {lim.grep_matches} matches")
        truncated = False  # the cap stopped the search before the walk limit did
    if res.large or res.binary:
        notes.append(skipped_note(res.large, res.binary, lim))
    if truncated:
        notes.append(walk_note(lim))
    if withheld is not None and (note := withheld.note("file", "not searched")):
        notes.append(note)
    if not hits:
        what = "regex" if args.regex else "literal"
        extra = f"; include {args.include}" if args.include else ""
        extra += "; case-insensitive" if args.case_insensitive else ""
        n = res.searched
        body = f"no matches for {what} {args.pattern!r} in {shown} ({n} file{'' if n == 1 else 's'} searched{extra})"
        if not args.regex and looks_like_regex(args.pattern):
            body += "; it looks like a regular expression: set regex=true to search it as one"
        if args.include and (hint := backslash_hint(args.include)):
            body += f"{hint} as include"
        return "\n".join([body, *notes])
    cap = lim.grep_line_chars
    rows: list[str] = []
    for rel, lineno, line in hits:
        if len(line) > cap:
            line = line[:cap] + "…"
        rows.append(f"{one_line_path(prefix + rel)}:{lineno}:{line}")
    return "\n".join(rows) + ("\n\n" + "\n".join(notes) if notes else "")
