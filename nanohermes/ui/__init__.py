"""Front ends: consumers of the core's event stream (the REPL and the `-p` sinks)."""
