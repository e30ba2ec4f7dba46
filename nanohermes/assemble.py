"""Builds a ready Agent from a Config: the one place that wires llm, tools, policy and session.

Both front ends (the REPL and `-p`) and the tests call `build_agent`, so they cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from nanohermes.agent import Agent
from nanohermes.config import Config
from nanohermes.context import system_prompt
from nanohermes.events import UI, Notice
from nanohermes.llm import LLM, OpenAIChat
from nanohermes.permissions import Policy, Rule
from nanohermes.redact import protect as protect_secrets
from nanohermes.runtime import Runtime
from nanohermes.session import Transcript
from nanohermes.tools import Tool, build_tools


@dataclass
class Built:
    agent: Agent
    warnings: list[str] = field(default_factory=list)


def parse_rules(texts: list[str], where: str, warnings: list[str],
                origin: Callable[[str], str] | None = None) -> tuple[Rule, ...]:
    """Parse config rules; a malformed one is reported with its file and ignored."""
    rules: list[Rule] = []
    for text in texts:
        source = origin(text) if origin else ""
        try:
            rules.append(Rule.parse(text, origin=source))
        except ValueError as e:
            warnings.append(f"{source + ': ' if source else ''}{where}: {e}; rule ignored")
    return tuple(rules)


def build_policy(config: Config, warnings: list[str]) -> Policy:
    p = config.permissions
    return Policy(
        mode=config.permission_mode,
        auto_approve=config.auto_approve,
        allowed_tools=tuple(config.allowed_tools),
        disallowed_tools=tuple(config.disallowed_tools),
        allow=parse_rules(p.allow, "permissions.allow", warnings, lambda t: p.origin("allow", t)),
        ask=parse_rules(p.ask, "permissions.ask", warnings, lambda t: p.origin("ask", t)),
        deny=parse_rules(p.deny, "permissions.deny", warnings, lambda t: p.origin("deny", t)),
        secret_files=tuple(p.secret_files),
    )


def assemble_pool(builtins: list[Tool], *extra_groups: list[Tool]) -> list[Tool]:
    """Built-ins sorted by name, then each extra group in order; the first of a name wins."""
    pool: list[Tool] = []
    seen: set[str] = set()
    for tool in [*sorted(builtins, key=lambda t: t.name), *(t for g in extra_groups for t in g)]:
        if tool.name not in seen:
            seen.add(tool.name)
            pool.append(tool)
    return pool


def build_agent(config: Config, workspace: Path, ui: UI, *, llm: LLM | None = None, save_session: bool = True) -> Built:
    warnings: list[str] = []
    protect_secrets(config)
    limits = config.build_limits()
    if llm is None:
        llm = OpenAIChat(
            model=config.model, base_url=config.base_url, api_key=config.resolved_api_key(),
            timeout=config.request_timeout, max_retries=config.max_retries,
            on_notice=lambda text: ui.emit(Notice(level="warning", text=text)),
        )
    transcript = Transcript.create(workspace, model=config.model, mode=config.permission_mode) if save_session else None
    runtime = Runtime(
        tools=assemble_pool(build_tools(config, workspace)), config=config, workspace=workspace, ui=ui,
        policy=build_policy(config, warnings), limits=limits,
        session_dir=transcript.dir if transcript else None,
    )
    agent = Agent(llm=llm, runtime=runtime, ui=ui, system_prompt=system_prompt(workspace),
                  max_turns=config.max_turns, transcript=transcript)
    return Built(agent, warnings)
