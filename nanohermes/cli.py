"""Command line: the REPL by default, `-p` for one-shot runs, and the flags.

This is the only module that exits the process. Run-ending errors are caught here once and
shown as one line plus a hint (a traceback only with --verbose). Exit codes: 0 success,
1 endpoint or internal error (or a prompt a hook blocked), 2 usage or config error, 3 turn limit reached, 130 interrupted,
141 stdout closed by its reader (`| head`, quietly, as SIGPIPE ends other programs), 143 terminated (SIGTERM or
SIGHUP). However it ends, the session's background tasks are killed.
"""


import contextlib
import gc
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, Protocol, runtime_checkable

from nanohermes import __version__, argv
from nanohermes.common.controls import inert_json, inert_output
from nanohermes.common.errors import Cancelled, NanohermesError, OutputClosed, StreamBrokenError, UsageError
from nanohermes.common.exits import run_exit_callbacks
from nanohermes.common.modes import Wire
from nanohermes.guard import procargs

EXIT_OK, EXIT_ERROR, EXIT_TURNS, EXIT_INTERRUPTED = 0, 1, 3, 130  # 2, a usage error, is UsageError's exit_code
EXIT_TERMINATED = 143


def main() -> None:
    if procargs.given(sys.argv):  # `--api-key KEY`: out of what `ps` shows, before anything starts
        procargs.hide_secret_values()
    line = argv.read(sys.argv[1:])
    if (bad := line.bad_value()) is not None:
        _leave(_fail(_bad_value(bad), False))
    values = line.values()
    if values is not None and values["version"]:  # without typer, pydantic or httpx
        _print_version()
        return
    if sys.stdin.isatty() and sys.stdout.isatty() and line.opens_repl():
        _repl_first(line.argv, line.first_prompt, values)
    if values is not None:  # every option plain: typer has nothing to read or judge
        if values["prompt"] is not None:
            # A start-up only adds objects that live as long as the run (modules, classes, the
            # agent): the cyclic collector would scan them again and again while they load, for
            # nothing. It is switched back on when the turn begins (`_headless`).
            gc.disable()
        _leave(run(_launch(values, line.first_prompt)))
    _make_app(first_prompt=line.first_prompt)(args=line.argv, prog_name="nanohermes")


def run_line(args: list[str]) -> int:
    """Run a command line that opens no REPL (a `-p` run, a subcommand, --help) in this
    process, as `main` does but without leaving it, and return its exit status: for a program
    that embeds nanohermes, and for tests whose subject is the turn rather than the process.
    Its stdin must not be a terminal (that would open the REPL)."""

    line = argv.read(args)
    values = line.values()
    try:
        if (bad := line.bad_value()) is not None:
            return _fail(_bad_value(bad), False)
        if values is not None and not values["version"]:
            return run(_launch(values, line.first_prompt))
        try:
            _make_app(first_prompt=line.first_prompt)(args=line.argv, prog_name="nanohermes")
        except SystemExit as e:  # how typer's commands end
            return e.code if isinstance(e.code, int) else int(e.code is not None)
        return 0
    finally:
        run_exit_callbacks()  # what `_leave` runs: the run's process groups are killed
        gc.unfreeze()  # a -p run froze what it had built (`_headless`); this process goes on


def _bad_value(what: str) -> Exception:
    return UsageError(what, hint="`nanohermes --help` lists the options")


def _leave(code: int) -> NoReturn:
    """End a finished run without the interpreter's teardown, which collects every object of
    every loaded module and costs a one-shot run more CPU than its model call. The session is
    saved and closed by now; nanohermes's exit callbacks still run (they kill any process group
    a tool left behind), and a failure to flush the output ends with status 120, as the
    interpreter's own exit would."""

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be written
        code = 120
    run_exit_callbacks()
    os._exit(code)


def _print_version() -> None:
    print(f"nanohermes {__version__}")


class Launch(NamedTuple):  # not a dataclass: `dataclasses` would cost `--version` its inspect import
    """The root command's options, parsed and coerced."""

    prompt: str | None
    fmt: str
    flags: dict[str, Any]  # config keys set on the command line
    config_file: Path | None
    cwd: Path | None
    verbose: bool
    save_session: bool
    cont: bool
    resume: str | None
    first_prompt: str | None = None  # `nanohermes "fix it"`: the REPL starts with it
    partial: bool = False  # --include-partial-messages


