"""Sessions: the `Session` a conversation lives in, its transcript on disk, and finding them again.

A `Session` owns what one conversation is made of: the history the model sees, the
transcript and the folder of side files, the session-wide tool state (todo list, files seen,
background tasks) and the token meters. The turn loop, the compactor, checkpoints and the
front ends (`/clear`, `/resume`) change it only through its methods, so the history, the file
and the meters cannot disagree.

Transcripts are one append-only JSON-lines file per session.

Layout: `$XDG_DATA_HOME/nanohermes/sessions/<project>/<session-id>.jsonl`, with the session's
side files (persisted tool results) in the folder of the same name next to it. Records, one
per line:

    {"type": "meta", workspace, model, mode, started, title}   first line
    {"type": "message", "message": <wire dict>}                 what the model saw, verbatim (with what is
                                                                kept and never sent: `Message.to_wire`)
    {"type": "usage", "usage": {...}, "model": ..., "context"}  one per model call, for the meters ("context":
                                                                true for the conversation's own calls)
    {"type": "compaction", "summary": <wire dict>, "kept": N}   history := [summary] + last N
    {"type": "cut", "at": N, "message": <wire dict>}            history[N] := message (a tool result cut to a preview)
    {"type": "state", "todos": [...]}                           the todo list, when it changed
    {"type": "rewind", "keep": N}                               history := its first N messages
    {"type": "title", "title": ...}                             the title, when it changed after the first line

Each line is flushed as it is written, before the next model call, so a crash loses at most
the call in flight; the file is fsynced at the end of each turn. Loading tolerates a torn
last line (cut off mid-write) and answers tool calls that a crash left without a result, so
a resumed history is always one the endpoint accepts.
"""

from __future__ import annotations

import contextlib
import copy
import glob
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from nanohermes.common.budget import plural
from nanohermes.common.dirs import data_home, open_private
from nanohermes.common.errors import UsageError
from nanohermes.common.events import UsageUpdate
from nanohermes.common.messages import Message, Usage, est_tokens, is_summary
from nanohermes.guard.redact import redact

TITLE_CHARS = 80
# The result given to a call that was running when the process died.
LOST_RESULT = "interrupted: nanohermes stopped before this call finished; its effects, if any, are unknown"


class KeptState(Protocol):
    """A part of the session-wide tool state that the session saves with itself (its
    transcript's `state` records, each checkpoint) and puts back on a resume or a rewind,
    without knowing the tool it belongs to: the tool's module defines it, and whoever builds
    the session lists it (`Session.kept`; `tools.registry.kept_state()` for the built-ins)."""

    @property
    def key(self) -> str:
        """Its field in a `state` record."""
        ...

    def save(self, state: dict[str, Any]) -> Any:
        """Its part of `state`, as JSON (for an empty `state`: what "nothing" is)."""
        ...

    def restore(self, state: dict[str, Any], saved: Any) -> None:
        """Put back into `state` what `save` gave (None: nothing was saved)."""
        ...

    def carried(self, state: dict[str, Any]) -> str:
        """What a compaction's summary repeats of it ("" for nothing)."""
        ...


def project_key(workspace: Path) -> str:
    """A folder name for the workspace: readable, and unique by its real path."""
    real = str(workspace.resolve())
    return f"{workspace.name or 'root'}-{hashlib.sha1(real.encode()).hexdigest()[:8]}"


def sessions_root() -> Path:
    return data_home() / "sessions"


def sessions_dir(workspace: Path) -> Path:
    return sessions_root() / project_key(workspace)


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def shell_context(command: str, code: str, output: str) -> str:
    """What the model is told of a `!command` the person ran between turns."""
    return f'<user-shell command="{command}" exit="{code}">\n{output}\n</user-shell>'


_SHELL = re.compile(r'<user-shell command="(.*?)" exit="[^"\n]*">\n', re.S)


def make_title(prompt: str) -> str:
    """The first non-blank line of the first prompt, clipped; `!command` for a command the
    person ran."""
    if shell := _SHELL.match(prompt):
        prompt = "!" + shell[1]
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


