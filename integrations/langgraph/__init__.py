"""LangGraph drop-in memory (in progress)."""
