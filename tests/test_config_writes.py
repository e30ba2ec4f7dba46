"""Files that configure nanohermes or run code when it starts are protected writes: Claude
Code's project files, `.mcp.json`, `.nanohermes/`, the user's config folders and the
interpreter nanohermes runs from. Each door is first shown open (the planted file does run),
then closed through the real `nanohermes -p`: the file tools ask (and without a person refuse),
a `--yes` command runs in the sandbox, which keeps them read-only, and a start-up file planted
in any other virtual environment of the workspace is named at the turn's end."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard.pathrules import protected_write
from nanohermes.turn.runtime import DENIED
from nanohermes.guard.sandbox import probe
from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent
PYDIR = f"python{sys.version_info.major}.{sys.version_info.minor}"
confines = pytest.mark.skipif(not probe().confines, reason="the sandbox needs Landlock and user namespaces")


def results(server: FakeServer) -> dict[str, str]:
    """Each tool result of the last request, by call id."""
    return {m["tool_call_id"]: m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"}


def trusted(workspace: Path, **more: Any) -> dict[str, Any]:
    return {"trusted_projects": [str(workspace.resolve())], **more}


def marker_hook(marker: Path) -> str:
    script = "import sys; open(sys.argv[1], 'a').write('ran')"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {shlex.quote(str(marker))}"


# -- which paths are protected ---------------------------------------------------------------

@pytest.mark.parametrize("path", [
    ".claude/settings.json", ".claude/settings.local.json", ".mcp.json", ".claude/commands/review.md",
    ".claude/agents/helper.md", ".claude/skills/s/SKILL.md", ".nanohermes/config.json", ".nanohermes/guard/commands/x.md",
    "packages/api/.mcp.json", "packages/api/.claude/settings.json",  # a start in that folder reads them
    "~/.claude/settings.json", "~/.claude.json", "~/.config/nanohermes/config.json", "~/.local/share/nanohermes/x",
])
def test_files_that_configure_nanohermes_are_protected(path: str, workspace: Path) -> None:
    assert protected_write(workspace, path)


@pytest.mark.parametrize("path", ["README.md", "src/app.py", ".claude/CLAUDE.md", "claude/settings.json",
                                  ".venv/lib/x.pth", "mcp.json"])
def test_other_workspace_files_are_not(path: str, workspace: Path) -> None:
    assert not protected_write(workspace, path)


def test_the_interpreter_nanohermes_runs_from_is_protected(workspace: Path) -> None:
    import site

    for path in (*site.getsitepackages(), sys.prefix + "/bin/python", sys.prefix + "/pyvenv.cfg",
                 site.getusersitepackages() + "/evil.pth"):
        assert protected_write(workspace, path), path


# -- Claude Code's project files: the attack, then the file tools asking -----------------------

def test_a_planted_claude_hook_runs_at_the_next_start(turn: Any, server: FakeServer, workspace: Path,
                                                      tmp_path: Path) -> None:
    """The control: a hook written into `.claude/settings.json` runs, unconfined, at the next
    start in the (trusted) project."""
    marker = tmp_path / "ran"
    hooks = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": marker_hook(marker)}]}]}}
    (workspace / ".claude").mkdir()
    (workspace / ".claude/settings.json").write_text(json.dumps(hooks))
    server.add(Reply(text="hi"))
    r = turn("-p", "hi", server=server, config=trusted(workspace))
    assert r.code == 0, r.err
    assert marker.read_text() == "ran"


WRITES = [(".claude/settings.json", "{}"), (".claude/settings.local.json", "{}"), (".mcp.json", '{"mcpServers": {}}'),
          (".claude/commands/review.md", "run it"), (".claude/agents/helper.md", "---\nname: h\n---\n"),
          (".claude/skills/s/SKILL.md", "---\nname: s\ndescription: d\n---\n"), (".nanohermes/config.json", "{}"),
          ("sub/.mcp.json", "{}")]


def test_the_file_tools_ask_before_writing_them_in_accept_edits(turn: Any, server: FakeServer,
                                                                workspace: Path) -> None:
    """accept-edits writes the workspace unasked, but not these: with no terminal to ask, the
    question is a refusal, and nothing is written (write_file, edit_file and apply_patch alike)."""
    (workspace / ".claude").mkdir()
    (workspace / ".claude/settings.local.json").write_text('{"env": {}}\n')
    calls = [call("read_file", {"path": ".claude/settings.local.json"}, id="read")]
    calls += [call("write_file", {"path": path, "content": text}, id=f"w{i}") for i, (path, text) in enumerate(WRITES)]
    calls += [call("write_file", {"path": "notes.md", "content": "plain"}, id="control"),
              call("apply_patch", {"diff": "--- /dev/null\n+++ b/.mcp.json\n@@ -0,0 +1 @@\n+{}\n"}, id="patch"),
              call("edit_file", {"path": ".claude/settings.local.json", "old_string": "{}",
                                 "new_string": '{"x": 1}'}, id="edit")]
    server.add(tool_reply(*calls), Reply(text="done"))
    r = turn("-p", "configure", "--mode", "accept-edits", server=server, config=trusted(workspace))
    assert r.code == 0, r.err
    got = results(server)
    assert got.pop("control").startswith("created notes.md")
    assert got.pop("read").startswith("1\t")
    assert got == {k: DENIED for k in got}, got
    assert (workspace / "notes.md").read_text() == "plain"
    assert (workspace / ".claude/settings.local.json").read_text() == '{"env": {}}\n'
    for path, _ in WRITES:
        if path != ".claude/settings.local.json":
            assert not (workspace / path).exists(), path


def test_yes_refuses_them_with_the_reason(turn: Any, server: FakeServer, workspace: Path, home: Path,
                                          tmp_path: Path) -> None:
    """--yes has nobody to ask: a protected write of a file tool is refused, saying why and
    what allows it; outside the workspace, into .git/config and into the user's config too."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    config_before = (workspace / ".git/config").read_text()
    user_config = home / ".config/nanohermes/config.json"
    outside = tmp_path / "outside.txt"
    calls = [call("write_file", {"path": ".claude/settings.json", "content": "{}"}, id="claude"),
             call("write_file", {"path": ".mcp.json", "content": "{}"}, id="mcp"),
             call("write_file", {"path": str(outside), "content": "x"}, id="outside"),
             call("read_file", {"path": ".git/config"}, id="read"),
             call("edit_file", {"path": ".git/config", "old_string": "[core]",
                                "new_string": "[core]\n\tfsmonitor = touch X"}, id="git"),
             call("write_file", {"path": str(user_config), "content": '{"hooks": {}}'}, id="user"),
             call("write_file", {"path": "fine.txt", "content": "x"}, id="control")]
    server.add(tool_reply(*calls), Reply(text="done"))
    r = turn("-p", "configure", "--yes", server=server, config={})
    assert r.code == 0, r.err
    got = results(server)
    assert got.pop("control").startswith("created fine.txt") and got.pop("read").startswith("1\t")
    for key, text in got.items():
        assert text.startswith("ERROR: writes a protected path") and "--dangerously-skip-permissions" in text, (key, text)
    assert not (workspace / ".claude").exists() and not (workspace / ".mcp.json").exists() and not outside.exists()
    assert (workspace / ".git/config").read_text() == config_before
    assert json.loads(user_config.read_text()) == {}  # the fixture's own config, as it wrote it