@dataclass
class Loaded:
    """A transcript read back: the history as the model last saw it, plus what the meters need."""

    meta: dict[str, Any]
    history: list[Message]
    usage: Usage
    usage_by_model: dict[str, Usage]
    state: dict[str, Any]
    turns: int  # user prompts in the session
    good_bytes: int  # length of the valid prefix; anything after it is a torn write
    skipped: int  # unreadable lines in the middle (reported, never fatal)
    repaired: list[Message]  # results added for calls a crash left unanswered
    measured: tuple[int, int] | None = None  # the conversation's last counted context (see Session.measured)
    earlier: list[Message] = field(default_factory=list)  # what compactions took out (see Session.earlier)


def _parse(path: Path) -> Loaded:
    data = path.read_bytes()
    meta: dict[str, Any] = {}
    history: list[Message] = []
    usage = Usage()
    by_model: dict[str, Usage] = {}
    state: dict[str, Any] = {}
    measured: tuple[int, int] | None = None
    earlier: list[Message] = []
    turns = skipped = good = 0
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:  # no newline: the last write was cut off
            break
        line = data[pos:end]
        pos = end + 1
        try:
            rec = json.loads(line)
            kind = rec["type"]
            if kind == "meta":
                meta = {k: v for k, v in rec.items() if k != "type"}
            elif kind == "message":
                msg = Message.from_wire(rec["message"])
                history.append(msg)
                turns += msg.role == "user" and not is_summary(msg)
            elif kind == "usage":
                u = rec["usage"]
                one = Usage(int(u["prompt_tokens"]), int(u["completion_tokens"]), bool(u.get("estimated")))
                usage = usage + one
                model = str(rec.get("model") or meta.get("model") or "")
                by_model[model] = by_model.get(model, Usage()) + one
                if rec.get("context"):
                    measured = None if one.estimated or not one.prompt_tokens else (one.prompt_tokens, len(history))
            elif kind == "compaction":
                kept = int(rec["kept"])
                earlier += [m for m in history[:len(history) - kept] if not is_summary(m)]
                history = [Message.from_wire(rec["summary"]), *(history[len(history) - kept:] if kept else [])]
                measured = None
            elif kind == "cut":
                at, msg = int(rec["at"]), Message.from_wire(rec["message"])
                if not (0 <= at < len(history) and _same_result(history[at], msg)):
                    raise ValueError("a cut record that does not match the history")
                history[at] = msg
                measured = None
            elif kind == "rewind":
                history = history[:int(rec["keep"])]
                measured = None
                turns = sum(m.role == "user" and not is_summary(m) for m in history)
            elif kind == "state":
                state.update({k: v for k, v in rec.items() if k != "type"})
            elif kind == "title":
                meta["title"] = str(rec["title"])
        except (ValueError, KeyError, TypeError):
            if pos >= len(data):  # a torn last line that happens to end in a newline
                break
            skipped += 1
        good = pos
    loaded = Loaded(meta, history, usage, by_model, state, turns, good, skipped, [], measured, earlier)
    loaded.repaired = _answer_dangling(history)
    history.extend(loaded.repaired)
    return loaded


def _same_result(old: Message, new: Message) -> bool:
    """A cut may replace a tool result only by a result of the same call."""
    return old.role == new.role == "tool" and old.tool_call_id == new.tool_call_id


def _answer_dangling(history: list[Message]) -> list[Message]:
    """Results for the calls of the last assistant message that never got one."""
    for i in range(len(history) - 1, -1, -1):
        m = history[i]
        if m.role == "assistant":
            answered = {x.tool_call_id for x in history[i + 1:] if x.role == "tool"}
            return [Message.tool(c.id, LOST_RESULT) for c in m.tool_calls if c.id not in answered]
        if m.role != "tool":
            return []
    return []


