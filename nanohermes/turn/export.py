"""The conversation as Markdown for people (prompts, answers, each tool call and its result),
written by /export in the REPL and in `-p`."""

from __future__ import annotations

import re
import time
from pathlib import Path

from nanohermes.common.messages import Message
from nanohermes.guard.redact import redact
from nanohermes.common.messages import SUMMARY_TAG, is_summary
from nanohermes.common.budget import plural

# Where the model's view of a compacted conversation starts, in the export.
SUMMARY_HEADING = ("## Summary (the conversation above was compacted into this; from here on the model saw it in "
                   "place of the messages above)")


def export(history: list[Message], session: str, workspace: Path, name: str = "") -> Path:
    """Write the conversation (`Session.whole`) as Markdown (keys redacted) to `name`,
    relative to the workspace (default: a dated file there); returns where. In the REPL and
    in `-p`."""
    path = Path(name.strip() or f"conversation-{time.strftime('%Y%m%d-%H%M%S')}.md").expanduser()
    path = path if path.is_absolute() else workspace / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact(conversation_markdown(history, session)), encoding="utf-8")
    return path


def conversation_markdown(history: list[Message], session: str = "") -> str:
    """The conversation for people: prompts, answers, and each tool call with its result;
    a compaction's summary where the model's view started again from it."""
    out = [f"# nanohermes conversation{f' {session}' if session else ''}", ""]
    for m in history:
        if is_summary(m):
            body = (m.content or "").removeprefix(SUMMARY_TAG).replace("</conversation-summary>", "", 1).strip()
            out += [SUMMARY_HEADING, "", body, ""]
        elif m.role == "user":
            out += ["## You", "", m.content or "", ""]
        elif m.role == "assistant":
            out += ["## nanohermes", ""]
            if m.content:
                out += [m.content, ""]
            for c in m.tool_calls:
                out += [f"Tool call: **{c.name}**", "", _fenced(c.arguments, "json"), ""]
        elif m.role == "tool":
            out += ["Result:", "", _fenced(m.content or ""), ""]
    return "\n".join(out).rstrip() + "\n"


def _fenced(text: str, lang: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def exported_line(count: int, summarised: int, path: Path) -> str:
    """What /export says it wrote: the whole conversation, and how many of its first
    messages the model now sees only as a summary."""
    tail = f" (the whole session: the model now sees the first {summarised} as a summary)" if summarised else ""
    return f"exported {plural(count, 'message')}{tail} to {path}"
