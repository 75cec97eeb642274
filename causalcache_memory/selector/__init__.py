"""selector (in progress)."""
