"""The tool contract and the context tools run in.

A tool is a frozen keyword-only dataclass: its fields are its settings (limits, roots),
its class attributes are its identity (name, group, description, params class) and its
behaviour flags. Flags default to the worst case: not read-only, not concurrency-safe,
asks for approval. Forgetting to declare one makes a tool slower and safer, never faster
and riskier. A flag may depend on the parsed arguments (override the method).

A tool also declares what it touches: its subject `kind` (path, command, host, mcp, none),
its `effect` (read, write, run, or only nanohermes's own state) and which arguments name the
subject (`subjects`). From that declaration `Tool.target` computes the call's `Target` once
(paths resolved by the one resolver in `nanohermes.guard.pathrules`, hosts in canonical form);
the gate judges it and passes the same Target to `run` in the call's `Attempt` (beside the
finished confinement of its processes), so a tool uses exactly the paths that were judged
(`Tool.resolved`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, ParamSpec, Protocol, Self, cast

from nanohermes.common.budget import Limits
from nanohermes.common.errors import ToolError as ToolError  # the contract names it; defined below every layer
from nanohermes.common.events import UI, Event, ToolProgress
from nanohermes.common.messages import Image
from nanohermes.guard.permissions import Effect, Rule, SubjectKind, Target
from nanohermes.common.plaindata import NOT_PLAIN, made
from nanohermes.guard.pathrules import PathProblem, compute_target
from nanohermes.tools.declared import schema

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter, ValidationError
    from pydantic_core import CoreSchema
    from typing_extensions import TypeVar

    from nanohermes.config import Config
    from nanohermes.guard.sandbox import Confinement, Refused
else:
    from typing import TypeVar

# How a call is approved when nothing else decides: "never" (harmless), "edit" (a file
# write: skipped in accept-edits), "always" (a command, a commit, an unknown MCP tool).
Approval = Literal["never", "edit", "always"]


def about(description: str | None = None, *, shown_default: Any = MISSING, **constraints: Any) -> dict[str, Any]:
    """A params field's metadata: what the model reads about it and its constraints, as
    pydantic's `Field` takes them (`ge`, `le`, `min_length`, `pattern`, ...). Use it as
    `field(default=..., metadata=about("...", ge=1))`. `shown_default` is the default the schema
    states when the field's own default is None meaning "not given" (the tool then applies it)."""
    out: dict[str, Any] = dict(constraints)
    if description is not None:
        out["description"] = description
    if shown_default is not MISSING:
        out["json_schema_extra"] = {"default": shown_default}
    return out


