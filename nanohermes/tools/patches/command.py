"""A patch sent as a shell command, read as the apply_patch call it stands for.

Models trained on Codex write their edits as `apply_patch <<'EOF' ... EOF` (or `applypatch`,
or the patch as one quoted argument, or as the argv Codex's shell takes: `["bash", "-lc",
"apply_patch <<'EOF' ..."]`) through the shell tool, and Codex intercepts the command
instead of running it. Here there is no such program, so the command would fail with "command
not found" and the edit would be lost: `patch_call` turns such a run_command call into the
apply_patch call, before anything judges it, so it is approved as an edit of the files it
names. Only a command that is nothing but the patch is read so (`cd <dir> &&` before it, or
the call's `cwd`, puts the patch's relative paths under that folder); anything else runs as
the shell command it is.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any

from nanohermes.common.messages import ToolCall

_NAMES = ("apply_patch", "applypatch")
# `[cd <dir> &&] apply_patch <<['"]DELIM['"]\n<patch>\nDELIM`, nothing after it but blanks.
_HEREDOC = re.compile(
    r"\A\s*(?:cd\s+(?P<dir>'[^']*'|\"[^\"]*\"|[^\s;&|<>]+)\s*&&\s*)?(?P<name>apply_patch|applypatch)\s*"
    r"<<-?\s*(?P<q>['\"]?)(?P<delim>[A-Za-z_][\w.-]*)(?P=q)[ \t]*\n(?P<body>.*?)\n[ \t]*(?P=delim)[ \t]*\s*\Z",
    re.DOTALL)

NOTE = ("(this command was run as the apply_patch tool: a patch sent through the shell is applied like one sent to "
        "apply_patch, which takes the same text)")


def patch_text(command: str) -> tuple[str, str | None] | None:
    """(the patch, the folder a `cd` before it names, or None) when `command` is only an
    apply_patch invocation; None for any other command."""
    m = _HEREDOC.match(command)
    if m is not None:
        folder = m.group("dir")
        return m.group("body") + "\n", (_unquote(folder) if folder else None)
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 2 and words[0] in _NAMES:
        from nanohermes.tools.patches.begin_patch import mentions_begin  # here: an ordinary command never loads it

        if mentions_begin(words[1]) or "\n@@" in words[1]:
            return words[1], None
    return None


def _unquote(word: str) -> str:
    return word[1:-1] if word[:1] in "'\"" and word[-1:] == word[:1] else word


def patch_call(call: ToolCall) -> ToolCall | None:
    """The apply_patch call a run_command call stands for, with the same id; None when it is
    an ordinary command (or its arguments do not parse: the runtime reports that as it is)."""
    if call.name != "run_command":
        return None
    try:
        args: Any = json.loads(call.arguments)
    except ValueError:
        return None
    if not isinstance(args, dict) or args.get("background"):
        return None
    command = args.get("command")
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        # Codex's shell takes argv: ["apply_patch", patch] or ["bash", "-lc", "apply_patch <<'EOF' ..."].
        if len(command) == 3 and command[0] in ("bash", "sh", "zsh") and command[1] in ("-c", "-lc"):
            command = command[2]
        elif len(command) == 2 and command[0] in _NAMES:
            command = shlex.join(command)
    if not isinstance(command, str):
        return None
    found = patch_text(command)
    if found is None:
        return None
    patch, folder = found
    cwd = args.get("cwd")
    base = os.path.join(cwd, folder) if isinstance(cwd, str) and cwd and folder else (folder or cwd)
    if isinstance(base, str) and base and os.path.normpath(base) != ".":
        from nanohermes.tools.patches.begin_patch import mentions_begin, rebase_paths  # only a patch gets here

        if not mentions_begin(patch):
            return None  # a unified diff's paths under another folder: the shell's to fail, not ours to guess
        patch = rebase_paths(base, patch)
    return ToolCall(id=call.id, name="apply_patch", arguments=json.dumps({"diff": patch}, ensure_ascii=False),
                    extra=call.extra, cut_off=call.cut_off)


__all__ = ["NOTE", "patch_call", "patch_text"]
