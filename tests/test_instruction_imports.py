"""CLAUDE.md as Claude Code reads it: `@path` imports (beside the importing file, `~/`,
absolute; not in code; `doc_import_depth` hops; cycles cut), each through the one reader; and
the instruction files of a subfolder, loaded into the result of the first call that reads or
edits a file under it, once per session, within the project docs budget."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from test_own_reads import reason
from nanohermes.assemble import build_agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.turn.context import import_refs, load_project_docs
from nanohermes.common.events import RecordingUI
from nanohermes.common.messages import Message
from nanohermes.guard.ownreads import OwnReader
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply

MARK = "IMPORTS-MARK-2b7c"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def system_of(server: FakeServer) -> str:
    return str(server.requests[0]["messages"][0]["content"])


def results_of(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


# -- imports ----------------------------------------------------------------------------------

def test_import_refs_skip_code_emails_and_prose() -> None:
    text = "\n".join([
        "See @docs/a.md and @./b.md, or @/abs/c.md and @~/d.md.",
        "Not `@docs/span.md` nor ``a `@x` b``; mail me@example.com; an @ alone; @@twice.",
        "```", "@docs/fenced.md", "```",
        "~~~~", "@docs/tilde-fenced.md", "~~~", "still @docs/fenced-too.md", "~~~~",
        r"A path with a space: @my\ notes.md",
    ])
    assert import_refs(text) == ["docs/a.md", "./b.md,", "/abs/c.md", "~/d.md.", "my notes.md"]


def test_imports_are_read_beside_the_importer_and_from_home(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                           home: Path) -> None:
    write(workspace / "CLAUDE.md", "Rules: @docs/style.md, @./docs/nested/deep.md and `@docs/not.md`.\n"
                                   "```\n@docs/not-either.md\n```\n")
    write(workspace / "docs" / "style.md", "STYLE: tabs. Also @nested/deep.md")  # beside itself
    write(workspace / "docs" / "nested" / "deep.md", "DEEP rules")
    write(workspace / "docs" / "not.md", "NOT-IN-SPAN")
    write(workspace / "docs" / "not-either.md", "NOT-IN-FENCE")
    write(home / ".claude" / "CLAUDE.md", "Mine: @~/prefs/me.md")
    write(home / "prefs" / "me.md", "ME: short answers")
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    assert r.code == 0, r.err
    system = system_of(server)
    assert "NOT-IN-SPAN" not in system and "NOT-IN-FENCE" not in system
    order = [f"## {home / '.claude' / 'CLAUDE.md'}\n", f"## {home / 'prefs' / 'me.md'} (imported by {home / '.claude' / 'CLAUDE.md'})\nME",
             f"## {workspace / 'CLAUDE.md'}\n", f"## {workspace / 'docs' / 'style.md'} (imported by {workspace / 'CLAUDE.md'})\nSTYLE",
             f"## {workspace / 'docs' / 'nested' / 'deep.md'} (imported by {workspace / 'docs' / 'style.md'})\nDEEP"]
    at = [system.index(o) for o in order]
    assert at == sorted(at)
    assert system.count("DEEP rules") == 1  # imported twice, read once
    assert r.err == ""


def test_an_import_outside_the_workspace_waits_for_a_person(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                           tmp_path: Path, home: Path) -> None:
    shared = write(tmp_path / "shared" / "team.md", MARK)
    write(home / "personal.md", MARK)
    write(workspace / "AGENTS.md", f"Follow @{shared} and @~/personal.md and @../shared/team.md")
    assert MARK in shared.read_text()  # control: the file is there to read
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    assert r.code == 0, r.err
    assert MARK not in json.dumps(server.requests)
    said = reason(r.err, f"{shared} (imported by {workspace / 'AGENTS.md'})")
    assert f" {shared}, outside the workspace {workspace};" in said and "answer yes" in said, said
    assert f"{home / 'personal.md'} (imported by {workspace / 'AGENTS.md'}) not read" in r.err


def test_imports_follow_five_levels_then_stop_with_a_note(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    write(workspace / "AGENTS.md", "level 0 @l1.md")
    for i in range(1, 8):
        write(workspace / f"l{i}.md", f"LEVEL-{i} @l{i + 1}.md")
    server.add(Reply(text="ok"))
    r = turn("-p", "hi", server=server)
    system = system_of(server)
    assert [i for i in range(1, 8) if f"LEVEL-{i} " in system] == [1, 2, 3, 4, 5]
    said = reason(r.err, f"{workspace / 'l6.md'} (imported by {workspace / 'l5.md'})")
    assert " 5 levels deep " in said and "doc_import_depth" in said, said


def test_the_import_depth_lowered_names_the_first_file_not_followed(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", "@a.md")
    write(workspace / "a.md", "A @b.md")
    write(workspace / "b.md", "B @c.md")
    write(workspace / "c.md", "C")
    reader = OwnReader(workspace, limits=Limits(doc_import_depth=2), store=home / "s.json")
    docs = load_project_docs(workspace, 1000, config_dir=home / "cfg", claude_dir=home / "cc", reader=reader)
    assert [f.path.name for f in docs.files] == ["AGENTS.md", "a.md", "b.md"]
    assert docs.errors == [f"{workspace / 'c.md'} (imported by {workspace / 'b.md'}) not read: imports are followed 2 "
                           "levels deep (limit doc_import_depth)"]


def test_import_cycles_are_cut_and_each_file_read_once(workspace: Path, home: Path) -> None:
    write(workspace / "CLAUDE.md", "root @a.md @CLAUDE.md")
    write(workspace / "a.md", "A-TEXT @b.md @a.md")
    write(workspace / "b.md", "B-TEXT @a.md @CLAUDE.md")
    docs = load_project_docs(workspace, 1000, config_dir=home / "cfg", claude_dir=home / "cc",
                             reader=OwnReader(workspace, store=home / "s.json"))
    assert [(f.path.name, f.via.name if f.via else None) for f in docs.files] == [
        ("CLAUDE.md", None), ("a.md", "CLAUDE.md"), ("b.md", "a.md")]
    assert docs.text.count("A-TEXT") == 1 and docs.errors == []


def test_imported_files_share_the_project_docs_budget(workspace: Path, home: Path) -> None:
    write(workspace / "AGENTS.md", "@big.md")
    write(workspace / "big.md", "B" * 30)
    docs = load_project_docs(workspace, 20, config_dir=home / "cfg", claude_dir=home / "cc",
                             reader=OwnReader(workspace, store=home / "s.json"))
    assert [(f.path.name, f.kept, f.chars) for f in docs.files] == [("AGENTS.md", 0, 7), ("big.md", 20, 30)]


# -- nested instruction files ---------------------------------------------------------------

def nested_tree(workspace: Path) -> None:
    write(workspace / "AGENTS.md", "ROOT rules")
    write(workspace / "src" / "CLAUDE.md", "SRC rules")
    write(workspace / "src" / "app" / "AGENTS.md", "APP rules")
    write(workspace / "src" / "app" / "main.py", "print('hi')\n")
    write(workspace / "src" / "app" / "util.py", "x = 1\n")
    write(workspace / "docs" / "CLAUDE.md", "DOCS rules")


def test_a_subfolders_files_join_the_first_read_under_it_once(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    nested_tree(workspace)
    server.add(tool_reply(call("read_file", {"path": "src/app/main.py"}, id="r1")),
               tool_reply(call("read_file", {"path": "src/app/util.py"}, id="r2")),
               Reply(text="done"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    system = system_of(server)
    assert "ROOT rules" in system and "SRC rules" not in system and "DOCS rules" not in system
    first = results_of(server.requests[1])["r1"]
    assert first.startswith("1\tprint('hi')")
    src, app = (first.index(f"[instructions of {name}, for work under {under} ") for name, under in (
        ("src/CLAUDE.md", "src/"), ("src/app/AGENTS.md", "src/app/")))
    assert src < first.index("]\nSRC rules") < app < first.index("]\nAPP rules")  # each under its own header
    second = results_of(server.requests[2])["r2"]
    assert "rules" not in second  # loaded once
    assert "DOCS rules" not in json.dumps(server.requests)  # nothing was read under docs/


def test_an_edit_under_a_subfolder_loads_its_files_too(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    nested_tree(workspace)
    server.add(tool_reply(call("write_file", {"path": "docs/new.md", "content": "x"}, id="w1")), Reply(text="done"))
    r = turn("-p", "write", "--mode", "accept-edits", server=server)
    assert r.code == 0, r.err
    assert "DOCS rules" in results_of(server.requests[1])["w1"]


def test_a_sub_agent_gets_a_subfolders_files_too(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                home: Path) -> None:
    """A sub-agent working under a subfolder is told its instructions as the main agent is, each
    conversation once: the main agent reading there later is told them as well."""
    nested_tree(workspace)
    write(home / ".claude" / "agents" / "reader.md", "---\nname: reader\ndescription: reads\ntools: Read\n---\nRead.")
    server.add(tool_reply(call("subagent", {"agent": "reader", "task": "read main.py", "wait": True}, id="s1")),
               tool_reply(call("read_file", {"path": "src/app/main.py"}, id="child")), Reply(text="child done"),
               tool_reply(call("read_file", {"path": "src/app/util.py"}, id="parent")), Reply(text="done"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    child = results_of(server.requests[2])["child"]
    assert "[instructions of src/CLAUDE.md, " in child and "]\nSRC rules" in child and "APP rules" in child
    parent = results_of(server.requests[4])["parent"]
    assert "SRC rules" in parent and "APP rules" in parent


def test_nested_files_spend_what_the_chain_left_of_the_budget(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    nested_tree(workspace)  # ROOT rules: 10 chars in the prompt
    server.add(tool_reply(call("read_file", {"path": "src/app/main.py"}, id="r1")), Reply(text="done"))
    r = turn("-p", "look", server=server, config={"limits": {"project_docs_chars": 14}})
    assert r.code == 0, r.err
    result = results_of(server.requests[1])["r1"]
    assert "SRC \n… (5 chars of this file cut: the project instructions budget is 14 chars, limit " \
           "project_docs_chars; read the rest with read_file)" in result
    assert "[src/app/AGENTS.md (nested instruction file for work under src/app/) not loaded: the project " \
           "instructions budget is spent (14 chars, limit project_docs_chars); read it with read_file]" in result


def test_a_nested_files_imports_join_it(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                       home: Path) -> None:
    """A subfolder's CLAUDE.md imports as the chain's files do: beside itself, each file once
    (one the system prompt holds is not repeated), `doc_import_depth` hops, an import outside the
    workspace only with a person's yes (named in `-p`, where nobody is there to give it)."""
    write(workspace / "CLAUDE.md", "ROOT: @docs/shared.md")
    write(workspace / "docs" / "shared.md", "SHARED rules")
    write(workspace / "src" / "CLAUDE.md", "SRC: @style.md @../docs/shared.md @~/mine.md `@not.md`")
    write(workspace / "src" / "style.md", "STYLE rules; more in @deeper/one.md")
    write(workspace / "src" / "deeper" / "one.md", "ONE rules @two.md")
    write(workspace / "src" / "deeper" / "two.md", "TWO rules")
    write(workspace / "src" / "not.md", "NOT-IN-SPAN")
    write(home / "mine.md", "HOME-OUTSIDE")
    write(workspace / "src" / "main.py", "pass\n")
    server.add(tool_reply(call("read_file", {"path": "src/main.py"}, id="r1")), Reply(text="done"))
    r = turn("-p", "look", server=server, config={"limits": {"doc_import_depth": 2}})
    assert r.code == 0, r.err
    result = results_of(server.requests[1])["r1"]
    assert "[src/style.md, imported by src/CLAUDE.md]\nSTYLE" in result
    assert "[src/deeper/one.md, imported by src/style.md]\nONE" in result
    assert "TWO rules" not in result and " 2 levels deep (limit doc_import_depth)" in result
    assert result.count("SHARED rules") == 0 and "SHARED rules" in system_of(server)  # in the prompt already
    assert "HOME-OUTSIDE" not in json.dumps(server.requests) and "NOT-IN-SPAN" not in result
    assert f"[{home / 'mine.md'} (imported by src/CLAUDE.md) not loaded: " in result
    assert f" {home / 'mine.md'}, outside the workspace" in result
    assert f"{home / 'mine.md'} (imported by src/CLAUDE.md) not read" in r.err


