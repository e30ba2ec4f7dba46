"""The one path-glob engine: what its two dialects share and where they differ."""

import re

import pytest

from nanohermes.guard.pathglob import glob_regex
from nanohermes.guard.permissions import match_path
from nanohermes.tools import ToolError
from nanohermes.tools.search import compile_glob

# Both the glob tool and permission rules read these the same way.
SHARED = [
    ("src/*", "src/a.py", True), ("src/*", "src/a/b.py", False), ("?.py", "a.py", True), ("?", "a/b", False),
    ("**/*.md", "README.md", True), ("**/*.md", "docs/x/y.md", True), ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True), ("a/**/**/b", "a/x/b", True), ("docs/[ab].md", "docs/a.md", True),
    ("docs/[!ab].md", "docs/a.md", False), ("docs/[^ab].md", "docs/c.md", True), ("a[/]b", "a/b", False),
    ("a[!x]b", "a/b", False), ("*.py", ".hidden.py", True), ("a[bc", "a[bc", True), ("src/**", "src/a/b", True),
    ("**/x", "/abs/x", True),
]


@pytest.mark.parametrize(("pattern", "path", "hit"), SHARED)
def test_both_dialects_agree(pattern: str, path: str, hit: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(path)) is hit
    assert bool(glob_regex(pattern, rule=True).fullmatch(path)) is hit


@pytest.mark.parametrize(("pattern", "path", "as_glob", "as_rule"), [
    ("src/**", "src", False, True),  # a rule for a folder covers the folder itself
    ("src**", "src/a/b", False, True),  # in a rule, `**` crosses folders wherever it stands
    ("a\\*", "a*", True, False),  # the glob tool escapes with a backslash ...
    ("a\\*", "a\\b", False, True),  # ... a rule reads it as a character
])
def test_dialects_differ_only_where_documented(pattern: str, path: str, as_glob: bool, as_rule: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(path)) is as_glob
    assert bool(glob_regex(pattern, rule=True).fullmatch(path)) is as_rule


def test_the_glob_tool_and_rules_use_the_engine() -> None:
    assert compile_glob("./src/**/*.py", 256).pattern == glob_regex("src/**/*.py").pattern
    assert match_path("src/**", "src") and not compile_glob("src/**", 256).fullmatch("src")
    assert match_path("*.py", "deep/er/a.py")  # a bare name in a rule: any depth


def test_a_bad_class_raises() -> None:
    with pytest.raises(re.error):
        glob_regex("[z-a]")
    with pytest.raises(ToolError, match=r"^invalid glob '\[z-a\]': bad character range z-a"):
        compile_glob("[z-a]", 256)
