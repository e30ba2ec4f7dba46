"""An MCP server for the tests, written with the SDK's server API.

`python demo_server.py` serves on stdio; `python demo_server.py --http` serves streamable
HTTP on 127.0.0.1 at a free port and prints `PORT <n>` on stdout once it listens; with
`--linger` it keeps running after stdin closes and holds a child process.
Tools: echo, add (structured), fail (a tool error), slow, crash (exits mid-call),
picture (image content), peek (declares readOnlyHint), dotted.name (a name the client
must sanitise), pid, header (an HTTP request header). DEMO_INSTRUCTIONS in the environment
replaces the server's instructions. Resources: note://hello (text), blob://bytes (binary).
Prompt: review.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("demo", instructions=os.environ.get("DEMO_INSTRUCTIONS", "A server for the nanohermes tests."),
                   log_level="ERROR")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Always fails.")
def fail(reason: str = "broken on purpose") -> str:
    raise ToolError(reason)


@server.tool(description="Sleep, then answer.")
async def slow(seconds: float = 5.0) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Exit the server process in the middle of the call.")
def crash() -> str:
    sys.stdout.flush()
    os._exit(3)


@server.tool(description="Return a tiny PNG.")
def picture() -> Image:
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\x00" * 24, format="png")


@server.tool(description="Read-only peek.", annotations=ToolAnnotations(read_only_hint=True))
def peek() -> str:
    return "peeked"


@server.tool(name="dotted.name", description="A tool whose name has a dot.")
def dotted() -> str:
    return "dotted ok"


HELPERS: list[int] = []  # pids of child processes started with --linger


@server.tool(description="Report this server's process id, then its helper children's.")
def pid() -> str:
    return " ".join(str(p) for p in [os.getpid(), *HELPERS])


@server.tool(description="Report an HTTP request header (none on stdio).")
def header(name: str, ctx: Context) -> str:
    headers = ctx.headers or {}
    return headers.get(name.lower(), "(none)")


@server.resource("note://hello", name="hello", description="A greeting.", mime_type="text/plain")
def hello() -> str:
    return "Hello from a resource."


@server.resource("blob://bytes", name="bytes", description="Some bytes.", mime_type="application/octet-stream")
def blob() -> bytes:
    return b"\x00\x01\x02\x03"


@server.prompt(description="Ask for a code review.")
def review(code: str) -> str:
    return f"Please review this code:\n{code}"


async def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="error", lifespan="on")
    srv = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await srv.serve(sockets=[sock])


def linger() -> None:
    """Outlive the end of stdin (a non-daemon thread) and hold a child process: a server that
    only a kill of its process group stops."""
    import subprocess
    import threading
    import time

    threading.Thread(target=time.sleep, args=(120,), daemon=False).start()
    HELPERS.append(subprocess.Popen(["sleep", "120"]).pid)


if __name__ == "__main__":
    if "--linger" in sys.argv:
        linger()
    if "--http" in sys.argv:
        asyncio.run(serve_http())
    else:
        server.run()
