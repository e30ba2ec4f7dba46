"""A rule on reading a path covers every reader: read_file, grep (its hits and the files it
searches), glob and list_dir (their listings), the git tools and sandboxed commands, in
nanohermes's rule syntax and Claude Code's. A table of deny and ask rules in both syntaxes
against every reading tool, through the real `nanohermes -p`, real git and the real sandbox,
checking what the model was sent."""

from __future__ import annotations

import json
import re
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nanohermes.guard.pathrules import command_read_rule
from nanohermes.guard.permissions import Policy, Rule, read_rules
from nanohermes.guard.readrules import covered, read_denied
from nanohermes.turn.runtime import DENIED
from nanohermes.guard.sandbox import probe
from nanohermes.testing import FakeServer, Reply, call, tool_reply

SECRET = "hunter2-launch-code"
OLD = "old-codes-in-history"
confines = pytest.mark.skipif(not probe().confines, reason="the sandbox needs Landlock and user namespaces")


def git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def repo(ws: Path) -> None:
    """A repository with a secret under secrets/ and a plain file, both changed since the commit."""
    git(ws, "init", "-q")
    (ws / "secrets").mkdir()
    (ws / "secrets/key.txt").write_text(f"token = {OLD}\n")
    (ws / "notes.txt").write_text("shopping list\n")
    git(ws, "add", ".")
    git(ws, "commit", "-qm", "first")
    (ws / "secrets/key.txt").write_text(f"token = {SECRET}\n")
    (ws / "notes.txt").write_text("shopping list, token = groceries\n")


def results(server: FakeServer) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"}


# (how the rule is written, where): nanohermes's own syntax in the user config, Claude Code's in
# .claude/settings.json (an untrusted project: deny and ask rules apply anyway), and Claude
# Code's words in nanohermes's own config; each also with the folder named by its absolute
# path (Claude Code's `//` is the file system's root).
SYNTAXES = {"nanohermes": "read_file(secrets/**)", "claude": "Read(./secrets/**)", "claude-words": "Read(/secrets/**)",
            "nanohermes-absolute": "read_file({ws}/secrets/**)", "claude-absolute": "Read(/{ws}/secrets/**)"}
IN_SETTINGS = ("claude", "claude-absolute")  # written in the project's .claude/settings.json

CALLS = [
    call("read_file", {"path": "secrets/key.txt"}, id="read"),
    call("read_file", {"path": "notes.txt"}, id="read_ok"),
    call("grep", {"pattern": "token"}, id="grep"),
    call("grep", {"pattern": "token", "path": "secrets"}, id="grep_in"),
    call("grep", {"pattern": "token", "include": "**/*.txt"}, id="grep_include"),
    call("glob", {"pattern": "**/*.txt"}, id="glob"),
    call("list_dir", {"path": "."}, id="list"),
    call("list_dir", {"path": "secrets"}, id="list_in"),
    call("git_status", {}, id="status"),
    call("git_diff", {}, id="diff"),
    call("git_diff", {"stat": True}, id="diff_stat"),
    call("git_diff", {"path": "secrets/key.txt"}, id="diff_in"),
    call("git_log", {"path": "secrets/key.txt"}, id="log_in"),
    # Edits that do not match: their errors would quote the file.
    call("edit_file", {"path": "secrets/key.txt", "old_string": "no such text", "new_string": "x"}, id="edit"),
    call("apply_patch", {"diff": "--- a/secrets/key.txt\n+++ b/secrets/key.txt\n@@ -1 +1 @@\n-no such text\n+x\n"},
         id="patch"),
]
# The calls named on the covered path itself: refused by a deny rule, asked by an ask rule.
NAMED = ("read", "grep_in", "list_in", "diff_in", "log_in", "edit", "patch")


def run_table(turn: Any, server: FakeServer, workspace: Path, syntax: str, kind: str, *args: str,
              calls: list[Any] = CALLS) -> dict[str, str]:
    repo(workspace)
    rule = SYNTAXES[syntax].format(ws=workspace.resolve())
    config: dict[str, Any] = {}
    if syntax in IN_SETTINGS:
        (workspace / ".claude").mkdir()
        (workspace / ".claude/settings.json").write_text(json.dumps({"permissions": {kind: [rule]}}))
    else:
        config = {"permissions": {kind: [rule]}}
    server.add(tool_reply(*calls), Reply(text="done"))
    r = turn("-p", "look around", *args, server=server, config=config)
    assert r.code == 0, r.err
    return results(server)


