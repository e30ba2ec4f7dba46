"""The file tools end to end: a real `nanohermes -p` command line, the loopback fake server, real files."""

from __future__ import annotations

from pathlib import Path

from nanohermes.turn.runtime import DENIED
from nanohermes.testing import FakeServer, Reply, call, tool_reply


def tool_results(server: FakeServer, request: int = 1) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"}


def test_accept_edits_edits_and_patches_and_streams_the_diff(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("def main():\n    print('hi')\n")
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    server.add(
        tool_reply(call("edit_file", {"path": "app.py", "old_string": "'hi'", "new_string": "'hello'"}, id="e"),
                   call("apply_patch", {"diff": "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"}, id="p")),
        Reply(text="done"),
    )
    r = turn("-p", "fix it", "--mode", "accept-edits", "--output-format", "stream-json", server=server)
    assert r.code == 0, r.err
    assert (workspace / "app.py").read_text() == "def main():\n    print('hello')\n"
    assert (workspace / "w.txt").read_bytes() == b"one\r\n2\r\n"
    assert tool_results(server) == {"e": "edited app.py: replaced 1 occurrence (+1 -1 lines)",
                                    "p": "patched w.txt (1 hunk, +1 -1)"}
    finished = {e["call_id"]: e for e in r.lines() if e["type"] == "tool_finished"}
    assert finished["e"]["display"] == (
        "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def main():\n-    print('hi')\n+    print('hello')\n")


def test_without_a_terminal_edits_are_refused_in_default_mode(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    # A write that could succeed (a new file; over a.txt, never read, it would fail before the question).
    server.add(tool_reply(call("write_file", {"path": "b.txt", "content": "b\n"}, id="w"),
                          call("edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}, id="e")),
               Reply(text="ok"))
    r = turn("-p", "change it", server=server)
    assert r.code == 0, r.err
    assert tool_results(server) == {"w": DENIED, "e": DENIED}
    assert (workspace / "a.txt").read_text() == "a\n" and not (workspace / "b.txt").exists()


def test_protected_write_is_refused_in_accept_edits_and_with_yes(turn, server: FakeServer, workspace: Path,
                                                                tmp_path: Path) -> None:
    """Without a terminal a protected write is refused; --yes has nobody to ask either, so it
    is refused with the reason; only --dangerously-skip-permissions lets it through."""
    outside = tmp_path / "outside.txt"
    server.add(tool_reply(call("write_file", {"path": str(outside), "content": "x"}, id="w")), Reply(text="ok"))
    r = turn("-p", "write", "--mode", "accept-edits", server=server)
    assert r.code == 0, r.err
    assert tool_results(server) == {"w": DENIED} and not outside.exists()
    server.add(tool_reply(call("write_file", {"path": str(outside), "content": "x"}, id="w2")), Reply(text="ok"))
    r = turn("-p", "write", "--mode", "accept-edits", "--yes", server=server)
    assert r.code == 0, r.err
    refused = tool_results(server, 3)["w2"]
    assert refused.startswith("ERROR: writes a protected path") and "--dangerously-skip-permissions" in refused
    assert not outside.exists()
    server.add(tool_reply(call("write_file", {"path": str(outside), "content": "x"}, id="w3")), Reply(text="ok"))
    r = turn("-p", "write", "--dangerously-skip-permissions", server=server)
    assert r.code == 0, r.err
    assert tool_results(server, 5) == {"w3": f"created {outside} (1 bytes, 1 line)"} and outside.read_text() == "x"


def test_plan_mode_hides_the_write_tools(turn, server: FakeServer) -> None:
    server.add(Reply(text="a plan"))
    r = turn("-p", "plan it", "--mode", "plan", server=server)
    assert r.code == 0, r.err
    names = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"read_file", "list_dir"} <= names
    assert not names & {"write_file", "edit_file", "apply_patch"}


def test_file_limits_lowered_through_config(turn, server: FakeServer, workspace: Path) -> None:
    for name in "abcde":
        (workspace / name).write_text(name * 3 + "\n")
    server.add(tool_reply(call("list_dir", {}, id="l"), call("read_file", {"path": "a"}, id="r")), Reply(text="ok"))
    r = turn("-p", "look", server=server, config={"limits": {"list_dir_entries": 3, "read_file_line_chars": 2}})
    assert r.code == 0, r.err
    assert tool_results(server) == {"l": "a  4\nb  4\nc  4\n\n5 entries, showing first 3",
                                    "r": "1\taa…\n\n1 line longer than 2 chars clipped with …"}
