"""The catalogue of commands: what the permission checks know of a program is its one entry in
`nanohermes/guard/commands/table.py`, and the shell analysis, the analyser (`decide`), the path rules
(secret files, read rules, protected writes) and the learned rules all read it.

Teaching nanohermes a command is one entry and one row of `TAUGHT`: `b2sum`, `sha224sum`,
`sha384sum` (checksums: read-only, printing hashes, reading a list of sums with -c) and `shuf`
(read-only but for -o, which writes; "always" on -o learns the exact line) are each known by
their entry alone, as these tests show through `decide`, the path rules, the learned rules and
a real run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import nanohermes
from nanohermes.guard.commands import CATALOGUE, ENTRIES, Command, lookup
from nanohermes.guard.commands.table import catalogue_of
from nanohermes.guard.pathrules import command_protected, command_read_rule, command_secret
from nanohermes.guard.permissions import DEFAULT_SECRET_FILES, Policy, Rule, Target, decide, read_rules, suggest_command_rule
from nanohermes.turn.runtime import DENIED
from nanohermes.guard.shellparse import split
from nanohermes.testing import FakeServer, Reply, call, tool_reply

T = "run_command"

# A command taught by one entry: (line, how it runs in default mode: "read-only" without
# asking, "asked"; the rule "always" would learn, or "" when the line runs unasked).
TAUGHT = [
    ("b2sum a.txt", "read-only", ""),
    ("b2sum --tag -l 256 a.txt notes.txt", "read-only", ""),
    ("sha224sum a.txt", "read-only", ""),
    ("sha384sum -b a.txt", "read-only", ""),
    ("shuf -n 1 a.txt", "read-only", ""),
    ("shuf -e x y", "read-only", ""),
    ("shuf -o out.txt a.txt", "asked", "run_command(shuf -o out.txt a.txt)"),  # -o writes: only the exact line
    ("shuf --output=out.txt a.txt", "asked", "run_command(shuf --output=out.txt a.txt)"),
    ("b2sum a.txt > sums.txt", "asked", "run_command(b2sum a.txt > sums.txt)"),  # a write is spelled out
    ("b2sum -c .env", "asked", "run_command(b2sum -c .env)"),  # its sums list is printed back: a secret read
]
NEW_NAMES = ("b2sum", "sha224sum", "sha384sum", "shuf")


def verdict(line: str, policy: Policy | None = None) -> Any:
    return decide(policy or Policy(), tool_name=T, approval="always",
                  target=Target(kind="command", effect="run", subjects=(line,)))


@pytest.mark.parametrize("line,runs,learned", TAUGHT)
def test_the_analyser_and_the_learned_rule_follow_the_entry(line: str, runs: str, learned: str) -> None:
    v = verdict(line)
    if runs == "read-only":
        assert (v.decision, v.basis) == ("allow", "read-only")
    else:
        assert v.decision == "ask" and [str(r) for r in v.suggest or ()] == [learned]


def test_each_taught_command_is_named_in_its_entry_alone() -> None:
    """Nothing but the entry says anything about the command: no table elsewhere names it."""
    sources = {p: p.read_text(encoding="utf-8") for p in Path(nanohermes.__file__).parent.rglob("*.py")}
    for name in NEW_NAMES:
        places = [(p.name, n) for p, text in sources.items() if (n := len(re.findall(rf'"{name}"', text)))]
        assert places == [("table.py", 1)], (name, places)
        assert isinstance(lookup(name), Command)


def test_without_their_entries_the_same_lines_are_asked() -> None:
    """What the entry changes: an unknown program is judged the worst way (`b2sum` is then no
    read-only command and prints its files, `shuf -o` learns a prefix)."""
    unknown = [("b3sum", "b3sum a.txt"), ("b3sum", "b3sum .env")]
    assert all(lookup(name) is None for name, _ in unknown)
    assert verdict("b3sum a.txt").decision == "ask"
    assert verdict("b3sum .env").reason == "`b3sum .env` reads a file on the secret-file list (permissions.secret_files)"
    assert verdict("b2sum .env").decision == "allow"  # a checksum prints a hash, not the file
    [cmd] = split("frobnicate -o out.txt a.txt")
    assert str(suggest_command_rule(cmd)) == "run_command(frobnicate -o <args>)"


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "notes.txt").write_text("beta\n")
    (workspace / ".env").write_text("API_TOKEN=sk-live-1\n")
    (workspace / "secret").mkdir()
    (workspace / "secret" / "sums").write_text("x  a.txt\n")
    (workspace / "link").symlink_to(workspace / ".env")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace


@pytest.mark.parametrize("line,found", [
    ("b2sum .env", ""),  # the hash of a secret file is no secret
    ("b2sum -c .env", ".env"),  # -c reads the file and prints its names back
    ("b2sum --check link", ".env"),  # through a link
    ("sha384sum -bc l*", ".env"),  # through a glob
    ("shuf .env", ".env"),  # shuf prints what it reads
    ("shuf --random-source=link a.txt", ".env"),
    ("shuf -n 1 a.txt notes.txt", ""),
])
def test_the_path_rules_follow_the_entry(tree: Path, line: str, found: str) -> None:
    assert command_secret(line, tree, patterns=DEFAULT_SECRET_FILES) == found


def test_read_rules_and_protected_writes_follow_the_entry(tree: Path) -> None:
    rules = read_rules((Rule.parse("read_file(secret/**)"),), ())
    assert command_read_rule("b2sum -c secret/sums", tree, rules)[:2] == ("deny", "secret/sums")
    assert command_read_rule("shuf secret/sums", tree, rules)[:2] == ("deny", "secret/sums")
    assert command_read_rule("b2sum secret/sums", tree, rules) == ()  # it prints a hash of it
    assert command_protected("shuf a.txt > .git/config", tree).endswith(".git/config is git's metadata")
    assert command_protected("b2sum a.txt | tee .git/config", tree).endswith(".git/config is git's metadata")
    assert verdict("shuf -o .git/config a.txt").decision == "ask"  # -o is no read-only use


def test_a_taught_command_runs_or_is_asked_in_a_real_turn(turn: Any, server: FakeServer, tree: Path) -> None:
    server.add(tool_reply(*(call(T, {"command": line}) for line, _, _ in TAUGHT)), Reply(text="done"))
    r = turn("-p", "go", server=server, config={})
    assert r.code == 0, r.err
    got = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    for (line, runs, _), result in zip(TAUGHT, got, strict=True):
        if runs == "read-only":
            assert result.startswith("exit code: 0"), (line, result)
        else:
            assert result == DENIED, (line, result)  # asked, with no terminal to answer
    assert re.search(r"[0-9a-f]{128}  a\.txt", got[0])  # b2sum's own output
    assert not (tree / "out.txt").exists() and not (tree / "sums.txt").exists()


def test_the_catalogue_has_one_entry_per_command() -> None:
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names)) == len(CATALOGUE)
    assert CATALOGUE["git"].subcommands["log"].read_only and not CATALOGUE["git"].subcommands["submodule"].read_only
    with pytest.raises(ValueError, match="two catalogue entries for cat"):
        catalogue_of((*ENTRIES, Command("cat")))
