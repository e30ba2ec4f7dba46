"""The one reader of the files nanohermes puts into the model's prompt by itself, with no tool
call: instruction files (AGENTS.md, CLAUDE.md and what they import, nested ones), custom
command files, skills, `@` mentions. Each goes through `OwnReader.read`, which applies the
file tools' rules to it:

- never `/proc`, `/sys` or `/dev`, and nothing that is not a regular file (a device, FIFO or
  socket), wherever a link points;
- never a secret file: the name list (`permissions.secret_files`) and nanohermes's own files
  (its config holding `api_key`, sessions, memory), as `secrets` defines them;
- never a path a deny rule for reading covers (`read_file(...)`, and Claude Code's
  `Read(...)`, which becomes it); an ask rule for reading needs a person's yes;
- a project file (`owner="project"`: the repository's author wrote it) that resolves outside
  the workspace, through a link or an import, is read only after a person's yes, asked once
  per project and target and remembered in nanohermes's state folder; with nobody to ask
  (`-p` without a terminal, `--yes`, goal mode) it is not read. The person's own files
  (`owner="user"`: their config folder, `~/.claude`, a path they typed) may be anywhere;
- text only, at most `own_file_max_bytes`.

What it does not read comes back as a `Skipped` naming the file and why, which the caller
names to the person: nothing is left out silently. The file read is the file checked: the
resolved path is opened with no link followed anywhere on it, and judged again through the
open descriptor (its type, its file system, its size) before a byte is read.

A yes is asked through the approval seam every front end answers (`ui.confirm`); the reader
only builds the question (`ask`), so it stays free of the UI and the turn loop.

A new kind of file is read as the others are: `reader.read(path, purpose="agent file",
owner=...)` where nobody can be asked now (a yes it would need waits in `pending`, which the
turn asks about before the prompt is sent), or `await reader.read_asking(path, confirm, ...)`
where the file is needed at once; either gives the text or a `Skipped` to name. The session's
reader is `Runtime.own_reader`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import stat
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nanohermes.common.budget import Limits
from nanohermes.common.dirs import state_home, write_private
from nanohermes.common.events import ApprovalReply, ApprovalRequest
from nanohermes.guard.pathrules import lexical, open_dir, subject_of, swapped
from nanohermes.guard.permissions import Policy, Rule, is_secret, read_rules, unattended
from nanohermes.guard.secrets import own_paths, own_secret

# Who wrote the file: the repository's author, or the person (their own folders, a path they typed).
Owner = Literal["project", "user"]
# Why a file was not read: `missing` (no such file: an import in prose may name none), `refused`
# (a rule says never), `asks` (a person's yes would let it in), `error` (it could not be read).
SkipKind = Literal["missing", "refused", "asks", "error"]
Confirm = Callable[[ApprovalRequest], Awaitable[ApprovalReply]]

# Folders whose files are the kernel's and the devices', never a file's text.
_SYSTEM_ROOTS = ("/proc", "/sys", "/dev")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the look does not hang the open


@dataclass(frozen=True)
class OwnText:
    """A file read into the prompt: as it was named, what it resolved to, its text."""

    path: Path
    real: Path
    text: str


@dataclass(frozen=True)
class Skipped:
    """A file not read, and why (`reason` says what to do to allow it, where anything would)."""

    path: Path  # as named
    real: str  # what it resolves to
    purpose: str  # what it was read for: "instruction file", "import", "command file", ...
    kind: SkipKind
    reason: str
    rule: str = ""  # the ask rule that asked, for `kind == "asks"`; "" when it is the workspace's edge

    def __str__(self) -> str:
        return f"{self.path} ({self.purpose}) not read: {self.reason}"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass
class OwnReader:
    """The rules in force for one session's own reads, and the person's answers so far.

    `policy` is read at each read (a rule remembered mid-session counts). `asks`: a person can
    answer a question (the REPL, `-p` in a terminal); never in an unattended mode. `store`: the
    file of remembered yeses (default: `own-reads.json` in nanohermes's state folder)."""

    workspace: Path
    policy: Callable[[], Policy] = Policy
    limits: Limits = field(default_factory=Limits)
    asks: bool = False
    store: Path | None = None
    # Targets waiting for a person's answer (real path -> the first skip that asked for it).
    pending: dict[str, Skipped] = field(default_factory=dict)
    # What was not read and nobody has been told yet (`told` takes out what a caller said itself).
    unnamed: dict[str, Skipped] = field(default_factory=dict)
    _said_no: set[str] = field(default_factory=set, init=False)  # answered no in this session
    _named: set[str] = field(default_factory=set, init=False)  # skips `take_unnamed` gave out already
    _said_yes: set[str] = field(default_factory=set, init=False)  # an ask rule answered yes in this session
    _remembered: set[str] | None = field(default=None, init=False)
    _own: tuple[str, ...] = field(default=(), init=False)
    _devices: tuple[int, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.root = os.path.realpath(self.workspace)

    # -- the read ------------------------------------------------------------------------
    def read(self, path: Path, *, purpose: str, owner: Owner = "project", anchor: Path | None = None,
             queue: bool = True) -> OwnText | Skipped:
        """Read `path` into the prompt, or say why not. `anchor`: the folder above the workspace
        it was named in (the instruction chain from the repository's root): a file standing
        where it was named, with no link on the way, counts as the project's own. `queue`: a
        file a yes would let in waits in `pending` for the next question (False: the caller
        asks when it needs the file, with `read_asking`)."""
        got = self._read(Path(path), purpose, owner, anchor, queue)
        if isinstance(got, Skipped) and got.kind != "missing":
            self.unnamed.setdefault(str(got), got)
        return got

    def _read(self, path: Path, purpose: str, owner: Owner, anchor: Path | None, queue: bool) -> OwnText | Skipped:
        real = os.path.realpath(path)

        def skip(kind: SkipKind, reason: str, rule: str = "") -> Skipped:
            return Skipped(path, real, purpose, kind, reason, rule)

        if why := self._never(path, real):
            return skip("refused", why)
        policy = self.policy()
        subjects = {subject_of(self.workspace, real), subject_of(self.workspace, lexical(self.root, str(path)))}
        rules = read_rules(policy.deny, policy.ask)
        hits = [h for s in subjects if (h := rules.covering(s)) is not None]
        if (denied := next((r for d, r in hits if d == "deny"), None)) is not None:
            return skip("refused", f"denied by rule {denied}")
        asked = next((r for _, r in hits), None)
        outside = owner == "project" and not self._placed(path, real, anchor)
        if (asked is not None or outside) and not self._allowed(real, asked):
            why = f"rule {asked} asks before a file is read" if asked is not None else \
                f"it resolves to {real}, outside the workspace {self.root}"
            return self._wait(skip("asks", why, str(asked or "")), queue)
        return self._open(path, real, skip)

    def _never(self, path: Path, real: str) -> str:
        """Why no yes could let this file in, or ""."""
        if any(_inside(real, r) for r in _SYSTEM_ROOTS):
            return f"it resolves to {real}, and files under /proc, /sys and /dev are never read into the prompt"
        policy = self.policy()
        names = tuple(policy.secret_files)
        if is_secret(real, names) or is_secret(str(path), names):
            return f"it resolves to {real}, a secret file (permissions.secret_files)"
        if not self._own:
            self._own = tuple(dict.fromkeys((*policy.own_secrets, *own_paths())))
        if own_secret(real, self._own):
            return f"it resolves to {real}, one of nanohermes's own files (its config, sessions, memory)"
        return ""

    def _placed(self, path: Path, real: str, anchor: Path | None) -> bool:
        """Is a project file the project's: inside the workspace, or where it was named under
        `anchor` with no link on the way?"""
        if _inside(real, self.root):
            return True
        if anchor is None:
            return False
        try:
            rel = os.path.relpath(os.path.abspath(path), os.path.abspath(anchor))
        except ValueError:
            return False
        return not rel.startswith("..") and real == os.path.join(os.path.realpath(anchor), rel)

    def _open(self, path: Path, real: str, skip: Callable[[SkipKind, str], Skipped]) -> OwnText | Skipped:
        """Open exactly `real` (no link followed on the way) and judge what was opened."""
        target = Path(real)
        try:
            dfd = open_dir(target.parent, path_only=True)
            try:
                fd = os.open(target.name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=dfd)
            finally:
                os.close(dfd)
        except FileNotFoundError:
            return skip("missing", "no such file")
        except OSError as e:
            if swapped(e) or e.errno == errno.EMLINK:
                return skip("error", "a symlink stands in its path (a loop, or one put there while it was read)")
            return skip("error", f"cannot read it: {e.strerror}")
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
                return skip("refused", f"it resolves to {real}, {what}")
            if st.st_dev in self._system_devices():
                return skip("refused", f"it resolves to {real}, a file of the kernel's (procfs or sysfs)")
            cap = self.limits.own_file_max_bytes
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(cap + 1)
        finally:
            os.close(fd)
        if len(data) > cap:
            return skip("refused", f"it is {max(st.st_size, len(data))} bytes, over the {cap}-byte limit for files "
                                   "read into the prompt (limit own_file_max_bytes)")
        if b"\x00" in data[: self.limits.binary_sniff_bytes]:
            return skip("refused", "it looks like a binary file")
        return OwnText(path, target, data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace"))

    def _system_devices(self) -> tuple[int, ...]:
        """The devices of procfs and sysfs: a bind mount of them elsewhere is theirs too."""
        if self._devices is None:
            found: list[int] = []
            for root in ("/proc", "/sys"):
                try:
                    found.append(os.stat(root).st_dev)
                except OSError:
                    continue
            self._devices = tuple(found)
        return self._devices

    # -- the person's yes ------------------------------------------------------------------
    def _allowed(self, real: str, rule: Rule | None) -> bool:
        if rule is not None:
            return real in self._said_yes
        return real in self.remembered()

    def _wait(self, skipped: Skipped, queue: bool) -> Skipped:
        """A file a yes would let in: queued for the question where a person can answer."""
        if skipped.real in self._said_no:
            return Skipped(skipped.path, skipped.real, skipped.purpose, "refused",
                           skipped.reason + "; you answered no in this session", skipped.rule)
        if not self.can_ask():
            how = "" if skipped.rule else (": run nanohermes in this folder once and answer yes to read it (the answer "
                                           "is remembered for this project)")
            return Skipped(skipped.path, skipped.real, skipped.purpose, "asks",
                           skipped.reason + f"; nobody is here to allow it{how}", skipped.rule)
        if queue:
            self.pending.setdefault(skipped.real, skipped)
        return skipped

    def can_ask(self) -> bool:
        return self.asks and not unattended(self.policy())

    def question(self, skipped: Skipped) -> ApprovalRequest:
        """The approval box for one file."""
        if skipped.rule:
            reason = f"rule {skipped.rule} asks before a file is read"
            remembered, yes = "the answer holds for this session", "Yes, read it (for this session)"
        else:
            reason = "a project file reaches outside the workspace"
            remembered, yes = "the answer is remembered for this project and file", \
                "Yes, read it (remembered for this project)"
        return ApprovalRequest(
            call_id=f"own-read:{skipped.real}", tool="read into the prompt", summary=skipped.real,
            detail=(f"{skipped.path} ({skipped.purpose}) resolves to {skipped.real}. Its text would be put into the "
                    f"model's prompt; {remembered}."),
            reason=reason, target=skipped.real, yes=yes, note=False)

    async def ask(self, confirm: Confirm, only: Collection[str] | None = None) -> list[str]:
        """Ask the person about the files waiting for a yes (`only`: those of them), one
        question per file; returns the real paths now allowed. A yes to a file outside the
        workspace is remembered for this project; a no holds for this session."""
        allowed: list[str] = []
        for real in [r for r in self.pending if only is None or r in only]:
            skipped = self.pending.pop(real)
            if not self.can_ask():
                continue
            reply = await confirm(self.question(skipped))
            if reply.choice == "deny":
                self._said_no.add(real)
                continue
            allowed.append(real)
            if skipped.rule:
                self._said_yes.add(real)
            else:
                self._remember(real)
        return allowed

    async def read_asking(self, path: Path, confirm: Confirm, *, purpose: str, owner: Owner = "project",
                          anchor: Path | None = None) -> OwnText | Skipped:
        """`read`, asking the person at once when a yes would let the file in. The caller
        names what comes back skipped (it is not left for `unnamed`)."""

        def read() -> OwnText | Skipped:
            return self.read(path, purpose=purpose, owner=owner, anchor=anchor)

        got = await asyncio.to_thread(read)
        if isinstance(got, Skipped) and got.real in self.pending:
            self.told(got)
            await self.ask(confirm, only={got.real})
            got = await asyncio.to_thread(read)
        if isinstance(got, Skipped):
            self.told(got)
        return got

    def told(self, skipped: Skipped) -> None:
        """The caller named this skip to the person itself."""
        self.unnamed.pop(str(skipped), None)

    def take_unnamed(self) -> list[Skipped]:
        """What was skipped and not named yet, now to be named (each once)."""
        out = [s for key, s in self.unnamed.items() if key not in self._named]
        self._named.update(self.unnamed)
        self.unnamed.clear()
        return out

    # -- the remembered yeses ----------------------------------------------------------------
    def _store(self) -> Path:
        if self.store is not None:
            return self.store

        return state_home() / "own-reads.json"

    def _load(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self._store().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def remembered(self) -> set[str]:
        """The targets outside the workspace the person allowed for this project."""
        if self._remembered is None:
            listed = self._load().get(self.root)
            self._remembered = {t for t in listed if isinstance(t, str)} if isinstance(listed, list) else set()
        return self._remembered

    def _remember(self, real: str) -> None:
        self.remembered().add(real)
        data = self._load()
        listed = [t for t in data.get(self.root) or [] if isinstance(t, str)]
        if real not in listed:
            data[self.root] = [*listed, real]
            try:
                write_private(self._store(), json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            except OSError:
                pass  # allowed for this session; asked again next time
