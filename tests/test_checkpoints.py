"""Checkpoints and rewind: real files, real git (the user's repository and the shadow one), a
real agent driven by ScriptedLLM, and the /rewind and /undo command functions."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from nanohermes.assemble import Built, build_agent
from nanohermes.common.budget import Limits
from nanohermes.turn.checkpoints import store_dir
from nanohermes.config import Config
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.turn.checkpoints.gitpack import blob_name
from nanohermes.testing import Reply, ScriptedLLM, call, tool_reply
from nanohermes.ui.commands import REGISTRY, CommandContext, load_commands


def git(ws: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True, text=True).stdout


def tree(ws: Path) -> dict[str, bytes]:
    """Every file outside .git, by relative path: its bytes (a symbolic link: its target)."""
    out: dict[str, bytes] = {}
    for folder, dirs, names in os.walk(ws):
        dirs[:] = [d for d in dirs if d != ".git"]
        for n in names:
            p = Path(folder) / n
            rel = str(p.relative_to(ws))
            out[rel] = (b"-> " + os.readlink(p).encode()) if p.is_symlink() else p.read_bytes()
    return out


def git_state(ws: Path) -> dict[str, Any]:
    """What the user's git knows: HEAD, every ref, the index file, the stash, the status."""
    return {"head": git(ws, "rev-parse", "HEAD"), "refs": git(ws, "for-each-ref"),
            "index": hashlib.sha256((ws / ".git" / "index").read_bytes()).hexdigest(),
            "stash": git(ws, "stash", "list"), "config": (ws / ".git" / "config").read_bytes()}


@pytest.fixture
def repo(workspace: Path) -> Path:
    """A user's repository: committed, staged, stashed, untracked and ignored files."""
    git(workspace, "init", "-q", "-b", "main")
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / ".gitattributes").write_text("* text eol=crlf\n")  # must not alter what is restored
    (workspace / "tracked.txt").write_text("alpha\nbeta\n")
    (workspace / "other.txt").write_text("one\ntwo\nthree\n")
    (workspace / "gone.txt").write_text("will be deleted\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    (workspace / "tracked.txt").write_text("alpha\nbeta\nstashed\n")
    git(workspace, "stash", "-q")
    (workspace / "staged.txt").write_text("staged\n")
    git(workspace, "add", "staged.txt")
    (workspace / "untracked.txt").write_text("untracked\n")
    (workspace / "ignored.log").write_text("log line\n")
    (workspace / "bin.dat").write_bytes(bytes(range(256)))
    (workspace / "link").symlink_to("tracked.txt")
    return workspace


def build(ws: Path, llm: ScriptedLLM, ui: RecordingUI | None = None, resume: Path | None = None,
          **config: Any) -> Built:
    return build_agent(Config(auto_approve=True, **config), ws, ui or RecordingUI(), llm=llm, resume=resume)


def ask(built: Built, *prompts: str) -> None:
    async def go() -> None:
        for p in prompts:
            await built.agent.ask(p)

    asyncio.run(go())


def command(built: Built, line: str, state: dict[str, Any] | None = None, answers: Answers | None = None) -> str:
    load_commands()
    console = Console(width=250, record=True, color_system=None)
    ctx = CommandContext(agent=built.agent, config=built.agent.runtime.config, workspace=built.agent.runtime.workspace,
                         print=console.print, registry=REGISTRY, built=built, state=state if state is not None else {},
                         choose=answers)
    asyncio.run(REGISTRY.run(line, ctx))
    return console.export_text()


class Answers:
    """The person's answers to the questions a command asks, in order; what was offered is kept."""

    def __init__(self, *picks: str) -> None:
        self.picks = list(picks)
        self.offered: list[list[str]] = []

    async def __call__(self, options: list[tuple[str, str, str]]) -> str:
        self.offered.append([value for value, _, _ in options])
        return self.picks.pop(0)


PATCH = "--- a/other.txt\n+++ b/other.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
COMMAND = ("printf 'made' > made.txt && echo more >> ignored.log && rm untracked.txt gone.txt && "
           "mkdir -p d/e && printf z > d/e/f.txt && chmod +x tracked.txt && rm link && ln -s other.txt link")


def every_kind_of_edit() -> list[Any]:
    return [tool_reply(call("write_file", {"path": "new.txt", "content": "new\n"}),
                       call("edit_file", {"path": "tracked.txt", "old_string": "beta", "new_string": "BETA"})),
            tool_reply(call("apply_patch", {"diff": PATCH})),
            tool_reply(call("run_command", {"command": COMMAND})),
            Reply(text="all changed")]


def test_rewind_restores_every_change_byte_for_byte_and_leaves_git_alone(repo: Path) -> None:
    before, state = tree(repo), git_state(repo)
    mode = (repo / "tracked.txt").stat().st_mode
    llm = ScriptedLLM(every_kind_of_edit())
    built = build(repo, llm)
    ask(built, "change everything")
    messages = len(built.agent.session.history)
    changed = tree(repo)
    # (the user's git stash checked tracked.txt out with CRLF, as its .gitattributes says)
    assert changed["new.txt"] == b"new\n" and changed["tracked.txt"] == before["tracked.txt"].replace(b"beta", b"BETA")
    assert changed["other.txt"] == b"one\nTWO\nthree\n" and "untracked.txt" not in changed and "gone.txt" not in changed
    assert changed["d/e/f.txt"] == b"z" and changed["ignored.log"] == b"log line\nmore\n"
    assert not any(m["role"] == "tool" and m["content"].startswith("ERROR") for m in llm.requests[-1]["messages"])
    out = command(built, "/rewind 1 files")
    assert ("restored 9 files to before turn 1: d/e/f.txt, gone.txt, ignored.log, link, made.txt, new.txt, "
            "other.txt, tracked.txt, untracked.txt") in out
    assert tree(repo) == before
    assert (repo / "tracked.txt").stat().st_mode == mode
    assert not (repo / "d").exists()
    assert git_state(repo) == state
    history = built.agent.session.history  # files only: the conversation stays, told which went back
    assert len(history) == messages + 1 and (history[-1].content or "").startswith('<user-restore command="/rewind 1 files">')


def test_rewind_lists_turns_with_prompt_time_and_files(repo: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "a"})), Reply(text="one"),
                       Reply(text="nothing to do"),
                       tool_reply(call("run_command", {"command": "rm other.txt"})), Reply(text="three")])
    built = build(repo, llm)
    ask(built, "write a", "just talk", "remove other")
    out = command(built, "/rewind")
    lines = [line.rstrip() for line in out.splitlines()]
    # The prompt column is as wide as the longest prompt ("remove other").
    assert lines[0].startswith("  1  20") and lines[0].endswith("write a" + " " * 5 + "  1 file: a.txt")
    assert lines[1].endswith("just talk" + " " * 3 + "  no file changes")
    assert lines[2].endswith("remove other" + "  1 file: other.txt")
    assert lines[3].startswith("go back with /rewind N")


