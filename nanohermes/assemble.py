"""Builds a ready Agent from a Config: the one place that wires llm, tools, policy and session.

Both front ends (the REPL and `-p`) and the tests call `build_agent`, so they cannot drift.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanohermes.common.budget import Limits
from nanohermes.common.dirs import state_home
from nanohermes.common.events import UI, Notice
from nanohermes.config import HOOK_EVENTS, Config, McpServerConfig, SubagentConfig
from nanohermes.config.claude_files import translate_rule
from nanohermes.extensions.agent_files import discover_agents
from nanohermes.guard import procargs
from nanohermes.guard.ownreads import OwnReader
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.guard.redact import protect as protect_secrets
from nanohermes.guard.redact import set_child_env_policy
from nanohermes.guard.secrets import own_paths
from nanohermes.guard.trust import is_trusted
from nanohermes.llm import LLM, client_for
from nanohermes.llm.textcalls import TextCallCheck, last_thinking
from nanohermes.tools import Tool, declarations
from nanohermes.tools import skills as skill_tools
from nanohermes.tools.catalog import builtin_pool
from nanohermes.tools.registry import conventions as tool_conventions
from nanohermes.tools.registry import kept_state
from nanohermes.tools.search.walk import ignore_dir_names
from nanohermes.tools.skills import SkillSet
from nanohermes.turn.agent import Agent, TurnHooks
from nanohermes.turn.checkpoints import Checkpoints, Store, skipped_dirs
from nanohermes.turn.compact import Compactor
from nanohermes.turn.context import NestedDocs, ProjectDocs, context_lines, load_project_docs, system_prompt
from nanohermes.turn.runtime import AfterCall, Runtime, ToolConventions
from nanohermes.turn.session import Session
from nanohermes.turn.window import ContextBudget, budget_for

if TYPE_CHECKING:  # imported only when configured: most sessions use none of them
    from nanohermes.hooks.hooks import Hooks
    from nanohermes.mcp.client import McpManager
    from nanohermes.tools.subagents import Child, SubagentManager


@dataclass
class Built:
    """A ready agent and the components around it that live as long as the session.

    MCP servers start asynchronously, so a front end runs its session inside
    `async with built.session():` (or calls `start()` and `aclose()` itself): servers are
    connected and their tools join the pool before the first turn, and on the way out
    sub-agents are cancelled and servers shut down.
    """

    agent: Agent
    warnings: list[str] = field(default_factory=list)
    docs: ProjectDocs = field(default_factory=ProjectDocs)
    skills: SkillSet = field(default_factory=SkillSet)
    mcp: McpManager | None = None
    subagents: SubagentManager | None = None
    builtins: list[Tool] = field(default_factory=list)
    hooks: Hooks | None = None
    checkpoints: Checkpoints | None = None  # None: `checkpoints` is off
    resumed: bool = False
    llm_factory: Callable[..., LLM] | None = None  # where the agent's client came from
    # Take the first checkpoint snapshot in the background at start: worth it while a person
    # types the first prompt; a one-shot run's first turn would only wait for it and repeat it.
    warm_checkpoints: bool = True

    @property
    def budget(self) -> ContextBudget | None:
        """The context budget that follows the model's window."""
        return self.agent.compactor.budget if self.agent.compactor is not None else None

    def make_llm(self, model: str | None = None, **overrides: Any) -> LLM:
        """A model client of this session (`model`, default the configured one; `overrides`:
        wire settings such as a shorter timeout), from the factory the agent's came from."""
        if self.llm_factory is None:
            return self.agent.llm
        return self.llm_factory(model, **overrides)

    def pool(self) -> list[Tool]:
        """SPEC §2 order: built-ins by name, then skill, then MCP by name, then sub-agent tools."""
        children: list[Tool] = []
        if self.subagents is not None:
            # only a session with sub-agents loads their tools
            from nanohermes.tools import subagents as subagent_tools

            children = subagent_tools.tools(self.subagents)
        servers: list[Tool] = []
        if self.mcp is not None:
            # only a session with MCP servers loads their tools
            from nanohermes.tools import mcp as mcp_tools

            servers = mcp_tools.tools(self.mcp)
        return assemble_pool(self.builtins, skill_tools.tools(self.skills), servers, children)

    async def start(self) -> None:
        """Connect MCP servers and add their tools; each failure is one warning, never fatal.
        The model's context window is looked up meanwhile."""
        notices: list[str] = []
        if (budget := self.budget) is not None:
            budget.start(self.agent.llm.model)
        if self.checkpoints is not None and self.warm_checkpoints:
            self.checkpoints.start()
        await self._session_start("resume" if self.resumed else "startup")
        if self.mcp is not None:
            notices += await self.mcp.start()
            self.agent.set_prompt_part("mcp", self.mcp.instructions())
        self.agent.runtime.set_tools(self.pool())
        if self.subagents is not None:
            notices += self.subagents.check(self.agent.runtime.tools)
        for text in notices:
            self.agent.ui.emit(Notice(level="warning", text=text))

    async def _session_start(self, source: str) -> None:
        """The SessionStart hooks (`source`: startup, resume or clear); their context replaces
        what the last ones added to the system prompt."""
        if self.hooks is None:
            return
        extra = await self.hooks.session_start(source)
        self.agent.set_prompt_part("session-start", f"<session-start-context>\n{extra}\n</session-start-context>" if extra else "")

    async def clear(self) -> None:
        """`/clear`: a new conversation (the old one stays saved)."""
        agent = self.agent
        await self._switch(lambda: agent.session.clear(model=agent.llm.model, mode=agent.runtime.policy.mode),
                           end="clear", source="clear")

    async def resume(self, path: Path) -> list[str]:
        """`/resume` in a running session: continue the saved one at `path`; returns warnings."""
        warnings: list[str] = []
        await self._switch(lambda: warnings.extend(self.agent.session.resume(path)), end="resume", source="resume")
        return warnings

    async def _switch(self, swap: Callable[[], None], *, end: str, source: str) -> None:
        """The SessionEnd hooks (reason `end`) of the conversation that stops, `swap` to the
        next one, then its SessionStart hooks (`source`), as Claude Code fires them."""
        if self.hooks is not None:
            await self.hooks.session_end(end)
        swap()
        await self._session_start(source)

    async def aclose(self) -> None:
        """Run the SessionEnd hooks, cancel running sub-agents, kill background tasks, then shut
        every MCP server down."""
        try:
            if self.budget is not None:
                await self.budget.aclose()
            if self.checkpoints is not None:
                await self.checkpoints.aclose()
            if self.hooks is not None:
                await self.hooks.session_end("exit")
                self.hooks.close()
            if self.subagents is not None:
                await self.subagents.aclose()
        finally:
            try:
                await self.agent.runtime.close()
            finally:
                if self.mcp is not None:
                    await self.mcp.aclose()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Agent]:
        try:  # an interrupt during startup still stops what had started
            await self.start()
            yield self.agent
        finally:
            await self.aclose()

    def reload_instructions(self) -> None:
        """Read the instruction files and skills again (a person's yes let a file in) and
        rebuild the system prompt and the pool from them."""
        runtime = self.agent.runtime
        reader, ws, limits = runtime.own_reader, runtime.workspace, runtime.limits
        reader.unnamed.clear()  # what is still not read is said again by the new reading
        self.docs = load_project_docs(ws, limits.project_docs_chars, reader=reader)
        self.skills = skill_tools.discover_skills(ws, reader=reader)
        prompt = system_prompt(ws, docs=self.docs, skill_index=skill_tools.skill_index(self.skills, limits))
        self.agent.system_prompt = prompt
        configs = subagent_configs(runtime.config, ws, reader, [])  # what they warn of was said at start
        if self.subagents is not None:
            self.subagents.system_prompt = prompt
            self.subagents.configs = configs
        elif configs:
            self.subagents = subagent_manager(configs, self.make_llm, self.agent)
        runtime.set_tools(self.pool())

    def context_lines(self) -> list[str]:
        """For `/context`: the AGENTS.md files loaded and their sizes, the skills, the prompt size."""
        lines = context_lines(self.docs)
        lines.append(f"skills: {len(self.skills.skills)}" + (
            " (" + ", ".join(s.name for s in self.skills.skills) + ")" if self.skills.skills else ""))
        lines.append(f"system prompt: {len(self.agent.full_prompt())} chars")
        return lines

    def mcp_lines(self) -> list[str]:
        """For `/mcp`: each server's status, tool count and error."""
        if self.mcp is None:
            return ["no MCP servers configured (config key mcp.servers)"]
        return self.mcp.status_lines()