@dataclass
class Transcript:
    """A session's JSON-lines file: its meta line, then what the session appended."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    _f: IO[str] | None = field(default=None, init=False, repr=False)
    _state: dict[str, Any] = field(default_factory=dict, init=False, repr=False)  # last saved
    _unsynced: bool = field(default=False, init=False, repr=False)  # written since the last fsync

    @property
    def id(self) -> str:
        return self.path.stem

    @property
    def dir(self) -> Path:
        """Side files of this session (persisted tool results)."""
        return self.path.with_suffix("")

    @classmethod
    def create(cls, workspace: Path, **meta: Any) -> Transcript:
        """A new session. Nothing is written until the first message, which gives the title."""
        return cls.create_in(sessions_dir(workspace), workspace=str(workspace), **meta)

    @classmethod
    def create_in(cls, folder: Path, **meta: Any) -> Transcript:
        return cls(folder / f"{new_session_id()}.jsonl", {**meta, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})

    @classmethod
    def open(cls, path: Path) -> tuple[Transcript, Loaded]:
        """Reopen a saved session for appending; cut a torn tail so new lines start clean.
        Another process still writing to it is refused, so two writers never interleave."""
        t = cls(path)
        t._open_locked()
        loaded = _parse(path)
        if loaded.good_bytes < path.stat().st_size:
            with open(path, "r+b") as f:
                f.truncate(loaded.good_bytes)
        t.meta = loaded.meta
        t._state = dict(loaded.state)
        for m in loaded.repaired:  # on disk too, so the file and the history agree
            t.append(m)
        return t, loaded

    def _open_locked(self) -> IO[str]:
        if self._f is None:
            # 0700 folders, a 0600 file: a transcript holds everything the model saw.
            f = open_private(self.path, "a")
            try:
                # no advisory locks on every platform: the ImportError below says so
                import fcntl

                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except ImportError:  # no advisory locks on this platform
                pass
            except OSError:
                f.close()
                raise UsageError(f"session {self.id} is in use by another nanohermes process",
                                 hint="wait for it to finish, or start a new session (without --continue/--resume)") from None
            self._f = f
        return self._f

    def _write(self, obj: dict[str, Any]) -> None:
        opening = self._f is None
        f = self._open_locked()
        if opening and self.path.stat().st_size == 0:
            f.write(redact(json.dumps({"type": "meta", **self.meta}, ensure_ascii=False)) + "\n")
        f.write(redact(json.dumps(obj, ensure_ascii=False)) + "\n")
        f.flush()
        self._unsynced = True

    def append(self, message: Message) -> None:
        if not self.meta.get("title") and message.role == "user" and message.content:
            self.meta["title"] = make_title(message.content)
            if self._f is not None:  # the first line is written: the title follows as a record
                self._write({"type": "title", "title": self.meta["title"]})
        self._write({"type": "message", "message": message.to_wire()})

    def record_usage(self, usage: Usage, model: str, context: bool = False) -> None:
        self._write({"type": "usage", "usage": usage.to_dict(), "model": model, **({"context": True} if context else {})})

    def record_compaction(self, summary: Message, kept: int) -> None:
        self._write({"type": "compaction", "summary": summary.to_wire(), "kept": kept})

    def record_cut(self, at: int, message: Message) -> None:
        self._write({"type": "cut", "at": at, "message": message.to_wire()})

    def record_rewind(self, keep: int, *, untitled: bool = False) -> None:
        """`untitled`: no prompt is left, so the next one gives the title."""
        self._write({"type": "rewind", "keep": keep})
        if untitled and self.meta.get("title"):
            self.meta["title"] = ""
            self._write({"type": "title", "title": ""})

    def checkpoint(self, saved: dict[str, Any], blank: dict[str, Any]) -> None:
        """End of a turn: save the session state (`saved`, each part as JSON; `blank`: what
        each is when nothing was saved) if it changed, then make the turn durable."""
        changed = {k: v for k, v in saved.items() if v != self._state.get(k, blank.get(k))}
        if changed and self._f is not None:
            self._write({"type": "state", **changed})
            self._state.update(changed)
        self.sync()

    def sync(self) -> None:
        # Only what was written since the last sync costs a disk flush: closing right after
        # a turn's end does not wait for the disk again.
        if self._f is not None and self._unsynced:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._unsynced = False

    def close(self) -> None:
        if self._f is not None:
            self.sync()
            self._f.close()
            self._f = None


@dataclass
class Session:
    """One conversation. `transcript` None: it is not recorded (`--no-session`, a sub-agent);
    such a session may still keep side files in `side_dir` (a sub-agent's, under its
    parent's folder)."""

    transcript: Transcript | None = None
    side_dir: Path | None = None
    workspace: Path | None = None  # whose project folder the transcripts of `clear` go to
    history: list[Message] = field(default_factory=list)
    # Session-wide tool state, shared by every call: the todo list, the files the model has
    # seen, the background task manager... Values with an `aclose()` are resources that
    # outlive a conversation (`clear` keeps them; the runtime closes them at the end).
    state: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)  # sub-agents' and the labeller's calls included
    usage_by_model: dict[str, Usage] = field(default_factory=dict)  # the same, per model (for pricing)
    # What the endpoint counted the context as at the agent's last call (its prompt tokens),
    # and the history's length then; None when it reported no usage or the history changed
    # since in a way the count no longer describes (compaction, a cut, a rewind).
    measured: tuple[int, int] | None = field(default=None, repr=False)
    # The messages compactions took out of the history, in order (their summaries not
    # included): with the history, the whole conversation, for people (/export).
    earlier: list[Message] = field(default_factory=list, repr=False)
    # The parts of the tool state saved with the session and put back (the todo list).
    kept: tuple[KeptState, ...] = field(default=(), repr=False)

    @classmethod
    def new(cls, workspace: Path, *, record: bool = True, kept: tuple[KeptState, ...] = (), **meta: Any) -> Session:
        """A fresh conversation in `workspace`; `record`: kept on disk as a transcript; `kept`:
        the parts of the tool state saved with it."""
        return cls(Transcript.create(workspace, **meta) if record else None, workspace=workspace, kept=kept)

    @property
    def id(self) -> str:
        return self.transcript.id if self.transcript is not None else ""

    @property
    def path(self) -> Path | None:
        return self.transcript.path if self.transcript is not None else None

    @property
    def folder(self) -> Path | None:
        """Where this session's side files go (persisted results, pastes, checkpoints list)."""
        return self.transcript.dir if self.transcript is not None else self.side_dir

    # -- the turn loop ---------------------------------------------------------------------
    def append(self, message: Message) -> None:
        self.history.append(message)
        if self.transcript is not None:
            self.transcript.append(message)

    def count_usage(self, usage: Usage, model: str, *, context: bool = False) -> UsageUpdate:
        """Meter one model call to `model`; returns the event that tells the front end.
        `context`: the call was the conversation's own, so its prompt tokens are what the
        context held (a sub-agent's or the summariser's are not)."""
        if context:
            self.measured = None if usage.estimated or not usage.prompt_tokens else (usage.prompt_tokens, len(self.history))
        self.usage = self.usage + usage
        self.usage_by_model[model] = self.usage_by_model.get(model, Usage()) + usage
        if self.transcript is not None:
            self.transcript.record_usage(usage, model, context)
        return UsageUpdate(usage=usage, total=self.usage, model=model)

    def context_tokens(self) -> tuple[int, bool]:
        """(tokens the context holds now, measured?): what the endpoint counted at the last call
        plus the messages since at 4 chars a token; all of the history estimated so when it
        counted nothing (the system prompt and tools are then not in it)."""
        if self.measured is not None and self.measured[1] <= len(self.history):
            tokens, at = self.measured
            return tokens + est_tokens(sum(m.chars() for m in self.history[at:])), True
        return est_tokens(sum(m.chars() for m in self.history)), False

    def end_turn(self) -> None:
        """Save the tool state if it changed, and make the turn durable."""
        if self.transcript is not None:
            self.transcript.checkpoint(self.saved_state(), self.saved_state({}))

    # -- the tool state kept with the session -------------------------------------------------
    def saved_state(self, state: dict[str, Any] | None = None) -> dict[str, Any]:
        """The parts of `state` (default: this session's) that are saved with the session, as JSON."""
        held = self.state if state is None else state
        return {part.key: part.save(held) for part in self.kept}

    def restore_state(self, state: dict[str, Any], saved: dict[str, Any]) -> None:
        """Put into `state` what `saved_state` gave."""
        for part in self.kept:
            part.restore(state, saved.get(part.key))

    def state_of(self, saved: dict[str, Any]) -> dict[str, Any]:
        """A tool state holding what `saved_state` kept (the todo list): what a session read
        back knows of an earlier point of itself."""
        state: dict[str, Any] = {}
        self.restore_state(state, saved)
        return state

    def carried(self) -> list[str]:
        """What a compaction's summary repeats of the tool state (the todo list), one text a part."""
        return [text for part in self.kept if (text := part.carried(self.state))]

    # -- what compaction and rewinding do ----------------------------------------------------
    def compacted(self, summary: Message, kept: int) -> None:
        """Replace all but the last `kept` messages by `summary`, on disk too."""
        self.earlier += [m for m in self.history[:len(self.history) - kept] if not is_summary(m)]
        self.history = [summary, *self.history[len(self.history) - kept:]]
        self.measured = None
        if self.transcript is not None:
            self.transcript.record_compaction(summary, kept)

    def cut_result(self, at: int, message: Message) -> None:
        """Replace the tool result at `at` by `message` (the same call's result, cut to a
        preview after a context overflow), on disk too: a resume sees what the model saw."""
        if not (0 <= at < len(self.history) and _same_result(self.history[at], message)):
            raise ValueError(f"history[{at}] is not a result of call {message.tool_call_id!r}")
        self.history[at] = message
        self.measured = None
        if self.transcript is not None:
            self.transcript.record_cut(at, message)

    def mark(self) -> dict[str, Any]:
        """A copy of the conversation's tool state as it is now (the todo list, the files the
        model has seen, the tools it loaded...: everything but the resources), for `rewind`
        to put back when the history goes back to this point."""
        return copy.deepcopy({k: v for k, v in self.state.items() if not hasattr(v, "aclose")})

    def rewind(self, keep: int, state: dict[str, Any] | None = None) -> None:
        """Back to the first `keep` messages, on disk too, with the tool state `state` (a
        `mark()` taken when the history was that long). None: that state is not known (a
        checkpoint of an earlier version): the tool state stays as it is, and the caller
        forgets what it cannot vouch for (checkpoints: what the model has seen)."""
        del self.history[keep:]
        self.measured = None
        if state is not None:
            for key in [k for k, v in self.state.items() if not hasattr(v, "aclose")]:
                del self.state[key]
            self.state.update(copy.deepcopy(state))
        if self.transcript is not None:
            untitled = not any(m.role == "user" and not is_summary(m) for m in self.history)
            self.transcript.record_rewind(keep, untitled=untitled)
            self.transcript.checkpoint(self.saved_state(), self.saved_state({}))  # the todo list as it was, for a resume

    # -- what the front ends do ---------------------------------------------------------------
    def clear(self, **meta: Any) -> None:
        """`/clear`: a new, empty conversation (recorded if this one was, next to it, with
        `meta` such as the model and mode now in use). The old one stays saved. The meters and
        the conversation's tool state start over; resources such as background tasks stay."""
        old = self.transcript
        if old is not None:
            old.close()
            self.transcript = (Transcript.create(self.workspace, **meta) if self.workspace is not None else
                               Transcript.create_in(old.path.parent, workspace=old.meta.get("workspace", ""), **meta))
        self._reset()

    def resume(self, path: Path) -> list[str]:
        """Continue the saved session at `path` (at start-up, or `/resume` in a running REPL):
        the history exactly as the model last saw it, the meters, the todo list and the side
        folder. Returns the warnings to show."""
        if self.transcript is not None and self.transcript.path == path:
            self.transcript.close()  # resuming the session already open: release our own lock
        transcript, loaded = Transcript.open(path)
        if self.transcript is not None:
            self.transcript.close()
        self.transcript = transcript
        self._reset()
        self.history, self.usage, self.usage_by_model = list(loaded.history), loaded.usage, dict(loaded.usage_by_model)
        self.earlier = list(loaded.earlier)
        self.measured = loaded.measured
        self.restore_state(self.state, loaded.state)
        warnings: list[str] = []
        if loaded.skipped:
            warnings.append(f"{path}: {plural(loaded.skipped, 'unreadable transcript line')} skipped")
        if loaded.repaired:
            one = len(loaded.repaired) == 1
            warnings.append(f"{plural(len(loaded.repaired), 'tool call')} {'was' if one else 'were'} still running when "
                            f"the session stopped; {'it is' if one else 'they are'} marked as interrupted")
        return warnings

    def whole(self) -> list[Message]:
        """The whole conversation for people: what compactions took out, then the history
        (which starts with the last summary when there was one)."""
        return [*self.earlier, *self.history]

    def _reset(self) -> None:
        self.history = []
        self.earlier = []
        self.measured = None
        self.usage, self.usage_by_model = Usage(), {}
        for key in [k for k, v in self.state.items() if not hasattr(v, "aclose")]:
            del self.state[key]

    def close(self, *, keep: bool = True) -> None:
        """Close the transcript. `keep` False: remove it and its folder, for a new session
        that holds nothing to go back to (its run failed before the model answered)."""
        if self.transcript is None:
            return
        self.transcript.close()
        if not keep:
            with contextlib.suppress(OSError):
                self.transcript.path.unlink(missing_ok=True)
            shutil.rmtree(self.transcript.dir, ignore_errors=True)


