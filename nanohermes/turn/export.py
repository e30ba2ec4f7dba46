"""The conversation as Markdown for people (prompts, answers, each tool call and its result),
or as JSON for programs (a name ending in `.json`), written by /export in the REPL and in `-p`.
The model's thinking (its thinking field, and
thinking written into its answer's text, `llm.thinktags`) is a folded `<details>` block before
its answer (in JSON, its message's `thinking`), never tags inside it; the history itself keeps the message as the model sent it."""

from __future__ import annotations

import json
import re
import time
from typing import Any
from pathlib import Path

from nanohermes.common.messages import Message
from nanohermes.guard.redact import redact
from nanohermes.common.messages import SUMMARY_TAG, is_summary
from nanohermes.common.budget import plural
from nanohermes.llm.thinktags import message_parts

# Where the model's view of a compacted conversation starts, in the export.
SUMMARY_HEADING = ("## Summary (the conversation above was compacted into this; from here on the model saw it in "
                   "place of the messages above)")


def export(history: list[Message], session: str, workspace: Path, name: str = "") -> Path:
    """Write the conversation (`Session.whole`) as Markdown, or JSON for a name ending in
    `.json` (keys redacted), to `name`, relative to the workspace (default: a dated Markdown
    file there); returns where. In the REPL and in `-p`."""
    path = Path(name.strip() or f"conversation-{time.strftime('%Y%m%d-%H%M%S')}.md").expanduser()
    path = path if path.is_absolute() else workspace / path
    path.parent.mkdir(parents=True, exist_ok=True)
    text = conversation_json(history, session) if path.suffix.lower() == ".json" else \
        conversation_markdown(history, session)
    path.write_text(redact(text), encoding="utf-8")
    return path


def conversation_json(history: list[Message], session: str = "") -> str:
    """The conversation for programs: `{"session", "messages"}`, each message with its `role`
    and `content`; the model's with its `thinking` apart and its `tool_calls`; a result with
    its `tool_call_id`; a compaction's summary marked `summary`."""
    messages: list[dict[str, Any]] = []
    for m in history:
        out: dict[str, Any] = {"role": m.role, "content": m.content or ""}
        if m.role == "assistant":
            thinking, out["content"] = message_parts(m)
            if thinking.strip():
                out["thinking"] = thinking
            if m.tool_calls:
                out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
        if m.tool_call_id is not None:
            out["tool_call_id"] = m.tool_call_id
        if is_summary(m):
            out["summary"] = True
        messages.append(out)
    return json.dumps({"session": session, "messages": messages}, ensure_ascii=False, indent=2) + "\n"


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
            thinking, said = message_parts(m)
            if thinking.strip():
                out += [_folded("Thinking", thinking.strip()), ""]
            if said.strip():
                out += [said, ""]
            for c in m.tool_calls:
                out += [f"Tool call: **{c.name}**", "", _fenced(c.arguments, "json"), ""]
        elif m.role == "tool":
            out += ["Result:", "", _fenced(m.content or ""), ""]
    return "\n".join(out).rstrip() + "\n"


def _folded(title: str, text: str) -> str:
    """A `<details>` block (folded where Markdown renders HTML) around `text`, which cannot
    close it early."""
    body = re.sub(r"</details\s*>", "&lt;/details&gt;", text, flags=re.IGNORECASE)
    return f"<details><summary>{title}</summary>\n\n{body}\n\n</details>"


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
