"""The one-shot path stays lean: a `-p` turn loads neither the SDK nor the REPL's libraries
(nor ctypes or sqlite3, which only a confined command or the memory store needs), and options
it does not know still get typer's exact errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent

# A finished -p run leaves without the interpreter's teardown, but runs nanohermes's exit
# callbacks: the report is one of them.
PROBE = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]

def report():
    import gc

    heavy = [m for m in ("openai", "typer", "rich", "prompt_toolkit", "click", "pygments", "mcp",
                         "nanohermes.llm.responses", "httpx._main", "ctypes", "sqlite3")
             if m in sys.modules and getattr(sys.modules[m], "__file__", None)]
    print("loaded", heavy, file=sys.stderr)
    # What a turn that called no tool never needs, from its first start in a fresh HOME on.
    unused = sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types")
                    or m in ("nanohermes.tools.files", "nanohermes.tools.patch", "nanohermes.tools.shell",
                             "nanohermes.tools.search.grep", "nanohermes.tools.git", "nanohermes.tools.web",
                             "nanohermes.guard.sandbox", "nanohermes.tools.process", "nanohermes.guard.sockets",
                             "nanohermes.tools.patches.unified", "nanohermes.tools.patches.begin_patch",
                             "nanohermes.guard.commands", "nanohermes.guard.shellparse",
                             "nanohermes.guard.permissions.decision", "nanohermes.guard.permissions.lines",
                             "nanohermes.llm.textfinders.marked", "nanohermes.tools.todo",
                             "nanohermes.tools.toolsearch"))
    print("unused", unused, file=sys.stderr)
    print("collector", "on" if gc.isenabled() else "off", file=sys.stderr)

at_exit(report)
from nanohermes.cli import main
main()
"""


def test_a_p_turn_imports_no_sdk_no_typer_no_rich(server: FakeServer, workspace: Path) -> None:
    server.add(Reply(text="lean answer"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-c", PROBE, "-p", "hi", "--base-url", server.base_url, "--model", "fake-model",
                        "--output-format=text", "--no-session"], cwd=workspace, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    print(p.stdout)
    assert p.stdout == "lean answer\n", p.stderr
    assert p.returncode == 0 and "loaded []" in p.stderr, p.stderr


def test_a_p_turn_without_tool_calls_imports_no_pydantic_and_no_tool_code(server: FakeServer, home: Path,
                                                                          workspace: Path) -> None:
    """pydantic (the validator of config files and tool arguments) and the tools' code load
    only when there is something to validate or a tool to run: from the first start in a
    fresh HOME on, the tools' declarations ship with the package."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k", "HOME": str(home),
           "XDG_CACHE_HOME": str(home / "cache")}
    for answer in ("first", "second"):
        server.add(Reply(text=answer))
        p = subprocess.run([sys.executable, "-c", PROBE, "-p", "hi", "--base-url", server.base_url, "--model",
                            "fake-model"], cwd=workspace, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=60)
        assert p.returncode == 0 and p.stdout == answer + "\n", p.stderr
        assert "unused []" in p.stderr, p.stderr
    # A config file is validated: its plain values need no pydantic; one pydantic converts
    # loads it, for that alone.
    (home / ".config" / "nanohermes").mkdir(parents=True, exist_ok=True)
    for text, loaded in (("third", False), ("fourth", True)):
        (home / ".config" / "nanohermes" / "config.json").write_text(
            '{"max_turns": 5, "permissions": {"deny": ["web_fetch"]}}' if not loaded else '{"max_turns": "5"}')
        server.add(Reply(text=text))
        p = subprocess.run([sys.executable, "-c", PROBE, "-p", "hi", "--base-url", server.base_url, "--model",
                            "fake-model"], cwd=workspace, env=env,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert p.returncode == 0 and p.stdout == text + "\n", p.stderr
        assert ("'pydantic'" in p.stderr) == loaded and "nanohermes.tools.files" not in p.stderr, p.stderr


# Which parts of the safety core a run loaded, reported at its exit.
PARTS_PROBE = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]
at_exit(lambda: print("parts", sorted(m for m in ("nanohermes.guard.permissions.decision", "nanohermes.guard.commands",
                                                  "nanohermes.guard.shellparse", "nanohermes.guard.permissions.lines",
                                                  "nanohermes.guard.sandbox")
                                      if m in sys.modules), file=sys.stderr))
from nanohermes.cli import main
main()
"""


def test_the_command_analysis_loads_with_the_first_command_judged(server: FakeServer, workspace: Path) -> None:
    """A file read is judged without the shell analysis and the command catalogue, and runs
    without the sandbox; a command loads them, and is judged by them (a read-only line runs
    unasked in the default mode, confined)."""
    (workspace / "notes.txt").write_text("plover\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    argv = [sys.executable, "-c", PARTS_PROBE, "-p", "go", "--base-url", server.base_url, "--model", "fake-model",
            "--no-session"]
    server.add(tool_reply(call("read_file", {"path": "notes.txt"})), Reply(text="read"))
    p = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=60)
    assert p.returncode == 0 and p.stdout == "read\n", p.stderr
    assert "plover" in next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")
    assert "parts ['nanohermes.guard.permissions.decision']" in p.stderr, p.stderr
    server.add(tool_reply(call("run_command", {"command": "cat notes.txt"})), Reply(text="ran"))
    p = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=60)
    assert p.returncode == 0 and p.stdout == "ran\n", p.stderr
    assert "plover" in next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")
    assert ("parts ['nanohermes.guard.commands', 'nanohermes.guard.permissions.decision', "
            "'nanohermes.guard.permissions.lines', 'nanohermes.guard.sandbox', 'nanohermes.guard.shellparse']"
            ) in p.stderr, p.stderr


def test_the_collector_is_back_on_once_the_turn_runs(server: FakeServer, workspace: Path) -> None:
    """It is off only while the start-up loads: a long run still collects its garbage."""
    server.add(Reply(text="collected"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-c", PROBE, "-p", "hi", "--base-url", server.base_url, "--model", "fake-model",
                        "--no-session"], cwd=workspace, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert p.stdout == "collected\n", p.stderr
    assert "collector on" in p.stderr, p.stderr


def test_a_bad_value_still_gets_a_usage_error(cli, server: FakeServer) -> None:
    r = cli("-p", "hi", "--max-turns", "0", server=server)  # a number out of its range: read before typer
    assert r.code == 2
    assert "--max-turns takes a whole number of at least 1, not '0'" in r.err
    r = cli("-p", "hi", "--wire-api", "soap", server=server)  # a word outside a closed set: read before typer
    assert r.code == 2 and "--wire-api takes chat or responses, not 'soap'" in r.err
    assert server.requests == []