def _launch(values: dict[str, Any], first_prompt: str | None = None) -> Launch:
    """The Launch of the root command's values (`argv.OPTIONS`' dests), read by typer or by
    `argv.read`."""
    return Launch(prompt=values["prompt"], fmt=values["output_format"],
                  flags=argv.config_flags(values), config_file=values["config"], cwd=values["cwd"],
                  verbose=values["verbose"], save_session=not values["no_session"], cont=values["continue_"],
                  resume=values["resume"], first_prompt=first_prompt, partial=values["include_partial_messages"])


def _fail(err: BaseException, verbose: bool) -> int:
    # redaction and its patterns: off the start of `--version`, --help and a usage error
    from nanohermes.guard.redact import redact

    if isinstance(err, Cancelled):  # the person cancelled a question: nothing went wrong
        return EXIT_OK
    if isinstance(err, OutputClosed):  # `| head` has what it wanted: nothing to say, and nowhere to say it
        return err.exit_code
    if isinstance(err, KeyboardInterrupt):
        sys.stderr.write("nanohermes: interrupted\n")
        return EXIT_INTERRUPTED
    if verbose:
        # only --verbose prints a traceback
        import traceback

        traceback.print_exception(err, file=sys.stderr)
    if isinstance(err, NanohermesError):
        sys.stderr.write(f"nanohermes: error: {redact(err.message)}\n")
        if err.hint:
            sys.stderr.write(f"hint: {err.hint}\n")
        return err.exit_code
    sys.stderr.write(f"nanohermes: internal error: {type(err).__name__}: {redact(str(err))}\n")
    sys.stderr.write("hint: run again with --verbose for the traceback, and report it\n")
    return EXIT_ERROR


