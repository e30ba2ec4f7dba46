"""The protocol's stdio: newline-delimited JSON-RPC on the process's standard input and output.

`take_stdio()` keeps stdin and stdout for the protocol alone: it moves them to private copies
of their descriptors, points fd 1 at stderr and fd 0 at /dev/null, so nothing else in the
process (a print, a warning, a library's log, a program a tool starts) can write a byte into
the protocol's stream or read one out of it. `StdioTransport` reads and writes the messages
on those copies, as the `Transport` the SDK's connection takes: a line that is no JSON is
answered -32700 and a message of no JSON-RPC shape -32600 (both with a null id), where the
SDK's own reader would drop them unanswered; the connection never sees either. So is an MCP
server of session/new or session/load that has no shape the schema knows (-32602, naming it),
which the SDK would skip without a word, leaving the person's server out. Every message
it writes is redacted (`nanohermes.guard.redact`) as `-p`'s JSON lines are, whatever part of it
(a title, a result, a permission request, a terminal's text) holds a key, but the text of a
file the editor is asked to write, which is the file's as the model wrote it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

from nanohermes.guard.redact import redact

# The one message whose text must reach the editor exactly: a file's new content.
WRITE_FILE = "fs/write_text_file"
# A message line longer than this is refused (-32700) and skipped, not kept in memory.
MAX_LINE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Stdio:
    """The protocol's own descriptors, once taken from fds 0 and 1."""

    read_fd: int
    write_fd: int


def take_stdio() -> Stdio:
    """Move stdin and stdout to private descriptors for the protocol; fd 1 then writes to
    stderr and fd 0 reads /dev/null, for this process and every process it starts."""
    sys.stdout.flush()
    read_fd, write_fd = os.dup(0), os.dup(1)  # not inherited by children (PEP 446)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return Stdio(read_fd, write_fd)


def _error(code: int, message: str, msg_id: Any = None, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def problem(message: Any) -> dict[str, Any] | None:
    """The -32600 answer a decoded message earns when it has no JSON-RPC shape (a request, a
    notification or a response), else None."""
    if not isinstance(message, dict):
        return _error(-32600, "Invalid Request", data={"details": "a message is one JSON object (batches are not "
                                                                  "supported)"})
    msg_id = message.get("id")
    if ("id" in message and not (msg_id is None or isinstance(msg_id, (str, int)))) or isinstance(msg_id, bool):
        return _error(-32600, "Invalid Request", data={"details": "`id` must be a string, a number or null"})
    if "method" in message:
        if not isinstance(message["method"], str):
            return _error(-32600, "Invalid Request", msg_id, {"details": "`method` must be a string"})
        if "params" in message and not isinstance(message["params"], (dict, list, type(None))):
            return _error(-32600, "Invalid Request", msg_id, {"details": "`params` must be an object"})
        return None
    if "id" in message and ("result" in message or "error" in message):
        return None  # an answer to one of our requests
    return _error(-32600, "Invalid Request", msg_id if "id" in message else None,
                  {"details": "a message needs a `method` (a request or notification) or a `result`/`error` "
                              "(a response)"})


SESSION_OPENERS = ("session/new", "session/load")


def mcp_problem(message: dict[str, Any]) -> dict[str, Any] | None:
    """The -32602 answer a session/new or session/load earns when one of its `mcpServers` is
    no stdio, http or sse server of the schema's shape, else None."""
    params = message.get("params")
    servers = params.get("mcpServers") if isinstance(params, dict) else None
    if message.get("method") not in SESSION_OPENERS or "id" not in message or not isinstance(servers, list):
        return None
    # the ACP schema and pydantic: only for a bad MCP server entry
    from acp import schema
    from pydantic import ValidationError

    shapes: dict[Any, type[Any]] = {"http": schema.HttpMcpServer, "sse": schema.SseMcpServer,
                                    "acp": schema.AcpMcpServer}
    for n, entry in enumerate(servers):
        name = entry.get("name") if isinstance(entry, dict) else None
        kind = entry.get("type") if isinstance(entry, dict) else None
        where = f"mcpServers[{n}]" + (f" ({name!r})" if isinstance(name, str) else "")
        if kind is not None and kind not in shapes:
            return _error(-32602, f"{where}: an MCP server of type {kind!r} is not one nanohermes connects to",
                          message["id"], {"index": n, "hint": "use a stdio server (no type), or type http or sse"})
        try:
            shapes.get(kind, schema.McpServerStdio).model_validate(entry)
        except ValidationError as e:
            wrong = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'the entry'}: {x['msg']}" for x in e.errors()[:5])
            return _error(-32602, f"{where} is not an MCP server the protocol describes: {wrong}", message["id"],
                          {"index": n, "hint": "a stdio server has name, command, args and env; an http or sse one "
                                               "type, name, url and headers"})
    return None


