"""`nanohermes doctor`: checks the set-up, one line per check with a fix hint.

Each check is a small async function returning `Check`s; `CHECKS` is the ordered list, so a
component that brings something to check (a search backend, MCP servers) appends its own.
The run exits non-zero when any check fails; warnings do not fail it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nanohermes.common.dirs import config_home, data_home, private_dir, state_home
from nanohermes.common.errors import AuthError, ConfigError, EndpointError
from nanohermes.common.messages import Message
from nanohermes.config import HOOK_EVENTS, Config, Loaded, load_config
from nanohermes.guard import programs
from nanohermes.guard.gate import writable_roots
from nanohermes.guard.redact import protect, redact
from nanohermes.guard.sandbox import probe
from nanohermes.hooks.hooks import Hooks, missing_program, unmatched
from nanohermes.llm import check_base_url, client_for
from nanohermes.llm.connect import scheme_mismatch
from nanohermes.llm.failures import printable
from nanohermes.llm.http import import_httpx
from nanohermes.llm.quirks import Hint, entries
from nanohermes.mcp.client import McpManager
from nanohermes.tools.catalog import builtin_pool
from nanohermes.tools.mcp import McpGetPrompt, McpListPrompts, McpListResources, McpReadResource
from nanohermes.tools.search.ripgrep import find_ripgrep, skipped_ripgrep
from nanohermes.tools.skills import SkillTool
from nanohermes.tools.subagents import AgentListTool, SubagentTool

if TYPE_CHECKING:
    import httpx

    from nanohermes.llm import LLM, OpenAIChat, OpenAIResponses
    from nanohermes.tools import Tool

Status = Literal["ok", "warn", "fail", "skip"]  # skip: could not run because a check it needs failed


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def line(self) -> str:
        mark = {"ok": "[ok]  ", "warn": "[warn]", "fail": "[FAIL]", "skip": "[skip]"}[self.status]
        text = f"{mark} {self.name}: {self.detail}"
        return text + (f"\n       fix: {self.hint}" if self.hint and self.status in ("warn", "fail") else "")


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

    def __post_init__(self) -> None:
        # git and ripgrep are checked where a session would find them: outside what it may write.
        programs.settle(writable_roots(self.workspace, self.config))


CheckFn = Callable[[Setup], Awaitable[list[Check]]]


async def check_config(s: Setup) -> list[Check]:
    if s.loaded is None:
        return [Check("config", "fail", s.config_error, "fix the file named above (config.example.json lists every key)")]
    files = ", ".join(str(p) for p in s.loaded.files) or "no config files (defaults, environment and flags only)"
    out = [Check("config", "ok", files)]
    # An unknown key's fix is its spelling; any other warning names its own fix.
    out += [Check("config", "warn", w, "rename each to the key it means (or remove it); config.example.json lists "
                                       "every key" if "unknown config keys" in w else "") for w in s.loaded.warnings]
    return out


def key_fix(s: Setup) -> str:
    """How to change the key nanohermes sends, where it takes it from: setting the variable
    does nothing while a config file or --api-key gives a key (it wins)."""
    cfg, loaded = s.config, s.loaded
    source = loaded.key_source if loaded is not None else "none"
    if source == "--api-key":
        return "the key given with --api-key was used: pass a valid one"
    if source in ("user", "project"):
        where = loaded.user_file if source == "user" and loaded is not None else "the project's config file"
        return f"the key is api_key in {where}, which wins over ${cfg.api_key_env}: fix or remove it there"
    return f"set a valid key in ${cfg.api_key_env} (or pass --api-key)"


# Why a model answers the tool probe in text, by server: each needs a start-up flag or a model
# whose chat template knows tools (the quirk table's `hint.*` entries, in its order).
_SERVERS = [h for _, h in entries(Hint)]
TOOL_HINTS = {h.server: h.text for h in _SERVERS}
# The endpoint's checks, always each listed once and in this order, whatever failed: one that
# cannot run because an earlier one failed is shown as skipped, with the reason.
ENDPOINT_CHECKS = ("endpoint", "model", "api key", "chat", "tool calls")


def _server_kind(cfg: Config, owners: set[str], server_header: str) -> str | None:
    """Which local server this is, from the /models owners, the Server header or the port."""
    text = " ".join(owners | {server_header}).lower()
    return next((h.server for h in _SERVERS if any(w in text for w in h.names) or owners & set(h.owners)
                 or (h.port is not None and f":{h.port}" in cfg.base_url)), None)


def _wire(cfg: Config) -> OpenAIChat | OpenAIResponses:
    """The session's model client, from the same factory, for a quick check: no retries, and
    at most a minute per request."""

    return client_for(cfg, timeout=min(cfg.request_timeout, 60.0), max_retries=0)


class _Found:
    """The endpoint's checks as they are decided; `listed` gives them all, in order, each once."""

    def __init__(self) -> None:
        self.by_name: dict[str, Check] = {}
        self.now = "endpoint"  # the check being decided: the one a crash is told on

    def set(self, name: str, status: Status, detail: str, hint: str = "") -> None:
        self.by_name[name] = Check(name, status, detail, hint)

    def skip(self, why: str, *names: str) -> None:
        """Mark as skipped those of `names` not decided yet."""
        for name in names:
            self.by_name.setdefault(name, Check(name, "skip", f"skipped: {why}"))

    def listed(self) -> list[Check]:
        return [self.by_name[n] for n in ENDPOINT_CHECKS if n in self.by_name]