def preload_mcp_sdk() -> None:
    """Import the MCP SDK (a few hundred ms) in a thread while the rest of the session is
    built; the first connection then finds it loaded (Python's import lock makes it wait if not)."""

    def load() -> None:
        try:
            # the MCP SDK, in this thread: the point of the preload
            import mcp.client.stdio
            import mcp.client.streamable_http  # noqa: F401
        except Exception:
            pass  # the connection reports import problems itself

    threading.Thread(target=load, name="mcp-import", daemon=True).start()


def mcp_roots(config: Config, workspace: Path) -> list[Path]:
    """The folders MCP servers may work in (their roots): the workspace and extra_write_roots."""

    return [workspace, *(workspace / os.path.expanduser(r) for r in config.extra_write_roots)]


def disabled_servers(policy: Policy, servers: dict[str, McpServerConfig]) -> dict[str, str]:
    """Servers a bare rule removes whole (`mcp__<server>` in a deny rule or disallowed_tools):
    they are not even started."""
    out: dict[str, str] = {}
    for name in servers:
        prefix = f"mcp__{name}"
        if any(r.tool == prefix and r.pattern is None for r in policy.deny):
            out[name] = f"denied by rule {prefix}"
        elif prefix in policy.disallowed_tools:
            out[name] = "listed in disallowed_tools"
    return out


