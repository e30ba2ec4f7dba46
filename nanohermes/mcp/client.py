"""The MCP client: `McpManager` owns every configured server's connection. It starts them
concurrently under one startup timeout, keeps each one alive in its own task (the SDK's
client must be entered and left in the same task), and shuts them all down on `aclose()`,
leaving no process behind. A server that fails is reported in one line and the agent works on
without it.

What the client does for a server: roots (the workspace and `extra_write_roots`, as file
URIs; `roots/list_changed` when they change), a new tool list on `tools/list_changed` (the
pool is refreshed before the model's next call; resources and prompts are listed afresh on
every request anyway), elicitation (the person answers the server's form in the REPL; in `-p`
it is declined and the model reads a note), and sampling declined with an error saying so.
Tools that can only run as tasks (`execution.taskSupport: "required"`) are not listed: every
plain call of theirs would fail; `/mcp` names them.

A server that dies mid-session is reported to the person once, when it happens (a stdio
server through `stdio_transport`, which knows its process; an HTTP server when it refuses
connections), and the model reads it in the system prompt of its next call.
The servers' tools as the model sees them are `nanohermes.tools.mcp`'s; the `mcp` SDK is
imported only when a server is configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shlex
import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, TypeVar

from nanohermes.common.budget import Limits
from nanohermes.common.dirs import open_private, private_dir
from nanohermes.common.errors import ToolError
from nanohermes.common.events import ElicitationReply, ElicitationRequest
from nanohermes.config import McpServerConfig
from nanohermes.guard import programs
from nanohermes.guard.redact import RedactingPipe, configured_env, kept_env
from nanohermes.mcp.transports import describe_error, direct_address, refused, stdio_transport, watched_http

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

T = TypeVar("T")
Status = Literal["disabled", "starting", "connected", "failed", "stopped"]

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_NAME = 64  # what OpenAI-compatible endpoints accept for a function name
LIST_PAGES = 100  # pages of one listing: a paginating server that never ends cannot hang startup
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001


def tool_name(server: str, remote: str, taken: set[str]) -> str:
    """`mcp__<server>__<tool>`, made of the characters providers accept, at most 64 chars, unique."""
    base = f"mcp__{server}__{_NAME_OK.sub('_', remote)}"
    if len(base) > MAX_TOOL_NAME:
        base = base[: MAX_TOOL_NAME - 9] + "_" + hashlib.sha1(remote.encode()).hexdigest()[:8]
    name, n = base, 2
    while name in taken:
        suffix = f"_{n}"
        name, n = base[: MAX_TOOL_NAME - len(suffix)] + suffix, n + 1
    taken.add(name)
    return name


class ServerConfigProblem(Exception):
    """A server's config cannot be used as written (a variable it names is not set)."""


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


def expanded(cfg: McpServerConfig, environ: dict[str, str] | None = None) -> McpServerConfig:
    """`cfg` with `${VAR}` and `${VAR:-default}` replaced from the environment in command, args,
    env, cwd, url and headers, as Claude Code reads `.mcp.json`. A variable that is not set and
    has no default raises ServerConfigProblem naming it and the key that uses it."""

    env = os.environ if environ is None else environ

    def one(text: str, key: str) -> str:
        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            value = env.get(name)
            if value is not None and (value or default is None):
                return value
            if default is not None:
                return default
            raise ServerConfigProblem(f"${{{name}}} in `{key}` is not set and has no default; set {name} in the "
                                      f"environment, or write ${{{name}:-default}}")
        return _VAR.sub(sub, text)

    return replace(
        cfg, command=one(cfg.command, "command") if cfg.command is not None else None,
        args=[one(a, f"args[{i}]") for i, a in enumerate(cfg.args)],
        env={k: one(v, f"env.{k}") for k, v in cfg.env.items()},
        cwd=one(cfg.cwd, "cwd") if cfg.cwd is not None else None,
        url=one(cfg.url, "url") if cfg.url is not None else None,
        headers={k: one(v, f"headers.{k}") for k, v in cfg.headers.items()}, from_project=cfg.project_own)


