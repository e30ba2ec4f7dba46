"""The call formats without a marker (a bare JSON call, a pythonic list, GLM-4's name and
JSON, Gemma 4's bare call): taken where they end the answer (`TAILS`, keyed by the quirk
table's id), and a complete JSON call of an offered tool wherever it stands (`json_anywhere`,
for thinking, where a draft sits in prose)."""

from __future__ import annotations

import ast
import json
import re

from nanohermes.llm.textfinders.common import (
    JSON_CALL,
    Bad,
    Block,
    Call,
    Finder,
    Format,
    Schemas,
    called,
    fits,
    format_of,
    gemma4_args,
    named_json,
    offered,
    python_call,
)

# What may follow the last call: blanks and the tokens that end a turn or a call list.
_END = re.compile(r"(?:\s|<\|eom_id\|>|<\|eot_id\|>|<\|python_end\|>|<\|observation\|>|<\|end\|>|<\|endoftext\|>)*\Z")
# A JSON call object, or a list of them, begins: `{` then one of its keys, in any order
# (Llama writes `{"type": "function", "name": ...}` as often as `{"name": ...}`).
_CALL_KEYS = frozenset({"name", "tool_name", "arguments", "parameters", "type", "id", "function"})
CALL_OPENING = r'\{\s*"(?:name|tool_name|arguments|parameters|type|id|function)"\s*:'
_JSON_START = re.compile(r"(?:<\|python_start\|>\s*)?(?P<v>(?:\[\s*)?)" + CALL_OPENING)
_NEXT_CALL = re.compile(r"\s*;?\s*(?=[\[{])")


_ARGS_KEYS = frozenset({"arguments", "parameters", "function"})


def _json_call_value(text: str, at: int) -> tuple[list[Call], int, bool]:
    """The call object or list of them at `at`, where it ends, and whether each has the shape
    of a call (arguments beside its name, not only a name); Bad (or ValueError) when what
    stands there is no call."""
    value, end = json.JSONDecoder().raw_decode(text, at)
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, dict) and set(v) <= _CALL_KEYS for v in items):
        raise Bad("not calls")
    return [named_json(v) for v in items], end, all(_ARGS_KEYS & set(v) for v in items)


def _json_run(text: str, at: int) -> tuple[list[Call], int, bool]:
    """The calls of a run starting at `at`, several joined by `;` or blanks (Llama's parallel
    calls), where the run ends, and whether every one has the shape of a call."""
    calls, end, shaped = _json_call_value(text, at)
    while (nxt := _NEXT_CALL.match(text, end)) is not None:
        try:
            more, after, also = _json_call_value(text, nxt.end())
        except (ValueError, Bad):
            break
        calls, end, shaped = calls + more, after, shaped and also
    return calls, end, shaped


def _json_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """Llama's JSON calls (`{"name": ..., "parameters": {...}}`, several with `;` between, or a
    list), as Llama's parsers read them in prose: a run that ends the answer (then a call whose
    arguments do not fit goes back to the model, and so does one naming no tool here, Bad, when
    it has the shape of a call: a name and arguments), and, before it, each run whose every call
    names a tool of `schemas` with a complete argument object (an example of a call in prose
    names no tool here, or leaves arguments out)."""
    blocks: list[Block] = []
    after = 0
    for m in _JSON_START.finditer(text):
        if m.start() < after:
            continue
        try:
            calls, end, shaped = _json_run(text, m.start("v"))
        except (ValueError, Bad):
            continue
        if _END.match(text, end):
            unknown = [name for name, _ in calls if not offered(name, schemas)]
            if unknown and shaped and not blocks:
                raise Bad(f"`{unknown[0]}` is not a tool here (the tools are: {', '.join(sorted(schemas))})")
            # Otherwise a run naming no tool here is prose: an object that happens to have a name.
            return blocks + [(m.start(), len(text), calls)] * (not unknown), JSON_CALL
        if all(offered(name, schemas) and not fits(offered(name, schemas), args, schemas) for name, args in calls):
            blocks.append((m.start(), end, calls))
        after = end
    return blocks, JSON_CALL


_PYTHONIC_START = re.compile(r"(?:<\|python_start\|>\s*)?\[\s*[A-Za-z_][\w.]*\s*\(")


