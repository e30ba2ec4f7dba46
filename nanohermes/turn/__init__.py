"""The turn: the agent loop, the runtime that executes tool calls, the session, its context,
compaction, the context window, checkpoints."""
