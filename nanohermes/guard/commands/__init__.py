"""The catalogue of commands: everything the permission checks know about a program, one
entry per command (`table.py`; git's in `git.py`).

An entry (`entry.Command`) says, as data, whether the command is read-only and which options
make it unsafe (`find -exec`, `sed -i`, `git -c`), which of its words name files it reads
(every operand, the pattern first for a searcher, `date -f FILE`, folders whole with
`grep -r`) or writes (tee), how it runs another command given on its line (env, timeout,
xargs, `bash -c`, find -exec), why a builtin's form is not modelled (`export -f`, `test -v`),
what an "always" answer learns of it (`git log <args>`, `pytest -q <args>`, or the exact line),
and its subcommands as entries of their own (git's). Its readers:
- the shell analysis (`shellparse`): wrappers seen through, builtins marked, operands written;
- the analyser (`permissions.decide`): `is_read_only`, `unanalysable`, `reads_secret`;
- the path rules (`pathrules`: secret files, read rules, protected writes): `read_operands`;
- the learned rules (`permissions.commands.suggest_command_rule`): `learned_shape`, `exact_only`.

Parts: `entry` (the shape of an entry), `table` (the entries), `git`, `checks` (argument
checks of sed, awk, uniq ...), `builtins` (the builtins' problems), and the queries over a
`SimpleCommand`: `running`, `reading`, `learning`. Import from `nanohermes.guard.commands` (or
`nanohermes.guard.permissions`, which re-exports the queries).
"""

from __future__ import annotations

from nanohermes.guard.commands.entry import Command, Leading, Options, Reads, Wraps
from nanohermes.guard.commands.git import git_globals
from nanohermes.guard.commands.learning import exact_only, learned_shape
from nanohermes.guard.commands.reading import option_reads, read_operands, reads_secret
from nanohermes.guard.commands.running import (
    code_from_stdin, dangerous_assign, harmless_assign, is_read_only, prints_files, unanalysable, uncertain_word,
)
from nanohermes.guard.commands.table import CATALOGUE, ENTRIES, lookup

__all__ = [
    "CATALOGUE", "ENTRIES", "Command", "Leading", "Options", "Reads", "Wraps", "code_from_stdin", "dangerous_assign",
    "exact_only", "git_globals", "harmless_assign", "is_read_only", "learned_shape", "lookup", "option_reads",
    "prints_files", "read_operands", "reads_secret", "unanalysable", "uncertain_word",
]