@pytest.mark.parametrize("kind", ["deny", "ask"])
@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_a_read_rule_covers_every_reader(turn: Any, server: FakeServer, workspace: Path, syntax: str,
                                         kind: str) -> None:
    got = run_table(turn, server, workspace, syntax, kind)
    sent = json.dumps(server.requests[-1]["messages"])
    assert SECRET not in sent and OLD not in sent
    for key in NAMED:
        if kind == "deny":
            assert got[key].startswith("ERROR: ") and re.search(r" [a-z_]+\((\./|/.*/)?secrets/\*\*\)$", got[key]), key
        else:
            assert got[key] == DENIED, (key, got[key])
    # The plain file is read by every reader: the rule covers only its path.
    assert got["read_ok"].startswith("1\tshopping list")
    assert got["grep"].splitlines()[0] == "notes.txt:1:shopping list, token = groceries"
    assert "1 file not searched: withheld by read rule " in got["grep"]
    assert got["grep_include"].splitlines()[0] == "notes.txt:1:shopping list, token = groceries"
    assert got["glob"].splitlines()[0] == "notes.txt" and "key.txt" not in got["glob"]
    assert "1 path not listed: withheld by read rule" in got["glob"]
    assert "secrets" not in got["list"].split("\n\n")[0] and "notes.txt" in got["list"]
    assert "1 entry not listed: withheld by read rule" in got["list"]
    assert "notes.txt" in got["status"] and "key.txt" not in got["status"]
    assert "1 path not shown: withheld by read rule" in got["status"]
    assert "+shopping list, token = groceries" in got["diff"] and "key.txt" not in got["diff"]
    assert "1 file not shown: withheld by read rule" in got["diff"]
    assert "notes.txt" in got["diff_stat"] and "key.txt" not in got["diff_stat"]
    # An `@` mention, which nanohermes reads by itself: left out, named (the same config, on disk).
    server.add(Reply(text="done"))
    r = turn("-p", "summarise @secrets/key.txt and @notes.txt", server=server)
    assert r.code == 0, r.err
    assert SECRET not in json.dumps(server.requests[-1]) and "shopping list" in json.dumps(server.requests[-1])
    assert "@secrets/key.txt not attached: " in r.err


@pytest.mark.parametrize("syntax", ["nanohermes", "claude"])
def test_an_ask_rule_under_yes_refuses_what_nobody_allowed(turn: Any, server: FakeServer, workspace: Path,
                                                           syntax: str) -> None:
    """--yes answers no question a rule asks before a read: nobody is there, and the sandbox
    withholds the path from its commands alike."""
    got = run_table(turn, server, workspace, syntax, "ask", "--yes")
    assert SECRET not in json.dumps(server.requests[-1]["messages"])
    for key in NAMED:
        assert got[key].startswith("ERROR: rule ") and "nobody is asked in an unattended run" in got[key], (key, got[key])
    assert "1 file not searched: withheld by read rule " in got["grep"]
    assert got["read_ok"].startswith("1\tshopping list")


def test_a_rule_on_another_reader_covers_that_reader_only(turn: Any, server: FakeServer, workspace: Path) -> None:
    """Claude Code's `Grep(...)` is grep's rule: read_file still reads the file."""
    repo(workspace)
    (workspace / ".claude").mkdir()
    (workspace / ".claude/settings.json").write_text(json.dumps({"permissions": {"deny": ["Grep(./secrets/**)"]}}))
    server.add(tool_reply(call("grep", {"pattern": "token"}, id="g"), call("read_file", {"path": "secrets/key.txt"},
                                                                             id="r")), Reply(text="done"))
    r = turn("-p", "look", server=server)
    assert r.code == 0, r.err
    got = results(server)
    assert SECRET not in got["g"] and "withheld by read rule grep(./secrets/**)" in got["g"]
    assert SECRET in got["r"]


def test_edits_that_quote_the_file_are_covered_too(turn: Any, server: FakeServer, workspace: Path) -> None:
    """edit_file's near misses quote the file: under a read rule it is refused like a read;
    write_file of a new file, which quotes nothing, is not."""
    repo(workspace)
    server.add(tool_reply(call("edit_file", {"path": "secrets/key.txt", "old_string": "tokn", "new_string": "x"},
                               id="e"),
                          call("write_file", {"path": "secrets/new.txt", "content": "fresh"}, id="w")),
               Reply(text="done"))
    r = turn("-p", "edit", "--mode", "accept-edits", server=server,
             config={"permissions": {"deny": ["read_file(secrets/**)"]}})
    assert r.code == 0, r.err
    got = results(server)
    assert got["e"].startswith("ERROR: denied by rule read_file(secrets/**)") and SECRET not in got["e"]
    assert got["w"].startswith("created secrets/new.txt")


