"""The person's hook commands and what they speak: Claude Code's matchers, tool names, `if`
conditions and transcript, and the exports SessionStart hooks leave. The gate consults them; they
are not part of the safety core."""
