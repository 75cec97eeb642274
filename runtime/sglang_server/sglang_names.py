"""Every SGLang 0.5.23 name the serving package relies on, and an AST checker for an unpacked wheel.

:func:`check_source` reads ``sglang/`` source files with :mod:`ast` (nothing is imported, so it runs on a
machine without CUDA) and reports each name that is missing or whose signature, fields or attributes
changed. The opt-in drift-guard test (marker ``sglang_drift``) runs it on the pinned wheel fetched with
``pip download --no-deps sglang==0.5.23``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REQUIRED", "Required", "check_source"]


@dataclass(frozen=True)
class Required:
    """One thing the plugin needs in ``sglang/<path>``.

    Attributes:
        path: file under the ``sglang`` package directory.
        name: ``Class``, ``Class.method``, ``function`` or a module-level constant.
        kind: ``class`` | ``function`` (``items`` = leading parameters, in order) | ``fields`` (annotated
            class attributes) | ``assigns`` (``self.<x> = ...`` in the function) | ``calls`` (the function
            calls ``self.<item>(...)``) | ``constant`` (module-level assignment) | ``strings`` (string
            literals present in the file) | ``class_attrs`` (plain class-body assignments).
        items: what must be there for the kind.
        why: what the plugin uses it for.
    """

    path: str
    name: str
    kind: str
    items: tuple[str, ...] = ()
    why: str = ""


_Q25 = "srt/models/qwen2_5_vl.py"
_Q3 = "srt/models/qwen3_vl.py"
_SB = "srt/managers/schedule_batch.py"
_FB = "srt/model_executor/forward_batch_info.py"
_ENTRY = ("self", "input_ids", "positions", "forward_batch")

REQUIRED: tuple[Required, ...] = (
    Required(_Q25, "Qwen2_5_VLForConditionalGeneration", "class", why="subclassed, registered by name"),
    Required(
        _Q25, "Qwen2_5_VLForConditionalGeneration.forward", "function", _ENTRY, "gate before the forward"
    ),
    Required(_Q25, "Qwen2_5_VLForConditionalGeneration.load_weights", "function", ("self", "weights")),
    Required(_Q25, "Qwen2_5_VLForConditionalGeneration.__init__", "assigns", ("config", "model")),
    Required(_Q3, "Qwen3VLForConditionalGeneration", "class", why="subclassed, registered by name"),
    Required(_Q3, "Qwen3VLForConditionalGeneration.forward", "function", _ENTRY),
    Required(_Q3, "Qwen3VLForConditionalGeneration.load_weights", "function", ("self", "weights")),
    Required(_Q3, "Qwen3VLForConditionalGeneration.__init__", "assigns", ("config", "model")),
    Required("srt/models/qwen2.py", "Qwen2Model.__init__", "assigns", ("layers",)),
    Required(
        "srt/models/qwen2.py",
        "Qwen2Attention.__init__",
        "assigns",
        ("hidden_size", "total_num_heads", "num_heads", "q_size", "kv_size", "qkv_proj"),
        "fused Q|K|V column layout",
    ),
    Required("srt/models/qwen2.py", "Qwen2Attention.forward", "calls", ("qkv_proj",), "hook on qkv_proj"),
    Required(
        "srt/models/qwen3.py",
        "Qwen3Attention.__init__",
        "assigns",
        ("hidden_size", "total_num_heads", "num_heads", "q_size", "kv_size", "qkv_proj"),
    ),
    Required("srt/models/qwen3.py", "Qwen3Attention.forward_prepare_native", "calls", ("qkv_proj",)),
    Required(_SB, "MM_PAD_SHIFT_VALUE", "constant", why="radix sentinel range"),
    Required(_SB, "_MM_WIDE_PAD_MASK", "constant"),
    Required(
        _SB,
        "MultimodalDataItem",
        "fields",
        ("modality", "hash", "pad_value", "offsets", "model_specific_data", "identity", "pad_values"),
    ),
    Required(_SB, "MultimodalDataItem.set_pad_value", "function", ("self",)),
    Required(_SB, "MultimodalDataItem.padding_values", "function", ("self",)),
    Required(_SB, "MultimodalDataItem.is_image", "function", ("self",)),
    Required(_SB, "MultimodalProcessorOutput", "fields", ("mm_items", "input_ids", "padded_input_ids")),
    Required(_SB, "MultimodalProcessorOutput.build_padded_input_ids", "function", ("input_ids", "mm_items")),
    Required(_SB, "MultimodalInputs", "fields", ("mm_items",)),
    Required(
        "srt/multimodal/processors/qwen_vl.py",
        "QwenVLImageProcessor.process_mm_data_async",
        "function",
        ("self", "image_data", "input_text", "request_obj"),
        "roles applied after the stock processing",
    ),
    Required("srt/multimodal/processors/qwen_vl.py", "QwenVLImageProcessor", "class_attrs", ("models",)),
    Required(
        _FB,
        "ForwardBatch",
        "fields",
        (
            "forward_mode",
            "mm_inputs",
            "extend_prefix_lens_cpu",
            "extend_seq_lens_cpu",
            "extend_prefix_lens",
            "extend_seq_lens",
        ),
    ),
    Required(_FB, "ForwardMode.is_extend", "function", ("self",)),
    Required(_FB, "ForwardMode.is_target_verify", "function", ("self",)),
    Required(
        "srt/managers/io_struct.py",
        "GenerateReqInput",
        "fields",
        (
            "text",
            "image_data",
            "sampling_params",
            "return_logprob",
            "logprob_start_len",
            "rid",
            "mm_processor_kwargs",
            "mm_hashes",
        ),
    ),
    Required("srt/models/registry.py", "import_model_classes", "function", ("package_name",)),
    Required(
        "srt/managers/multimodal_processor.py", "import_processors", "function", ("package_name", "overwrite")
    ),
    Required(
        "srt/environ.py",
        "Envs",
        "class_attrs",
        ("SGLANG_EXTERNAL_MODEL_PACKAGE", "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE", "SGLANG_VLM_CACHE_SIZE_MB"),
    ),
    Required(
        "srt/arg_groups/field_order.py",
        "server flags",
        "strings",
        (
            "model_path",
            "host",
            "port",
            "tp_size",
            "attention_backend",
            "mm_attention_backend",
            "chunked_prefill_size",
            "mem_fraction_static",
            "enable_deterministic_inference",
            "cuda_graph_backend_decode",
            "cuda_graph_backend_prefill",
            "skip_server_warmup",
            "random_seed",
        ),
        "flags causalcache serve passes",
    ),
    Required("launch_server.py", "launch_server", "strings", ("__main__",), "python -m sglang.launch_server"),
    Required("srt/entrypoints/http_server.py", "flush_cache", "function", (), "self-check, GPU checks"),
)


def _find(tree: ast.Module, dotted: str) -> ast.AST | None:
    node: ast.AST = tree
    for part in dotted.split("."):
        body = getattr(node, "body", [])
        found = None
        for child in body:
            if (
                isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and child.name == part
            ):
                found = child
        if found is None:
            return None
        node = found
    return node


def _self_targets(func: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(func):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out.add(t.attr)
    return out


def _self_calls(func: ast.AST) -> set[str]:
    return {
        n.func.attr
        for n in ast.walk(func)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "self"
    }


def _class_names(cls: ast.ClassDef, annotated: bool) -> set[str]:
    out = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif not annotated and isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def _check(req: Required, tree: ast.Module) -> str | None:
    if req.kind == "strings":
        found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        missing = [s for s in req.items if s not in found]
        return f"strings {missing} not found" if missing else None
    if req.kind == "constant":
        names = {
            t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        return None if req.name in names else "module constant missing"
    node = _find(tree, req.name)
    if node is None:
        return "not defined"
    if req.kind == "class":
        return None if isinstance(node, ast.ClassDef) else "not a class"
    if req.kind in ("fields", "class_attrs"):
        if not isinstance(node, ast.ClassDef):
            return "not a class"
        missing = [f for f in req.items if f not in _class_names(node, req.kind == "fields")]
        return f"missing class attributes {missing}" if missing else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "not a function"
    if req.kind == "function":
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        if params[: len(req.items)] != list(req.items):
            return f"parameters {params} do not start with {list(req.items)}"
        return None
    if req.kind == "assigns":
        missing = [a for a in req.items if a not in _self_targets(node)]
        return f"no self.{missing} assignment" if missing else None
    if req.kind == "calls":
        missing = [a for a in req.items if a not in _self_calls(node)]
        return f"no self.{missing}(...) call" if missing else None
    return f"unknown kind {req.kind!r}"


def check_source(root: str | Path, required: tuple[Required, ...] = REQUIRED) -> list[str]:
    """Problems found in the ``sglang`` package directory ``root`` (empty: every name is as expected)."""
    base = Path(root)
    problems = []
    trees: dict[str, ast.Module | None] = {}
    for req in required:
        if req.path not in trees:
            file = base / req.path
            trees[req.path] = ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else None
        tree = trees[req.path]
        problem = "file missing" if tree is None else _check(req, tree)
        if problem:
            problems.append(f"sglang/{req.path}: {req.name} ({req.kind}): {problem}")
    return problems
