"""Tool calls as the editor follows them through `nanohermes acp` (the Python SDK's client,
the real process, the loopback fake endpoint): a patch that only deletes or moves files says
so in its kind, a call goes pending -> in_progress -> done whether or not it was asked, and a
session loaded from disk shows its edits' diffs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from acp_support import Editor, agent
from nanohermes.testing import FakeServer, Reply, call, tool_reply


def statuses(editor: Editor, call_id: str) -> list[str]:
    """The statuses the editor was sent for one call, in order."""
    return [u.status for _, u in editor.updates
            if u.session_update in ("tool_call", "tool_call_update") and u.tool_call_id == call_id and u.status]


def test_a_patch_that_only_deletes_or_moves_files_has_that_kind(workspace: Path, server: FakeServer,
                                                                tmp_path: Path) -> None:
    for name in ("old.txt", "a.txt", "b.txt", "c.txt"):
        (workspace / name).write_text(f"{name}\n")
    delete = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n"
    move = "diff --git a/a.txt b/moved/a.txt\nsimilarity index 100%\nrename from a.txt\nrename to moved/a.txt\n"
    unified_delete = "--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-b.txt\n"
    both = "*** Begin Patch\n*** Delete File: c.txt\n*** Add File: d.txt\n+d\n*** End Patch\n"
    server.add(*(tool_reply(call("apply_patch", {"diff": d}, id=f"p{i}"))
                 for i, d in enumerate((delete, move, unified_delete, both))), Reply(text="done"))
    editor = Editor(answers=["allow_once"] * 4)

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "tidy")

    assert asyncio.run(scenario()) == "end_turn"
    assert not (workspace / "old.txt").exists() and (workspace / "moved" / "a.txt").is_file()
    assert not (workspace / "b.txt").exists() and (workspace / "d.txt").is_file()
    assert [c["kind"] for c in editor.calls().values()] == ["delete", "move", "delete", "edit"]
    assert [asked.kind for asked, _ in editor.asked] == ["delete", "move", "delete", "edit"]


def test_a_call_is_in_progress_once_it_runs_asked_or_not(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "notes.txt"}, id="r")),
               tool_reply(call("write_file", {"path": "new.txt", "content": "x\n"}, id="w")),
               tool_reply(call("write_file", {"path": "no.txt", "content": "x\n"}, id="n")), Reply(text="done"))
    editor = Editor(answers=["allow_once", "reject_once"])

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "go")

    assert asyncio.run(scenario()) == "end_turn"
    read, write, refused = editor.calls()
    assert statuses(editor, read) == ["pending", "in_progress", "completed"]  # nobody was asked
    assert statuses(editor, write) == ["pending", "in_progress", "completed"]
    assert statuses(editor, refused) == ["pending", "failed"]  # it never ran
    assert not (workspace / "no.txt").exists()


def diff_blocks(editor: Editor) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(c["title"], [d for d in c.get("content", []) if d["type"] == "diff"]) for c in editor.calls().values()]


def test_a_loaded_session_shows_its_edits_diffs_as_they_were_shown(workspace: Path, server: FakeServer,
                                                                   tmp_path: Path, home: Path) -> None:
    (workspace / "app.py").write_text("x = 1\ny = 2\n")
    patch = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 10\n*** End Patch\n"
    server.add(tool_reply(call("edit_file", {"path": "app.py", "old_string": "y = 2", "new_string": "y = 3"}, id="e"),
                          call("write_file", {"path": "new.txt", "content": "hello\n"}, id="w")),
               tool_reply(call("apply_patch", {"diff": patch}, id="p"),
                          call("edit_file", {"path": "app.py", "old_string": "absent", "new_string": "z"}, id="f")),
               Reply(text="done"))
    live, replayed, older = Editor(), Editor(), Editor()

    async def scenario() -> None:
        async with agent(live, workspace, server, "--mode", "accept-edits", stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            assert await a.ask(sid, "edit") == "end_turn"
        for editor in (replayed, older):
            if editor is older:  # a transcript of an earlier version: its results kept no diff
                [saved] = (home / ".local/share/nanohermes/sessions").rglob(f"{sid}.jsonl")
                lines = [json.loads(line) for line in saved.read_text().splitlines()]
                for d in lines:
                    if isinstance(d.get("message"), dict):
                        d["message"].pop("display", None)
                saved.write_text("".join(json.dumps(d) + "\n" for d in lines))
            async with agent(editor, workspace, server, stderr=tmp_path / "err2") as a:
                await a.conn.initialize(protocol_version=1)
                await a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])

    asyncio.run(scenario())
    assert (workspace / "app.py").read_text() == "x = 10\ny = 3\n"
    app, new = str(workspace / "app.py"), str(workspace / "new.txt")
    shown = diff_blocks(live)
    assert [t for t, d in shown if d] == ["edit_file: app.py", "write_file: new.txt", "apply_patch: app.py"]
    assert diff_blocks(replayed) == shown  # as the editor saw them live
    assert diff_blocks(older) == [  # rebuilt from each call's arguments
        ("edit_file: app.py", [{"type": "diff", "path": app, "old_text": "y = 2", "new_text": "y = 3"}]),
        ("write_file: new.txt", [{"type": "diff", "path": new, "new_text": "hello\n"}]),
        ("apply_patch: app.py", [{"type": "diff", "path": app, "old_text": "x = 1", "new_text": "x = 10"}]),
        ("edit_file: app.py", []),  # it failed: nothing changed
    ]


def test_thinking_written_into_the_answer_is_a_thought_live_and_replayed(workspace: Path, server: FakeServer,
                                                                        tmp_path: Path) -> None:
    server.add(Reply(text="<think>\nsmall sum\n</think>\n\nIt is 4.", chunk_size=3))
    live, replayed = Editor(), Editor()

    async def scenario() -> str:
        async with agent(live, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            assert await a.ask(sid, "2+2?") == "end_turn"
        async with agent(replayed, workspace, server, stderr=tmp_path / "err2") as a:
            await a.conn.initialize(protocol_version=1)
            await a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        return sid

    asyncio.run(scenario())
    for editor in (live, replayed):
        assert (editor.said(), editor.thought()) == ("It is 4.", "\nsmall sum\n")


def test_stream_json_says_when_a_call_runs(turn: Any, server: FakeServer, workspace: Path) -> None:
    """`-p`'s stream-json carries the same moment as `tool_running`: after `tool_started`, for
    a call that runs, never for one refused."""
    (workspace / "notes.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "notes.txt"}, id="r"),
                          call("write_file", {"path": "no.txt", "content": "x"}, id="n")), Reply(text="done"))
    r = turn("-p", "go", "--output-format", "stream-json", server=server, stdin=None)  # nobody to ask: refused
    assert r.code == 0, r.err
    seen = [(e["type"], e.get("call_id")) for e in r.lines() if e.get("type", "").startswith("tool_")]
    assert seen == [("tool_started", "r"), ("tool_running", "r"), ("tool_finished", "r"),
                    ("tool_started", "n"), ("tool_finished", "n")]
