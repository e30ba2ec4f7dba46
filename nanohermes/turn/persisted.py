"""Tool results kept whole in the session's side folder, and the preview the model sees instead.

Two things put a preview in place of a result: the per-message aggregate budget (the runtime,
as results come in) and a context overflow (the compactor, cutting the largest results of the
recent messages). Both save the whole result once, as `<folder>/tool-results/<call id>.txt`,
and leave `<persisted-output path="...">` with the first chars and a note saying how much the
file holds, so the model can read the rest with read_file. Without a session folder
(`--no-session`) nothing is saved and the note says so. A preview can be cut again (a second
overflow) from the preview itself: the file is neither rewritten nor read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from nanohermes.common.dirs import private_dir, write_private
from nanohermes.guard.redact import redact

RESULTS_DIR = "tool-results"
CONTEXT_NOTE = "to fit the model's context"


def free_path(folder: Path, call_id: str) -> Path:
    """A new file name for the result of `call_id` under `folder`/tool-results (created)."""
    where = private_dir(folder / RESULTS_DIR)
    # The id comes from the model: keep it to a safe file name, and never overwrite an
    # earlier result (some endpoints reuse ids such as call_0 in every message).
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", call_id).lstrip(".")[:100] or "call"
    path = where / f"{stem}.txt"
    copy = 1
    while path.exists():
        copy += 1
        path = where / f"{stem}-{copy}.txt"
    return path


def write(path: Path, text: str) -> None:
    write_private(path, redact(text))  # a session file: no keys in it, 0600


def aggregate_preview(path: Path, text: str, n: int) -> str:
    """What the per-message budget leaves in place of a result saved at `path`."""
    return (f'<persisted-output path="{path}">\n{text[:n]}\n'
            f"… {len(text)} chars in all; the full output is in the file above (read it with read_file offset/limit)\n"
            "</persisted-output>")


def cut_preview(path: Path | None, head: str, total: int) -> str:
    """What a context overflow leaves in place of a result of `total` chars: its first chars
    (`head`), how many were cut, and the file that holds them all (None: not saved)."""
    cut = total - len(head)
    if path is None:
        return (f"<cut-output>\n{head}\n… {cut} of {total} chars cut {CONTEXT_NOTE}; not saved, the session is not "
                "recorded: narrow the call to see more\n</cut-output>")
    return (f'<persisted-output path="{path}">\n{head}\n… {cut} of {total} chars cut {CONTEXT_NOTE}; the whole '
            "result is in the file above (read it in parts with read_file offset/limit)\n</persisted-output>")


@dataclass(frozen=True)
class Preview:
    """A preview this module made, read back: the file (None: not saved), the first chars
    shown, and the size of the whole result."""

    path: Path | None
    head: str
    total: int


_HEADER = re.compile(r'<persisted-output path="([^"\n]+)">\n|<cut-output>\n')
_NOTE = re.compile(r"\n… (?:(\d+) chars in all|\d+ of (\d+) chars cut)[^\n]*\n</(persisted|cut)-output>\Z")


def read_preview(text: str, folder: Path | None) -> Preview | None:
    """`text` as a preview made here, or None. A result can quote the markup itself (a file
    that holds a preview, a hostile command's output): a saved one counts only when its file
    is in this session's own results folder, and the file is never opened here."""
    head = _HEADER.match(text)
    note = _NOTE.search(text)
    if head is None or note is None or note.start() < head.end() - 1:
        return None
    saved = head.group(1)
    if (saved is not None) != (note.group(3) == "persisted"):
        return None
    path = Path(saved) if saved is not None else None
    if path is not None and (folder is None or path.parent != folder / RESULTS_DIR):
        return None
    total = int(note.group(1) or note.group(2))
    shown = text[head.end():note.start()] if note.start() >= head.end() else ""
    if len(shown) > total:
        return None
    return Preview(path, shown, total)


def cut(text: str, call_id: str, folder: Path | None, n: int) -> str:
    """`text` (a tool result, or a preview of one) cut to its first `n` chars, the whole
    result saved once; returns `text` unchanged when the cut would not make it shorter."""
    seen = read_preview(text, folder)
    if seen is not None:
        if len(seen.head) <= n:
            return text
        shorter = cut_preview(seen.path, seen.head[:n], seen.total)
        return shorter if len(shorter) < len(text) else text
    path = None
    if folder is not None:
        try:
            path = free_path(folder, call_id)
        except OSError:
            path = None  # a folder that cannot be made: still cut, and say it was not saved
    shorter = cut_preview(path, text[:n], len(text))
    if len(shorter) >= len(text):
        return text  # the note would outweigh what it saves: no file
    if path is not None:
        try:
            write(path, text)
        except OSError:
            shorter = cut_preview(None, text[:n], len(text))
    return shorter if len(shorter) < len(text) else text
