"""The safety core: may a call run, and how confined (the gate, permissions, the command catalogue,
the sandbox, trust, secrets, path rules, programs, git metadata, hosts, redaction, the person's hooks)."""
