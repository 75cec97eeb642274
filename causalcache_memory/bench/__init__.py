"""bench (in progress)."""
