"""The vocabulary every layer shares: limits, events and the UI protocol, messages, modes, folders,
errors, exits, control characters. It imports nothing else of nanohermes."""