@dataclass(frozen=True, kw_only=True)
class Params:
    """Base of every tool's parameters: a frozen keyword-only dataclass (subclasses are
    decorated the same way), unknown fields rejected.

    Plain dataclasses, not pydantic models: building the pool and sending its specs (from the
    shipped declarations, `tools/declared.py`) imports no pydantic, nor does parsing arguments
    that already have their fields' types (`nanohermes.common.plaindata`); other arguments are judged
    by pydantic, imported then, through a `TypeAdapter` of the dataclass. A check of
    several fields, or a normalisation, lives in `__post_init__` (call `super().__post_init__()`);
    a ValueError raised there is the model's error text.

    `non_empty` maps string fields that must not be blank to the next step to suggest;
    the check runs at parse time, before any I/O.

    An optional field (one with a default) given as null is taken as not given, in these
    params and in every params class nested in them: models often send null for what they
    leave out. A required field given null is still refused, by name.
    """

    # Read by pydantic (inherited): unknown keys fail instead of being dropped.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    non_empty: ClassVar[dict[str, str]] = {}
    # Fields Claude Code's tool of the same purpose names otherwise (ours -> theirs): a hook
    # script written for it reads `.tool_input.file_path` where ours say `path`.
    claude_fields: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        for name, hint in self.non_empty.items():
            value = getattr(self, name)
            if isinstance(value, str) and not value.strip():
                raise ValueError(f"{name} must not be empty" + (f"; {hint}" if hint else ""))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type[Any], handler: GetCoreSchemaHandler) -> CoreSchema:
        """Read by pydantic for every params class, nested ones too: the dataclass's own
        validation, after the nulls of optional fields are dropped (see the class docstring).
        The JSON schema is the dataclass's: a before-validator does not change it."""
        # pydantic: only when a tool's arguments are validated, off a turn that calls none
        from pydantic_core import core_schema

        optional = frozenset(f.name for f in fields(cls) if f.default is not MISSING or f.default_factory is not MISSING)

        def drop_nulls(value: Any) -> Any:
            if isinstance(value, dict) and optional:
                return {k: v for k, v in value.items() if v is not None or k not in optional}
            return value

        return core_schema.no_info_before_validator_function(drop_nulls, handler(source))

    @classmethod
    def prepare(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """The arguments as validation sees them: a hook for other spellings of a field."""
        return raw

    @classmethod
    def validate(cls, raw: dict[str, Any]) -> Self:
        """Validated arguments; pydantic's ValidationError when they are not (see `Tool.parse`).
        Arguments that already have their fields' types are built without pydantic (`plaindata`):
        most calls, and then a run imports no pydantic at all."""
        prepared = cls.prepare(raw)
        out: Self = made(cls, prepared, _drops_nulls)
        if out is NOT_PLAIN:
            out = _adapter(cls).validate_python(prepared)
        return out

    @classmethod
    def defaults(cls) -> Self:
        """An instance holding only the defaults, unchecked (a required field is absent):
        for asking a flag what it says of a call that gives nothing."""
        out = object.__new__(cls)
        for f in fields(cls):
            if f.default is not MISSING:
                object.__setattr__(out, f.name, f.default)
            elif f.default_factory is not MISSING:
                object.__setattr__(out, f.name, f.default_factory())
        return out

    def dump(self) -> dict[str, Any]:
        """The arguments as a JSON-safe dict (what hooks and the UI see). A field left out that
        the schema states a default for (`about(shown_default=...)`) shows that default."""
        values = asdict(self)
        for f in fields(self):
            shown = f.metadata.get("json_schema_extra", {})
            if values[f.name] is None and "default" in shown:
                values[f.name] = shown["default"]
        out: dict[str, Any] = json.loads(json.dumps(values, default=str))
        return out

    def claude_input(self, workspace: Path) -> dict[str, Any]:
        """The arguments as a hook's `tool_input`: ours, and beside them the same values under
        the names Claude Code's tool of that purpose gives them (`claude_fields`), a
        `file_path` absolute, as Claude Code gives it to hooks."""
        ours = self.dump()
        shown = dict(ours)
        for mine, theirs in self.claude_fields.items():
            if mine in ours and theirs not in shown:
                shown[theirs] = ours[mine]
        if isinstance(shown.get("file_path"), str):
            shown["file_path"] = absolute(shown["file_path"], workspace)
        return shown

    def from_claude(self, updated: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
        """A hook's `updatedInput` (for the arguments `self`, shown as `sent`) in our field names,
        for `validate`: a value given (or changed) under Claude Code's name replaces ours; one of
        ours sent back unchanged stays as the call gave it (a default left out stays left out); a
        name only the hook was shown is dropped while unchanged, and refused (ValueError) when
        changed, since no argument of ours carries it."""
        ours = {f.name for f in fields(self)}
        renamed = {theirs: mine for mine, theirs in self.claude_fields.items()}
        given = {f.name: _raw(getattr(self, f.name)) for f in fields(self)}
        # `description`: what Claude Code's Bash and Task take to say what a call is for; ours do not.
        out: dict[str, Any] = {k: given[k] if k in ours and v == sent.get(k) else v for k, v in updated.items()
                               if k in ours or (k not in sent and k != "description")}
        for theirs, value in updated.items():
            if theirs in ours or theirs not in sent:
                continue
            mine = renamed.get(theirs)
            if mine is not None and (mine not in updated or value != sent.get(theirs)):
                out[mine] = value
            elif mine is None and value != sent[theirs]:
                raise ValueError(f"`{theirs}` has no counterpart among the arguments, so it cannot be changed")
        return out


def _drops_nulls(cls: type[Any]) -> bool:
    """Does `cls` take an optional field's null as not given? Params do (see `Params`)."""
    return issubclass(cls, Params)


def _raw(value: Any) -> Any:
    """An argument's value as validation takes it back (nested params as dicts)."""
    if isinstance(value, list):
        return [_raw(v) for v in value]
    return asdict(value) if hasattr(value, "__dataclass_fields__") else value


def absolute(path: str, workspace: Path) -> str:
    """A path as Claude Code gives it to hooks: absolute, normalised (no link is resolved)."""
    return os.path.normpath(os.path.join(workspace, os.path.expanduser(path)))


def _adapter(model: type[Any]) -> TypeAdapter[Any]:
    """The validator of a params dataclass, built on first use (that is when pydantic is imported)."""
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        if "__dataclass_fields__" not in model.__dict__:  # a subclass without @dataclass would lose its fields
            raise TypeError(f"{model.__qualname__} must be decorated with @dataclass(frozen=True, kw_only=True)")
        # pydantic: only when a tool's arguments are validated, off a turn that calls none
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[model] = TypeAdapter(model)
    return adapter


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


# A tool's params class. A bare `Tool` is a tool of any params (the pool, the runtime); the
# default exists for the type checker only (TypeVar defaults are newer than Python 3.11).
if TYPE_CHECKING:
    P = TypeVar("P", bound=Params, default=Any)
else:
    P = TypeVar("P", bound=Params)

# What `Tool.in_thread` passes through: the blocking function's arguments and result.
_A = ParamSpec("_A")
_R = TypeVar("_R")


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What a tool's run gives back: the model's text, and what people and the gate see of it."""

    text: str
    display: str | None = None  # for people only, e.g. the unified diff of an edit
    # What the OS sandbox refused during the call (a write to /x): the gate offers a person to
    # run the call again outside it.
    refused: tuple[Refused, ...] = ()
    images: tuple[Image, ...] = ()  # for a model that takes images (`images_to_model`); the text names their files


@dataclass(frozen=True)
class ClaudeCall:
    """A call as Claude Code's tool of the same purpose would have made it, for hooks written
    for Claude Code: that tool's `name` (`Bash`, `Edit`; a tool with no counterpart keeps its
    own), its `input` under Claude Code's field names (ours beside them where they differ),
    and what a hook's `if` condition is matched against: the `subjects` as written (paths,
    a command line, URLs) and their `kind`."""

    name: str
    input: dict[str, Any]
    kind: SubjectKind = "none"
    subjects: tuple[str, ...] = ()

    @classmethod
    def bash(cls, line: str, ours: dict[str, Any]) -> ClaudeCall:
        """What Claude Code does through its shell (`git commit ...`): a Bash call of `line`,
        with our own arguments beside the command."""
        return cls("Bash", {**ours, "command": line}, "command", (line,))


class SessionView(Protocol):
    """What a call's context takes from the session it runs in."""

    @property
    def state(self) -> dict[str, Any]: ...

    @property
    def folder(self) -> Path | None: ...


