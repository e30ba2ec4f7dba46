"""memory_save / memory_search over a real SQLite FTS5 file: scope, duplicates, ranking, limits,
a corrupt or locked database, and several nanohermes processes at once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.dirs import data_home
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy
from nanohermes.turn.runtime import Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import memory

REPO = Path(__file__).resolve().parent.parent


def db() -> Path:
    return data_home() / "memory.db"


def run(workspace: Path, name: str, args: dict[str, Any], *, limits: Limits | None = None, mode: str = "default",
        answers: list[Any] | None = None) -> str:
    """One call through the runtime; a global save is asked, and answered yes unless `answers` says."""
    if answers is None:
        answers = ["once"] if args.get("scope") == "global" else []
    rt = Runtime(tools=memory.tools(), config=Config(), workspace=workspace, ui=RecordingUI(answers=list(answers)),
                 policy=Policy(mode=mode), limits=limits or Limits())
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="m", name=name, arguments=json.dumps(args))]))
    return msg.content or ""


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def found(out: str) -> list[tuple[str, str]]:
    """memory_search's rows: (date, scope and id, text), best first."""
    rows = [line.split(". [", 1)[1] for line in out.splitlines()[1:] if line[:1].isdigit()]
    return [tuple(row.split("] ", 1)) for row in rows]  # type: ignore[misc]


def test_save_then_search_shows_date_scope_and_id(workspace: Path) -> None:
    suite, tabs = "The test suite runs with pytest -q from the repo root.", "The user prefers tabs over spaces."
    assert run(workspace, "memory_save", {"text": suite}).startswith("Remembered (#1, project): ")
    assert run(workspace, "memory_save", {"text": tabs, "scope": "global"}).startswith("Remembered (#2, global): ")
    root = memory.project_root(workspace)
    assert [(m.id, m.scope, m.text) for m in memory.list_entries(workspace)] == [(2, "global", tabs), (1, root, suite)]
    out = run(workspace, "memory_search", {"query": "how do I run the tests"})
    assert out.startswith('1 memories match "how do I run the tests"')
    assert found(out) == [(f"{today()}, project, #1", suite)]
    assert db().is_file()


def test_line_breaks_are_folded_into_one_line(workspace: Path) -> None:
    out = run(workspace, "memory_save", {"text": "Deploys go\nthrough   CI only."})
    assert [m.text for m in memory.list_entries(workspace)] == ["Deploys go through CI only."]
    assert out.endswith(": Deploys go through CI only.")


def test_near_duplicate_is_skipped(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "Use ruff for linting, not flake8."})
    out = run(workspace, "memory_save", {"text": "use Ruff for linting - not flake8"})
    assert out.startswith(f"Already remembered (#1, {today()}, project): ") and "Not saved" in out, out
    assert [m.text for m in memory.list_entries(workspace)] == ["Use ruff for linting, not flake8."]
    assert run(workspace, "memory_save", {"text": "Use ruff for formatting too."}).startswith("Remembered (#2, ")
    assert len(memory.list_entries(workspace)) == 2


def test_same_text_in_another_scope_is_not_a_duplicate(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "Answer in English."})
    assert run(workspace, "memory_save", {"text": "Answer in English.", "scope": "global"}).startswith(
        "Remembered (#2, global)")


def test_text_limit_lowered(workspace: Path) -> None:
    out = run(workspace, "memory_save", {"text": "x" * 21}, limits=Limits(memory_text_chars=20))
    assert out == ("ERROR: text is 21 chars (> 20); memory_save takes one concise sentence: shorten it or save "
                   "separate facts separately")
    assert run(workspace, "memory_save", {"text": "y" * 501}).startswith("ERROR: text is 501 chars (> 500)")
    assert run(workspace, "memory_save", {"text": "z" * 20}, limits=Limits(memory_text_chars=20)).startswith("Remembered")


def test_empty_arguments_fail_before_any_io(workspace: Path) -> None:
    assert run(workspace, "memory_save", {"text": "  "}).startswith("ERROR: memory_save: text ")
    assert run(workspace, "memory_search", {"query": ""}).startswith("ERROR: memory_search: query ")
    assert not db().exists()


