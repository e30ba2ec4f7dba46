"""An MCP server with many tools (200 unless `--count N`), written with the SDK's server API:
`lookup_<i>` tools whose descriptions name a topic, so a search can find one."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

TOPICS = ("weather", "invoices", "tickets", "calendar", "inventory", "shipping", "payroll", "alerts")
server = MCPServer("many", log_level="ERROR")


def add(i: int) -> None:
    topic = TOPICS[i % len(TOPICS)]

    def lookup(key: str) -> str:
        return f"{topic} #{i}: {key}"

    server.add_tool(lookup, name=f"lookup_{i:03d}",
                    description=f"Look up {topic} record number {i} by key; returns the record as text.")


if __name__ == "__main__":
    count = int(sys.argv[sys.argv.index("--count") + 1]) if "--count" in sys.argv else 200
    for n in range(count):
        add(n)
    server.run()
