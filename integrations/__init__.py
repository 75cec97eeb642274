"""Agent-framework integrations (installed as ``causalcache_memory.integrations``). LangGraph first."""