class ToolHost(Protocol):
    """What a call's context is made from: the runtime of one session (or what stands for it)."""

    @property
    def workspace(self) -> Path: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def config(self) -> Config: ...

    @property
    def session(self) -> SessionView: ...

    @property
    def ui(self) -> UI: ...


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a running tool may use of the session: one per call, made by `of` and never
    changed (a changed one is a `dataclasses.replace` of it). `state` is shared by the session.
    What the gate decided about the call travels apart, in its `Attempt`."""

    workspace: Path
    limits: Limits
    config: Config
    call_id: str = ""
    emit: Callable[[Event], None] = lambda e: None
    state: dict[str, Any] = field(default_factory=dict)  # session-wide: todos, task manager, ...
    started: float = field(default_factory=time.monotonic)
    # The session's folder of side files (what a tool keeps for the person); None: not recorded.
    session_folder: Path | None = None

    @classmethod
    def of(cls, host: ToolHost, call_id: str = "", *, emit: Callable[[Event], None] | None = None) -> ToolContext:
        """The context of one call in `host`'s session (its workspace, limits, config, tool
        state and folder; its events to `emit`, by default the session's UI): the one place a
        context is made from a session."""
        return cls(workspace=host.workspace, limits=host.limits, config=host.config, call_id=call_id,
                   emit=host.ui.emit if emit is None else emit, state=host.session.state,
                   session_folder=host.session.folder)

    def progress(self, name: str, text: str) -> None:
        self.emit(ToolProgress(call_id=self.call_id, name=name, text=text, elapsed=time.monotonic() - self.started))


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One run of a judged call, as the gate made it: the Target the call was judged on, the
    finished confinement its processes start in, and what the policy answers while it runs.
    Never changed: running the call again outside the sandbox is another attempt (a
    `dataclasses.replace` of this one). `Attempt()` is a run outside the gate (a person's own
    command in the REPL, a test): the tool computes its Target itself (`Tool.resolved`), its
    processes get what an unasked call gets (workspace-write, `process.confinement_of`), and no
    policy is asked."""

    target: Target | None = None  # what the call was judged on
    # The OS sandbox the call's processes start in (None: outside the gate). A tool never
    # starts a process without one.
    confinement: Confinement | None = None
    # Why the policy would not let this call reach another target unasked (a redirect to
    # another host), or None when it would; None here: no policy to ask.
    redirect: Callable[[Target], str | None] | None = None
    # For a path call: the read rule (its text) that withholds a path the call reaches inside
    # what it was judged on (a file grep searches, an entry list_dir lists), given that path
    # as rules see it (`pathrules.subject_of`), or None. None here: no read rule covers this
    # tool, or no policy to ask. See `permissions.reading`.
    read_rule: Callable[[str], str | None] | None = None


