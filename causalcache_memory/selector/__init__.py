"""The learned budget-aware restoration selector at run time: features, ONNX scorer, exact-B beam.

Inference only: per-event features, onnxruntime scoring of conditioning sets, the exact-B beam from
Recent-B and :class:`SelectorAllocator`. Labels, the PyTorch scorer, training, ONNX export and the
allocation ladder live in :mod:`causalcache_lab.selector`. Importing this package loads neither torch
nor onnxruntime.
"""

from causalcache_memory.selector.allocator import SelectorAllocator, bundled_model_path
from causalcache_memory.selector.beam import BeamResult, beam_search
from causalcache_memory.selector.features import (
    CONTEXT_SCHEMA,
    FEATURE_SCHEMA,
    FeatureExtractor,
    context_features,
    schema_hash,
)
from causalcache_memory.selector.onnx_scorer import OnnxScorer

__all__ = [
    "CONTEXT_SCHEMA",
    "FEATURE_SCHEMA",
    "BeamResult",
    "FeatureExtractor",
    "OnnxScorer",
    "SelectorAllocator",
    "beam_search",
    "bundled_model_path",
    "context_features",
    "schema_hash",
]