# -- commands under --yes: the sandbox keeps them read-only -------------------------------------

@confines
def test_a_yes_command_cannot_write_them(turn: Any, server: FakeServer, workspace: Path, home: Path) -> None:
    (workspace / ".claude/commands").mkdir(parents=True)
    (workspace / ".claude/settings.json").write_text("{}")
    (home / ".claude").mkdir()
    lines = {
        "redirect": "printf '{\"hooks\": {}}' > .claude/settings.json",
        "python": "python3 -c \"open('.claude/settings.json', 'w').write('{1}')\"",
        "local": "printf x > .claude/settings.local.json",
        "mcp": "printf '{}' > .mcp.json",
        "command": "printf x > .claude/commands/review.md",
        "agents": "mkdir -p .claude/agents && printf x > .claude/agents/a.md",
        "renamed": "mv .claude .c2; mkdir -p .claude && printf x > .claude/settings.json",
        "nanohermes": "mkdir -p .nanohermes && printf '{}' > .nanohermes/config.json",
        "home": f"printf x > {home}/.claude/settings.json",
        "control": "printf x > notes.txt",
    }
    server.add(tool_reply(*(call("run_command", {"command": line}, id=k) for k, line in lines.items())),
               Reply(text="done"))
    r = turn("-p", "configure", "--yes", "--output-format", "json", server=server, config=trusted(workspace))
    assert r.code == 0, r.err
    assert (workspace / "notes.txt").read_text() == "x"
    assert (workspace / ".claude/settings.json").read_text() == "{}"
    assert sorted(p.name for p in (workspace / ".claude").iterdir()) == ["commands", "settings.json"]
    assert list((workspace / ".claude/commands").iterdir()) == []
    assert not (workspace / ".c2").exists() and not (workspace / ".mcp.json").exists()
    assert not (workspace / ".nanohermes").exists() and list((home / ".claude").iterdir()) == []
    refused = json.dumps(r.json()["sandbox_refusals"])
    assert ".mcp.json" in refused and "settings.json" in refused


