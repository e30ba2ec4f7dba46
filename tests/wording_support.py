"""The pinned-message tests' one helper: does a text read exactly as pinned.

Each message a person or the model reads is pinned once, in a tests/test_wording_*.py module
of its area: a table of (scenario, exact text). The other tests assert what was decided (the
kind, the path, the count, the bytes on disk), so rewording a message changes one row there."""

from __future__ import annotations

import re


def said(text: str, pattern: str, **values: str) -> bool:
    """`text` is `pattern` exactly, its {names} filled in from `values` and each {any} standing
    for what the system adds (an OS error's words)."""
    parts = [re.escape(p.format(**values)) for p in pattern.split("{any}")]
    return re.fullmatch(".*?".join(parts), text, re.S) is not None
