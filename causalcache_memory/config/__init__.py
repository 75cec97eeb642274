"""Configuration: pydantic models and YAML loading."""

from causalcache_memory.config.loader import config_schema, format_validation_error, load_config, parse_config
from causalcache_memory.config.models import (
    AllocationConfig,
    ArchiveConfig,
    CausalCacheConfig,
    CheckpointConfig,
    CompareConfig,
    ExploreConfig,
    IdleWarningConfig,
    OcrConfig,
    OpenAIPolicyConfig,
    PolicyConfig,
    RenderConfig,
    SelectorConfig,
    SGLangPolicyConfig,
    SimulatedPolicyConfig,
    TransformersPolicyConfig,
)

__all__ = [
    "AllocationConfig",
    "ArchiveConfig",
    "CausalCacheConfig",
    "CheckpointConfig",
    "CompareConfig",
    "ExploreConfig",
    "IdleWarningConfig",
    "OcrConfig",
    "OpenAIPolicyConfig",
    "PolicyConfig",
    "RenderConfig",
    "SGLangPolicyConfig",
    "SelectorConfig",
    "SimulatedPolicyConfig",
    "TransformersPolicyConfig",
    "config_schema",
    "format_validation_error",
    "load_config",
    "parse_config",
]
