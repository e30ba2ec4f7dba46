"""The system prompt's AGENTS.md chain: order, de-duplication, budget and the /context listing."""

from __future__ import annotations

import os
from pathlib import Path

from nanohermes.turn.context import context_lines, doc_chain, load_project_docs, system_prompt
from nanohermes.testing import FakeServer, Reply


def nested_repo(tmp_path: Path, home: Path) -> tuple[Path, Path, Path, Path]:
    """A global AGENTS.md, a repo root one, one in a sub-package and one in the workspace."""
    cfg = home / ".config" / "nanohermes"
    cfg.mkdir(parents=True)
    root = tmp_path / "repo"
    ws = root / "pkg" / "app"
    ws.mkdir(parents=True)
    (root / ".git").mkdir()
    (cfg / "AGENTS.md").write_text("G" * 10)
    (root / "AGENTS.md").write_text("R" * 10)
    (root / "pkg" / "AGENTS.md").write_text("P" * 10)
    (ws / "AGENTS.md").write_text("W" * 10)
    return cfg, root, ws, tmp_path


def test_chain_runs_global_then_root_down_to_the_workspace(tmp_path: Path, home: Path) -> None:
    cfg, root, ws, _ = nested_repo(tmp_path, home)
    (tmp_path / "AGENTS.md").write_text("above the repository: not part of the chain")
    assert doc_chain(ws, cfg) == [cfg / "AGENTS.md", root / "AGENTS.md", root / "pkg" / "AGENTS.md", ws / "AGENTS.md"]
    docs = load_project_docs(ws, 20_000, config_dir=cfg)
    text = docs.text
    assert text.index("G" * 10) < text.index("R" * 10) < text.index("P" * 10) < text.index("W" * 10)
    assert "above the repository" not in text
    assert docs.note == ""


def test_same_file_reached_twice_is_loaded_once(tmp_path: Path, home: Path) -> None:
    cfg, root, ws, _ = nested_repo(tmp_path, home)
    (ws / "AGENTS.md").unlink()
    os.symlink(root / "AGENTS.md", ws / "AGENTS.md")  # the workspace's file is the root's, by real path
    chain = doc_chain(ws, cfg)
    assert chain == [cfg / "AGENTS.md", root / "AGENTS.md", root / "pkg" / "AGENTS.md"]


def test_budget_keeps_the_most_specific_files_whole_first(tmp_path: Path, home: Path) -> None:
    cfg, root, ws, _ = nested_repo(tmp_path, home)
    docs = load_project_docs(ws, 25, config_dir=cfg)  # room for W and P whole, 5 chars of R, none of G
    assert [(f.path.parent.name, f.kept, f.status) for f in docs.files] == [
        ("nanohermes", 0, "omitted"), ("repo", 5, "cut"), ("pkg", 10, "whole"), ("app", 10, "whole")]
    assert "W" * 10 in docs.text and "P" * 10 in docs.text
    assert "RRRRR\n… (5 chars of this file cut)" in docs.text
    assert "GGG" not in docs.text
    assert docs.note == (
        "[project instructions over the 25-char budget (limit project_docs_chars); the files nearest the "
        f"workspace were kept whole first: {root / 'AGENTS.md'} kept 5 of 10 chars; "
        f"{cfg / 'AGENTS.md'} left out (10 chars)]")
    assert docs.text.endswith(docs.note)


