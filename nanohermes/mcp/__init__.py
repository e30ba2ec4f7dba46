"""MCP: the client side of the Model Context Protocol. `client` starts, serves and stops the
configured servers (`McpManager`); `transports` reaches them (stdio, streamable HTTP, SSE) and
notices when one is gone. The tools made of a server's tools, and the mcp_* helpers, are in
`nanohermes.tools.mcp`.
"""
