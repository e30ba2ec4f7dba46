"""How nanohermes reaches an MCP server, and how it notices one is gone: the stdio transport
(the SDK's, plus the exit of the server's process, which the SDK does not report), the HTTP
transport watched for refused connections, and the idle check of an HTTP server's port.
The SDK (`mcp`, `anyio`, `httpx2`) is imported inside the functions."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters


def describe_error(err: BaseException) -> str:
    """One line for an exception, looking through the SDK's exception groups."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def exit_reason(returncode: int | None) -> str:
    """How a server process ended, for the person and the model."""
    if returncode is None:
        return "the server closed its output (the process still runs)"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the server exited: killed by {name}"
    return f"the server exited with code {returncode}"


@asynccontextmanager
async def stdio_transport(params: StdioServerParameters, errlog: Any,
                          exited: Callable[[str], None]) -> AsyncIterator[Any]:
    """The SDK's stdio transport, plus what it does not tell: when the server's output ends
    while nanohermes is not shutting it down, `exited` gets why (its exit code or signal).

    Same protocol and shutdown as the SDK's `stdio_client`: newline-delimited JSON-RPC over
    the pipes, the server in its own process group; on the way out stdin is closed, then the
    group gets SIGTERM and SIGKILL, every wait bounded and shielded from cancellation."""
    # the MCP SDK and anyio: only a session with MCP servers
    import anyio
    import mcp_types
    from anyio.streams.text import TextReceiveStream
    from mcp.client.stdio import get_default_environment
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process([params.command, *params.args], env=get_default_environment() | (params.env or {}),
                                       stderr=errlog, cwd=params.cwd, start_new_session=True)
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    closing = False
    writer_done = anyio.Event()
    broken = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)

    async def wait_exit(within: float) -> bool:
        # Polled, not process.wait(): that waits for pipe EOF too, and a child of the server
        # holding the pipe would make an exited server look alive.
        with anyio.move_on_after(within):
            while process.returncode is None:
                await anyio.sleep(0.01)
        return process.returncode is not None

    def message(line: str) -> SessionMessage | Exception:
        try:
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as e:  # the session reports it
            return e

    async def reader() -> None:
        assert process.stdout is not None
        async with to_session:
            buffer = ""
            try:
                async for chunk in TextReceiveStream(process.stdout, encoding=params.encoding,
                                                     errors=params.encoding_error_handler):
                    *lines, buffer = (buffer + chunk).split("\n")
                    for line in lines:
                        await to_session.send(message(line))
            except broken:
                pass
        # The session has seen the connection end (pending requests fail at once); now say
        # why, unless nanohermes itself is stopping the server.
        if not closing:
            await wait_exit(2.0)
            if not closing:
                exited(exit_reason(process.returncode))

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for msg in from_session:
                    data = msg.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode(params.encoding, params.encoding_error_handler))
        except broken:
            await to_session.aclose()  # the session sees the connection end instead of waiting
        finally:
            writer_done.set()

    async def shutdown() -> None:
        assert process.stdin is not None and process.stdout is not None
        write_stream.close()
        with anyio.move_on_after(0.5):  # what was already accepted is flushed
            await writer_done.wait()
        with contextlib.suppress(*broken):
            await process.stdin.aclose()
        if not await wait_exit(2.0):
            await terminate_posix_process_tree(process, 2.0)
            await wait_exit(2.0)
        with contextlib.suppress(*broken):
            await process.stdout.aclose()
        for stream in (read_stream, write_stream, to_session, from_session):
            await stream.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            closing = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()


def direct_address(url: str) -> tuple[str, int] | None:
    """The host and port a connection to `url` goes to, unless a proxy sits in between (then
    the proxy answering says nothing about the server)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return None
    if urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.hostname):
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


async def refused(host: str, port: int, *, timeout: float) -> str | None:
    """Why nothing accepts a connection at host:port, or None when something does (or the
    network is only slow: a timeout proves nothing)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=timeout)
    except TimeoutError:
        return None
    except OSError as e:
        return f"nothing accepts connections at {host}:{port} any more ({describe_error(e)})"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def watched_http(on_refused: Callable[[str], None]) -> Any:
    """httpx2's own transport, telling `on_refused` about each request that could not connect."""
    # the MCP SDK's HTTP client: only a server over HTTP
    import httpx2

    class Watched(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            try:
                return await super().handle_async_request(request)
            except httpx2.ConnectError as e:
                on_refused(describe_error(e))
                raise

    return Watched()
