"""An edit whose text matched the file only with typographic punctuation read as ASCII keeps the
file's typography (quotes, dashes, ellipses, no-break spaces) wherever it leaves the text as it
was; what the model writes anew stays as sent. Through the real command line and the fake server."""

from __future__ import annotations

from pathlib import Path

import pytest

from nanohermes.testing import FakeServer, Reply, call

PROSE = "Release notes \u2014 He said \u201cwait \u2013 now\u201d\u2026 and\u00a0left.\n"


def results(server: FakeServer, index: int) -> list[str]:
    return [m["content"] for m in server.requests[index]["messages"] if m["role"] == "tool"]


def run(turn, server: FakeServer, tool: str, args: dict[str, object]) -> str:  # type: ignore[no-untyped-def]
    server.add(Reply(tool_calls=(call("read_file", {"path": "notes.md"}),)), Reply(tool_calls=(call(tool, args),)),
               Reply(text="done"))
    r = turn("-p", "edit", "--yes", server=server)
    assert r.code == 0, r.err
    return results(server, 2)[-1]


@pytest.fixture
def notes(workspace: Path) -> Path:
    (workspace / "notes.md").write_text(PROSE, encoding="utf-8")
    return workspace / "notes.md"


def test_an_ascii_edit_keeps_the_files_quotes_dashes_ellipsis_and_no_break_space(turn, server: FakeServer,
                                                                                  notes: Path) -> None:
    out = run(turn, server, "edit_file", {"path": "notes.md",
                                          "old_string": 'He said "wait - now"... and left.',
                                          "new_string": 'He said "wait - now"... and left - quickly.'})
    assert notes.read_text(encoding="utf-8") == (
        "Release notes \u2014 He said \u201cwait \u2013 now\u201d\u2026 and\u00a0left - quickly.\n")
    assert out.startswith("edited notes.md: replaced 1 occurrence")
    assert "matched with Unicode punctuation mapped to ASCII" in out
    assert "the file's typographic punctuation (\u2013 \u2026 no-break spaces) kept where new_string leaves it" in out


def test_new_words_between_kept_punctuation_take_the_files_quotes(turn, server: FakeServer, notes: Path) -> None:
    run(turn, server, "edit_file", {"path": "notes.md", "old_string": '"wait - now"...',
                                    "new_string": '"hold on - now"...'})
    assert notes.read_text(encoding="utf-8") == PROSE.replace("wait", "hold on")


def test_an_ellipsis_written_as_three_dots_matches_and_stays_one_char(turn, server: FakeServer,
                                                                      workspace: Path) -> None:
    (workspace / "notes.md").write_text("Loading\u2026\nDone.\n", encoding="utf-8")
    out = run(turn, server, "edit_file", {"path": "notes.md", "old_string": "Loading...", "new_string": "Loading... please wait"})
    assert (workspace / "notes.md").read_text(encoding="utf-8") == "Loading\u2026 please wait\nDone.\n"
    assert "(\u2026)" in out


def test_a_file_mixing_both_quotes_keeps_each_where_the_edit_leaves_it(turn, server: FakeServer,
                                                                       workspace: Path) -> None:
    (workspace / "notes.md").write_text("title = \"a\" \u2014 \u201cb\u201d\n", encoding="utf-8")
    run(turn, server, "edit_file", {"path": "notes.md", "old_string": 'title = "a" - "b"', "new_string": 'title = "a" - "c"'})
    assert (workspace / "notes.md").read_text(encoding="utf-8") == "title = \"a\" \u2014 \u201cc\u201d\n"


@pytest.mark.parametrize("patch", [
    "--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-Release notes - He said \"wait - now\"... and left.\n"
    "+Release notes - He said \"wait - now\"... and ran.\n",
    "*** Begin Patch\n*** Update File: notes.md\n@@\n-Release notes - He said \"wait - now\"... and left.\n"
    "+Release notes - He said \"wait - now\"... and ran.\n*** End Patch\n",
], ids=["unified", "begin-patch"])
def test_a_patch_matched_through_ascii_keeps_the_typography(turn, server: FakeServer, notes: Path, patch: str) -> None:
    out = run(turn, server, "apply_patch", {"diff": patch})
    assert notes.read_text(encoding="utf-8") == PROSE.replace("left.", "ran.")
    assert "the file's typographic punctuation (\u2014 \u2013 \u2026 no-break spaces) kept where they leave it" in out
