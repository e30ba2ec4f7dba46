"""What a model meant: context matching in tiers (edit_file and both patch formats), the
line-number prefix strip, the closest region on a miss, and the stale-file guard."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools
from nanohermes.tools.artefacts import all_numbered, strip_numbers
from nanohermes.tools.matching import Ambiguous, find_text, seek_lines


def runtime(ws: Path) -> Runtime:
    return Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"))


def call(rt: Runtime, name: str, **args: object) -> str:
    [out] = asyncio.run(rt.run_calls([ToolCall("c", name, json.dumps(args))]))
    return out.content or ""


def edit(rt: Runtime, path: str, old: str, new: str) -> str:
    return call(rt, "edit_file", path=path, old_string=old, new_string=new)


# -- the tiers, through edit_file --------------------------------------------------------

TIER_CASES = [
    # (file, old_string, new_string, expected file, tier named in the result or None for exact)
    ("a = 1\nb = 2\n", "b = 2", "b = 3", "a = 1\nb = 3\n", None),
    ("a = 1   \nb = 2\t\n", "a = 1\nb = 2\n", "a = 10\nb = 20\n", "a = 10\nb = 20\n", "trailing whitespace ignored"),
    ("if x:\n\tdo()\n\tdone()\n", "    do()\n    done()", "\tdo_it()\n\tdone()", "if x:\n\tdo_it()\n\tdone()\n",
     "leading and trailing whitespace ignored"),
    ("msg = \u201cwait \u2014 now\u201d\u00a0# note\n", 'msg = "wait - now" # note', "msg = 'go'", "msg = 'go'\n",
     "Unicode punctuation mapped to ASCII"),
]


@pytest.mark.parametrize("text,old,new,after,tier", TIER_CASES, ids=["exact", "trailing", "leading", "unicode"])
def test_each_tier_applies_a_unique_match_and_names_it(tmp_path: Path, text: str, old: str, new: str,
                                                      after: str, tier: str | None) -> None:
    (tmp_path / "f.py").write_text(text)
    rt = runtime(tmp_path)
    out = edit(rt, "f.py", old, new)
    assert out.startswith("edited f.py: replaced 1 occurrence"), out
    assert (out.endswith(f"(matched with {tier})") if tier else "matched with" not in out), out
    assert (tmp_path / "f.py").read_text() == after


AMBIGUOUS = [
    ("x = 1  \ny\nx = 1\t\n", "x = 1\n", "trailing whitespace ignored", "1, 3"),
    ("if a:\n    x = 1\nelse:\n\tx = 1\n", "\t\tx = 1", "leading and trailing whitespace ignored", "2, 4"),
    ("s = \u2018a\u2019\nt\ns = \u201ba\u2019\n", "s = 'a'", "Unicode punctuation mapped to ASCII", "1, 3"),
]


@pytest.mark.parametrize("text,old,tier,lines", AMBIGUOUS, ids=["trailing", "leading", "unicode"])
def test_an_ambiguous_loose_match_changes_nothing_and_names_the_places(tmp_path: Path, text: str, old: str,
                                                                       tier: str, lines: str) -> None:
    (tmp_path / "f.py").write_text(text)
    out = edit(runtime(tmp_path), "f.py", old, "z")
    assert out.startswith("ERROR: old_string is not in f.py ") and f" {tier} " in out, out
    assert f" 2 places (lines {lines})" in out
    assert (tmp_path / "f.py").read_text() == text


def test_an_exact_match_wins_over_a_loose_one(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("    x = 1\nx = 1  \n")
    out = edit(runtime(tmp_path), "f.py", "    x = 1", "    x = 2")
    assert out == "edited f.py: replaced 1 occurrence (+1 -1 lines)"
    assert (tmp_path / "f.py").read_text() == "    x = 2\nx = 1  \n"


def test_crlf_file_keeps_crlf_through_a_loose_match(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one  \r\ntwo\r\n")
    out = edit(runtime(tmp_path), "w.txt", "one\ntwo", "ONE\ntwo")
    assert out.endswith("(matched with trailing whitespace ignored)")
    assert (tmp_path / "w.txt").read_bytes() == b"ONE\r\ntwo\r\n"


# -- read_file's line-number prefix ------------------------------------------------------

def test_line_numbers_copied_from_read_file_are_stripped(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("".join(f"line {i}\n" for i in range(1, 13)))
    rt = runtime(tmp_path)
    shown = call(rt, "read_file", path="f.py", offset=9, limit=2)
    assert shown.startswith(" 9\tline 9\n10\tline 10")
    out = edit(rt, "f.py", " 9\tline 9\n10\tline 10", " 9\tline nine\n10\tline ten")
    assert out.startswith("edited f.py: replaced 1 occurrence (+2 -2 lines)"), out
    assert out.endswith(" stripped from old_string and new_string)")
    assert "line nine\nline ten\nline 11\n" in (tmp_path / "f.py").read_text()


def test_prefix_is_stripped_only_when_every_line_carries_it() -> None:
    assert all_numbered("1\ta\n2\tb\n") and strip_numbers("1\ta\n2\tb\n") == "a\nb\n"
    assert all_numbered("  7\tx") and strip_numbers("  7\tx") == "x"
    assert all_numbered("     1\u2192import os\n     2\u2192") and strip_numbers("     1\u2192import os") == "import os"
    assert not all_numbered("1\ta\nb")
    assert not all_numbered("no numbers")


def test_a_file_that_really_holds_numbered_lines_matches_exactly_first(tmp_path: Path) -> None:
    (tmp_path / "t.tsv").write_text("1\tone\n2\ttwo\n")
    out = edit(runtime(tmp_path), "t.tsv", "1\tone", "1\tuno")
    assert out == "edited t.tsv: replaced 1 occurrence (+1 -1 lines)"
    assert (tmp_path / "t.tsv").read_text() == "1\tuno\n2\ttwo\n"


# -- the closest region when nothing matches ---------------------------------------------

def test_a_miss_quotes_the_closest_region_with_line_numbers(tmp_path: Path) -> None:
    body = "".join(f"# filler {i}\n" for i in range(20)) + "def area(r):\n    return 3.14 * r * r\n\n\nprint(area(2))\n"
    (tmp_path / "geo.py").write_text(body)
    out = edit(runtime(tmp_path), "geo.py", "def area(r):\n    return 3.1416 * r * r\n", "x")
    first, region, *shown, _ = out.split("\n")
    assert first.startswith("ERROR: old_string not found in geo.py;") and region.endswith(" lines 19-25:")
    assert shown == ["19\t# filler 18", "20\t# filler 19", "21\tdef area(r):", "22\t    return 3.14 * r * r", "23\t",
                     "24\t", "25\tprint(area(2))"]
    assert (tmp_path / "geo.py").read_text() == body


# -- the tiers in patches ----------------------------------------------------------------

@pytest.mark.parametrize("tier,file,ctx", [
    ("trailing whitespace ignored", "a  \nb\n", "a"),
    ("leading and trailing whitespace ignored", "\ta\nb\n", "  a"),
    ("Unicode punctuation mapped to ASCII", "a \u2013 1\nb\n", "a - 1"),
])
def test_unified_diff_hunks_use_the_tiers(tmp_path: Path, tier: str, file: str, ctx: str) -> None:
    (tmp_path / "f.txt").write_text(file)
    out = call(runtime(tmp_path), "apply_patch", diff=f"--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n {ctx}\n-b\n+B\n")
    done, note = out.split("\n")
    assert done == "patched f.txt (1 hunk, +1 -1)" and note.startswith("hunk 1 of f.txt ") and note.endswith(f" {tier}")
    assert (tmp_path / "f.txt").read_text() == file.split("\n")[0] + "\nB\n"  # the file's own context line stays


def test_an_ambiguous_loose_hunk_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a  \nb\na\t\nb\n")
    out = call(runtime(tmp_path), "apply_patch", diff="--- a/f.txt\n+++ b/f.txt\n@@\n a\n-b\n+B\n")
    assert out.startswith("ERROR: f.txt: hunk 1 (@@) ") and " trailing whitespace ignored," in out, out
    assert " lines 1, 3;" in out
    assert (tmp_path / "f.txt").read_text() == "a  \nb\na\t\nb\n"


def test_seek_lines_prefers_exact_and_refuses_ambiguity() -> None:
    lines = ["x ", "y", "x", "y"]
    assert seek_lines(lines, ["x", "y"], 0) == (2, 0)
    assert seek_lines(["x ", "y"], ["x", "y"], 0) == (0, 1)
    with pytest.raises(Ambiguous) as e:
        seek_lines(["x ", "y", "x\t", "y"], ["x", "y"], 0)
    assert (e.value.tier, e.value.lines) == (1, [1, 3])
    assert seek_lines(lines, ["nope"], 0) is None


def test_find_text_takes_in_the_indentation_the_model_gave() -> None:
    spans, tier = find_text("def f():\n\treturn 1\n", "    return 1\n")  # type: ignore[misc]
    assert tier == 2 and [(s.start, s.end) for s in spans] == [(9, 19)]


# -- unified diffs: no silent no-ops ------------------------------------------------------

def test_a_context_line_that_lost_its_space_mid_hunk_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_text("a\nb\nc\n")
    out = call(runtime(tmp_path), "apply_patch", diff="--- a/b.py\n+++ b/b.py\n@@ -1,3 +1,3 @@\n a\nb\n-c\n+d\n")
    assert out.startswith("ERROR: line 5: `b` in hunk `@@ -1,3 +1,3 @@` "), out
    assert (tmp_path / "b.py").read_text() == "a\nb\nc\n"


def test_a_hunk_of_context_only_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_text("a\nb\n")
    out = call(runtime(tmp_path), "apply_patch", diff="--- a/b.py\n+++ b/b.py\n@@ -1,2 +1,2 @@\n a\n b\n")
    assert out.startswith("ERROR: line 3: hunk `@@ -1,2 +1,2 @@` ") and "only context" in out, out
    assert (tmp_path / "b.py").read_text() == "a\nb\n"


def test_diff_uN_between_folders_creates_the_new_file(tmp_path: Path) -> None:
    (tmp_path / "t7" / "docs").mkdir(parents=True)
    diff = ("diff -ruN orig/t7/docs/new.txt new/t7/docs/new.txt\n"
            "--- orig/t7/docs/new.txt\t1970-01-01 00:00:00.000000000 +0000\n"
            "+++ new/t7/docs/new.txt\t2024-05-01 10:00:00.000000000 +0200\n"
            "@@ -0,0 +1,2 @@\n+hello\n+world\n")
    out = call(runtime(tmp_path), "apply_patch", diff=diff)
    assert out == "created t7/docs/new.txt (1 hunk, +2 -0)"
    assert (tmp_path / "t7/docs/new.txt").read_text() == "hello\nworld\n"


# -- the stale-file guard ----------------------------------------------------------------

def test_write_file_over_an_unread_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the user's notes\n")
    rt = runtime(tmp_path)
    out = call(rt, "write_file", path="notes.txt", content="mine\n")
    assert out.startswith("ERROR: notes.txt already exists") and "not read it" in out, out
    assert (tmp_path / "notes.txt").read_text() == "the user's notes\n"
    call(rt, "read_file", path="notes.txt")
    assert call(rt, "write_file", path="notes.txt", content="mine\n") == "overwrote notes.txt (5 bytes, 1 line)"


def test_write_file_of_a_new_file_or_one_just_written_needs_no_read(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    assert call(rt, "write_file", path="n.txt", content="1\n") == "created n.txt (2 bytes, 1 line)"
    assert call(rt, "write_file", path="n.txt", content="2\n") == "overwrote n.txt (2 bytes, 1 line)"
    (tmp_path / "empty.txt").write_text("")
    assert call(rt, "write_file", path="empty.txt", content="x") == "overwrote empty.txt (1 bytes, 1 line)"


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_a_file_changed_on_disk_since_it_was_read_is_not_written(tmp_path: Path, tool: str) -> None:
    f = tmp_path / "a.txt"
    f.write_text("one\n")
    rt = runtime(tmp_path)
    call(rt, "read_file", path="a.txt")
    f.write_text("one\nthe user's line\n")
    args = {"content": "two\n"} if tool == "write_file" else {"old_string": "one", "new_string": "two"}
    out = call(rt, tool, path="a.txt", **args)
    assert out.startswith("ERROR: a.txt changed on disk ") and "nothing was written" in out, out
    assert f.read_text() == "one\nthe user's line\n"
    call(rt, "read_file", path="a.txt")
    assert not call(rt, tool, path="a.txt", **args).startswith("ERROR")


def test_a_write_changed_afterwards_is_stale_too(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    call(rt, "write_file", path="a.txt", content="mine\n")
    (tmp_path / "a.txt").write_text("theirs, same size\n")
    out = edit(rt, "a.txt", "theirs", "ours")
    assert out.startswith("ERROR: a.txt changed on disk "), out
    assert (tmp_path / "a.txt").read_text() == "theirs, same size\n"


def test_touching_a_file_without_changing_it_is_not_a_change(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    call(rt, "write_file", path="a.txt", content="same\n")
    os.utime(tmp_path / "a.txt", (1, 1))
    assert edit(rt, "a.txt", "same", "new") == "edited a.txt: replaced 1 occurrence (+1 -1 lines)"


def test_the_guard_follows_the_real_path_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("r\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    rt = runtime(tmp_path)
    call(rt, "read_file", path="link.txt")
    assert call(rt, "write_file", path="real.txt", content="w\n") == "overwrote real.txt (2 bytes, 1 line)"


def test_a_unified_hunk_that_replaces_a_line_by_itself_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_text("a\n")
    out = call(runtime(tmp_path), "apply_patch", diff="--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-a\n+a\n")
    assert out.startswith("ERROR: b.py: ") and "change nothing" in out, out


# -- indentation after a whitespace-blind match -------------------------------------------

def test_an_edit_written_without_the_class_indentation_keeps_the_file_s(tmp_path: Path) -> None:
    (tmp_path / "c.py").write_text("class A:\n    def f(self):\n        return 1\n")
    out = edit(runtime(tmp_path), "c.py", "def f(self):\n    return 1", "def f(self):\n    if self:\n        return 2")
    assert out.startswith("edited c.py: replaced 1 occurrence") and "(+2 -1 lines)" in out and "re-indented" in out
    assert (tmp_path / "c.py").read_text() == "class A:\n    def f(self):\n        if self:\n            return 2\n"


def test_a_patch_in_spaces_for_a_tabbed_file_adds_tabs(tmp_path: Path) -> None:
    (tmp_path / "m.go").write_text("func f() {\n\tif x {\n\t\treturn\n\t}\n}\n")
    patch = "*** Begin Patch\n*** Update File: m.go\n@@\n     if x {\n-        return\n+        log()\n+        return\n*** End Patch\n"
    out = call(runtime(tmp_path), "apply_patch", diff=patch)
    done, note = out.split("\n")
    assert done == "patched m.go (1 hunk, +1 -0)" and note.startswith("m.go: chunk 1 ") and "re-indented" in note
    assert (tmp_path / "m.go").read_text() == "func f() {\n\tif x {\n\t\tlog()\n\t\treturn\n\t}\n}\n"


def test_reindent_translates_only_a_consistent_difference() -> None:
    from nanohermes.tools.matching import reindent

    assert reindent([("    a", "a"), ("        b", "    b")], ["x", "    y"]) == ["    x", "        y"]  # a prefix left out
    assert reindent([("a", "  a")], ["  x", "    y"]) == ["x", "  y"]  # a prefix too many
    assert reindent([("\ta", "    a")], ["    x", "        y"]) == ["\tx", "\t\ty"]  # spaces for tabs
    assert reindent([("    a", "  a"), ("        b", "  b")], ["  x"]) == ["  x"]  # no one rule: left alone
    assert reindent([("a", "a")], ["  x"]) == ["  x"]  # nothing to translate


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 30), start=st.integers(0, 29), size=st.integers(1, 4),
       slip=st.sampled_from(["trailing", "dedent", "quotes", "numbers"]))
def test_a_slipped_old_string_edits_the_lines_the_model_meant(n: int, start: int, size: int, slip: str) -> None:
    lines = [f"    value_{i} = 'item {i}'" for i in range(n)]
    start = min(start, n - 1)
    window = lines[start:start + size]
    if slip == "trailing":
        old = "\n".join(ln + "  " for ln in window)
    elif slip == "dedent":
        old = "\n".join(ln[4:] for ln in window)
    elif slip == "quotes":
        old = "\n".join(ln.replace("'", "\u2019") for ln in window)
    else:
        old = "\n".join(f"{start + 1 + j:>3}\t{ln}" for j, ln in enumerate(window))
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "v.py").write_text("\n".join(lines) + "\n")
        out = edit(runtime(ws), "v.py", old, "    replaced = True" if slip != "dedent" else "replaced = True")
        assert out.startswith("edited v.py: replaced 1 occurrence"), out
        expected = [*lines[:start], "    replaced = True", *lines[start + size:]]
        assert (ws / "v.py").read_text() == "\n".join(expected) + "\n"
