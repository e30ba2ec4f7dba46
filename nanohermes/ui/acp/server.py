"""The agent side of the Agent Client Protocol: the methods an editor calls, on nanohermes sessions.

`Server` is what the SDK's `AgentSideConnection` dispatches to. Every ACP session is a
nanohermes session, built as the REPL builds one (`assemble.build_agent`, the same gate,
modes, sandbox and hooks) in the folder the editor names, with the editor's MCP servers
added as the person's own; its id is the saved session's, so `nanohermes --resume ID` takes
it up in a terminal, and `session/load` takes up a REPL's. A folder whose project config asks
for trust is asked about (as a permission request) before the first prompt runs. The JSON-RPC
errors: -32602 for params that are valid JSON but not usable here (a relative cwd, an unknown
mode), -32002 for a session this agent does not have, -32603 with the message and its hint
for a run-ending error (a bad config, an endpoint that refuses).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp import schema as s

import nanohermes.ui.acp.updates as updates
from nanohermes import __version__
from nanohermes.assemble import build_agent
from nanohermes.common.errors import NanohermesError, UsageError
from nanohermes.common.modes import Mode
from nanohermes.config import describe_ask, load_config
from nanohermes.guard import programs
from nanohermes.guard.gate import writable_roots
from nanohermes.guard.redact import protect, redact
from nanohermes.guard.trust import decline_trust, trust_declined, trust_folder
from nanohermes.llm.connect import check_base_url
from nanohermes.tools import todo_list
from nanohermes.tools.fileops import BUFFERS_KEY
from nanohermes.turn.session import find_session
from nanohermes.ui.acp.editor import ClientFiles, EditorUI, log
from nanohermes.ui.acp.prompts import Prompt, commands_of, prompt_input, run_prompt
from nanohermes.ui.acp.state import Live, Options, Trust
from nanohermes.ui.visible import escape_controls

if TYPE_CHECKING:
    from acp.agent.connection import AgentSideConnection

    from nanohermes.config import Config

PROTOCOL_VERSION = 1
GOAL_WARNING = ("goal mode: every call runs without asking (mode blocks and deny rules still apply); pick another "
                "mode to go back")
CLOSE_SECS = 10.0  # how long a session's close (MCP servers, tasks, hooks) may take at exit


def _error(e: BaseException) -> RequestError:
    """The JSON-RPC error of a run-ending error: its message, and the hint in `data`."""
    if isinstance(e, NanohermesError):
        return RequestError(-32603, redact(e.message), {"hint": e.hint} if e.hint else None)
    return RequestError(-32603, f"internal error: {type(e).__name__}: {redact(str(e))}",
                        {"hint": "run `nanohermes acp --verbose` for the traceback on stderr, and report it"})


def unknown_session(session_id: str) -> RequestError:
    return RequestError(-32002, f"unknown session {session_id!r}",
                        {"sessionId": session_id, "hint": "start one with session/new, or load a saved one"})


class Server:
    """The agent: initialize, session/new, session/load, session/prompt, session/cancel and
    session/set_mode (the SDK answers -32601 for any other method)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.conn: AgentSideConnection | None = None
        self.client = s.ClientCapabilities()
        self.sessions: dict[str, Live] = {}
        self.handling: set[asyncio.Task[Any]] = set()  # the requests being answered (but prompts)

    def _handling(self) -> None:
        """Count the calling request as in flight until it is answered (see `drain`)."""
        task = asyncio.current_task()
        if task is not None:
            self.handling.add(task)
            task.add_done_callback(self.handling.discard)

    async def drain(self) -> None:
        """The input ended: prompts are cancelled (and answer so), and every request already
        read is answered before the sessions close."""
        for live in self.sessions.values():
            if live.active is not None and not live.active.done():
                live.active.cancel()
        if self.handling:
            await asyncio.wait(set(self.handling), timeout=CLOSE_SECS)

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.conn = conn

    # -- initialize ----------------------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: s.ClientCapabilities | None = None,
                         client_info: s.Implementation | None = None, **kwargs: Any) -> s.InitializeResponse:
        self._handling()

        # A missing clientCapabilities means none: no fs, no terminal.
        self.client = client_capabilities or s.ClientCapabilities(
            fs=s.FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False)
        images = False
        with contextlib.suppress(Exception):  # a bad config is reported where it matters, at session/new
            images = (await asyncio.to_thread(self._config, self._home(), {})).images_to_model
        return s.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,  # the one version there is; a client's other one gets it too
            agent_capabilities=s.AgentCapabilities(
                load_session=self.options.save_session,
                prompt_capabilities=s.PromptCapabilities(image=images, audio=False, embedded_context=True),
                mcp_capabilities=s.McpCapabilities(http=True, sse=True)),
            agent_info=s.Implementation(name="nanohermes", title="nanohermes", version=__version__),
            auth_methods=[])

    def _home(self) -> Path:
        return (self.options.cwd or Path(os.getcwd())).expanduser().resolve()

    def _config(self, workspace: Path, mcp: dict[str, Any]) -> Config:
        return self._loaded(workspace, mcp)[0]

    def _loaded(self, workspace: Path, mcp: dict[str, Any]) -> tuple[Config, Any]:
        flags = dict(self.options.flags)
        if mcp:  # the editor's servers are the person's own, as a flag would give them
            flags["mcp"] = {**flags.get("mcp", {}), "servers": {**flags.get("mcp", {}).get("servers", {}), **mcp}}
        loaded = load_config(workspace, config_file=self.options.config_file, flags=flags)
        protect(loaded.config)
        check_base_url(loaded.config.base_url)
        return loaded.config, loaded

    # -- sessions ------------------------------------------------------------------------------
    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> s.NewSessionResponse:
        self._handling()
        live = await self._open(_workspace(cwd), mcp_config(mcp_servers or []), None)
        self._after_open(live)
        return s.NewSessionResponse(session_id=live.id, modes=updates.modes(live.built.agent.runtime.policy.mode))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> s.LoadSessionResponse:
        self._handling()
        if not self.options.save_session:
            raise RequestError(-32602, "sessions are not saved (--no-session), so none can be loaded",
                               {"hint": "start `nanohermes acp` without --no-session"})
        workspace = _workspace(cwd)
        if (open_one := self.sessions.pop(session_id, None)) is not None:
            await self._close(open_one)  # its transcript is taken up again below
        try:
            path = await asyncio.to_thread(find_session, workspace, session_id)
        except UsageError:
            raise unknown_session(session_id) from None
        if path.stem != session_id:  # a prefix names it in a terminal; the protocol names sessions whole
            raise unknown_session(session_id)
        live = await self._open(workspace, mcp_config(mcp_servers or []), path)
        tools = {t.name: t for t in live.built.agent.runtime.tools}
        for update in updates.replay(live.agent.session.history, tools, live.workspace):
            live.ui.send(update)

        if items := todo_list.current(live.agent.session.state):
            live.ui.send(updates.plan(items))
        await live.ui.flush()
        self._after_open(live)
        return s.LoadSessionResponse(modes=updates.modes(live.built.agent.runtime.policy.mode))

    async def _open(self, workspace: Path, mcp: dict[str, Any], resume: Path | None) -> Live:
        assert self.conn is not None
        try:
            config, loaded = await asyncio.to_thread(self._loaded, workspace, mcp)
        except NanohermesError as e:
            raise _error(e) from None
        ui = EditorUI(self.conn, "", workspace, self.client)
        try:
            built = await asyncio.to_thread(build_agent, config, workspace, ui, save_session=self.options.save_session,
                                            resume=resume, asks=True, idle_between_turns=True)
        except NanohermesError as e:
            raise _error(e) from None
        agent = built.agent
        # Several sessions, perhaps in several folders, share this process: the programs
        # nanohermes starts for itself are found outside every one's writable roots.
        programs.keep(writable_roots(workspace, config))
        ui.session_id = agent.session.id or f"unsaved-{uuid.uuid4().hex[:12]}"
        ui.tools = lambda: built.agent.runtime.tools
        ui.mode = lambda: built.agent.runtime.policy.mode
        ui.shown_mode = agent.runtime.policy.mode
        fs = self.client.fs
        if fs is not None and (fs.read_text_file or fs.write_text_file):
            agent.session.state[BUFFERS_KEY] = ClientFiles(self.conn, ui.session_id, asyncio.get_running_loop(),
                                                           read=bool(fs.read_text_file), write=bool(fs.write_text_file))
        ui.start()
        trust = None
        if loaded.asks and loaded.project_file is not None and loaded.user_file is not None \
                and not trust_declined(workspace, loaded.asks):
            trust = Trust(dict(loaded.asks), loaded.project_file, loaded.user_file)
        live = Live(ui.session_id, workspace, config, built, ui, mcp, trust)
        live.warnings = [*loaded.warnings, *built.warnings]
        if agent.runtime.policy.mode == Mode.GOAL:
            live.warnings.append(GOAL_WARNING)
        for w in live.warnings:
            log(f"warning: {w}")
        self.sessions[live.id] = live
        live.started = asyncio.get_running_loop().create_task(built.start())
        return live

    def _after_open(self, live: Live) -> None:
        """What the editor is told once it knows the session: its commands, and the warnings
        of reading its config (the REPL shows them as it starts)."""
        live.shown_commands = commands_of(live)
        live.ui.send(updates.commands(live.shown_commands))
        for w in live.warnings:
            live.ui.send(updates.message_chunk(f"> **warning:** {escape_controls(redact(w))}\n\n"))

    def _live(self, session_id: str) -> Live:
        live = self.sessions.get(session_id)
        if live is None:
            raise unknown_session(session_id)
        return live

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> s.SetSessionModeResponse:
        self._handling()
        live = self._live(session_id)
        try:
            mode = Mode(mode_id)
        except ValueError:
            raise RequestError(-32602, f"unknown mode {mode_id!r}", {"modes": [m.value for m in Mode]}) from None
        live.agent.runtime.set_mode(mode)
        live.chosen_mode = mode
        live.ui.check_mode()
        if mode == Mode.GOAL:
            live.ui.send(updates.message_chunk(f"> **warning:** {GOAL_WARNING}\n\n"))
        await live.ui.flush()
        return s.SetSessionModeResponse()

    # -- prompts -------------------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> s.PromptResponse:
        self._handling()
        live = self._live(session_id)
        running = live.active
        if running is not None and not running.done() and running.cancelling():
            # An editor sends the next prompt right after session/cancel: it runs once the
            # cancelled one has stopped (at once), as if the editor had waited for its answer.
            await asyncio.wait({running})
            live = self._live(session_id)
        if live.active is not None and not live.active.done():
            raise RequestError(-32600, "a prompt of this session is still running",
                               {"hint": "wait for its answer, or send session/cancel first"})
        read = prompt_input(prompt, live.config, live.workspace)
        task = live.active = asyncio.get_running_loop().create_task(self._answer(live, read))
        try:
            reason = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # this handler itself was cancelled: the connection is closing
            reason = "cancelled"
        except Exception as e:
            await live.ui.flush()
            raise _error(e) from None
        finally:
            live = self.sessions.get(session_id, live)  # trusting the folder built the session again
            if live.active is task:  # not a prompt sent after a cancel of this one
                live.active = None
        await live.ui.flush()
        if live.id in self.sessions:
            fresh = commands_of(live)
            if fresh != live.shown_commands:
                live.shown_commands = fresh
                live.ui.send(updates.commands(fresh))
        return s.PromptResponse(stop_reason=reason)

    async def _answer(self, live: Live, prompt: Prompt) -> str:
        await self._started(live)
        if live.trust is not None:
            live = await self._ask_trust(live)
        for note in prompt.notes:
            live.ui.send(updates.message_chunk(f"> {note}\n\n"))
        return await run_prompt(live, prompt)

    async def _started(self, live: Live) -> None:
        """MCP servers finish starting (their tools join the pool) before the first turn."""
        task, live.started = live.started, None
        if task is None:
            return
        await asyncio.wait({task})
        if not task.cancelled() and (err := task.exception()) is not None:
            log(f"the session start failed: {type(err).__name__}: {err}")

    async def _ask_trust(self, live: Live) -> Live:
        """The folder-trust question, before the first prompt: a yes saves the folder as
        trusted and builds the session again with the project's keys; a no is remembered
        until the project asks for something else; a cancel asks again next time."""
        trust = live.trust
        assert trust is not None
        listed = "\n".join(f"- {describe_ask(k, v)}" for k, v in list(trust.asks.items())[:20])
        more = f"\n- … and {len(trust.asks) - 20} more keys" if len(trust.asks) > 20 else ""
        body = (f"This folder's config ({trust.project_file}) asks for settings that apply only in a folder you "
                f"trust:\n{listed}{more}\n\nTrusting {live.workspace} lets them apply now and on later starts (saved "
                f"to trusted_projects in {trust.user_file}).")
        answer = await live.ui.ask_yes_no("Trust this folder?", body, "Trust this folder", "Continue without them",
                                          yes_kind="allow_always")  # a cancelled prompt asks again at the next one
        live.trust = None  # answered (a cancelled question: without them, asked again in a later session)
        if answer is False:
            await asyncio.to_thread(decline_trust, live.workspace, trust.asks)
        if not answer:
            return live
        await asyncio.to_thread(trust_folder, live.workspace, trust.user_file)
        return await self._rebuild(live)

    async def _rebuild(self, live: Live) -> Live:
        """The session built again on the config read again (now trusted), in the same
        conversation (the transcript is continued, so its id stays)."""
        path = live.agent.session.path
        resume = path if path is not None and path.exists() else None
        await self._close(live, keep_ui=True)
        fresh = await self._open(live.workspace, live.mcp, resume)
        if fresh.id != live.id:  # a conversation not saved yet got a new id: the editor keeps the one it has
            self.sessions.pop(fresh.id, None)
            fresh.id = fresh.ui.session_id = live.id
            transcript = fresh.agent.session.transcript
            if transcript is not None and path is not None:
                transcript.path = path  # nothing is written before the first message
            files = fresh.agent.session.state.get(BUFFERS_KEY)
            if isinstance(files, ClientFiles):
                files.session_id = live.id
            self.sessions[live.id] = fresh
        fresh.active = live.active  # the prompt that asked goes on in the new session (a cancel reaches it)
        await live.ui.aclose()
        if live.chosen_mode is not None:  # the person's own switch outranks any config, the project's too
            fresh.agent.runtime.set_mode(live.chosen_mode)
            fresh.chosen_mode = live.chosen_mode
        fresh.ui.shown_mode = live.ui.shown_mode
        fresh.ui.check_mode()  # the project's mode, now that it applies, unless the person chose one
        await self._started(fresh)
        return fresh

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.active is not None and not live.active.done():
            live.active.cancel()

    # -- closing -------------------------------------------------------------------------------
    async def _close(self, live: Live, *, keep_ui: bool = False) -> None:
        if live.active is not None and not live.active.done() and live.active is not asyncio.current_task():
            live.active.cancel()
            await asyncio.wait({live.active})
        if live.started is not None:
            live.started.cancel()
            await asyncio.wait({live.started})
        try:
            await asyncio.wait_for(live.built.aclose(), CLOSE_SECS)
        except Exception as e:  # a close that fails or hangs must not keep the others open
            log(f"closing session {live.id}: {type(e).__name__}: {e}")
        live.agent.session.close()
        if not keep_ui:
            await live.ui.aclose()

    async def aclose(self) -> None:
        """Close every session (their MCP servers, background tasks, sub-agents and hooks)."""
        sessions, self.sessions = list(self.sessions.values()), {}
        await asyncio.gather(*(self._close(live) for live in sessions), return_exceptions=True)


def _workspace(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute():
        raise RequestError(-32602, f"cwd must be an absolute path, not {cwd!r}", {"cwd": cwd})
    if not path.is_dir():
        raise RequestError(-32602, f"cwd {cwd!r} is not a folder", {"cwd": cwd})
    return path.resolve()


def mcp_config(servers: list[Any]) -> dict[str, Any]:
    """The editor's MCP servers in the config's shape (`mcp.servers`), by name."""
    out: dict[str, Any] = {}
    for server in servers:
        name = getattr(server, "name", "")
        if isinstance(server, s.McpServerStdio):
            out[name] = {"type": "stdio", "command": server.command, "args": list(server.args or []),
                         "env": {e.name: e.value for e in server.env or []}}
        elif isinstance(server, (s.HttpMcpServer, s.SseMcpServer, s.McpServerHttp, s.McpServerSse)):
            out[name] = {"type": "sse" if getattr(server, "type", "") == "sse" else "http", "url": server.url,
                         "headers": {h.name: h.value for h in server.headers or []}}
        else:
            raise RequestError(-32602, f"MCP server {name!r}: only stdio, http and sse servers are supported",
                               {"name": name})
    return out
