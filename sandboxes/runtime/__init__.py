"""Code that runs inside a sandbox: supervisor, worker and their framing (stdlib only)."""
