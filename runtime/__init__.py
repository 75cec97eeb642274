"""Policy runtimes (installed as ``causalcache_memory.runtime``): transformers, SGLang, OpenAI-compatible.

Nothing heavy is imported here; each runtime module imports its dependencies when used.
"""