class _Drain(asyncio.Protocol):
    """The write side's flow control: `drain` waits while the pipe's buffer is full."""

    def __init__(self) -> None:
        self._paused = False
        self._waiters: list[asyncio.Future[None]] = []
        self.lost: BaseException | None = None
        self.closed = False

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self.lost = exc or ConnectionResetError("the protocol's output was closed")
        self._wake()

    def _wake(self) -> None:
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
        self._waiters = []

    async def drain(self) -> None:
        if self.closed:
            raise self.lost or ConnectionResetError("the protocol's output was closed")
        if self._paused:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
            if self.closed:
                raise self.lost or ConnectionResetError("the protocol's output was closed")


class StdioTransport:
    """JSON-RPC messages over the protocol's descriptors (the SDK's `Transport`)."""

    def __init__(self, stdio: Stdio) -> None:
        self.stdio = stdio
        self.reader: asyncio.StreamReader | None = None
        self._pipe: asyncio.WriteTransport | None = None
        self._drain: _Drain | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                         os.fdopen(self.stdio.read_fd, "rb", 0, closefd=False))
        except (ValueError, OSError):  # a regular file: read by a thread instead
            _feed_from_thread(loop, reader, self.stdio.read_fd)
        self.reader = reader
        try:
            drain = _Drain()
            pipe, _ = await loop.connect_write_pipe(lambda: drain, os.fdopen(self.stdio.write_fd, "wb", 0,
                                                                             closefd=False))
            self._pipe, self._drain = pipe, drain
        except (ValueError, OSError):  # a regular file: plain blocking writes
            self._pipe = None

    async def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        if message.get("method") != WRITE_FILE:
            text = redact(text)
        data = (text + "\n").encode("utf-8")
        async with self._lock:  # one whole line at a time
            if self._closed:
                raise ConnectionResetError("the protocol's output is closed")
            if self._pipe is not None and self._drain is not None:
                self._pipe.write(data)
                await self._drain.drain()
            else:
                view = memoryview(data)
                while view:
                    view = view[os.write(self.stdio.write_fd, view):]

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message; None at the end of input. What is not one is
        answered here and skipped."""
        assert self.reader is not None, "open() first"
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as e:
                await self._answer(_error(-32700, "Parse error", data={"details": str(e)}))
                continue
            if (bad := problem(message)) is not None or (bad := mcp_problem(message)) is not None:
                await self._answer(bad)
                continue
            assert isinstance(message, dict)
            return message

    async def _line(self) -> bytes | None:
        assert self.reader is not None
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:  # the last line, without its newline
            return e.partial if e.partial else None
        except asyncio.LimitOverrunError:
            await self._skip_long_line()
            await self._answer(_error(-32700, "Parse error", data={"details": f"a message longer than "
                                                                              f"{MAX_LINE_BYTES} bytes"}))
            return b""
        return line

    async def _skip_long_line(self) -> None:
        assert self.reader is not None
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as e:
                await self.reader.readexactly(e.consumed)
            except asyncio.IncompleteReadError:
                return

    async def _answer(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError, ConnectionError):  # nobody reads any more: nothing to answer
            await self.send(message)

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            if self._pipe is not None:
                self._pipe.close()


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int) -> None:
    def pump() -> None:
        try:
            while chunk := os.read(fd, 65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for the end
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="acp-stdin", daemon=True).start()
