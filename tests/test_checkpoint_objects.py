"""What the checkpoints keep, and how few git processes a turn costs keeping it: contents the
user's repository holds (through its own alternates too) are read from it, never copied for a
file that still has them, and copied in when a turn changes them, so an undo works once the
repository and what it borrowed from are gone. A turn that changes a file starts no git process
to learn what the store already holds, nor to name its checkpoint."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nanohermes.common.events import FilesChanged, RecordingUI
from nanohermes.turn.checkpoints import store_dir
from nanohermes.turn.checkpoints.gitpack import blob_name, held, write_blobs, write_object
from nanohermes.turn.checkpoints.shadow import Shadow
from nanohermes.testing import Reply, ScriptedLLM, call, tool_reply
from tests.test_checkpoints import ask, build, command, git, repo, tree  # noqa: F401  # `repo` is a fixture


def _clone_shared(source: Path, into: Path) -> Path:
    """A repository made with `git clone --shared`: its objects are the source's, borrowed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "clone", "-q", "--shared", str(source), str(into)], env=env, check=True, capture_output=True)
    assert (into / ".git" / "objects" / "info" / "alternates").exists()
    return into


def test_contents_a_repository_borrows_are_copied_only_when_a_turn_names_them(tmp_path: Path, home: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q", "-b", "main")
    for i in range(40):
        (source / f"f{i}.txt").write_text(f"file {i}\n" * 20)
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "files")
    git(source, "repack", "-adq")
    ws = _clone_shared(source, tmp_path / "ws")
    for i in range(40):  # the clone's files hashed again by the first scan (their stat is not git's)
        os.utime(ws / f"f{i}.txt", (1_000_000_000, 1_000_000_000))
    before = tree(ws)
    # 40 files copied from tracked ones (contents the repository borrows), one overwritten.
    script = "mkdir copies && for i in $(seq 0 39); do cp f$i.txt copies/c$i.txt; done && printf new > f3.txt"
    built = build(ws, ScriptedLLM([Reply(text="looked"), tool_reply(call("run_command", {"command": script})),
                                   Reply(text="done")]))
    ask(built, "look")
    objects = store_dir(ws) / "git" / "objects"
    contents = {blob_name(data) for path, data in before.items() if path.startswith("f")}
    assert held(objects, contents) == set()  # scanned, found in what the repository borrows
    ask(built, "copy")
    assert built.checkpoints is not None and len(built.checkpoints.turns()[1].paths) == 41
    assert held(objects, contents) == contents  # the turn's changes name each: kept for good
    after = tree(ws)
    shutil.rmtree(ws / ".git")
    shutil.rmtree(source)
    assert "restored 41 files to before turn 2" in command(built, "/undo")
    assert tree(ws) == before
    assert "41 files" in command(built, "/redo")
    assert tree(ws) == after


