"""What nanohermes says of a file it did not read into the prompt by itself (instruction files,
imports, command files, skills, @ mentions), each reason once: the reader's own, on real files.
The other tests assert the kind and what the file leads to; rewording a reason changes one row
here."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.guard.ownreads import OwnReader, Skipped
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.testing import FakeServer, Reply, call, tool_reply


def made(name: str, make: Callable[[Path], object]) -> Callable[[Path, Path], Path]:
    """A file `name` in the workspace, made by `make`."""
    def setup(ws: Path, tmp: Path) -> Path:
        make(ws / name)
        return ws / name
    return setup


def linked(name: str, to: Callable[[Path], Path]) -> Callable[[Path, Path], Path]:
    """A link `name` in the workspace to what `to` makes outside it."""
    def setup(ws: Path, tmp: Path) -> Path:
        (ws / name).symlink_to(to(tmp))
        return ws / name
    return setup


def outside(tmp: Path) -> Path:
    (tmp / "outside.md").write_text("x")
    return tmp / "outside.md"


# (id, the file, the policy, the limits, what is said: {ws} the workspace, {tmp} the folder outside it)
READS: list[tuple[str, Callable[[Path, Path], Path], Policy, Limits, str]] = [
    ("binary", made("bin.md", lambda p: p.write_bytes(b"a\x00b")), Policy(), Limits(),
     "{ws}/bin.md (import) not read: it looks like a binary file"),
    ("folder", made("folder.md", lambda p: p.mkdir()), Policy(), Limits(),
     "{ws}/folder.md (import) not read: it resolves to {ws}/folder.md, a folder"),
    ("loop", made("loop.md", lambda p: p.symlink_to("loop.md")), Policy(), Limits(),
     "{ws}/loop.md (import) not read: a symlink stands in its path (a loop, or one put there while it was read)"),
    ("secret", made(".env", lambda p: p.write_text("k")), Policy(), Limits(),
     "{ws}/.env (import) not read: it resolves to {ws}/.env, a secret file (permissions.secret_files)"),
    ("fifo", made("pipe.md", lambda p: os.mkfifo(p)), Policy(), Limits(),
     "{ws}/pipe.md (import) not read: it resolves to {ws}/pipe.md, not a regular file (a device, FIFO or socket)"),
    ("device", linked("zero.md", lambda tmp: Path("/dev/zero")), Policy(), Limits(),
     "{ws}/zero.md (import) not read: it resolves to /dev/zero, and files under /proc, /sys and /dev are never read "
     "into the prompt"),
    ("outside", linked("out.md", outside), Policy(), Limits(),
     "{ws}/out.md (import) not read: it resolves to {tmp}/outside.md, outside the workspace {ws}"),
    ("too-big", made("big.md", lambda p: p.write_text("x" * 11)), Policy(), Limits(own_file_max_bytes=10),
     "{ws}/big.md (import) not read: it is 11 bytes, over the 10-byte limit for files read into the prompt (limit "
     "own_file_max_bytes)"),
    ("deny-rule", made("d.md", lambda p: p.write_text("x")), Policy(deny=(Rule("read_file", "d.md"),)), Limits(),
     "{ws}/d.md (import) not read: denied by rule read_file(d.md)"),
    ("ask-rule", made("a.md", lambda p: p.write_text("x")), Policy(ask=(Rule("read_file", "a.md"),)), Limits(),
     "{ws}/a.md (import) not read: rule read_file(a.md) asks before a file is read"),
]


@pytest.mark.parametrize("setup,policy,limits,text", [r[1:] for r in READS], ids=[r[0] for r in READS])
def test_a_file_not_read_says(workspace: Path, tmp_path: Path, home: Path, setup: Callable[[Path, Path], Path],
                              policy: Policy, limits: Limits, text: str) -> None:
    path = setup(workspace, tmp_path)
    reader = OwnReader(workspace, policy=lambda: policy, limits=limits, asks=True, store=home / "own-reads.json")
    got = reader.read(path, purpose="import")
    assert isinstance(got, Skipped)
    assert str(got) == text.format(ws=workspace, tmp=tmp_path)


def test_a_mention_not_attached_says(turn, server: FakeServer, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    (workspace / "vault").mkdir()
    (workspace / "vault" / "keys.md").write_text("k")
    server.add(Reply(text="ok"))
    ran = turn("-p", "summarise @vault/keys.md", server=server, config={"permissions": {"deny": ["read_file(vault)"]}})
    [said] = [line for line in ran.err.splitlines() if "@vault/keys.md" in line]
    assert said == "nanohermes: warning: @vault/keys.md not attached: denied by rule read_file(vault)"


def test_a_subfolders_instructions_joining_a_read_say(turn, server: FakeServer, workspace: Path,  # type: ignore[no-untyped-def]
                                                      home: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "CLAUDE.md").write_text("SRC: @style.md @~/mine.md")
    (workspace / "src" / "style.md").write_text("STYLE")
    (workspace / "src" / "main.py").write_text("pass\n")
    (home / "mine.md").write_text("MINE")
    server.add(tool_reply(call("read_file", {"path": "src/main.py"}, id="r")), Reply(text="done"))
    turn("-p", "look", server=server)
    [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    mine = home / "mine.md"
    assert result == (
        "1\tpass\n\n[instructions of src/CLAUDE.md, for work under src/ (loaded once: nested instruction file)]\n"
        "SRC: @style.md @~/mine.md\n\n[src/style.md, imported by src/CLAUDE.md]\nSTYLE\n\n"
        f"[{mine} (imported by src/CLAUDE.md) not loaded: it resolves to {mine}, outside the workspace {workspace}; "
        "nobody is here to allow it: run nanohermes in this folder once and answer yes to read it (the answer is "
        "remembered for this project)]")