@confines
def test_a_background_task_making_them_again_and_again_leaves_none(turn: Any, server: FakeServer,
                                                                   workspace: Path) -> None:
    """A task outlives its call, so what it makes is taken away as it runs: each time it makes
    the files again (after seeing them gone), and once more when it ends."""
    plant = ("for i in 1 2 3; do while [ -e .mcp.json ]; do sleep 0.05; done; mkdir -p .claude; "
             "printf '{}' > .mcp.json; printf '{}' > .claude/settings.json; echo $i >> made.txt; done")
    wait = "until grep -qx 3 made.txt 2>/dev/null; do sleep 0.1; done"
    server.add(tool_reply(call("run_command", {"command": plant, "background": True})),
               tool_reply(call("run_command", {"command": wait, "timeout_secs": 60})), Reply(text="done"))
    r = turn("-p", "configure", "--yes", server=server, config=trusted(workspace))
    assert r.code == 0, r.err
    assert (workspace / "made.txt").read_text().split() == ["1", "2", "3"]  # made three times, taken away each time
    assert not (workspace / ".mcp.json").exists() and not (workspace / ".claude/settings.json").exists()


@pytest.mark.parametrize("mode", [("--yes",), ("--mode", "goal")])
def test_an_unattended_run_shows_no_secret_file_to_the_model(turn: Any, server: FakeServer, workspace: Path,
                                                             home: Path, mode: tuple[str, ...]) -> None:
    """As its commands are withheld them: the user's config holding api_key, and the
    workspace's `.env`, are refused to read_file, grep and edit_file alike (nobody can be
    asked), unless a rule names the file."""
    key = "sk-own-key-4b1d"
    (workspace / ".env").write_text("TOKEN=env-secret-77\n")
    (workspace / "other.env").write_text("TOKEN=named-secret-12\n")
    config_file = home / ".config" / "nanohermes" / "config.json"
    calls = [call("read_file", {"path": str(config_file)}, id="config"),
             call("grep", {"pattern": "sk-", "path": str(config_file)}, id="grep"),
             call("read_file", {"path": ".env"}, id="env"),
             call("edit_file", {"path": ".env", "old_string": "TOKEN=wrong", "new_string": "x"}, id="edit"),
             call("read_file", {"path": "other.env"}, id="named")]
    server.add(tool_reply(*calls), Reply(text="done"))
    r = turn("-p", "look", *mode, server=server,
             config={"api_key": key, "permissions": {"secret_files": [".env", "*.env"],
                                                     "allow": ["read_file(other.env)"]}})
    assert r.code == 0, r.err
    got = results(server)
    sent = json.dumps(server.requests)
    assert key not in sent and "env-secret-77" not in sent
    assert got.pop("named").startswith("1\tTOKEN=named-secret-12")  # the rule names it
    for k, v in got.items():
        assert v.startswith("ERROR: ") and "nobody is asked in an unattended run" in v, (k, v)
    assert got["env"].endswith("read_file(.env)") and got["edit"].endswith("edit_file(.env)")


# -- the interpreter nanohermes runs from, inside the workspace ------------------------------------

def workspace_venv(workspace: Path) -> tuple[Path, Path]:
    """A real venv in the workspace that runs nanohermes (this checkout, with the test
    environment's packages on its path): (its python, its site-packages)."""
    venv = workspace / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = venv / "lib" / PYDIR / "site-packages"
    import site as site_module

    (site / "nanohermes-dev.pth").write_text("\n".join([str(REPO), *site_module.getsitepackages()]) + "\n")
    return venv / "bin" / "python", site


