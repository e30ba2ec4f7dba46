"""The root command's options, declared once, and the one reading of the command line.

`OPTIONS` says, for each option of `nanohermes`, its names, what it takes (nothing: a flag; a
string, a number, a path, or one word of a closed set from `modes`), the config key it sets and
its help. typer's root command is made from it (`cli._make_app`), and `read` reads argv with it
before typer runs: it takes the REPL's first prompt out of the words, gives a bare `-p` (stdin) or
`--resume` (the picker) its value and reads `--yes false` as the flag off; when every option is known and complete it
says so (the REPL then draws its prompt first), and when their values are plain as well it
hands them back coerced, so the run (`-p` or the REPL) starts without typer, whose import and
coercion cost a one-shot run more than its model call. Anything else (help, a subcommand, an
unknown option, a bad value) is left to typer, which reports it as usual.

Light on purpose: it imports only `modes` and what the interpreter has loaded anyway, and its
annotations are not strings (`from __future__ import annotations` would make each NamedTuple
field a ForwardRef, compiled at import).
"""

from enum import Enum
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args, get_origin

from nanohermes.common.modes import Effort, Mode, SandboxMode, Wire

# How -p prints: the answer's text, one JSON object, or one JSON event per line.
Format = Literal["text", "json", "stream-json"]
SUBCOMMANDS = ("doctor", "sessions", "acp")
STDIN = "-"  # the prompt of `-p -`, or of a bare `-p`: read from standard input
HELP_NAMES = ("-h", "--help")  # typer's own option, not one of OPTIONS
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


class Option(NamedTuple):  # not a dataclass: `dataclasses` would cost `--version` its inspect import
    """One option of the root command."""

    dest: str  # its parameter's name in typer's command, and its key in the values
    names: tuple[str, ...]  # as the help lists them
    kind: Any  # bool (a flag), str, int, Path, or a closed set: a Literal of words or a str enum
    help: str
    key: str | None = None  # the config key it sets (`section.key` for a section's); None: not a config key
    default: Any = None
    min: int | None = None  # a number's least value
    bare: str | None = None  # its value when it comes without one: last, or before another of the options
    bare_before_dash: bool = False  # bare before any argument starting with "-" too (no value of it does)
    words: bool = True  # a flag: `--flag true` and `--flag false` set it on and off

    @property
    def flag(self) -> bool:
        return self.kind is bool

    @property
    def long(self) -> str:
        return next(name for name in self.names if name.startswith("--"))

    @property
    def choices(self) -> tuple[str, ...] | None:
        if get_origin(self.kind) is Literal:
            return get_args(self.kind)
        if isinstance(self.kind, type) and issubclass(self.kind, Enum):
            return tuple(m.value for m in self.kind)
        return None

    def coerce(self, raw: str) -> Any:
        """The value of `raw` as typer would give it, or None where typer has to judge (it
        then reports the error, or reads a number written another way)."""
        if self.choices is not None:
            return raw if raw in self.choices else None
        if self.kind is int:
            if not (raw.isascii() and raw.isdigit()) or (self.min is not None and int(raw) < self.min):
                return None
            return int(raw)
        return Path(raw) if self.kind is Path else raw


OPTIONS: tuple[Option, ...] = (
    Option("prompt", ("-p", "--print"), str, "Run one prompt without the REPL and print the answer. Piped stdin is "
           "appended; `-p -` or a bare -p reads the prompt from stdin.", bare=STDIN),
    Option("output_format", ("--output-format",), Format, "With -p: text, json (one object) or stream-json (one event "
           "per line).", default="text"),
    Option("include_partial_messages", ("--include-partial-messages",), bool, "With -p and stream-json: also "
           "each piece of a model's message as it arrives, as Claude Code's stream_event lines."),
    Option("model", ("--model", "-m"), str, "Model name (config `model`, env NANOHERMES_MODEL).", key="model"),
    Option("base_url", ("--base-url",), str, "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1.",
           key="base_url"),
    Option("api_key", ("--api-key",), str, "API key (default: $OPENAI_API_KEY).", key="api_key"),
    Option("mode", ("--mode",), Mode, "Permission mode.", key="permission_mode"),
    Option("yes", ("--yes", "-y"), bool, "Approve every call that would ask (not those a mode blocks); commands run "
           "in the sandbox and file writes stay inside the workspace: protected paths are refused, and so is showing a "
           "secret file.", key="auto_approve"),
    Option("dangerously_skip_permissions", ("--dangerously-skip-permissions",), bool, "Run every call as if you "
           "approved it: protected writes too, and commands outside the sandbox (deny rules and mode blocks still "
           "apply). For a throwaway container or VM.", key="dangerously_skip_permissions"),
    Option("sandbox", ("--sandbox",), SandboxMode, "auto: commands nobody approved run in the OS sandbox; off: "
           "unconfined (config sandbox.mode).", key="sandbox.mode"),
    Option("config", ("--config",), Path, "Config file to use instead of the user config."),
    Option("cwd", ("-C", "--cwd"), Path, "Workspace directory (default: the current one)."),
    Option("max_turns", ("--max-turns",), int, "Stop after this many model calls in one turn.", key="max_turns",
           min=1),
    Option("wire_api", ("--wire-api",), Wire, "The endpoint's API: chat (chat completions) or responses.",
           key="wire_api"),
    Option("reasoning_effort", ("--reasoning-effort",), Effort, "How hard a reasoning model thinks (sent only when "
           "set).", key="reasoning_effort"),
    Option("no_session", ("--no-session",), bool, "Do not save this session's transcript."),
    Option("continue_", ("--continue", "-c"), bool, "Continue the latest session of this workspace."),
    Option("resume", ("--resume", "-r"), str, "Resume a session by ID (or ID prefix); without an ID, pick one from a "
           "list.", bare="", bare_before_dash=True),
    Option("verbose", ("--verbose", "-v"), bool, "Show progress on stderr and tracebacks on errors."),
    Option("version", ("--version", "-V"), bool, "Print the version and exit.", words=False),
)
_BY_NAME = {name: opt for opt in OPTIONS for name in opt.names}
_BY_DEST = {opt.dest: opt for opt in OPTIONS}
_OPTION_NAMES = {*_BY_NAME, *HELP_NAMES}


