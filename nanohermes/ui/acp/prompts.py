"""What an editor's prompt becomes, and the commands it may start with.

A prompt's blocks become one message: text as it is; a resource link as the path or URI it
names; an embedded resource (a file or a selection the editor sends whole) as a `<file
path=...>` block after them, clamped as an `@` mention is; an image as an image of the
message when the model takes images (`images_to_model`), else a note saying it was left out.
What the person wrote is theirs (its `@path` mentions attach files, a `/name` runs a command);
an embedded file's text is the file's, whoever wrote it: nothing in it is read as a mention
or as a command's arguments. A prompt starting
with `/name` runs nanohermes's `/init` or `/export` or a custom command (Claude Code's and ours)
as `-p` runs them; the editor lists `init` and the custom commands (`commands_of`) without the
slash.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from acp import schema as s

import nanohermes.ui.acp.updates as updates
from nanohermes.common.budget import clamp
from nanohermes.common.errors import NanohermesError, UsageError
from nanohermes.common.messages import Image
from nanohermes.extensions import custom_commands

if TYPE_CHECKING:
    from nanohermes.config import Config
    from nanohermes.turn.agent import TurnResult
    from nanohermes.ui.acp.state import Live

INIT = updates.Command("init", "Study the repository and write (or improve) AGENTS.md, in one turn",
                       "what else AGENTS.md should say")
STOP_REASONS = {"completed": "end_turn", "max_turns": "max_turn_requests", "interrupted": "cancelled",
                "error": "refusal"}
# A final answer the endpoint stopped short (its finish_reason): not the end the model meant.
CUT_REASONS = {"length": "max_tokens", "content_filter": "refusal"}


def stop_reason(result: TurnResult) -> str:
    """The protocol's stop reason of a finished turn."""
    return CUT_REASONS.get(result.cut, STOP_REASONS[result.reason])


def _path_of(uri: str, workspace: Path) -> str:
    """A file URI's path (relative to the workspace inside it); any other URI as it is."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    path = unquote(parsed.path)
    try:
        return Path(path).relative_to(workspace).as_posix()
    except ValueError:
        return path


@dataclass
class Prompt:
    """An editor's prompt, read: the person's text, the files the editor embedded (appended
    as they are), the images, and notes for the person on what was left out."""

    text: str = ""
    context: str = ""
    images: tuple[Image, ...] = ()
    notes: list[str] = field(default_factory=list)


def prompt_input(blocks: list[Any], config: Config, workspace: Path) -> Prompt:
    """The prompt the blocks make (see the module's docstring)."""

    parts: list[str] = []
    files: list[str] = []
    images: list[Image] = []
    notes: list[str] = []
    limit = config.build_limits().max_output
    for block in blocks:
        if isinstance(block, s.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, s.ResourceContentBlock):
            parts.append(_path_of(block.uri, workspace))
        elif isinstance(block, s.EmbeddedResourceContentBlock):
            res = block.resource
            where = _path_of(res.uri, workspace)
            if isinstance(res, s.TextResourceContents):
                files.append(f'<file path="{where}">\n{clamp(res.text, limit)}\n</file>')
            elif (res.mime_type or "").startswith("image/") and config.images_to_model:
                images.append(Image(res.mime_type or "", res.blob, where))
            else:
                notes.append(f"{where} is not text, so it was left out of the prompt")
        elif isinstance(block, s.ImageContentBlock):
            if config.images_to_model:
                images.append(Image(block.mime_type, block.data, block.uri or ""))
            else:
                notes.append("an image was left out of the prompt: this model is not set up to take images "
                             "(config images_to_model)")
        else:
            notes.append(f"a {getattr(block, 'type', 'kind of')} block was left out of the prompt: nanohermes sends "
                         "text, files and images")
    return Prompt("\n\n".join(p for p in parts if p), "\n\n".join(files), tuple(images), notes)


def commands_of(live: Live) -> list[updates.Command]:
    """`init` and the custom commands of the session's folder (a REPL command's name hides a
    custom one, as it does in the REPL), in name order. Their files are read by the session's
    own reader, as running them reads them: one a read rule covers, or that cannot run, is
    not offered, and nothing of it reaches the editor."""
    # the REPL's commands (rich): only when an editor lists or runs one
    from nanohermes.ui.commands import load_commands

    builtins = load_commands()
    found = custom_commands.discover(live.workspace, live.agent.runtime.own_reader).commands
    listed = [INIT]
    for name, c in sorted(found.items()):
        builtin = builtins.get(name)
        if builtin is None or builtin.source:
            listed.append(updates.Command(c.name, c.description or f"custom command ({os.path.basename(c.where)})",
                                          c.argument_hint))
    return listed


async def run_prompt(live: Live, prompt: Prompt) -> str:
    """Run the prompt's turn and return its stop reason. A prompt of text goes the way `-p`
    sends one (`custom_commands.ask`: `/init`, `/export` and the custom commands run, the rest
    is the model's), the embedded files after it; a command that cannot run here, or that
    ends without doing its job, is said in the answer. A prompt with images is the model's as
    it is."""
    # the REPL's commands (rich): only when an editor runs one
    from nanohermes.ui.commands import repl_command

    agent = live.agent
    if prompt.images:
        whole = "\n\n".join(p for p in (prompt.text, prompt.context) if p)
        return stop_reason(await agent.ask(whole, prompt.images))
    command = prompt.text.lstrip().startswith("/")
    try:
        result = await custom_commands.ask(agent, prompt.text, context=prompt.context, repl=repl_command)
    except UsageError:
        if not command:
            raise
        name = custom_commands.split(prompt.text)[0]
        live.ui.send(updates.message_chunk(f"/{name} is a command of the terminal REPL; here `/init`, `/export` and "
                                           "the custom commands run. To ask the model about it, put the question in "
                                           "words."))
        return "end_turn"
    except NanohermesError as e:
        if not command:
            raise
        live.ui.send(updates.message_chunk(e.message + (f"\n\nhint: {e.hint}" if e.hint else "")))
        return "end_turn"
    if result.turns == 0 and result.text:  # a command that did its job without the model (/export): what it did
        live.ui.send(updates.message_chunk(result.text))
    return stop_reason(result)
