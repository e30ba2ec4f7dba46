"""Small real tools for tests of the runtime and sub-agents, where the full file tools'
behaviour would only add noise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from nanohermes.guard.permissions import Policy, Target, Verdict, decide
from nanohermes.tools import Attempt, Approval, Effect, Params, SubjectKind, Tool, ToolContext, build_tools


@dataclass(frozen=True, kw_only=True)
class WriteParams(Params):
    path: str
    content: str = ""


@dataclass(frozen=True, kw_only=True)
class TinyWrite(Tool):
    """A real (minimal) writing tool under the write_file name, to exercise write policy."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = "write a file"
    params: ClassVar[type[Params]] = WriteParams
    approval: ClassVar[Approval] = "edit"
    kind: ClassVar[SubjectKind] = "path"
    effect: ClassVar[Effect] = "write"

    async def run(self, args: Params, ctx: ToolContext, attempt: Attempt) -> str:
        assert isinstance(args, WriteParams)
        (ctx.workspace / args.path).write_text(args.content)
        return f"wrote {args.path}"


def decide_call(policy: Policy, *, tool_name: str, approval: str, read_only: bool, subject: str | None = None,
                protected: str = "") -> Verdict:
    """`decide()` for one call of a built-in tool, its Target built from the tool's own
    declaration: the subject as the runtime would have resolved it."""
    tool = {t.name: t for t in build_tools()}.get(tool_name)
    kind, effect = (tool.kind, tool.effect) if tool else ("mcp" if tool_name.startswith("mcp__") else "none", "run")
    target = Target(kind=kind, effect="read" if read_only else effect, subjects=() if subject is None else (subject,),
                    protected=protected, shows_contents=tool.shows_contents if tool else True)
    return decide(policy, tool_name=tool_name, approval=approval, target=target)


REPO = Path(__file__).resolve().parent.parent


def run_python(code: str, home: Path, *args: str, cwd: Path | None = None, cache: Path | None = None,
               root: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -c code args` as a fresh start with `home` as HOME and its own cache folder
    (default `home/cache`), importing nanohermes from `root` (default: this repository; a
    root is also the default cwd, which `-c` puts first on the path); it must succeed."""
    env = {**os.environ, "PYTHONPATH": str(root or REPO), "HOME": str(home),
           "XDG_CACHE_HOME": str(cache or home / "cache"), "OPENAI_API_KEY": "k"}
    p = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=60,
                       cwd=cwd or root, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return p


def package_copy(dest: Path) -> Path:
    """A copy of the nanohermes package in `dest`, for a test that changes the code itself; pass
    `dest` as `run_python`'s root.

    The compiled files come along, each file keeping its time (copy2), so a process importing
    the copy does not compile the whole package again (with PYTHONDONTWRITEBYTECODE set it
    would, at every start): Python checks each against its source's time and size, and a file
    the test writes afresh is compiled from what it now says."""
    shutil.copytree(REPO / "nanohermes", dest / "nanohermes")
    return dest


def with_registered(root: Path, module: str, code: str) -> None:
    """`code` as the tool module `nanohermes/tools/<module>.py` of the copy at `root`, its
    tools joined to the built-in list in `registry.py`, and the shipped declarations written
    afresh (`python -m nanohermes.reference --write`), as a new tool module is registered."""
    (root / "nanohermes" / "tools" / f"{module}.py").write_text(code)
    registry = root / "nanohermes" / "tools" / "registry.py"
    text = registry.read_text()
    line = "    tools: list[Tool] = [*files(), "
    assert text.count(line) == 1
    registry.write_text(text.replace(line, f"    from nanohermes.tools.{module} import tools as {module}\n"
                                           f"{line}*{module}(), "))
    declarations = root / "nanohermes" / "tools" / "declarations.json"
    subprocess.run([sys.executable, "-m", "nanohermes.reference", "--write", str(declarations)], cwd=root, check=True,
                   env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, timeout=120)