def test_a_nested_file_linked_out_is_named_not_loaded(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                      home: Path) -> None:
    write(workspace / "src" / "main.py", "pass\n")
    secret = write(home / ".ssh" / "id_ed25519", MARK)
    (workspace / "src" / "CLAUDE.md").symlink_to(secret)
    assert MARK in (workspace / "src" / "CLAUDE.md").read_text()  # control
    server.add(tool_reply(call("read_file", {"path": "src/main.py"}, id="r1")), Reply(text="done"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    assert MARK not in json.dumps(server.requests)
    result = results_of(server.requests[1])["r1"]
    assert "[src/CLAUDE.md (nested instruction file) " in result and f" {secret}, a secret file" in result
    assert str(secret) in reason(r.err, f"{workspace / 'src' / 'CLAUDE.md'} (nested instruction file)")


def test_a_rewind_or_a_compaction_loads_the_file_again(workspace: Path) -> None:
    """What was loaded is known by the call that carried it: once that call is gone from the
    history, the next read under the folder brings the file back."""
    nested_tree(workspace)
    llm = ScriptedLLM([tool_reply(call("read_file", {"path": "src/app/main.py"})), Reply(text="one"),
                       tool_reply(call("read_file", {"path": "src/app/util.py"})), Reply(text="two"),
                       tool_reply(call("read_file", {"path": "src/app/main.py"})), Reply(text="three"),
                       tool_reply(call("read_file", {"path": "src/app/util.py"})), Reply(text="four")])
    built = build_agent(Config(), workspace, RecordingUI(), llm=llm, save_session=False)
    agent = built.agent

    def last_result() -> str:
        return str([m for m in agent.session.history if m.role == "tool"][-1].content)

    asyncio.run(agent.ask("first"))
    assert "SRC rules" in last_result()
    asyncio.run(agent.ask("second"))
    assert "SRC rules" not in last_result()  # the first result still carries it
    agent.session.rewind(0)
    asyncio.run(agent.ask("third"))
    assert "SRC rules" in last_result() and "APP rules" in last_result()
    agent.session.compacted(Message.user("<conversation-summary>read main.py</conversation-summary>"), 0)
    asyncio.run(agent.ask("fourth"))
    assert "SRC rules" in last_result() and "APP rules" in last_result()
