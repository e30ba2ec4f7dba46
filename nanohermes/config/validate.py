"""What validating a config layer takes beside pydantic's own work: the keys no section
declares (warned about and dropped before a layer is validated), pydantic's first error in
words that name the file and the whole key, when a layer's plain values need no pydantic at
all, and the checks of values that are valid alone but not together."""

from __future__ import annotations

import difflib
import json
from dataclasses import replace
from enum import Enum
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from nanohermes.common.errors import ConfigError
from nanohermes.config.schema import (
    BOUNDS,
    LIMITS_HINT,
    Config,
    Invalid,
    Section,
    WebSearchConfig,
    section_fields,
    section_types,
)

if TYPE_CHECKING:
    from pydantic import ValidationError

KeyPath = tuple[str | int, ...]  # where a key is in a file: names, and indexes into lists


def unknown_keys(section: type[Section], data: dict[str, Any], at: KeyPath = ()) -> list[KeyPath]:
    """Every key of `data` no section declares, in sections at any depth: nested ones, and those
    held in a dict (an MCP server, a sub-agent, a price) or a list (a hook group, a hook command)."""
    out: list[KeyPath] = []
    keys, types = section_fields(section), section_types(section)
    for key, value in data.items():
        if key not in keys:
            out.append((*at, key))
        else:
            out.extend(_unknown_within(types[key], value, (*at, key)))
    return out


def _unknown_within(ann: Any, value: Any, at: KeyPath) -> list[KeyPath]:
    if isinstance(ann, type) and issubclass(ann, Section):
        return unknown_keys(ann, value, at) if isinstance(value, dict) else []
    origin, args = get_origin(ann), get_args(ann)
    if origin is dict and isinstance(value, dict):
        return [p for k, v in value.items() for p in _unknown_within(args[1], v, (*at, k))]
    if origin is list and isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unknown_within(args[0], v, (*at, i))]
    if origin is Union or origin is UnionType:
        return [p for a in args for p in _unknown_within(a, value, at)]
    return []


def near_miss(at: KeyPath) -> KeyPath | None:
    """The known key that the unknown one at `at` is likely a misspelling of: a key of the same
    section whose name is close to it (`permision_mode`: `permission_mode`), or None."""
    ann: Any = Config
    for step in at[:-1]:
        ann = _inner(ann, step)
    section = _section_in(ann)
    if section is None:
        return None
    close = closest_name(str(at[-1]), list(section_fields(section)))
    return (*at[:-1], close) if close else None


def closest_name(name: str, names: list[str]) -> str | None:
    """The one of `names` that `name` is likely a slip of: the same but for case and `_`/`-`
    (`permissionMode`), one letter added, dropped, changed or two swapped (`dney`: `deny`,
    `mdoe`: `mode`), or, for longer names, close by difflib's measure."""

    def plain(word: str) -> str:
        return word.lower().replace("_", "").replace("-", "")

    if same := [n for n in names if plain(n) == plain(name)]:
        return same[0]
    if len(name) >= 3 and (one := [n for n in names if _one_slip(name, n)]):
        return one[0]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.8)
    return close[0] if close else None


def _one_slip(a: str, b: str) -> bool:
    """Are `a` and `b` one typing slip apart: a letter added, dropped or changed, or two
    neighbours swapped?"""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _section_in(ann: Any) -> type[Section] | None:
    if isinstance(ann, type) and issubclass(ann, Section):
        return ann
    if get_origin(ann) in (Union, UnionType):
        return next((s for a in get_args(ann) if (s := _section_in(a)) is not None), None)
    return None


def _inner(ann: Any, step: str | int) -> Any:
    """The type of what `step` names inside a value of type `ann` (None: nothing known there)."""
    if (section := _section_in(ann)) is not None:
        return section_types(section).get(str(step))
    origin, args = get_origin(ann), get_args(ann)
    if origin is dict:
        return args[1]
    if origin is list:
        return args[0]
    if origin in (Union, UnionType):
        return next((t for a in args if (t := _inner(a, step)) is not None), None)
    return None


def dotted(at: KeyPath) -> str:
    """A key path as a file's reader writes it: `hooks.Stop.0.matcher`."""
    return ".".join(str(p) for p in at)


