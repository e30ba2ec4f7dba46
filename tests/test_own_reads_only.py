"""The one reader is the only way instruction, command, skill, agent and mentioned files are read.

Two checks: every file the package opens while a `-p` run reads them all (an audit hook on
`open` in the real process, so a read through any helper counts) was opened from
`nanohermes/guard/ownreads.py`; and no other module that names those files opens anything at all
(a scan of the source, which also covers code paths a run does not take).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from nanohermes.testing import FakeServer, Reply, call, tool_reply

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "nanohermes"
READER = PACKAGE / "guard" / "ownreads.py"

# Names only prompt files carry, and the folders of Claude Code's that hold them.
PROMPT_NAMES = {"AGENTS.md", "CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md", "SKILL.md"}
PROMPT_FOLDERS = {"commands", "agents", "skills"}
OPENERS = {"open", "read_text", "read_bytes", "fdopen", "read_exact", "open_exact"}

# Runs `nanohermes` with an audit hook recording, for each file of `names` opened, the
# package module that opened it (the innermost frame inside the package).
AUDITED = r"""
import os, sys
names, log, package = set(sys.argv[1].split(",")), os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND), sys.argv[3]
busy = []

def hook(event, args):
    if event != "open" or busy or not isinstance(args[0], (str, bytes)):
        return
    name = os.path.basename(os.fsdecode(args[0]))
    if name not in names:
        return
    busy.append(1)
    try:
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.startswith(package):
            frame = frame.f_back
        where = frame.f_code.co_filename if frame is not None else "?"
        os.write(log, f"{name}\t{where}\n".encode())
    finally:
        busy.pop()

sys.addaudithook(hook)
sys.argv = ["nanohermes", *sys.argv[4:]]
from nanohermes.cli import main
main()
"""


def test_only_the_reader_opens_the_files_put_into_the_prompt(server: FakeServer, workspace: Path, home: Path,
                                                               tmp_path: Path) -> None:
    files = {
        "AGENTS.md": "Agents rules @docs/imported-rules.md",
        "CLAUDE.md": "Claude rules",
        "CLAUDE.local.md": "Local rules",
        "docs/imported-rules.md": "Imported rules",
        ".claude/commands/review.md": "Review @mentioned-note.md",
        ".claude/skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Ship it.\n---\nShip it now.",
        ".claude/agents/helper.md": "---\nname: helper\ndescription: Helps out.\n---\nHelp as asked.",
        "mentioned-note.md": "a note",
        "src/CLAUDE.md": "Nested rules",
        "src/main.py": "pass\n",
    }
    for rel, text in files.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    (home / ".claude").mkdir()
    (home / ".claude" / "CLAUDE.md").write_text("My own rules")
    # A trusted project: its agent files are read (and offered as sub-agents) too.
    config = home / ".config" / "nanohermes" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"trusted_projects": [str(workspace)]}))
    names = {Path(rel).name for rel in files if rel != "src/main.py"}
    log = tmp_path / "opens.log"
    log.touch()
    server.add(Reply(text="reviewed"),
               tool_reply(call("skill", {"name": "deploy"}), call("read_file", {"path": "src/main.py"})),
               Reply(text="done"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "test-key"}
    for prompt in ("/review", "go on with @mentioned-note.md"):
        p = subprocess.run([sys.executable, "-c", AUDITED, ",".join(sorted(names)), str(log), str(PACKAGE), "-p", prompt,
                            "--base-url", server.base_url, "--model", "fake-model"],
                           cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    seen = [line.split("\t") for line in log.read_text().splitlines()]
    # Every file was read (the run used them all), each only by the reader.
    assert {name for name, _ in seen} == names
    assert {where for _, where in seen} == {str(READER)}
    sent = json.dumps(server.requests)
    for text in ("Agents rules", "Imported rules", "Local rules", "Ship it now.", "a note", "Nested rules", "My own rules",
                 "Helps out."):
        assert text in sent, text


def _names_prompt_files(tree: ast.AST) -> bool:
    consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return bool(consts & PROMPT_NAMES) or (".claude" in consts and bool(consts & PROMPT_FOLDERS))


def _opens(tree: ast.AST) -> list[int]:
    out: list[int] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in OPENERS:
                out.append(n.lineno)
    return out


def test_no_other_module_naming_prompt_files_opens_a_file() -> None:
    offenders: dict[str, list[int]] = {}
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == READER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not _names_prompt_files(tree):
            continue
        named.append(path.relative_to(PACKAGE).as_posix())
        if lines := _opens(tree):
            offenders[path.relative_to(PACKAGE).as_posix()] = lines
    assert offenders == {}, f"read these files through nanohermes.guard.ownreads: {offenders}"
    # The scan sees the modules that find these files (a scan that sees none checks nothing).
    assert {"turn/context.py", "extensions/custom_commands.py", "tools/skills.py", "extensions/agent_files.py"} <= set(named)


def test_the_scan_finds_an_open_beside_a_prompt_file_name() -> None:
    planted = ast.parse('def f(p):\n    return (p / "CLAUDE.md").read_text()\n')
    assert _names_prompt_files(planted) and _opens(planted) == [2]
    other = ast.parse('def f(p):\n    return (p / ".claude" / "agents" / "x.md").open().read()\n')
    assert _names_prompt_files(other) and _opens(other) == [2]