async def check_endpoint(s: Setup) -> list[Check]:
    """Reachable, key accepted by chat itself (not only by /models), model listed, a streamed
    answer, and a real tool call in it. Every one of them is listed whatever happens: what
    cannot be checked says so as skipped, and a crash of the check is itself a finding."""
    found = _Found()
    try:
        await _endpoint_checks(s, found)
    except Exception as e:  # a broken check is a finding; the lines after it still show
        missing = [n for n in ENDPOINT_CHECKS if n not in found.by_name]
        if missing:
            found.set(found.now if found.now in missing else missing[0], "fail",
                      f"the check crashed: {type(e).__name__}: {e}")
        found.skip("the endpoint check crashed", *ENDPOINT_CHECKS)
    return found.listed()


async def _endpoint_checks(s: Setup, found: _Found) -> None:
    if s.loaded is None:  # the endpoint, key and model it names are unknown: nothing is sent anywhere
        found.skip("the config did not load", *ENDPOINT_CHECKS)
        return
    cfg = s.config
    try:
        check_base_url(cfg.base_url)
    except ConfigError as e:
        found.set("endpoint", "fail", e.message, e.hint)
        found.skip("base_url is not a usable URL", *ENDPOINT_CHECKS)
        return
    key = cfg.resolved_api_key()
    no_key = f"no key set (${cfg.api_key_env} is empty, no api_key in config)"
    if not key:
        found.set("api key", "warn", no_key,
                  f"export {cfg.api_key_env}=... unless the endpoint needs no key (Ollama, llama.cpp)")
    httpx = import_httpx()
    llm = _wire(cfg)
    try:
        try:
            response = await llm.client().get(llm.url("/models"))
        except (httpx.TimeoutException, httpx.TransportError) as e:
            # As -p names it: no connection, a hang-up, nothing in time, or a TLS mix-up (with the URL to use).
            failed = await scheme_mismatch(cfg.base_url, e) or llm.transport_failure(e, started=False).final
            found.set("endpoint", "fail", failed.message.replace("the model endpoint at ", ""), failed.hint)
            found.skip("the endpoint is not reachable", *ENDPOINT_CHECKS)
            return
        status = response.status_code
        if status in (401, 403):
            found.set("endpoint", "ok", f"{cfg.base_url} answers")
            found.set("api key", "fail", f"refused ({status})" + ("" if key else f"; {no_key}"),
                      key_fix(s) if key else f"export {cfg.api_key_env}=... (or pass --api-key)")
            found.skip("the key was refused", *ENDPOINT_CHECKS)
            return
        listed, owners = _read_models(cfg, found, response)
        found.now = "model"
        s.models = listed
        if listed is not None:
            if cfg.model in listed:
                found.set("model", "ok", f"{cfg.model} is listed")
            else:
                shown = ", ".join(listed[:15]) + (" …" if len(listed) > 15 else "")
                found.set("model", "fail", f"{cfg.model} is not among the {len(listed)} listed models: {shown}",
                          "set model in config, --model or NANOHERMES_MODEL to a listed one")
        found.now = "chat"
        try:
            checks = await _probe(cfg, llm, _server_kind(cfg, owners, response.headers.get("server", "")), bool(key))
        except AuthError as e:
            found.set("api key", "fail", f"chat refused it: {e.message}" + ("" if key else f"; {no_key}"),
                      key_fix(s) if key else f"export {cfg.api_key_env}=... (or pass --api-key)")
            found.skip("chat refused the key", "chat", "tool calls")
            return
        for c in checks:
            found.by_name[c.name] = c
    finally:
        await llm.aclose()


