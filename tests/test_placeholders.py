"""No edit silently drops code: a write_file, edit_file or apply_patch whose new text puts an
omission placeholder (`# ... rest of the file is the same ...`, `// (unchanged fields...)`,
`existing code here`) in place of lines it would drop is refused with those lines; the same words
in the old text and the new alike are the file's own and stay editable. End to end through the
fake server (the file on disk, what the model was sent), and as a property over random files."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, call
from nanohermes.tools import build_tools
from nanohermes.tools.artefacts import omission, placeholder

MODEL = ("from dataclasses import dataclass\n\n\n@dataclass\nclass User:\n    name: str\n    email: str\n"
         "    age: int\n\n\ndef greet(user: User) -> str:\n    return f\"hello {user.name}\"\n")


def results(server: FakeServer, index: int) -> list[str]:
    return [m["content"] for m in server.requests[index]["messages"] if m["role"] == "tool"]


@pytest.fixture
def model(workspace: Path) -> Path:
    (workspace / "model.py").write_text(MODEL)
    return workspace / "model.py"


def test_a_whole_file_write_keeping_only_a_placeholder_is_refused_with_the_lines(turn, server: FakeServer,
                                                                                 model: Path) -> None:
    content = ("from dataclasses import dataclass\n\n\n@dataclass\nclass User:\n    name: str\n    email: str\n"
               "    age: int\n    admin: bool = False\n\n# ... rest of the file is the same ...\n")
    server.add(Reply(tool_calls=(call("read_file", {"path": "model.py"}),)),
               Reply(tool_calls=(call("write_file", {"path": "model.py", "content": content}),)), Reply(text="refused"))
    r = turn("-p", "add admin", "--yes", server=server)
    assert r.code == 0, r.err
    assert model.read_text() == MODEL
    [refusal] = results(server, 2)[1:]
    said, *dropped, _ = refusal.split("\n")
    assert said.startswith("ERROR: content holds `# ... rest of the file is the same ...`, ") and said.endswith(
        " 2 lines of model.py that it would drop (lines 11-12):"), said
    assert dropped == ["11\tdef greet(user: User) -> str:", '12\t    return f"hello {user.name}"']


def test_an_edit_replacing_fields_with_an_unchanged_comment_is_refused(turn, server: FakeServer, model: Path) -> None:
    edit = {"path": "model.py", "old_string": "    name: str\n    email: str\n    age: int\n",
            "new_string": "    // (unchanged fields...)\n    admin: bool = False\n"}
    server.add(Reply(tool_calls=(call("read_file", {"path": "model.py"}),)),
               Reply(tool_calls=(call("edit_file", edit),)), Reply(text="refused"))
    r = turn("-p", "edit", "--yes", server=server)
    assert r.code == 0, r.err
    assert model.read_text() == MODEL
    [refusal] = results(server, 2)[1:]
    said, first = refusal.split("\n")[:2]
    assert said.startswith("ERROR: new_string holds `// (unchanged fields...)`, ") and " (lines 6-8):" in said, said
    assert first == "6\t    name: str"


@pytest.mark.parametrize("patch", [
    "*** Begin Patch\n*** Update File: model.py\n@@ class User:\n-    name: str\n-    email: str\n-    age: int\n"
    "+    # ... existing code ...\n+    admin: bool = False\n*** End Patch\n",
    "--- a/model.py\n+++ b/model.py\n@@ -5,4 +5,3 @@\n class User:\n-    name: str\n-    email: str\n-    age: int\n"
    "+    # ... existing code ...\n+    admin: bool = False\n",
], ids=["begin-patch", "unified"])
def test_a_patch_putting_a_placeholder_in_place_of_lines_is_refused(turn, server: FakeServer, model: Path,
                                                                    patch: str) -> None:
    server.add(Reply(tool_calls=(call("read_file", {"path": "model.py"}),)),
               Reply(tool_calls=(call("apply_patch", {"diff": patch}),)), Reply(text="refused"))
    r = turn("-p", "patch", "--yes", server=server)
    assert r.code == 0, r.err
    assert model.read_text() == MODEL
    [refusal] = results(server, 2)[1:]
    said, *dropped, rest = refusal.split("\n")
    assert said.startswith("ERROR: the patch's new text for model.py holds `# ... existing code ...`") and said.endswith(
        " (lines 6-8):"), said
    assert dropped == ["6\t    name: str", "7\t    email: str", "8\t    age: int"] and rest.startswith("No file was changed")


def test_a_file_that_really_holds_such_a_comment_stays_editable(turn, server: FakeServer, workspace: Path) -> None:
    text = "def f():\n    # ... existing code ...\n    return 1\n"
    (workspace / "f.py").write_text(text)
    edit = {"path": "f.py", "old_string": "    # ... existing code ...\n    return 1\n",
            "new_string": "    # ... existing code ...\n    return 2\n"}
    whole = "def f():\n    # ... existing code ...\n    return 3\n"
    server.add(Reply(tool_calls=(call("read_file", {"path": "f.py"}),)), Reply(tool_calls=(call("edit_file", edit),)),
               Reply(tool_calls=(call("write_file", {"path": "f.py", "content": whole}),)), Reply(text="ok"))
    r = turn("-p", "edit", "--yes", server=server)
    assert r.code == 0, r.err
    assert (workspace / "f.py").read_text() == whole
    assert results(server, 2)[-1].startswith("edited f.py")
    assert results(server, 3)[-1].startswith("overwrote f.py")


def test_a_new_file_and_an_insertion_lose_nothing_and_are_written(turn, server: FakeServer, model: Path,
                                                                  workspace: Path) -> None:
    insert = {"path": "model.py", "old_string": "    age: int\n", "new_string": "    age: int\n    # ... more later ...\n"}
    server.add(Reply(tool_calls=(call("write_file", {"path": "stub.py", "content": "def g():\n    # rest of code\n"}),
                                 call("read_file", {"path": "model.py"}))),
               Reply(tool_calls=(call("edit_file", insert),)), Reply(text="ok"))
    r = turn("-p", "go", "--yes", server=server)
    assert r.code == 0, r.err
    assert (workspace / "stub.py").read_text() == "def g():\n    # rest of code\n"
    assert "    age: int\n    # ... more later ...\n" in model.read_text()


@pytest.mark.parametrize("line", ["# ... rest of the file is the same ...", "// (unchanged fields...)",
                                  "... rest of code ...", "existing code here", "    // ...", "/* ... */",
                                  "<!-- ... -->", "{/* ... */}", "  # (rest of methods ...)", "// ... 3 more methods",
                                  "// other methods unchanged", "# ...snip...", "// keep the rest", "# the rest stays as is",
                                  "// and the rest", "# <rest of code>", "# etc.", "# keep existing"])
def test_placeholder_lines(line: str) -> None:
    assert placeholder(line)


@pytest.mark.parametrize("line", ["...", "    ...", "x = ...", "return ...", "# Loading...", 'print("...")',
                                  "# keep the cache warm", "# TODO: handle errors",
                                  "The rest of the guide is unchanged.", "    pass", "# REST endpoints", "<div>",
                                  "# is the rest ok?"])
def test_lines_that_are_not_placeholders(line: str) -> None:
    assert not placeholder(line)


# -- the rule as a property: random files and edits, through the real tools ---------------------

PLACEHOLDERS = ["# ... rest of the file is the same ...", "// (unchanged fields...)", "... rest of code ...",
                "existing code here", "// ...", "# ... existing code ...", "/* ... unchanged ... */", "// keep the rest",
                "# the rest stays as is"]
code_line = st.builds(lambda name, n, indent: f"{'    ' * indent}{name}_{n} = {n}",
                      st.sampled_from(["alpha", "beta", "gamma", "delta"]), st.integers(0, 999), st.integers(0, 2))
lines_of_code = st.lists(st.one_of(code_line, st.just("")), min_size=2, max_size=30).filter(
    lambda ls: sum(1 for ln in ls if ln) >= 1)


def run(ws: Path, name: str, **args: object) -> str:
    rt = Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"))
    calls = [ToolCall("r", "read_file", json.dumps({"path": args["path"]})), ToolCall("c", name, json.dumps(args))]
    return asyncio.run(rt.run_calls(calls))[1].content or ""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=lines_of_code, data=st.data())
def test_a_placeholder_standing_for_dropped_lines_is_refused(lines: list[str], data: st.DataObject) -> None:
    body = [i for i, ln in enumerate(lines) if ln]
    start = data.draw(st.sampled_from(body))
    end = data.draw(st.integers(start + 1, len(lines)))
    marker = data.draw(st.sampled_from(PLACEHOLDERS))
    new = [*lines[:start], marker, *lines[end:]]
    gone = [ln for ln in lines[start:end] if ln and ln.strip() not in {x.strip() for x in new}]
    old_text, new_text = "\n".join(lines) + "\n", "\n".join(new) + "\n"
    found = omission(old_text, new_text)
    assert (found is not None) == bool(gone)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "f.py").write_text(old_text)
        out = run(ws, "write_file", path="f.py", content=new_text)
        if gone:
            assert found is not None and [ln for _, ln in found.dropped] == gone
            assert out.startswith(f"ERROR: content holds `{marker.strip()}`")
            assert (ws / "f.py").read_text() == old_text
        else:
            assert out.startswith("overwrote f.py"), out
        if gone:
            old_string = "\n".join(lines[start:end]) + "\n"
            if old_text.count(old_string) == 1:
                out = run(ws, "edit_file", path="f.py", old_string=old_string, new_string=marker + "\n")
                assert out.startswith(f"ERROR: new_string holds `{marker.strip()}`"), out
                assert (ws / "f.py").read_text() == old_text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=lines_of_code, data=st.data())
def test_the_same_words_in_the_old_text_and_the_new_are_not_refused(lines: list[str], data: st.DataObject) -> None:
    marker = data.draw(st.sampled_from(PLACEHOLDERS))
    at = data.draw(st.integers(0, len(lines)))
    old = [*lines[:at], marker, *lines[at:]]
    # An edit elsewhere: one line of code changed, the placeholder line kept where it was.
    body = [i for i, ln in enumerate(old) if ln and ln != marker]
    k = data.draw(st.sampled_from(body))
    new = list(old)
    new[k] = new[k] + " + 1"
    old_text, new_text = "\n".join(old) + "\n", "\n".join(new) + "\n"
    assert omission(old_text, new_text) is None
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "f.py").write_text(old_text)
        assert run(ws, "write_file", path="f.py", content=new_text).startswith("overwrote f.py")
        assert (ws / "f.py").read_text() == new_text
        (ws / "f.py").write_text(old_text)
        lo, hi = min(k, at), max(k, at) + 1  # old_string takes in the placeholder line and the changed one
        old_string, new_string = "\n".join(old[lo:hi]) + "\n", "\n".join(new[lo:hi]) + "\n"
        if old_text.count(old_string) == 1:
            out = run(ws, "edit_file", path="f.py", old_string=old_string, new_string=new_string)
            assert out.startswith("edited f.py"), out
            assert (ws / "f.py").read_text() == new_text
