"""grep and glob answer the same with ripgrep and in pure Python on one real tree that holds
everything the walk and the reader decide on: nested ignore files of every kind and their
negations, hidden files and folders, binary files with and without the text, links to files
and folders (inside and outside the tree, and broken), secret files, files over the size
limit, a nested repository and the build folders; at the shipped limits and at lowered ones."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.tools import Attempt, ToolContext
from nanohermes.tools.search import Glob, Grep, find_ripgrep, walk_python, walk_ripgrep

RG = find_ripgrep()


def write(root: Path, rel: str, content: str | bytes = "needle\n") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content.encode() if isinstance(content, str) else content)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("backends")
    outside = base / "outside"
    write(outside, "far.txt", "needle from outside\n")
    root = base / "ws"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, ".git/info/exclude", "excluded.txt\n")
    write(root, ".gitignore", "*.log\n!keep.log\n/out/\ngen/**\n!gen/kept.txt\n")
    write(root, ".ignore", "!build.log\n")
    write(root, "src/.rgignore", "*.tmp\n")
    write(root, "src/deep/.gitignore", "!*.tmp\nskip_me/\n")
    text = "alpha needle\nNeedle beta\nneedle_zq marker\nend\n"
    for rel in ("a.py", "keep.log", "x.log", "build.log", "excluded.txt", "out/o.py", "sub/out/o.py",
                "gen/g.py", "gen/kept.txt", "src/m.py", "src/t.tmp", "src/deep/t.tmp", "src/deep/skip_me/s.py",
                ".hidden/h.py", ".hiddenfile", "src/.dotted.py", "node_modules/n.js", "src/__pycache__/c.py",
                "nested/.gitignore", "nested/inner.py", "docs/readme.md", "ünï/çödé.py"):
        write(root, rel, f"{rel}\n{text}")
    subprocess.run(["git", "init", "-q", str(root / "nested")], check=True)  # a repository of its own
    write(root, "nested/.gitignore", "*.md\n")
    write(root, "nested/notes.md", f"nested notes\n{text}")
    write(root, "bin/match.bin", b"\x00\x01needle\x02\n")
    write(root, "bin/plain.bin", b"\x00\x01\x02\n")
    write(root, "bin/late_nul.txt", b"needle first\n" + b"y" * 9000 + b"\n\x00needle after\n")
    write(root, "big/large.txt", "needle\n" + "z" * (1 << 20) + "\n")
    write(root, "big/large_without.txt", "q" * ((1 << 20) + 10) + "\n")
    write(root, ".env", "SECRET_NEEDLE=1\nneedle=2\n")
    write(root, "keys/server.pem", "needle in a key\n")
    write(root, "config/.env.prod", "needle=3\n")
    os.symlink(root / "a.py", root / "link_to_file.py")
    os.symlink(root / "src", root / "link_to_dir")
    os.symlink(outside, root / "link_outside")
    os.symlink(outside / "far.txt", root / "far_link.txt")
    os.symlink(root / "missing", root / "broken.py")
    os.symlink(root / "keep.log", root / "src" / "linked.log")
    return root


def ctx(root: Path, limits: Limits) -> ToolContext:
    return ToolContext(workspace=root, limits=limits, config=Config())


def grep(root: Path, rg: str | None, limits: Limits, **args: object) -> str:
    tool = Grep(ripgrep=rg)
    return asyncio.run(tool.run(tool.parse(dict(args)), ctx(root, limits), Attempt()))


def glob(root: Path, rg: str | None, limits: Limits, **args: object) -> str:
    tool = Glob(ripgrep=rg)
    return asyncio.run(tool.run(tool.parse(dict(args)), ctx(root, limits), Attempt()))


LIMITS = [
    pytest.param(Limits(), id="shipped"),
    pytest.param(Limits(grep_matches=5, grep_max_files=9, glob_results=4, grep_line_chars=8), id="lowered"),
    pytest.param(Limits(grep_file_max_bytes=40, binary_sniff_bytes=2, grep_max_files=25), id="small-files"),
]

GREPS: list[dict[str, object]] = [
    {"pattern": "needle"},
    {"pattern": "NEEDLE", "case_insensitive": True},
    {"pattern": "needle_zq"},
    {"pattern": "NEEDLE_ZQ MARKER", "case_insensitive": True},
    {"pattern": "far"},
    {"pattern": "^needle", "regex": True},
    {"pattern": "needle", "include": "**/*.py"},
    {"pattern": "needle", "include": "*.{log,tmp}"},
    {"pattern": "needle", "path": "src"},
    {"pattern": "needle", "path": "nested"},
    {"pattern": "nothing like it"},
]


@pytest.mark.parametrize("limits", LIMITS)
def test_grep_answers_alike_with_either_backend(tree: Path, limits: Limits) -> None:
    assert RG is not None
    for query in GREPS:
        assert grep(tree, None, limits, **query) == grep(tree, RG, limits, **query), query


@pytest.mark.parametrize("limits", LIMITS)
def test_glob_answers_alike_with_either_backend(tree: Path, limits: Limits) -> None:
    assert RG is not None
    for pattern in ("**/*.py", "**/*", "*", "**/*.tmp", "src/**", "**/.*", "**/*.log", "**/*.txt"):
        assert glob(tree, None, limits, pattern=pattern) == glob(tree, RG, limits, pattern=pattern), pattern


def test_the_walk_is_ripgreps_walk(tree: Path) -> None:
    assert RG is not None
    for root in (tree, tree / "src", tree / "nested"):
        py = walk_python(root, frozenset({"node_modules", "__pycache__"}), 10_000)
        rg = asyncio.run(walk_ripgrep(RG, root, frozenset({"node_modules", "__pycache__"}), 10_000))
        assert py.files == sorted(rg.files), root


def test_what_the_shared_answer_holds(tree: Path) -> None:
    # The answer both give (above) is the right one, not the same mistake twice.
    out = grep(tree, None, Limits(), pattern="needle")
    rows, notes = out.split("\n\n")
    files = {line.split(":")[0] for line in rows.splitlines()}
    assert {"a.py", "keep.log", "build.log", "gen/kept.txt", "src/m.py", ".hidden/h.py",
            ".hiddenfile", "src/.dotted.py", "nested/inner.py", "ünï/çödé.py", "bin/late_nul.txt", "sub/out/o.py"} <= files
    # .rgignore outranks a deeper .gitignore's negation, as in ripgrep: src/deep/t.tmp stays ignored.
    assert not files & {"x.log", "excluded.txt", "out/o.py", "gen/g.py", "src/t.tmp", "src/deep/t.tmp", "src/deep/skip_me/s.py",
                        "node_modules/n.js", "src/__pycache__/c.py", "nested/notes.md", ".env", "keys/server.pem",
                        "config/.env.prod"}
    assert not any(f.startswith(("link", "far_link", "broken", "src/linked")) for f in files)  # links are not followed
    assert notes.splitlines() == ["3 secret files with matches not shown (permissions.secret_files); grep one by its "
                                  "path to be asked for it", "2 files skipped: 1 larger than 1 MiB, 1 binary"]
    assert glob(tree, None, Limits(), pattern="**/o.py") == "sub/out/o.py"  # `/out/` is anchored: only the top one


def test_the_quick_rejection_keeps_case_insensitive_matches_outside_ascii(tmp_path: Path) -> None:
    # A case-insensitive k, s or i also matches the Kelvin sign, the long s and the dotted and
    # dotless i: a file without an ASCII k, s or i can still match, so those letters are never
    # the bytes a file is ruled out by. `zq` is: no file without one holds a match.
    write(tmp_path, "folded.txt", "x \u212a\u0130\u017f\u017f y\nzq \u212a\u0131\u017f\u017f\n")
    write(tmp_path, "plain.txt", "no such word\n")
    limits = Limits()
    assert grep(tmp_path, None, limits, pattern="KISS", case_insensitive=True) == \
        "folded.txt:1:x \u212a\u0130\u017f\u017f y\nfolded.txt:2:zq \u212a\u0131\u017f\u017f"
    assert grep(tmp_path, None, limits, pattern="ZQ KISS", case_insensitive=True) == \
        "folded.txt:2:zq \u212a\u0131\u017f\u017f"
    assert grep(tmp_path, None, limits, pattern="zq kiss") == "no matches for literal 'zq kiss' in . (2 files searched)"
