"""What the editor brings to a session: its buffers (read and written through `fs/*`, with the
stale-file guard and the checkpoints still watching), the folder-trust question and an MCP
server's form asked through it, and prompts made of files, links and images."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp_support import REPO, Editor, acp, agent, helpers, s
from nanohermes.testing import FakeServer, Reply, call, tool_reply

DEMO = str(REPO / "tests" / "mcp" / "demo_server.py")
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def results(server: FakeServer, n: int = -1) -> list[str]:
    return [m["content"] for m in server.requests[n]["messages"] if m["role"] == "tool"]


def user_config(home: Path, data: dict[str, Any]) -> Path:
    path = home / ".config" / "nanohermes" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_the_model_reads_the_unsaved_buffer_and_approved_edits_go_through_the_editor(
        workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    app = workspace / "app.py"
    app.write_text("name = 'disk'\n")
    make = workspace / "Makefile"
    make.write_text("all:\n\ttrue\n")
    editor = Editor(answers=["allow_once", "allow_once", "allow_once", "allow_once"])
    editor.buffers[str(app)] = "name = 'unsaved'\n"

    def person_types(body: dict[str, Any]) -> Any:  # between the model's read and its edit
        editor.buffers[str(app)] = "name = 'typed meanwhile'\n"
        return tool_reply(call("edit_file", {"path": "app.py", "old_string": "unsaved", "new_string": "edited"}))

    server.add(tool_reply(call("read_file", {"path": "app.py"})),
               tool_reply(call("edit_file", {"path": "app.py", "old_string": "unsaved", "new_string": "model"})),
               tool_reply(call("read_file", {"path": "Makefile"})),
               tool_reply(call("edit_file", {"path": "Makefile", "old_string": "true", "new_string": "echo hi"})),
               tool_reply(call("write_file", {"path": "pkg/new.py", "content": "fresh = 1\n"})),
               person_types, Reply(text="done"))

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace, editor_fs=True)
            return await a.ask(sid, "rename")

    assert run(scenario()) == "end_turn"
    assert "name = 'unsaved'" in results(server, 1)[-1]  # what the editor holds, not the disk
    assert editor.reads[0] == str(app)
    assert (str(app), "name = 'model'\n") in editor.writes  # through the editor, which saved it
    assert (str(make), "all:\n\techo hi\n") in editor.writes
    assert app.read_text() == "name = 'model'\n" and make.read_text() == "all:\n\techo hi\n"
    assert (str(workspace / "pkg" / "new.py"), "fresh = 1\n") in editor.writes  # a new file too, its folder made first
    # The person's change in the buffer after the model read it: the edit is refused, nothing lost.
    assert "changed on disk since you last read" in results(server)[-1]
    assert editor.buffers[str(app)] == "name = 'typed meanwhile'\n"
    # The checkpoints saw the turn's changes: the Makefile runs code later, and the editor is told.
    assert "Makefile" in editor.said() and "runs code later" in editor.said()


def test_an_edit_is_asked_on_the_diff_of_the_buffer_it_changes(workspace: Path, server: FakeServer,
                                                               tmp_path: Path) -> None:
    """What the person approves is what runs: the question's diff is made from the text the
    edit will change (the editor's unsaved buffer), for each tool that edits a file."""
    app, lib = workspace / "app.py", workspace / "lib.py"
    app.write_text("name = 'disk'\n")
    lib.write_text("level = 'disk'\n")
    editor = Editor(answers=["allow_once", "allow_once"])
    editor.buffers[str(app)] = "name = 'buffer'\n"
    editor.buffers[str(lib)] = "level = 'buffer'\n"
    patch = "*** Begin Patch\n*** Update File: lib.py\n@@\n-level = 'buffer'\n+level = 'patched'\n*** End Patch\n"
    server.add(tool_reply(call("read_file", {"path": "app.py"}), call("read_file", {"path": "lib.py"})),
               tool_reply(call("edit_file", {"path": "app.py", "old_string": "buffer", "new_string": "edited"})),
               tool_reply(call("apply_patch", {"diff": patch})), Reply(text="done"))

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace, editor_fs=True)
            return await a.ask(sid, "edit both")

    assert run(scenario()) == "end_turn"
    shown = [[(c.path, c.old_text, c.new_text) for c in asked.content or [] if c.type == "diff"]
             for asked, _ in editor.asked]
    assert shown == [[(str(app), "name = 'buffer'\n", "name = 'edited'\n")],
                     [(str(lib), "level = 'buffer'\n", "level = 'patched'\n")]]
    assert app.read_text() == "name = 'edited'\n" and lib.read_text() == "level = 'patched'\n"


