"""The front matter of the Markdown files nanohermes reads by itself as Claude Code writes them
(command files, agent files): YAML between two `---` lines, read leniently.

Claude Code reads a value it cannot parse as YAML as the text it is, and files copied from it
rely on that: `argument-hint: [--no-delete] [--no-tag]` is no valid YAML (a flow list followed
by more text), nor is `description: Use when: the tests fail` (a colon in a plain value). So
the block is parsed whole first; when that fails, each top-level key is parsed on its own, and
a key whose value still does not parse keeps its text. What cannot be read even so (a line
that is no `key: value`, a block that is no mapping) is a `FrontMatterError` naming the line,
which the caller names to the person with the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

FRONT = re.compile(r"\A---[ \t]*\r?\n(?:(.*?)\r?\n)?---[ \t]*(?:\r?\n|\Z)", re.S)
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]|$)(.*)$")
_COMMA = re.compile(r",(?![^()]*\))")  # a comma outside parentheses: `Bash(git add:*), Read`


class FrontMatterError(ValueError):
    """Front matter that cannot be read, even leniently; says where."""


@dataclass(frozen=True)
class FrontMatter:
    """The keys of a file's front matter and the body after it."""

    values: dict[str, Any] = field(default_factory=dict)  # as YAML read them, or their text where it could not
    written: dict[str, str] = field(default_factory=dict)  # each top-level key's value as written
    body: str = ""

    def text(self, key: str) -> str:
        """A value meant as text: a string as YAML read it, anything else as written (so that
        `argument-hint: [pr-number]`, a list to YAML, stays `[pr-number]`)."""
        value = self.values.get(key)
        if value is None:
            return ""
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, (list, dict)):
            return _unquoted(self.written.get(key, "").strip()) or str(value)
        return str(value).strip()  # a number or a boolean

    def names(self, key: str) -> list[str] | None:
        """A list of names, written as a YAML list or as one comma-separated string
        (`Read, Grep, Bash(git add:*)`); None when the key is absent or empty."""
        value = self.values.get(key)
        if value is None:
            return None
        items = value if isinstance(value, list) else _COMMA.split(str(value))
        out = [str(i).strip() for i in items if i is not None and str(i).strip()]
        return out


def split(text: str) -> FrontMatter:
    """The front matter of `text` (none when it does not start with a `---` line) and its body."""
    m = FRONT.match(text)
    if not m:
        return FrontMatter(body=text)
    block, body = m.group(1) or "", text[m.end():]
    import yaml  # only for a file with front matter

    try:
        loaded = yaml.safe_load(block)
    except yaml.YAMLError:
        loaded = None
    else:
        if loaded is None:
            return FrontMatter(body=body)
        if isinstance(loaded, dict):
            try:
                written = _written(block)
            except FrontMatterError:  # YAML read more than `key: value` lines: nothing to keep as written
                written = {}
            return FrontMatter({str(k): v for k, v in loaded.items()}, written, body)
    written = _written(block)
    return FrontMatter(_each_key(written), written, body)


def _written(block: str) -> dict[str, str]:
    """Each top-level key's value as written (its first line, then its indented lines and
    list items)."""
    out: dict[str, str] = {}
    key = None
    for n, line in enumerate(block.splitlines(), start=2):  # line 1 is the opening `---`
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[:1] in (" ", "\t") or stripped.startswith("- "):
            if key is None:
                what = "a list item" if stripped.startswith("- ") else "indented"
                raise FrontMatterError(f"front matter line {n} is {what} under no key: {_shown(line)}")
            out[key] += "\n" + line
            continue
        m = _KEY.match(line)
        if m is None:
            raise FrontMatterError(f"front matter line {n} is not `key: value`: {_shown(line)}")
        key = m.group(1)
        out[key] = m.group(2)
    return out


def _each_key(written: dict[str, str]) -> dict[str, Any]:
    """The keys parsed one by one; a value YAML cannot read is kept as its text."""
    # yaml only for front matter the plain reader cannot take
    import yaml

    values: dict[str, Any] = {}
    for key, raw in written.items():
        try:
            one = yaml.safe_load(f"{key}: {raw}")
        except yaml.YAMLError:
            one = None
        if isinstance(one, dict) and key in one:
            values[key] = one[key]
        else:
            values[key] = _unquoted(" ".join(part.strip() for part in raw.splitlines()).strip())
    return values


def _unquoted(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _shown(line: str) -> str:
    return repr(line if len(line) <= 60 else line[:60] + "…")
