"""Skills: discovery in the three folders, the prompt index, loading, and the error paths."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nanohermes.assemble import build_agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.tools.skills import SkillTool, discover_skills, skill_index
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply


def make_skill(root: Path, folder: str, front: str, body: str = "Do the thing.\n", files: dict[str, str] | None = None) -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}")
    for rel, text in (files or {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return d / "SKILL.md"


@pytest.fixture
def cfg_dir(home: Path) -> Path:
    return home / ".config" / "nanohermes"


def test_discovers_the_three_folders_in_order_first_name_wins(workspace: Path, cfg_dir: Path) -> None:
    make_skill(workspace / ".nanohermes" / "skills", "deploy", "name: deploy\ndescription: Ship it (project).")
    make_skill(cfg_dir / "skills", "deploy", "name: deploy\ndescription: Ship it (user).")
    make_skill(cfg_dir / "skills", "review", "name: review\ndescription: >\n  Review a change\n  carefully.")
    claude = make_skill(workspace / ".claude" / "skills", "pdf", "name: pdf\ndescription: Work with PDFs.")
    found = discover_skills(workspace, config_dir=cfg_dir)
    assert [(s.name, s.description) for s in found.skills] == [
        ("deploy", "Ship it (project)."), ("review", "Review a change carefully."), ("pdf", "Work with PDFs.")]
    assert found.skills[2].path == claude
    [clash] = found.warnings
    assert clash.startswith(f"{cfg_dir / 'skills' / 'deploy' / 'SKILL.md'}: skill `deploy` ") and clash.endswith("; skipped")
    assert f" {workspace / '.nanohermes' / 'skills' / 'deploy' / 'SKILL.md'}, " in clash  # the one that wins


@pytest.mark.parametrize("front, why", [
    ("description: no name", "front matter needs a non-empty string `name`"),
    ("name: x\ndescription: ''", "front matter needs a non-empty string `description`"),
    ("name: x\njust prose\ndescription: d", "front matter line 3 is not `key: value`: 'just prose'"),
    ("- a list", "front matter line 2 is a list item under no key: '- a list'"),
])
def test_bad_front_matter_is_a_warning_naming_the_file(workspace: Path, cfg_dir: Path, front: str, why: str) -> None:
    bad = make_skill(workspace / ".nanohermes" / "skills", "bad", front)
    make_skill(workspace / ".nanohermes" / "skills", "good", "name: good\ndescription: fine")
    found = discover_skills(workspace, config_dir=cfg_dir)
    assert [s.name for s in found.skills] == ["good"]
    assert len(found.warnings) == 1
    assert found.warnings[0].startswith(f"{bad}: {why}")
    assert found.warnings[0].endswith("; skill skipped")


def test_front_matter_is_read_as_claude_code_reads_it(workspace: Path, cfg_dir: Path, home: Path) -> None:
    """A value YAML cannot parse (a colon in a description) is its text; `~/.claude/skills` is
    searched after the other folders."""
    make_skill(home / ".claude" / "skills", "triage", "name: triage\ndescription: Use when: a test fails in CI\n"
                                                       "allowed-tools: Read, Grep")
    make_skill(home / ".claude" / "skills", "deploy", "name: deploy\ndescription: the user's, hidden")
    make_skill(workspace / ".claude" / "skills", "deploy", "name: deploy\ndescription: the project's")
    found = discover_skills(workspace, config_dir=cfg_dir)
    assert [(s.name, s.description, s.owner) for s in found.skills] == [
        ("deploy", "the project's", "project"), ("triage", "Use when: a test fails in CI", "user")]


def test_missing_front_matter_is_a_warning(workspace: Path, cfg_dir: Path) -> None:
    d = workspace / ".nanohermes" / "skills" / "plain"
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text("# Just markdown\n")
    found = discover_skills(workspace, config_dir=cfg_dir)
    assert found.skills == [] and found.warnings[0].startswith(f"{d / 'SKILL.md'}: no YAML front matter")


def test_index_is_one_line_per_skill_and_bounded(workspace: Path, cfg_dir: Path) -> None:
    root = workspace / ".nanohermes" / "skills"
    make_skill(root, "a", "name: a\ndescription: " + "x" * 30)
    make_skill(root, "b", "name: b\ndescription: second")
    make_skill(root, "c", "name: c\ndescription: third")
    found = discover_skills(workspace, config_dir=cfg_dir)
    full = skill_index(found, Limits())
    assert full.splitlines()[2:] == ["- a: " + "x" * 30, "- b: second", "- c: third"]
    short = skill_index(found, Limits(skill_description_chars=3, skill_index_chars=20))
    assert short.splitlines()[2:] == [
        "- a: xxx…", "- b: sec…",
        "… 1 more skills not listed (index limit 20 chars; limit skill_index_chars); the skill tool loads any skill by name"]
    assert skill_index(discover_skills(workspace / "none", config_dir=cfg_dir), Limits()) == ""


def load(tool: SkillTool, name: str, limits: Limits | None = None) -> str:
    from nanohermes.tools import Attempt, ToolContext

    ctx = ToolContext(workspace=Path("."), limits=limits or Limits(), config=Config())
    return asyncio.run(tool.run(tool.parse({"name": name}), ctx, Attempt()))


def test_skill_tool_returns_body_and_lists_other_files(workspace: Path, cfg_dir: Path) -> None:
    path = make_skill(workspace / ".nanohermes" / "skills", "deploy", "name: deploy\ndescription: Ship it.",
                      body="Run scripts/ship.sh, then check docs/after.md.\n",
                      files={"scripts/ship.sh": "echo", "docs/after.md": "ok"})
    tool = SkillTool(skills=discover_skills(workspace, config_dir=cfg_dir))
    assert load(tool, "deploy") == "\n".join([
        f"# Skill deploy  (folder {path.parent})", "", "Run scripts/ship.sh, then check docs/after.md.", "",
        f"Other files in {path.parent} (open them with read_file):", "docs/after.md", "scripts/ship.sh"])
    assert tool.spec()["function"]["parameters"]["properties"]["name"]["enum"] == ["deploy"]


def test_skill_body_and_file_list_limits_lowered(workspace: Path, cfg_dir: Path) -> None:
    path = make_skill(workspace / ".nanohermes" / "skills", "big", "name: big\ndescription: d", body="abcdefghij\n",
                      files={f"f{i}.txt": "" for i in range(5)})
    tool = SkillTool(skills=discover_skills(workspace, config_dir=cfg_dir))
    out = load(tool, "big", Limits(skill_body_chars=3, skill_files_listed=2))
    assert out.splitlines()[2:] == [
        "abc", "",
        f"… skill body truncated: showing the first 3 of 10 chars; read the rest with read_file {path}", "",
        f"Other files in {path.parent} (open them with read_file):", "f0.txt", "f1.txt",
        "… 5 files, showing the first 2; use list_dir or glob for the rest"]


def test_unknown_skill_lists_the_available_ones(workspace: Path, cfg_dir: Path) -> None:
    root = workspace / ".nanohermes" / "skills"
    make_skill(root, "a", "name: a\ndescription: d")
    make_skill(root, "b", "name: b\ndescription: d")
    tool = SkillTool(skills=discover_skills(workspace, config_dir=cfg_dir))
    from nanohermes.tools import ToolError

    with pytest.raises(ToolError, match=r"^unknown skill zzz; available: a, b$"):
        load(tool, "zzz")


def test_skill_tool_and_index_only_when_a_skill_exists(workspace: Path) -> None:
    built = build_agent(Config(), workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    assert "skill" not in [t.name for t in built.agent.runtime.tools]
    assert "# Skills" not in built.agent.full_prompt()
    make_skill(workspace / ".nanohermes" / "skills", "a", "name: a\ndescription: the a skill")
    built = build_agent(Config(), workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    names = [t.name for t in built.agent.runtime.tools]
    assert names[-1] == "skill" and names[:-1] == sorted(names[:-1])
    assert "- a: the a skill" in built.agent.full_prompt()


def test_cli_warns_about_a_bad_skill_and_loads_a_good_one(cli, server: FakeServer, workspace: Path) -> None:
    bad = make_skill(workspace / ".claude" / "skills", "bad", "name: bad")
    make_skill(workspace / ".nanohermes" / "skills", "good", "name: good\ndescription: the good one", body="Step 1.\n")
    server.add(tool_reply(call("skill", {"name": "good"})), Reply(text="done"))
    r = cli("-p", "use it", server=server)
    assert r.code == 0, r.err
    assert f"nanohermes: warning: {bad}: " in r.err and " `description`;" in r.err and "skipped" in r.err
    assert "- good: the good one" in server.requests[0]["messages"][0]["content"]
    assert server.requests[1]["messages"][-1]["content"].splitlines()[2] == "Step 1."


def test_runtime_clamps_skill_output(workspace: Path, cfg_dir: Path) -> None:
    make_skill(workspace / ".nanohermes" / "skills", "s", "name: s\ndescription: d", body="y" * 500)
    config = Config(limits={"max_output": 100})
    built = build_agent(config, workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    out = asyncio.run(built.agent.runtime.run_calls([ToolCall("1", "skill", '{"name": "s"}')]))
    assert "… output truncated (" in (out[0].content or "")
