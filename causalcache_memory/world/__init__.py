"""world (in progress)."""