# -- finding sessions ------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionInfo:
    """A saved session as the listings show it (`/resume`, `--resume`)."""

    id: str
    path: Path
    title: str
    started: str
    updated: float  # mtime
    turns: int
    model: str
    workspace: str


_USER_LINE = b'\n{"type": "message", "message": {"role": "user"'
_TITLE_LINE = b'\n{"type": "title", '


def _info(path: Path) -> SessionInfo | None:
    """Listing reads the meta line and counts prompts by their line prefix: no full parse,
    so listing stays fast with many long sessions."""
    try:
        data = path.read_bytes()
        updated = path.stat().st_mtime
    except OSError:
        return None
    try:
        m = json.loads(data[: data.find(b"\n")])
        m = m if isinstance(m, dict) and m.get("type") == "meta" else {}
    except ValueError:
        m = {}
    if (at := data.rfind(_TITLE_LINE)) >= 0:  # a title given (or taken back) after the first line
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            m = {**m, "title": json.loads(data[at + 1: data.find(b"\n", at + 1)]).get("title")}
    return SessionInfo(id=path.stem, path=path, title=str(m.get("title") or "(untitled)"), started=str(m.get("started", "")),
                       updated=updated, turns=data.count(_USER_LINE), model=str(m.get("model", "")),
                       workspace=str(m.get("workspace", "")))