def parse_rules(texts: list[str], where: str, warnings: list[str],
                origin: Callable[[str], str] | None = None, workspace: Path | None = None) -> tuple[Rule, ...]:
    """Parse config rules; a malformed one (a pattern of the wrong shape for its built-in
    tool too) is reported with its file and ignored. `workspace`: the folder they are read
    for, whose files an absolute path pattern may name."""
    kinds = {name: kind for name, (kind, _) in declarations().items()}
    kind = where.rpartition(".")[2]  # allow, ask or deny
    root = os.path.realpath(workspace) if workspace is not None else ""
    rules: list[Rule] = []
    for text in texts:
        source = origin(text) if origin else ""
        # A rule in Claude Code's words (`Read(./secrets/**)`) is read as the rules it stands for here.
        ours = translate_rule(text, kind, Path(".")) if kind in ("allow", "ask", "deny") else None
        for one in ours or [text]:
            try:
                rules.append(Rule.parse(one, origin=source, kinds=kinds, root=root))
            except ValueError as e:
                warnings.append(f"{source + ': ' if source else ''}{where}: {e}; rule ignored")
    return tuple(rules)


def subagent_configs(config: Config, workspace: Path, reader: OwnReader, warnings: list[str]) -> dict[str, SubagentConfig]:
    """The sub-agents: the config's, then those of agent files (`agent_files`; a project's
    only in a trusted project); what the files warn of joins `warnings`."""
    found = discover_agents(workspace, reader, trusted=is_trusted(workspace, list(config.trusted_projects)),
                            taken=set(config.subagents))
    warnings += found.warnings
    return {**config.subagents, **found.configs}


