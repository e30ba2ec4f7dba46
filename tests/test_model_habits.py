"""GPT and Codex habits, calls cut off at the output limit, and specs without traps: what models
trained on other agents send, through the real runtime and the real `nanohermes -p` with the
loopback server, judged on the files on disk and the result text the model receives."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.turn.session import Session
from nanohermes.testing import FakeServer, Raw, Reply, call, sse, tool_reply
from nanohermes.tools import build_tools
from nanohermes.tools.registry import conventions


def runtime(ws: Path, *, record: bool = False, **limits: Any) -> Runtime:
    return Runtime(tools=build_tools(), config=Config(), workspace=ws, ui=RecordingUI(), policy=Policy(mode="goal"),
                   session=Session.new(ws, record=record), limits=Limits(**limits), conventions=conventions())


def run(rt: Runtime, name: str, **args: object) -> str:
    [out] = asyncio.run(rt.run_calls([ToolCall("c", name, json.dumps(args))]))
    return out.content or ""


def results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# -- a patch sent through the shell -------------------------------------------------------

HEREDOC = """apply_patch <<'EOF'
*** Begin Patch
*** Update File: src/app.py
@@ def main():
-    return 1
+    return 2
*** End Patch
EOF
"""


def test_an_apply_patch_heredoc_through_run_command_is_applied_as_an_edit(turn, server: FakeServer,
                                                                          workspace: Path) -> None:
    # accept-edits: run_command would be asked (and refused without a terminal); an edit is not.
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def main():\n    return 1\n")
    server.add(tool_reply(call("read_file", {"path": "src/app.py"}, id="r")),
               tool_reply(call("run_command", {"command": HEREDOC}, id="p")), Reply(text="patched"))
    r = turn("-p", "change it", "--mode", "accept-edits", server=server)
    assert (r.code, r.out) == (0, "patched\n"), r.err
    result = results(server.requests[2])["p"]
    done, note = result.split("\n", 1)
    assert done == "patched src/app.py (1 hunk, +1 -1)" and "the apply_patch tool" in note, result
    assert (workspace / "src" / "app.py").read_text() == "def main():\n    return 2\n"
    # The model's own message keeps the call as it was sent.
    sent = [c for m in server.requests[2]["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert sent[-1]["function"]["name"] == "run_command"


def test_a_cd_and_applypatch_with_a_quoted_delimiter_reads_paths_from_that_folder(workspace: Path) -> None:
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "m.py").write_text("x = 1\n")
    rt = runtime(workspace)
    assert not run(rt, "read_file", path="pkg/m.py").startswith("ERROR")
    command = ('cd pkg && applypatch << "PATCH"\n*** Begin Patch\n*** Update File: m.py\n@@\n-x = 1\n+x = 2\n'
               "*** Add File: n.py\n+y = 1\n*** End Patch\nPATCH")
    out = run(rt, "run_command", command=command)
    assert out.split("\n")[:2] == ["patched pkg/m.py (1 hunk, +1 -1)", "created pkg/n.py"], out
    assert "the apply_patch tool" in out.split("\n")[2]
    assert (workspace / "pkg" / "m.py").read_text() == "x = 2\n" and (workspace / "pkg" / "n.py").read_text() == "y = 1\n"
    assert not (workspace / "m.py").exists()


def test_a_patch_through_the_shell_is_refused_where_an_edit_would_be(turn, server: FakeServer, workspace: Path) -> None:
    # Default mode, no terminal: an edit needs a yes nobody can give, so the patch is refused
    # with the denial, as apply_patch itself would be; plan mode refuses it as a write.
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def main():\n    return 1\n")
    server.add(tool_reply(call("read_file", {"path": "src/app.py"}, id="r")),
               tool_reply(call("run_command", {"command": HEREDOC}, id="p")), Reply(text="refused"))
    r = turn("-p", "change it", server=server)
    assert r.code == 0, r.err
    assert results(server.requests[2])["p"].startswith("Denied by the user. Do not retry it")
    server.add(tool_reply(call("run_command", {"command": HEREDOC}, id="q")), Reply(text="planned"))
    r = turn("-p", "change it", "--mode", "plan", server=server)
    assert r.code == 0, r.err
    assert results(server.requests[4])["q"].startswith("ERROR: ") and "apply_patch" in results(server.requests[4])["q"]
    assert (workspace / "src" / "app.py").read_text() == "def main():\n    return 1\n"


@pytest.mark.parametrize("command", [
    ["bash", "-lc", "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+two\n*** End Patch\nEOF\n"],
    ["apply_patch", "*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+two\n*** End Patch\n"],
], ids=["bash-lc-heredoc", "argv"])
def test_the_argv_codexs_shell_takes_is_read_as_the_patch_too(workspace: Path, command: list[str]) -> None:
    (workspace / "f.txt").write_text("one\n")
    rt = runtime(workspace)
    assert not run(rt, "read_file", path="f.txt").startswith("ERROR")
    done, note = run(rt, "run_command", command=command).split("\n", 1)
    assert done == "patched f.txt (1 hunk, +1 -1)" and "the apply_patch tool" in note
    assert (workspace / "f.txt").read_text() == "two\n"


def test_a_patch_whose_name_the_json_escapes_is_read_as_the_patch_too(workspace: Path) -> None:
    # The arguments are JSON: `\u0061pply_patch` is apply_patch once decoded, as any letter may be.
    (workspace / "f.txt").write_text("one\n")
    rt = runtime(workspace)
    assert not run(rt, "read_file", path="f.txt").startswith("ERROR")
    text = json.dumps({"command": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+two\n"
                                  "*** End Patch\nEOF\n"})
    escaped = text.replace("apply", "\\u0061\\u0070\\u0070\\u006c\\u0079")
    assert "pply" not in escaped and json.loads(escaped) == json.loads(text)
    [out] = asyncio.run(rt.run_calls([ToolCall("c", "run_command", escaped)]))
    done, note = (out.content or "").split("\n", 1)
    assert done == "patched f.txt (1 hunk, +1 -1)" and "the apply_patch tool" in note
    assert (workspace / "f.txt").read_text() == "two\n"


def test_an_ordinary_command_naming_apply_patch_still_runs_as_a_command(workspace: Path) -> None:
    out = run(runtime(workspace), "run_command", command="echo apply_patch <<'EOF' && true")
    assert out.startswith("exit code: ") and "apply_patch tool" not in out


# -- the patch under other names, stacked @@, Codex's fixtures -----------------------------

@pytest.mark.parametrize("args", [
    {"input": "*** Begin Patch\n*** Update File: f.txt\n@@\n-one\n+two\n*** End Patch\n", "explanation": "rename it"},
    {"patch": "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one\n+two\n", "description": "fix"},
], ids=["input-with-explanation", "patch-with-description"])
def test_the_patch_may_come_as_input_or_patch_beside_a_comment(workspace: Path, args: dict[str, str]) -> None:
    (workspace / "f.txt").write_text("one\n")
    rt = runtime(workspace)
    assert not run(rt, "read_file", path="f.txt").startswith("ERROR")
    assert run(rt, "apply_patch", **args) == "patched f.txt (1 hunk, +1 -1)"
    assert (workspace / "f.txt").read_text() == "two\n"


def test_a_move_onto_an_unread_file_replaces_it_as_codex_does_and_keeps_the_old_bytes(workspace: Path) -> None:
    # Codex's fixture: old/name.txt moves onto renamed/dir/name.txt, which the model never read.
    (workspace / "old").mkdir()
    (workspace / "renamed" / "dir").mkdir(parents=True)
    (workspace / "old" / "name.txt").write_text("from\n")
    (workspace / "old" / "other.txt").write_text("unrelated file\n")
    (workspace / "renamed" / "dir" / "name.txt").write_text("existing\n")
    rt = runtime(workspace, record=True)
    patch = "*** Begin Patch\n*** Update File: old/name.txt\n*** Move to: renamed/dir/name.txt\n@@\n-from\n+new\n*** End Patch\n"
    out = run(rt, "apply_patch", diff=patch)
    moved = out.split("\n")[0]
    assert moved.startswith("renamed old/name.txt -> renamed/dir/") and moved.endswith("/name.txt (1 hunk, +1 -1)"), out
    assert not (workspace / "old" / "name.txt").exists()
    assert (workspace / "renamed" / "dir" / "name.txt").read_text() == "new\n"
    assert (workspace / "old" / "other.txt").read_text() == "unrelated file\n"
    kept = out.rsplit("its old content is kept in ", 1)[1]
    assert "renamed/dir/name.txt existed " in out and "not read it" in out
    assert Path(kept).read_bytes() == b"existing\n" and Path(kept).parent.parent == rt.session.folder


def test_an_add_over_an_unread_file_replaces_it_as_codex_does_and_keeps_the_old_bytes(workspace: Path) -> None:
    (workspace / "duplicate.txt").write_text("old content\n")
    rt = runtime(workspace, record=True)
    out = run(rt, "apply_patch", diff="*** Begin Patch\n*** Add File: duplicate.txt\n+new content\n*** End Patch\n")
    assert out.startswith("replaced duplicate.txt (+1 -1)"), out
    assert (workspace / "duplicate.txt").read_text() == "new content\n"
    assert Path(out.rsplit("its old content is kept in ", 1)[1]).read_text() == "old content\n"
    # Without a session folder there is nowhere to keep it: refused as before.
    (workspace / "second.txt").write_text("someone's work\n")
    out = run(runtime(workspace), "apply_patch", diff="*** Begin Patch\n*** Add File: second.txt\n+x\n*** End Patch\n")
    assert out.startswith("ERROR: second.txt already exists") and "not read it" in out, out
    assert (workspace / "second.txt").read_text() == "someone's work\n"


def test_a_move_over_a_file_changed_since_it_was_read_is_still_refused(workspace: Path) -> None:
    (workspace / "a.txt").write_text("draft\n")
    (workspace / "b.txt").write_text("final v1\n")
    rt = runtime(workspace, record=True)
    assert not run(rt, "read_file", path="b.txt").startswith("ERROR")
    (workspace / "b.txt").write_text("final v2, by a person\n")
    out = run(rt, "apply_patch", diff="*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-draft\n+final\n"
                                      "*** End Patch\n")
    assert out.startswith("ERROR: b.txt changed on disk "), out
    assert (workspace / "b.txt").read_text() == "final v2, by a person\n"


@pytest.mark.parametrize("prefixes", [("--src-prefix=orig/", "--dst-prefix=mod/"), ("--src-prefix=x/", "--dst-prefix=y/")])
def test_a_git_diff_with_other_prefixes_applies_as_git_apply_takes_it(workspace: Path, prefixes: tuple[str, str]) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "x.py").write_text("a\nb\nc\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(workspace)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "i"], check=True)
    (workspace / "src" / "x.py").write_text("a\nB\nc\n")
    diff = subprocess.run([*git, "diff", *prefixes], check=True, capture_output=True, text=True).stdout
    subprocess.run([*git, "checkout", "-q", "src/x.py"], check=True)
    assert subprocess.run([*git, "apply", "--check"], input=diff, text=True).returncode == 0
    rt = runtime(workspace)
    assert not run(rt, "read_file", path="src/x.py").startswith("ERROR")
    assert run(rt, "apply_patch", diff=diff) == "patched src/x.py (1 hunk, +1 -1)"
    assert (workspace / "src" / "x.py").read_text() == "a\nB\nc\n"


def test_a_diff_u_of_two_trees_applies(workspace: Path, tmp_path: Path) -> None:
    for tree, text in (("orig", "x = 1\ny = 2\n"), ("mod", "x = 1\ny = 3\n")):
        (tmp_path / tree / "lib").mkdir(parents=True)
        (tmp_path / tree / "lib" / "c.py").write_text(text)
    diff = subprocess.run(["diff", "-u", "orig/lib/c.py", "mod/lib/c.py"], cwd=tmp_path, capture_output=True,
                          text=True).stdout
    (workspace / "lib").mkdir()
    (workspace / "lib" / "c.py").write_text("x = 1\ny = 2\n")
    rt = runtime(workspace)
    assert not run(rt, "read_file", path="lib/c.py").startswith("ERROR")
    assert run(rt, "apply_patch", diff=diff) == "patched lib/c.py (1 hunk, +1 -1)"
    assert (workspace / "lib" / "c.py").read_text() == "x = 1\ny = 3\n"


# -- a call cut off at the output limit ---------------------------------------------------

@pytest.mark.parametrize("name,args", [
    ("write_file", '{"path": "big.py", "content": "import os\\n\\ndef main():\\n    for i in range(10'),
    ("edit_file", '{"path": "big.py", "old_string": "x = 1", "new_string": "x = [\\n    1,\\n    2,'),
], ids=["write", "edit"])
def test_a_call_cut_off_at_the_output_limit_is_named_so_with_the_next_step(turn, server: FakeServer, workspace: Path,
                                                                          name: str, args: str) -> None:
    (workspace / "big.py").write_text("x = 1\n")
    server.add(Raw(body=sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "w1", "type": "function", "function": {"name": name, "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
        chunk({}, "length"))), Reply(text="split"))
    r = turn("-p", "write it", "--yes", server=server)
    assert (r.code, r.out) == (0, "split\n"), r.err
    result = results(server.requests[1])["w1"]
    assert result.startswith(f"ERROR: this {name} call was cut off ") and "(finish_reason length)" in result
    assert f" after {len(args)} chars of arguments" in result
    assert "split the content over several calls" in result and "not valid JSON" not in result
    assert (workspace / "big.py").read_text() == "x = 1\n"


def test_malformed_arguments_that_were_not_cut_off_are_still_named_as_such(workspace: Path) -> None:
    out = run(runtime(workspace), "write_file", path="a")  # a complete call, for contrast
    assert "missing string field `content`" in out
    [res] = asyncio.run(runtime(workspace).run_calls([ToolCall("c", "write_file", '{"path": "a", "content": "x')]))
    assert (res.content or "").startswith("ERROR: arguments for write_file ") and "not valid JSON" in (res.content or "")


# -- specs without traps ------------------------------------------------------------------

def test_the_descriptions_say_where_numbers_go_that_at_lines_stack_and_the_timeout_unit() -> None:
    d = {t.name: t.describe() for t in build_tools()}
    assert "stripped only where every line of old_string has one (then from new_string too) or every line of " \
           "new_string does" in d["edit_file"]
    assert "`@@ class A` then `@@ def f`, they narrow in order" in d["apply_patch"]
    assert "`timeout_secs` seconds" in d["run_command"] and "read as milliseconds" in d["run_command"]


@pytest.mark.parametrize("given,secs", [(120000, 120), (600000, 600), (1500, 1500)])
def test_a_timeout_that_can_only_be_milliseconds_is_read_so_and_said(workspace: Path, given: int, secs: int) -> None:
    out = run(runtime(workspace), "run_command", command="echo ran", timeout_secs=given)
    assert out.startswith("exit code: 0") and "ran" in out
    if secs != given:
        note = out.split("\n")[-1]
        assert note.startswith(f"(timeout_secs {given} ") and " 3600 seconds" in note and note.endswith(f" {secs} s)")
    else:
        assert "milliseconds" not in out


def test_the_millisecond_reading_follows_a_lowered_timeout_limit(workspace: Path) -> None:
    out = run(runtime(workspace, run_command_max_timeout_secs=5), "run_command", command="sleep 30", timeout_secs=2000)
    assert out.startswith("exit code: killed (timed out after 2s)")
    assert out.endswith("\n(timeout_secs 2000 is over the limit of 5 seconds, so it was read as milliseconds: 2 s)")


@pytest.mark.parametrize("pattern,regex_hit", [
    ("TODO\\|FIXME", "TODO\\|FIXME".replace("\\|", "|")),
    ("def \\w+_handler\\(", "def \\w+_handler\\("),
], ids=["grep-alternation", "escaped-class"])
def test_a_literal_grep_that_looks_like_a_regex_says_so_when_it_finds_nothing(workspace: Path, pattern: str,
                                                                               regex_hit: str) -> None:
    (workspace / "a.py").write_text("# TODO: tidy\ndef on_click_handler(event):\n    pass\n")
    rt = runtime(workspace)
    out = run(rt, "grep", pattern=pattern)
    assert out.startswith(f"no matches for literal {pattern!r} in .")
    assert "regex=true" in out, out
    assert run(rt, "grep", pattern=regex_hit, regex=True).startswith("a.py:")
    plain = run(rt, "grep", pattern="no such words")
    assert plain.startswith("no matches for literal") and "regular expression" not in plain
