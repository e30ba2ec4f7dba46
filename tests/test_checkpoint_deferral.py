"""The scan before a turn waits until the turn may change files: a turn that only answers or
reads takes none (no git process, no store), yet is kept for /rewind of the conversation; the
first write, command or sub-agent takes it before it runs, so /undo still takes back exactly
the turn's changes; and while a background task runs, a turn scans from its start, so what
the task changes meanwhile is the turn's. Real files, real git, a real agent (ScriptedLLM)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from test_checkpoints import ask, build, command, repo  # noqa: F401 (the fixture)

from nanohermes.turn.checkpoints import store_dir
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply


def test_a_turn_that_only_answers_or_reads_takes_no_scan_yet_is_kept(repo: Path) -> None:
    built = build(repo, ScriptedLLM([Reply(text="hello"), tool_reply(call("read_file", {"path": "other.txt"})),
                                     Reply(text="read it")]))
    ask(built, "hi", "read other.txt")
    assert not store_dir(repo).exists()  # no scan was taken: the store was never made
    assert built.checkpoints is not None
    turns = built.checkpoints.turns()
    assert [(t.turn, t.prompt, t.paths) for t in turns] == [(1, "hi", []), (2, "read other.txt", [])]
    assert "conversation rewound to before turn 2" in command(built, "/rewind 2 conversation")  # its place is kept
    assert [m.content for m in built.agent.session.history] == ["hi", "hello"]


def test_the_first_change_of_a_turn_is_preceded_by_its_scan(repo: Path) -> None:
    """The person's edit made before the turn's first write is the person's: /undo takes back
    only what the turn wrote after its read."""
    built = build(repo, ScriptedLLM([tool_reply(call("read_file", {"path": "other.txt"})),
                                     tool_reply(call("write_file", {"path": "new.txt", "content": "made\n"})),
                                     Reply(text="done")]))
    (repo / "mine.txt").write_text("the person's\n")
    ask(built, "read, then write")
    assert store_dir(repo).exists()
    assert built.checkpoints is not None and built.checkpoints.turns()[0].paths == ["new.txt"]
    assert "restored 1 file to before turn 1: new.txt" in command(built, "/undo")
    assert not (repo / "new.txt").exists() and (repo / "mine.txt").read_text() == "the person's\n"


def test_a_background_tasks_changes_during_a_quiet_turn_are_that_turns(repo: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    line = f"while [ ! -e {go} ]; do sleep 0.05; done; printf late > late.txt"

    def answer_once_the_task_wrote(body: dict[str, Any]) -> Reply:
        """The model of the second turn: it lets the task write, and answers once it has."""
        go.write_text("")
        for _ in range(600):
            if (repo / "late.txt").exists():
                break
            time.sleep(0.05)
        return Reply(text="just an answer")

    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": line, "background": True})),
                                     Reply(text="started"), answer_once_the_task_wrote]))
    ask(built, "start the task", "what now")
    assert (repo / "late.txt").exists()
    assert built.checkpoints is not None
    assert [t.paths for t in built.checkpoints.turns()] == [[], ["late.txt"]]


def test_a_p_run_that_only_answers_starts_no_checkpoint_git(server: FakeServer, turn: Any, home: Path,
                                                            workspace: Path) -> None:
    server.add(Reply(text="hello"))
    r = turn("-p", "hi", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert json.loads(r.out)["files_changed"] == []
    assert not store_dir(workspace).exists()
