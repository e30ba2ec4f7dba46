"""Reading what the sandbox refused out of a command's output, and what lets it through.

A refusal is a `Refused` value: its kind, its subject and the settings that would let it
through (`allow`); its text (`str()`) is what the model and the person read. Consumers read
the fields, never the text.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nanohermes.guard.sandbox.confinement import Confinement, within

_DENIED = r"(?:Permission denied|Read-only file system|Operation not permitted)"

_NET = (r"Network is unreachable|Could not resolve host|Temporary failure in name resolution|"
        r"Name or service not known|(?:connect|bind)[^\n]{0,80}(?:Permission denied|EACCES)|"
        r"\.(?:connect|bind)\([^\n]*\)\s*\n(?:.*\n)?.*(?:Errno 13|EACCES)|"
        r"(?:Errno 13|EACCES)[^\n]{0,40}(?:connect|socket)")

_BARE_WORD = 2  # the pattern of `bash: x: Permission denied`, whose word may be no path at all

# Words without which none of `_path_patterns` can match (each holds one of them, as written):
# an output that has none, as most have, is read without compiling those patterns.
_PATH_WORDS = ("Permission denied", "Read-only file system", "Operation not permitted", "EACCES", "EROFS", "EPERM")


@functools.cache  # compiled when the first output that may name a refused path is read, not at import
def _path_patterns() -> list[re.Pattern[str]]:
    return [
        re.compile(r"['‘`\"]([^'’`\"\n]+)['’`\"]:? " + _DENIED),  # touch: cannot touch 'x': Permission denied
        re.compile(_DENIED + r"\]?:? ['‘\"]([^'’\"\n]+)['’\"]"),  # PermissionError: [Errno 13] Permission denied: 'x'
        re.compile(r"(?:^|\s)(/?[\w.~+@%/-][^\s:'\"]*): " + _DENIED, re.M),  # bash: x: Permission denied
        re.compile(r"['‘`\"]([^'’`\"\n]+)['’`\"] for (?:reading|writing): " + _DENIED),  # cp: cannot open 'x' for reading: ...
        re.compile(r"\b(?:EACCES|EROFS|EPERM):? ['\"]?(/[^\s'\"]+)"),  # node: Error: connect EACCES /x/s.sock
    ]


@functools.cache  # compiled when the first command's output is read, not at import
def _net_pattern() -> re.Pattern[str]:
    return re.compile(_NET, re.I)

SECRET_WITHHELD = "a secret file the sandbox withholds (permissions.secret_files)"

SOCKET_HIDDEN = "another program's server, hidden from sandboxed commands"

OWN_HIDDEN = "one of nanohermes's own files (its config, sessions, memory), hidden from sandboxed commands"
HOME_HIDDEN = ("one of your home folder's credentials (keys, cloud and registry logins), withheld from sandboxed "
               "commands")

RULE_WITHHELD = "a path a read rule withholds (permissions.deny, permissions.ask)"

# A command with a PID namespace of its own has a /proc of its own: a path there names one of
# its processes, or the namespace's init, not the process of that number nanohermes sees.
INIT_CLOSED = ("the sandbox's init (pid 1 of the command's own PID namespace, a copy of nanohermes, whose memory, "
               "environment and files no command may read)")
OWN_PROC = "the command's own /proc (read-only; it holds only the processes of the command's own PID namespace)"

NOT_IN_NAMESPACE = ("a process outside the command's own PID namespace, which holds only the command's own processes "
                    "(each command gets one of its own)")

_SEALED = (" (the top level of a git folder is read-only for a background task, so that it cannot point git "
           "elsewhere; run git commands that change the repository in the foreground)")

_OWN_LOOPBACK = ("the sandbox has a loopback of its own: servers the command starts are reachable, the host's are "
                 "not")

# What the sandbox refuses, by kind: a write outside the writable roots (named, at the top
# level of a git folder a background task may not write, or unnamed: "Read-only file
# system"), a path the command created where it must not (`planted`, removed), access to a
# secret file, to a path a read rule covers, to nanohermes's own files, to the sandbox's init
# or the command's own /proc, another program's socket, signalling a process outside its PID
# namespace, the network, a server of the host's loopback (named by port, or not), an access
# refused that names no path, and how many more there were than are listed.
RefusedKind = Literal["write", "sealed", "unnamed-write", "planted", "secret", "read-rule", "own-file",
                      "home-credential", "init",
                      "own-proc", "socket", "process", "network", "loopback", "server", "unnamed", "more"]

# The subject's text, kind by kind ({} is the subject; `planted` adds why it was removed).
_TEXT: dict[str, str] = {
    "write": "a write to {}", "sealed": "a write to {}" + _SEALED,
    "unnamed-write": "a write outside its writable roots (\"Read-only file system\"; the output names no path)",
    "planted": "creating {} (removed: {})",
    "secret": "access to {}, " + SECRET_WITHHELD, "read-rule": "access to {}, " + RULE_WITHHELD,
    "own-file": "access to {}, " + OWN_HIDDEN, "init": "access to {}, " + INIT_CLOSED,
    "home-credential": "access to {}, " + HOME_HIDDEN,
    "own-proc": "access to {}, " + OWN_PROC, "socket": "a connection to the socket {}, " + SOCKET_HIDDEN,
    "process": "signalling process {}, " + NOT_IN_NAMESPACE,
    "network": "a network connection (the sandbox has no network)",
    "loopback": "a connection to port {} of the host's loopback (" + _OWN_LOOPBACK + ")",
    "server": "a connection, probably to a server of this machine (it was refused; listening here: {}; "
              + _OWN_LOOPBACK + ")",
    "unnamed": ("an access the sandbox refuses (\"Permission denied\" or \"Operation not permitted\", naming no path "
                "it could check: another program's socket, a secret file, a file outside its writable roots, or a "
                "process outside the sandbox)"),
    "more": "{} more (sandbox_refusals_listed is {})",
}

# What lets refusals through, in the order a hint lists them, each with the kinds it answers.
_REMEDIES: tuple[tuple[str, frozenset[str]], ...] = (
    ("add the folder to sandbox.writable_roots", frozenset({"write", "sealed", "unnamed-write", "planted"})),
    ('set "sandbox": {"network": true}', frozenset({"network", "loopback", "server"})),
    ("an allow rule naming the exact command line lets it read the secret file", frozenset({"secret"})),
    ("no setting opens a path a read rule covers to sandboxed commands but removing the rule",
     frozenset({"read-rule"})),
    ("no setting opens nanohermes's own files to sandboxed commands", frozenset({"own-file"})),
    ("no setting opens another program's socket to sandboxed commands", frozenset({"socket"})),
    ("a background task is stopped with task_kill", frozenset({"process"})),
    ("no setting shows sandboxed commands nanohermes's processes or anyone else's",
     frozenset({"init", "own-proc", "process"})),
)

# The two that let every refusal through.
_ALWAYS = ("--sandbox off (or sandbox.mode off) runs unasked commands unconfined",
           "or a person's yes at the prompt runs this call outside the sandbox")


@dataclass(frozen=True)
class Refused:
    """One thing the sandbox refused a call: its `kind`, its `subject` (the path, socket,
    port or process id; the ports listening for `server`, the count for `more`; "" when the
    output names none) and `why` (for `planted`: why it was removed; for `more`: the limit).
    `str()` is the text the model and the person read; `allow` what would let it through."""

    kind: RefusedKind
    subject: str = ""
    why: str = ""

    def __str__(self) -> str:
        return _TEXT[self.kind].format(self.subject, self.why)

    @property
    def allow(self) -> str:
        """The settings that would let this through ("" when none but the two that always do)."""
        return "; ".join(text for text, kinds in _REMEDIES if self.kind in kinds)


_DENIED_BARE = re.compile(r"Permission denied|Operation not permitted|\[Errno (?:1|13)\]|\b(?:EACCES|EPERM)\b")

_READ_ONLY_FS = re.compile(r"Read-only file system|\[Errno 30\]|\bEROFS\b")

class _Found:
    """The refusals read so far, in order, each once."""

    def __init__(self) -> None:
        self.items: list[Refused] = []

    def add(self, kind: RefusedKind, subject: str = "", why: str = "") -> None:
        found = Refused(kind, subject, why)
        if found not in self.items:
            self.items.append(found)

    def kinds(self) -> set[str]:
        return {f.kind for f in self.items}


def refusals(text: str, conf: Confinement, cwd: Path, hidden_sockets: tuple[str, ...] | list[str] = (),
             command: str = "", exit_failed: bool = False) -> list[Refused]:
    """What the sandbox probably refused, read from a command's output: the paths named in
    "Permission denied" / "Read-only file system" messages that the command could have
    written without the sandbox (checked with access(2)), a socket the sandbox hid
    (`hidden_sockets`) that the output names (or the `command` line names, when the output
    shows a refused or failed connection), a read-only file system named without a path
    (a shared-memory lock, a semaphore), and network failures while the network is closed (a
    refused connection to the host's loopback also when it names no port, if the command
    failed (`exit_failed`): the sandbox's loopback is its own). A
    heuristic: a program that fails silently or words its errors its own way is not seen, and
    a path that is unwritable anyway is not blamed on the sandbox."""
    if conf.policy == "off" or not (conf.abi or conf.namespaces):
        return []
    found = _Found()
    _named_paths(text, conf, cwd, hidden_sockets, found)
    _sockets(text, command, hidden_sockets, found)
    if conf.namespaces and conf.pid and _NO_PROCESS.search(text):
        for pid in _host_pids(text, command):
            found.add("process", str(pid))
    if not found.items and conf.namespaces:
        _unnamed(text, found)
    if not conf.network and "socket" not in found.kinds():
        _network(text, command, conf, exit_failed, found)
    return found.items


def _sockets(text: str, command: str, hidden_sockets: tuple[str, ...] | list[str], found: _Found) -> None:
    """A socket the sandbox hid that the output names, or the command line when the output
    shows a refused or failed connection."""
    not_reached = bool(_DENIED_BARE.search(text) or _NOT_CONNECTED.search(text))
    for sock in hidden_sockets:
        if sock in text or (not_reached and sock in command):
            found.add("socket", sock)


def _unnamed(text: str, found: _Found) -> None:
    """A refusal the output words without a path it could check."""
    if _READ_ONLY_FS.search(text):
        found.add("unnamed-write")
    elif _DENIED_BARE.search(text):
        # Capabilities are dropped in the sandbox, so even root's access to other users'
        # files is refused there.
        found.add("unnamed")


def _network(text: str, command: str, conf: Confinement, failed: bool, found: _Found) -> None:
    """A network failure while the sandbox has no network; a refused connection to a server
    of the host (see `_loopback`)."""
    if _net_pattern().search(text):
        found.add("network")
    elif conf.namespaces and _NOT_CONNECTED.search(text):
        _loopback(text, command, failed, found)


def _named_paths(text: str, conf: Confinement, cwd: Path, hidden_sockets: tuple[str, ...] | list[str],
                 found: _Found) -> None:
    """The refusals of paths the output names: nanohermes's own files, secret files, writes."""
    if not any(word in text for word in _PATH_WORDS):
        return
    for i, pattern in enumerate(_path_patterns()):
        for m in pattern.finditer(text):
            raw = m.group(1).strip()
            if not raw or len(raw) > 4096:
                continue
            path = Path(os.path.expanduser(raw))
            path = path if path.is_absolute() else cwd / path
            if i == _BARE_WORD and not _proc_path(path, conf) and not any(c in raw for c in "/.") \
                    and not os.path.lexists(path):
                continue  # `open: Read-only file system` (perror) names a call, not a file
            _named_path(path, conf, hidden_sockets, found)


def _named_path(path: Path, conf: Confinement, hidden_sockets: tuple[str, ...] | list[str], found: _Found) -> None:
    """What the sandbox refused of `path`, which the output names, if anything."""
    shown = os.path.normpath(path)
    if (proc := _proc_path(path, conf)) is not None:
        found.add(proc, shown)
        return
    real = _real(path)
    if real and real in hidden_sockets:
        return  # named by `refusals`, as a socket
    withheld = _withheld(real, conf)
    if withheld is not None:
        found.add(withheld, shown)
    elif _blames(path, conf):
        found.add("sealed" if _sealed(real, conf) else "write", shown)


def _withheld(real: str, conf: Confinement) -> RefusedKind | None:
    """Why the sandbox withholds the file at `real` from the command, if it does."""
    if not (conf.namespaces and real):
        return None
    if _inside(real, conf.ruled):
        return "read-rule"
    if _inside(real, conf.home):
        return "home-credential"
    if real in conf.own_files or _inside(real, conf.hidden_folders):
        return "own-file"
    if real in {p for p, _, _ in conf.hidden}:
        return "secret"
    return None


def _inside(real: str, roots: tuple[str, ...]) -> bool:
    return any(real == f or real.startswith(f.rstrip("/") + "/") for f in roots)


_NO_PROCESS = re.compile(r"No such process|\bESRCH\b|\[Errno 3\]")
_PID_WORD = re.compile(r"(?<![\w.:/-])(\d{1,7})(?![\w.:/-])")


def _host_pids(text: str, command: str) -> list[int]:
    """The process ids the output's "No such process" lines, or else the command line, name
    that are programs running where nanohermes sees them (outside the command's namespace)."""
    lines = [re.sub(r"\[Errno \d+\]", "", line) for line in text.splitlines() if _NO_PROCESS.search(line)]
    named = [int(m) for line in lines for m in _PID_WORD.findall(line)] or \
        [int(m) for m in _PID_WORD.findall(command)]
    return [p for p in dict.fromkeys(named) if p > 1 and _a_program(p)]


def _a_program(pid: int) -> bool:
    """Is `pid` a process nanohermes sees that runs a program (not a kernel thread, whose low
    numbers a command's own processes also have)?"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return bool(f.read(1))
    except OSError:
        return False


def _proc_path(path: Path, conf: Confinement) -> RefusedKind | None:
    """What a path in the command's own /proc is, when the command has one and the path is
    there (None otherwise): nanohermes's /proc would name other processes, so it is never
    looked at for such a path."""
    if not (conf.namespaces and conf.pid):
        return None
    parts = Path(os.path.normpath(path)).parts
    if parts[:2] != ("/", "proc"):
        return None
    return "init" if parts[2:3] == ("1",) else "own-proc"


_NOT_CONNECTED = re.compile(r"refused|(?:couldn't|could not|failed to|unable to|cannot) connect", re.I)

# A connection refused, in the words of libc (perror), Python, node, curl, Go and Java.
_REFUSED = re.compile(r"Connection refused|ECONNREFUSED|\[Errno 111\]|connect: connection refused", re.I)

def _loopback(text: str, command: str, failed: bool, found: _Found) -> None:
    """A refused connection to a server of the host: the command's network namespace holds only
    its own loopback. Named by its port when the output, or else the command line, names a
    loopback port a server of the host listens on; a refusal that names no port is still said
    to be the sandbox's when the command failed and servers listen on the host (a command that
    retried until its own server was up did not fail)."""
    listening = _listening()
    ports = _ports_named(text, listening) or (_ports_named(command, listening) if command else [])
    for port in ports:
        found.add("loopback", str(port))
    if not ports and failed and listening and _REFUSED.search(text):
        shown = ", ".join(map(str, sorted(listening)[:10])) + (", ..." if len(listening) > 10 else "")
        found.add("server", shown)

_LOOPBACK_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|::1)\]?['\"]?(?::|,\s*(?:port=)?|\s+port\s+)(\d{1,5})\b")

def _ports_named(text: str, listening: set[int]) -> list[int]:
    """The loopback ports `text` names that a server of the host listens on (the sandbox's
    own loopback cannot reach them)."""
    return sorted({int(m.group(1)) for m in _LOOPBACK_PORT.finditer(text)} & listening)


def _listening() -> set[int]:
    """The TCP ports servers listen on in nanohermes's own network namespace (the host's)."""
    listening: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, "rb") as f:
                rows = f.read().split(b"\n")[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            if len(parts) > 3 and parts[3] == b"0A":  # LISTEN
                listening.add(int(parts[1].rsplit(b":", 1)[1], 16))
    return listening

def _sealed(real: str, conf: Confinement) -> bool:
    """Is `real` at the top level of a git folder a background task may not write?"""
    return conf.background and conf.namespaces and bool(real) and Path(real).parent in conf.sealable


def remedies(refused: Sequence[Refused]) -> str:
    """What lets a refused sandboxed call through, for these refusals: the settings that widen
    the sandbox for what they name, and the two that always do."""
    kinds = {r.kind for r in refused}
    return "; ".join([*(text for text, answers in _REMEDIES if kinds & answers), *_ALWAYS])

def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except OSError:  # a path nanohermes may not look at
        return ""

def _blames(path: Path, conf: Confinement) -> bool:
    """`_sandbox_blocks`, and no for a path nanohermes may not even look at (`/proc/1/root/x`):
    a command's output must never turn its finished run into an error."""
    try:
        return _sandbox_blocks(path, conf)
    except OSError:
        return False

def _sandbox_blocks(path: Path, conf: Confinement) -> bool:
    """Could nanohermes itself write here, and does the confinement forbid it?"""
    real = Path(os.path.realpath(path))
    target = real if real.exists() else real.parent
    if not os.access(target, os.W_OK):
        return False  # unwritable without the sandbox too: not ours to blame
    if any(within(real, p) for p in conf.read_only_paths) and conf.namespaces:
        return True
    if _sealed(str(real), conf):
        return True
    if conf.policy == "workspace-write" and any(within(real, r) for r in conf.write_roots):
        return False
    return str(real) != "/dev/null"