def subagent_manager(configs: dict[str, SubagentConfig], make_llm: Callable[..., LLM], agent: Agent) -> SubagentManager:
    """The sub-agents of `agent`'s session: children of its runtime, counted in its meters."""
    # only a session with sub-agents loads them
    from nanohermes.llm.model_names import endpoint_lister
    from nanohermes.tools.subagents import SubagentManager

    runtime = agent.runtime
    return SubagentManager(configs=configs, make_llm=make_llm, ui=agent.ui, limits=runtime.config.build_limits(),
                           system_prompt=agent.system_prompt, max_turns=runtime.config.max_turns, parent=runtime,
                           build=child_factory(runtime),
                           count_usage=agent.count_usage,  # what children spend counts in the session
                           models=endpoint_lister(agent.llm))


def make_agent(config: Config, workspace: Path, llm: LLM, ui: UI, *, session: Session, tools: list[Tool],
               policy: Policy, limits: Limits, system_prompt: str, max_turns: int, hooks: Hooks | None = None,
               compact_hooks: Hooks | None = None, reader: OwnReader | None = None,
               after_calls: Sequence[AfterCall] = (), conventions: ToolConventions | None = None,
               turn_hooks: Sequence[TurnHooks] = (), window_of: str | None = None,
               look_up_window: bool = False) -> Agent:
    """The one wiring of an agent, the session's and each sub-agent's: the context budget of
    `window_of`'s window (None: the configured model's; `look_up_window`: the endpoint is asked
    for it now, else when the session starts), the runtime on `tools` under `policy`, the
    compactor (running `compact_hooks`' PreCompact), both given the limits the budget derives
    as the window becomes known, and the check of calls written as text, the first of the
    agent's `turn_hooks`."""
    budget = budget_for(config, limits, window_of)
    runtime = Runtime(tools=tools, config=config, workspace=workspace, ui=ui, policy=policy, limits=budget.limits(),
                      session=session, hooks=hooks, reader=reader, after_calls=list(after_calls),
                      conventions=conventions)
    compactor = Compactor(llm, budget.limits(), ui, compact_hooks, budget=budget)
    budget.users += [runtime, compactor]
    if look_up_window:
        budget.start(llm.model)
    # An answer holding a tool call written as text that cannot run goes back to the model first.
    # So is a reply whose only call is in its thinking, where calls never run.
    text_calls = TextCallCheck(runtime.specs, limits.text_call_retries,
                               lambda text: ui.emit(Notice(level="warning", text=text)),
                               reasoning=lambda: last_thinking(session.history), draft_retries=limits.reasoning_call_retries)
    return Agent(llm=llm, runtime=runtime, ui=ui, system_prompt=system_prompt, max_turns=max_turns,
                 compactor=compactor, turn_hooks=[text_calls, *turn_hooks])


def child_factory(parent: Runtime) -> Callable[[Child], Agent]:
    """How the sub-agents of `parent`'s session are built (`make_agent`, as the session's own
    agent): in a conversation of their own, under the parent's folder, keeping the same parts
    of the tool state, with the parent's PreToolUse/PostToolUse hooks, conventions and what
    joins a call's result (a subfolder's instruction files), and a budget of their own
    model's window."""
    def build(child: Child) -> Agent:
        session = Session(side_dir=child.side_dir, kept=parent.session.kept)
        return make_agent(parent.config, parent.workspace, child.llm, child.ui, session=session, tools=child.tools,
                          policy=child.policy, limits=child.limits, system_prompt=child.system_prompt,
                          max_turns=child.max_turns, hooks=parent.hooks,
                          after_calls=[a.for_session(session) for a in parent.after_calls],
                          conventions=parent.conventions, window_of=child.llm.model, look_up_window=True)

    return build