@pytest.mark.parametrize("count", [1, 40])
def test_contents_only_the_repository_holds_are_copied_when_a_turn_changes_them(repo: Path, count: int) -> None:
    """A few are kept as files of their own, many as one pack; either way the undo finds them
    once the repository is gone."""
    for i in range(count):
        (repo / "many" / f"m{i}.txt").parent.mkdir(exist_ok=True)
        (repo / "many" / f"m{i}.txt").write_text(f"committed {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many")
    git(repo, "repack", "-adq")
    before = tree(repo)
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": "for f in many/*; do printf x > $f; done"})),
                                     Reply(text="done")]))
    ask(built, "overwrite")
    objects = store_dir(repo) / "git" / "objects"
    olds = {blob_name(before[f"many/m{i}.txt"]) for i in range(count)}
    assert held(objects, olds) == olds
    loose = {p.parent.name + p.name for p in objects.glob("??/*")}
    assert (olds <= loose) == (count == 1)
    shutil.rmtree(repo / ".git")
    assert f"restored {count} file" in command(built, "/undo")
    assert tree(repo) == before


def test_a_turn_changing_a_file_again_asks_git_nothing_the_store_can_answer(repo: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # Every git process nanohermes starts is logged by a `git` put first on PATH.
    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "git.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do case "$a" in -c|*=*) ;; *) echo "$a" >> {log}; break;; esac; done\n'
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    edits = [tool_reply(call("run_command", {"command": f"printf 'edit {i}\\n' >> tracked.txt"})) for i in range(3)]
    built = build(repo, ScriptedLLM([edits[0], Reply(text="1"), edits[1], Reply(text="2"), edits[2], Reply(text="3")]))
    ask(built, "one", "two")
    log.write_text("")
    ask(built, "three")  # the old content of tracked.txt is the store's own (the turn before kept it)
    started = log.read_text().split()
    assert "diff-files" in started  # the log does see the checkpoints' git
    assert not {"cat-file", "update-ref", "pack-objects", "unpack-objects", "index-pack"} & set(started), started
    assert built.checkpoints is not None and [t.paths for t in built.checkpoints.turns()] == [["tracked.txt"]] * 3
    assert "restored 1 file to before turn 3" in command(built, "/undo")
    assert (repo / "tracked.txt").read_text().endswith("edit 1\n")


def test_a_file_a_turn_hides_by_putting_its_folders_time_back_is_still_its_change(repo: Path) -> None:
    """Scans after the first read only the folders whose times moved; a command that makes a
    file in a folder left alone for a while and puts the folder's modification time back
    (its change time cannot be) does not hide the file from the turn's changes, nor from
    the names of files that run code later, nor from the undo."""
    (repo / "src" / "a").mkdir(parents=True)
    (repo / "src" / "a" / "one.py").write_text("one\n")
    folders = [repo, repo / "src", repo / "src" / "a"]
    # Until every folder's last change is out of the racy window of the scans (three seconds).
    while time.time_ns() - max(f.stat().st_ctime_ns for f in folders) < 3_500_000_000:
        time.sleep(0.1)
    back = (repo / "src" / "a").stat().st_mtime_ns
    script = f"printf 'all:\\n\\ttrue\\n' > src/a/Makefile && touch -m -d @{back // 10**9}.{back % 10**9:09d} src/a"
    ui = RecordingUI()
    built = build(repo, ScriptedLLM([Reply(text="looked"), tool_reply(call("run_command", {"command": script})),
                                     Reply(text="done")]), ui)
    ask(built, "look first", "then hide")
    assert [n.split(": ", 1)[0] for n in ui.of(FilesChanged)[-1].runs_later] == ["src/a/Makefile"]
    assert (repo / "src" / "a").stat().st_mtime_ns == back  # to the nanosecond
    assert built.checkpoints is not None and [t.paths for t in built.checkpoints.turns()] == [[], ["src/a/Makefile"]]
    assert "restored 1 file to before turn 2: src/a/Makefile" in command(built, "/undo")
    assert not (repo / "src" / "a" / "Makefile").exists()


def test_many_files_in_a_few_folders_with_odd_names_are_found_and_come_back(repo: Path) -> None:
    # Past a few dozen paths in a few folders, what the index holds for them is looked up in
    # a listing of those folders alone: names that look like pathspec magic, globs or options
    # are folders like any other.
    folders = ["sp ace é", "-lead", "gl*b[1]?", ":(top)x", "a/b", "a/b/c"]
    script = "; ".join(f"mkdir -p -- '{d}' && for i in $(seq 1 12); do printf \"made $i\" > '{d}'/f$i.txt; done"
                       for d in folders)
    (repo / "a").mkdir()
    (repo / "a" / "kept.txt").write_text("not changed\n")
    built = build(repo, ScriptedLLM([tool_reply(call("run_command", {"command": script})), Reply(text="done")]))
    before = tree(repo)
    ask(built, "make them")
    after = tree(repo)
    made = sorted(p for p in after if p not in before)
    assert len(made) == 72 and "gl*b[1]?/f3.txt" in made and ":(top)x/f12.txt" in made
    assert built.checkpoints is not None and built.checkpoints.turns()[0].paths == made
    assert "restored 72 files to before turn 1" in command(built, "/undo")
    assert tree(repo) == before
    command(built, "/redo")
    assert tree(repo) == after


FAKE_GITS = {
    "a stray .git file": "printf 'not a repository' > sub/.git",
    "a gitdir file naming no repository": "printf 'gitdir: ../nowhere\\n' > sub/.git",
    "a gitdir file with a trailing space": "git init -q --bare real.git && printf 'gitdir: ../real.git \\n' > sub/.git",
    "an empty .git folder": "mkdir sub/.git",
    "a .git folder whose HEAD names nothing": "mkdir -p sub/.git/objects sub/.git/refs && printf 'junk\\n' > sub/.git/HEAD",
}


@pytest.mark.parametrize("fake", list(FAKE_GITS))
def test_files_beside_a_git_entry_git_does_not_take_for_a_repository_are_the_turns_changes(repo: Path,
                                                                                          fake: str) -> None:
    """A folder holding a repository of its own is not kept (git does not enter it); one whose
    `.git` git does not take for a repository is a folder like any other, so a turn cannot hide
    the files it makes behind one."""
    script = f"mkdir sub && {FAKE_GITS[fake]} && printf 'all:\\n\\ttrue\\n' > sub/Makefile"
    ui = RecordingUI()
    built = build(repo, ScriptedLLM([Reply(text="looked"), tool_reply(call("run_command", {"command": script})),
                                     Reply(text="done")]), ui)
    ask(built, "look first", "then make")  # the first scan asks git; the next ones read the folders
    assert subprocess.run(["git", "-C", str(repo), "ls-files", "-o", "sub"], capture_output=True,
                          text=True).stdout.splitlines() == ["sub/Makefile"]  # the control: git enters it
    assert built.checkpoints is not None and "sub/Makefile" in built.checkpoints.turns()[1].paths
    assert "sub/Makefile" in [n.split(": ", 1)[0] for n in ui.of(FilesChanged)[-1].runs_later]
    command(built, "/undo")
    assert not (repo / "sub" / "Makefile").exists()


def test_a_repository_of_its_own_in_a_subfolder_is_left_out(repo: Path) -> None:
    script = "git init -q sub && printf 'all:\\n\\ttrue\\n' > sub/Makefile && printf x > beside.txt"
    built = build(repo, ScriptedLLM([Reply(text="looked"), tool_reply(call("run_command", {"command": script})),
                                     Reply(text="done")]))
    ask(built, "look first", "then make")
    assert built.checkpoints is not None and built.checkpoints.turns()[1].paths == ["beside.txt"]


def test_files_a_turn_makes_in_a_folder_it_turns_into_a_repository_are_its_changes(repo: Path) -> None:
    # git goes on listing new files in a folder whose files its index holds, repository or not.
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("a = 1\n")
    script = "git init -q src && printf 'all:\\n\\ttrue\\n' > src/Makefile && printf x > top.txt"
    ui = RecordingUI()
    built = build(repo, ScriptedLLM([Reply(text="looked"), tool_reply(call("run_command", {"command": script})),
                                     Reply(text="done")]), ui)
    ask(built, "look first", "then make")
    assert built.checkpoints is not None and built.checkpoints.turns()[1].paths == ["src/Makefile", "top.txt"]
    assert [n.split(": ", 1)[0] for n in ui.of(FilesChanged)[-1].runs_later] == ["src/Makefile"]
    command(built, "/undo")
    assert not (repo / "src" / "Makefile").exists() and (repo / "src" / "a.py").exists()


@pytest.mark.parametrize("count", [10, 1000])
def test_what_the_store_holds_is_found_without_git_as_git_finds_it(tmp_path: Path, home: Path, count: int) -> None:
    """A few names in a few packs are looked up in the packs' indexes; many in many packs are
    asked of git: either way the answer is git's."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shadow = Shadow(tmp_path / "store", ws, tmp_path / "store" / "index", None)
    shadow.create()
    objects = shadow.git_dir / "objects"
    contents = [f"content {i}\n".encode() for i in range(2 * count)]
    for i in range(25):  # packs a turn after another wrote
        write_blobs(objects / "pack", [(blob_name(c), c) for c in contents[i::50]])
    for c in contents[1::7]:
        write_object(objects, "blob", c)
    names = sorted({blob_name(c) for c in contents} | {blob_name(f"absent {i}".encode()) for i in range(count)})
    assert shadow.unheld(names) == shadow.missing(names)
    assert shadow.unheld(names) & {blob_name(c) for c in contents[1::7]} == set()
