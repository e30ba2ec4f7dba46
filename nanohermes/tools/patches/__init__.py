"""The patch formats apply_patch reads, apart from the tool (`nanohermes.tools.patch`):
`unified` (unified diffs as `git diff` and `diff -u` write them), `begin_patch` (the
`*** Begin Patch` format OpenAI's models write), `common` (what both share: the error, the
outcome of one file, lines with their endings), and `command` (a patch sent through
run_command, read as the apply_patch call it stands for). Each format parses and applies
without touching the disk; the tool reads, checks and writes.

This file imports nothing: a part imports the part it needs.
"""
