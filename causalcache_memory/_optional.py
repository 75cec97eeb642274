"""Lazy imports of optional dependencies with an error naming the extra to install."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from causalcache_memory.errors import MissingDependencyError

# module name -> extra of causalcache-memory that installs it
_EXTRAS = {
    "torch": "torch",
    "onnx": "torch",
    "onnxscript": "torch",
    "safetensors": "torch",
    "transformers": "transformers",
    "peft": "transformers",
    "tokenizers": "transformers",
    "langgraph": "langgraph",
    "langchain": "langgraph",
    "langchain_core": "langgraph",
    "matplotlib": "plots",
    "onnxruntime": "",
    "sglang": "sglang",
    "rapidocr_onnxruntime": "ocr",
    "cv2": "ocr",
}


def is_available(module: str) -> bool:
    """True when ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, *, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = _EXTRAS.get(top, "")
        what = f" for {purpose}" if purpose else ""
        if extra:
            hint = f"pip install 'causalcache-memory[{extra}]'"
        else:
            hint = f"pip install {top}"
        if top == "torch":
            hint = "pip install torch==2.13.0 (CPU) then " + hint
        raise MissingDependencyError(f"`{module}` is needed{what} but is not installed: {hint}") from exc
