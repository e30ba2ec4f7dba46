"""What command files make nanohermes say, each message once: a `!` command not run (in the
prompt the model reads), and the notes on stderr about a command file's tools, model and
front matter. Each row runs `-p` with a real command file against the fake server. The other
tests assert decisions and state; rewording a message changes one row here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from wording_support import said

from nanohermes.extensions.custom_commands import discover
from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply

# (id, where the file is ("home" or "project"), its name and text, the command line, config,
# the models the endpoint lists (None: it cannot list them), where the text is ("prompt", or
# the stderr line that starts so), the exact text ({ws}: the workspace, {file}: the file))
COMMANDS: list[tuple[str, str, str, str, tuple[str, ...], dict[str, Any], tuple[str, ...] | None, str, str]] = [
    ("bang-needs-approval", "home", "make.md", "Made: !`touch made.txt`", ("/make",), {}, ("fake-model",), "prompt",
     "Made: [`touch made.txt` was not run: it needs approval, and nobody is here to give it; to let it run unasked, "
     "allow it in the command file (allowed-tools: Bash(touch:*)), with a permissions.allow rule, or with --yes]"),
    ("bang-denied", "home", "clean.md", "Cleaned: !`rm keep.txt`", ("/clean", "--yes"),
     {"permissions": {"deny": ["run_command(rm *)"]}}, ("fake-model",), "prompt",
     "Cleaned: [`rm keep.txt` was not run: denied by rule run_command(rm *)]"),
    ("bang-plan-mode", "home", "clean.md", "Cleaned: !`rm keep.txt`", ("/clean", "--mode", "plan"), {}, ("fake-model",),
     "prompt", "Cleaned: [`rm keep.txt` was not run: run_command is not available in plan mode]"),
    ("bang-untrusted", "project", "st.md", "Status: !`ls`", ("/st",), {}, ("fake-model",), "prompt",
     "Status: [`ls` was not run: a project's command runs its `!` commands unasked only in a trusted project, and "
     "nobody is here to say yes; this project is not trusted; to allow it, add \"{ws}\" to trusted_projects in your "
     "config]"),
    ("allowed-tools-untrusted", "project", "c.md", "---\nallowed-tools: Bash(git add:*)\n---\nGo.", ("/c",), {},
     ("fake-model",), "nanohermes: warning: /c: ",
     "nanohermes: warning: /c: allowed-tools ignored (Bash(git add:*)): this project is not trusted; to allow it, add "
     "\"{ws}\" to trusted_projects in your config"),
    ("unreadable-file", "project", "broken.md", "---\nJust prose, no keys\n---\nDo it.", ("/broken", "now"), {},
     ("fake-model",), "nanohermes: error: /broken ",
     "nanohermes: error: /broken cannot run: {file} (command file) not read: its front matter cannot be read (front "
     "matter line 2 is not `key: value`: 'Just prose, no keys')"),
    ("claude-model-without-alias", "home", "think.md", "---\nmodel: claude-sonnet-4-0\n---\nThink.", ("/think",), {},
     ("fake-model",), "nanohermes: warning: /think: ",
     "nanohermes: warning: /think: model 'claude-sonnet-4-0' ignored: it is a Claude model, which the endpoint does "
     "not list, and model_aliases has no entry for 'sonnet' (set model_aliases, e.g. {{\"sonnet\": \"<a model of this "
     "endpoint>\"}}); fake-model is used instead"),
    ("model-not-served", "home", "think.md", "---\nmodel: gpt-4o-mini\n---\nThink.", ("/think",), {}, None,
     "nanohermes: warning: /think: ",
     "nanohermes: warning: /think: the endpoint does not serve model `gpt-4o-mini` (The model `gpt-4o-mini` does not "
     "exist); fake-model is used instead"),
    ("alias-not-listed", "home", "think.md", "---\nmodel: opus\n---\nThink.", ("/think",),
     {"model_aliases": {"opus": "gone-model"}}, ("fake-model",), "nanohermes: warning: /think: ",
     "nanohermes: warning: /think: model 'opus' ignored: model_aliases maps it to 'gone-model', which the endpoint "
     "does not list; fake-model is used instead"),
    ("claude-model-unlisted", "home", "b.md", "---\nmodel: haiku\n---\nB.", ("/b",), {}, None, "nanohermes: warning: /b: ",
     "nanohermes: warning: /b: model 'haiku' ignored: it is a Claude model, and the endpoint could not say which "
     "models it serves (the endpoint answered 404 for chat completions at {any}), and model_aliases has no entry for "
     "'haiku' (set model_aliases, e.g. {{\"haiku\": \"<a model of this endpoint>\"}}); fake-model is used instead"),
]


def refuse_other_models(body: dict[str, Any]) -> Reply | Fault:
    if body["model"] != "fake-model":
        return Fault(status=404, message=f"The model `{body['model']}` does not exist", code="model_not_found")
    return Reply(text="ok")


@pytest.mark.parametrize("where,name,text,args,config,models,seen,expected", [r[1:] for r in COMMANDS],
                         ids=[r[0] for r in COMMANDS])
def test_command_files_say(turn, workspace: Path, home: Path, where: str, name: str, text: str,  # type: ignore[no-untyped-def]
                           args: tuple[str, ...], config: dict[str, Any], models: tuple[str, ...] | None, seen: str,
                           expected: str) -> None:
    folder = (home if where == "home" else workspace) / ".claude" / "commands"
    folder.mkdir(parents=True)
    (folder / name).write_text(text)
    (workspace / "keep.txt").write_text("kept")
    listing = {"models": models} if models else {"models_answer": Fault(status=404)}
    with FakeServer([refuse_other_models] * 3, **listing) as server:  # type: ignore[arg-type]
        ran = turn("-p", *args, server=server, config=config)
        if seen == "prompt":
            out = str(server.requests[0]["messages"][-1]["content"])
        else:
            [out] = [line for line in ran.err.splitlines() if line.startswith(seen)]
    assert said(out, expected, ws=str(workspace), file=str(folder / name)), out


def said_on_stderr(err: str, having: str) -> str:
    """The error line naming `having` and the hint under it."""
    lines = err.splitlines()
    at = next(i for i, ln in enumerate(lines) if having in ln)
    return "\n".join(lines[at:at + 2])


def test_print_mode_command_lines_say(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    ran = turn("-p", "/help", server=server)
    assert said_on_stderr(ran.err, "/help") == (
        "nanohermes: error: /help is a command of the REPL; with -p only /init, /export and custom commands run\n"
        "hint: run `nanohermes` for /help; to ask the model about it, put the question in words")
    ran = turn("-p", "/export out.md", server=server)
    assert said_on_stderr(ran.err, "export") == (
        "nanohermes: error: nothing to export: this session has no conversation yet\n"
        "hint: export a saved one with --continue or --resume ID")
    server.add(Reply(text="the answer"))
    turn("-p", "a question", server=server)
    ran = turn("-p", "/export out.md", "--continue", "--output-format", "json", server=server)
    assert json.loads(ran.out)["result"] == f"exported 2 messages to {workspace / 'out.md'}"
    server.add(tool_reply(call("write_file", {"path": "AGENTS.md", "content": "# demo\n"})), Reply(text="tried"))
    ran = turn("-p", "/init", server=server)
    assert said_on_stderr(ran.err, "/init did not write") == (
        "nanohermes: error: /init did not write AGENTS.md: the write needs approval, and nobody was there to give it\n"
        "hint: rerun with --yes or --mode accept-edits, or run /init in the REPL")
    ran = turn("-p", "/init", "--mode", "plan", server=server)
    assert said_on_stderr(ran.err, "plan mode") == (
        "nanohermes: error: /init writes AGENTS.md, and plan mode writes nothing\n"
        "hint: run it in another mode, e.g. --mode accept-edits")


def test_a_command_file_with_a_bad_name_says(workspace: Path) -> None:
    (workspace / ".nanohermes" / "commands").mkdir(parents=True)
    (workspace / ".nanohermes" / "commands" / "bad name.md").write_text("x")
    assert discover(workspace).warnings == [
        f"{workspace / '.nanohermes' / 'commands' / 'bad name.md'}: command names are letters, digits, _ . and -; file "
        "skipped"]
