"""A real ACP client for the tests: the Python SDK's client side, driving a real `nanohermes acp`
process against the loopback fake endpoint.

`Editor` is the client (what an editor answers: permission requests from a queue of answers,
its files from its buffers, with unsaved text the disk does not have); `agent()` starts the
process, connects the SDK's `ClientSideConnection` to it and keeps every raw line it wrote on
stdout (the protocol's stream) and its stderr in a file, and on the way out closes stdin and
waits for the process to leave.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from nanohermes.testing import FakeServer

class OnFirstUse:
    """A module imported when a test first reads a name of it. Every test process imports every
    test module, and the ACP SDK (half a second of CPU: its schema is pydantic models) is needed
    only by the processes that run an ACP test."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pytest looks for its own marks on every name of a test module
            raise AttributeError(name)
        return getattr(importlib.import_module(self._name), name)


acp = OnFirstUse("acp")
s = OnFirstUse("acp.schema")
helpers = OnFirstUse("acp.helpers")
REPO = Path(__file__).resolve().parent.parent
EXIT_SECS = 10  # how long a process may take to leave once its stdin is closed


@dataclass
class Editor:
    """The client. `answers`: what each permission request gets, in order: an option kind
    (allow_once, allow_always, reject_once) or "cancelled"; with none left, reject_once."""

    answers: list[str] = field(default_factory=list)
    updates: list[tuple[str, Any]] = field(default_factory=list)  # (session id, update)
    asked: list[tuple[s.ToolCallUpdate, list[s.PermissionOption]]] = field(default_factory=list)
    buffers: dict[str, str] = field(default_factory=dict)  # path -> text the editor holds (unsaved)
    reads: list[str] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)
    forms: list[Any] = field(default_factory=list)
    form_answer: dict[str, Any] | None = None  # what a form is answered with (None: declined)
    on_ask: Any = None  # called with each permission request before it is answered (a test's move)
    terminals: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> command, args, output, released

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, options: list[s.PermissionOption], session_id: str,
                                 tool_call: s.ToolCallUpdate, **kwargs: Any) -> s.RequestPermissionResponse:
        self.asked.append((tool_call, options))
        if self.on_ask is not None:
            await self.on_ask(tool_call)
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "cancelled":
            return s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled"))
        option = next(o for o in options if o.kind == answer)
        return s.RequestPermissionResponse(outcome=s.AllowedOutcome(outcome="selected", option_id=option.option_id))

    async def read_text_file(self, path: str, session_id: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> s.ReadTextFileResponse:
        self.reads.append(path)
        text = self.buffers[path] if path in self.buffers else await asyncio.to_thread(Path(path).read_text, "utf-8")
        return s.ReadTextFileResponse(content=text)

    async def write_text_file(self, content: str, path: str, session_id: str, **kwargs: Any) -> s.WriteTextFileResponse:
        self.writes.append((path, content))
        await asyncio.to_thread(Path(path).write_text, content, "utf-8")  # an editor saves the buffer it changed
        self.buffers[path] = content
        return s.WriteTextFileResponse()

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode))
        if self.form_answer is None:
            return s.DeclineElicitationResponse(action="decline")
        return s.AcceptElicitationResponse(action="accept", content=self.form_answer)

    async def create_terminal(self, command: str, session_id: str, args: list[str] | None = None,
                              env: Any = None, cwd: str | None = None, output_byte_limit: int | None = None,
                              **kwargs: Any) -> s.CreateTerminalResponse:
        """As an editor does: the command runs, its output kept for the terminal's view."""
        p = await asyncio.create_subprocess_exec(command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.STDOUT)
        out, _ = await p.communicate()
        terminal = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal] = {"command": command, "args": args or [], "output": out.decode(),
                                    "exit": p.returncode, "released": False}
        return s.CreateTerminalResponse(terminal_id=terminal)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kwargs: Any) -> s.WaitForTerminalExitResponse:
        return s.WaitForTerminalExitResponse(exit_code=self.terminals[terminal_id]["exit"])

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> s.TerminalOutputResponse:
        return s.TerminalOutputResponse(output=self.terminals[terminal_id]["output"], truncated=False)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> s.ReleaseTerminalResponse:
        self.terminals[terminal_id]["released"] = True
        return s.ReleaseTerminalResponse()

    # -- reading what was received -------------------------------------------------------------
    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [u for sid, u in self.updates if u.session_update == kind and (session_id is None or sid == session_id)]

    def said(self, session_id: str | None = None) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk", session_id))

    def thought(self, session_id: str | None = None) -> str:
        return "".join(u.content.text for u in self.of("agent_thought_chunk", session_id))

    def calls(self) -> dict[str, dict[str, Any]]:
        """Each tool call by id: its start, and its updates merged in order."""
        out: dict[str, dict[str, Any]] = {}
        for u in self.of("tool_call"):
            out[u.tool_call_id] = u.model_dump(exclude_none=True)
        for u in self.of("tool_call_update"):
            out.setdefault(u.tool_call_id, {}).update(u.model_dump(exclude_none=True, exclude={"session_update"}))
        return out