@dataclass(frozen=True)
class RemoteTool:
    """One tool a server offers, under the name the model calls it by."""

    name: str  # mcp__<server>__<tool> (`tool_name`)
    remote: str  # the server's own name of it
    description: str  # the server's description, and whose tool it is
    schema: dict[str, Any]  # its arguments' JSON schema, as the server gives it
    read_only: bool  # the server is trusted and the tool declares readOnlyHint


@dataclass
class Server:
    """One configured server and the state of its connection."""

    name: str
    config: McpServerConfig
    status: Status = "starting"
    error: str = ""
    tools: list[RemoteTool] = field(default_factory=list)
    hidden: list[tuple[str, str]] = field(default_factory=list)  # (remote tool name, why it is not offered)
    client: Client | None = None
    live: McpServerConfig | None = None  # the config it was started with, variables expanded
    instructions: str | None = None
    log_path: Path | None = None
    lost: str = ""  # why it stopped during the session, in nanohermes's words (never its stderr)
    _log_start: int = 0
    _log: Any = None  # the redacting pipe its stderr goes through
    _calls: int = 0  # requests in flight
    _exit: str = ""  # how its process ended, held while a request in flight reports the loss
    _task: asyncio.Task[None] | None = None
    notes: list[str] = field(default_factory=list)  # what happened during its calls that the model should read
    _refresh: asyncio.Task[None] | None = None  # re-listing its tools after tools/list_changed
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def target(self) -> str:
        """How it is reached, as configured (`${VAR}` unexpanded: a token never shows here)."""
        c = self.config
        if c.url is not None:
            return f"{c.transport} {c.url}"
        return "stdio " + shlex.join([c.command or "", *c.args])

    def stderr_tail(self) -> str:
        """The last line the server wrote on stderr during this run, for error messages."""
        if self.log_path is None:
            return ""
        if self._log is not None:
            self._log.drain()
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                lines = [ln.strip() for ln in f.read()[-4096:].decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""


class McpManager:
    """Starts, serves and stops every configured MCP server."""

    def __init__(self, servers: dict[str, McpServerConfig], limits: Limits, *, workspace: Path,
                 log_dir: Path | None = None, disabled: dict[str, str] | None = None,
                 on_notice: Callable[[str], None] | None = None, roots: list[Path] | None = None,
                 elicit: Callable[[ElicitationRequest], Awaitable[ElicitationReply]] | None = None,
                 images_to_model: bool = False) -> None:
        self.limits = limits
        self.on_notice = on_notice  # tells the person (stderr, the REPL) what only the model would see
        self.on_info: Callable[[str], None] | None = None  # the same, for what is no reason to worry
        self.on_lost: Callable[[], None] | None = None  # a server was lost: what the model is told changed
        self.on_tools_changed: Callable[[], None] | None = None  # a server's tools changed: the pool is built anew
        self.workspace = workspace
        self.log_dir = log_dir
        self.roots = list(roots) if roots is not None else [workspace]
        self.elicit = elicit  # None: nobody to ask (-p), so a server's question is declined
        self.images_to_model = images_to_model
        self.servers: dict[str, Server] = {}
        for name, cfg in servers.items():
            s = Server(name, cfg)
            if disabled and name in disabled:
                s.status, s.error = "disabled", disabled[name]
            self.servers[name] = s
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> list[str]:
        """Connect every enabled server concurrently; returns one warning line per failure."""
        if self._started:
            return []
        self._started = True
        todo = [s for s in self.servers.values() if s.status == "starting"]
        if not todo:
            return []
        for s in todo:
            s._task = asyncio.create_task(self._run(s), name=f"mcp-{s.name}")
        timeout = self.limits.mcp_startup_timeout_secs
        waiters = [asyncio.create_task(s._ready.wait()) for s in todo]
        _, pending = await asyncio.wait(waiters, timeout=timeout)
        for w in pending:
            w.cancel()
        late = [s for s in todo if not s._ready.is_set()]
        for s in late:
            s.status = "failed"
            s.error = f"did not start within {timeout:g} s (limit mcp_startup_timeout_secs)"
            tail = s.stderr_tail()
            if tail:
                s.error += f"; its stderr ends with: {tail}"
        await asyncio.gather(*(self._stop_one(s) for s in late))
        return [f"MCP server {s.name} failed to start: {s.error}; continuing without it"
                for s in todo if s.status == "failed"]

    async def aclose(self) -> None:
        """Stop every server; bounded, and safe to call twice or while being cancelled."""
        await asyncio.gather(*(self._stop_one(s) for s in self.servers.values()), return_exceptions=True)

    async def _stop_one(self, s: Server) -> None:
        task = s._task
        if task is None or task.done():
            return
        if not s._ready.is_set():  # still connecting: nothing will look at the stop event
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return
        s._stop.set()
        try:
            # The SDK's stdio shutdown is itself bounded (close stdin, then SIGTERM, then SIGKILL
            # of the process group, about 5 s at worst); this is a net over it.
            await asyncio.wait_for(asyncio.shield(task), timeout=10)
        except Exception:  # it timed out, or the session task failed: either way it is gone
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self, s: Server) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await self._connect(s, stack)
                s.client = client
                s.instructions = getattr(client, "instructions", None)
                s.tools = await self._list_tools(s, client)
                s.status = "connected"
                s._ready.set()
                await self._serve(s)
        except asyncio.CancelledError:
            if s.status == "starting":
                s.status = "failed"
            raise
        except BaseException as e:  # the SDK reports failures as exception groups too
            if s.status == "connected":
                self.lost(s, describe_error(e))
            elif s.status == "starting":
                s.status = "failed"
                s.error = str(e) if isinstance(e, ServerConfigProblem) else describe_error(e)
                tail = s.stderr_tail()
                if tail and tail not in s.error:
                    s.error += f"; its stderr ends with: {tail}"
            if not isinstance(e, Exception):
                raise
        finally:
            s.client = None
            if s.status == "connected":
                s.status = "stopped"
            s._ready.set()

    async def _serve(self, s: Server) -> None:
        """Hold the connection until stopped. A stdio server's exit shows by itself (its output
        ends). A streamable HTTP server holds no stream open between requests, so an idle one
        is checked now and then: its port refusing connections marks it lost."""
        url = s.live.url if s.live is not None else None
        if url is None:
            await s._stop.wait()
            return
        every = self.limits.mcp_http_check_secs
        address = direct_address(url)
        while address is not None and s.status == "connected":
            try:
                await asyncio.wait_for(s._stop.wait(), timeout=every)
                return
            except TimeoutError:
                pass
            if (why := await refused(*address, timeout=max(every, 5.0))) is not None:
                self._unreachable(s, why)
        await s._stop.wait()

    def _exited(self, s: Server, why: str) -> None:
        """The server's process ended by itself: while idle this is the first sign of it; after a
        call saw the connection close, it adds how the process ended."""
        if s.status == "connected" and s._calls:
            s._exit = why  # the call sees the connection close and says so first; see `request`
        elif s.status == "connected":
            self.lost(s, why)
        elif s.status == "failed" and why not in s.error:
            s.error += f"; {why}"

    def _unreachable(self, s: Server, why: str) -> None:
        """An HTTP server could not even be connected to (by a request, or by the idle check
        in `_serve`): it went away."""
        if s.status == "connected":
            self.lost(s, f"the server stopped answering: {why}")

    def lost(self, s: Server, why: str) -> None:
        """A connected server stopped answering: mark it failed and say so once, to the person."""
        if s.status != "connected":
            return
        s.status = "failed"
        s.lost = why
        s.error = why
        tail = s.stderr_tail()
        if tail and tail not in s.error:
            s.error += f"; its stderr ends with: {tail}"
        if self.on_notice is not None:
            self.on_notice(f"MCP server {s.name} stopped ({s.error}); its tools are unavailable for the rest of "
                           f"this session (see /mcp, restart nanohermes to reconnect)")
        if self.on_lost is not None:
            self.on_lost()

    async def _connect(self, s: Server, stack: AsyncExitStack) -> Client:
        from mcp import Client  # heavy: only when a server is configured

        cfg = s.live = expanded(s.config)
        call_timeout = self.limits.mcp_call_timeout_secs
        transport: Any
        if cfg.url is not None:
            import httpx2  # the HTTP client the SDK's transports are written for

            def client(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                       auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
                # The SDK's own defaults: 30 s to connect or send, a long read for a held-open stream.
                return httpx2.AsyncClient(headers={**cfg.headers, **(headers or {})}, auth=auth,
                                          timeout=timeout or httpx2.Timeout(30.0, read=max(call_timeout, 300.0)),
                                          transport=watched_http(lambda why: self._unreachable(s, why)))

            if cfg.transport == "sse":
                # the MCP SDK (a few hundred ms): only a session with MCP servers
                from mcp.client.sse import sse_client

                transport = sse_client(cfg.url, timeout=30.0, sse_read_timeout=max(call_timeout, 300.0),
                                       httpx_client_factory=client)
            else:
                # the MCP SDK: only a session with MCP servers
                from mcp.client.streamable_http import streamable_http_client

                transport = streamable_http_client(cfg.url, http_client=await stack.enter_async_context(client()))
        else:
            transport = stdio_transport(self._stdio_params(cfg), self._errlog(s, stack),
                                        lambda why: self._exited(s, why))
        # The initialize handshake, as Claude Code speaks it: what servers implement today, and
        # what carries roots, elicitation, sampling and list_changed as requests and notifications.
        # No read timeout of the SDK's: it would bound the handshake too, which the startup
        # timeout bounds; each request is bounded in `request`.
        return await stack.enter_async_context(Client(
            transport, mode="legacy", list_roots_callback=self._list_roots,
            elicitation_callback=lambda _, params: self._elicitation(s, params),
            sampling_callback=lambda _, params: self._sampling(s), message_handler=lambda m: self._message(s, m)))

    # -- what a server asks of the client -------------------------------------------------------
    async def _list_roots(self, context: Any) -> Any:
        """The folders the server may work in: the workspace and extra_write_roots."""
        import mcp_types
        from pydantic import FileUrl

        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=FileUrl(p.resolve().as_uri()), name=p.name or str(p))
                                                for p in self.roots])

    async def set_roots(self, roots: list[Path]) -> None:
        """New roots: every connected server is told (`roots/list_changed`) and asks again."""

        self.roots = list(roots)
        for s in self.servers.values():
            if s.status == "connected" and s.client is not None:
                with warnings.catch_warnings(), contextlib.suppress(Exception):
                    warnings.simplefilter("ignore")  # deprecated by the 2026 protocol; the servers before it use it
                    await s.client.send_roots_list_changed()

    async def _elicitation(self, s: Server, params: Any) -> Any:
        """A server asks the person for input: the REPL asks them; with nobody to ask, the
        answer is no, and the model reads that it was asked."""
        # the MCP SDK: only a session with MCP servers
        import mcp_types

        url = str(getattr(params, "url", "") or "")
        request = ElicitationRequest(server=s.name, message=str(params.message), url=url,
                                     schema=dict(getattr(params, "requested_schema", None) or {}))
        asked = json.dumps(request.message[:300], ensure_ascii=False)
        if self.elicit is None:
            s.notes.append(f"[MCP server {s.name} asked the person for input ({asked}); nanohermes declined, as "
                           f"nobody is there to answer in this run. If you need that input, ask for it in your answer.]")
            return mcp_types.ElicitResult(action="decline")
        reply = await self.elicit(request)
        if reply.action != "accept":
            s.notes.append(f"[MCP server {s.name} asked the person for input ({asked}); they "
                           f"{'declined' if reply.action == 'decline' else 'cancelled'}.]")
        return mcp_types.ElicitResult(action=reply.action, content=reply.content if reply.action == "accept" else None)

    async def _sampling(self, s: Server) -> Any:
        # the MCP SDK: only a session with MCP servers
        import mcp_types

        s.notes.append(f"[MCP server {s.name} asked to use the model (sampling); nanohermes declined.]")
        return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST,
                                   message="nanohermes declines sampling: an MCP server may not use its model; "
                                           "the tool has to work without it")

    async def _message(self, s: Server, message: Any) -> None:
        """Notifications: a new tool list is fetched at once (resources and prompts are listed
        afresh on every request, so their changes need nothing)."""
        # the MCP SDK: only a session with MCP servers
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification) and s.status == "connected":
            if s._refresh is None or s._refresh.done():
                s._refresh = asyncio.get_running_loop().create_task(self._relist(s), name=f"mcp-{s.name}-tools")

    async def _relist(self, s: Server) -> None:
        client = s.client
        if client is None:
            return
        try:
            tools = await asyncio.wait_for(self._list_tools(s, client), self.limits.mcp_call_timeout_secs)
        except Exception as e:
            if self.on_notice is not None:
                self.on_notice(f"MCP server {s.name} changed its tools, but listing them failed "
                               f"({describe_error(e)}); its old tools stay")
            return
        before = {t.name for t in s.tools}
        s.tools = tools
        if self.on_tools_changed is not None:
            self.on_tools_changed()
        if self.on_info is not None:
            now = {t.name for t in tools}
            change = "; ".join(x for x in (f"new: {', '.join(sorted(now - before))}" if now - before else "",
                                             f"gone: {', '.join(sorted(before - now))}" if before - now else "") if x)
            self.on_info(f"MCP server {s.name} now offers {len(tools)} tools" + (f" ({change})" if change else ""))

    async def settle(self, s: Server) -> None:
        """Wait for a new tool list the server announced during a call that just returned, so
        the model's next call sees it. The notification came before the call's result and was
        handed to a task of its own: a few turns of the loop let that task begin."""
        for _ in range(3):
            await asyncio.sleep(0)
        if s._refresh is not None and not s._refresh.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(s._refresh)

    def _stdio_params(self, cfg: McpServerConfig) -> StdioServerParameters:
        """How to start a stdio server: `~` expanded; where it runs and what it finds by name
        as `programs.person_start` says (the workspace only for a trusted project's own server)."""
        # the MCP SDK: only a session with MCP servers
        from mcp.client.stdio import StdioServerParameters, get_default_environment

        # The SDK starts a server with a few safe variables (PATH, HOME, ...) and the `env`
        # its config names; nanohermes adds only what shell_env.keep lets children have.
        cwd, env = programs.person_start({**get_default_environment(), **kept_env()}, {**configured_env(), **cfg.env},
                                         cwd=cfg.cwd, workspace=self.workspace, project_own=cfg.project_own)
        # The SDK adds its own default variables under these: PATH among them, which must not win.
        return StdioServerParameters(command=os.path.expanduser(cfg.command or ""), args=list(cfg.args), env=env,
                                     cwd=cwd)

    def _errlog(self, s: Server, stack: AsyncExitStack) -> Any:
        """A server's stderr goes to its own log file, never over the user's terminal."""
        f: IO[Any]
        if self.log_dir is None:
            f = open(os.devnull, "w")
        else:
            private_dir(self.log_dir)
            s.log_path = self.log_dir / f"{s.name}.log"
            try:
                big = s.log_path.stat().st_size > self.limits.mcp_log_max_bytes
            except OSError:
                big = False
            f = open_private(s.log_path, "w" if big else "a")  # 0600: a server may log anything
            f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {s.target}\n")
            f.flush()
            s._log_start = f.tell()

            # The server writes into a pipe copied into the log through redaction: no key
            # it prints reaches the file.
            s._log = RedactingPipe(f)
            stack.callback(s._log.close)
            return s._log.writer
        stack.callback(f.close)
        return f

    async def _list_tools(self, s: Server, client: Client) -> list[RemoteTool]:
        remote: list[Any] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            remote.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        taken: set[str] = set()
        out: list[RemoteTool] = []
        s.hidden = []
        for t in remote:
            execution = getattr(t, "execution", None)
            if execution is not None and getattr(execution, "task_support", None) == "required":
                s.hidden.append((t.name, "runs only as a task (taskSupport required), which nanohermes does not do"))
                continue
            annotations = getattr(t, "annotations", None)
            read_only = bool(s.config.trusted and annotations is not None and annotations.read_only_hint)
            desc = (t.description or "").strip() or f"The {t.name} tool"
            out.append(RemoteTool(name=tool_name(s.name, t.name, taken), remote=t.name,
                                  description=f"{desc}\n(MCP tool `{t.name}` of server {s.name})",
                                  schema=dict(t.input_schema or {}), read_only=read_only))
        return sorted(out, key=lambda t: t.name)

    # -- what the agent sees ------------------------------------------------------------------
    def status_lines(self) -> list[str]:
        """For `/mcp`: each server's status, tool count and error."""
        if not self.servers:
            return ["no MCP servers configured (config key mcp.servers)"]
        lines = []
        for s in self.servers.values():
            line = f"{s.name}: {s.status}, {len(s.tools)} tools ({s.target})"
            if s.error:
                line += f" — {s.error}"
            lines.append(line)
            lines.extend(f"  {remote}: not offered, {why}" for remote, why in s.hidden)
        return lines

    def instructions(self) -> str:
        """The connected servers' `instructions`, each bounded, as a system-prompt section, and
        a note for each server lost during the session (the model may not call its tools again
        before it reads this, and a call would only fail)."""
        cap = self.limits.mcp_instructions_chars
        parts: list[str] = []
        for s in self.servers.values():
            if s.lost:  # the reason only: the server's own stderr does not belong in the system prompt
                parts.append(f"## MCP server {s.name}\nThis server stopped during the session ({s.lost}). Its tools "
                             f"(mcp__{s.name}__*) now fail at once: do not call them; work without them, and tell the "
                             f"person if the task needs them.")
                continue
            text = (s.instructions or "").strip()
            if s.status != "connected" or not text:
                continue
            if len(text) > cap:
                text = (text[:cap] + f"\n[instructions of MCP server {s.name} cut to {cap} of {len(text)} chars "
                        f"(limit mcp_instructions_chars)]")
            parts.append(f"## MCP server {s.name}\n{text}")
        return "# MCP servers\n\n" + "\n\n".join(parts) if parts else ""

    # -- calls ----------------------------------------------------------------------------------
    def server(self, name: str) -> Server:
        s = self.servers.get(name)
        if s is None:
            raise ToolError(f"unknown MCP server `{name}`; configured: {', '.join(self.servers) or 'none'}")
        if s.status == "disabled":
            raise ToolError(f"MCP server {name} is disabled ({s.error})")
        if s.status != "connected" or s.client is None:
            why = f": {s.error}" if s.error else ""
            raise ToolError(f"MCP server {name} is not connected ({s.status}{why}); fix its config (see /mcp) "
                            f"and restart nanohermes, or work without it")
        return s

    async def request(self, s: Server, what: str, fn: Callable[[Client], Awaitable[T]]) -> T:
        """Run one request against a server, turning the SDK's failures into ToolErrors."""
        # the MCP SDK: only a session with MCP servers
        from mcp import MCPError

        client = s.client
        if client is None:  # `server()` hands out connected servers only; one may drop in between
            raise ToolError(f"MCP server {s.name} is not connected ({s.status}); see /mcp")
        s._calls += 1
        timeout = self.limits.mcp_call_timeout_secs
        try:
            return await asyncio.wait_for(fn(client), timeout)
        except TimeoutError:
            raise ToolError(f"{what} timed out after {timeout:g} s (limit mcp_call_timeout_secs); "
                            f"try a smaller request") from None
        except MCPError as e:
            if e.code == _REQUEST_TIMEOUT:
                raise ToolError(f"{what} timed out after {self.limits.mcp_call_timeout_secs:g} s "
                                f"(limit mcp_call_timeout_secs); try a smaller request") from None
            if e.code == _CONNECTION_CLOSED:
                self.lost(s, "the connection closed (the server exited or dropped it)")
                raise ToolError(f"{what} failed: MCP server {s.name} closed the connection; it is not available "
                                f"for the rest of this session (restart nanohermes to reconnect)") from None
            raise ToolError(f"{what} failed: MCP server {s.name} answered error {e.code}: {e.message}") from None
        except ToolError:
            raise
        except Exception as e:
            raise ToolError(f"{what} failed: {describe_error(e)}") from None
        finally:
            s._calls -= 1
            if s._exit and not s._calls:  # the process ended while this ran: now it is told
                why, s._exit = s._exit, ""
                self._exited(s, why)
