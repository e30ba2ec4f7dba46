"""The tool-calling protocol a real provider enforces, checked on every conversation the fakes
receive: each tool call answered by exactly one result after it, no orphan results, valid
roles; for chat completions and for the Responses API's input items."""

from __future__ import annotations

from typing import Any

VALID_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def _role(msg: Any) -> Any:
    return msg.get("role") if isinstance(msg, dict) else None


def check_protocol(messages: Any) -> list[str]:
    """Return descriptions of tool-calling protocol violations in `messages`."""
    if not isinstance(messages, list) or not messages:
        return ["'messages' must be a non-empty list"]
    problems: list[str] = []
    i = 0
    while i < len(messages):
        msg, role = messages[i], _role(messages[i])
        start, i = i, i + 1
        if role not in VALID_ROLES:
            problems.append(f"messages[{start}] has invalid role {role!r}")
            continue
        if role == "tool":
            # Tool messages inside a valid block are consumed below; reaching one here
            # means it does not directly follow the assistant message that made the call.
            problems.append(
                f"messages[{start}] (tool) answers tool_call_id {msg.get('tool_call_id')!r} "
                "which is not a tool call of the immediately preceding assistant message"
            )
            continue
        calls = msg.get("tool_calls") if role == "assistant" else None
        if not calls:
            continue
        pending: list[str] = []
        for k, call in enumerate(calls):
            cid = call.get("id") if isinstance(call, dict) else None
            if isinstance(cid, str) and cid:
                pending.append(cid)
            else:
                problems.append(f"messages[{start}] (assistant) tool_calls[{k}] has no id")
        answered: set[str] = set()
        # The results must follow contiguously (in any order); consume that run of tool messages.
        while i < len(messages) and _role(messages[i]) == "tool":
            tid = messages[i].get("tool_call_id")
            if not isinstance(tid, str):
                problems.append(f"messages[{i}] (tool) has no tool_call_id")
            elif tid in pending:
                pending.remove(tid)
                answered.add(tid)
            elif tid in answered:
                problems.append(f"messages[{i}] (tool) answers tool_call_id {tid!r} a second time")
            else:
                problems.append(f"messages[{i}] (tool) answers unknown tool_call_id {tid!r}")
            i += 1
        if pending:
            where = f"before messages[{i}] ({_role(messages[i])})" if i < len(messages) else "at the end of the conversation"
            problems.append(f"messages[{start}] (assistant) tool call id(s) {pending} have no tool result {where}")
    return problems


def check_responses_protocol(items: Any) -> list[str]:
    """The Responses API's form of `check_protocol`: every function_call answered by exactly
    one function_call_output after it, no output without its call, no item ids (with
    store=false the server keeps no items to refer to)."""
    if not isinstance(items, list) or not items:
        return ["'input' must be a non-empty list"]
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"input[{k}] is not an object")
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") not in VALID_ROLES:
            problems.append(f"input[{k}] has invalid role {item.get('role')!r}")
        if item.get("id") and kind in ("reasoning", "message", "function_call"):
            problems.append(f"input[{k}] ({kind}) refers to item id {item['id']!r}, but items are not stored")
        if kind == "reasoning" and not item.get("encrypted_content"):
            problems.append(f"input[{k}] (reasoning) has no encrypted_content")
        cid = item.get("call_id")
        if kind == "function_call":
            if not isinstance(cid, str) or not cid:
                problems.append(f"input[{k}] (function_call) has no call_id")
            else:
                calls[cid] = k
        elif kind == "function_call_output":
            if cid not in calls:
                problems.append(f"input[{k}] (function_call_output) answers unknown call_id {cid!r}")
            elif cid in answered:
                problems.append(f"input[{k}] (function_call_output) answers call_id {cid!r} a second time")
            answered.add(str(cid))
    missing = [c for c in calls if c not in answered]
    if missing:
        problems.append(f"function call(s) {missing} have no function_call_output")
    return problems