@confines
@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_sandboxed_commands_find_covered_paths_withheld(turn: Any, server: FakeServer, workspace: Path,
                                                        syntax: str) -> None:
    """The control first: the same `cat`, with no rule, prints the file."""
    lines = {"cat": "cat secrets/key.txt", "plain": "cat notes.txt", "grep": "grep -r token .",
             "python": "python3 -c \"print(open('secrets/key.txt').read())\""}
    calls = [call("run_command", {"command": line}, id=k) for k, line in lines.items()]
    server.add(tool_reply(calls[0]), Reply(text="done"))
    repo(workspace)
    r = turn("-p", "control", "--yes", server=server)
    assert r.code == 0, r.err
    assert SECRET in results(server)["cat"]
    for p in workspace.iterdir():  # a fresh repository for the table
        subprocess.run(["rm", "-rf", str(p)], check=True)
    got = run_table(turn, server, workspace, syntax, "deny", "--yes", "--output-format", "json", calls=calls)
    assert SECRET not in json.dumps(server.requests[-1]["messages"])
    # Named on the line: refused before it runs. Reached by the program itself: withheld.
    assert got["cat"].startswith("ERROR: the command reads secrets/key.txt,") and " read_file(" in got["cat"]
    assert "a path a read rule withholds" in got["python"]
    assert "shopping list" in got["plain"]
    assert "notes.txt:shopping list" in got["grep"]


# -- the one check, for what nanohermes reads by itself ---------------------------------------------

def test_read_denied_is_the_check_for_any_reader(workspace: Path, home: Path) -> None:
    (workspace / "secrets").mkdir()
    (workspace / "secrets/key.txt").write_text("x")
    (workspace / "link.txt").symlink_to(workspace / "secrets/key.txt")
    policy = Policy(deny=(Rule.parse("read_file(secrets/**)"),), ask=(Rule.parse("read_file(~/.aws/**)"),))
    for path in ("secrets/key.txt", "link.txt", "./secrets/../secrets/key.txt", str(workspace / "secrets/key.txt")):
        verdict = read_denied(policy, workspace, path)
        assert verdict is not None and verdict.decision == "deny", path
    verdict = read_denied(policy, workspace, "~/.aws/credentials")
    assert verdict is not None and verdict.decision == "ask"
    assert read_denied(policy, workspace, "notes.txt") is None
    # A rule naming a folder covers what is in it, as .gitignore reads it.
    assert read_denied(Policy(deny=(Rule.parse("read_file(secrets)"),)), workspace, "secrets/key.txt") is not None


def test_the_look_for_covered_paths_is_bounded(workspace: Path) -> None:
    for i in range(5):
        (workspace / f"d{i}").mkdir()
        (workspace / f"d{i}/x.key").write_text("k")
    found = covered(workspace, ("*.key",), max_entries=100, max_secs=10)
    assert len(found.files) == 5 and found.problem == ""
    cut = covered(workspace, ("*.key",), max_entries=3, max_secs=10)
    assert cut.problem == ("more than 3 files and folders to look through for what read rules cover "
                           "(limits.sandbox_secret_scan_entries)")
    folder = covered(workspace, ("d1/**",), max_entries=100, max_secs=10)
    assert folder.folders == (str((workspace / "d1").resolve()),) and folder.files == ()


def test_without_the_sandbox_the_analysis_finds_covered_paths_in_folders_read_whole(
        turn: Any, server: FakeServer, workspace: Path) -> None:
    """With the sandbox off nothing withholds a file from a command, so a line that would
    print a covered path, named or inside a folder it reads whole, is refused."""
    lines = {"cat": "cat secrets/key.txt", "grep": "grep -r token .", "glob": "cat secrets/*", "plain": "cat notes.txt"}
    calls = [call("run_command", {"command": line}, id=k) for k, line in lines.items()]
    got = run_table(turn, server, workspace, "nanohermes", "deny", "--yes", "--sandbox", "off", calls=calls)
    for key, read in (("cat", "secrets/key.txt"), ("glob", "secrets/key.txt"), ("grep", "secrets")):  # grep: the folder
        assert got[key].startswith(f"ERROR: the command reads {read},"), got[key]
        assert " read_file(secrets/**) " in got[key]
    assert "shopping list" in got["plain"]
    assert SECRET not in json.dumps(server.requests[-1]["messages"])


@confines
def test_a_rule_on_a_path_outside_the_workspace_covers_it_for_commands_too(turn: Any, server: FakeServer,
                                                                           workspace: Path, home: Path) -> None:
    (home / ".aws").mkdir()
    (home / ".aws/credentials").write_text(f"aws_secret = {SECRET}\n")
    (workspace / ".claude").mkdir()
    (workspace / ".claude/settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(~/.aws/**)"]}}))
    lines = {"python": f"python3 -c \"print(open('{home}/.aws/credentials').read())\"",
             "cat": "cat ~/.aws/credentials"}
    calls = [call("run_command", {"command": line}, id=k) for k, line in lines.items()]
    calls.append(call("read_file", {"path": str(home / ".aws/credentials")}, id="read"))
    server.add(tool_reply(*calls), Reply(text="done"))
    r = turn("-p", "look", "--yes", server=server)
    assert r.code == 0, r.err
    got = results(server)
    assert SECRET not in json.dumps(server.requests[-1]["messages"])
    assert got["read"].startswith("ERROR: denied by rule read_file(~/.aws/**)")
    assert got["cat"].startswith("ERROR: the command reads") and "a path a read rule withholds" in got["python"]


