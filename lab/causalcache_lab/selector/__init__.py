"""Selector training and evaluation: labels, the PyTorch set scorer, training, ONNX export, the ladder.

Labels are true policy utilities of complete exact-B allocations; the scorer is trained on them and
exported to ONNX for :mod:`causalcache_memory.selector` (inference). Torch is imported on use.
"""

from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling
from causalcache_lab.selector.ladder import LadderConfig, format_table, run_ladder

__all__ = ["LabelConfig", "LadderConfig", "format_table", "read_labels", "run_labelling", "run_ladder"]
