"""Files the person puts back in the REPL (/undo, /redo, /rewind N files) while the
conversation keeps the turns that changed them: the next request tells the model which, as a
`!command`'s output is told. /rewind of the conversation too needs no note (those turns are
gone from it). The REPL in a pty, the loopback fake server, real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nanohermes.testing import FakeServer, Reply, call, tool_reply
from test_repl_pty import Term


def users(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_undo_redo_and_a_rewind_of_files_are_told_to_the_model(workspace: Path, home: Path) -> None:
    with FakeServer() as server:
        server.add(tool_reply(call("write_file", {"path": "notes.txt", "content": "two\n"})), Reply(text="wrote"),
                   Reply(text="seen undo"), Reply(text="seen redo"),
                   tool_reply(call("write_file", {"path": "more.txt", "content": "x\n"})), Reply(text="made more"),
                   Reply(text="seen rewind"), Reply(text="nothing to see"))
        t = Term(workspace, home, server, config={"auto_approve": True})
        try:
            for typed, seen in [("write two", "wrote"), ("/undo", "restored 1 file"), ("and now?", "seen undo"),
                                ("/redo", "restored 1 file"), ("and now?", "seen redo"), ("make more", "made more"),
                                ("/rewind 1 files", "restored 2 files"), ("and now?", "seen rewind"),
                                ("/rewind 2 conversation", "conversation rewound"), ("plain", "nothing to see")]:
                t.prompt()
                t.type(typed)
                t.wait(seen)
                if typed.startswith("/rewind 2"):
                    t.child.send("\x03")  # the rewound prompt offered again: cleared
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
        undo, redo, rewind = (users(server.requests[i])[-2:] for i in (2, 3, 6))
        last = users(server.requests[7])
    assert not (workspace / "notes.txt").exists() and not (workspace / "more.txt").exists()
    assert undo[1] == "and now?" and undo[0].startswith('<user-restore command="/undo">\nrestored 1 file to before '
                                                          "turn 1: notes.txt\n")
    assert redo[0].startswith('<user-restore command="/redo">\nrestored 1 file as before the undo of turn 1: '
                              "notes.txt\n")
    assert rewind[0].startswith('<user-restore command="/rewind 1 files">\nrestored 2 files to before turn 1: ')
    assert "more.txt" in rewind[0] and "notes.txt" in rewind[0]
    # Back to before turn 2 (the first "and now?"): the /undo before it stays, no note is added.
    assert [u.split("\n")[0] for u in last] == ["write two", '<user-restore command="/undo">', "plain"]