def _make_app(launch: Callable[[Launch], int] | None = None, first_prompt: str | None = None) -> Any:
    """The typer app. `launch` receives the root command's options (default: `run`);
    `first_prompt` is the REPL's first message, taken from the words before typer ran."""
    # typer (with click): off the -p and REPL starts whose options the fast reader took
    import typer

    # Plain help (rich_markup_mode=None): the rich layout prints `<bool>` after every flag.
    app = typer.Typer(add_completion=False, invoke_without_command=True, no_args_is_help=False, rich_markup_mode=None,
                      context_settings={"help_option_names": ["-h", "--help"]}, pretty_exceptions_enable=False)

    def root(ctx: typer.Context, **values: Any) -> None:
        """nanohermes: a coding agent in your terminal, for any OpenAI-compatible endpoint.

        `nanohermes` opens the REPL; `nanohermes "fix the failing test"` opens it with that first
        message; `nanohermes -p "..."` runs one prompt and prints the answer.
        """
        if values["version"]:
            _print_version()
            raise typer.Exit(0)
        if ctx.invoked_subcommand is not None:
            ctx.obj = {"cwd": values["cwd"], "values": values}
            return
        raise typer.Exit((launch or run)(_launch(values, first_prompt)))

    app.callback()(_with_options(root, typer))

    @app.command()
    def doctor(
        model: str | None = typer.Option(None, "--model", "-m", help="Model to check."),
        base_url: str | None = typer.Option(None, "--base-url", help="Endpoint to check."),
        api_key: str | None = typer.Option(None, "--api-key", help="API key to check."),
        wire_api: Wire | None = typer.Option(None, "--wire-api", help="The endpoint's API to check: chat or responses."),
        config: Path | None = typer.Option(None, "--config", help="Config file to use instead of the user config."),
        cwd: Path | None = typer.Option(None, "-C", "--cwd", help="Workspace directory."),
    ) -> None:
        """Check the set-up: config, endpoint, key, model, streaming and tools, git, folders."""
        # `nanohermes doctor` alone loads its checks
        from nanohermes.doctor import doctor as run_doctor

        with inert_output(stdout=True):  # a server's or a config file's words drive no terminal
            try:
                code = run_doctor(_workspace(cwd), config_file=config,
                                  flags={"model": model, "base_url": base_url, "api_key": api_key,
                                         "wire_api": wire_api})
            except Exception as e:
                code = _fail(e, False)
        raise typer.Exit(code)

    def acp(ctx: typer.Context, **values: Any) -> None:
        """Serve the Agent Client Protocol on stdin and stdout: editors (Zed, JetBrains, Neovim,
        Emacs) drive nanohermes through it. Takes the REPL's options; see docs/editors.md."""
        _leave(acp_command(values, (ctx.obj or {}).get("values")))

    app.command("acp")(_with_options(acp, typer, only=ACP_OPTIONS))

    @app.command("sessions")
    def sessions_cmd(
        ctx: typer.Context,
        cwd: Path | None = typer.Option(None, "-C", "--cwd", help="Workspace directory (default: the current one)."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per session."),
    ) -> None:
        """List this workspace's saved sessions, the most recent first."""
        raise typer.Exit(list_sessions_command(cwd or (ctx.obj or {}).get("cwd"), as_json))

    return app


def _with_options(root: Callable[..., None], typer: Any, only: tuple[str, ...] | None = None) -> Callable[..., None]:
    """`root` with a signature typer reads as the root command's options: `argv.OPTIONS`, in
    their order (a flag is false by default and shows no metavar; an option not given is None);
    `only`: those of these dests."""
    # with typer: only a command line the fast reader leaves to it
    import inspect

    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    for opt in argv.OPTIONS:
        if only is not None and opt.dest not in only:
            continue
        kind = opt.kind if opt.flag or opt.default is not None else opt.kind | None
        info = typer.Option(False if opt.flag else opt.default, *opt.names, help=opt.help, min=opt.min,
                            metavar="" if opt.flag else None)
        params.append(inspect.Parameter(opt.dest, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind))
    root.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # typer reads it through inspect
    root.__annotations__ = {p.name: p.annotation for p in params}
    return root


# The REPL's options that `nanohermes acp` takes (the editor starts its sessions, so no
# --continue or --resume; no -p and its output options).
ACP_OPTIONS = ("model", "base_url", "api_key", "mode", "yes", "dangerously_skip_permissions", "sandbox", "config", "cwd",
               "max_turns", "wire_api", "reasoning_effort", "no_session", "verbose")


def acp_command(values: dict[str, Any], before: dict[str, Any] | None = None) -> int:
    """`nanohermes acp`: its options (those given before `acp` too, which its own override),
    then the protocol on stdin and stdout until stdin closes."""
    given = {k: v for k, v in (before or {}).items() if k in ACP_OPTIONS and v not in (None, False)}
    given.update({k: v for k, v in values.items() if v not in (None, False)})
    full: dict[str, Any] = {opt.dest: False if opt.flag else opt.default for opt in argv.OPTIONS}
    full.update(given)
    try:
        workspace = _workspace(full["cwd"])
        # `nanohermes acp` alone loads the ACP server
        from nanohermes.ui.acp import Options, serve
    except Exception as e:
        return _fail(e, full["verbose"])
    try:
        return serve(Options(flags=argv.config_flags(full), config_file=full["config"], cwd=workspace,
                             save_session=not full["no_session"], verbose=full["verbose"]))
    except (KeyboardInterrupt, Exception) as e:
        return _fail(e, full["verbose"])


def list_sessions_command(cwd: Path | None, as_json: bool) -> int:
    with inert_output(stdout=not as_json):  # a title is a prompt as typed, escapes included
        try:
            # `nanohermes sessions`: the sessions' modules stay off every other start
            from nanohermes.turn.session import list_sessions
            from nanohermes.ui.sessions import format_sessions

            sessions = list_sessions(_workspace(cwd))
            if as_json:
                for i in sessions:
                    print(inert_json(json.dumps({"id": i.id, "title": i.title, "started": i.started,
                                                 "updated": i.updated, "turns": i.turns, "model": i.model,
                                                 "path": str(i.path)}, ensure_ascii=False)))
            else:
                print(format_sessions(sessions))
            return EXIT_OK
        except Exception as e:
            return _fail(e, False)


def _resume_target(workspace: Path, cont: bool, resume: str | None, save_session: bool) -> Path | None:
    """The transcript `--continue` or `--resume [ID]` names, if any."""
    # the sessions' module: off the start of `--version`, --help and a usage error
    from nanohermes.turn.session import find_session, latest_session, list_sessions

    if not cont and resume is None:
        return None
    if cont and resume is not None:
        raise UsageError("--continue and --resume cannot be used together",
                         hint="--continue takes the latest session; --resume ID a given one")
    if not save_session:
        raise UsageError("--no-session cannot be combined with --continue or --resume", hint="drop --no-session to resume")
    if cont:
        return latest_session(workspace)
    if resume:
        return find_session(workspace, resume)
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError("--resume without an ID needs a terminal to pick a session",
                         hint="pass an ID (`nanohermes sessions` lists them) or use --continue for the latest")
    # the picker (rich) only for --resume without an ID
    from nanohermes.ui.sessions import pick_session

    sessions = list_sessions(workspace)
    if not sessions:
        latest_session(workspace)  # raises the "no saved session" error with its hint
    picked = pick_session(sessions, sys.stdin, sys.stderr)
    if picked is None:
        raise Cancelled("no session picked")
    return picked.path


def _workspace(cwd: Path | None) -> Path:
    ws = (cwd or Path(os.getcwd())).expanduser().resolve()
    if not ws.is_dir():
        raise UsageError(f"workspace {ws} is not a directory", hint="pass an existing directory to -C/--cwd")
    return ws


@runtime_checkable
class _Formatted(Protocol):
    """typer's usage errors (its own copy of click's): they say what was wrong."""

    def format_message(self) -> str: ...


def _repl_first(args: list[str], first: str | None = None, values: dict[str, Any] | None = None) -> NoReturn:
    """The REPL with its prompt drawn first: reading the flags (typer's, unless `values` has
    them read already) and loading the config run behind it, and an error there is reported as
    it would have been before the REPL."""
    parsed: list[Launch] = [] if values is None else [_launch(values)]

    def keep(launch: Launch) -> int:
        parsed.append(launch)
        return EXIT_OK

    def start() -> Any:
        try:
            if not parsed:
                _make_app(keep)(args=args, prog_name="nanohermes", standalone_mode=False)
        except Exception as e:
            if isinstance(e, _Formatted):  # typer's usage error: a bad value
                raise UsageError(e.format_message(), hint="`nanohermes --help` lists the options") from None
            raise
        return _repl_start(parsed[0])

    with inert_output(stdout=False):  # the resume picker's titles, an error quoting a file (the REPL draws stdout)
        try:
            _interactive(start, first)
        except (KeyboardInterrupt, Exception) as e:
            code = _fail(e, bool(parsed) and parsed[0].verbose)
    sys.exit(code)


def _prepare(launch: Launch, warn: Callable[[str], None],
             loaded_to: Callable[[Any], None] = lambda loaded: None) -> tuple[Any, Path, Path | None]:
    """The validated config, the workspace and the transcript to resume (None for a new
    session); raises the run-ending errors (bad config, unknown session)."""
    # the configuration: off the start of `--version`, --help and a usage error
    from nanohermes.config import load_config
    from nanohermes.guard.redact import protect

    workspace = _workspace(launch.cwd)
    loaded = load_config(workspace, config_file=launch.config_file, flags=launch.flags)
    protect(loaded.config)  # before anything can print a key
    # the model wire: off the start of `--version`, --help and a usage error
    from nanohermes.llm.connect import check_base_url

    check_base_url(loaded.config.base_url)  # a URL no request could use ends the run now (exit 2)
    for w in loaded.warnings:
        warn(w)
    loaded_to(loaded)
    return loaded.config, workspace, _resume_target(workspace, launch.cont, launch.resume, launch.save_session)


def _repl_start(launch: Launch) -> Any:
    """The REPL's Start: the config, and the folder-trust question when the project asks for
    trust keys the person has not answered yet (`-p` never asks: it warns and ignores them)."""
    # the REPL's modules (rich, prompt_toolkit): off the -p start
    from nanohermes.guard.trust import trust_declined
    from nanohermes.ui.repl import Start
    from nanohermes.ui.trust import TrustQuestion

    warnings: list[str] = []
    box: list[Any] = []
    config, workspace, resume = _prepare(launch, warnings.append, box.append)
    loaded = box[0]
    trust = None
    if loaded.asks and loaded.project_file is not None and loaded.user_file is not None \
            and not trust_declined(workspace, loaded.asks):
        # Read again once trusted, on the session already chosen (a picker is not shown twice).
        again = launch._replace(cont=False, resume=resume.stem if resume is not None else None)
        trust = TrustQuestion(workspace=workspace, project_file=loaded.project_file, user_file=loaded.user_file,
                              asks=dict(loaded.asks), reload=lambda: _repl_start(again))
    return Start(config, workspace, save_session=launch.save_session, resume=resume, warnings=tuple(warnings),
                 trust=trust, config_files=tuple(loaded.files))


def _warn(text: str) -> None:
    sys.stderr.write(f"nanohermes: warning: {text}\n")


def run(launch: Launch) -> int:
    # What this run writes for people shows control sequences escaped (stderr always; stdout's
    # answer on a terminal); the REPL's console escapes what it draws itself.
    repl = launch.prompt is None and sys.stdin.isatty()
    with inert_output(stdout=not repl and launch.fmt == "text"):
        return _run(launch)


def _run(launch: Launch) -> int:
    try:
        prompt = launch.prompt
        if prompt is None and sys.stdin.isatty():
            start = _repl_start(launch)  # its warnings are shown in the REPL
            _interactive(lambda: start, launch.first_prompt)
        if launch.partial and launch.fmt != "stream-json":
            raise UsageError("--include-partial-messages needs --output-format stream-json",
                             hint="add --output-format stream-json, or leave the option out")
        box: list[Any] = []
        config, workspace, resume_path = _prepare(launch, _warn, box.append)
        if prompt is None:
            if launch.first_prompt is not None:
                raise UsageError("a prompt without -p opens the REPL, which needs a terminal",
                                 hint=f'run it on a terminal, or use -p "{launch.first_prompt[:40]}" in scripts')
            prompt = ""
        if prompt == argv.STDIN:  # `-p -` or a bare `-p`: the whole prompt comes on stdin
            if sys.stdin.isatty():
                sys.stderr.write("nanohermes: reading the prompt from the terminal; end it with Ctrl-D\n")
            prompt = sys.stdin.read()
        elif not sys.stdin.isatty():
            piped = sys.stdin.read()
            if piped.strip():
                prompt = f"{prompt}\n\n{piped}" if prompt.strip() else piped
        if not prompt.strip():
            raise UsageError("the prompt is empty", hint='pass one with -p "...", or pipe it: echo "..." | nanohermes -p')
        return _headless(prompt, launch.fmt, config, workspace, launch.verbose, launch.save_session, resume_path,
                         partial=launch.partial, key_source=box[0].key_source)
    except (KeyboardInterrupt, Exception) as e:  # the single place run-ending errors are reported
        return _fail(e, launch.verbose)


def _interactive(start: Callable[[], Any], first: str | None = None) -> NoReturn:
    # the REPL's modules (rich, prompt_toolkit): off the -p start
    from nanohermes.ui.repl import run_repl

    code = run_repl(start, first)
    if code == EXIT_TERMINATED:
        with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
            sys.stderr.write("nanohermes: terminated\n")
    # Everything is saved and closed by now. Leaving here skips the interpreter's teardown
    # (most of a second with the SDK loaded) and cannot hang on a tool thread stuck in a
    # blocking call.
    _leave(code)


def _headless(prompt: str, fmt: str, config: Any, workspace: Path, verbose: bool, save_session: bool,
              resume: Path | None = None, *, partial: bool = False, key_source: str = "none") -> int:
    # the agent's wiring: off `--version`'s start; -p's output: off the REPL's
    from nanohermes.assemble import build_agent
    from nanohermes.ui.headless import make_sink

    ui = make_sink(fmt, verbose=verbose, interactive=sys.stdin.isatty() and sys.stderr.isatty(), partial=partial)
    ui.guard_secs = config.build_limits().approval_guard_secs
    built = build_agent(config, workspace, ui, save_session=save_session, resume=resume, asks=ui.interactive)
    for w in built.warnings:
        sys.stderr.write(f"nanohermes: warning: {w}\n")
    agent = built.agent
    session_id = agent.session.id or None

    import asyncio  # here, not at the top: `--version` must not pay for it

    def started(a: Any) -> None:
        servers = [{"name": s.name, "status": s.status} for s in built.mcp.servers.values()] if built.mcp else []
        ui.init_event(session_id=session_id, model=config.model, mode=a.runtime.policy.mode,
                      tools=[t.name for t in a.runtime.visible_tools()], workspace=str(workspace), mcp_servers=servers,
                      api_key_source=key_source)

    def finish(result: str, reason: str, error: str | None = None) -> None:
        """The one way a run ends: its result object (json, stream-json), with the meters."""
        if not ui.reports:  # text: the answer alone, already written
            return
        # the meters: off the start of `--version`, --help and a usage error
        from nanohermes.turn.meters import context_breakdown, cost_report

        meters = {"cost": cost_report(ui.meter.turn_by_model, agent.session.usage_by_model, config, config.model),
                  "context": context_breakdown(agent)}
        # A session that is not kept has no id to go back to (`--resume` would not find it).
        ui.finish(ui.result_object(result=result, exit_reason=reason, session_id=session_id if keeps() else None,
                                   model=config.model, error=error, extra=meters))

    failed = False  # by a run-ending error, or a prompt a hook blocked
    began = False  # the endpoint began to answer before it failed (its stream broke off)

    def keeps() -> bool:
        """A new session whose run failed before the model answered (endpoint down, a refused
        key, a blocked prompt) holds nothing to go back to: it is not kept, so --continue
        finds the last real one. One whose answer broke off is kept: its hint is --continue."""
        return began or not (failed and resume is None and not any(m.role == "assistant"
                                                                   for m in agent.session.history))
    try:
        gc.freeze()  # what the start-up built stays; later collections skip it
        gc.enable()
        result = asyncio.run(_one_turn(built, prompt, started, report_window=fmt != "text"))
    except asyncio.CancelledError:  # SIGTERM or SIGHUP, turned into a clean exit
        finish("", "interrupted")
        sys.stderr.write("nanohermes: terminated\n")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        finish("", "interrupted")
        sys.stderr.write("nanohermes: interrupted\n")
        return EXIT_INTERRUPTED
    except NanohermesError as e:
        failed, began = True, isinstance(e, StreamBrokenError)
        finish("", "error", e.message)
        raise
    else:
        failed = result.reason == "error"
    finally:
        agent.session.close(keep=keeps())
    # A turn that ends in "error" never reached the model (a UserPromptSubmit hook blocked
    # the prompt): the run failed, and a script must see that (exit 1, is_error true).
    error = None
    if result.reason == "error":
        error = (built.hooks.blocked if built.hooks is not None else "") or "the prompt was not sent"
    finish(result.text, result.reason, error)
    if error is not None:
        return EXIT_ERROR
    return EXIT_TURNS if result.reason == "max_turns" else EXIT_OK


def _repl_command(name: str) -> Any:
    """The REPL's command `name`, for `-p` to refuse or run a `/name` prompt."""
    from nanohermes.ui.commands import (
        repl_command,  # only for a prompt starting with `/`: a plain -p turn loads no REPL command
    )

    return repl_command(name)


async def _one_turn(built: Any, prompt: str, started: Callable[[Any], None] = lambda a: None, *,
                    report_window: bool = False) -> Any:
    """One turn inside the session (MCP servers up before it; background tasks, sub-agents
    and servers closed after it, however it ends). SIGTERM and SIGHUP cancel the turn
    instead of killing the process, so the close still runs; once closing, they wait for it.
    `report_window`: the result states the context window, so its lookup is waited for."""
    # asyncio (about 60 ms): off the start of `--version`, --help and a usage error
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    asking = True

    def on_signal() -> None:
        if asking and task is not None:
            task.cancel()

    # -p's output: off the REPL's start
    from nanohermes.ui.headless import stdout_closed, stop_turn_when_stdout_closes

    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal)
    stop_turn_when_stdout_closes(on_signal)  # a closed stdout (`| head`) ends the turn as a signal does
    try:
        async with built.session() as agent:
            started(agent)
            try:
                from nanohermes.extensions import custom_commands  # `/name args` runs a custom command

                result = await custom_commands.ask(agent, prompt, repl=_repl_command)
                if report_window and built.budget is not None:
                    await built.budget.known_now()
            finally:
                asking = False
    except asyncio.CancelledError:
        if stdout_closed():
            raise OutputClosed from None
        raise
    finally:
        stop_turn_when_stdout_closes(None)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    if stdout_closed():
        raise OutputClosed
    return result


