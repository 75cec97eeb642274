"""hgkv (in progress)."""
