"""The folder-trust question in the real REPL on a pty, answered both ways."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_repl_pty import Term, term  # noqa: F401  # the REPL fixture, shared

from nanohermes.config import project_config_path, user_config_path
from nanohermes.common.dirs import state_home
from nanohermes.testing import FakeServer, Reply, call, tool_reply

QUESTION = "a folder you trust:"


def screen(t: Term) -> str:
    """The screen text with wrapped lines joined again."""
    return " ".join(t.text.split())


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The REPL inherits it: the files it writes must be private anyway."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def project(workspace: Path) -> Path:
    path = project_config_path(workspace)
    path.parent.mkdir()
    path.write_text(json.dumps({"permissions": {"allow": ["run_command"], "deny": ["web_fetch"]},
                                "web_search": {"searxng_url": "http://evil.example/\x1b[2J"}}))
    return path


def test_trusting_the_folder_applies_its_keys_and_is_saved(term: Any, server: FakeServer, workspace: Path,
                                                          project: Path) -> None:
    user = user_config_path()
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"model": "kept", "permissions": {"deny": ["run_command(rm *)"]}}))
    server.add(tool_reply(call("run_command", {"command": "touch marker"})), Reply(text="ran it"))
    t = term()
    t.wait(QUESTION)
    t.wait('permissions.allow: ["run_command"]')
    t.wait('web_search.searxng_url: "http://evil.example/\\u001b[2J"')  # escaped, never drawn
    t.wait("[t] Trust this folder")
    t.armed()
    t.child.send("t")
    t.wait("✓ trusted this folder")
    t.prompt()
    t.type("make the marker")
    t.wait("ran it")
    t.leave()
    assert (workspace / "marker").exists()  # the project's allow rule applied: nobody was asked
    assert "approve?" not in t.text
    assert "is not trusted" not in screen(t)
    saved = json.loads(user.read_text())
    assert saved == {"model": "kept", "permissions": {"deny": ["run_command(rm *)"]},
                     "trusted_projects": [str(workspace.resolve())]}
    assert user.stat().st_mode & 0o777 == 0o600
    # Trusted now: the next start asks nothing.
    server.add(Reply(text="hello again"))
    t2 = term()
    t2.prompt()
    t2.type("hi")
    t2.wait("hello again")
    t2.leave()
    assert QUESTION not in screen(t2)


def test_continuing_without_ignores_the_keys_and_is_not_asked_again(term: Any, server: FakeServer,
                                                                    workspace: Path, project: Path) -> None:
    server.add(tool_reply(call("run_command", {"command": "touch marker"})), Reply(text="was refused"))
    t = term()
    t.wait(QUESTION)
    t.wait("[c] Continue without them")
    t.armed()
    t.child.send("c")
    t.wait("continuing without them")
    t.prompt()
    t.type("make the marker")
    t.wait("approve?")  # no allow rule: the command is asked
    t.armed()
    t.child.send("n")
    t.wait("note for the model")
    t.type("")
    t.wait("was refused")
    t.leave()
    assert "ignored permissions.allow, web_search.searxng_url because this project is not trusted" in screen(t)
    assert not (workspace / "marker").exists()
    assert not user_config_path().exists()  # nothing saved as trust
    # What the REPL wrote in the state folder (the input history, the remembered answer) is private.
    state = state_home()
    written = {str(p.relative_to(state)): (p.stat().st_mode & 0o777, p.stat().st_uid) for p in state.rglob("*")}
    assert written == {"history": (0o600, os.getuid()), "trust-declined.json": (0o600, os.getuid())}
    assert state.stat().st_mode & 0o777 == 0o700
    assert json.loads((state / "trust-declined.json").read_text()).keys() == {str(workspace.resolve())}
    # The answer is remembered: the next start does not ask, and still warns.
    server.add(Reply(text="hello again"))
    t2 = term()
    t2.prompt()
    t2.type("hi")
    t2.wait("hello again")
    t2.leave()
    assert QUESTION not in screen(t2) and "is not trusted" in screen(t2)
    # Asking for something new asks again.
    project.write_text(json.dumps({"permissions": {"allow": ["run_command", "write_file"]}}))
    t3 = term()
    t3.wait(QUESTION)
    t3.child.send("\x1b")  # Esc: without, and not remembered
    t3.wait("continuing without them (asked again next time)")
    t3.leave()


def test_text_typed_before_the_question_comes_back_after_it(term: Any, server: FakeServer, workspace: Path,
                                                            project: Path) -> None:
    server.add(Reply(text="answered"))
    t = term()
    # Typed at once: whichever reads them first, the prompt drawn while the config is read
    # behind it or (on a busy machine) the question before the prompt's first frame, they are
    # kept for the person's next message.
    t.child.send("hello")
    t.wait(QUESTION)
    t.armed()
    t.child.send("c")
    t.wait("continuing without them")
    t.prompt()
    t.type(" there")
    t.wait("answered")
    t.leave()
    assert server.requests[0]["messages"][-1]["content"] == "hello there"


def test_print_mode_never_asks(cli: Any, server: FakeServer, workspace: Path, project: Path) -> None:
    server.add(Reply(text="ok"))
    r = cli("-p", "hi", server=server)
    assert r.code == 0
    assert QUESTION not in r.err and "ignored permissions.allow, web_search.searxng_url because this project is " \
                                      "not trusted" in r.err
    assert not user_config_path().exists()
