"""The OS sandbox every process spawned for the model starts in, and the sweep for escapees.

What it holds, whatever the command does: no write outside the writable roots (the
workspace, its git folders, `extra_write_roots`, `sandbox.writable_roots` and the call's own
temporary folder, which is also its /dev/shm), and none to git's metadata or nanohermes's
own config inside them; no network but the command's own loopback (unless
`sandbox.network`); no other program's socket; no secret file and none of nanohermes's own
files; no other process to see or signal (its own PID namespace and /proc); no capability,
no new privilege; no process left behind. What it cannot hold is in docs/sandbox.md.

Parts:
- `confinement`: the finished confinement of one call (`Confinement`) and what the machine
  can confine with (`Availability`), as data;
- `policy`: choosing them: the probe, the one mapping from a call's basis and the
  configuration to its finished confinement (`confine`), the lines for `doctor` and
  `/permissions`;
- `launch`: applying one: the temporary folder, the Landlock ruleset, the code the child runs
  between fork and exec, the environment, the watch over what the call must not plant;
- `mounts`: the mount plan and the covers over secret files and sockets;
- `pidns`: the command's own PID namespace: its init, the relay nanohermes waits on, its /proc;
- `kernel`: the syscalls, through ctypes;
- `refusals`: what the sandbox refused, read from the output, as typed values (`Refused`:
  kind, subject, what lets it through);
- `escapees`: the sweep of processes that left a command's process group.
"""

from __future__ import annotations

from nanohermes.guard.sandbox.confinement import Availability, Confinement, SandboxPolicy
from nanohermes.guard.sandbox.escapees import (
    MARKER, become_subreaper, hold_user_namespace, kill_escaped, new_marker, note_session, reap_orphans,
    reap_session,
)
from nanohermes.guard.sandbox.kernel import LINUX, SandboxError, landlock_abi
from nanohermes.guard.sandbox.launch import Prepared, prepare, sweep_plants, tainted_programs
from nanohermes.guard.sandbox.mounts import cover_running
from nanohermes.guard.sandbox.policy import POLICY_OF, confine, confinement, describe_availability, probe
from nanohermes.guard.sandbox.refusals import Refused, RefusedKind, refusals, remedies

__all__ = [
    "LINUX", "MARKER", "POLICY_OF", "Availability", "Confinement", "Prepared", "Refused", "RefusedKind", "SandboxError",
    "SandboxPolicy", "become_subreaper", "confine", "confinement", "cover_running", "describe_availability",
    "hold_user_namespace", "kill_escaped", "landlock_abi", "new_marker", "note_session", "prepare", "probe",
    "reap_orphans", "reap_session", "refusals", "remedies", "sweep_plants", "tainted_programs",
]