def without(data: dict[str, Any], keys: list[KeyPath]) -> dict[str, Any]:
    """A copy of `data` without the unknown `keys`, so that they are never validated (an argument
    only the loader passes, such as `origins`, cannot come from a file) nor count as a project's
    trust request."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    for *parents, last in keys:
        node: Any = out
        for p in parents:
            node = node[p]  # the path was found in this same data
        node.pop(last, None)
    return out


def _located(err: ValidationError) -> tuple[tuple[Any, ...], Any]:
    """The whole key of a validation's first error, and the value it held."""
    e = err.errors()[0]
    if isinstance(own := (e.get("ctx") or {}).get("error"), Invalid):  # a section's own check: name its key
        return tuple(e["loc"]) + own.at, own.value
    return tuple(e["loc"]), e.get("input")


def _describe(err: ValidationError) -> str:
    """The first error of a validation, naming its dotted key, what is wrong and the value given."""
    e = err.errors()[0]
    loc, got = _located(err)
    key = ".".join(str(p) for p in loc) or "(top level)"
    shown = json.dumps(got)[:60] if not isinstance(got, dict) else "an object"
    return f"key `{key}`: {e['msg'].lower()} (got {shown})"


def validated(data: dict[str, Any], where: str, hint: str) -> Config:
    """`data` validated into a Config; a ConfigError naming `where` (a file, or "" for the
    environment and flags) and the key otherwise."""
    try:
        return Config.from_dict(data)
    except ValueError as e:  # pydantic's ValidationError is one; pydantic is imported once it judged
        # pydantic only for a value that needs converting: off the -p start
        from pydantic import ValidationError

        if not isinstance(e, ValidationError):
            raise
        if _located(e)[0][:1] == ("limits",):  # the example file lists no limit
            hint = LIMITS_HINT
        raise ConfigError(f"{where}{_describe(e)}", hint=hint) from None
    except RecursionError:
        raise ConfigError(f"{where}nested too deeply", hint="fix the file or move it away") from None


def _accepts(annotation: Any, value: Any) -> bool:
    """Would validation keep `value` exactly as it is for a field of this type? Only the plain
    types flags and environment variables give are recognised; anything else is left to pydantic."""
    if annotation is str or annotation is bool or annotation is int:
        return type(value) is annotation
    if isinstance(annotation, type) and issubclass(annotation, Enum):  # a mode: its text, which the section reads
        return type(value) in (str, annotation) and value in tuple(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        return type(value) is str and value in get_args(annotation)
    if origin is Union or origin is UnionType:
        return any(value is None if arg is type(None) else _accepts(arg, value) for arg in get_args(annotation))
    return False


def plain_layers(merged: dict[str, Any]) -> bool:
    """True when every value is one validation would accept unchanged (a known top-level key,
    its exact plain type, within its bounds): then `Config(**merged)` is what validating would
    give, without importing pydantic."""
    keys, types = section_fields(Config), section_types(Config)
    for key, value in merged.items():
        if key not in keys or not _accepts(types[key], value):
            return False
        for name, bound in keys[key].metadata.items():
            if name == "description" or value is None:
                continue
            check = BOUNDS.get(name)  # another constraint (a length, a pattern): left to pydantic
            if check is None or not check(value, bound):
                return False
    return True


def guard_search_keys(config: Config) -> tuple[Config, list[str]]:
    """A search provider's key variable must not be the model's key: that key would go to the
    search provider's URL. Returns `config` with each such variable back at its default, and
    a warning for each."""
    ws = config.web_search
    own = {config.api_key_env, "OPENAI_API_KEY"}
    defaults: dict[str, Any] = {}
    warnings: list[str] = []
    for name in ("brave_api_key_env", "tavily_api_key_env"):
        if getattr(ws, name) in own:
            defaults[name] = section_fields(WebSearchConfig)[name].default
            warnings.append(f"web_search.{name} names the model's key variable ${getattr(ws, name)}; "
                            f"using ${defaults[name]} instead, so the model key never goes to a search provider")
    if defaults:
        config = replace(config, web_search=replace(ws, **defaults))
    return config, warnings
