"""`nanohermes acp` driven by a real ACP client (the Python SDK's client side) against the
loopback fake endpoint: sessions and prompts, tool calls as the editor shows them, the gate
asking through the editor, cancel, modes, plans and commands, the editor's buffers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_support import Editor, acp, agent, env_for, s
from nanohermes.testing import FakeServer, Reply, call, tool_reply


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def sent(server: FakeServer, n: int = -1) -> list[dict[str, Any]]:
    """The messages of the model request `n`."""
    messages: list[dict[str, Any]] = server.requests[n]["messages"]
    return messages


def tool_results(server: FakeServer, n: int = -1) -> list[str]:
    return [m["content"] for m in sent(server, n) if m["role"] == "tool"]


def offered(server: FakeServer, n: int = -1) -> list[str]:
    return [t["function"]["name"] for t in server.requests[n].get("tools", [])]


# -- sessions and prompts ------------------------------------------------------------------------

def test_a_prompt_streams_thinking_and_answer_and_the_session_is_saved(workspace: Path, home: Path,
                                                                       server: FakeServer, tmp_path: Path) -> None:
    server.add(Reply(text="The answer is 42.", reasoning="Let me think."), Reply(text="Still 42."))
    editor = Editor()

    async def scenario() -> tuple[s.InitializeResponse, str, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            init, sid = await a.start(workspace)
            reason = await a.ask(sid, "what is the answer?")
            return init, sid, reason

    init, sid, reason = run(scenario())
    assert init.protocol_version == 1
    assert init.agent_info is not None and init.agent_info.name == "nanohermes"
    caps = init.agent_capabilities
    assert caps is not None and caps.load_session and caps.mcp_capabilities is not None
    assert caps.mcp_capabilities.http and caps.mcp_capabilities.sse
    assert caps.prompt_capabilities is not None and caps.prompt_capabilities.embedded_context
    assert reason == "end_turn"
    assert editor.thought(sid) == "Let me think."
    assert editor.said(sid) == "The answer is 42."
    assert sent(server, 0)[-1] == {"role": "user", "content": "what is the answer?"}
    # A nanohermes session: the REPL's --resume (here through -p) takes it up.
    r = subprocess.run([sys.executable, "-m", "nanohermes", "--resume", sid, "-p", "and now?", "--base-url",
                        server.base_url, "--model", "fake-model"], cwd=workspace, env=env_for(server),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Still 42."
    assert [m["content"] for m in sent(server) if m["role"] == "user"] == ["what is the answer?", "and now?"]


def test_the_repls_options_after_acp_set_the_key_the_config_file_and_the_mode(workspace: Path, server: FakeServer,
                                                                               tmp_path: Path) -> None:
    config = tmp_path / "elsewhere.json"
    config.write_text(json.dumps({"permission_mode": "debug", "max_turns": 1}))
    server.add(tool_reply(call("list_dir", {})), Reply(text="not reached"))
    editor = Editor()
    env = env_for(server)
    env.pop("OPENAI_API_KEY")

    async def scenario() -> tuple[str, str]:
        async with agent(editor, workspace, server, "--api-key", "sk-from-the-flag-0042", "--config", str(config),
                         stderr=tmp_path / "err", env=env) as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[])
            return new.modes.current_mode_id, await a.ask(new.session_id, "list")

    assert run(scenario()) == ("debug", "max_turn_requests")  # the config file's mode and max_turns
    assert server.headers[0]["authorization"] == "Bearer sk-from-the-flag-0042"
    assert "write_file" not in offered(server, 0) and "run_command" in offered(server, 0)


def test_load_replays_a_saved_session_and_the_next_prompt_continues_it(workspace: Path, server: FakeServer,
                                                                      tmp_path: Path, cli: Any) -> None:
    (workspace / "notes.txt").write_text("alpha\n")
    server.add(tool_reply(call("read_file", {"path": "notes.txt"}), text="Reading."),
               Reply(text="It says alpha.", reasoning="short file"))
    first = cli("-p", "read notes.txt", "--output-format", "json", server=server)
    assert first.code == 0, first.err
    session_id = first.json()["session_id"]
    server.add(Reply(text="Yes, alpha."))
    editor = Editor()

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            await a.conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
            before_prompt = len(editor.updates)
            reason = await a.ask(session_id, "sure?")
            assert before_prompt > 0
            return reason

    assert run(scenario()) == "end_turn"
    kinds = [u.session_update for _, u in editor.updates]
    first_answer = kinds.index("agent_message_chunk")
    assert kinds[:first_answer + 1] == ["user_message_chunk", "agent_message_chunk"]
    assert editor.of("user_message_chunk")[0].content.text == "read notes.txt"
    assert editor.of("agent_thought_chunk")[0].content.text == "short file"
    calls = editor.calls()
    (read,) = [c for c in calls.values() if c["title"].startswith("read_file")]
    assert read["kind"] == "read" and read["status"] == "completed"
    assert read["locations"] == [{"path": str(workspace / "notes.txt")}]
    assert "alpha" in read["content"][-1]["content"]["text"]
    # The replay came before load's answer; the next prompt continues the conversation.
    assert [m["content"] for m in sent(server) if m["role"] == "user"] == ["read notes.txt", "sure?"]
    assert editor.said().endswith("Yes, alpha.")


def test_a_session_goes_from_the_editor_to_the_repl_and_back(workspace: Path, home: Path, server: FakeServer,
                                                            tmp_path: Path) -> None:
    from test_repl_pty import Term

    server.add(Reply(text="Said in the editor."), Reply(text="Said in the REPL."), Reply(text="Back in the editor."))
    first, again = Editor(), Editor()

    async def in_the_editor() -> str:
        async with agent(first, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            assert await a.ask(sid, "one") == "end_turn"
            return sid

    sid = run(in_the_editor())
    repl = Term(workspace, home, server, args=("--resume", sid))
    try:
        repl.wait("Said in the editor.")
        repl.prompt()
        repl.type("two")
        repl.wait("Said in the REPL.")
        repl.prompt()
        repl.type("/exit")
        assert repl.exit_code() == 0
    finally:
        if repl.child.isalive():
            repl.child.terminate(force=True)

    async def back() -> str:
        async with agent(again, workspace, server, stderr=tmp_path / "err2") as a:
            await a.conn.initialize(protocol_version=1)
            await a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
            return await a.ask(sid, "three")

    assert run(back()) == "end_turn"
    assert [u.content.text for u in again.of("user_message_chunk")] == ["one", "two"]  # replayed before the answer
    assert [(m["role"], m["content"]) for m in sent(server) if m["role"] != "system"] == [
        ("user", "one"), ("assistant", "Said in the editor."), ("user", "two"), ("assistant", "Said in the REPL."),
        ("user", "three")]


def test_an_unknown_or_unsaved_session_cannot_be_loaded(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    from acp import RequestError

    editor = Editor()

    async def scenario() -> list[int]:
        codes = []
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            for sid in ("20990101-000000-abcdef", "2099"):
                try:
                    await a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
                except RequestError as e:
                    codes.append(e.code)
            try:
                await a.conn.prompt(session_id="nope", prompt=[acp.text_block("hi")])
            except RequestError as e:
                codes.append(e.code)
        return codes

    assert run(scenario()) == [-32002, -32002, -32002]


# -- tool calls as the editor shows them ---------------------------------------------------------

def test_tool_calls_carry_kind_title_locations_result_and_an_edit_its_diff(workspace: Path, server: FakeServer,
                                                                           tmp_path: Path) -> None:
    (workspace / "app.py").write_text("x = 1\ny = 2\n")
    server.add(tool_reply(call("read_file", {"path": "app.py"}), call("grep", {"pattern": "y ="})),
               tool_reply(call("edit_file", {"path": "app.py", "old_string": "y = 2", "new_string": "y = 3"})),
               tool_reply(call("run_command", {"command": "touch made.txt; echo out; echo err >&2"})),
               Reply(text="done"))
    editor = Editor(answers=["allow_once", "allow_once"])

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "change y")

    assert run(scenario()) == "end_turn"
    assert (workspace / "app.py").read_text() == "x = 1\ny = 3\n"
    calls = list(editor.calls().values())
    read, grep, edit, command = calls
    assert (read["kind"], read["title"], read["status"]) == ("read", "read_file: app.py", "completed")
    assert read["locations"] == [{"path": str(workspace / "app.py"), "line": 1}]
    assert read["content"][-1]["content"]["text"] == tool_results(server, 1)[0]
    assert grep["kind"] == "search" and grep["status"] == "completed"
    assert edit["kind"] == "edit" and edit["locations"] == [{"path": str(workspace / "app.py")}]
    diff = [c for c in edit["content"] if c["type"] == "diff"]
    assert diff == [{"type": "diff", "path": str(workspace / "app.py"), "old_text": "x = 1\ny = 2\n",
                     "new_text": "x = 1\ny = 3\n"}]
    assert command["kind"] == "execute" and command["title"] == "run_command: touch made.txt; echo out; echo err >&2"
    result = command["content"][-1]["content"]["text"]
    assert result == tool_results(server, 3)[-1] and "out" in result and "err" in result
    # The edit was asked with its diff, the command with its line.
    (edit_ask, edit_options), (cmd_ask, _) = editor.asked
    assert next(c.type for c in edit_ask.content or []) == "diff"
    assert [o.kind for o in edit_options] == ["allow_once", "allow_always", "reject_once"]
    assert cmd_ask.kind == "execute" and cmd_ask.tool_call_id == [i for i in editor.calls()][3]


def test_a_calls_locations_are_the_paths_it_touches_however_the_model_wrote_them(
        workspace: Path, home: Path, server: FakeServer, tmp_path: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("a = 1\n")
    (workspace / "real.txt").write_text("real\n")
    (workspace / "link.txt").symlink_to("real.txt")
    (workspace / "linked").symlink_to("src")
    (home / "notes.txt").write_text("mine\n")
    patch = "*** Begin Patch\n*** Update File: linked/a.py\n@@\n-a = 1\n+a = 2\n*** Add File: src/b.py\n+b = 1\n*** End Patch\n"
    server.add(tool_reply(call("read_file", {"path": "src\\a.py"}), call("read_file", {"path": "link.txt", "offset": 1}),
                          call("read_file", {"path": "~/notes.txt"}), call("list_dir", {"path": "src/../linked"}),
                          call("grep", {"pattern": "a", "path": str(workspace / "linked")})),
               tool_reply(call("apply_patch", {"diff": patch})), Reply(text="done"))
    editor = Editor(answers=["allow_once"])

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "look")

    assert run(scenario()) == "end_turn"
    src = str(workspace / "src")
    located = [[loc["path"] for loc in c["locations"]] for c in editor.calls().values()]
    assert located == [[f"{src}/a.py"], [str(workspace / "real.txt")], [str(home / "notes.txt")], [src], [src],
                       [f"{src}/a.py", f"{src}/b.py"]]
    (asked, _), = editor.asked  # the question names them the same way
    assert [loc.path for loc in asked.locations or []] == [f"{src}/a.py", f"{src}/b.py"]
    assert (workspace / "src" / "b.py").read_text() == "b = 1\n"


def test_a_calls_kind_follows_what_its_tool_touches(workspace: Path, home: Path, server: FakeServer,
                                                    tmp_path: Path) -> None:
    config = home / ".config" / "nanohermes" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)  # a search engine that answers 404: the call fails at once
    config.write_text(json.dumps({"web_search": {"provider": "searxng", "searxng_url": server.base_url}}))
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    server.add(tool_reply(call("web_search", {"query": "acp"}), call("git_status", {}),
                          call("memory_search", {"query": "acp"}), call("task_list", {}), call("glob", {"pattern": "*"})),
               Reply(text="done"))
    editor = Editor()

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "look around")

    assert run(scenario()) == "end_turn"
    kinds = {c["title"].split(":")[0]: c["kind"] for c in editor.calls().values()}
    assert kinds == {"web_search": "fetch", "git_status": "read", "memory_search": "read", "task_list": "read",
                     "glob": "search"}


# -- the gate asks through the editor ----------------------------------------------------------

def test_allow_always_lasts_the_session_and_a_rejection_is_a_refusal_the_model_reads(
        workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "mkdir one"})),
               tool_reply(call("run_command", {"command": "mkdir two"})),
               tool_reply(call("write_file", {"path": "new.txt", "content": "hello"})),
               tool_reply(call("write_file", {"path": "other.txt", "content": "hello"})),
               Reply(text="ok"))
    editor = Editor(answers=["allow_always", "reject_once", "cancelled"])

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "go")

    assert run(scenario()) == "end_turn"
    first, write, other = editor.asked
    always = [o for o in first[1] if o.kind == "allow_always"]
    assert len(always) == 1 and "run_command(" in always[0].name
    assert write[0].kind == "edit" and other[0].kind == "edit"
    # The second command ran unasked under the learned rule; both writes were refused.
    assert (workspace / "two").is_dir() and tool_results(server, 2)[-1].startswith("exit code: 0")
    assert not (workspace / "new.txt").exists() and not (workspace / "other.txt").exists()
    assert tool_results(server, 3)[-1].startswith("Denied by the user")
    assert tool_results(server, 4)[-1].startswith("Denied by the user")
    statuses = [c["status"] for c in editor.calls().values()]
    assert statuses == ["completed", "completed", "failed", "failed"]


def test_cancel_stops_the_running_command_at_once_and_the_session_goes_on(workspace: Path, server: FakeServer,
                                                                          tmp_path: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "echo $$ > pid; exec sleep 60"})))
    editor = Editor(answers=["allow_once"])

    async def scenario() -> tuple[str, float, int, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            prompt = asyncio.get_running_loop().create_task(a.ask(sid, "sleep"))
            while not (workspace / "pid").exists() or not (workspace / "pid").read_text().strip():
                await asyncio.sleep(0.05)
            loop = asyncio.get_running_loop()
            at = loop.time()
            await a.conn.cancel(session_id=sid)
            reason = await prompt
            took = loop.time() - at
            asked_model = len(server.requests)
            server.add(Reply(text="fresh"))
            return reason, took, asked_model, await a.ask(sid, "again")

    reason, took, asked_model, again = run(scenario())
    assert reason == "cancelled" and took < 30  # not the command's 60 s, however loaded the machine
    pid = int((workspace / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert asked_model == 1  # nothing after the cancelled command: no further model call, no further tool
    assert again == "end_turn" and editor.said().endswith("fresh")
    assert tool_results(server)[-1] == "interrupted by user"
    assert [m["content"] for m in sent(server) if m["role"] == "user"] == ["sleep", "again"]
    (sleep,) = editor.calls().values()
    assert sleep["status"] == "failed"


def test_a_prompt_sent_right_after_a_cancel_runs_once_the_cancelled_one_stopped(
        workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    """As an editor does when the person sends a new message while a turn runs: session/cancel,
    then at once the next prompt, without waiting for the first one's answer."""
    from acp import RequestError

    import threading

    refused = threading.Event()

    def third(body: dict[str, Any]) -> Reply:  # answers once the prompt sent meanwhile was refused
        refused.wait(30)
        return Reply(text="third")

    server.add(tool_reply(call("run_command", {"command": "echo $$ > pid; exec sleep 60"})), Reply(text="next"), third)
    editor = Editor(answers=["allow_once"])

    async def scenario() -> tuple[str, str, int, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            first = asyncio.get_running_loop().create_task(a.ask(sid, "sleep"))
            while not (workspace / "pid").exists() or not (workspace / "pid").read_text().strip():
                await asyncio.sleep(0.05)
            await a.conn.cancel(session_id=sid)
            second = await a.ask(sid, "next")
            # A prompt while one runs that nobody cancelled is still refused.
            slow = asyncio.get_running_loop().create_task(a.ask(sid, "third"))
            while len(server.requests) < 3:
                await asyncio.sleep(0.05)
            try:
                await a.ask(sid, "fourth")
                code = 0
            except RequestError as e:
                code = e.code
            refused.set()
            return await first, second, code, await slow

    first, second, code, third = run(scenario())
    assert (first, second, third) == ("cancelled", "end_turn", "end_turn")
    assert code == -32600
    assert [m["content"] for m in sent(server) if m["role"] == "user"] == ["sleep", "next", "third"]
    assert tool_results(server, 1) == ["interrupted by user"]


def test_a_cancel_while_the_editor_is_asking_refuses_the_call(workspace: Path, server: FakeServer,
                                                               tmp_path: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "x.txt", "content": "x"})))
    editor = Editor(answers=["cancelled"])
    sessions: list[str] = []

    async def cancel_first(tool_call: s.ToolCallUpdate) -> None:
        await conn_box[0].cancel(session_id=sessions[0])  # as an editor does: cancel, then answer "cancelled"

    editor.on_ask = cancel_first
    conn_box: list[Any] = []

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            conn_box.append(a.conn)
            _, sid = await a.start(workspace)
            sessions.append(sid)
            return await a.ask(sid, "write")

    assert run(scenario()) == "cancelled"
    assert not (workspace / "x.txt").exists()
    assert len(server.requests) == 1