def test_no_repository_means_only_the_workspace_file(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "plain" / "ws"
    ws.mkdir(parents=True)
    (tmp_path / "plain" / "AGENTS.md").write_text("parent")
    (ws / "AGENTS.md").write_text("mine")
    assert doc_chain(ws, home / ".config" / "nanohermes") == [ws / "AGENTS.md"]


def test_context_listing_names_files_and_sizes(tmp_path: Path, home: Path) -> None:
    cfg, root, ws, _ = nested_repo(tmp_path, home)
    lines = context_lines(load_project_docs(ws, 25, config_dir=cfg))
    assert lines == [
        "project instructions: 4 files, 25 of 25 chars used",
        f"  {cfg / 'AGENTS.md'}  10 chars (omitted: 0 kept)",
        f"  {root / 'AGENTS.md'}  10 chars (cut: 5 kept)",
        f"  {root / 'pkg' / 'AGENTS.md'}  10 chars",
        f"  {ws / 'AGENTS.md'}  10 chars",
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert context_lines(load_project_docs(empty, 10, config_dir=empty)) == [
        "no AGENTS.md or CLAUDE.md loaded (looked in the config folder and from the repository root to the workspace)"]


def test_prompt_carries_docs_after_environment(tmp_path: Path, home: Path) -> None:
    cfg, _root, ws, _ = nested_repo(tmp_path, home)
    prompt = system_prompt(ws, docs=load_project_docs(ws, 100, config_dir=cfg), skill_index="# Skills\n- a: b")
    assert prompt.index(f"Workspace: {ws}") < prompt.index("# Project instructions (AGENTS.md, CLAUDE.md)") < prompt.index("# Skills")


def test_cli_sends_the_chain_and_honours_a_lowered_limit(turn, server: FakeServer, tmp_path: Path, home: Path) -> None:
    _cfg, root, ws, _ = nested_repo(tmp_path, home)
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server, cwd=ws, config={"limits": {"project_docs_chars": 15}})
    assert r.code == 0, r.err
    system = server.requests[0]["messages"][0]["content"]
    assert "W" * 10 in system and "PPPPP\n… (5 chars of this file cut)" in system
    assert f"{root / 'AGENTS.md'} left out (10 chars)" in system


def test_claude_code_files_join_the_chain_beside_agents_md(tmp_path: Path, home: Path) -> None:
    """CLAUDE.md alone is read; with AGENTS.md both are, in each folder of the same chain."""
    cfg, root, ws, _ = nested_repo(tmp_path, home)
    (root / "CLAUDE.md").write_text("root claude")
    (ws / "CLAUDE.md").write_text("ws claude")
    (ws / ".claude").mkdir()
    (ws / ".claude" / "CLAUDE.md").write_text("ws dot-claude")
    (ws / "CLAUDE.local.md").write_text("ws local")
    (tmp_path / "CLAUDE.md").write_text("above the repository")  # outside the chain's bounds
    assert doc_chain(ws, cfg) == [cfg / "AGENTS.md", root / "AGENTS.md", root / "CLAUDE.md", root / "pkg" / "AGENTS.md",
                                  ws / "AGENTS.md", ws / "CLAUDE.md", ws / ".claude" / "CLAUDE.md", ws / "CLAUDE.local.md"]
    alone = tmp_path / "alone"
    (alone / ".git").mkdir(parents=True)
    (alone / "CLAUDE.md").write_text("only claude")
    text = load_project_docs(alone, 1000, config_dir=cfg).text
    assert f"## {alone / 'CLAUDE.md'}\nonly claude" in text


def test_a_claude_md_linked_to_agents_md_is_read_once(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("shared")
    (ws / "CLAUDE.md").symlink_to("AGENTS.md")
    assert doc_chain(ws, home / ".config" / "nanohermes") == [ws / "AGENTS.md"]


def test_claude_md_files_count_against_the_same_budget(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("A" * 10)
    (ws / "CLAUDE.md").write_text("C" * 10)
    (ws / "CLAUDE.local.md").write_text("L" * 10)
    docs = load_project_docs(ws, 25, config_dir=home)
    assert [(f.path.name, f.kept) for f in docs.files] == [("AGENTS.md", 5), ("CLAUDE.md", 10), ("CLAUDE.local.md", 10)]
    assert f"{ws / 'AGENTS.md'} kept 5 of 10 chars" in docs.note


def test_cli_sends_claude_md_and_claude_local_md(turn, server: FakeServer, workspace: Path) -> None:
    (workspace / "CLAUDE.md").write_text("Always answer in French.")
    (workspace / "CLAUDE.local.md").write_text("My name is Ada.")
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    assert r.code == 0, r.err
    system = server.requests[0]["messages"][0]["content"]
    assert system.index("Always answer in French.") < system.index("My name is Ada.")
