"""The tools of MCP servers, and the four mcp_* helper tools, over the client
(`nanohermes.mcp.client`).

Each server tool becomes `mcp__<server>__<tool>` with the server's own JSON schema. MCP tools
are treated as not read-only, not concurrency-safe and asking for approval, unless the server
is marked `trusted` and the tool declares `readOnlyHint`. Results become text: text blocks as
they are, structured content as JSON (unless it only repeats the content), images and audio
saved to a file and named in a short note (and, for a model that takes images, sent to it as
image parts), never base64 text. A long call's progress notifications become tool progress.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import mimetypes
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nanohermes.common.budget import Limits
from nanohermes.common.dirs import private_dir, state_home
from nanohermes.common.messages import Image
from nanohermes.mcp.client import LIST_PAGES, McpManager, RemoteTool, Server
from nanohermes.tools.base import (
    Approval,
    Attempt,
    Effect,
    P,
    Params,
    ReadOnlyTool,
    SubjectKind,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    about,
)
from nanohermes.tools.toolsearch import ToolSearch


def tools(manager: McpManager) -> list[Tool]:
    """Connected servers' tools and, when any server is configured, the four helpers and
    tool_search (offered only when the servers' tools must be deferred: see toolsearch)."""
    if not manager.servers:
        return []
    helpers: list[Tool] = [McpListResources(manager=manager), McpReadResource(manager=manager),
                           McpListPrompts(manager=manager), McpGetPrompt(manager=manager),
                           ToolSearch(candidates=lambda: server_tools(manager))]
    return sorted([*server_tools(manager), *helpers], key=lambda t: t.name)


def server_tools(manager: McpManager) -> list[Tool]:
    """The tools of the connected servers, as their last listing gave them."""
    return [_tool(manager, s.name, r) for s in manager.servers.values() if s.status == "connected" for r in s.tools]


def _tool(manager: McpManager, server: str, remote: RemoteTool) -> Tool:
    cls = McpTool.named(remote.name, remote.description, remote.read_only)
    return cls(server=server, remote=remote.remote, schema=remote.schema, manager=manager)



def _binary_note(kind: str, mime: str | None, data: str) -> str:
    size = len(data) * 3 // 4 - data[-2:].count("=")
    return f"[{kind}{' ' + mime if mime else ''}, {size} bytes; not shown as text]"


# Saves one binary block (kind, MIME type, base64 data) and returns where it went.
SaveFn = Callable[[str, str, str], Path]


def result_content(result: Any, server: str, save: SaveFn | None = None,
                   to_model: bool = False) -> tuple[str, tuple[Image, ...]]:
    """A CallToolResult as text for the model, and the images for a model that takes them
    (`to_model`). An image or audio block never becomes base64 text: it is saved with `save`
    and named in a note (without `save`, only described)."""
    parts: list[str] = []
    texts: list[str] = []
    images: list[Image] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
            texts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(_media_note(kind, block.mime_type, block.data, save,
                                     images if kind == "image" and to_model else None))
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri} ({block.name}); read it with mcp_read_resource "
                         f"server={server} uri={block.uri}]")
        elif kind == "resource":
            parts.append(resource_contents_text(block.resource))
        else:
            parts.append(f"[{kind or 'unknown'} content; not shown]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _repeats(structured, texts, result.content):
        parts.append("structured content:\n" + json.dumps(structured, ensure_ascii=False, indent=2))
    return "\n".join(parts), tuple(images)


def _media_note(kind: str, mime: str | None, data: str, save: SaveFn | None, images: list[Image] | None) -> str:
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return f"[{kind}{' ' + mime if mime else ''}: not valid base64; not shown]"
    what = f"[{kind}{' ' + mime if mime else ''}, {size} bytes"
    if save is None:
        return what + "; not shown as text]"
    try:
        path = save(kind, mime or "", data)
    except OSError as e:
        return what + f"; not shown as text, and it could not be saved: {e.strerror or e}]"
    if images is not None:
        images.append(Image(mime or "image/png", data, str(path)))
        return what + f", shown to you after the results; saved to {path}]"
    return what + f", saved to {path}; not shown as text]"


def _repeats(structured: Any, texts: list[str], content: Any) -> bool:
    """Servers often send one value twice: as content and as structured content, maybe
    wrapped in one key ({"result": ...}, {"content": ...}), or the content blocks themselves
    again (base64 and all). The model needs it once."""
    joined = "\n".join(texts)
    try:
        parsed: Any = json.loads(joined)
    except ValueError:
        parsed = joined
    blocks = [b.model_dump(by_alias=True, mode="json", exclude_none=True) for b in content]
    candidates = [structured]
    if isinstance(structured, dict) and len(structured) == 1:
        candidates.append(next(iter(structured.values())))
    return any(c == parsed or c == joined or (blocks and _same_blocks(c, blocks)) for c in candidates)


def _same_blocks(value: Any, blocks: list[dict[str, Any]]) -> bool:
    """Is `value` the content blocks again (compared on what a block says: its own `_meta`
    and annotations aside)?"""
    if not isinstance(value, list) or len(value) != len(blocks):
        return False

    def plain(b: Any) -> Any:
        return {k: v for k, v in b.items() if k not in ("_meta", "annotations")} if isinstance(b, dict) else b

    return [plain(b) for b in value] == [plain(b) for b in blocks]


def resource_contents_text(contents: Any) -> str:
    text = getattr(contents, "text", None)
    if text is not None:
        return f"[resource {contents.uri}]\n{text}"
    return f"[resource {contents.uri}] " + _binary_note("binary data", contents.mime_type, contents.blob)




@dataclass(frozen=True, kw_only=True)
class McpArgs(Params):
    """Whatever the server's schema allows: the server validates its own arguments, so
    `McpTool.parse` keeps the call's object as it came."""

    values: dict[str, Any] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(json.dumps(self.values, default=str))
        return out


@dataclass(frozen=True, kw_only=True)
class McpTool(Tool[McpArgs]):
    """A server's tool. Its identity (name, description, effect) is per tool, like a built-in
    tool's, so each one gets its own subclass from `named`."""
    spawns: ClassVar[bool] = False

    group: ClassVar[str] = "mcp"
    params: ClassVar[type[Params]] = McpArgs
    source: ClassVar[str] = "mcp"
    kind: ClassVar[SubjectKind] = "mcp"
    trusted_read_only: ClassVar[bool] = False  # the server is trusted and its hints say read-only
    server: str
    remote: str
    schema: dict[str, Any]
    manager: McpManager = field(repr=False, compare=False)

    @staticmethod
    @functools.cache  # one class per tool, however often the pool is built
    def named(name: str, description: str, trusted_read_only: bool) -> type[McpTool]:
        """The class of one server tool (`mcp__<server>__<tool>`)."""
        tool_name, tool_description, read_only = name, description, trusted_read_only

        class One(McpTool):
            name: ClassVar[str] = tool_name
            description: ClassVar[str] = tool_description
            effect: ClassVar[Effect] = "read" if read_only else "run"
            trusted_read_only: ClassVar[bool] = read_only

        One.__qualname__ = One.__name__ = f"McpTool[{name}]"
        return One

    def read_only(self, args: McpArgs) -> bool:
        return self.trusted_read_only

    def concurrency_safe(self, args: McpArgs) -> bool:
        return self.trusted_read_only

    def approval_for(self, args: McpArgs) -> Approval:
        return "never" if self.trusted_read_only else "always"

    def spec(self, limits: Limits | None = None) -> dict[str, Any]:
        schema = dict(self.schema)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": schema}}

    def parse(self, raw: dict[str, Any]) -> McpArgs:
        return McpArgs(values=dict(raw))

    def summary(self, args: McpArgs) -> str:
        return json.dumps(args.dump(), ensure_ascii=False)[:200]

    def approval_detail(self, args: McpArgs, ctx: ToolContext, attempt: Attempt) -> str:
        return f"MCP server {self.server}, tool {self.remote}, arguments:\n" + json.dumps(
            args.dump(), ensure_ascii=False, indent=2)

    async def run(self, args: McpArgs, ctx: ToolContext, attempt: Attempt) -> str | ToolResult:
        s = self.manager.server(self.server)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
            ctx.progress(self.name, f"{amount} {message}" if message else amount)

        before = len(s.notes)
        result = await self.manager.request(
            s, self.name, lambda c: c.call_tool(self.remote, args.dump(), progress_callback=on_progress))
        await self.manager.settle(s)
        text, images = result_content(result, self.server, lambda kind, mime, data: _save(ctx, kind, mime, data),
                                      self.manager.images_to_model)
        text = "\n\n".join(t for t in (text, *s.notes[before:]) if t)
        if result.is_error:
            raise ToolError(text or f"{self.name} reported an error without a message")
        return ToolResult(text=text or "(the tool returned no content)", images=images)


def _save(ctx: ToolContext, kind: str, mime: str, data: str) -> Path:
    """An image or audio block, written to the session's folder (or, for a session that is
    not recorded, nanohermes's state folder), readable only by its owner."""
    folder = (ctx.session_folder or state_home() / "mcp") / "mcp-media"
    private_dir(folder)
    ext = mimetypes.guess_extension(mime.split(";")[0].strip()) or (".png" if kind == "image" else ".bin")
    call = re.sub(r"[^A-Za-z0-9_-]", "_", ctx.call_id) or "call"
    n = 1
    while (path := folder / f"{call}-{n}{ext}").exists():
        n += 1
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return path


# -- the helper tools --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Helper(ReadOnlyTool[P]):
    spawns: ClassVar[bool] = False
    group: ClassVar[str] = "mcp"
    source: ClassVar[str] = "mcp"
    manager: McpManager = field(repr=False, compare=False)

    def _targets(self, server: str | None) -> list[Server | str]:
        """The servers to list: each connected one, or a line saying why one is not."""
        if server:
            return [self.manager.server(server)]
        out: list[Server | str] = []
        for s in self.manager.servers.values():
            if s.status == "connected" and s.client is not None:
                out.append(s)
            else:
                out.append(f"{s.name}: not connected ({s.status}{': ' + s.error if s.error else ''})")
        return out

    async def _listing(self, server: str | None, kind: str, fetch: Callable[[Any, Any], Any],
                       line: Callable[[Any], str], extra: Callable[[Server], Awaitable[list[str]]] | None = None) -> str:
        """One line per item of `kind` (resources, prompts) of each target server, or why none."""
        lines: list[str] = []
        for s in self._targets(server):
            if isinstance(s, str):
                lines.append(s)
                continue
            if not _offers(s, kind):
                lines.append(f"{s.name}: offers no {kind}")
                continue
            items = await _pages(self.manager, s, self.name, kind, fetch)
            if not items:
                lines.append(f"{s.name}: no {kind}")
            lines.extend(f"{s.name}  {line(item)}" for item in items)
            if extra is not None:
                lines.extend(await extra(s))
        return "\n".join(lines) or "no MCP servers"


@dataclass(frozen=True, kw_only=True)
class ListParams(Params):
    server: str | None = field(default=None, metadata=about("Only this server (default: every connected server)."))


@dataclass(frozen=True, kw_only=True)
class ReadResourceParams(Params):
    server: str = field(metadata=about("The MCP server that has the resource."))
    uri: str = field(metadata=about("The resource URI, as mcp_list_resources shows it."))

    non_empty: ClassVar[dict[str, str]] = {"server": "", "uri": "list them with mcp_list_resources"}


@dataclass(frozen=True, kw_only=True)
class GetPromptParams(Params):
    server: str = field(metadata=about("The MCP server that has the prompt."))
    name: str = field(metadata=about("The prompt name, as mcp_list_prompts shows it."))
    arguments: dict[str, str] = field(default_factory=dict, metadata=about("The prompt's arguments, by name."))

    non_empty: ClassVar[dict[str, str]] = {"server": "", "name": "list them with mcp_list_prompts"}


async def _pages(manager: McpManager, s: Server, what: str, attr: str,
                 fetch: Callable[[Any, str | None], Awaitable[Any]]) -> list[Any]:
    """Every page of a listing, up to a fixed number of pages (a server that never stops
    paginating cannot hang the call; the exit clamp bounds the text)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES):
        async def one(client: Any, cur: str | None = cursor) -> Any:  # this page's cursor, bound now
            return await fetch(client, cur)

        page = await manager.request(s, what, one)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if cursor is None:
            break
    return items


def _offers(s: Server, feature: str) -> bool:
    """Did the server declare this capability? Asking one that did not only earns an error."""
    try:
        return s.client is None or getattr(s.client.server_capabilities, feature, None) is not None
    except Exception:
        return True  # unknown: ask, and let the answer speak


@dataclass(frozen=True, kw_only=True)
class McpListResources(_Helper[ListParams]):
    name: ClassVar[str] = "mcp_list_resources"
    claude_names: ClassVar[tuple[str, ...]] = ("ListMcpResourcesTool",)
    description: ClassVar[str] = (
        "List the resources (readable data such as files or records) that connected MCP servers offer: "
        "one line each with server, URI, name, MIME type and description, plus URI templates. "
        "Read one with mcp_read_resource. Pass `server` to list only that server."
    )
    params: ClassVar[type[Params]] = ListParams

    async def run(self, args: ListParams, ctx: ToolContext, attempt: Attempt) -> str:

        def line(r: Any) -> str:
            mime = f" [{r.mime_type}]" if r.mime_type else ""
            return f"{r.uri}  {r.name}{mime}" + (f" — {r.description}" if r.description else "")

        async def templates(s: Server) -> list[str]:
            try:
                tpl = await self.manager.request(s, self.name, lambda c: c.list_resource_templates())
            except ToolError:
                return []  # templates are optional; the resources are the answer
            return [f"{s.name}  template {t.uri_template}  {t.name}" for t in tpl.resource_templates]

        return await self._listing(args.server, "resources", lambda c, cursor: c.list_resources(cursor=cursor),
                                   line, templates)


@dataclass(frozen=True, kw_only=True)
class McpReadResource(_Helper[ReadResourceParams]):
    name: ClassVar[str] = "mcp_read_resource"
    claude_names: ClassVar[tuple[str, ...]] = ("ReadMcpResourceTool",)
    description: ClassVar[str] = (
        "Read one resource of an MCP server by URI (find URIs with mcp_list_resources). Returns its text; "
        "binary contents are described in a short note instead."
    )
    params: ClassVar[type[Params]] = ReadResourceParams

    def summary(self, args: ReadResourceParams) -> str:
        return f"{args.server} {args.uri}"

    async def run(self, args: ReadResourceParams, ctx: ToolContext, attempt: Attempt) -> str:
        s = self.manager.server(args.server)
        res = await self.manager.request(s, "mcp_read_resource", lambda c: c.read_resource(args.uri))
        return "\n".join(resource_contents_text(c) for c in res.contents) or f"{args.uri} is empty"


@dataclass(frozen=True, kw_only=True)
class McpListPrompts(_Helper[ListParams]):
    name: ClassVar[str] = "mcp_list_prompts"
    description: ClassVar[str] = (
        "List the prompt templates that connected MCP servers offer, with their arguments (* = required) "
        "and descriptions. Fetch one with mcp_get_prompt. Pass `server` to list only that server."
    )
    params: ClassVar[type[Params]] = ListParams

    async def run(self, args: ListParams, ctx: ToolContext, attempt: Attempt) -> str:

        def line(p: Any) -> str:
            names = ", ".join(a.name + ("*" if a.required else "") for a in p.arguments or [])
            return f"{p.name}({names})" + (f" — {p.description}" if p.description else "")

        return await self._listing(args.server, "prompts", lambda c, cursor: c.list_prompts(cursor=cursor), line)


@dataclass(frozen=True, kw_only=True)
class McpGetPrompt(_Helper[GetPromptParams]):
    name: ClassVar[str] = "mcp_get_prompt"
    description: ClassVar[str] = (
        "Fetch a prompt template of an MCP server, filled with `arguments` (a map of strings); returns its "
        "messages as text. Find prompts and their arguments with mcp_list_prompts."
    )
    params: ClassVar[type[Params]] = GetPromptParams

    def summary(self, args: GetPromptParams) -> str:
        return f"{args.server} {args.name}"

    async def run(self, args: GetPromptParams, ctx: ToolContext, attempt: Attempt) -> str:
        s = self.manager.server(args.server)
        res = await self.manager.request(s, "mcp_get_prompt",
                                         lambda c: c.get_prompt(args.name, dict(args.arguments) or None))
        # the MCP SDK stays off importing this module (the pool and doctor name its tools)
        from mcp.types import AudioContent, EmbeddedResource, ImageContent, TextContent

        lines = [f"[description] {res.description}"] if res.description else []
        for m in res.messages:
            block = m.content
            if isinstance(block, TextContent):
                body = block.text
            elif isinstance(block, EmbeddedResource):
                body = resource_contents_text(block.resource)
            elif isinstance(block, (ImageContent, AudioContent)):
                body = _binary_note(block.type, block.mime_type, block.data)
            else:
                body = f"[{block.type} content; not shown]"
            lines.append(f"[{m.role}] {body}")
        return "\n".join(lines) or f"prompt {args.name} has no messages"