def build_policy(config: Config, warnings: list[str], workspace: Path | None = None) -> Policy:
    """The policy of a session in `workspace` (whose files an absolute path in a rule may name)."""
    p = config.permissions
    return Policy(
        mode=config.permission_mode,
        auto_approve=config.auto_approve,
        skip_permissions=config.dangerously_skip_permissions,
        allowed_tools=tuple(config.allowed_tools),
        disallowed_tools=tuple(config.disallowed_tools),
        allow=parse_rules(p.allow, "permissions.allow", warnings, lambda t: p.origin("allow", t), workspace),
        ask=parse_rules(p.ask, "permissions.ask", warnings, lambda t: p.origin("ask", t), workspace),
        deny=parse_rules(p.deny, "permissions.deny", warnings, lambda t: p.origin("deny", t), workspace),
        secret_files=tuple(p.secret_files),
        own_secrets=own_paths(),
        # Whether commands that run unasked are confined here: without Landlock and user
        # namespaces, or with the
        # sandbox turned off, the analysis would again be all that stands between the model
        # and the machine, so the permission layer lets far less run without asking. Probing
        # starts processes: it waits for the first command a decision weighs.
        sandboxed=False if config.sandbox.mode == "off" else _sandbox_confines,
    )


def _sandbox_confines() -> bool:
    from nanohermes.guard.sandbox import probe  # ctypes and the probe's processes, for commands only

    return probe().confines


@dataclass
class OwnReadsCheck:
    """A turn hook: before the prompt is sent, the files waiting for a person's yes are asked
    about (the instructions and skills are read again when one was allowed), and every file
    the reader did not read and nobody was told of yet is named, as a warning."""

    built: Built

    async def prompt_submitted(self, prompt: str) -> str | None:
        runtime = self.built.agent.runtime
        reader = runtime.own_reader
        if reader.pending and await reader.ask(runtime.confirm_own_read):
            await asyncio.to_thread(self.built.reload_instructions)
        for skipped in reader.take_unnamed():
            self.built.agent.ui.emit(Notice(level="warning", text=str(skipped)))
        return prompt

    async def stopping(self, answer: str) -> str | None:
        return None

    async def settled(self, changing: bool = False) -> None:
        return None

    async def ended(self) -> None:
        return None


def assemble_pool(builtins: list[Tool], *extra_groups: list[Tool]) -> list[Tool]:
    """Built-ins sorted by name, then each extra group in order; the first of a name wins."""
    pool: list[Tool] = []
    seen: set[str] = set()
    for tool in [*sorted(builtins, key=lambda t: t.name), *(t for g in extra_groups for t in g)]:
        if tool.name not in seen:
            seen.add(tool.name)
            pool.append(tool)
    return pool


