"""Dataclasses made from JSON data that already has their fields' exact types, without pydantic.

pydantic validates tool arguments (and config files), and importing it and building a validator
costs a `-p` run tens of milliseconds and ten MiB, mostly for arguments that need nothing done:
each field given a value of its own type (a string for `str`, a list of strings for
`list[str]`), within its bounds. `made(cls, data)` builds such data into the dataclass directly
(its `__post_init__` runs as under pydantic) and says `NOT_PLAIN` for anything else: a value
of another type (that pydantic may coerce, or refuse), a missing or unknown field, a bound
broken, a `__post_init__` that raises, a field type or constraint this module does not read.
Then pydantic judges, so its result and its error message stay the only ones: what is built
here is what pydantic builds from the same data (`tests/test_plaindata.py` compares them).

Read: `str`, `int` (not a bool), `float` (a whole number too), `bool`, `Any`, `None`, `Literal` of strings, an
`Enum` (by its value, as pydantic takes it), unions of those, `list[...]`, `dict[str, ...]`,
and nested dataclasses; the constraints `ge`, `gt`, `le`, `lt`, `min_length`, `max_length`.
A key that is no field's is never dropped here (pydantic forbids or ignores it, as the class
says). `drop_nulls`: an optional field (one with a default) given null is taken as not given,
as `tools.base.Params` has pydantic do for its classes and every such class nested in them.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union

NOT_PLAIN: Any = object()  # "not built here: pydantic judges"

Check = Callable[[Any], Any]  # a value -> the value built, or NOT_PLAIN
_DESCRIBING = frozenset({"description", "json_schema_extra", "title", "examples"})  # no check
_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "ge": lambda v, b: v >= b, "gt": lambda v, b: v > b, "le": lambda v, b: v <= b, "lt": lambda v, b: v < b}
_LENGTHS: dict[str, Callable[[int, Any], bool]] = {"min_length": lambda n, b: n >= b, "max_length": lambda n, b: n <= b}
_EXACT: dict[Any, type] = {str: str, int: int, bool: bool, type(None): type(None)}


class _Unread(Exception):
    """A type or constraint this module does not read: the class is pydantic's alone."""


def made(cls: type[Any], data: Any, drop_nulls: Callable[[type[Any]], bool] = lambda c: False) -> Any:
    """`cls` built from `data`, or NOT_PLAIN (see the module). `drop_nulls(c)`: does class `c`
    (the one asked for, or one nested in it) take an optional field's null as not given?"""
    plan = _plan(cls, drop_nulls)
    return NOT_PLAIN if plan is None else plan(data)


_PLANS: dict[tuple[type[Any], Callable[[type[Any]], bool]], Check | None] = {}


def _plan(cls: type[Any], drop_nulls: Callable[[type[Any]], bool]) -> Check | None:
    key = (cls, drop_nulls)
    if key not in _PLANS:
        _PLANS[key] = None  # a class nested in itself is pydantic's
        try:
            _PLANS[key] = _class_check(cls, drop_nulls)
        except (_Unread, NameError, TypeError, AttributeError):
            pass
    return _PLANS[key]


def _class_check(cls: type[Any], drop_nulls: Callable[[type[Any]], bool]) -> Check:
    """How a dict becomes `cls`: each field's check, which fields may be left out, and then the
    class's own construction (its `__post_init__`)."""
    if "__dataclass_fields__" not in cls.__dict__:
        raise _Unread(cls)
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]  # the others are the class's own state
    checks = {f.name: _bounded(_check(hints[f.name], drop_nulls), f.metadata) for f in fields}
    optional = frozenset(f.name for f in fields if f.default is not dataclasses.MISSING
                         or f.default_factory is not dataclasses.MISSING)
    required = frozenset(checks) - optional
    nulls_dropped = drop_nulls(cls)

    def build(value: Any) -> Any:
        if type(value) is not dict:
            return NOT_PLAIN
        given = {k: v for k, v in value.items() if v is not None or k not in optional} if nulls_dropped else value
        if not required <= given.keys() or not given.keys() <= checks.keys():
            return NOT_PLAIN
        args = {name: checks[name](v) for name, v in given.items()}
        if any(v is NOT_PLAIN for v in args.values()):
            return NOT_PLAIN
        try:
            return cls(**args)
        except Exception:  # a check of the class's own: pydantic says it in its words
            return NOT_PLAIN

    return build


