"""Read rules: a deny or ask rule on reading a path covers every tool that reads it.

A rule on `read_file` with a path pattern (Claude Code's `Read(...)` becomes one) is a rule on
reading: it covers read_file, grep (its hits and the files it searches), glob and list_dir
(their listings), the git tools, edit_file and apply_patch (whose errors quote the file), what
nanohermes reads by itself and sandboxed commands (`nanohermes.guard.readrules` finds the paths on
disk). A rule naming one of the other readers (`grep(...)`, Claude Code's `Grep(...)`) covers
that reader only. A path is covered when the pattern matches it or one of its folders, as a
.gitignore pattern naming a folder covers what is in it. Deny rules come first.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from nanohermes.guard.permissions.rules import Decision, Rule, match_path

READER = "read_file"  # a rule naming it is a rule on reading a file


def folders_of(subject: str) -> list[str]:
    """The subject and each folder above it (`a/b/c`, `a/b`, `a`; `/x/y`, `/x`), as rules see them."""
    out = [subject]
    while True:
        parent = posixpath.dirname(subject.rstrip("/"))
        if parent in ("", "/", subject):
            return out
        out.append(parent)
        subject = parent


@dataclass(frozen=True)
class ReadRules:
    """The deny and ask rules that cover one tool reading a path. Falsy when there are none,
    so a call with no read rule pays nothing for the look."""

    deny: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    # folder subject -> the rule covering it (or None): a walk asks about the same folders often
    _seen: dict[str, tuple[Decision, Rule] | None] = field(default_factory=dict, compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.deny or self.ask)

    def _one(self, subject: str) -> tuple[Decision, Rule] | None:
        if subject in self._seen:
            return self._seen[subject]
        hit: tuple[Decision, Rule] | None = None
        order: tuple[tuple[Decision, tuple[Rule, ...]], ...] = (("deny", self.deny), ("ask", self.ask))
        for decision, rules in order:
            rule = next((r for r in rules if r.pattern is not None and match_path(r.pattern, subject, r.root)), None)
            if rule is not None:
                hit = (decision, rule)
                break
        if len(self._seen) < 100_000:
            self._seen[subject] = hit
        return hit

    def answered(self, subjects: tuple[str, ...]) -> ReadRules:
        """These rules for what a call reaches below its own `subjects`: an ask rule covering a
        subject already asked about the call itself (a person's yes to it covers what is in
        it), so only the deny rules and the other ask rules withhold anything there."""
        own = ReadRules(ask=self.ask)
        asked = {h[1] for s in subjects if (h := own.covering(s)) is not None}
        return ReadRules(self.deny, tuple(r for r in self.ask if r not in asked)) if asked else self

    def covering(self, subject: str) -> tuple[Decision, Rule] | None:
        """("deny" or "ask", the rule) covering the subject (workspace-relative, or absolute
        outside the workspace) or a folder above it; a deny rule before an ask rule."""
        hits = [h for s in folders_of(subject) if (h := self._one(s)) is not None]
        return next((h for h in hits if h[0] == "deny"), hits[0] if hits else None)


def read_rules(deny: tuple[Rule, ...], ask: tuple[Rule, ...], tool_name: str = READER) -> ReadRules:
    """The path rules among `deny` and `ask` that cover `tool_name` reading a file: its own and read_file's."""
    def pick(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        return tuple(r for r in rules if r.pattern and (r.names(tool_name) or r.names(READER)))

    return ReadRules(pick(deny), pick(ask))