def _read_models(cfg: Config, found: _Found, response: httpx.Response) -> tuple[list[str] | None, set[str]]:
    """The endpoint line from the /models answer, and the listed ids and owners (None when the
    answer lists none: the model line is then skipped with the reason)."""

    status = response.status_code
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if 300 <= status < 400:  # not followed, as no request of a session is
        where = printable(response.headers.get("location", "another address"), 200)
        found.set("endpoint", "warn", f"{cfg.base_url} answers, but listing models was redirected ({status}) to {where}",
                  "set base_url to the address the API really answers at")
        found.skip(f"listing models was redirected ({status})", "model")
        return None, set()
    if status >= 400:
        found.set("endpoint", "warn", f"{cfg.base_url} answers, but listing models gave {status}",
                  "the server failed on /models: check its health or logs" if status >= 500 else
                  "fine if the endpoint has no /models route; otherwise check base_url (it usually ends in /v1)")
        found.skip(f"listing models gave {status}", "model")
        return None, set()
    try:
        body = json.loads(response.content)  # bytes: a leading byte order mark is allowed
    except ValueError:
        what = "an HTML page" if ctype == "text/html" or response.content.lstrip().startswith(b"<") else "not JSON"
        found.set("endpoint", "warn", f"{cfg.base_url} answers, but its model list is {what}",
                  "check base_url: it usually ends in /v1")
        found.skip(f"the model list is {what}", "model")
        return None, set()
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        found.set("endpoint", "warn", f'{cfg.base_url} answers, but its model list has no "data" list',
                  "check base_url: it usually ends in /v1")
        found.skip('the model list has no "data" list', "model")
        return None, set()
    found.set("endpoint", "ok", f"{cfg.base_url} answers")
    entries = [m for m in data if isinstance(m, dict)]
    return sorted(str(m.get("id")) for m in entries), {str(m.get("owned_by") or "") for m in entries}