def _check(hint: Any, drop_nulls: Callable[[type[Any]], bool]) -> Check:
    """The check of a value against the type `hint`."""
    if hint is Any:
        return lambda v: v
    if hint is float:
        return _float
    if hint in _EXACT:
        wanted = _EXACT[hint]
        return lambda v: v if type(v) is wanted else NOT_PLAIN
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        if not all(type(a) is str for a in args):
            raise _Unread(hint)
        allowed = frozenset(args)
        return lambda v: v if type(v) is str and v in allowed else NOT_PLAIN
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _member_of(hint)
    if origin in (Union, types.UnionType):
        return _first_of([_check(a, drop_nulls) for a in args])
    if origin is list and len(args) == 1:
        return _list_of(_check(args[0], drop_nulls))
    if origin is dict and len(args) == 2 and args[0] is str:
        return _dict_of(_check(args[1], drop_nulls))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        nested = _plan(hint, drop_nulls)
        if nested is None:
            raise _Unread(hint)
        return nested
    raise _Unread(hint)


def _float(v: Any) -> Any:
    """A float field: a float, or a whole number as pydantic takes it (`timeout: 60` is 60.0)."""
    if type(v) is float:
        return v
    try:
        return float(v) if type(v) is int else NOT_PLAIN
    except OverflowError:
        return NOT_PLAIN


def _member_of(kind: type[enum.Enum]) -> Check:
    """An Enum field: its member, or the member whose value is given (as pydantic takes it)."""
    by_value = {m.value: m for m in kind}
    if not all(type(v) is str for v in by_value):
        raise _Unread(kind)

    def check(v: Any) -> Any:
        if type(v) is kind:
            return v
        return by_value.get(v, NOT_PLAIN) if type(v) is str else NOT_PLAIN
    return check


def _first_of(checks: list[Check]) -> Check:
    # Checks are exact: a value passes at most the one member of its own type, which is the
    # member pydantic's smart union picks for it too.
    def check(v: Any) -> Any:
        for one in checks:
            if (out := one(v)) is not NOT_PLAIN:
                return out
        return NOT_PLAIN
    return check


def _list_of(item: Check) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not list:
            return NOT_PLAIN
        out = [item(x) for x in v]
        return NOT_PLAIN if any(x is NOT_PLAIN for x in out) else out
    return check


def _dict_of(value: Check) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not dict or not all(type(k) is str for k in v):
            return NOT_PLAIN
        out = {k: value(x) for k, x in v.items()}
        return NOT_PLAIN if any(x is NOT_PLAIN for x in out.values()) else out
    return check


def _bounded(check: Check, metadata: Any) -> Check:
    """`check`, then the field's bounds (`ge`, `min_length`, ... in its metadata, as
    `tools.base.about` and the config's fields put them)."""
    bounds = [(_BOUNDS[k], b) for k, b in metadata.items() if k in _BOUNDS]
    lengths = [(_LENGTHS[k], b) for k, b in metadata.items() if k in _LENGTHS]
    if any(k not in _BOUNDS and k not in _LENGTHS and k not in _DESCRIBING for k in metadata):
        raise _Unread(dict(metadata))
    if not bounds and not lengths:
        return check

    def bounded(v: Any) -> Any:
        out = check(v)
        if out is NOT_PLAIN or out is None:
            return out
        if bounds and (type(out) not in (int, float) or not all(within(out, b) for within, b in bounds)):
            return NOT_PLAIN
        if lengths and (type(out) not in (str, list, dict) or not all(fits(len(out), b) for fits, b in lengths)):
            return NOT_PLAIN
        return out
    return bounded


__all__ = ["NOT_PLAIN", "made"]
