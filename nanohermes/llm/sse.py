"""A response body read as server-sent events: the first line (a byte order mark dropped),
then each event as (name, parsed data), llama.cpp's `error:` lines as error events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from nanohermes.llm.failures import is_error_body


async def first_line(lines: AsyncIterator[str]) -> str | None:
    """The first line that is not blank, or None when the body ends first. One byte order mark
    at the very start of the body is dropped, as the event-stream format says: left in, it
    would turn the first `data:` line into an unknown field and lose that event."""
    start = True
    async for line in lines:
        if start:
            line, start = line.removeprefix("\ufeff"), False
        if line.strip():
            return line
    return None


async def prepend(first: str | None, lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """`lines` with `first` before them again (the first line was read to tell a stream from a whole answer)."""
    if first is not None:
        yield first
        async for line in lines:
            yield line


def json_or_none(raw: bytes) -> Any:
    """The JSON in `raw`, or None when it is blank or not JSON."""
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, Any]]:
    """Server-sent events as (event name, parsed data); "[DONE]" comes through as the string.
    llama.cpp reports a failure mid-stream on an `error:` line, read here as an error event."""
    name: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield name, _event_data("\n".join(data))
            name, data = None, []
            continue
        if line.startswith(":"):
            continue  # quirk: stream.comment-keepalive (OpenRouter's ": OPENROUTER PROCESSING")
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "data":
            data.append(value)
        elif key == "event":
            name = value
        elif key == "error":  # quirk: stream.error-line
            parsed = json_or_none(value.encode())
            yield "error", parsed if is_error_body(parsed) else {"error": parsed if isinstance(parsed, dict) else {"message": value}}
    if data:
        yield name, _event_data("\n".join(data))


def _event_data(text: str) -> Any:
    if text.strip() == "[DONE]":
        return "[DONE]"
    return json.loads(text)
