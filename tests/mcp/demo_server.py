"""An MCP server for the tests, written with the SDK's server API.

`python demo_server.py` serves on stdio; `python demo_server.py --http` serves streamable
HTTP on 127.0.0.1 at a free port and prints `PORT <n>` on stdout once it listens; with
`--linger` it keeps running after stdin closes and holds a child process.
Tools: echo, add (structured), fail (a tool error), slow, crash (exits mid-call),
picture (image content), peek (declares readOnlyHint), dotted.name (a name the client
must sanitise), pid, header (an HTTP request header), grow (adds a tool, then announces
tools/list_changed), roots (the client's roots), ask (asks the person through elicitation),
sample (asks the client's model through sampling). DEMO_INSTRUCTIONS in the environment
replaces the server's instructions. Resources: note://hello (text), blob://bytes (binary).
Prompt: review.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from typing import Literal

from pydantic import BaseModel, Field

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


@server.tool(description="Add a tool named `name` that answers `grown: <name>`, and tell the client.")
async def grow(name: str, ctx: Context) -> str:
    def grown() -> str:
        return f"grown: {name}"

    server.add_tool(grown, name=name, description=f"A tool added during the session ({name}).")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="List the client's roots.")
async def roots(ctx: Context) -> str:
    result = await ctx.session.list_roots()
    return "\n".join(f"{r.uri} {r.name}" for r in result.roots) or "(no roots)"


class Order(BaseModel):
    name: str = Field(description="Who orders")
    count: int = Field(description="How many", ge=1)
    gift: bool = Field(default=False, description="Wrap it")
    colour: Literal["red", "green", "blue"] = Field(default="red", description="Which colour")


@server.tool(description="Ask the person for an order through elicitation.")
async def ask(ctx: Context) -> str:
    result = await ctx.elicit("Place your order", Order)
    data = result.data.model_dump() if result.action == "accept" and result.data is not None else None
    return f"{result.action}: {json.dumps(data)}"


@server.tool(description="Ask the client's model for a haiku through sampling.")
async def sample(ctx: Context) -> str:
    from mcp.types import SamplingMessage, TextContent

    try:
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text="a haiku"))], max_tokens=50)
    except Exception as e:
        return f"sampling failed: {e}"
    return f"sampled: {result.content}"


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