def build_agent(config: Config, workspace: Path, ui: UI, *, llm: LLM | None = None, save_session: bool = True,
                resume: Path | None = None, asks: bool = False, idle_between_turns: bool = False) -> Built:
    """`resume`: a saved transcript to continue (its history, meters and todo list). `asks`: a
    person answers the approval prompts; `idle_between_turns`: a finished turn waits for them
    (both fire the Notification hooks)."""
    warnings: list[str] = []
    protect_secrets(config)
    # What spawned processes inherit: never the keys nanohermes itself reads.
    own_vars = ("OPENAI_API_KEY", config.api_key_env, config.web_search.brave_api_key_env,
                config.web_search.tavily_api_key_env)
    set_child_env_policy(own_vars=own_vars, keep=config.shell_env.keep, extra=config.env)
    # Nor may they read them where the kernel shows the environment nanohermes started with.
    procargs.hide_env_values(own_vars)
    limits = config.build_limits()
    session = Session.new(workspace, record=save_session and resume is None, kept=kept_state(), model=config.model,
                          mode=config.permission_mode)
    resumed = session.resume(resume) if resume is not None else []
    hooks = None
    if any(config.hooks.groups(e) for e in HOOK_EVENTS):
        # only a session with hooks configured loads them
        from nanohermes.hooks.hooks import Hooks, NotifyingUI

        # The mode when a hook runs: the runtime's, which Shift+Tab and /mode change.
        def session_tools() -> list[Tool]:  # what the transcript for hooks names calls by
            return runtime.tools

        def model() -> str:
            return agent.llm.model

        hooks = Hooks.from_config(config.hooks, workspace, limits, ui.emit, session=session,
                                  mode=lambda: runtime.policy.mode, tools=session_tools, model=model,
                                  entrypoint="cli" if idle_between_turns else "sdk-cli")
        warnings += hooks.problems()
        if asks or idle_between_turns:
            ui = NotifyingUI(ui, hooks, approvals=asks, idle=idle_between_turns)
    given = llm

    def make_llm(model: str | None = None, **overrides: Any) -> LLM:
        if given is not None:  # tests and embedders: one model for the agent, its sub-agents and labels
            return given
        overrides.setdefault("on_notice", lambda text: ui.emit(Notice(level="warning", text=text)))
        return client_for(config, model=model, **overrides)

    llm = make_llm()
    policy = build_policy(config, warnings, workspace)
    # What nanohermes reads into the prompt by itself goes through one reader, with the rules
    # in force (the runtime's, once it exists: a rule learned later counts).
    reader = OwnReader(workspace, policy=lambda: policy, limits=limits, asks=asks)
    docs = load_project_docs(workspace, limits.project_docs_chars, reader=reader)
    skills = skill_tools.discover_skills(workspace, reader=reader)
    warnings += skills.warnings
    prompt = system_prompt(workspace, docs=docs, skill_index=skill_tools.skill_index(skills, limits))
    mcp = None
    if config.mcp.servers:
        preload_mcp_sdk()
        # only a session with MCP servers loads the client
        from nanohermes.mcp.client import McpManager

        mcp = McpManager(config.mcp.servers, limits, workspace=workspace, log_dir=state_home() / "mcp",
                         disabled=disabled_servers(policy, config.mcp.servers),
                         on_notice=lambda text: ui.emit(Notice(level="warning", text=text)),
                         roots=mcp_roots(config, workspace),
                         elicit=getattr(ui, "elicit", None), images_to_model=config.images_to_model)
        mcp.on_info = lambda text: ui.emit(Notice(level="info", text=text))
    checkpoints = None
    if config.checkpoints:
        store = Store(workspace, limits, skipped_dirs(ignore_dir_names(config)), session=session.id)
        checkpoints = Checkpoints(session, store, ui.emit)
    # The session budget follows the model's context window (see `window`): the limits it
    # derives go to the runtime (the per-message aggregate) and the compactor.
    agent = make_agent(config, workspace, llm, ui, session=session, tools=[], policy=policy, limits=limits,
                       system_prompt=prompt, max_turns=config.max_turns, hooks=hooks, compact_hooks=hooks,
                       reader=reader, conventions=tool_conventions(),
                       turn_hooks=[h for h in (hooks, checkpoints) if h is not None])
    runtime = agent.runtime
    reader.policy = lambda: runtime.policy
    if mcp is not None:
        # The model learns of a server lost mid-session from its next call's system prompt,
        # even when it was not calling that server's tools.
        mcp.on_lost = lambda: agent.set_prompt_part("mcp", mcp.instructions())
    configs = subagent_configs(config, workspace, reader, warnings)
    subagents = subagent_manager(configs, make_llm, agent) if configs else None
    built = Built(agent, warnings + resumed, docs=docs, skills=skills, mcp=mcp, subagents=subagents,
                  builtins=builtin_pool(), hooks=hooks, checkpoints=checkpoints,
                  resumed=resume is not None, llm_factory=make_llm, warm_checkpoints=idle_between_turns)
    agent.turn_hooks.insert(0, OwnReadsCheck(built))
    # A subfolder's instruction files join the result of the first call working under it.
    runtime.after_calls.append(NestedDocs(workspace, reader, session, docs=lambda: built.docs,
                                          budget=lambda: runtime.limits.project_docs_chars,
                                          notify=lambda text: ui.emit(Notice(level="warning", text=text)),
                                          confirm=runtime.confirm_own_read))
    runtime.set_tools(built.pool())  # MCP tools join in start()
    if mcp is not None:  # a server that changes its tools (tools/list_changed): the pool follows
        mcp.on_tools_changed = lambda: runtime.set_tools(built.pool())
    return built