def test_without_fs_the_agent_uses_the_disk(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("on disk\n")
    server.add(tool_reply(call("read_file", {"path": "a.txt"})), Reply(text="read"))
    editor = Editor()
    editor.buffers[str(workspace / "a.txt")] = "in the editor\n"

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace, editor_fs=False)
            return await a.ask(sid, "read")

    assert run(scenario()) == "end_turn"
    assert editor.reads == [] and "on disk" in results(server)[-1]


def test_the_folder_trust_question_is_asked_before_the_first_prompt(workspace: Path, home: Path, server: FakeServer,
                                                                     tmp_path: Path) -> None:
    user = user_config(home, {})
    project = workspace / ".nanohermes" / "config.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"permission_mode": "goal"}))  # a permissive mode: only a trusted folder's
    server.add(tool_reply(call("write_file", {"path": "w.txt", "content": "unasked"})), Reply(text="written"))
    editor = Editor(answers=["allow_always"])

    async def scenario() -> tuple[str, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[])
            return new.modes.current_mode_id, await a.ask(new.session_id, "write it")

    mode_before, reason = run(scenario())
    assert reason == "end_turn"
    assert mode_before == "default"  # untrusted: the project's mode does not apply
    (question, options), = editor.asked
    assert question.title == "Trust this folder?" and question.kind == "other"
    assert [o.kind for o in options] == ["allow_always", "reject_once"]
    assert str(workspace.resolve()) in json.loads(user.read_text())["trusted_projects"]
    assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["goal"]
    assert (workspace / "w.txt").read_text() == "unasked"  # goal mode now: nothing more was asked
    assert len(editor.asked) == 1


def test_a_mode_the_person_picked_outlasts_trusting_the_folder(workspace: Path, home: Path, server: FakeServer,
                                                             tmp_path: Path) -> None:
    user_config(home, {})
    project = workspace / ".nanohermes" / "config.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"permission_mode": "accept-edits"}))
    server.add(tool_reply(call("write_file", {"path": "w.txt", "content": "x"})), Reply(text="planned"))
    editor = Editor(answers=["allow_always"])

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[])
            await a.conn.set_session_mode(session_id=new.session_id, mode_id="plan")
            return await a.ask(new.session_id, "write it")

    assert run(scenario()) == "end_turn"
    assert [q.title for q, _ in editor.asked] == ["Trust this folder?"]  # trusted: the project's keys apply now
    assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["plan"]
    assert not (workspace / "w.txt").exists()
    assert results(server)[-1] == "ERROR: write_file is not available in plan mode"


def test_an_mcp_servers_form_is_asked_through_the_editor(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    demo = s.McpServerStdio(name="demo", command=sys.executable, args=[DEMO], env=[])
    server.add(tool_reply(call("mcp__demo__ask", {})), Reply(text="ordered"))
    forms = Editor(answers=["allow_once"], form_answer={"name": "Ada", "count": 2})
    plain = Editor(answers=["allow_once"])

    async def scenario(editor: Editor, caps: dict[str, Any]) -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1, client_capabilities=s.ClientCapabilities(**caps))
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[demo])
            return await a.ask(new.session_id, "order")

    form_caps = {"elicitation": s.ElicitationCapabilities(form=s.ElicitationFormCapabilities())}
    assert run(scenario(forms, form_caps)) == "end_turn"
    (message, mode), = forms.forms
    assert "Place your order" in message and set(mode.requested_schema.properties) >= {"name", "count"}
    assert results(server, 1)[-1].startswith("accept:") and '"name": "Ada"' in results(server, 1)[-1]
    # An editor that shows no forms: a form that needs answers is declined, and the person told.
    server.add(tool_reply(call("mcp__demo__ask", {})), Reply(text="not ordered"))
    assert run(scenario(plain, {})) == "end_turn"
    assert results(server)[-1].startswith("decline")
    assert "cannot show" in plain.said()


