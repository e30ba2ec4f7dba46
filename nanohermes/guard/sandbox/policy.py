"""Choosing a call's confinement: what this machine can confine with (`probe`, checked once,
for real), the one mapping from a call's basis and the configuration to its finished
confinement (`confine`, which ends in `confinement`: a policy for a workspace on this
machine), and the lines that say so in `doctor` and `/permissions`."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from nanohermes.guard import programs
from nanohermes.guard.configfiles import sandbox_paths
from nanohermes.guard.gitmeta import git_dirs, link_target, metadata, subfolder_gits, subfolder_metadata
from nanohermes.guard.readrules import config_read_rules, covered
from nanohermes.guard.sandbox.confinement import Availability, Confinement, SandboxPolicy, dedupe
from nanohermes.guard.sandbox.kernel import LINUX, SandboxError, landlock_abi
from nanohermes.guard.sandbox.launch import prepare
from nanohermes.guard.secrets import home_credentials, own_paths
from nanohermes.guard.withhold import Secrets
from nanohermes.guard.withhold import look as withhold_look

if TYPE_CHECKING:
    from nanohermes.common.budget import Limits
    from nanohermes.config import Config


# The probe's answer, once known (at most one), and the lock a second asker waits on while it runs.
_probed: list[Availability] = []
_probing = threading.Lock()


def probe() -> Availability:
    """Check once, for real, by starting `true` confined. Safe from any thread: a probe already
    running (the gate starts one early, in the background) is waited for, never run twice; one
    that failed outright is run again by the next asker."""
    with _probing:
        if not _probed:
            _probed.append(_probe())
        return _probed[0]


def _probe() -> Availability:
    """One `true` under every piece at once: where that runs, each piece works (the common
    case: one process). Where it fails, each piece is tried alone to tell which one is missing
    and why."""
    if not LINUX:  # nothing to confine with (a Seatbelt policy for macOS is described in docs/sandbox.md)
        return Availability(abi=0, namespaces=False, landlock_error=f"not Linux ({sys.platform})",
                            namespace_error=f"not Linux ({sys.platform})")
    abi = landlock_abi()
    true = programs.find("true") or "/bin/true"
    if abi:
        try:
            _probe_run([true], Confinement("read-only", abi=abi, namespaces=True, pid=True))
        except (OSError, subprocess.SubprocessError, SandboxError):
            pass  # which piece failed, and why, is told apart below
        else:
            return Availability(abi=abi, namespaces=True, pid=True)
    return _probe_pieces(abi, true)


def _probe_pieces(abi: int, true: str) -> Availability:
    """Landlock, then the namespaces with a PID namespace of their own, then without one, each
    alone."""
    ll_err = ns_err = ""
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

# The policy each basis a call is allowed on earns (before `sandbox.mode: off`), the table of
# gate.py's docstring: none for a person's yes and --dangerously-skip-permissions, read-only for
# what only reads and for a tool that needs no approval, workspace-write for the rest. A
# policy's own name stands for itself.
POLICY_OF: dict[str, SandboxPolicy] = {
    "person": "off", "bypass": "off", "read-only": "read-only", "tool": "read-only", "rule": "workspace-write",
    "mode": "workspace-write", "unattended": "workspace-write", "hook": "workspace-write",
    "workspace-write": "workspace-write", "off": "off",
}


def confine(name: str, *, workspace: Path, config: Config, limits: Limits,
            secret_patterns: tuple[str, ...] | list[str] | None = None, withhold: bool = True,
            ruled: bool = True) -> Confinement:
    """The finished confinement of a call's processes: the one mapping from the basis a call
    was allowed on (`permissions.Basis`, or a policy named outright: `read-only`,
    `workspace-write`, `off`) and the configuration to what the sandbox holds. With the
    configured writable roots and network, the protected files read-only, the workspace's
    secret files withheld (`secret_patterns`, by default the config's; not when a rule
    spelling the line out let it read one: `withhold` False), and what read rules cover (but
    for nanohermes's own git reads, `ruled` False: they leave those paths out by pathspec).
    `sandbox.mode: off` turns every policy off."""
    policy = POLICY_OF[name]
    cfg = config.sandbox
    if cfg.mode == "off" or policy == "off":
        return Confinement("off")
    roots = tuple(Path(os.path.expanduser(r)) for r in (*config.extra_write_roots, *cfg.writable_roots))
    patterns = tuple(config.permissions.secret_files if secret_patterns is None else secret_patterns)
    found = withhold_look(workspace, patterns, limits) if withhold else Secrets()
    # What read rules cover is withheld whatever allowed the command: a rule is no secret list.
    cover = covered(workspace, config_read_rules(config, workspace) if ruled else (),
                    max_entries=limits.sandbox_secret_scan_entries, max_secs=limits.sandbox_secret_scan_secs)
    return confinement(policy, workspace=workspace, write_roots=roots, network=cfg.network,
                       config_files=tuple(sandbox_paths(workspace, roots)), hidden=found.files,
                       unhidden=found.problem or cover.problem, ruled=cover.files, ruled_folders=cover.folders,
                       socket_scan_entries=limits.sandbox_socket_scan_entries, own=own_paths(),
                       home=home_credentials() if withhold else (),
                       secret_patterns=patterns if withhold else (), git_look_folders=limits.startup_scan_folders)


def confinement(policy: str, *, workspace: Path, write_roots: tuple[Path, ...] = (), network: bool = False,
                config_files: tuple[Path, ...] = (), hidden: tuple[tuple[str, int, int], ...] = (),
                unhidden: str = "", socket_scan_entries: int = 50_000, own: tuple[str, ...] = (),
                ruled: tuple[tuple[str, int, int], ...] = (), ruled_folders: tuple[str, ...] = (),
                secret_patterns: tuple[str, ...] = (), home: tuple[str, ...] = (),
                git_look_folders: int = 20_000) -> Confinement:
    """The confinement for `policy` on this machine, from what `confine` found. Where Landlock
    is missing the command runs unconfined (the permission layer then lets nothing but checked
    read-only commands run unasked); where namespaces are missing the protected paths stay
    writable, and secret files cannot be withheld (`hidden`: those the look found; `unhidden`:
    why the look is incomplete). `ruled` and `ruled_folders`: the files and folders read rules
    cover, withheld as the secret files are (a folder whole); `home`: the home folder's
    credentials (`secrets.home_credentials`), withheld likewise."""
    if policy not in ("read-only", "workspace-write"):
        return Confinement("off")
    chosen: SandboxPolicy = "workspace-write" if policy == "workspace-write" else "read-only"
    avail = probe()
    real = Path(os.path.realpath(workspace))
    own_files = _regular_files(own)
    home_files = _regular_files(home)
    hidden, folders, unhidden = _withheld(hidden, (*own, *home), [*own_files, *home_files], ruled, ruled_folders,
                                          unhidden, avail.namespaces)
    base = Confinement(chosen, abi=avail.abi if avail.landlock else 0, namespaces=avail.namespaces, pid=avail.pid,
                       network=network, hidden=hidden, unhidden=unhidden, socket_scan_entries=socket_scan_entries,
                       hidden_folders=folders, ruled=tuple(dict.fromkeys((*(f[0] for f in ruled), *ruled_folders))),
                       own_files=tuple(f[0] for f in own_files), home=home, secret_patterns=secret_patterns,
                       withheld_from=real if secret_patterns else None,
                       new_git=None if os.path.lexists(workspace / ".git") else real / ".git")
    if chosen != "workspace-write":
        return base
    return _writable(replace(base, git_look_folders=git_look_folders), workspace, write_roots, config_files)


def _withheld(hidden: tuple[tuple[str, int, int], ...], own: tuple[str, ...], own_files: list[tuple[str, int, int]],
              ruled: tuple[tuple[str, int, int], ...], ruled_folders: tuple[str, ...], unhidden: str,
              namespaces: bool) -> tuple[tuple[tuple[str, int, int], ...], tuple[str, ...], str]:
    """What the sandbox withholds: the files (the secret files the look found, nanohermes's
    own, what read rules cover) and the folders covered whole (nanohermes's own, those read
    rules cover), and why some cannot be ("" when all can): without namespaces none can."""
    known = {h[0] for h in hidden}
    files = (*hidden, *(f for f in (*own_files, *ruled) if f[0] not in known))
    folders = tuple(dict.fromkeys((*(p for p in own if os.path.isdir(p)), *ruled_folders)))
    if (files or ruled_folders) and not namespaces:
        return (), folders, unhidden or "user namespaces are unavailable here"
    return files, folders, unhidden


def _writable(conf: Confinement, workspace: Path, write_roots: tuple[Path, ...],
              config_files: tuple[Path, ...]) -> Confinement:
    """`conf` with what a workspace-write policy adds: the writable roots, and git's metadata
    and the files that configure nanohermes kept read-only inside them."""
    # A linked worktree commits into folders outside it: they are written as the workspace is.
    roots = (workspace, *git_dirs(workspace), *write_roots)
    resolved = tuple(dedupe([Path(os.path.realpath(r)) for r in roots]))
    meta = metadata(workspace, config_files)
    # Only what the command could create may be watched: a path outside every writable root
    # that appears meanwhile is someone else's doing, never removed.
    # The subfolders' git folders are kept as the workspace's own; a new one is judged after.
    subs = subfolder_gits(workspace, conf.git_look_folders)
    kept = subfolder_metadata(subs)
    protected = (*meta.protected, *(p for p in kept if os.path.lexists(p)))
    absent = tuple(p for p in (*meta.absent, *(p for p in kept if not os.path.lexists(p)))
                   if any(p == r or r in p.parents for r in resolved))
    return replace(conf, write_roots=resolved, read_only_paths=protected, must_not_appear=absent,
                   module_roots=meta.module_roots, sealable=meta.sealable, git_look=Path(os.path.realpath(workspace)),
                   subfolder_gits=tuple((p, link_target(p)) for p in subs),
                   path_folders=tuple(programs.path_folders_inside(map(str, resolved))))


def _regular_files(paths: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """The regular files among `paths`, each with its (device, inode)."""
    out: list[tuple[str, int, int]] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((path, st.st_dev, st.st_ino))
    return out
