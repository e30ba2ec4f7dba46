"""The one assembly rule, checked over generated calls: every way servers split tool calls
into fragments gives back the same calls."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nanohermes.llm.chat import CallAssembler

NAMES = ["read_file", "grep", "run_command"]
calls_st = st.lists(st.tuples(st.sampled_from(NAMES), st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=3)),
                    min_size=1, max_size=4)


def pieces(text: str, n: int) -> list[str]:
    n = max(1, n)
    return [text[i:i + n] for i in range(0, len(text), n)] or [""]


def openai_style(calls: list[tuple[str, dict[str, Any]]], size: int) -> list[dict[str, Any]]:
    """Index on every fragment, id and name once, argument pieces interleaved across calls."""
    heads = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": n, "arguments": ""}}
             for i, (n, _) in enumerate(calls)]
    rest = [[{"index": i, "function": {"arguments": p}} for p in pieces(json.dumps(a), size)] for i, (_, a) in enumerate(calls)]
    out = list(heads)
    while any(rest):
        for r in rest:
            if r:
                out.append(r.pop(0))
    return out


def ollama_style(calls: list[tuple[str, dict[str, Any]]], size: int) -> list[dict[str, Any]]:
    """Every call whole, all at index 0, each with its own id."""
    return [{"index": 0, "id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)]


def sglang_style(calls: list[tuple[str, dict[str, Any]]], size: int) -> list[dict[str, Any]]:
    """Each call in pieces, one after the other, all at index 0; the name repeated on each piece."""
    out: list[dict[str, Any]] = []
    for i, (n, a) in enumerate(calls):
        out.append({"index": 0, "id": f"c{i}", "type": "function", "function": {"name": n, "arguments": ""}})
        out += [{"index": 0, "function": {"name": n, "arguments": p}} for p in pieces(json.dumps(a), size)]
    return out


def lmstudio_style(calls: list[tuple[str, dict[str, Any]]], size: int) -> list[dict[str, Any]]:
    """LM Studio: a new id on every fragment of one call, at that call's index, the name on the
    first fragment only."""
    out: list[dict[str, Any]] = []
    for i, (n, a) in enumerate(calls):
        out.append({"index": i, "id": f"c{i}", "type": "function", "function": {"name": n, "arguments": ""}})
        out += [{"index": i, "id": f"c{i}-{k}", "type": "function", "function": {"arguments": p}}
                for k, p in enumerate(pieces(json.dumps(a), size))]
    return out


def object_style(calls: list[tuple[str, dict[str, Any]]], size: int) -> list[dict[str, Any]]:
    """llama.cpp: the arguments as an object, a `functions.` prefix on the name."""
    return [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": f"functions.{n}", "arguments": a}}
            for i, (n, a) in enumerate(calls)]


@settings(max_examples=150, deadline=None)
@given(calls=calls_st, size=st.integers(1, 7), style=st.sampled_from([openai_style, ollama_style, sglang_style, lmstudio_style,
                                                                          object_style]))
def test_every_fragment_style_gives_back_the_calls(calls: list[tuple[str, dict[str, Any]]], size: int, style: Any) -> None:
    assembler = CallAssembler(frozenset(NAMES))
    for fragment in style(calls, size):
        assembler.feed(fragment)
    got = assembler.result()
    assert [(c.id, c.name) for c in got] == [(f"c{i}", n) for i, (n, _) in enumerate(calls)]
    assert [json.loads(c.arguments) for c in got] == [a for _, a in calls]


@settings(max_examples=50, deadline=None)
@given(args=st.dictionaries(st.sampled_from("xyz"), st.text(max_size=5), max_size=3), size=st.integers(1, 5))
def test_gemini_style_index_less_pieces_form_one_call(args: dict[str, str], size: int) -> None:
    text = json.dumps(args)
    first, *rest = pieces(text, size)
    assembler = CallAssembler(frozenset(NAMES))
    assembler.feed({"id": "g", "type": "function", "function": {"name": "grep", "arguments": first}})
    for p in rest:
        assembler.feed({"function": {"arguments": p}})
    (call,) = assembler.result()
    assert (call.id, call.name, json.loads(call.arguments)) == ("g", "grep", args)


def empty_object_opening_style(calls: list[tuple[str, dict[str, Any]]], size: int, opening: Any) -> list[dict[str, Any]]:
    """The opening fragment carries empty-object arguments, then the real ones stream as text."""
    out: list[dict[str, Any]] = []
    for i, (n, a) in enumerate(calls):
        out.append({"index": i, "id": f"c{i}", "type": "function", "function": {"name": n, "arguments": opening}})
        out += [{"index": i, "function": {"arguments": p}} for p in pieces(json.dumps(a), size)]
    return out


@settings(max_examples=80, deadline=None)
@given(calls=calls_st, size=st.integers(1, 7), opening=st.sampled_from([{}, "{}", "{ }", ""]))
def test_an_empty_object_opening_fragment_is_a_placeholder(calls: list[tuple[str, dict[str, Any]]], size: int,
                                                           opening: Any) -> None:
    assembler = CallAssembler(frozenset(NAMES))
    for fragment in empty_object_opening_style(calls, size, opening):
        assembler.feed(fragment)
    got = assembler.result()
    assert [c.arguments for c in got] == [json.dumps(a) for _, a in calls]


def test_empty_object_arguments_alone_or_with_blank_pieces_stay_an_empty_object() -> None:
    for tail in ([], [""], [" "]):
        assembler = CallAssembler(frozenset(NAMES))
        assembler.feed({"index": 0, "id": "c0", "type": "function", "function": {"name": "grep", "arguments": {}}})
        for p in tail:
            assembler.feed({"index": 0, "function": {"arguments": p}})
        (call,) = assembler.result()
        assert json.loads(call.arguments) == {}