@dataclass(frozen=True, kw_only=True)
class Tool(Generic[P]):
    """A tool over its params class `P`: `Tool[ReadFileParams]` gets `ReadFileParams` in every
    hook, as parsed by `parse` from `params` (which must be that same class)."""

    name: ClassVar[str]
    group: ClassVar[str] = "other"
    description: ClassVar[str]
    params: ClassVar[type[Params]]
    source: ClassVar[str] = "built-in"
    approval: ClassVar[Approval] = "always"
    persist: ClassVar[bool] = True  # may the aggregate budget persist this result to a file?
    kind: ClassVar[SubjectKind] = "none"  # what `subjects` names
    effect: ClassVar[Effect] = "run"  # what the tool does with it; "run" is the worst case
    # A path tool's output may hold file contents: a reader's secret files are asked, and read
    # rules cover a writer that quotes the file (edit_file's near misses).
    shows_contents: ClassVar[bool] = True
    # Parameters whose default is a limit, by the limit's name: the schema states the one in force.
    limit_defaults: ClassVar[dict[str, str]] = {}
    # The names Claude Code gives its tools of the same purpose ("Bash", "Edit"): every name
    # `claude_calls` may give a call of this tool (one per call), the usual one first.
    claude_names: ClassVar[tuple[str, ...]] = ()
    # Does the tool start processes? The gate then finishes their confinement (the secret
    # files' look included) before the call runs. A tool that never does says False.
    spawns: ClassVar[bool] = True

    def read_only(self, args: P) -> bool:
        return False

    def subjects(self, args: P) -> list[str]:
        """What the call names, as the model wrote it: its paths (every one a patch touches),
        its command line or its URL. By default the single `rule_subject`."""
        one = self.rule_subject(args)
        return [] if one is None else [one]

    def base_dir(self, args: P) -> str | None:
        """The folder relative paths are taken from (a command's cwd); None: the workspace."""
        return None

    def target(self, args: P, ctx: ToolContext) -> Target:
        """The call's Target, computed from the declaration. Not for overriding: tools
        declare `kind`, `effect` and `subjects`; resolution is the same for every tool."""
        effect: Effect = "read" if self.read_only(args) else self.effect
        try:
            return compute_target(self.kind, effect, self.subjects(args), ctx.workspace, base=self.base_dir(args),
                                  extra_roots=ctx.config.extra_write_roots, shows_contents=self.shows_contents,
                                  lookup_secs=ctx.limits.web_fetch_timeout_secs)
        except PathProblem as e:
            raise ToolError(str(e)) from None

    def resolved(self, args: P, ctx: ToolContext, attempt: Attempt) -> Target:
        """The Target the gate judged, or (run outside the gate) the same computation."""
        return attempt.target if attempt.target is not None else self.target(args, ctx)

    def concurrency_safe(self, args: P) -> bool:
        return False

    def approval_for(self, args: P) -> Approval:
        return self.approval

    def rule_subject(self, args: P) -> str | None:
        """What a permission rule `name(pattern)` is matched against (command, path, domain)."""
        return None

    def protected(self, args: P, ctx: ToolContext) -> str:
        """Why this call writes somewhere that always needs a person's yes (outside the
        workspace, inside .git/, nanohermes's own config) beyond what its Target says, or ""."""
        return ""

    def needs_person(self, args: P, ctx: ToolContext) -> str | None:
        """Why this call needs a person's own yes every time, or None (the default): no rule,
        mode, hook answer or "always" stands for it. The gate then asks whoever is there, and
        refuses it when nobody is asked (--yes, goal mode)."""
        return None

    def suggest_rule(self, args: P) -> Rule:
        """The rule an "always" answer remembers. Narrower is better; tools refine it."""
        return Rule(self.name)

    def claude_calls(self, args: P, workspace: Path) -> list[ClaudeCall]:
        """This call as Claude Code would have made it, for hooks: the tool it would have used
        (the first of `claude_names`; a tool with no counterpart keeps its own name) and that
        tool's input (`Params.claude_input`). A call doing the work of several of Claude
        Code's calls (a patch of several files) gives one for each, never one call two names."""
        try:
            subjects = tuple(self.subjects(args))
        except Exception:  # arguments naming nothing readable: an `if` condition sees no subject
            subjects = ()
        if not self.claude_names:
            return [ClaudeCall(self.name, args.dump(), self.kind, subjects)]
        return [ClaudeCall(self.claude_names[0], args.claude_input(workspace), self.kind, subjects)]

    def approval_detail(self, args: P, ctx: ToolContext, attempt: Attempt) -> str:
        """What an approval prompt shows in full: the command, or the diff of an edit
        (computed without writing, on the judged Target)."""
        return ""

    async def precheck(self, args: P, ctx: ToolContext, attempt: Attempt) -> None:
        """Raise the ToolError the call would fail with when the tool's own cheap checks (the
        code `run` runs, changing nothing) already know it: the gate calls this before it
        asks a person, so nobody is asked to approve a call that can only fail. `attempt`
        holds the judged Target, and a read-only confinement for a process it starts. By
        default nothing is checked."""

    def summary(self, args: P) -> str:
        """One line for the UI and approval prompts."""
        for key in ("command", "path", "pattern", "url", "query", "message"):
            v = getattr(args, key, None)
            if isinstance(v, str) and v:
                return v.splitlines()[0][:200]
        return ""

    def output_limit(self) -> str:
        return "max_output"

    def describe(self, limits: Limits | None = None) -> str:
        """The description the model reads, its `{limit}` placeholders filled in."""
        return render_limits(self.description, limits or Limits())

    def parameters(self) -> dict[str, Any]:
        """The params model's JSON schema (a fresh copy: the caller may change it)."""
        return params_schema(self.params)

    def spec(self, limits: Limits | None = None) -> dict[str, Any]:
        lim = limits or Limits()
        schema = self.parameters()
        for param, limit in self.limit_defaults.items():
            schema["properties"][param]["default"] = getattr(lim, limit)
        return {"type": "function", "function": {"name": self.name, "description": self.describe(lim), "parameters": schema}}

    def parse(self, raw: dict[str, Any]) -> P:
        try:
            return cast(P, self.params.validate(raw))  # `params` is the class P names
        except ValueError as e:  # pydantic's ValidationError is one; pydantic is imported once it judged
            # pydantic: only when a tool's arguments are validated, off a turn that calls none
            from pydantic import ValidationError

            if not isinstance(e, ValidationError):
                raise
            raise ToolError(describe_validation(e, self.params)) from None

    async def run(self, args: P, ctx: ToolContext, attempt: Attempt) -> str | ToolResult:
        """Do the call: on `attempt`'s Target (`resolved`), its processes in `attempt`'s
        confinement (`process.confinement_of`)."""
        raise NotImplementedError

    async def in_thread(self, fn: Callable[_A, _R], *a: _A.args, **kw: _A.kwargs) -> _R:
        """Blocking bodies run off the event loop so parallel batches really overlap."""
        return await asyncio.to_thread(fn, *a, **kw)


