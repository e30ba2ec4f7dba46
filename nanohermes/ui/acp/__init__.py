"""`nanohermes acp`: nanohermes as an Agent Client Protocol agent, the front end editors drive.

The package owns the protocol side of nanohermes: `wire` (stdio kept for the protocol, the
-32700/-32600 answers), `server` (the agent's methods on nanohermes sessions), `editor` (the
`UI` an ACP session's agent talks to: events as session updates, approvals as permission
requests, the client's files), `prompts` (a prompt's blocks and its `/commands`) and `updates`
(the mapping of calls, plans, modes and history to the protocol's updates). It and its SDK are
imported only by `nanohermes acp`; the REPL and `-p` never load them.

`serve` runs until stdin closes (exit 0, every session closed: MCP servers, background tasks,
sub-agents) or SIGTERM/SIGHUP (exit 143, closed the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from nanohermes.ui.acp.state import Options
from nanohermes.ui.acp.wire import Stdio

EXIT_OK, EXIT_TERMINATED = 0, 143

__all__ = ["EXIT_OK", "EXIT_TERMINATED", "Options", "serve"]


def serve(options: Options) -> int:
    """Serve the protocol on stdin and stdout until either ends; returns the exit status."""
    # the ACP wire and server (the SDK): after the process's own streams are taken
    from nanohermes.ui.acp.wire import take_stdio

    stdio = take_stdio()  # before anything can print
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if options.verbose else logging.WARNING,
                        format="nanohermes acp: %(levelname)s %(name)s: %(message)s")
    loop = asyncio.new_event_loop()
    # Our own pool for blocking tool bodies, so the exit can abandon a thread stuck in one.
    executor = ThreadPoolExecutor(thread_name_prefix="tool")
    loop.set_default_executor(executor)
    try:
        return loop.run_until_complete(_serve(stdio, options))
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in tasks:
                t.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            loop.close()


async def _serve(stdio: Stdio, options: Options) -> int:
    # the ACP SDK and server: once the process's streams are taken
    from acp import Agent
    from acp.agent.connection import AgentSideConnection

    # the ACP wire and server (the SDK): after the process's own streams are taken
    from nanohermes.ui.acp.server import Server
    from nanohermes.ui.acp.wire import StdioTransport

    transport = StdioTransport(stdio)
    await transport.open()
    server = Server(options)
    # The SDK's router looks the methods up by name: those the server does not have (session/list,
    # session/fork, ...) are answered -32601, so it is no full `acp.Agent`.
    conn = AgentSideConnection(cast("Agent", server), transport, listening=False)
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stopped.set)
    listening = loop.create_task(conn.listen())
    stopping = loop.create_task(stopped.wait())
    await asyncio.wait({listening, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    try:
        if not stopped.is_set():
            await server.drain()
        await server.aclose()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.close(), 5)
        listening.cancel()
    return EXIT_TERMINATED if stopped.is_set() else EXIT_OK