def test_a_prompt_of_files_links_and_images(workspace: Path, home: Path, server: FakeServer, tmp_path: Path) -> None:
    user_config(home, {"images_to_model": True})
    server.add(Reply(text="seen"))
    editor = Editor()
    blocks = [acp.text_block("look at these"),
              acp.resource_block(helpers.embedded_text_resource(f"file://{workspace}/src/a.py", "print('selected')\n")),
              acp.resource_link_block("b.py", f"file://{workspace}/src/b.py"),
              acp.image_block(PNG, "image/png")]

    async def scenario() -> tuple[bool, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            init, sid = await a.start(workspace)
            reply = await a.conn.prompt(session_id=sid, prompt=blocks)
            caps = init.agent_capabilities
            assert caps is not None and caps.prompt_capabilities is not None
            return bool(caps.prompt_capabilities.image), str(reply.stop_reason)

    image, reason = run(scenario())
    assert image and reason == "end_turn"
    messages = server.requests[0]["messages"]
    prompt, pictures = messages[-2], messages[-1]
    assert prompt["content"] == ("look at these\n\nsrc/b.py\n\n<file path=\"src/a.py\">\nprint('selected')\n\n</file>")
    assert pictures["role"] == "user"
    assert pictures["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


def test_an_embedded_files_text_is_sent_as_it_is_never_read_for_mentions_or_arguments(
        workspace: Path, home: Path, server: FakeServer, tmp_path: Path) -> None:
    """The editor embeds a file the person picked; the repository wrote its text. Its `@path`
    words attach nothing (a typed one still does), and it is no part of a command's arguments."""
    (tmp_path / "private.txt").write_text("PRIVATE OUTSIDE\n")
    (home / "notes.txt").write_text("HOME NOTES\n")
    (workspace / "typed.txt").write_text("TYPED BY THE PERSON\n")
    commands = workspace / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("Review this: [$ARGUMENTS]\n")
    planted = f"# see @{tmp_path}/private.txt and @~/notes.txt\n"
    embedded = acp.resource_block(helpers.embedded_text_resource(f"file://{workspace}/a.py", planted))
    server.add(Reply(text="one"), Reply(text="two"))
    editor = Editor()

    async def scenario() -> list[str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            first = await a.conn.prompt(session_id=sid, prompt=[acp.text_block("explain @typed.txt"), embedded])
            second = await a.conn.prompt(session_id=sid, prompt=[acp.text_block("/review quickly"), embedded])
            return [str(first.stop_reason), str(second.stop_reason)]

    assert run(scenario()) == ["end_turn", "end_turn"]
    first, second = (r["messages"][-1]["content"] for r in server.requests)
    file_block = f'<file path="a.py">\n{planted}\n</file>'
    assert first.startswith("explain @typed.txt\n\n<file path=\"typed.txt\">") and first.endswith(file_block)
    assert "TYPED BY THE PERSON" in first
    assert second == f"Review this: [quickly]\n\n{file_block}"
    for sent in (first, second):
        assert "PRIVATE OUTSIDE" not in sent and "HOME NOTES" not in sent
    assert editor.asked == []


def test_an_image_the_model_cannot_take_is_left_out_and_said_so(workspace: Path, server: FakeServer,
                                                                 tmp_path: Path) -> None:
    server.add(Reply(text="no picture"))
    editor = Editor()

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            reply = await a.conn.prompt(session_id=sid, prompt=[acp.text_block("see"), acp.image_block(PNG, "image/png")])
            return str(reply.stop_reason)

    assert run(scenario()) == "end_turn"
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "see"}
    assert "images_to_model" in editor.said()


def test_a_commands_output_shows_in_a_terminal_of_the_editor_when_it_offers_them(workspace: Path, server: FakeServer,
                                                                                  tmp_path: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch t; printf 'red \\033[31mtext\\n'"})),
               Reply(text="shown"))
    editor = Editor(answers=["allow_once"])

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace, terminal=True)
            return await a.ask(sid, "colour")

    assert run(scenario()) == "end_turn"
    (command,) = editor.calls().values()
    terminal, text = command["content"]
    assert terminal["type"] == "terminal" and text["type"] == "content"
    result = results(server)[-1]
    assert text["content"]["text"] == result and "\x1b[31m" in result
    shown = editor.terminals[terminal["terminal_id"]]
    assert shown["command"] == sys.executable and shown["args"][:2] == ["-I", "-c"]
    assert shown["output"] == result.replace("\x1b", "\\x1b")  # escaped: the terminal shows it, never acts on it
    assert shown["released"] and (workspace / "t").exists()  # the command ran here, not in the editor


def test_a_big_or_binary_file_is_read_from_the_disk_never_sent_whole_by_the_editor(
        workspace: Path, home: Path, server: FakeServer, tmp_path: Path) -> None:
    user_config(home, {"limits": {"read_file_max_bytes": 100}})
    big = workspace / "big.log"
    big.write_text("".join(f"line {i}\n" for i in range(50)))  # 440 bytes: over the lowered limit
    small = workspace / "small.txt"
    small.write_text("small on disk\n")
    blob = workspace / "blob.bin"
    blob.write_bytes(b"\x00\x01binary")
    server.add(tool_reply(call("read_file", {"path": "big.log", "offset": 49, "limit": 2}),
                          call("read_file", {"path": "blob.bin"}), call("read_file", {"path": "small.txt"})),
               Reply(text="read"))
    editor = Editor()
    editor.buffers[str(small)] = "small in the editor\n"

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace, editor_fs=True)
            return await a.ask(sid, "read")

    assert run(scenario()) == "end_turn"
    assert editor.reads == [str(small)]
    window, binary, text = results(server)
    assert window.startswith("49\tline 48\n50\tline 49")
    assert "looks like a binary file" in binary and "small in the editor" in text