def run_from(python: Path, workspace: Path, server: FakeServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": "test-key"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(python), "-m", "nanohermes", *args, "--base-url", server.base_url, "--model", "fake"],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@confines
def test_the_venv_nanohermes_runs_from_cannot_be_planted(server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    python, site = workspace_venv(workspace)
    marker = tmp_path / "ran"
    plant = f"import os; open({str(marker)!r}, 'a').write('ran')\n"
    # The control: a .pth file there runs at the next start of that interpreter.
    (site / "evil.pth").write_text(plant)
    subprocess.run([str(python), "-c", "pass"], check=True, timeout=60)
    assert marker.read_text().startswith("ran")  # (once per site folder that reaches it: lib and lib64)
    (site / "evil.pth").unlink()
    marker.unlink()
    check = run_from(python, workspace, server, "--version")
    assert check.returncode == 0, check.stderr

    rel = site.relative_to(workspace)
    server.add(tool_reply(call("write_file", {"path": f"{rel}/evil.pth", "content": plant}, id="asked")),
               Reply(text="done"))
    r = run_from(python, workspace, server, "-p", "plant", "--mode", "accept-edits")
    assert r.returncode == 0, r.stderr
    assert results(server) == {"asked": DENIED}

    writes = {"tool": call("write_file", {"path": f"{rel}/evil.pth", "content": plant}, id="tool"),
              "redirect": call("run_command", {"command": f"printf %s {shlex.quote(plant)} > {rel}/evil.pth"}, id="redirect"),
              "python": call("run_command", {"command": f"python3 -c \"open('{rel}/sitecustomize.py', 'w').write('x')\""},
                             id="python"),
              "bin": call("run_command", {"command": "printf x > .venv/bin/nanohermes"}, id="bin"),
              "cfg": call("run_command", {"command": "printf 'home = /tmp' > .venv/pyvenv.cfg"}, id="cfg")}
    server.add(tool_reply(*writes.values()), Reply(text="done"))
    r = run_from(python, workspace, server, "-p", "plant", "--yes", "--output-format", "json")
    assert r.returncode == 0, r.stderr
    got = results(server)
    assert got["tool"].startswith("ERROR: writes a protected path"), got["tool"]
    assert not (site / "evil.pth").exists() and not (site / "sitecustomize.py").exists()
    assert not (workspace / ".venv/bin/nanohermes").exists() and "home = /tmp" not in (workspace / ".venv/pyvenv.cfg").read_text()
    subprocess.run([str(python), "-c", "pass"], check=True, timeout=60)
    assert not marker.exists()


# -- start-up files in the workspace's other virtual environments: named at the turn's end -------

def test_start_up_files_planted_in_any_workspace_venv_are_named(turn: Any, server: FakeServer,
                                                                workspace: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")], check=True, timeout=120)
    tox = workspace / ".tox/py/lib" / PYDIR / "site-packages"
    tox.mkdir(parents=True)
    (workspace / ".tox/py/pyvenv.cfg").write_text("home = /usr/bin\n")
    (workspace / "vendor/dist-packages").mkdir(parents=True)
    (workspace / ".venv/lib" / PYDIR / "site-packages/old.pth").write_text("import os\n")  # there before the turn
    lines = [f"printf 'import os' > .venv/lib/{PYDIR}/site-packages/evil.pth",
             f"printf x > .tox/py/lib/{PYDIR}/site-packages/sitecustomize.py",
             "printf x > vendor/dist-packages/usercustomize.py", "printf x > notes.txt"]
    server.add(tool_reply(*(call("run_command", {"command": line}) for line in lines)), Reply(text="done"))
    r = turn("-p", "set up", "--yes", "--output-format", "json", server=server)
    assert r.code == 0, r.err
    later = {w.split(": ", 1)[0] for w in r.json()["runs_later"]}
    assert later == {f".venv/lib/{PYDIR}/site-packages/evil.pth", f".tox/py/lib/{PYDIR}/site-packages/sitecustomize.py",
                     "vendor/dist-packages/usercustomize.py"}
    assert "3 files this turn created or changed run code later" in r.err

    # A turn that changes none of them names nothing.
    server.add(tool_reply(call("run_command", {"command": "printf y > notes.txt"})), Reply(text="done"))
    r = turn("-p", "again", "--yes", "--output-format", "json", server=server)
    assert r.json()["runs_later"] == []


def test_the_look_for_start_up_files_is_bounded(turn: Any, server: FakeServer, workspace: Path) -> None:
    for name in ("a", "b", "c"):
        (workspace / name).mkdir()
    server.add(tool_reply(call("write_file", {"path": "a/new.txt", "content": "x"})), Reply(text="done"))
    r = turn("-p", "hi", "--output-format", "json", "--yes", server=server, config={"limits": {"startup_scan_folders": 2}})
    assert r.code == 0, r.err
    assert ("the look for Python start-up files (.pth, sitecustomize.py) in the workspace stopped after 2 folders "
            "(limits.startup_scan_folders)") in r.err


# -- everything allowed is a flag of its own, never a project's choice -----------------------------

def test_goal_mode_refuses_a_protected_write_as_yes_does(turn: Any, server: FakeServer, workspace: Path,
                                                         tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    server.add(tool_reply(call("write_file", {"path": str(outside), "content": "x"}, id="w"),
                          call("write_file", {"path": "inside.txt", "content": "x"}, id="in")), Reply(text="done"))
    r = turn("-p", "write", "--mode", "goal", server=server)
    assert r.code == 0, r.err
    got = results(server)
    assert got["w"].startswith("ERROR: writes a protected path") and not outside.exists()
    assert got["in"].startswith("created inside.txt")


def test_dangerously_skip_permissions_writes_protected_paths_and_runs_unconfined(
        turn: Any, server: FakeServer, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "made-by-command"
    server.add(tool_reply(call("write_file", {"path": ".mcp.json", "content": "{}"}, id="w"),
                          call("run_command", {"command": f"touch {outside}"}, id="r")), Reply(text="done"))
    r = turn("-p", "go", "--dangerously-skip-permissions", server=server)
    assert r.code == 0, r.err
    assert (workspace / ".mcp.json").read_text() == "{}" and outside.exists()


def test_no_project_file_turns_every_permission_off(turn: Any, server: FakeServer, workspace: Path) -> None:
    """Even in a trusted project, `dangerously_skip_permissions` comes only from the user's config."""
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes/config.json").write_text(json.dumps({"dangerously_skip_permissions": True}))
    server.add(tool_reply(call("write_file", {"path": ".mcp.json", "content": "{}"}, id="w")), Reply(text="done"))
    r = turn("-p", "go", "--yes", server=server, config=trusted(workspace))
    assert r.code == 0, r.err
    assert results(server)["w"].startswith("ERROR: writes a protected path") and not (workspace / ".mcp.json").exists()
    assert "dangerously_skip_permissions" in r.err


def test_the_repl_asks_a_person_before_writing_claude_settings(workspace: Path, home: Path,
                                                               server: FakeServer) -> None:
    """In accept-edits the REPL writes the workspace unasked, but asks about
    `.claude/settings.json`, saying why; a yes writes it."""
    from test_repl_pty import Term

    server.add(tool_reply(call("write_file", {"path": "notes.md", "content": "n"}, id="n"),
                          call("write_file", {"path": ".claude/settings.json", "content": "{}"}, id="s")),
               Reply(text="configured"))
    t = Term(workspace, home, server, args=("--mode", "accept-edits"))
    try:
        t.prompt()
        t.type("configure")
        t.wait("approve?")
        t.wait("writes a protected path")
        t.wait("[n] No")
        assert (workspace / "notes.md").read_text() == "n"  # written unasked before the question
        t.armed()
        t.child.send("y")
        t.wait("configured")
        t.leave()
    finally:
        if t.child.isalive():
            t.child.terminate(force=True)
    assert (workspace / ".claude/settings.json").read_text() == "{}"


@confines
def test_in_a_workspace_that_holds_the_users_folders_they_stay_read_only(turn: Any, server: FakeServer,
                                                                          home: Path) -> None:
    """Working in the home folder itself: ~/.claude and nanohermes's config are inside the
    writable workspace, and still read-only to a --yes command."""
    (home / ".claude").mkdir()
    lines = ["printf x > .claude/settings.json", "printf x > .claude.json",
             "printf '{\"hooks\": {}}' > .config/nanohermes/config.json", "printf x > notes.txt"]
    server.add(tool_reply(*(call("run_command", {"command": line}) for line in lines)), Reply(text="done"))
    r = turn("-p", "configure", "--yes", "-C", str(home), server=server, config={}, cwd=home)
    assert r.code == 0, r.err
    assert (home / "notes.txt").read_text() == "x"
    assert list((home / ".claude").iterdir()) == [] and not (home / ".claude.json").exists()
    assert json.loads((home / ".config/nanohermes/config.json").read_text()) == {}