PROBE_TOOL = {
    "type": "function",
    "function": {"name": "probe", "description": "Reports that tool calls work.",
                 "parameters": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
}


async def _probe(cfg: Config, llm: LLM, server: str | None, keyed: bool) -> list[Check]:
    """One streamed chat request with the key and a tool spec, as a session sends them: is
    the key accepted by chat, does streaming work, and does the model really call the tool?"""
    pieces: list[str] = []
    try:
        done = await llm.complete([Message.user("Call the probe tool with ok=true. Do not answer in text.")],
                                  [PROBE_TOOL], pieces.append)
    except AuthError:
        raise
    except EndpointError as e:
        # A refused key is an AuthError (401, 403, a key-shaped 400); any other failure came
        # before the endpoint said anything about the key, so its line is skipped, not dropped.
        key = [Check("api key", "skip", "skipped: the chat probe failed before the key could be judged")] if keyed else []
        return [*key, Check("chat", "fail", f"the probe request failed: {e.message}", e.hint or "check the endpoint's health"),
                Check("tool calls", "skip", "skipped: chat failed")]
    out = [Check("api key", "ok", "accepted by chat")] if keyed else []
    out.append(Check("chat", "ok", f"streamed an answer ({cfg.wire_api} wire)"))
    called = [c.name for c in done.message.tool_calls]
    if "probe" in called:
        out.append(Check("tool calls", "ok", "the model called the probe tool"))
        return out
    said = (done.message.content or "").strip().replace("\n", " ")[:80]
    detail = (f"the model answered in text instead of calling the probe tool ({said!r})" if said and not called
              else f"the model called {', '.join(called)!r}, not the probe tool" if called
              else "the model answered without a tool call")
    hints = [TOOL_HINTS[server]] if server else [f"{name}: {hint}" for name, hint in TOOL_HINTS.items()]
    out.append(Check("tool calls", "fail", detail, "; ".join(hints) + "; or pick a model trained for tool calls"))
    return out


async def check_git(s: Setup) -> list[Check]:
    git = programs.find("git")
    if git is None:
        if passed := programs.skipped("git"):
            return [Check("git", "fail", _inside_only("git", passed), "install git system-wide (apt-get install git, "
                                                                       "brew install git)")]
        return [Check("git", "fail", "git is not on PATH", "install git (apt-get install git, brew install git)")]
    version = await asyncio.to_thread(subprocess.run, [git, "--version"], capture_output=True, text=True)
    return [Check("git", "ok", version.stdout.strip())]


def _inside_only(name: str, passed: list[tuple[str, str]]) -> str:
    """Why a program that exists is not run: it lies where commands may write."""
    program, root = passed[0]
    return (f"{program} is not run: it lies inside {root}, which commands may write, so nanohermes does not start "
            f"it for itself (a command could have replaced it), and found no {name} elsewhere on PATH")


INSTALL_RG = "apt-get install ripgrep, brew install ripgrep, or a release from github.com/BurntSushi/ripgrep"


async def check_ripgrep(s: Setup) -> list[Check]:
    rg = find_ripgrep()
    if rg is None:
        if passed := skipped_ripgrep():
            return [Check("ripgrep", "warn", _inside_only("rg", passed) + "; grep and glob use the slower pure-Python "
                                                                         "backend",
                          f"install ripgrep system-wide ({INSTALL_RG}), or run a nanohermes installed outside this "
                          "folder (pipx install or uv tool install: see the README), which brings its own rg")]
        return [Check("ripgrep", "warn", "no rg binary found; grep and glob use the slower pure-Python backend",
                      f"install ripgrep ({INSTALL_RG})")]
    version = await asyncio.to_thread(subprocess.run, [rg, "--version"], capture_output=True, text=True)
    first = version.stdout.splitlines()[0] if version.returncode == 0 and version.stdout else ""
    if not first:
        return [Check("ripgrep", "warn", f"{rg} does not run ({version.stderr.strip()[:100]}); using pure Python",
                      f"replace {rg} with a working ripgrep ({INSTALL_RG})")]
    return [Check("ripgrep", "ok", f"{first} ({rg})")]


async def check_dirs(s: Setup) -> list[Check]:
    out: list[Check] = []
    for label, folder in (("config dir", config_home()), ("data dir", data_home()), ("state dir", state_home())):
        try:
            private_dir(folder)  # 0700, as nanohermes creates it everywhere else
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
                pass
            out.append(Check(label, "ok", f"{folder} is writable"))
        except OSError as e:
            out.append(Check(label, "fail", f"{folder} is not writable ({e.strerror})",
                             f"fix its permissions, or point XDG_{label.split()[0].upper()}_HOME elsewhere"))
    return out


async def check_sandbox(s: Setup) -> list[Check]:
    """One line for Landlock and one for namespaces, each saying what is weaker when missing."""
    if s.config.sandbox.mode == "off":
        return [Check("sandbox", "warn", "off (sandbox.mode or --sandbox off): commands that run without asking "
                                         "(--yes, goal mode) run with your full rights",
                      'drop --sandbox off, or set "sandbox": {"mode": "auto"} in the config file that turns it off')]
    avail = await asyncio.to_thread(probe)
    names = ("landlock", "namespaces")
    hints = (landlock_fix(avail.abi, avail.landlock_error), namespaces_fix())
    return [Check(f"sandbox {name}", "ok" if good else "warn", text, hint)
            for name, (good, text), hint in zip(names, avail.lines(), hints, strict=False)]


def landlock_fix(abi: int, error: str) -> str:
    """What gives commands their Landlock confinement here: a kernel that has it, one new
    enough for the parts missing, or a container that lets a process use it."""
    if not abi:
        return ("boot a Linux 5.13+ kernel with `landlock` in its LSM list (CONFIG_SECURITY_LANDLOCK, lsm=...,landlock); "
                "in a container, the host's kernel decides")
    if error:
        return ("the kernel has Landlock but a confined command could not start: a container's seccomp profile may "
                "block the landlock_* system calls; run the container with a profile that allows them")
    return ("a newer kernel: ABI 3 (truncation) came with Linux 6.2, ABI 4 (TCP) with 6.7, ABI 6 (signals and "
            "abstract sockets) with 6.12")


def namespaces_fix(sysctl: Path = Path("/proc/sys")) -> str:
    """What turns unprivileged user namespaces on here: the setting this kernel has that
    forbids them, else the container around nanohermes."""
    def value(name: str) -> str:
        try:
            return (sysctl / name).read_text().strip()
        except OSError:
            return ""

    if value("kernel/apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor forbids them (Ubuntu 23.10+): sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an "
                "AppArmor profile for nanohermes's Python that allows userns")
    if value("kernel/unprivileged_userns_clone") == "0":
        return "sysctl kernel.unprivileged_userns_clone=1"
    if value("user/max_user_namespaces") == "0":
        return "sysctl user.max_user_namespaces=15000 (it is 0)"
    return ("the kernel allows them, so what runs nanohermes forbids them (a container's seccomp profile blocks "
            "unshare and clone with CLONE_NEWUSER): run the container with a profile that allows them")


CHECKS: list[CheckFn] = [check_config, check_endpoint, check_ripgrep, check_git, check_dirs, check_sandbox]


async def check_mcp(s: Setup) -> list[Check]:
    """Start every configured MCP server as a session would, count its tools, and stop it."""
    servers = s.config.mcp.servers
    if not servers:
        return []
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
            # It may come from nanohermes's config or from Claude Code's files: both are named.
            out.append(Check(name, "fail", srv.error, f"check how it starts ({srv.target}) where it is configured: "
                                                      f"mcp.servers.{srv.name} in a config file, or mcpServers."
                                                      f"{srv.name} in .mcp.json{log}"))
        else:
            out.append(Check(name, "ok", f"{len(srv.tools)} tools ({srv.target})"))
    return out


CHECKS.append(check_mcp)


async def check_hooks(s: Setup) -> list[Check]:
    """Each configured hook's program exists (hooks themselves are not run)."""
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
    out += [Check("hook matcher", "warn", w, "fix the matcher (see /tools for the names)")
            for w in unmatched_matchers(s.config)]
    return out


def unmatched_matchers(config: Config) -> list[str]:
    """The tool matchers of the configured hooks that match no tool a session could offer: the
    built-ins, the conditional tools and the configured MCP servers' tools."""
    hooks = Hooks.from_config(config.hooks, Path("."), config.build_limits(), lambda e: None).hooks
    kinds: list[type[Tool]] = [SkillTool, SubagentTool, AgentListTool, McpListResources, McpReadResource,
                               McpListPrompts, McpGetPrompt]
    tools = {t.name: t.claude_names for t in builtin_pool()} | {k.name: k.claude_names for k in kinds}
    return unmatched(hooks, tools, tuple(config.mcp.servers))


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
    try:
        setup = Setup(workspace, load_config(workspace, config_file=config_file, flags=flags))
    except ConfigError as e:
        setup = Setup(workspace, None, config_error=e.message)
    protect(setup.loaded.config if setup.loaded else None)  # an endpoint's error text may quote the key
    if setup.loaded is not None:  # a base_url no request could use: say so before anything is sent

        try:
            check_base_url(setup.config.base_url)
        except ConfigError as e:
            print(redact(Check("endpoint", "fail", e.message, e.hint).line()), flush=True)
            return 2
    results = asyncio.run(run_checks(setup, lambda c: print(redact(c.line()), flush=True)))
    failed = [c for c in results if c.status == "fail"]
    warned = sum(c.status == "warn" for c in results)
    skipped = sum(c.status == "skip" for c in results)
    print(f"\n{len(results)} checks: {len(failed)} failed, {warned} warning{'' if warned == 1 else 's'}"
          + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