def test_project_scope_is_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    other = tmp_path / "other"
    other.mkdir()
    run(repo / "pkg" / "sub", "memory_save", {"text": "Migrations live in pkg/migrations."})
    run(other, "memory_save", {"text": "Other project: migrations are SQL files.", "scope": "project"})
    run(other, "memory_save", {"text": "Always explain migrations before running them.", "scope": "global"})
    # From the repository root: its own memory and the global one, not the other project's.
    out = run(repo, "memory_search", {"query": "migrations"})
    assert "Migrations live in pkg/migrations." in out and "Always explain migrations" in out
    assert "Other project" not in out
    assert memory.project_root(repo / "pkg" / "sub") == str(repo.resolve())
    assert memory.project_root(other) == str(other.resolve())


def test_ranked_by_bm25_best_first(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "The cache directory is .cache in the workspace."})
    best = "Clear the build cache with make clean-cache before a release build."
    run(workspace, "memory_save", {"text": best})
    run(workspace, "memory_save", {"text": "Release notes go in CHANGES.md."})
    out = run(workspace, "memory_search", {"query": "release build cache"})
    assert out.startswith('3 memories match "release build cache"')
    assert len(found(out)) == 3 and found(out)[0][1] == best


def test_word_stems_match(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "Benchmarks are running nightly."})
    assert "Benchmarks are running nightly." in run(workspace, "memory_search", {"query": "benchmark runs"})


def test_no_match_says_how_many_there_are(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "Alpha."})
    out = run(workspace, "memory_search", {"query": "zebra"})
    assert out.startswith('No memories match "zebra" ') and "(1 memories " in out, out


def test_result_limit_lowered(workspace: Path) -> None:
    for i in range(5):
        run(workspace, "memory_save", {"text": f"Server {i} runs nginx version {i}.{i * 7}."})
    out = run(workspace, "memory_search", {"query": "nginx", "limit": 10}, limits=Limits(memory_search_max_results=2))
    assert out.splitlines()[0] == '2 memories match "nginx", best first:'
    assert len([ln for ln in out.splitlines() if ln[:2] in ("1.", "2.", "3.")]) == 2
    assert out.endswith("\n\n(limit 10 was clamped to 2)")
    assert run(workspace, "memory_search", {"query": "nginx", "limit": 3}).startswith('3 memories match "nginx"')


def test_fts_syntax_in_the_query_is_inert(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "NEAR the door is the AND gate."})
    out = run(workspace, "memory_search", {"query": 'AND OR NOT "unbalanced ( * door'})
    assert out.startswith('1 memories match')


def test_corrupt_database_is_a_clear_error(workspace: Path) -> None:
    db().parent.mkdir(parents=True)
    db().write_bytes(b"this is not sqlite at all" * 100)
    out = run(workspace, "memory_save", {"text": "anything"})
    assert out.startswith(f"ERROR: memory database {db()} ") and "corrupt" in out, out
    assert f"(mv {db()} {db()}.bak)" in out
    assert run(workspace, "memory_search", {"query": "anything"}) == out