def test_an_unchanged_workspace_reuses_the_last_checkpoint(repo: Path) -> None:
    built = build(repo, ScriptedLLM([Reply(text="a"), Reply(text="b")]))
    ask(built, "one", "two")
    assert built.checkpoints is not None
    first, second = built.checkpoints.turns()
    assert first.commit == second.commit


def test_conversation_only_rewind_keeps_the_files(repo: Path) -> None:
    llm = ScriptedLLM([Reply(text="first answer"), tool_reply(call("write_file", {"path": "a.txt", "content": "a"})),
                       Reply(text="second answer"), Reply(text="after the rewind")])
    built = build(repo, llm)
    ask(built, "first", "second")
    state: dict[str, Any] = {}
    out = command(built, "/rewind 2 conversation", state)
    assert "conversation rewound to before turn 2 ('second')" in out
    assert state == {"prefill": "second"}  # the REPL offers the prompt again
    assert (repo / "a.txt").read_text() == "a"
    assert [m.content for m in built.agent.session.history] == ["first", "first answer"]
    assert built.checkpoints is not None and [t.turn for t in built.checkpoints.turns()] == [1]
    ask(built, "third")
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["first", "first answer", "third"]
    transcript = built.agent.session.transcript
    assert transcript is not None
    transcript.close()
    resumed = build(repo, ScriptedLLM([]), resume=transcript.path)
    assert [m.content for m in resumed.agent.session.history] == ["first", "first answer", "third", "after the rewind"]
    assert resumed.checkpoints is not None and [t.turn for t in resumed.checkpoints.turns()] == [1, 2]


def test_both_rewinds_files_and_conversation(repo: Path) -> None:
    before = tree(repo)
    # write_file replaces an existing file only once it was read in the session.
    llm = ScriptedLLM([tool_reply(call("read_file", {"path": "tracked.txt"}),
                                  call("write_file", {"path": "tracked.txt", "content": "x"})), Reply(text="done")])
    built = build(repo, llm)
    ask(built, "overwrite")
    out = command(built, "/rewind 1")
    assert "restored 1 file to before turn 1: tracked.txt" in out and "conversation rewound" in out
    assert tree(repo) == before and built.agent.session.history == []


def test_undo_steps_back_one_turn_at_a_time(repo: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "1"})), Reply(text="one"),
                       tool_reply(call("write_file", {"path": "a.txt", "content": "2"})), Reply(text="two")])
    built = build(repo, llm)
    ask(built, "first", "second")
    messages = len(built.agent.session.history)
    assert "restored 1 file to before turn 2: a.txt" in command(built, "/undo")
    assert (repo / "a.txt").read_text() == "1"
    assert "restored 1 file to before turn 1: a.txt" in command(built, "/undo")
    assert not (repo / "a.txt").exists()
    assert "nothing to undo" in command(built, "/undo")
    history = built.agent.session.history  # /undo leaves the conversation, told which files went back
    assert len(history) == messages + 2 and all((m.content or "").startswith('<user-restore command="/undo">')
                                                for m in history[messages:])
    assert "(files undone)" in command(built, "/rewind")


def test_checkpoints_survive_resume(repo: Path) -> None:
    before = tree(repo)
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": "rm tracked.txt"})), Reply(text="x")]))
    ask(built, "delete it")
    transcript = built.agent.session.transcript
    assert transcript is not None
    transcript.close()
    resumed = build(repo, ScriptedLLM([]), resume=transcript.path)
    assert "1 file: tracked.txt" in command(resumed, "/rewind")
    command(resumed, "/undo")
    assert tree(repo) == before


def test_a_file_too_big_to_keep_is_named_and_left_alone(repo: Path) -> None:
    (repo / "big.bin").write_bytes(b"B" * 300)
    ui = RecordingUI()
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": "printf small > big.bin"})),
                                     Reply(text="ok")]), ui, limits={"checkpoint_file_max_bytes": 299})
    ask(built, "shrink it")
    assert ("checkpoints: 1 file too big to keep (> 299 bytes, limits.checkpoint_file_max_bytes): big.bin; "
            "/rewind leaves them as they are") in [n.text for n in ui.of(Notice)]
    out = command(built, "/undo")
    assert "big.bin was not kept (too big or unreadable); left as it is" in out
    assert (repo / "big.bin").read_bytes() == b"small"


def test_a_workspace_with_too_many_files_is_not_checkpointed(repo: Path) -> None:
    ui = RecordingUI()
    built = build(repo, ScriptedLLM([Reply(text="ok"), tool_reply(call("write_file", {"path": "a.txt", "content": "x"})),
                                     Reply(text="made")]), ui, limits={"checkpoint_max_files": 3})
    ask(built, "hi")
    assert not ui.of(Notice)  # a turn that only answers takes no scan
    ask(built, "make a.txt")
    assert [n.text for n in ui.of(Notice) if n.level == "warning"] == [
        "checkpoints: the workspace has more than 3 files (limits.checkpoint_max_files); checkpoints are off for it; "
        "/rewind cannot undo this session's turns"]
    assert "make a.txt" not in command(built, "/rewind")  # the turn the scan failed in is not kept