@dataclass(frozen=True, kw_only=True)
class ReadOnlyTool(Tool[P]):
    """A tool that only reads: it never asks and runs in parallel with other such calls.
    Subclassing this is the explicit promise the conservative defaults of `Tool` wait for."""

    approval: ClassVar[Approval] = "never"
    effect: ClassVar[Effect] = "read"

    def read_only(self, args: P) -> bool:
        return True

    def concurrency_safe(self, args: P) -> bool:
        return True

_TYPE_WORDS = {"string_type": "string", "int_type": "integer", "int_parsing": "integer", "bool_type": "boolean",
               "bool_parsing": "boolean", "list_type": "array", "dict_type": "object", "float_type": "number",
               "float_parsing": "number", "model_type": "object", "dataclass_type": "object"}


def describe_validation(err: ValidationError, model: type[Params] | None = None) -> str:
    """Turn pydantic's report into one line that names the field, e.g. missing string field `path`,
    or field `todos` must be an array. A missing field's type is read from the schema the
    model was sent, at that field's place (`todos.0.status` is a string)."""
    schema = params_schema(model) if model else {}
    parts: list[str] = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "arguments"
        kind = e["type"]
        if kind == "missing":
            kind_word = _schema_at(schema, e["loc"]).get("type", "")
            kind_word = kind_word if isinstance(kind_word, str) else ""
            parts.append(f"missing {kind_word} field `{loc}`".replace("  ", " "))
        elif kind == "unexpected_keyword_argument":  # the dataclass's `extra: forbid`
            parts.append(f"unknown field `{loc}`")
        elif kind in _TYPE_WORDS:
            parts.append(f"field `{loc}` must be {_with_article(_TYPE_WORDS[kind])}{_arrived(e.get('input'), _TYPE_WORDS[kind])}")
        elif kind == "value_error":
            parts.append(str(e.get("ctx", {}).get("error", e["msg"])))
        else:
            parts.append(f"field `{loc}`: {e['msg']}")
    return "; ".join(parts)


