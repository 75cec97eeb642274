"""The learned budget-aware restoration selector.

Labels (true policy utilities of complete exact-B allocations), per-event features, the set-conditional
marginal scorer (PyTorch, in ``selector.model`` / ``selector.train``, imported only on use), the exact-B
beam, ONNX export and onnxruntime inference, the allocation policy and the chooser ladder.
Importing this package loads neither torch nor onnxruntime.
"""

from .beam import BeamResult, beam_search
from .features import CONTEXT_SCHEMA, FEATURE_SCHEMA, FeatureExtractor, context_features, schema_hash
from .labels import LabelConfig, read_labels, run_labelling
from .ladder import LadderConfig, format_table, run_ladder
from .onnx_scorer import OnnxSelector
from .policy import LearnedSelectorPolicy, bundled_model_path

__all__ = [
    "CONTEXT_SCHEMA",
    "FEATURE_SCHEMA",
    "BeamResult",
    "FeatureExtractor",
    "LabelConfig",
    "LadderConfig",
    "LearnedSelectorPolicy",
    "OnnxSelector",
    "beam_search",
    "bundled_model_path",
    "context_features",
    "format_table",
    "read_labels",
    "run_labelling",
    "run_ladder",
    "schema_hash",
]
