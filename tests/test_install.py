"""The README's first command leaves a `nanohermes` a person can type in any repository, whose
commands run the person's own Python, not nanohermes's. Its venv and pip steps are how the
suite's own venv was made (they are not run again: no network here); the steps after them are
run as written, with bash, in a clone whose `.venv` is the suite's, under a fresh HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_docs import INSTALL, ROOT, code_blocks

from nanohermes.testing import FakeServer, Reply, call, tool_reply

SCRIPT = Path(sys.executable).parent / "nanohermes"  # the suite's own nanohermes, as pip installed it


@pytest.mark.skipif(sys.prefix == sys.base_prefix or not SCRIPT.exists(),
                    reason="the suite runs from no venv with nanohermes installed")
def test_the_readmes_install_leaves_nanohermes_on_path_running_the_persons_python(
        tmp_path: Path, home: Path, server: FakeServer) -> None:
    steps = code_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[0].split(" && ")
    assert " && ".join(steps) == INSTALL
    assert steps[:2] == ["python3 -m venv .venv", ".venv/bin/pip install -e ."]  # the suite's venv, made so
    assert steps[-1] == "~/.local/bin/nanohermes"  # the start: the REPL
    clone = tmp_path / "clone"
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "nanohermes").symlink_to(SCRIPT)
    env = {**os.environ, "HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run(["bash", "-c", " && ".join(steps[2:-1])], cwd=clone, env=env, check=True)

    # In another repository, a new shell with ~/.local/bin on PATH (as most systems set it up).
    project = tmp_path / "project"
    project.mkdir()
    shell = {**env, "PATH": f"{home / '.local' / 'bin'}:/usr/bin:/bin", "OPENAI_API_KEY": "k"}

    def typed(line: str) -> Any:
        return subprocess.run(["bash", "-c", line], cwd=project, env=shell, capture_output=True, text=True, timeout=120)

    r = typed("nanohermes --version")
    assert r.returncode == 0 and r.stdout.startswith("nanohermes "), r.stderr
    server.add(tool_reply(call("run_command", {"command": "python3 -c 'import sys; print(sys.prefix)'"}, id="c1")),
               Reply(text="done"))
    r = typed(f"nanohermes -p 'which python?' --yes --base-url {server.base_url} --model fake-model")
    assert r.returncode == 0, r.stderr
    result = next(m["content"] for m in server.requests[1]["messages"] if m.get("tool_call_id") == "c1")
    lines = result.splitlines()
    ran = lines[lines.index("stdout:") + 1]
    assert os.path.realpath(ran) != os.path.realpath(sys.prefix)  # not nanohermes's venv: the person's python3