def list_sessions(workspace: Path) -> list[SessionInfo]:
    """This workspace's sessions, the most recently used first."""
    folder = sessions_dir(workspace)
    paths = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
    return [i for i in map(_info, paths) if i is not None]


def latest_session(workspace: Path) -> Path:
    sessions = list_sessions(workspace)
    if not sessions:
        raise UsageError(f"no saved session for {workspace}", hint='start one with nanohermes -p "..." (or run nanohermes)')
    return sessions[0].path


def find_session(workspace: Path, session_id: str) -> Path:
    """A session by ID or unique ID prefix: this workspace's first, then any project's."""
    if not session_id.strip() or "/" in session_id or os.sep in session_id:
        raise UsageError(f"`{session_id}` is not a session ID", hint="`nanohermes sessions` lists this workspace's sessions")
    for folder in (sessions_dir(workspace), sessions_root()):
        stem = glob.escape(session_id)
        pattern = f"{stem}*.jsonl" if folder != sessions_root() else f"*/{stem}*.jsonl"
        hits = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UsageError(f"session ID `{session_id}` is ambiguous ({len(hits)} sessions start with it)",
                             hint="give more of the ID; `nanohermes sessions` lists them")
    raise UsageError(f"no session `{session_id}`", hint="`nanohermes sessions` lists this workspace's sessions")