class Reading(NamedTuple):
    """What `read` made of the arguments."""

    argv: list[str]  # what typer parses: the words taken out, a bare option's value and the flags' words applied
    first_prompt: str | None  # `nanohermes "fix it"`: the words that are no option, value or subcommand
    given: dict[str, Any] | None  # each root option given, by dest, its value as written (True for a flag);
    #                               None when typer must read them (help, a subcommand, an unknown or incomplete option)

    def values(self) -> dict[str, Any] | None:
        """Every root option's value (its default when not given) as typer's command would receive
        it, or None when typer must read or judge one of them."""
        if self.given is None:
            return None
        values = {opt.dest: False if opt.flag else opt.default for opt in OPTIONS}
        for dest, raw in self.given.items():
            opt = _BY_DEST[dest]
            value = raw if opt.flag else opt.coerce(raw)
            if value is None:
                return None
            values[dest] = value
        return values

    def bad_value(self) -> str | None:
        """What is wrong with an option given a value it cannot take, in words that say what it
        takes: a word outside its closed set (`--output-format yaml`), listing the set, or what
        is no whole number in its range (`--max-turns abc`); None when every value fits."""
        for dest, raw in (self.given or {}).items():
            opt = _BY_DEST[dest]
            if (choices := opt.choices) is not None and raw not in choices:
                *most, last = choices
                return f"{opt.long} takes {', '.join(most)} or {last}, not {raw!r}"
            if opt.kind is int and not _whole(raw, opt.min):
                least = f" of at least {opt.min}" if opt.min is not None else ""
                return f"{opt.long} takes a whole number{least}, not {raw!r}"
        return None

    def opens_repl(self) -> bool:
        """Whether these arguments start the REPL: no -p, help, version, subcommand or session
        picker. Their values are judged behind the REPL's first prompt (`cli._repl_first`)."""
        return self.given is not None and "prompt" not in self.given and "version" not in self.given \
            and self.given.get("resume") != ""


def _whole(raw: str, least: int | None) -> bool:
    try:
        n = int(raw)
    except ValueError:
        return False
    return least is None or n >= least


def read(argv: list[str]) -> Reading:
    """One pass over `argv`, as click's parser goes: an option that takes a value takes the next
    argument whatever it is (unless it may come bare and that argument is another of the
    options); `--` makes the rest words; the first word that names a subcommand hands it the rest."""
    out: list[str] = []
    words: list[str] = []
    given: dict[str, Any] | None = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            words += argv[i:]
            break
        if not arg.startswith("-") or arg == "-":
            if not words and arg in SUBCOMMANDS:
                return Reading(out + argv[i - 1:], None, None)
            words.append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        opt = _BY_NAME.get(name)
        if opt is None or (opt.flag and eq):  # help, an unknown option, short flags run together, `--yes=1`
            out.append(arg)
            given = None
            continue
        taken: str | bool = value
        if opt.flag:
            word = argv[i].lower() if i < len(argv) and opt.words else ""
            if word in _TRUE | _FALSE:
                i += 1
            if word in _FALSE:
                continue
            taken = True
        elif eq:
            pass
        elif opt.bare is not None and (i == len(argv) or argv[i].partition("=")[0] in _OPTION_NAMES
                                       or (opt.bare_before_dash and argv[i].startswith("-"))):
            arg, taken = f"{opt.long}={opt.bare}", opt.bare
        elif i < len(argv):
            out.append(arg)
            arg = taken = argv[i]
            i += 1
        else:  # typer: "requires an argument"
            given = None
        out.append(arg)
        if given is not None:
            given[opt.dest] = taken
    return Reading(out, " ".join(words) if words else None, given)


def config_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The config keys the options set, as the loader's command-line layer: a flag given is
    true, an option not given sets nothing."""
    flags: dict[str, Any] = {}
    for opt in OPTIONS:
        value = values[opt.dest]
        if opt.key is None or value is None or value is False:
            continue
        value = value.value if isinstance(value, Enum) else value
        section, _, key = opt.key.rpartition(".")
        if section:
            flags.setdefault(section, {})[key] = value
        else:
            flags[key] = value
    return flags
