"""What the file tools say: read_file, list_dir, write_file, edit_file and apply_patch, each
message once, with the scenario that makes it. The other tests assert decisions and state;
rewording a message changes one row here (see tests/wording_support.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from exec_support import call, make_runtime
from wording_support import said

from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.turn.session import Session
from nanohermes.testing import FakeServer, Raw, Reply, sse
from nanohermes.tools import build_tools
from nanohermes.tools.registry import conventions

Scenario = Callable[[Path], str]

APP = "import os\n\n\ndef main():\n    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n"


def seen(ws: Path, name: str, text: str) -> Runtime:
    """A workspace file the model has read, and the runtime that read it."""
    (ws / name).write_text(text)
    rt = make_runtime(ws)
    assert not call(rt, "read_file", path=name).startswith("ERROR")
    return rt


def edit(name: str, text: str, old: str, new: str) -> Scenario:
    return lambda ws: call(seen(ws, name, text), "edit_file", path=name, old_string=old, new_string=new)


def write(name: str, content: str) -> Scenario:
    return lambda ws: call(make_runtime(ws), "write_file", path=name, content=content)


def make_runtime_recording(ws: Path, name: str, text: str) -> Runtime:
    """A runtime whose session is recorded (it has a folder to keep replaced files in) that has
    read the workspace file `name`."""
    (ws / name).write_text(text)
    rt = Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"),
                 session=Session.new(ws, record=True), conventions=conventions())
    assert not call(rt, "read_file", path=name).startswith("ERROR")
    return rt


def patch(name: str, text: str, diff: str) -> Scenario:
    return lambda ws: call(seen(ws, name, text), "apply_patch", diff=diff)


def beside(made: str, tool: str, **args: object) -> Scenario:
    """A call naming a path that does not exist, `made` (a file) standing nearby."""
    def run(ws: Path) -> str:
        (ws / made).parent.mkdir(parents=True, exist_ok=True)
        (ws / made).write_text("def f():\n    return 1\n")
        return call(make_runtime(ws), tool, **args)
    return run


# -- the file tools: what they did with what a model sent ------------------------------------

FILES: list[tuple[str, Scenario, str]] = [
    ("numbers-stripped-from-both", edit("app.py", APP, "5\t    a = 1\n6\t    b = 2", "5\t    a = 10\n6\t    b = 20"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (read_file's line numbers stripped from old_string and "
     "new_string)"),
    ("numbers-stripped-from-new", edit("app.py", APP, "    b = 2\n    c = 3", "     6\u2192    b = 22\n     7\u2192    c = 33"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (line numbers copied from read_file stripped from new_string)"),
    ("numbers-that-may-be-content", edit("people.tsv", "id\tname\n1\tada\n2\tbob\n", "bob", "3\tcy"),
     "ERROR: new_string's lines all start with line numbers like read_file's (`12<TAB>`) and old_string's do not, "
     "but people.tsv has lines like that of its own, so they may be content: send new_string without the numbers (if "
     "they are content, include such a line in old_string too)"),
    ("fence-removed", write("tool.py", "```python\nimport sys\n```"),
     "created tool.py (11 bytes, 1 line) (the Markdown fence around the content (```python) removed)"),
    ("fence-with-a-fence-inside", write("doc.py", "```python\nDOC = '''\n```\nnot code\n'''\n```\n"),
     "ERROR: nothing was written to doc.py: content starts with a Markdown fence (```python) and ends with one, but "
     "line 3 closes a fence too, so which lines belong to the file cannot be told; send the file's content alone, "
     "without the fence"),
    ("escapes-decoded", write("load.py", "import json\\n\\nprint(json)\\n"),
     "created load.py (25 bytes, 3 lines) (its line breaks arrived as literal \\n escapes (JSON encoded twice): "
     "decoded to 3 line breaks)"),
    ("escapes-in-a-one-liner", write("hi.py", 'print("hello\\nworld")'),
     "ERROR: nothing was written to hi.py: content has no line breaks, only literal \\n escapes, and one of them "
     "sits inside \"quotes\", where it may be meant as written; send the content with real line breaks (a file "
     "meant as one line with these escapes: end it with a real line break)"),
    ("blank-first-line", edit("app.py", APP, "\nimport os\n", "\nimport os\nimport sys\n"),
     "edited app.py: replaced 1 occurrence (+1 -0 lines) (blank lines at the start of old_string ignored)"),
    ("elision", edit("app.py", APP, "def main():\n    a = 1\n    # ... existing code ...\n    return a + b + c\n",
                     "def main():\n    a = 100\n    # ... existing code ...\n    return a * b * c\n"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (the elision line `# ... existing code ...` in old_string "
     "and new_string read as: the lines in between stay (2 kept))"),
    ("elision-only-in-new", edit("app.py", APP, "    b = 2\n    c = 3\n", "    b = 2\n    # ... rest of the code ...\n"),
     "ERROR: new_string holds `# ... rest of the code ...`, a line standing for lines left out, in place of 1 line "
     "of app.py that it would drop (line 7):\n7\t    c = 3\nNothing was written: write those lines out in "
     "new_string, or make old_string smaller so that it leaves them out (a line standing for kept lines works only "
     "where old_string has the same line)"),
    ("final-newline", edit("f.txt", "x = 1\ny = 2", "y = 2\n", "y = 3\n"),
     "edited f.txt: replaced 1 occurrence (+1 -1 lines) (old_string's final newline ignored: the file's last line "
     "has none)"),
    ("escaped-twice", edit("app.py", APP, "def main():\\n    a = 1", "def main():\\n    a = 7"),
     "edited app.py: replaced 1 occurrence (+1 -1 lines) (old_string and new_string were escaped twice (literal \\n "
     "or \\\"): read unescaped)"),
    ("already-applied", edit("app.py", APP, "return a - b", "return a + b + c"),
     "already applied: old_string is not in app.py but new_string is (line 8); nothing changed in app.py"),
    ("other-quotes", edit("f.txt", "print(\"ready\")\n", "print(\u201cready\u201d)", "print(\u201csteady\u201d)"),
     "edited f.txt: replaced 1 occurrence (+1 -1 lines) (matched with Unicode punctuation mapped to ASCII; "
     "new_string's quotes written straight like the file's)"),
    ("namesake-elsewhere", beside("src/utils.py", "read_file", path="utils.py"),
     "ERROR: utils.py does not exist; did you mean `src/utils.py`?"),
    ("namesake-patch", beside("src/utils.py", "apply_patch",
                              diff="*** Begin Patch\n*** Update File: utils.py\n@@\n-    return 1\n+    return 2\n"
                                   "*** End Patch\n"),
     "ERROR: utils.py does not exist (did you mean `src/utils.py`?), so it cannot be updated (patch line 2); no file "
     "was changed. Check the path (relative to the workspace), or add it with `*** Add File:`"),
    ("no-namesake", beside("src/utils.py", "read_file", path="nothing_like_it.py"),
     "ERROR: nothing_like_it.py does not exist; check the path with list_dir or glob"),
    ("binary", lambda ws: (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00" * 4) and call(
        make_runtime(ws), "read_file", path="logo.png"),
     "ERROR: logo.png looks like a binary file (36 bytes); read_file shows text files only"),
    ("offset-past-the-end", lambda ws: call(seen(ws, "f.txt", "a\nb\n"), "read_file", path="f.txt", offset=5),
     "ERROR: offset 5 is past the end of f.txt (2 lines); use an offset from 1 to 2"),
    ("list-a-file", lambda ws: call(seen(ws, "f", "x"), "list_dir", path="f"),
     "ERROR: f is not a directory; use read_file to read it"),
    ("list-nothing", lambda ws: call(make_runtime(ws), "list_dir", path="no"),
     "ERROR: no does not exist; list the parent directory to see what is there"),
    ("write-a-folder", lambda ws: (ws / "d").mkdir() or call(make_runtime(ws), "write_file", path="d", content="x"),
     "ERROR: d is a directory; give the path of a file inside it"),
    ("write-under-a-file", lambda ws: call(seen(ws, "file", ""), "write_file", path="file/x.txt", content="x"),
     "ERROR: cannot write file/x.txt: file is a file, not a directory; choose another path"),
    ("write-unread", lambda ws: (ws / "notes.txt").write_text("old") and call(make_runtime(ws), "write_file",
                                                                              path="notes.txt", content="new"),
     "ERROR: notes.txt already exists and you have not read it in this session; read it first with read_file (then "
     "write it, or change it with edit_file)"),
    ("occurs-3-times", edit("a.py", "x = 1\nx = 1\ny = 2\nx = 1\n", "x = 1", "x = 2"),
     "ERROR: old_string occurs 3 times in a.py (lines 1, 2, 4); pass replace_all=true or add context to make it "
     "unique"),
    ("not-found", edit("a.py", "x = 1\ny = 2\n", "w = 0", "w = 1"),
     "ERROR: old_string not found in a.py; read the file and match it exactly, including whitespace (also tried: "
     "trailing whitespace ignored, leading and trailing whitespace ignored, Unicode punctuation mapped to ASCII, "
     "blank lines at its ends, escapes decoded once)\nNothing in the file is alike; it begins, lines 1-2:\n"
     "1\tx = 1\n2\ty = 2\nCopy old_string from these lines (without the line numbers) and retry."),
    ("re-indented", edit("a.py", "if x:\n    z = 3\n", "\tz = 3", "\tz = 4"),
     "edited a.py: replaced 1 occurrence (+1 -1 lines) (matched with leading and trailing whitespace ignored; "
     "new_string re-indented like the file)"),
    ("identical", edit("a.py", "y = 2\n", "y", "y"),
     "ERROR: old_string and new_string are identical; nothing would change"),
    ("edit-nothing", lambda ws: call(make_runtime(ws), "edit_file", path="new.py", old_string="a", new_string="b"),
     "ERROR: new.py does not exist; use write_file to create it"),
    ("not-utf8", lambda ws: (ws / "l1.txt").write_bytes("caf\xe9 = 1\n".encode("latin-1")) and call(
        make_runtime(ws), "edit_file", path="l1.txt", old_string="= 1", new_string="= \xe9"),
     "ERROR: l1.txt is not UTF-8, and edit_file keeps its bytes as they are; new_string must be ASCII here (or "
     "rewrite the file with write_file)"),
    ("closest-region", edit("app.py", APP, "def main():\n    a = 100\n    b = 2\n", "x"),
     "ERROR: old_string not found in app.py; read the file and match it exactly, including whitespace (also tried: "
     "trailing whitespace ignored, leading and trailing whitespace ignored, Unicode punctuation mapped to ASCII, "
     "blank lines at its ends, escapes decoded once)\nThe closest region of the file, lines 2-8:\n2\t\n3\t\n"
     "4\tdef main():\n5\t    a = 1\n6\t    b = 2\n7\t    c = 3\n8\t    return a + b + c\nCopy old_string from these "
     "lines (without the line numbers) and retry."),
    ("loose-match-ambiguous", edit("f.py", "x = 1  \ny\nx = 1\t\n", "x = 1\n", "z"),
     "ERROR: old_string is not in f.py as written; with trailing whitespace ignored it matches 2 places (lines 1, 3), "
     "and a loose match must be unique: copy old_string exactly from the file, or add context"),
    ("changed-on-disk", lambda ws: (lambda rt: (ws / "a.txt").write_text("b\n") and call(
        rt, "write_file", path="a.txt", content="c\n"))(seen(ws, "a.txt", "a\n")),
     "ERROR: a.txt changed on disk since you last read or wrote it (someone or a command changed it); nothing was "
     "written. Read it again with read_file and redo the change on its current content"),
    ("hunk-tier", patch("f.txt", "a  \nb\n", "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"),
     "patched f.txt (1 hunk, +1 -1)\nhunk 1 of f.txt (@@ -1,2 +1,2 @@) matched with trailing whitespace ignored"),
    ("hunk-ambiguous", patch("f.txt", "a  \nb\na\t\nb\n", "--- a/f.txt\n+++ b/f.txt\n@@\n a\n-b\n+B\n"),
     "ERROR: f.txt: hunk 1 (@@) matches only with trailing whitespace ignored, and then at lines 1, 3; no file was "
     "changed. Copy the context exactly from the file, or add lines to make it unique"),
    ("hunk-line-without-prefix", patch("b.py", "a\nb\nc\n", "--- a/b.py\n+++ b/b.py\n@@ -1,3 +1,3 @@\n a\nb\n-c\n+d\n"),
     "ERROR: line 5: `b` in hunk `@@ -1,3 +1,3 @@` is neither context (a leading space), a removal (-) nor an "
     "addition (+); give every hunk line its prefix (a context line keeps its leading space)"),
    ("hunk-of-context-only", patch("b.py", "a\nb\n", "--- a/b.py\n+++ b/b.py\n@@ -1,2 +1,2 @@\n a\n b\n"),
     "ERROR: line 3: hunk `@@ -1,2 +1,2 @@` has only context lines and would change nothing; mark the lines to "
     "remove with - and the lines to add with +"),
    ("patch-changes-nothing", patch("b.py", "a\n", "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-a\n+a\n"),
     "ERROR: b.py: the hunks' - and + lines are the same, so the patch would change nothing; no file was changed. "
     "Put the new text on the + lines"),
    ("chunk-re-indented", patch("m.go", "func f() {\n\tif x {\n\t\treturn\n\t}\n}\n",
                                "*** Begin Patch\n*** Update File: m.go\n@@\n     if x {\n-        return\n"
                                "+        log()\n+        return\n*** End Patch\n"),
     "patched m.go (1 hunk, +1 -0)\nm.go: chunk 1 matched with leading and trailing whitespace ignored, its + lines "
     "re-indented like the file"),
    ("no-matches", lambda ws: (ws / "src").mkdir() or call(make_runtime(ws), "grep", pattern="nope", path="src",
                                                          include="*.py", case_insensitive=True),
     "no matches for literal 'nope' in src (0 files searched; include *.py; case-insensitive)"),
    ("no-files-match", lambda ws: (ws / "src").mkdir() or call(make_runtime(ws), "glob", pattern="*.rs", path="src"),
     "no files match '*.rs' under src (0 files walked)"),
    ("secret-matches-hidden", lambda ws: (ws / ".env").write_text("TOKEN=1\n") and call(make_runtime(ws), "grep",
                                                                                       pattern="TOKEN"),
     "no matches for literal 'TOKEN' in . (1 file searched)\n1 secret file with matches not shown "
     "(permissions.secret_files); grep one by its path to be asked for it"),
    ("patch-through-the-shell", lambda ws: call(make_runtime_recording(ws, "f.txt", "one\n"), "run_command", command=(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+two\n*** End Patch\nEOF\n")),
     "patched f.txt (1 hunk, +1 -1)\n(this command was run as the apply_patch tool: a patch sent through the shell is "
     "applied like one sent to apply_patch, which takes the same text)"),
    ("moved-onto-unread", lambda ws: (ws / "b.txt").write_text("old\n") and call(
        make_runtime_recording(ws, "a.txt", "x\n"), "apply_patch",
        diff="*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch\n"),
     "renamed a.txt -> b.txt (1 hunk, +1 -1)\nb.txt existed and was replaced by the moved file\nb.txt existed and you "
     "had not read it; it was replaced, and its old content is kept in {any}/replaced/{any}-b.txt"),
    ("literal-looks-like-a-regex", lambda ws: call(seen(ws, "a.py", "x\n"), "grep", pattern="TODO\\|FIXME"),
     "no matches for literal 'TODO\\\\|FIXME' in . (1 file searched); it looks like a regular expression: set "
     "regex=true to search it as one"),
    ("todo-saved", lambda ws: call(make_runtime(ws), "todo_write", todos=[
        {"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"},
        {"content": "c", "status": "pending"}]),
     "Todo list saved (3 items: 1 completed, 1 in progress, 1 pending):\n[x] 1. a\n[~] 2. b\n[ ] 3. c"),
    ("todo-none", lambda ws: call(make_runtime(ws), "todo_read"), "No todo list yet; create one with todo_write."),
    ("todo-two-in-progress", lambda ws: call(make_runtime(ws), "todo_write", todos=[
        {"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]).split("\n\n")[-1],
     "warning: 2 items are in_progress (1, 2); keep exactly one in progress and finish it before starting the next"),
    ("todo-empty-step", lambda ws: call(make_runtime(ws), "todo_write", todos=[{"content": " ", "status": "pending"}]),
     "ERROR: todo_write: todo content must not be empty; describe the step"),
    ("todo-bad-status", lambda ws: call(make_runtime(ws), "todo_write", todos=[{"content": "a", "status": "done"}]),
     "ERROR: todo_write: field `todos.0.status`: Input should be 'pending', 'in_progress' or 'completed'"),
    ("unknown-field", lambda ws: call(make_runtime(ws), "read_file", path="a", bogus=1),
     "ERROR: read_file: unknown field `bogus`"),
    ("not-a-begin-patch", patch("app.py", APP, "** Begin Patch **\nUpdate app.py: b = 3\n** End Patch **\n"),
     "ERROR: no file sections found: `** Begin Patch **` looks like the `*** Begin Patch` format's first line but is "
     "not it (a unified diff needs `--- a/path` and `+++ b/path` lines, then `@@` hunks; the other format starts with "
     "a line `*** Begin Patch` and ends with `*** End Patch`)"),
    ("numbers-with-colons", edit("app.py", APP, "5:     a = 1\n6:     b = 2", "5:     a = 10\n6:     b = 20"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (line numbers like `12: ` stripped from old_string and "
     "new_string)"),
    ("placeholder-in-content", lambda ws: call(seen(ws, "app.py", APP), "write_file", path="app.py",
                                               content="import os\n\n\ndef main():\n    # ... rest of the code ...\n"),
     "ERROR: content holds `# ... rest of the code ...`, a line standing for lines left out, in place of 4 lines of "
     "app.py that it would drop (lines 5-8):\n5\t    a = 1\n6\t    b = 2\n7\t    c = 3\n8\t    return a + b + c\n"
     "Nothing was written: send the whole file in content, every line you mean to keep written out, or change only "
     "part of it with edit_file or apply_patch"),
    ("placeholder-in-a-patch", patch("app.py", APP, "*** Begin Patch\n*** Update File: app.py\n@@\n def main():\n"
                                                    "-    a = 1\n-    b = 2\n-    c = 3\n+    # ... existing code ...\n"
                                                    "*** End Patch\n"),
     "ERROR: the patch's new text for app.py holds `# ... existing code ...`, a line standing for lines left out, in "
     "place of 3 lines of app.py that it would drop (lines 5-7):\n5\t    a = 1\n6\t    b = 2\n7\t    c = 3\nNo file "
     "was changed: put those lines in the patch as they are (as context or + lines), or patch a smaller part that "
     "leaves them out"),
    ("array-in-a-string", lambda ws: call(make_runtime(ws), "todo_write", todos='[{"content": "x", "status": "pending"}]'),
     "ERROR: todo_write: field `todos` must be an array, not a string (a JSON array sent inside a string: send the "
     "array itself, not quoted)"),
    ("wrong-type", lambda ws: call(make_runtime(ws), "read_file", path=["a.txt"]),
     "ERROR: read_file: field `path` must be a string, not an array"),
]


@pytest.mark.parametrize("scenario,text", [(s, t) for _, s, t in FILES], ids=[i for i, _, _ in FILES])
def test_the_file_tools_say(workspace: Path, scenario: Scenario, text: str) -> None:
    out = scenario(workspace)
    assert said(out, text), out


def test_a_call_cut_off_at_the_output_limit_says(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    args = '{"path": "big.py", "content": "import os'
    server.add(Raw(body=sse(
        chunk({"tool_calls": [{"index": 0, "id": "w1", "type": "function", "function": {"name": "write_file",
                                                                                     "arguments": args}}]}),
        chunk({}, "length"))), Reply(text="split"))
    turn("-p", "write it", "--yes", server=server)
    [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert result == (
        f"ERROR: this write_file call was cut off at the output token limit (finish_reason length) after {len(args)} "
        "chars of arguments, so it did not run. Do not send it again as it was: split the content over several calls "
        "(write_file with the first part, then add the rest with edit_file), each well under the limit")


def test_arguments_that_are_not_json_say(workspace: Path) -> None:
    [res] = asyncio.run(make_runtime(workspace).run_calls([ToolCall("c", "write_file", '{"path": "a", "content": "x')]))
    assert res.content == ("ERROR: arguments for write_file are not valid JSON (Unterminated string starting at: char "
                           "25); the arguments must be one JSON object, e.g. {\"path\": \"a.txt\"}. Received: "
                           "'{\"path\": \"a\", \"content\": \"x'")


def test_arguments_that_are_no_object_say(workspace: Path) -> None:
    [res] = asyncio.run(make_runtime(workspace).run_calls([ToolCall("c", "read_file", "[1]")]))
    assert res.content == "ERROR: arguments for read_file must be a JSON object, got list"


def test_a_tool_that_crashes_says(workspace: Path) -> None:
    from test_runtime import Crashy

    rt = Runtime(tools=[Crashy()], config=Config(), workspace=workspace, ui=RecordingUI(), policy=Policy(mode="goal"))
    assert call(rt, "crashy") == "ERROR: crashy failed unexpectedly: RuntimeError: boom"