_JSON_WORDS = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"), (type(None), "null"))


def _arrived(value: Any, wanted: str) -> str:
    """", not a string" (the JSON type that arrived), and when a string holds the JSON of the
    wanted type, that it was sent inside a string."""
    got = next((word for t, word in _JSON_WORDS if isinstance(value, t)), "")
    if not got or got == wanted:
        return ""
    hint = ""
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            inner = None
        if next((word for t, word in _JSON_WORDS if isinstance(inner, t)), "") == wanted and wanted in ("array", "object"):
            hint = f" (a JSON {wanted} sent inside a string: send the {wanted} itself, not quoted)"
    return f", not {'null' if got == 'null' else _with_article(got)}{hint}"


def _schema_at(schema: dict[str, Any], loc: tuple[int | str, ...]) -> dict[str, Any]:
    """The part of a params schema that describes the value at `loc` (a field name steps into
    `properties`, a list index into `items`); {} where the schema says nothing."""
    node: Any = schema
    for part in loc:
        if not isinstance(node, dict):
            return {}
        if isinstance(part, int):
            node = node.get("items", {})
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            node = node.get("additionalProperties", {})
    return node if isinstance(node, dict) else {}


def _with_article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def params_schema(model: type[Params]) -> dict[str, Any]:
    """JSON schema for the params (`render_params_schema`). The tool modules' params' schemas
    are shipped with the package (`tools/declared.py`), so a start imports no pydantic."""
    return schema(model, lambda: render_params_schema(model))


def render_params_schema(model: type[Params]) -> dict[str, Any]:
    """JSON schema for the params as pydantic renders it, in the plain subset every endpoint
    takes: no titles, no `$defs`/`$ref` (inlined), no class docstrings (pydantic's
    `description` of a class: they are written for developers, and would be sent with every
    request), and an optional field is its plain type, not `anyOf` with null (a null default
    is left out: absent means the default)."""
    schema = _adapter(model).json_schema()
    defs = schema.pop("$defs", {})
    # The params class's own docstring and each nested class's (a field's `about()` text
    # sits beside its `$ref`, so it stays).
    for node in (schema, *defs.values()):
        node.pop("description", None)

    def lean(node: Any) -> Any:
        if isinstance(node, list):
            return [lean(v) for v in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        out = {k: lean(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
        options = out.get("anyOf")
        if isinstance(options, list):
            real = [o for o in options if o != {"type": "null"}]
            if len(real) == 1 and len(real) < len(options):
                del out["anyOf"]
                out = {**real[0], **out}
                if out.get("default", 0) is None:
                    del out["default"]
        return out

    out: dict[str, Any] = lean(schema)
    out.setdefault("properties", {})
    return out


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def limit_value(name: str, value: float | int) -> str:
    """A limit as a description states it: sizes in KiB/MiB, the rest as plain numbers."""
    if name.endswith("_bytes"):
        n = int(value)
        for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
            if n >= size and n % size == 0:
                return f"{n // size} {unit}"
        return f"{n} bytes"
    return f"{value:g}" if isinstance(value, float) else str(value)


def render_limits(text: str, limits: Limits) -> str:
    """`{name}` of a Limits field replaced by its value, so a lowered limit is what the
    model reads; other braces are left as they are."""
    names = Limits.names()

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        return limit_value(name, getattr(limits, name)) if name in names else m.group(0)

    return _PLACEHOLDER.sub(sub, text)


__all__ = ["Approval", "Attempt", "Effect", "P", "Params", "ReadOnlyTool", "SubjectKind", "Target", "Tool",
           "ToolContext", "ToolError", "ToolHost", "ToolResult", "about", "describe_validation", "limit_value",
           "params_schema", "render_limits", "render_params_schema"]