def test_the_store_is_pruned_oldest_first(repo: Path) -> None:
    ui = RecordingUI()
    script: list[Any] = []
    for i in range(3):
        script += [tool_reply(call("write_file", {"path": "a.txt", "content": f"version {i}"})), Reply(text="ok")]
    built = build(repo, ScriptedLLM(script), ui, limits={"checkpoint_store_bytes": 1})
    ask(built, "one", "two", "three")
    pruned = [n.text for n in ui.of(Notice) if n.text.startswith("checkpoints: pruned")]
    assert pruned[0] == "checkpoints: pruned 1 old checkpoint to keep the store under 1 bytes (limits.checkpoint_store_bytes)"
    out = command(built, "/rewind 1 files")
    assert "the checkpoint of turn 1 was pruned (limits.checkpoint_store_bytes)" in out


def test_pruning_keeps_as_many_recent_checkpoints_as_fit_the_cap(repo: Path) -> None:
    """Each turn writes ~20 KB that does not compress below ~20 KB, and its checkpoint keeps
    the version before and after it: the cap holds three versions, the newest two turns.
    Objects of dropped checkpoints stay on disk a while (another session may still need
    them), which must not make the store drop the recent ones too."""
    versions = [os.urandom(20_000).hex() for _ in range(6)]
    script: list[Any] = []
    for v in versions:
        script += [tool_reply(call("write_file", {"path": "a.txt", "content": v})), Reply(text="ok")]
    ui = RecordingUI()
    built = build(repo, ScriptedLLM(script), ui, limits={"checkpoint_store_bytes": 75_000,
                                                                 "session_budget_chars": 10_000_000})
    ask(built, *(f"turn {i}" for i in range(1, 7)))
    note = "checkpoints: pruned {} old {} to keep the store under 75000 bytes (limits.checkpoint_store_bytes)"
    # After turn 4 the store holds versions 0-3: turns 3 and 4 (versions 1-3) fit, 1 and 2
    # go; after turn 5, turn 3; after turn 6, turn 4.
    assert [n.text for n in ui.of(Notice) if n.text.startswith("checkpoints: pruned")] == [
        note.format(2, "checkpoints"), note.format(1, "checkpoint"), note.format(1, "checkpoint")]
    for turn in (6, 5):
        out = command(built, f"/rewind {turn} files")
        assert "restored" in out, out
        assert (repo / "a.txt").read_text() == versions[turn - 2]
    for turn in (4, 3, 2, 1):
        assert f"the checkpoint of turn {turn} was pruned (limits.checkpoint_store_bytes)" in command(
            built, f"/rewind {turn} files")


def test_checkpoints_can_be_turned_off(repo: Path) -> None:
    built = build(repo, ScriptedLLM([Reply(text="ok")]), checkpoints=False)
    ask(built, "hi")
    assert built.checkpoints is None and not store_dir(repo).exists()
    assert "checkpoints are off (config key checkpoints)" in command(built, "/rewind")


def test_the_shadow_store_lives_outside_the_workspace(repo: Path, home: Path) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("write_file", {"path": "untracked.txt", "content": "changed"})),
                                     Reply(text="ok")]))
    ask(built, "hi")
    assert store_dir(repo).is_relative_to(home / ".local" / "share" / "nanohermes" / "checkpoints")
    assert (store_dir(repo) / "git" / "HEAD").exists()
    assert git(repo, "status", "--porcelain") == "A  staged.txt\n?? bin.dat\n?? link\n?? untracked.txt\n"


def test_in_the_repl_a_custom_command_runs_and_undo_takes_its_changes_back(workspace: Path, home: Path,
                                                                          tmp_path: Path) -> None:
    import json
    import shlex
    import sys

    from test_repl_pty import Term

    from nanohermes.testing import FakeServer

    log = tmp_path / "notified.jsonl"
    (workspace / ".nanohermes" / "commands").mkdir(parents=True)
    (workspace / ".nanohermes" / "commands" / "make.md").write_text("---\ndescription: Make a file\n---\nCreate $1.")
    record = f"{shlex.quote(sys.executable)} -c \"import sys; open({str(log)!r}, 'a').write(sys.stdin.read() + '\\n')\""
    with FakeServer() as server:
        server.add(tool_reply(call("write_file", {"path": "made.txt", "content": "made"})), Reply(text="made it"))
        t = Term(workspace, home, server, config={"auto_approve": True, "hooks": {"Notification": [
            {"hooks": [{"type": "command", "command": record}]}]}})
        try:
            t.prompt()
            t.child.send("/ma\t")  # Tab completes the custom command
            t.wait("/make")
            t.type(" made.txt")
            t.wait("made it")
            t.prompt()
            assert (workspace / "made.txt").read_text() == "made"
            t.type("/undo")
            t.wait("restored 1 file to before turn 1: made.txt")
            t.prompt()
            t.type("/rewind 1 conversation")
            t.wait("conversation rewound to before turn 1 ('Create made.txt.')")
            t.wait("Create made.txt.")  # offered again at the prompt
            t.child.send("\x03")  # Ctrl-C clears it
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
        assert server.requests[0]["messages"][-1]["content"] == "Create made.txt."
    assert not (workspace / "made.txt").exists()
    notified = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [n["message"] for n in notified] == ["nanohermes is waiting for your input"]
    assert notified[0]["hook_event_name"] == "Notification" and notified[0]["cwd"] == str(workspace)


