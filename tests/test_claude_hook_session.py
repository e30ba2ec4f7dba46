"""What hooks written for Claude Code read beside their input: `transcript_path` in Claude Code's
transcript shape (read here by a parser written from that shape, and by a Stop hook in the
shape of the well-known loop plugin), `$CLAUDE_ENV_FILE` whose exports reach later commands
and hooks, and the variables Claude Code sets for its hooks. Real hook processes, real runs."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from nanohermes.assemble import build_agent
from nanohermes.config import Config
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply

needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}" if name.endswith(".py") else shlex.quote(str(path))


def hooks(event: str, matcher: str, command: str) -> dict[str, Any]:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}


class TranscriptReader:
    """A reader of Claude Code's transcript as its documentation and its users' scripts read
    it: one JSON object a line, each with `uuid`, `parentUuid` (the line before's), `sessionId`,
    `timestamp` (ISO 8601), `cwd`, `type` (user or assistant) and `message` (role, content). A
    user message's content is its text or a list of `tool_result` blocks, each answering a
    `tool_use` block seen before; an assistant message's content is a list of `text`,
    `thinking` and `tool_use` blocks. Raises AssertionError on anything else."""

    def __init__(self, path: Path) -> None:
        self.entries = [json.loads(line) for line in path.read_text().splitlines()]
        self.raw_lines = path.read_text().splitlines()
        parent = None
        tool_uses: set[str] = set()
        for e in self.entries:
            assert {"uuid", "parentUuid", "sessionId", "timestamp", "cwd", "type", "message"} <= set(e), e
            assert e["parentUuid"] == parent, (e["parentUuid"], parent)
            parent = e["uuid"]
            datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
            assert e["type"] in ("user", "assistant") and e["message"]["role"] == e["type"]
            content = e["message"]["content"]
            if e["type"] == "assistant":
                for block in content:
                    assert block["type"] in ("text", "thinking", "tool_use"), block
                    if block["type"] == "tool_use":
                        assert isinstance(block["input"], dict) and block["id"] and block["name"]
                        tool_uses.add(block["id"])
            elif isinstance(content, list):
                for block in content:
                    assert block["type"] == "tool_result" and block["tool_use_id"] in tool_uses, block
            else:
                assert isinstance(content, str)

    def conversation(self) -> list[tuple[str, str, Any]]:
        """(role, block type, what it holds) in order."""
        out: list[tuple[str, str, Any]] = []
        for e in self.entries:
            content = e["message"]["content"]
            if isinstance(content, str):
                out.append(("user", "text", content))
                continue
            for b in content:
                held = {"text": b.get("text"), "thinking": b.get("thinking"), "tool_use": (b.get("name"), b.get("input")),
                        "tool_result": b.get("content")}[b["type"]]
                out.append((e["type"], b["type"], held))
        return out


def copier(tmp_path: Path, name: str) -> str:
    """A hook that copies the transcript it is given, as it stands when the hook runs."""
    return script(tmp_path, f"copy_{name}.py", "import json, shutil, sys\n"
                                               "shutil.copy(json.load(sys.stdin)['transcript_path'], "
                                               f"{str(tmp_path / name)!r})\n")


def test_a_claude_code_transcript_reader_reads_transcript_path(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                               workspace: Path, tmp_path: Path) -> None:
    server.add(Reply(reasoning="I should look first", text="Let me check.",
                     tool_calls=tool_reply(call("run_command", {"command": "echo hi"}, id="c1")).tool_calls),
               Reply(text="It says hi."))
    config = {"hooks": {**hooks("PreToolUse", "Bash", copier(tmp_path, "pre.jsonl")),
                        **hooks("Stop", "", copier(tmp_path, "stop.jsonl"))}}
    ran = turn("-p", "what does echo say?", "--yes", "--output-format", "json", server=server, config=config)
    assert ran.code == 0, ran.err
    session_id = ran.json()["session_id"]
    done = TranscriptReader(tmp_path / "stop.jsonl")
    assert {e["sessionId"] for e in done.entries} == {session_id}
    assert {e["cwd"] for e in done.entries} == {str(workspace)}
    got = done.conversation()
    assert [(role, kind) for role, kind, _ in got] == [
        ("user", "text"), ("assistant", "thinking"), ("assistant", "text"), ("assistant", "tool_use"),
        ("user", "tool_result"), ("assistant", "text")]
    assert got[0][2] == "what does echo say?" and got[1][2] == "I should look first" and got[2][2] == "Let me check."
    name, given = got[3][2]
    assert name == "Bash" and given["command"] == "echo hi" and given["timeout"] == 120_000
    assert "hi" in got[4][2] and got[5][2] == "It says hi."
    # Written before each hook runs: the PreToolUse hook already saw the call it was asked about.
    before = TranscriptReader(tmp_path / "pre.jsonl").conversation()
    assert before == got[:4]
    assert all('"role":"assistant"' in line for line in done.raw_lines if '"type":"assistant"' in line)


@pytest.mark.parametrize("text", ["<think>\nlooked it up\n</think>\n\nIt is 4.", "looked it up\n</think>\n\nIt is 4."],
                         ids=["block", "lone-closing-tag"])
def test_thinking_written_into_the_answer_is_a_thinking_block_of_the_transcript(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                               tmp_path: Path, text: str) -> None:
    server.add(Reply(text=text))
    ran = turn("-p", "2+2?", server=server, config={"hooks": hooks("Stop", "", copier(tmp_path, "stop.jsonl"))})
    assert ran.code == 0, ran.err
    got = TranscriptReader(tmp_path / "stop.jsonl").conversation()
    assert [(role, kind, said.strip()) for role, kind, said in got] == [
        ("user", "text", "2+2?"), ("assistant", "thinking", "looked it up"), ("assistant", "text", "It is 4.")]


# The loop plugin's Stop hook, as it is written: the last assistant line found with grep, its
# text blocks read with jq; the turn goes on until the model says the promise.
LOOP = r"""#!/bin/bash
input=$(cat)
transcript=$(jq -r '.transcript_path' <<<"$input")
last=$(grep '"role":"assistant"' "$transcript" | tail -1)
text=$(jq -r '.message.content | map(select(.type == "text")) | map(.text) | join("\n")' <<<"$last")
if [[ "$text" == *"<promise>DONE</promise>"* ]]; then
  exit 0
fi
jq -n '{decision: "block", reason: "Keep working: the promise was not made"}'
"""


@needs_jq
def test_a_loop_plugins_stop_hook_blocks_once_then_lets_go(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                          workspace: Path, tmp_path: Path) -> None:
    server.add(Reply(text="still working"), Reply(text="all set <promise>DONE</promise>"))
    ran = turn("-p", "do it", server=server, config={"hooks": hooks("Stop", "", script(tmp_path, "loop.sh", LOOP))})
    assert ran.code == 0, ran.err
    assert len(server.requests) == 2
    assert "Keep working: the promise was not made" in server.requests[1]["messages"][-1]["content"]
    assert "<promise>DONE</promise>" in ran.out


def test_the_transcript_follows_a_compacted_history(workspace: Path, tmp_path: Path) -> None:
    llm = ScriptedLLM([Reply(text="one"), Reply(text="two"), Reply(text="the summary"), Reply(text="three")])
    built = build_agent(Config.from_dict({"hooks": hooks("Stop", "", copier(tmp_path, "t.jsonl"))}), workspace,
                        RecordingUI(), llm=llm)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("a")
            await agent.ask("b")
            assert agent.compactor is not None
            await agent.compactor.manual(agent.session)
            await agent.ask("c")

    asyncio.run(go())
    reader = TranscriptReader(tmp_path / "t.jsonl")
    got = reader.conversation()
    # Written again from the compacted history: the summary first, the old turn gone.
    assert reader.entries[0]["isCompactSummary"] is True and "the summary" in got[0][2]
    assert got[-2:] == [("user", "text", "c"), ("assistant", "text", "three")]
    assert ("user", "text", "a") not in got and ("assistant", "text", "one") not in got


# -- $CLAUDE_ENV_FILE and the variables hooks are given ------------------------------------------------------

EXPORTER = r"""#!/bin/bash
if [ -n "$CLAUDE_ENV_FILE" ]; then
  echo 'export GREETING="hello from a hook"' >> "$CLAUDE_ENV_FILE"
  echo 'export PATH="$PATH:/opt/hook-tools"' >> "$CLAUDE_ENV_FILE"
  echo 'export MY_TOKEN=abcdefghijklmnopqrst' >> "$CLAUDE_ENV_FILE"
  echo 'export STAMP=$(touch pwned.txt)' >> "$CLAUDE_ENV_FILE"
fi
"""

SHOW_ENV = "printf '%s|%s|%s' \"$GREETING\" \"$MY_TOKEN\" \"${PATH##*:}\" > env.txt"


def test_claude_env_file_exports_reach_later_commands_and_hooks(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                                workspace: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    later = script(tmp_path, "later.sh", f"#!/bin/bash\ncat >/dev/null\nprintf '%s' \"$GREETING\" > {seen}\n")
    server.add(tool_reply(call("run_command", {"command": SHOW_ENV}, id="c")), Reply(text="done"))
    config = {"hooks": {**hooks("SessionStart", "", script(tmp_path, "export.sh", EXPORTER)),
                        **hooks("PreToolUse", "Bash", later)}}
    ran = turn("-p", "go", "--yes", server=server, config=config)
    assert ran.code == 0, ran.err
    assert (workspace / "env.txt").read_text() == "hello from a hook||/opt/hook-tools"
    assert seen.read_text() == "hello from a hook"
    assert not (workspace / "pwned.txt").exists()  # the file is read, never run
    assert "MY_TOKEN" in ran.err and "shell_env.keep" in ran.err and "line 4" in ran.err


def test_a_credential_exported_by_a_hook_reaches_commands_when_shell_env_keeps_it(
        turn, server: FakeServer, workspace: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("run_command", {"command": SHOW_ENV}, id="c")), Reply(text="done"))
    config = {"shell_env": {"keep": ["MY_TOKEN"]},
              "hooks": hooks("SessionStart", "", script(tmp_path, "export.sh", EXPORTER))}
    ran = turn("-p", "go", "--yes", server=server, config=config)
    assert ran.code == 0, ran.err
    assert (workspace / "env.txt").read_text() == "hello from a hook|abcdefghijklmnopqrst|/opt/hook-tools"
    assert "abcdefghijklmnopqrst" not in json.dumps(server.requests[1])  # redacted like any secret


def test_an_env_file_longer_than_the_limit_is_read_up_to_it(workspace: Path, tmp_path: Path) -> None:
    writer = script(tmp_path, "w.sh", "#!/bin/bash\nprintf 'export A=1\\nexport B=2\\nexport C=3\\n' >> "
                                      "\"$CLAUDE_ENV_FILE\"\n")
    llm = ScriptedLLM([Reply(text="ok")])
    ui = RecordingUI()
    built = build_agent(Config.from_dict({"hooks": hooks("SessionStart", "", writer),
                                          "limits": {"hook_output_bytes": 25}}), workspace, ui, llm=llm,
                        save_session=False)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")

    asyncio.run(go())
    assert [n.text for n in ui.of(Notice) if "CLAUDE_ENV_FILE" in n.text] == [
        "$CLAUDE_ENV_FILE: longer than 25 bytes (limits.hook_output_bytes); only its first 2 lines were read"]
    assert built.hooks is not None and built.hooks.environment()["B"] == "2" and "C" not in built.hooks.environment()


def test_hooks_get_the_variables_claude_code_sets(turn, server: FakeServer,  # type: ignore[no-untyped-def]
                                                  workspace: Path, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    dump = script(tmp_path, "dump.py", "import json, os\nkeys = ('CLAUDECODE', 'CLAUDE_CODE_ENTRYPOINT', "
                                       "'CLAUDE_PROJECT_DIR', 'CLAUDE_ENV_FILE')\n"
                                       f"json.dump({{k: os.environ.get(k) for k in keys}}, open({str(out)!r}, 'w'))\n")
    server.add(Reply(text="done"))
    ran = turn("-p", "go", server=server, config={"hooks": hooks("Stop", "", dump)})
    assert ran.code == 0, ran.err
    assert json.loads(out.read_text()) == {"CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "sdk-cli",
                                           "CLAUDE_PROJECT_DIR": str(workspace), "CLAUDE_ENV_FILE": None}


def test_the_repl_is_claude_codes_cli_entrypoint(workspace: Path) -> None:
    built = build_agent(Config.from_dict({"hooks": hooks("Stop", "", "true")}), workspace, RecordingUI(),
                        llm=ScriptedLLM(), save_session=False, idle_between_turns=True)
    assert built.hooks is not None and built.hooks.environment()["CLAUDE_CODE_ENTRYPOINT"] == "cli"


@pytest.mark.parametrize("text, values, problems", [
    ('export NODE_ENV=production', {"NODE_ENV": "production"}, []),
    ('export PATH="$PATH:./node_modules/.bin"', {"PATH": "/usr/bin:./node_modules/.bin"}, []),
    ("export Q='no $PATH here'", {"Q": "no $PATH here"}, []),
    ('declare -x N="from export -p"', {"N": "from export -p"}, []),
    ("export A=1 B=${A}2\nunset A", {"A": None, "B": "2"}, []),  # one line expands before it assigns, as bash does
    ('export E="a\\$b" F=x\\ y', {"E": "a$b", "F": "x y"}, []),
    ("export H=~/bin", {"H": "HOME/bin"}, []),
    ("# a comment\n\nexport K=v", {"K": "v"}, []),
    ("source ~/.nvm/nvm.sh", {}, ["line 1: only `export NAME=value` lines are read"]),
    ("export D=$(date)", {}, ["line 1: command substitution is not run"]),
    ("export X=1; rm -rf /", {}, ["line 1: `;` makes it a shell command"]),
    ('export U="open', {}, ["line 1: unterminated \""]),
])
def test_env_file_lines_are_read_as_the_shell_reads_one_word(text: str, values: dict[str, str | None],
                                                            problems: list[str], home: Path) -> None:
    from nanohermes.hooks.envfile import read_exports

    got = read_exports(text, {"PATH": "/usr/bin"})
    assert got.values == {k: v.replace("HOME", str(home)) if v else v for k, v in values.items()}
    assert [p[:len(want)] for p, want in zip(got.problems, problems, strict=True)] == problems


def test_a_session_not_saved_gives_hooks_a_transcript_in_a_withheld_folder_removed_at_the_end(
        turn, server: FakeServer, workspace: Path, home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    told = tmp_path / "told.json"
    keep = script(tmp_path, "keep.py", "import json, shutil, sys\nd = json.load(sys.stdin)\n"
                                       f"json.dump(d, open({str(told)!r}, 'w'))\n"
                                       f"shutil.copy(d['transcript_path'], {str(tmp_path / 't.jsonl')!r})\n")
    server.add(Reply(text="the answer"))
    ran = turn("-p", "a question", "--no-session", server=server, config={"hooks": hooks("Stop", "", keep)})
    assert ran.code == 0, ran.err
    path = Path(json.loads(told.read_text())["transcript_path"])
    assert path.is_relative_to(home / ".local" / "state" / "nanohermes")  # withheld, as the sessions are
    assert not path.exists() and not path.parent.exists()
    got = TranscriptReader(tmp_path / "t.jsonl").conversation()
    assert got == [("user", "text", "a question"), ("assistant", "text", "the answer")]
