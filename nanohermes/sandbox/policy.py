"""Choosing a call's confinement: what this machine can confine with (`probe`, checked once,
for real), the confinement of a policy for a workspace (`confinement`), and the lines that
say so in `doctor` and `/permissions`."""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
from pathlib import Path

from nanohermes import programs
from nanohermes.gitmeta import git_dirs, metadata
from nanohermes.sandbox.confinement import Availability, Confinement, SandboxPolicy, dedupe
from nanohermes.sandbox.kernel import LINUX, SandboxError, landlock_abi
from nanohermes.sandbox.launch import prepare


@functools.lru_cache(maxsize=1)
def probe() -> Availability:
    """Check once, for real, by starting `true` under each piece."""
    if not LINUX:  # nothing to confine with (a Seatbelt policy for macOS is described in docs/sandbox.md)
        return Availability(abi=0, namespaces=False, landlock_error=f"not Linux ({sys.platform})",
                            namespace_error=f"not Linux ({sys.platform})")
    abi = landlock_abi()
    ll_err = ns_err = ""
    true = programs.find("true") or "/bin/true"
    if abi:
        try:
            _probe_run([true], Confinement("read-only", abi=abi, namespaces=False))
        except (OSError, subprocess.SubprocessError, SandboxError) as e:
            ll_err = str(e) or type(e).__name__
    ns = pid = True
    pid_err = ""
    try:
        _probe_run([true], Confinement("read-only", abi=0, namespaces=True, pid=True))
    except (OSError, subprocess.SubprocessError, SandboxError) as e:
        # A kernel that lets a user namespace mount no procfs of its own (a container whose
        # /proc has parts covered) still gets the other namespaces.
        pid, pid_err = False, str(e) or type(e).__name__
        try:
            _probe_run([true], Confinement("read-only", abi=0, namespaces=True))
        except (OSError, subprocess.SubprocessError, SandboxError) as e:
            ns, ns_err = False, str(e) or type(e).__name__
    return Availability(abi=abi, namespaces=ns, landlock_error=ll_err, namespace_error=ns_err, pid=pid and ns,
                        pid_error=pid_err)

def _probe_run(argv: list[str], conf: Confinement) -> None:
    prepared = prepare(conf)
    try:
        env = prepared.env({})
        r = subprocess.run(argv, preexec_fn=prepared.preexec(argv, env), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=10, env=env, close_fds=True)
        if r.returncode != 0:
            said = r.stderr.decode("utf-8", "replace").strip()[:300]
            raise SandboxError(f"a confined `true` exited with {r.returncode}" + (f": {said}" if said else ""))
    finally:
        prepared.cleanup()

def describe_availability(mode: str) -> list[str]:
    """The /permissions lines about the sandbox."""
    if mode == "off":
        return ["sandbox: off (sandbox.mode or --sandbox off): only built-in read-only commands written as plain "
                "words run without asking; --yes and goal mode run everything with your full rights"]
    return ["sandbox: " + text for _, text in probe().lines()]

def confinement(policy: str, *, workspace: Path, write_roots: tuple[Path, ...] = (), network: bool = False,
                config_files: tuple[Path, ...] = (), hidden: tuple[tuple[str, int, int], ...] = (),
                unhidden: str = "", socket_scan_entries: int = 50_000, own: tuple[str, ...] = (),
                ruled: tuple[tuple[str, int, int], ...] = (), ruled_folders: tuple[str, ...] = (),
                secret_patterns: tuple[str, ...] = ()) -> Confinement:
    """The confinement for `policy` on this machine. Where Landlock is missing the command
    runs unconfined (the permission layer then lets nothing but checked read-only commands
    run unasked); where namespaces are missing the protected paths stay writable, and secret
    files cannot be withheld (`hidden`: those the look found; `unhidden`: why the look is
    incomplete). `ruled` and `ruled_folders`: the files and folders read rules cover, withheld
    as the secret files are (a folder whole)."""
    chosen: SandboxPolicy
    if policy == "read-only":
        chosen = "read-only"
    elif policy == "workspace-write":
        chosen = "workspace-write"
    else:
        return Confinement("off")
    avail = probe()
    # A linked worktree commits into folders outside it: they are written as the workspace is.
    roots = (workspace, *git_dirs(workspace), *write_roots) if policy == "workspace-write" else ()
    resolved = tuple(dedupe([Path(os.path.realpath(r)) for r in roots]))
    meta = metadata(workspace, config_files) if policy == "workspace-write" else None
    # Only what the command could create may be watched: a path outside every writable root
    # that appears meanwhile is someone else's doing, never removed.
    absent = tuple(p for p in meta.absent if any(p == r or r in p.parents for r in resolved)) if meta else ()
    # nanohermes's own secret files join the workspace's; its folders are covered whole.
    own_files: list[tuple[str, int, int]] = []
    for path in own:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            own_files.append((path, st.st_dev, st.st_ino))
    hidden = (*hidden, *(f for f in (*own_files, *ruled) if f[0] not in {h[0] for h in hidden}))
    folders = tuple(dict.fromkeys((*(p for p in own if os.path.isdir(p)), *ruled_folders)))
    if (hidden or ruled_folders) and not avail.namespaces:
        unhidden, hidden = unhidden or "user namespaces are unavailable here", ()
    return Confinement(chosen, abi=avail.abi if avail.landlock else 0, namespaces=avail.namespaces, pid=avail.pid,
                       write_roots=resolved, read_only_paths=meta.protected if meta else (), network=network,
                       hidden=hidden, unhidden=unhidden, must_not_appear=absent,
                       socket_scan_entries=socket_scan_entries, hidden_folders=folders,
                       ruled=tuple(dict.fromkeys((*(f[0] for f in ruled), *ruled_folders))),
                       own_files=tuple(f[0] for f in own_files), module_roots=meta.module_roots if meta else (),
                       sealable=meta.sealable if meta else (), secret_patterns=secret_patterns,
                       withheld_from=Path(os.path.realpath(workspace)) if secret_patterns else None,
                       path_folders=tuple(programs.path_folders_inside(map(str, resolved))),
                       new_git=None if os.path.lexists(workspace / ".git") else Path(os.path.realpath(workspace)) / ".git")