def _pythonic_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """A list of Python calls (`[read_file(path="a.py"), grep(pattern="x")]`) ending the answer;
    Bad when every one calls a tool of `schemas` but one cannot be read (an argument by
    position, bytes): a call that cannot run, not prose."""

    end = _END.search(text)
    stop = end.start() if end else len(text)
    if not text[:stop].endswith("]"):
        return [], format_of("text.pythonic")
    for m in _PYTHONIC_START.finditer(text, 0, stop):
        start = text.index("[", m.start())
        try:
            tree = ast.parse(text[start:stop], mode="eval")
        except SyntaxError:
            continue
        if isinstance(tree.body, ast.List) and tree.body.elts:
            try:
                return [(m.start(), len(text), [python_call(e) for e in tree.body.elts])], format_of("text.pythonic")
            except Bad:
                if all(isinstance(e, ast.Call) and offered(called(e.func), schemas) for e in tree.body.elts):
                    raise
                continue
    return [], format_of("text.pythonic")


_GLM_CALL = re.compile(r"(?:<\|assistant\|>\s*|^)[ \t]*([A-Za-z_][\w.-]*)[ \t]*\n[ \t]*(?=\{)", re.MULTILINE)


def _glm0414_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """GLM-4-0414's calls: a line holding the tool's name, then its arguments as JSON, several
    joined by `<|assistant|>`, ending the answer (and `<|observation|>`)."""
    fmt = format_of("text.glm4-0414")
    for m in _GLM_CALL.finditer(text):
        calls: list[Call] = []
        at, here = m.start(), m
        try:
            while True:
                args, end = json.JSONDecoder().raw_decode(text, here.end())
                if not isinstance(args, dict):
                    raise Bad("not an object")
                calls.append((here.group(1), args))
                if _END.match(text, end):
                    return [(at, len(text), calls)], fmt
                nxt = _GLM_CALL.match(text, end + len(text[end:]) - len(text[end:].lstrip()))
                if nxt is None or not text[end:].lstrip().startswith("<|assistant|>"):
                    raise Bad("prose after it")
                here = nxt
        except (ValueError, Bad):
            continue
    return [], fmt


# Gemma 4's call with its tokens left out: `call:NAME{...}`, after the thought channel's end.
_GEMMA4_BARE = re.compile(r"(?<![\w.])call:([A-Za-z_][\w.-]*)(?=\{)")


def _braced_end(text: str, start: int) -> int:
    """Where the `{...}` opening at `start` ends (past its `}`), over `<|"|>` strings; Bad when
    it does not."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith('<|"|>', i):
            close = text.find('<|"|>', i + 5)
            if close < 0:
                break
            i = close + 5
            continue
        depth += (text[i] == "{") - (text[i] == "}")
        i += 1
        if depth == 0:
            return i
    raise Bad("the call's `{` is not closed")


def _gemma4_bare_tail(text: str, schemas: Schemas) -> tuple[list[Block], Format]:
    """Gemma 4's calls written without `<|tool_call>` (`call:NAME{...}`, one after another),
    ending the answer."""
    fmt = format_of("text.gemma4-bare")
    for m in _GEMMA4_BARE.finditer(text):
        calls: list[Call] = []
        here: re.Match[str] | None = m
        try:
            while here is not None:
                end = _braced_end(text, here.end())
                args = gemma4_args(text[here.end():end])
                if not isinstance(args, dict):
                    raise Bad("not an object")
                calls.append((here.group(1), args))
                if _END.match(text, end):
                    return [(m.start(), len(text), calls)], fmt
                here = _GEMMA4_BARE.match(text, len(text) - len(text[end:].lstrip()))
        except (ValueError, Bad):
            continue
    return [], fmt


TAILS: dict[str, Finder] = {"text.json": _json_tail, "text.pythonic": _pythonic_tail, "text.glm4-0414": _glm0414_tail,
                            "text.gemma4-bare": _gemma4_bare_tail}


def json_anywhere(text: str, schemas: Schemas, *, complete: bool = True) -> list[Call]:
    """Every JSON call object in `text` that names a tool of `schemas` with a complete
    argument object (any argument object, when not `complete`), wherever it stands (for
    thinking, where a draft sits in prose)."""
    calls: list[Call] = []
    for m in re.finditer(CALL_OPENING, text):
        try:
            value, _ = json.JSONDecoder().raw_decode(text, m.start())
            name, args = named_json(value)
        except (ValueError, Bad):
            continue
        if (tool := offered(name, schemas)) and not (complete and fits(tool, args, schemas)):
            calls.append((tool, args))
    return calls
