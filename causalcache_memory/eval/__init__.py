"""eval (in progress)."""