def test_a_session_not_recorded_keeps_checkpoints_in_memory_and_leaves_no_index(repo: Path) -> None:
    llm = ScriptedLLM([tool_reply(call("write_file", {"path": "a.txt", "content": "a"})), Reply(text="ok")])
    built = build_agent(Config(auto_approve=True), repo, RecordingUI(), llm=llm, save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("write")
            assert list(store_dir(repo).glob("index-pid*"))

    asyncio.run(go())
    assert built.checkpoints is not None and [t.turn for t in built.checkpoints.turns()] == [1]
    assert not list(store_dir(repo).glob("index-*"))
    assert "restored 1 file to before turn 1: a.txt" in command(built, "/undo")


def test_after_a_compaction_only_the_files_of_an_older_turn_can_be_rewound(repo: Path) -> None:
    llm = ScriptedLLM([Reply(text="one"), tool_reply(call("write_file", {"path": "a.txt", "content": "a"})),
                       Reply(text="two"), Reply(text="three"), Reply(text="the summary")])
    built = build(repo, llm)
    ask(built, "first", "second", "third")
    assert built.agent.compactor is not None
    asyncio.run(built.agent.compactor.manual(built.agent.session))
    out = command(built, "/rewind 2")
    assert "the conversation was compacted since turn 2; only its files can be rewound (/rewind 2 files)" in out
    assert (repo / "a.txt").exists()
    assert "restored 1 file to before turn 2: a.txt" in command(built, "/rewind 2 files")
    assert not (repo / "a.txt").exists()
    assert "conversation rewound to before turn 1" in command(built, "/rewind 1 conversation")  # to the start
    assert built.agent.session.history == []


def test_without_git_checkpoints_are_off_with_one_warning(repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    ui = RecordingUI()
    write = tool_reply(call("write_file", {"path": "a.txt", "content": "x"}, id="w"))
    built = build(repo, ScriptedLLM([write, Reply(text="a"), write, Reply(text="b")]), ui)
    monkeypatch.setenv("PATH", str(empty))
    ask(built, "one", "two")
    assert [n.text for n in ui.of(Notice) if n.level == "warning"] == [
        "checkpoints: git was not found on PATH (checkpoints need it; install git); /rewind cannot undo this "
        "session's turns"]
    assert [m.content for m in built.agent.session.history if m.role != "tool" and not m.tool_calls] == [
        "one", "a", "two", "b"]  # the turns ran


@pytest.mark.parametrize("where", ["subfolder of a repository", "not a repository"])
def test_print_mode_checkpoints_are_rewound_after_resume_in_the_repl(turn, workspace: Path, home: Path,  # type: ignore[no-untyped-def]
                                                                      tmp_path: Path, where: str) -> None:
    """`-p` records the checkpoint; a new process resumes the session in the REPL and
    /rewind puts every file back, whatever changed it, without touching the user's git."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_repl_pty import Term

    from nanohermes.testing import FakeServer

    outer = workspace
    ws = outer / "pkg" if where.startswith("subfolder") else outer
    ws.mkdir(exist_ok=True)
    marker = tmp_path / "hook-ran"
    if where.startswith("subfolder"):
        git(outer, "init", "-q", "-b", "main")
        (ws / "tracked.txt").write_text("alpha\n")
        (outer / "top.txt").write_text("top\n")
        git(outer, "add", "-A")
        git(outer, "commit", "-q", "-m", "first")
        (ws / "tracked.txt").write_text("alpha\nstashed\n")
        git(outer, "stash", "-q")
        (ws / "staged.txt").write_text("staged\n")
        git(outer, "add", "pkg/staged.txt")
        for name in ("pre-commit", "post-checkout", "reference-transaction", "post-index-change"):
            hook = outer / ".git" / "hooks" / name
            hook.parent.mkdir(exist_ok=True)
            hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
            hook.chmod(0o755)
        before_git = {**git_state(outer), "hooks": sorted(p.name for p in (outer / ".git" / "hooks").iterdir())}
    else:
        (ws / "tracked.txt").write_text("alpha\n")
        before_git = {}
    (ws / "gone.txt").write_text("will be deleted\n")
    (ws / "untracked.txt").write_text("untracked\n")
    before = tree(outer)
    cmd = ("printf made > made.txt && echo more >> tracked.txt && rm gone.txt untracked.txt && "
           "mkdir -p d/e && printf z > d/e/f.txt")
    with FakeServer() as server:
        server.add(tool_reply(call("write_file", {"path": "new.txt", "content": "new\n"}),
                              call("run_command", {"command": cmd})), Reply(text="all changed"))
        ran = turn("-p", "change everything", "--yes", "--output-format", "json", server=server, cwd=ws)
        assert ran.code == 0, ran.err
        sid = json.loads(ran.out)["session_id"]
        assert (ws / "made.txt").exists() and not (ws / "gone.txt").exists()
        t = Term(ws, home, server, args=("--resume", sid))
        try:
            t.prompt()
            t.type("/rewind")
            t.wait("change everything")
            t.wait("files:")
            t.prompt()
            t.type("/rewind 1 files")
            t.wait("restored 6 files to before turn 1")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
    assert not marker.exists(), "a hook of the user's repository ran: " + marker.read_text()
    assert tree(outer) == before
    if before_git:
        assert {**git_state(outer), "hooks": sorted(p.name for p in (outer / ".git" / "hooks").iterdir())} == before_git
        assert git(outer, "status", "--porcelain") == "A  pkg/staged.txt\n?? pkg/gone.txt\n?? pkg/untracked.txt\n"
    assert not (ws / ".git").exists()


def test_a_turn_cancelled_while_the_model_answers_still_gets_its_checkpoint(repo: Path) -> None:
    before = tree(repo)
    llm = ScriptedLLM([Reply(text="slow", delay=30),
                       tool_reply(call("write_file", {"path": "made.txt", "content": "made\n"})), Reply(text="done")])
    built = build(repo, llm)

    async def go() -> None:
        turn = asyncio.ensure_future(built.agent.ask("first"))
        while not llm.requests:  # the model "answers" now, the snapshot being taken meanwhile
            await asyncio.sleep(0.01)
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await turn
        await built.agent.ask("second")  # waits for the first one's snapshot before its own

    asyncio.run(go())
    assert (repo / "made.txt").read_text() == "made\n"
    cps = built.checkpoints
    assert cps is not None and [t.prompt for t in cps.turns()] == ["first", "second"]
    assert "restored 1 file to before turn 2" in command(built, "/rewind 2 files")
    assert tree(repo) == before


def test_a_new_session_starts_from_the_last_index_and_old_indexes_are_removed(repo: Path) -> None:
    from nanohermes.turn.checkpoints import KEPT_INDEXES, Store

    first = Store(repo, Limits(), frozenset(), session="s0")
    first.scan()
    (repo / "tracked.txt").write_text("changed since\n")
    second = Store(repo, Limits(), frozenset(), session="s1")
    assert not second.index.exists()
    changes = second.scan().changes
    assert second.index.exists() and second.index.stat().st_mode & 0o777 == 0o600
    # Seeded from the first session's stat cache, the scan sees the change and only it.
    assert [c.path for c in changes] == ["tracked.txt"]
    for n in range(2, KEPT_INDEXES + 5):
        Store(repo, Limits(), frozenset(), session=f"s{n}").scan()
    indexes = [p.name for p in first.root.glob("index-*")]
    assert len(indexes) == KEPT_INDEXES + 1 and f"index-s{KEPT_INDEXES + 4}" in indexes


def test_undo_takes_back_only_the_turns_files_and_leaves_the_persons_edits(repo: Path) -> None:
    before = tree(repo)
    built = build(repo, ScriptedLLM([tool_reply(call("write_file", {"path": "gen.txt", "content": "generated\n"})),
                                     Reply(text="wrote it")]))
    ask(built, "generate")
    (repo / "other.txt").write_text("one\ntwo\nmine\n")  # the person's edit after the turn
    (repo / "mine.txt").write_text("my own\n")  # and a file of their own
    out = command(built, "/undo")
    assert "restored 1 file to before turn 1: gen.txt" in out
    assert not (repo / "gen.txt").exists()
    assert (repo / "other.txt").read_text() == "one\ntwo\nmine\n" and (repo / "mine.txt").read_text() == "my own\n"
    assert tree(repo) == {**before, "other.txt": b"one\ntwo\nmine\n", "mine.txt": b"my own\n"}


@pytest.mark.parametrize("pick, expected", [("mine", b"one\nTWO\nthree\nmine\n"),
                                            ("theirs", b"one\ntwo\nthree\n"),
                                            ("merge", b"one\ntwo\nthree\nmine\n")])
def test_a_file_both_changed_is_the_persons_to_decide(repo: Path, pick: str, expected: bytes) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("apply_patch", {"diff": PATCH})), Reply(text="patched")]))
    ask(built, "patch it")
    with (repo / "other.txt").open("a") as f:
        f.write("mine\n")
    answers = Answers(pick)
    out = command(built, "/undo", answers=answers)
    assert answers.offered == [["mine", "theirs", "merge"]]
    assert (repo / "other.txt").read_bytes() == expected
    assert f"other.txt changed since turn 1: {'kept yours' if pick == 'mine' else ''}" in out
    # Nobody to ask (the person cannot answer here): their version stays.
    (repo / "other.txt").write_text("one\nTWO\nthree\n")
    built2 = build(repo, ScriptedLLM([tool_reply(call("apply_patch", {"diff": PATCH.replace("two", "TWO", 1)
                                                                              .replace("+TWO", "+2")})),
                                      Reply(text="again")]))
    ask(built2, "patch again")
    (repo / "other.txt").write_text("one\n2\nthree\nlater\n")
    assert "other.txt changed since turn 1: kept yours" in command(built2, "/undo")
    assert (repo / "other.txt").read_text() == "one\n2\nthree\nlater\n"


def test_a_merge_with_overlapping_edits_marks_the_conflict(repo: Path) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("apply_patch", {"diff": PATCH})), Reply(text="patched")]))
    ask(built, "patch it")
    (repo / "other.txt").write_text("one\nTwo, says the person\nthree\n")
    out = command(built, "/undo", answers=Answers("merge"))
    assert "other.txt changed since turn 1: merged (1 conflict marked)" in out
    text = (repo / "other.txt").read_text()
    assert "<<<<<<< yours\nTwo, says the person\n" in text and "two\n>>>>>>> before turn 1\n" in text


def test_a_file_the_turn_created_and_the_person_then_changed_is_not_deleted_unasked(repo: Path) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("write_file", {"path": "new.txt", "content": "new\n"})),
                                     Reply(text="ok")]))
    ask(built, "make it")
    (repo / "new.txt").write_text("new\nand mine\n")
    answers = Answers("mine")
    assert "new.txt changed since turn 1: kept yours" in command(built, "/undo", answers=answers)
    assert answers.offered == [["mine", "theirs"]]  # nothing to merge with: the turn created it
    assert (repo / "new.txt").read_text() == "new\nand mine\n"


def test_a_file_the_turn_did_not_create_is_never_deleted(repo: Path) -> None:
    """The turn only edited tracked.txt: whatever happens to it since, an undo puts content
    back, and a file the person deleted after the turn is asked about, not re-deleted."""
    built = build(repo, ScriptedLLM([tool_reply(call("edit_file", {"path": "tracked.txt", "old_string": "beta",
                                                                   "new_string": "BETA"})), Reply(text="ok")]))
    before = (repo / "tracked.txt").read_bytes()
    ask(built, "edit")
    (repo / "tracked.txt").unlink()
    answers = Answers("theirs")
    out = command(built, "/undo", answers=answers)
    assert "tracked.txt changed since turn 1: took the checkpoint's" in out
    assert (repo / "tracked.txt").read_bytes() == before


def test_redo_brings_back_what_undo_replaced(repo: Path) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("apply_patch", {"diff": PATCH})), Reply(text="patched"),
                                     tool_reply(call("write_file", {"path": "a.txt", "content": "a\n"})),
                                     Reply(text="wrote")]))
    ask(built, "patch it", "write a")
    (repo / "other.txt").write_text("one\nTWO\nthree\nmine\n")
    out = command(built, "/rewind 1 files", answers=Answers("theirs"))
    assert "restored 2 files to before turn 1: a.txt, other.txt" in out and "/redo brings back" in out
    assert (repo / "other.txt").read_text() == "one\ntwo\nthree\n" and not (repo / "a.txt").exists()
    assert "(files undone)" in command(built, "/rewind")
    out = command(built, "/redo")
    assert "restored 2 files as before the undo of turn 2, turn 1: a.txt, other.txt" in out
    assert (repo / "other.txt").read_text() == "one\nTWO\nthree\nmine\n" and (repo / "a.txt").read_text() == "a\n"
    assert "nothing to redo" in command(built, "/redo")
    assert "(files undone)" not in command(built, "/rewind")
    assert "restored 1 file to before turn 2: a.txt" in command(built, "/undo")  # undoable again


def test_the_listing_shows_each_turns_own_files_across_continue(repo: Path) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("write_file", {"path": "gen.txt", "content": "g\n"})),
                                     Reply(text="one")]))
    ask(built, "generate")
    transcript = built.agent.session.transcript
    assert transcript is not None
    transcript.close()
    (repo / "mine.txt").write_text("made between sessions\n")
    (repo / "other.txt").write_text("edited between sessions\n")
    resumed = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": "printf x > cmd.txt"})),
                                       Reply(text="two")]), resume=transcript.path)
    ask(resumed, "run it")
    lines = command(resumed, "/rewind").splitlines()
    assert lines[0].rstrip().endswith("1 file: gen.txt") and lines[1].rstrip().endswith("1 file: cmd.txt")
    command(resumed, "/rewind 1 files")
    assert not (repo / "gen.txt").exists() and not (repo / "cmd.txt").exists()
    assert (repo / "mine.txt").exists() and (repo / "other.txt").read_text() == "edited between sessions\n"


def test_git_ignored_files_a_command_changed_or_deleted_come_back(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.log\nbuild/\nnode_modules/\n")
    (repo / "build").mkdir()
    (repo / "build" / "cache.txt").write_text("cached\n")
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "dep.js").write_text("dependency\n")
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {
        "command": "rm build/cache.txt && echo more >> ignored.log && rm node_modules/dep.js"})), Reply(text="ok")]))
    ask(built, "clean")
    assert not (repo / "build" / "cache.txt").exists()
    out = command(built, "/undo")
    assert "restored 2 files to before turn 1: build/cache.txt, ignored.log" in out
    assert (repo / "build" / "cache.txt").read_text() == "cached\n" and (repo / "ignored.log").read_text() == "log line\n"
    assert not (repo / "node_modules" / "dep.js").exists()  # dependency folders are not kept (stated)


def test_the_turns_contents_outlive_the_users_repository(repo: Path) -> None:
    """A tracked file's content is read from the user's objects while the turn runs; the
    checkpoint copies what the turn changed, so the undo works without them."""
    import shutil

    before = (repo / "other.txt").read_bytes()
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": "printf gone > other.txt"})),
                                     Reply(text="ok")]))
    ask(built, "overwrite")
    shutil.rmtree(repo / ".git")
    assert "restored 1 file to before turn 1: other.txt" in command(built, "/undo")
    assert (repo / "other.txt").read_bytes() == before


def test_an_interrupted_command_still_gets_its_changes_recorded(repo: Path) -> None:
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": "printf x > made.txt; sleep 60"})),
                                     Reply(text="never")]))

    async def go() -> None:
        turn = asyncio.ensure_future(built.agent.ask("make and wait"))
        for _ in range(600):
            if (repo / "made.txt").exists():
                break
            await asyncio.sleep(0.05)
        turn.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await turn

    asyncio.run(go())
    assert built.checkpoints is not None and built.checkpoints.turns()[0].paths == ["made.txt"]
    assert "restored 1 file to before turn 1: made.txt" in command(built, "/undo")
    assert not (repo / "made.txt").exists()


def test_a_large_repository_still_gets_checkpoints() -> None:
    assert Limits().checkpoint_max_files >= 500_000  # the contract: a monorepo keeps its undo


def test_in_the_repl_undo_keeps_the_persons_edits_and_asks_about_a_file_both_changed(workspace: Path,
                                                                                    home: Path) -> None:
    from test_repl_pty import Term

    from nanohermes.testing import FakeServer

    (workspace / "notes.md").write_text("a\nb\nc\n")
    (workspace / "other.txt").write_text("other\n")
    patch = "--- a/notes.md\n+++ b/notes.md\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    with FakeServer() as server:
        server.add(tool_reply(call("write_file", {"path": "gen.txt", "content": "generated\n"}),
                              call("apply_patch", {"diff": patch})), Reply(text="done both"))
        t = Term(workspace, home, server, config={"auto_approve": True})
        try:
            t.prompt()
            t.type("generate and patch")
            t.wait("done both")
            t.prompt()
            assert (workspace / "notes.md").read_text() == "a\nB\nc\n"
            (workspace / "other.txt").write_text("other, edited by hand\n")
            (workspace / "mine.txt").write_text("mine\n")
            (workspace / "notes.md").write_text("a\nB\nc\nmy line\n")
            t.type("/undo")
            t.wait("notes.md: you (or a later turn) changed it after turn 1")
            t.wait("+b")  # the diff from yours to the checkpoint's
            t.wait("[b] Both: merge")
            t.armed()
            t.child.send("b")
            t.wait("restored 2 files to before turn 1: gen.txt, notes.md")
            t.wait("notes.md changed since turn 1: merged")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
    assert not (workspace / "gen.txt").exists()
    assert (workspace / "notes.md").read_text() == "a\nb\nc\nmy line\n"
    assert (workspace / "other.txt").read_text() == "other, edited by hand\n"
    assert (workspace / "mine.txt").read_text() == "mine\n"


@pytest.mark.parametrize("autocrlf", [False, True])
def test_a_repositorys_own_index_starts_the_stat_cache_only_where_git_keeps_bytes_as_they_are(
        workspace: Path, autocrlf: bool) -> None:
    """The first scan of a repository's top folder starts from the repository's index (its
    hashes of unchanged tracked files), unless its git converts files (here core.autocrlf,
    which checks files out with CRLF while the index holds LF): then every file is hashed as
    it is, and an undo still puts back the very bytes."""
    from nanohermes.turn.checkpoints import Store

    git(workspace, "init", "-q", "-b", "main")
    if autocrlf:
        git(workspace, "config", "core.autocrlf", "true")
    for i in range(20):
        (workspace / f"f{i}.txt").write_text(f"line {i}\nsecond\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    for i in range(20):  # checked out again: with autocrlf, as CRLF
        (workspace / f"f{i}.txt").unlink()
    git(workspace, "checkout", "--", ".")
    (workspace / "f3.txt").write_text("changed, not staged\n")
    (workspace / "untracked.txt").write_text("untracked\n")
    before = tree(workspace)
    assert (before["f0.txt"] == b"line 0\r\nsecond\r\n") is autocrlf
    store = Store(workspace, Limits(), frozenset(), session="s0")
    seeded = store.repository is not None and not store.converts()
    assert seeded is not autocrlf
    built = build(workspace, ScriptedLLM([tool_reply(call("run_command", {
        "command": "printf x > f0.txt && rm f1.txt && printf y > f3.txt && rm untracked.txt"})), Reply(text="ok")]))
    ask(built, "change them")
    assert "restored 4 files to before turn 1: f0.txt, f1.txt, f3.txt, untracked.txt" in command(built, "/undo")
    assert tree(workspace) == before


def test_many_changed_files_are_kept_in_one_pack_and_come_back_byte_for_byte(repo: Path) -> None:
    # A formatter over the tree: 60 files rewritten, 40 made (one a symbolic link), none of
    # whose new contents the user's repository holds. Their contents go into one pack, not
    # a file each, and undo and redo bring each back, also once the user's repository is gone.
    for i in range(60):
        (repo / "src" / f"m{i % 6}").mkdir(parents=True, exist_ok=True)
        (repo / "src" / f"m{i % 6}" / f"f{i}.py").write_text(f"value = {i}\n" * (i + 1))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sources")
    before = tree(repo)
    script = ("for f in src/*/*.py; do printf '# formatted\\n' >> \"$f\"; done; mkdir -p gen; "
              "for i in $(seq 1 39); do printf \"made $i\\n\" > gen/g$i.txt; done; ln -s ../other.txt gen/link")
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": script})), Reply(text="done")]))
    ask(built, "format everything")
    after = tree(repo)
    assert built.checkpoints is not None and len(built.checkpoints.turns()[0].paths) == 100
    store = store_dir(repo) / "git"
    loose = {p.parent.name + p.name for p in (store / "objects").glob("??/*")}
    made = {blob_name(after[p] if not p.startswith("gen/link") else b"../other.txt") for p in after if p not in before}
    assert made and not made & loose  # no file a content: they are in a pack
    assert len(loose) < 10  # the commit and tree of the checkpoint, and the few files the first scan kept
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    fsck = subprocess.run(["git", "--git-dir", str(store), "fsck", "--full", "--no-dangling"], env=env,
                          capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    import shutil

    shutil.rmtree(repo / ".git")
    assert "restored 100 files to before turn 1" in command(built, "/undo")
    assert {k: v for k, v in tree(repo).items() if not k.startswith(".git")} == \
        {k: v for k, v in before.items() if not k.startswith(".git")}
    assert "100 files" in command(built, "/redo")
    assert tree(repo) == after


def test_files_a_turn_makes_in_folders_left_alone_for_a_while_are_found(repo: Path) -> None:
    # A workspace whose folders last changed a while ago: the scans after the first read only
    # the folders whose time moved. A turn's new files deep in old folders, in a new folder,
    # beside a changed and a deleted one, are all its changes, and undo takes them back.
    for rel in ("src/a/b/one.py", "src/a/two.py", "docs/guide.md"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tree")
    past = time.time() - 60
    for folder, dirs, _ in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        os.utime(folder, (past, past))
    before = tree(repo)
    script = ("printf new > src/a/b/three.py && printf n > docs/extra.md && mkdir -p gen/x && printf g > gen/x/g.txt "
              "&& printf changed >> src/a/two.py && rm docs/guide.md")
    built = build(repo, ScriptedLLM([Reply(text="looked"), tool_reply(call("run_command", {"command": script})),
                                     Reply(text="done")]))
    ask(built, "look first", "then change")
    assert built.checkpoints is not None
    assert [t.paths for t in built.checkpoints.turns()] == [
        [], ["docs/extra.md", "docs/guide.md", "gen/x/g.txt", "src/a/b/three.py", "src/a/two.py"]]
    assert "restored 5 files to before turn 2" in command(built, "/undo")
    assert tree(repo) == before


def _flagged(ws: Path, flag: str) -> None:
    git(ws, "update-index", flag, "a.txt")
    (ws / "a.txt").write_text("the person's, which git is told not to look at\n")


def _unmerged(ws: Path) -> None:
    git(ws, "checkout", "-q", "-b", "side")
    (ws / "a.txt").write_text("side\n")
    git(ws, "commit", "-q", "-am", "side")
    git(ws, "checkout", "-q", "main")
    (ws / "a.txt").write_text("main\n")
    git(ws, "commit", "-q", "-am", "main")
    with pytest.raises(subprocess.CalledProcessError):
        git(ws, "merge", "-q", "side")  # a conflict on a.txt
    assert git(ws, "ls-files", "-u", "a.txt")


def _in_skipped_folder(ws: Path, where: str = "") -> None:
    (ws / where / "node_modules" / "pkg").mkdir(parents=True)
    (ws / where / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1\n")
    git(ws, "add", "-f", f"{where}node_modules")
    git(ws, "commit", "-q", "-m", "vendored")


def _submodule(ws: Path) -> None:
    (ws / "sm").mkdir()
    git(ws / "sm", "init", "-q")
    (ws / "sm" / "x.txt").write_text("inside\n")
    git(ws / "sm", "add", "x.txt")
    git(ws / "sm", "commit", "-q", "-m", "sub")
    git(ws, "add", "sm")  # its commit, as a gitlink entry
    git(ws, "commit", "-q", "-m", "with a submodule")


def _converted(ws: Path) -> None:
    (ws / ".gitattributes").write_text("*.txt text eol=crlf\n")
    git(ws, "add", ".gitattributes")
    git(ws, "commit", "-q", "-m", "attributes")
    (ws / "a.txt").unlink()
    git(ws, "checkout", "--", "a.txt")  # checked out with CRLF; the index holds LF
    past = time.time() - 60
    os.utime(ws / "a.txt", (past, past))
    git(ws, "update-index", "-q", "--refresh")  # the index's stat of it is current, not racy
    assert (ws / "a.txt").read_bytes() == b"committed\r\n"


@pytest.mark.parametrize("setup", [
    pytest.param(_converted, id="gitattributes"),
    pytest.param(lambda ws: _flagged(ws, "--assume-unchanged"), id="assume-unchanged"),
    pytest.param(lambda ws: _flagged(ws, "--skip-worktree"), id="skip-worktree"),
    pytest.param(_unmerged, id="unmerged"),
    pytest.param(_in_skipped_folder, id="tracked-in-a-skipped-folder"),
    pytest.param(lambda ws: _in_skipped_folder(ws, "lib/"), id="tracked-in-a-skipped-folder-below"),
    pytest.param(_submodule, id="submodule"),
    pytest.param(lambda ws: None, id="plain"),
])
def test_a_first_scan_from_the_repositorys_index_leaves_out_what_it_would_not_keep(workspace: Path,
                                                                                   setup: Any) -> None:
    """The first session of a repository starts from the repository's own index, but not from
    an entry git does not compare with the file (assumed unchanged, skip-worktree), an
    unmerged one, a file in a folder checkpoints skip or a submodule, nor at all from the
    index of a tree whose .gitattributes converts files: each is dropped or hashed as it is,
    so the turn's change to it is recorded and undone byte for byte like any other, and what
    checkpoints leave out stays out."""
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "a.txt").write_text("committed\n")
    (workspace / "target").write_text("a file named like a skipped folder\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    setup(workspace)
    before = tree(workspace)
    script = ("printf turn > a.txt && printf t > target && for d in node_modules lib/node_modules; do "
              "mkdir -p $d/pkg && printf n > $d/pkg/index.js; done && { [ ! -d sm ] || printf changed > sm/x.txt; }")
    built = build(workspace, ScriptedLLM([tool_reply(call("run_command", {"command": script})), Reply(text="ok")]))
    ask(built, "change them")
    assert built.checkpoints is not None and not built.checkpoints.disabled
    assert built.checkpoints.turns()[0].paths == ["a.txt", "target"]
    assert "restored 2 files to before turn 1: a.txt, target" in command(built, "/undo")
    after = tree(workspace)
    left_out = {p for p in after if p.startswith(("node_modules/", "lib/node_modules/", "sm/"))}
    assert {p: v for p, v in after.items() if p not in left_out} == \
        {p: v for p, v in before.items() if p not in left_out}


def test_many_files_with_odd_names_are_found_in_the_index_and_come_back(repo: Path) -> None:
    # Past a few dozen paths, what the index holds for them is looked up in one listing of
    # the whole index, sorted as git sorts it: spaces, tabs, accents and a name that is not
    # UTF-8 sort among the rest, and each is found.
    script = ("for i in $(seq 10 79); do printf \"made $i\" > \"odd $i $(printf 'tab\\there') é.txt\"; done; "
              "mkdir -p 'a b' && printf deep > 'a b/ü'; printf raw > \"$(printf 'latin\\377')\"")
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": script})), Reply(text="done"),
                                     Reply(text="seen")]))
    before = tree(repo)
    ask(built, "make them")
    after = tree(repo)
    made = sorted(p for p in after if p not in before)
    assert len(made) == 72 and "odd 10 tab\there é.txt" in made and "a b/ü" in made
    assert built.checkpoints is not None and built.checkpoints.turns()[0].paths == made
    assert "restored 72 files to before turn 1" in command(built, "/undo")
    assert tree(repo) == before
    ask(built, "and now?")  # the model is told, the name that is not UTF-8 escaped as git quotes it
    told = [m.content for m in built.agent.session.history if m.role == "user" and "<user-restore" in m.content]
    assert len(told) == 1 and "latin\\xff, odd 10" in told[0]
    command(built, "/redo")
    assert tree(repo) == after



@pytest.mark.parametrize("count", [6, 40])
def test_files_a_long_command_made_come_back_as_git_hashed_them_with_their_modes(repo: Path, count: int) -> None:
    # Files a command made and then left alone for a while (it went on building) did not
    # change while the scan after the turn looked at them, nor shortly before: they are named
    # as git hashed them into the index, their modes taken from their stat. A few (copied into
    # the store one by one) and many (kept as one pack), regular, executable and a symbolic
    # link, with a tracked file made executable, come back byte for byte and mode for mode.
    from nanohermes.turn.checkpoints.newfiles import RACY_NS

    def state() -> dict[str, tuple[bytes, int]]:
        return {p: (v, os.lstat(repo / p).st_mode) for p, v in tree(repo).items() if not p.startswith(".git/")}

    script = (f"mkdir new && for i in $(seq 1 {count}); do printf \"made $i\" > new/f$i.txt; done; "
              "printf '#!/bin/sh\\n' > new/run.sh; chmod +x new/run.sh; ln -s f1.txt new/link; "
              f"printf more >> other.txt; chmod +x other.txt; sleep {RACY_NS / 1e9 + 0.2}")
    before = state()
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": script})), Reply(text="ok")]))
    ask(built, "build")
    after = state()
    assert built.checkpoints is not None and len(built.checkpoints.turns()[0].paths) == count + 3
    assert f"restored {count + 3} files to before turn 1" in command(built, "/undo")
    assert state() == before
    command(built, "/redo")
    assert state() == after