def test_a_listing_too_long_to_check_against_read_rules_shows_nothing(turn: Any, server: FakeServer,
                                                                       workspace: Path) -> None:
    """git_status and git_diff check every changed path against the read rules; names past the
    capture cap could hide a covered one, so nothing is shown."""
    repo(workspace)
    server.add(tool_reply(call("git_status", {}, id="s"), call("git_diff", {}, id="d")), Reply(text="done"))
    r = turn("-p", "look", server=server, config={"permissions": {"deny": ["read_file(secrets/**)"]},
                                                  "limits": {"run_command_capture_bytes": 16}})
    assert r.code == 0, r.err
    got = results(server)
    for key in ("s", "d"):
        assert got[key] == ("ERROR: too many changed paths to check against the read rules (over 16 bytes of names); "
                            "pass a narrower path"), got[key]


@pytest.mark.parametrize("mode", ["default", "accept-edits"])
def test_an_edit_nobody_approved_never_quotes_a_secret_file(turn: Any, server: FakeServer, workspace: Path,
                                                            mode: str) -> None:
    """An edit of a secret file is asked as a read of it is, and its check runs only after a
    yes: a near miss would quote the file. With no terminal to ask, both are refused unread."""
    (workspace / ".env").write_text(f"API_TOKEN={SECRET}\n")
    server.add(tool_reply(
        call("edit_file", {"path": ".env", "old_string": "API_TOKEN=wrong", "new_string": "x"}, id="edit"),
        call("apply_patch", {"diff": "--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-API_TOKEN=wrong\n+x\n"}, id="patch")),
        Reply(text="done"))
    r = turn("-p", "fix it", "--mode", mode, "--output-format", "json", server=server)
    assert r.code == 0, r.err
    assert results(server) == {"edit": DENIED, "patch": DENIED}
    assert SECRET not in json.dumps(server.requests)
    denials = r.json()["permission_denials"]
    assert [(d["tool"], d["target"]) for d in denials] == [("edit_file", ".env"), ("apply_patch", ".env")]
    assert all("(permissions.secret_files)" in d["reason"] for d in denials), denials
    assert (workspace / ".env").read_text() == f"API_TOKEN={SECRET}\n"
def unresolvable(workspace: Path) -> tuple[str, str] | None:
    """A path this system cannot resolve (a folder on its way cannot be searched), and a rule
    pattern covering it as written; None where every candidate resolves (root, no /proc)."""
    locked = workspace / "locked"
    (locked / "x").mkdir(parents=True)
    locked.chmod(0)
    for path, pattern in ((str(locked / "x" / "y"), "locked/**"), ("/proc/1/root/etc/hostname", "/proc/1/root/**")):
        try:
            os.path.realpath(path)
        except OSError:
            return path, pattern
    return None


def test_a_path_the_look_cannot_resolve_is_judged_as_written_and_the_turn_goes_on(
        turn: Any, server: FakeServer, workspace: Path) -> None:
    found = unresolvable(workspace)
    try:
        if found is None:
            pytest.skip("every path resolves here")
        path, pattern = found
        server.add(tool_reply(call("run_command", {"command": f"cat {path}"}, id="c")), Reply(text="done"))
        r = turn("-p", "look", "--yes", server=server, config={"permissions": {"deny": [f"read_file({pattern})"]}})
        assert r.code == 0, r.err
        assert results(server)["c"].startswith("ERROR: the command reads ") and f"rule read_file({pattern}) denies" \
            in results(server)["c"]
        rules = read_rules((Rule.parse("read_file(elsewhere/**)"),), ())
        assert command_read_rule(f"cat {path}", workspace, rules) == ()
    finally:
        (workspace / "locked").chmod(0o755)


def test_a_path_on_the_way_to_which_a_folder_may_not_be_searched_is_a_clear_error(
        turn: Any, server: FakeServer, workspace: Path) -> None:
    found = unresolvable(workspace)
    try:
        if found is None:
            pytest.skip("every path resolves here")
        path, _ = found
        server.add(tool_reply(call("read_file", {"path": path}, id="r")), Reply(text="done"))
        r = turn("-p", "look", server=server)
        assert r.code == 0, r.err
        result = results(server)["r"]
        assert result.startswith(f"ERROR: {path} cannot be resolved: ") and " may not be searched " in result, result
    finally:
        (workspace / "locked").chmod(0o755)
