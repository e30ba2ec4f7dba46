"""What real models send to the file tools, round two: artefacts in the text to write, near
misses of old_string, quotes of the other kind, and next steps that are right. Each case runs
through the real runtime and tools on real files, and is judged on the bytes on disk and on
the result text the model receives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.tools import build_tools


def runtime(ws: Path) -> Runtime:
    return Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"))


def call(rt: Runtime, name: str, **args: object) -> str:
    [out] = asyncio.run(rt.run_calls([ToolCall("c", name, json.dumps(args))]))
    return out.content or ""


def seen(ws: Path, name: str, text: str) -> Runtime:
    """A workspace file the model has read, and the runtime that read it."""
    (ws / name).parent.mkdir(parents=True, exist_ok=True)
    (ws / name).write_text(text)
    rt = runtime(ws)
    assert not call(rt, "read_file", path=name).startswith("ERROR")
    return rt


def edit(rt: Runtime, path: str, old: str, new: str) -> str:
    return call(rt, "edit_file", path=path, old_string=old, new_string=new)


APP = "import os\n\n\ndef main():\n    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n"


# -- line numbers copied from read_file into new_string ----------------------------------

def test_numbers_on_both_strings_as_read_file_shows_them_are_stripped_from_both(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    shown = call(rt, "read_file", path="app.py", offset=5, limit=2)
    old = "\n".join(shown.split("\n")[:2])  # copied as read_file printed them: "5\t    a = 1\n6\t    b = 2"
    out = edit(rt, "app.py", old, "5\t    a = 10\n6\t    b = 20")
    assert out.startswith("edited app.py: replaced 1 occurrence") and "old_string and new_string)" in out, out
    assert (workspace / "app.py").read_text() == APP.replace("a = 1\n", "a = 10\n").replace("b = 2", "b = 20")


def test_numbers_in_the_other_agents_arrow_form_only_on_new_string_are_stripped(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", "    b = 2\n    c = 3", "     6\u2192    b = 22\n     7\u2192    c = 33")
    assert out.startswith("edited app.py: replaced 1 occurrence") and out.endswith("stripped from new_string)"), out
    assert (workspace / "app.py").read_text() == APP.replace("b = 2", "b = 22").replace("c = 3", "c = 33")


def test_numbers_on_only_some_new_lines_after_a_numbered_old_string_go_line_by_line(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", "4\tdef main():\n5\t    a = 1", "4\tdef main(argv=None):\n    argv = argv or []\n5\t    a = 1")
    assert out.endswith("stripped from old_string and new_string)"), out
    assert (workspace / "app.py").read_text() == APP.replace("def main():\n", "def main(argv=None):\n    argv = argv or []\n")


def test_numbered_new_lines_in_a_file_with_such_lines_are_refused_as_a_guess(workspace: Path) -> None:
    table = "id\tname\n1\tada\n2\tbob\n"
    rt = seen(workspace, "people.tsv", table)
    out = edit(rt, "people.tsv", "bob", "3\tcy")
    assert out.startswith("ERROR: new_string's lines") and "people.tsv" in out, out
    assert (workspace / "people.tsv").read_text() == table


# -- a whole file inside a Markdown fence ------------------------------------------------

@pytest.mark.parametrize("content,path,expected,note", [
    ("```python\nimport sys\n\nprint(sys.argv)\n```", "tool.py", "import sys\n\nprint(sys.argv)\n", "```python"),
    ("src/api.ts\n```ts\nexport const x = 1;\n```\n\n", "src/api.ts", "export const x = 1;\n",
     "```ts and the line naming the file"),
    ("~~~\nSELECT 1;\n~~~\n", "q.sql", "SELECT 1;\n", "~~~"),
    ("```markdown\n# Title\n\nText.\n```\n", "README.md", "# Title\n\nText.\n", "```markdown"),
], ids=["python", "name-line-and-tag", "tildes", "markdown-in-markdown"])
def test_one_fence_around_a_whole_file_is_removed_and_named(workspace: Path, content: str, path: str, expected: str,
                                                           note: str) -> None:
    out = call(runtime(workspace), "write_file", path=path, content=content)
    assert out.startswith(f"created {path} ") and f"({note})" in out and "fence" in out, out
    assert (workspace / path).read_bytes() == expected.encode()


def test_a_markdown_file_that_is_a_code_block_is_written_as_it_is(workspace: Path) -> None:
    content = "```python\nprint('example')\n```\n"
    out = call(runtime(workspace), "write_file", path="EXAMPLE.md", content=content)
    assert out == "created EXAMPLE.md (31 bytes, 3 lines)"
    assert (workspace / "EXAMPLE.md").read_text() == content


def test_a_fence_holding_another_closing_fence_is_refused_as_a_guess(workspace: Path) -> None:
    content = "```python\nDOC = '''\n```\nnot code\n'''\n```\n"
    out = call(runtime(workspace), "write_file", path="doc.py", content=content)
    assert out.startswith("ERROR: nothing was written to doc.py") and "line 3 " in out, out
    assert not (workspace / "doc.py").exists()


# -- line breaks sent as literal \n ------------------------------------------------------

def test_a_file_whose_line_breaks_are_literal_escapes_is_decoded(workspace: Path) -> None:
    # A Qwen-style double encoding: the arguments' JSON held `\\n` and `\\"`.
    sent = 'import json\\n\\n\\ndef load(path):\\n    with open(path) as f:\\n        return json.load(f)\\n'
    out = call(runtime(workspace), "write_file", path="load.py", content=sent)
    assert out.startswith("created load.py (84 bytes, 6 lines)") and "decoded to 6 line breaks" in out, out
    assert (workspace / "load.py").read_text() == (
        "import json\n\n\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n")


def test_a_shell_script_with_escaped_quotes_and_line_breaks_is_decoded(workspace: Path) -> None:
    sent = '#!/bin/sh\\nset -e\\necho \\"building $1\\"\\nmake \\"$1\\"\\n'
    out = call(runtime(workspace), "write_file", path="build.sh", content=sent)
    assert "decoded to 4 line breaks" in out
    assert (workspace / "build.sh").read_text() == '#!/bin/sh\nset -e\necho "building $1"\nmake "$1"\n'


def test_a_one_liner_whose_escape_sits_in_a_string_is_refused_until_it_ends_with_a_line_break(workspace: Path) -> None:
    rt = runtime(workspace)
    out = call(rt, "write_file", path="hi.py", content='print("hello\\nworld")')
    assert out.startswith("ERROR: nothing was written to hi.py") and not (workspace / "hi.py").exists(), out
    out = call(rt, "write_file", path="hi.py", content='print("hello\\nworld")\n')
    assert out == "created hi.py (22 bytes, 1 line)"
    assert (workspace / "hi.py").read_bytes() == b'print("hello\\nworld")\n'


# -- near misses of old_string -----------------------------------------------------------

@pytest.mark.parametrize("old,new,expected", [
    ("\nimport os\n", "\nimport os\nimport sys\n", APP.replace("import os\n", "import os\nimport sys\n")),
    ("    \n    b = 2\n    c = 3", "    \n    b = 5\n    c = 6", APP.replace("b = 2", "b = 5").replace("c = 3", "c = 6")),
], ids=["before-the-first-line", "indented-blank"])
def test_a_spurious_blank_first_line_is_ignored(workspace: Path, old: str, new: str, expected: str) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", old, new)
    assert out.endswith("(blank lines at the start of old_string ignored)"), out
    assert (workspace / "app.py").read_text() == expected


def test_blank_lines_around_a_block_are_ignored_and_the_files_own_stay(workspace: Path) -> None:
    text = "class A:\n    pass\nclass B:\n    pass\n"
    rt = seen(workspace, "m.py", text)
    out = edit(rt, "m.py", "\n\nclass B:\n    pass\n\n\n", "\n\nclass B(A):\n    pass\n\n\n")
    assert out.endswith("(blank lines at the start and end of old_string ignored)"), out
    assert (workspace / "m.py").read_text() == "class A:\n    pass\nclass B(A):\n    pass\n"


def test_elision_lines_in_both_strings_keep_the_lines_in_between(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", "def main():\n    a = 1\n    # ... existing code ...\n    return a + b + c\n",
               "def main():\n    a = 100\n    # ... existing code ...\n    return a * b * c\n")
    assert out.startswith("edited app.py: replaced 1 occurrence (+2 -2 lines)") and out.endswith("(2 kept))"), out
    assert "`# ... existing code ...`" in out
    assert (workspace / "app.py").read_text() == (
        "import os\n\n\ndef main():\n    a = 100\n    b = 2\n    c = 3\n    return a * b * c\n")


def test_a_bare_ellipsis_stands_for_kept_lines_in_javascript_too(workspace: Path) -> None:
    js = "function render(items) {\n  const out = [];\n  for (const i of items) out.push(i);\n  return out;\n}\n"
    rt = seen(workspace, "r.js", js)
    out = edit(rt, "r.js", "function render(items) {\n  // ...\n  return out;\n}",
               "function render(items = []) {\n  // ...\n  return out.join('');\n}")
    assert "the lines in between stay (2 kept)" in out, out
    assert (workspace / "r.js").read_text() == (
        "function render(items = []) {\n  const out = [];\n  for (const i of items) out.push(i);\n"
        "  return out.join('');\n}\n")


def test_an_elision_only_in_new_string_is_refused(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", "    b = 2\n    c = 3\n", "    b = 2\n    # ... rest of the code ...\n")
    assert out.startswith("ERROR: new_string holds `# ... rest of the code ...`")
    assert (workspace / "app.py").read_text() == APP


@pytest.mark.parametrize("text,old,new,expected", [
    ("x = 1\ny = 2", "y = 2\n", "y = 3\n", "x = 1\ny = 3"),
    ("[tool]\nname = \"a\"", "name = \"a\"\n", "name = \"b\"\n", "[tool]\nname = \"b\""),
], ids=["python", "toml"])
def test_a_final_newline_the_file_does_not_have_is_ignored(workspace: Path, text: str, old: str, new: str,
                                                           expected: str) -> None:
    rt = seen(workspace, "f.txt", text)
    out = edit(rt, "f.txt", old, new)
    assert out.startswith("edited f.txt") and "final newline ignored" in out, out
    assert (workspace / "f.txt").read_bytes() == expected.encode()


@pytest.mark.parametrize("old,new,expected", [
    ("def main():\\n    a = 1", "def main():\\n    a = 7", APP.replace("a = 1", "a = 7")),
    ('import os\\n\\n\\ndef main():', 'import os\\nimport sys\\n\\n\\ndef main():', APP.replace("os\n", "os\nimport sys\n", 1)),
], ids=["newlines", "blank-lines"])
def test_over_escaped_strings_are_tried_unescaped(workspace: Path, old: str, new: str, expected: str) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", old, new)
    assert out.startswith("edited app.py") and "escaped twice" in out, out
    assert (workspace / "app.py").read_text() == expected


def test_over_escaped_quotes_are_tried_unescaped(workspace: Path) -> None:
    rt = seen(workspace, "greet.py", 'print("hello")\n')
    out = edit(rt, "greet.py", 'print(\\"hello\\")', 'print(\\"hello, world\\")')
    assert "escaped twice" in out
    assert (workspace / "greet.py").read_text() == 'print("hello, world")\n'


def test_an_over_escaped_miss_shows_the_closest_lines_of_the_file(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", "def main():\\n    a = 100", "x")
    assert out.startswith("ERROR: old_string not found in app.py")
    assert "lines 2-7:\n2\t\n3\t\n4\tdef main():\n5\t    a = 1\n" in out, out
    assert (workspace / "app.py").read_text() == APP


@pytest.mark.parametrize("old,new", [
    ("    a = 1\n    b = 2", "    a = 7\n    b = 2"),
    ("return a + b + c", "return sum((a, b, c))"),
], ids=["two-lines", "one-line"])
def test_an_edit_already_applied_is_answered_so_and_changes_nothing(workspace: Path, old: str, new: str) -> None:
    text = APP.replace(old, new)
    rt = seen(workspace, "app.py", text)
    mtime = (workspace / "app.py").stat().st_mtime_ns
    out = edit(rt, "app.py", old, new)
    assert out.startswith("already applied: ") and out.count("app.py") == 2, out
    assert (workspace / "app.py").read_text() == text and (workspace / "app.py").stat().st_mtime_ns == mtime


def test_a_miss_with_nothing_alike_still_shows_the_files_first_lines(workspace: Path) -> None:
    rt = seen(workspace, "app.py", APP)
    out = edit(rt, "app.py", "class Unrelated:\n    zzz = True", "x")
    assert out.startswith("ERROR: old_string not found in app.py"), out
    assert "lines 1-6:\n1\timport os\n2\t\n3\t\n4\tdef main():\n" in out, out


# -- quotes of the other kind -------------------------------------------------------------

@pytest.mark.parametrize("text,old,new,expected,kind", [
    ("print(\"ready\")\n", "print(\u201cready\u201d)", "print(\u201csteady\u201d)", "print(\"steady\")\n", "straight"),
    ("msg = 'it is done'\n", "msg = \u2018it is done\u2019", "msg = \u2018all done\u2019", "msg = 'all done'\n", "straight"),
    ("He said \u201cwait\u201d.\n", 'He said "wait".', 'He said "go on".', "He said \u201cgo on\u201d.\n", "curly"),
    ("It\u2019s here.\n", "It's here.", "It's gone.", "It\u2019s gone.\n", "curly"),
], ids=["code-straight", "single-straight", "prose-curly", "apostrophe-curly"])
def test_quotes_of_the_other_kind_match_and_the_new_text_takes_the_files(workspace: Path, text: str, old: str, new: str,
                                                                        expected: str, kind: str) -> None:
    rt = seen(workspace, "f.txt", text)
    out = edit(rt, "f.txt", old, new)
    assert out.startswith("edited f.txt") and f"quotes written {kind} " in out, out
    assert (workspace / "f.txt").read_text() == expected
    (workspace / "g.txt").write_text(text)
    assert not call(rt, "read_file", path="g.txt").startswith("ERROR")
    patch = f"*** Begin Patch\n*** Update File: g.txt\n@@\n-{old}\n+{new}\n*** End Patch\n"
    out = call(rt, "apply_patch", diff=patch)
    assert f"quotes written {kind} " in out, out
    assert (workspace / "g.txt").read_text() == expected


# -- next steps that are right ------------------------------------------------------------

def test_a_mistyped_path_with_a_namesake_elsewhere_is_asked_about(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "utils.py").write_text("def f():\n    return 1\n")
    rt = runtime(workspace)
    for out in (edit(rt, "utils.py", "return 1", "return 2"), call(rt, "read_file", path="utils.py")):
        assert out.startswith("ERROR: utils.py does not exist") and out.endswith("`src/utils.py`?"), out
    out = call(rt, "apply_patch", diff="*** Begin Patch\n*** Update File: utils.py\n@@\n-    return 1\n+    return 2\n"
                                        "*** End Patch\n")
    assert out.startswith("ERROR: utils.py does not exist") and "`src/utils.py`?" in out, out
    assert not (workspace / "utils.py").exists()
    assert (workspace / "src" / "utils.py").read_text() == "def f():\n    return 1\n"


def test_a_name_one_slip_away_in_the_same_folder_is_suggested(workspace: Path) -> None:
    (workspace / "config.yaml").write_text("debug: false\n")
    rt = runtime(workspace)
    for path, out in (("config.yml", call(rt, "read_file", path="config.yml")),
                      ("confg.yaml", edit(rt, "confg.yaml", "false", "true"))):
        assert out.startswith(f"ERROR: {path} does not exist") and out.endswith("`config.yaml`?"), out
    out = call(rt, "read_file", path="nothing_like_it.py")
    assert out.startswith("ERROR: nothing_like_it.py does not exist") and "did you mean" not in out, out


def test_the_namesake_walk_stops_at_grep_max_files(workspace: Path) -> None:
    for i in range(5):
        (workspace / f"d{i}").mkdir()
    (workspace / "d4" / "utils.py").write_text("x\n")
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=RecordingUI(), policy=Policy(mode="goal"),
                 limits=Limits(grep_max_files=3))
    out = call(rt, "read_file", path="utils.py")
    assert out.startswith("ERROR: utils.py does not exist") and "d4/utils.py" not in out, out
    out = call(runtime(workspace), "read_file", path="utils.py")
    assert out.startswith("ERROR: utils.py does not exist") and out.endswith("`d4/utils.py`?"), out


@pytest.mark.parametrize("tool,args,field,wanted,sent", [
    ("todo_write", {"todos": '[{"content": "write tests", "status": "pending"}]'}, "todos", "an array", "a string"),
    ("git_commit", {"message": "fix", "paths": "src/a.py"}, "paths", "an array", "a string"),
    ("read_file", {"path": ["a.txt"]}, "path", "a string", "an array"),
], ids=["json-array-in-a-string", "one-path-as-a-string", "a-list-for-a-string"])
def test_a_value_of_the_wrong_json_type_names_the_type_that_arrived(workspace: Path, tool: str, args: dict[str, object],
                                                                     field: str, wanted: str, sent: str) -> None:
    out = call(runtime(workspace), tool, **args)
    assert out.startswith(f"ERROR: {tool}: field `{field}` "), out
    assert f" {wanted}, not {sent}" in out, out