@dataclass
class Agent:
    conn: Any
    process: asyncio.subprocess.Process
    lines: list[bytes]  # every raw line on its stdout
    stderr: Path

    async def start(self, workspace: Path, editor_fs: bool = False, **caps: Any) -> tuple[s.InitializeResponse, str]:
        """initialize, then session/new in `workspace`: (the answer to initialize, the session id)."""
        fs = s.FileSystemCapabilities(read_text_file=editor_fs, write_text_file=editor_fs)
        init = await self.conn.initialize(protocol_version=acp.PROTOCOL_VERSION,
                                          client_capabilities=s.ClientCapabilities(fs=fs, **caps))
        new = await self.conn.new_session(cwd=str(workspace), mcp_servers=[])
        return init, new.session_id

    async def ask(self, session_id: str, *text: str) -> str:
        """A prompt of text blocks; its stop reason."""
        reply = await self.conn.prompt(session_id=session_id, prompt=[acp.text_block(t) for t in text])
        return str(reply.stop_reason)

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines if line.strip()]


def env_for(server: FakeServer | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    if server is not None:
        env.setdefault("OPENAI_API_KEY", "test-key")
    return env


@contextlib.asynccontextmanager
async def agent(editor: Editor, workspace: Path, server: FakeServer | None, *args: str, stderr: Path,
                env: dict[str, str] | None = None) -> AsyncIterator[Agent]:
    """The real `nanohermes acp` process (with `args`, and the fake endpoint's URL and model),
    connected to `editor`; closed (stdin, then a wait) on the way out."""
    endpoint = ["--base-url", server.base_url, "--model", "fake-model"] if server is not None else []
    err = await asyncio.to_thread(open, stderr, "wb")
    with err:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nanohermes", "acp", *endpoint, *args, cwd=workspace,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
            env=env if env is not None else env_for(server), limit=64 * 1024 * 1024)
    assert process.stdin is not None and process.stdout is not None
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    lines: list[bytes] = []

    async def pump() -> None:  # every raw line, then on to the SDK's reader
        assert process.stdout is not None
        while line := await process.stdout.readline():
            lines.append(line)
            reader.feed_data(line)
        reader.feed_eof()

    pumping = asyncio.get_running_loop().create_task(pump())
    conn = acp.connect_to_agent(editor, process.stdin, reader, use_unstable_protocol=True)  # forms
    try:
        yield Agent(conn, process, lines, stderr)
    finally:
        with contextlib.suppress(Exception):
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), EXIT_SECS)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(f"nanohermes acp did not leave within {EXIT_SECS} s of its stdin closing") from None
        finally:
            await pumping
            with contextlib.suppress(Exception):
                await conn.close()


def raw(line: str | bytes) -> bytes:
    return line.encode() if isinstance(line, str) else line


# -- the TypeScript SDK's client ------------------------------------------------------------------
TS_SPEC = REPO / "tests" / "acp_ts"
TS_CACHE = REPO / "tests" / ".cache" / "acp-ts"
TS_INSTALL_SECS = 300
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network", "fetch failed")


def ts_client() -> Path:
    """The TypeScript client script, in a folder where `@agentclientprotocol/sdk` is installed
    (`npm ci` of the pinned lock file, once per lock file); skips the calling test, saying why,
    when node or npm is missing or the registry cannot be reached."""
    import fcntl
    import hashlib
    import shutil
    import subprocess

    import pytest

    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed, so the TypeScript SDK's client cannot run")
    TS_CACHE.mkdir(parents=True, exist_ok=True)
    files = ("package.json", "package-lock.json", "client.mjs")
    stamp_text = hashlib.sha256(b"".join((TS_SPEC / f).read_bytes() for f in files)).hexdigest()
    with open(TS_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs sharing the checkout install once
        stamp = TS_CACHE / ".installed"
        if stamp.exists() and stamp.read_text() == stamp_text and (TS_CACHE / "node_modules").is_dir():
            return TS_CACHE / "client.mjs"
        for name in files:
            shutil.copyfile(TS_SPEC / name, TS_CACHE / name)
        try:
            p = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--no-progress", "--loglevel=error"], cwd=TS_CACHE,
                               capture_output=True, text=True, timeout=TS_INSTALL_SECS,
                               env={**os.environ, "npm_config_update_notifier": "false"})
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm ci did not finish within {TS_INSTALL_SECS} s: the npm registry cannot be reached")
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
            if any(w in p.stderr for w in _OFFLINE):
                pytest.skip(f"the npm registry cannot be reached: {last}")
            raise RuntimeError(f"npm ci failed in {TS_CACHE}: {p.stderr[-2000:]}")
        stamp.write_text(stamp_text)
    return TS_CACHE / "client.mjs"