def test_locked_database_is_a_clear_error_after_the_busy_timeout(workspace: Path) -> None:
    run(workspace, "memory_save", {"text": "First memory."})
    holder = sqlite3.connect(db(), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        out = run(workspace, "memory_save", {"text": "Second memory."}, limits=Limits(memory_busy_timeout_secs=0.2))
        assert out == (f"ERROR: memory database {db()} is locked by another process (waited 0.2 s); "
                       "try again in a moment")
        # Readers are not blocked by a writer (WAL).
        assert run(workspace, "memory_search", {"query": "first"}).startswith("1 memories match")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run(workspace, "memory_save", {"text": "Second memory."}).startswith("Remembered (#2")


def test_list_and_delete_entries(workspace: Path, tmp_path: Path) -> None:
    run(workspace, "memory_save", {"text": "One."})
    run(workspace, "memory_save", {"text": "Two, everywhere.", "scope": "global"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run(elsewhere, "memory_save", {"text": "Three, elsewhere."})
    assert [m.text for m in memory.list_entries(workspace)] == ["Two, everywhere.", "One."]
    assert [m.text for m in memory.list_entries(workspace, all_projects=True)] == [
        "Three, elsewhere.", "Two, everywhere.", "One."]
    assert memory.delete_entry(1) is True
    assert memory.delete_entry(1) is False
    assert [m.id for m in memory.list_entries(workspace)] == [2]
    assert run(workspace, "memory_search", {"query": "one"}).startswith('No memories match "one"')


def test_flags_and_plan_mode(workspace: Path) -> None:
    save, search = memory.MemorySave(), memory.MemorySearch()
    s = search.parse({"query": "q"})
    assert search.read_only(s) and search.concurrency_safe(s)
    assert not save.concurrency_safe(save.parse({"text": "t"}))
    # Plan mode changes nothing that outlives the session; reading memories stays open.
    assert run(workspace, "memory_save", {"text": "Planning note."}, mode="plan") == (
        "ERROR: memory_save is not available in plan mode")
    assert run(workspace, "memory_search", {"query": "note"}, mode="plan").startswith("No memories match")


def test_saved_in_one_process_found_in_the_next(cli, workspace: Path) -> None:
    with FakeServer() as first:
        first.add(tool_reply(call("memory_save", {"text": "The staging database is on port 5433."}, id="s")),
                  Reply(text="noted"))
        r = cli("-p", "remember the staging port", server=first)
        assert r.code == 0, r.err
        assert first.requests[1]["messages"][-1]["content"].startswith("Remembered (#1, project): ")
        assert [m.text for m in memory.list_entries(workspace)] == ["The staging database is on port 5433."]
        assert first.violations == []
    with FakeServer() as second:
        second.add(tool_reply(call("memory_search", {"query": "staging database port"}, id="q")), Reply(text="5433"))
        r = cli("-p", "which port is staging on?", server=second)
        assert r.code == 0, r.err
        out = second.requests[1]["messages"][-1]["content"]
        assert found(out) == [(f"{today()}, project, #1", "The staging database is on port 5433.")]
        assert second.violations == []


def test_two_processes_writing_at_once(cli, workspace: Path) -> None:
    per_process = 15
    results: dict[str, Any] = {}
    servers = {name: FakeServer().start() for name in ("a", "b")}
    for name, s in servers.items():
        calls = [call("memory_save", {"text": f"Process {name} fact number {i} about subsystem {name}{i}."})
                 for i in range(per_process)]
        s.add(tool_reply(*calls), Reply(text="done"))

    def go(name: str) -> None:
        results[name] = cli("-p", "save them", server=servers[name])

    threads = [threading.Thread(target=go, args=(n,)) for n in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        for name, s in servers.items():
            assert results[name].code == 0, results[name].err
            answers = [m["content"] for m in s.requests[1]["messages"] if m["role"] == "tool"]
            assert len(answers) == per_process
            assert all(a.startswith("Remembered (#") for a in answers), answers
            assert s.violations == []
    finally:
        for s in servers.values():
            s.stop()
    texts = {m.text for m in memory.list_entries(workspace)}
    assert len(texts) == 2 * per_process


def test_two_writer_processes_hammering_the_store(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from nanohermes.tools.memory import MemoryStore\n"
        "s = MemoryStore(Path(sys.argv[1]))\n"
        "for i in range(100):\n"
        "    s.save(f'writer {sys.argv[2]} wrote distinct entry {i} {sys.argv[2] * (i % 7)}', 'global')\n"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), w], env=env, stderr=subprocess.PIPE, text=True)
             for w in ("p", "q")]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 200
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'writer'").fetchone()[0] == 200
    conn.close()


@pytest.mark.parametrize("tool", ["memory_save", "memory_search"])
def test_descriptions_follow_the_spec(tool: str) -> None:
    by_name = {t.name: t for t in memory.tools()}
    if tool == "memory_save":
        assert "one concise, self-contained sentence" in by_name[tool].description
    else:
        assert "memory_save" in by_name[tool].description


@pytest.mark.parametrize("a,b,same", [
    ("Use ruff for linting, not flake8.", "use Ruff for linting - not flake8", True),
    ("The user prefers tabs over spaces.", "The user prefers tab over spaces.", True),
    ("Always recieve webhooks on /hooks.", "Always receive webhooks on /hooks.", True),
    ("Staging is on port 5433.", "Staging is on port 5434.", False),
    ("Use the cache.", "Never use the cache.", False),
    ("writer p wrote entry", "writer q wrote entry", False),
    ("Enable strict mode.", "Disable strict mode.", False),
    ("The user prefers tabs.", "The user prefers tabs in Go files.", False),
])
def test_near_duplicate_rule(a: str, b: str, same: bool) -> None:
    assert memory.near_duplicate(a, b) is same