# -- modes, plans, commands ---------------------------------------------------------------------

def test_modes_are_offered_switched_and_reported(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    from acp import RequestError

    server.add(Reply(text="planning"))
    editor = Editor()

    async def scenario() -> tuple[Any, int]:
        async with agent(editor, workspace, server, "--mode", "accept-edits", stderr=tmp_path / "err") as a:
            await a.conn.initialize(protocol_version=1)
            new = await a.conn.new_session(cwd=str(workspace), mcp_servers=[])
            await a.conn.set_session_mode(session_id=new.session_id, mode_id="plan")
            await a.ask(new.session_id, "plan it")
            try:
                await a.conn.set_session_mode(session_id=new.session_id, mode_id="yolo")
            except RequestError as e:
                return new.modes, e.code
        raise AssertionError("an unknown mode was taken")

    modes, code = run(scenario())
    assert modes.current_mode_id == "accept-edits"
    assert [m.id for m in modes.available_modes] == ["default", "accept-edits", "plan", "debug", "goal"]
    assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["plan"]
    assert "write_file" not in offered(server) and "run_command" not in offered(server)
    assert "read_file" in offered(server)
    assert code == -32602


def test_todo_write_sends_the_whole_plan(workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    todos = [{"content": "read", "status": "completed"}, {"content": "fix", "status": "in_progress"},
             {"content": "test", "status": "pending"}]
    server.add(tool_reply(call("todo_write", {"todos": todos[:1]})), tool_reply(call("todo_write", {"todos": todos})),
               Reply(text="planned"))
    editor = Editor()

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "plan")

    assert run(scenario()) == "end_turn"
    plans = [[(e.content, e.status, e.priority) for e in u.entries] for u in editor.of("plan")]
    assert plans == [[("read", "completed", "medium")],
                     [("read", "completed", "medium"), ("fix", "in_progress", "high"), ("test", "pending", "medium")]]
    assert {c["kind"] for c in editor.calls().values()} == {"think"}


def test_commands_are_listed_without_a_slash_and_a_prompt_starting_with_one_runs_it(
        workspace: Path, server: FakeServer, tmp_path: Path) -> None:
    folder = workspace / ".claude" / "commands"
    folder.mkdir(parents=True)
    (folder / "review.md").write_text("---\ndescription: Review a file\nargument-hint: <path>\n---\n"
                                      "Review $ARGUMENTS carefully.\n")
    server.add(Reply(text="reviewed"))
    editor = Editor()

    async def scenario() -> tuple[str, str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "/review src/x.py"), await a.ask(sid, "/status please")

    assert run(scenario()) == ("end_turn", "end_turn")
    (listed,) = editor.of("available_commands_update")[:1]
    by_name = {c.name: c for c in listed.available_commands}
    assert set(by_name) == {"init", "review"}
    assert by_name["review"].description == "Review a file"
    assert by_name["review"].input is not None and by_name["review"].input.root.hint == "<path>"
    assert sent(server, 0)[-1]["content"] == "Review src/x.py carefully."
    assert len(server.requests) == 1  # /status is the REPL's: said so, nothing sent to the model
    assert "/status is a command of the terminal REPL" in editor.said()


def test_init_and_export_say_what_they_did_in_the_editor(workspace: Path, server: FakeServer,
                                                         tmp_path: Path) -> None:
    server.add(tool_reply(call("write_file", {"path": "AGENTS.md", "content": "# Notes\n"})), Reply(text="wrote"),
               tool_reply(call("write_file", {"path": "AGENTS.md", "content": "# Notes\n"})), Reply(text="wrote"))
    editor = Editor(answers=["reject_once", "allow_once"])

    async def scenario() -> list[str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return [await a.ask(sid, "/init"), await a.ask(sid, "/init"), await a.ask(sid, "/export talk.md")]

    assert run(scenario()) == ["end_turn"] * 3
    said = editor.said()
    # The person said no in the editor: not "nobody was there".
    assert "/init did not write AGENTS.md: its write was refused when you were asked" in said
    assert "nobody was there" not in said
    assert (workspace / "AGENTS.md").read_text() == "# Notes\n"
    assert said.endswith(f"exported 8 messages to {workspace / 'talk.md'}")
    assert "# Notes" in (workspace / "talk.md").read_text()


def test_the_commands_of_every_folder_are_offered_but_one_a_read_rule_keeps_out(
        workspace: Path, home: Path, server: FakeServer, tmp_path: Path) -> None:
    made = {workspace / ".nanohermes" / "commands" / "ours.md": "Ours, of the project",
            workspace / ".claude" / "commands" / "front" / "comp.md": "Claude's, in a folder",
            home / ".config" / "nanohermes" / "commands" / "mine.md": "Ours, of the person",
            home / ".claude" / "commands" / "theirs.md": "Claude's, of the person",
            workspace / ".claude" / "commands" / "hidden.md": "HIDDEN WORDS"}
    for path, about in made.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ndescription: {about}\n---\nDo it: $ARGUMENTS\n")
    config = home / ".config" / "nanohermes" / "config.json"
    config.write_text(json.dumps({"permissions": {"deny": ["read_file(.claude/commands/hidden.md)"]}}))
    server.add(Reply(text="done"))
    editor = Editor()

    async def scenario() -> tuple[str, str, list[bytes]]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return await a.ask(sid, "/front:comp now"), await a.ask(sid, "/hidden now"), a.lines

    first, hidden, lines = run(scenario())
    assert (first, hidden) == ("end_turn", "end_turn")
    listed = {c.name: c.description for c in editor.of("available_commands_update")[0].available_commands}
    assert listed == {"init": listed["init"], "ours": "Ours, of the project", "front:comp": "Claude's, in a folder",
                      "mine": "Ours, of the person", "theirs": "Claude's, of the person"}
    assert not any(b"HIDDEN WORDS" in line for line in lines)
    assert sent(server, 0)[-1]["content"] == "Do it: now"
    assert len(server.requests) == 1  # the hidden one ran nothing, and said why
    assert "/hidden cannot run" in editor.said() and "read_file(.claude/commands/hidden.md)" in editor.said()


def test_stop_reasons_and_an_endpoint_error_leave_the_session_usable(workspace: Path, server: FakeServer,
                                                                     tmp_path: Path) -> None:
    from acp import RequestError

    from nanohermes.testing import Fault

    server.add(tool_reply(call("list_dir", {})), Fault(status=400, message="model says no"), Reply(text="back"))
    editor = Editor()

    async def scenario() -> tuple[str, RequestError, str]:
        async with agent(editor, workspace, server, "--max-turns", "1", stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            first = await a.ask(sid, "list")
            try:
                await a.ask(sid, "fail")
            except RequestError as e:
                error = e
            return first, error, await a.ask(sid, "again")

    first, error, again = run(scenario())
    assert first == "max_turn_requests"
    assert error.code == -32603 and "model says no" in str(error)
    assert again == "end_turn" and editor.said().endswith("back")


def test_an_answer_the_endpoint_cut_short_ends_max_tokens_or_refusal(workspace: Path, server: FakeServer,
                                                                     tmp_path: Path) -> None:
    from nanohermes.testing import Raw, sse

    def cut(text: str, finish: str) -> Raw:
        def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
            return {"id": "c", "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
        return Raw(body=sse(chunk({"role": "assistant", "content": text}), chunk({}, finish)))

    server.add(cut("The steps are: one, two", "length"), cut("I cannot", "content_filter"), Reply(text="whole"))
    editor = Editor()

    async def scenario() -> list[str]:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            return [await a.ask(sid, "steps"), await a.ask(sid, "more"), await a.ask(sid, "again")]

    assert run(scenario()) == ["max_tokens", "refusal", "end_turn"]
    assert "The steps are: one, two" in editor.said() and "output token limit" in editor.said()


def test_config_warnings_and_goal_mode_are_told_to_the_editor(workspace: Path, home: Path, server: FakeServer,
                                                              tmp_path: Path) -> None:
    config = home / ".config" / "nanohermes" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"no_such_key": 1}')
    editor = Editor()

    async def scenario() -> str:
        async with agent(editor, workspace, server, stderr=tmp_path / "err") as a:
            _, sid = await a.start(workspace)
            await a.conn.set_session_mode(session_id=sid, mode_id="goal")
            return sid

    sid = run(scenario())
    said = editor.said(sid)
    assert "no_such_key" in said and "goal mode: every call runs without asking" in said
    assert "no_such_key" in (tmp_path / "err").read_text()
