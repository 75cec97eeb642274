"""The HGKV adapter: history-gated rank-8 K/V residuals on the last eight language-model layers.

Paper, "Policy-Preserving History-Gated KV Adapter": ``K_l = W_K h + M_hist ΔW_K h`` and
``V_l = W_V h + M_hist ΔW_V h`` for the last eight layers. :class:`HGKVAdapter` wraps those projections
with :class:`~.layer.HistoryGatedLinear` and implements the runtime's ``ForwardAdapter`` protocol:
``forward_context(model, batch)`` builds the fail-closed gate (:mod:`.gate`) and holds it for the forward
pass. When the batch has no history image the context is absent and the policy is bitwise the frozen
base. The ungated control (``gated=False``) has the same layers, targets, rank and alpha and is active
on every token.

Use with the embedded runtime::

    adapter = HGKVAdapter.load("runs/hgkv/best")               # weights applied on first use
    policy = TransformersPolicy.from_pretrained(model_dir, adapter=adapter)
    with adapter.disable_adapter():                            # the frozen arm
        frozen = policy.score(prompts, targets)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime.hgkv.config import HGKVConfig, language_layers
from causalcache_memory.runtime.hgkv.gate import build_history_gate, model_tokens
from causalcache_memory.runtime.hgkv.layer import GateState, HistoryGatedLinear

if TYPE_CHECKING:
    from causalcache_memory.runtime.qwen_encoding import EncodedBatch

__all__ = ["HGKVAdapter", "HGKVConfig", "language_layers", "resolve_adapter"]


class HGKVAdapter:
    """History-gated (or ungated control) low-rank K/V adapter attached to one model."""

    def __init__(
        self,
        config: HGKVConfig,
        *,
        pending: dict[str, torch.Tensor] | None = None,
        expected_model: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.state = GateState()
        self.modules: dict[str, HistoryGatedLinear] = {}
        self.model: Any = None
        self._pending = pending
        self._expected_model = expected_model or {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def attach(cls, model: Any, config: HGKVConfig | None = None, *, freeze_base: bool = True) -> HGKVAdapter:
        """Wrap the target projections of ``model`` in place and return the adapter (``B = 0``)."""
        adapter = cls(config or HGKVConfig())
        adapter.inject(model, freeze_base=freeze_base)
        return adapter

    def inject(self, model: Any, *, freeze_base: bool = True) -> None:
        """Wrap ``model``'s target projections with this adapter's weights (pending loaded ones applied).

        Everything is checked before the first adapter weight is allocated or the model is touched: the
        model facts saved with the adapter, the layer indices, the rank against every projection's shape
        and the loaded tensors' names, shapes and finiteness.
        """
        if self.model is not None:
            raise ConfigError("this HGKVAdapter is already attached to a model; load a new one per model")
        path, layers = language_layers(model)
        self._check_model(model, len(layers))
        indices = self.config.resolve_layers(len(layers))
        plan = self._plan(path, layers, indices)
        if self._pending is not None:
            self._check_tensors(self._pending, plan)
        self.config = HGKVConfig(**{**self.config.__dict__, "layers": indices})
        if freeze_base:
            model.requires_grad_(False)
        for name, attn, target, base in plan:
            wrapper = HistoryGatedLinear(
                base, r=self.config.r, alpha=self.config.alpha, gated=self.config.gated, state=self.state
            )
            setattr(attn, target, wrapper)
            self.modules[name] = wrapper
        self.model = model
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.load_state_dict(pending)

    def _plan(
        self, path: str, layers: nn.ModuleList, indices: tuple[int, ...]
    ) -> list[tuple[str, Any, str, nn.Linear]]:
        """``(module name, attention module, target, base projection)`` of every projection to wrap."""
        plan = []
        for i in indices:
            attn = layers[i].self_attn
            for target in self.config.target_modules:
                name = f"{path}.{i}.self_attn.{target}"
                base = getattr(attn, target, None)
                if isinstance(base, HistoryGatedLinear):
                    raise ConfigError(f"{name} already carries an HGKV adapter")
                if not isinstance(base, nn.Linear):
                    raise ConfigError(
                        f"{name} is {type(base).__name__}, not the nn.Linear projection HGKV wraps"
                    )
                self.config.check_rank(name, base.in_features, base.out_features)
                plan.append((name, attn, target, base))
        return plan

    def _check_tensors(
        self, tensors: dict[str, torch.Tensor], plan: list[tuple[str, Any, str, nn.Linear]]
    ) -> None:
        """Loaded tensors against the projections they will be copied into (before any allocation)."""
        from causalcache_memory.runtime.hgkv.io import check_tensors

        want = {}
        for name, _, _, base in plan:
            want[f"base_model.model.{name}.lora_A.weight"] = (self.config.r, base.in_features)
            want[f"base_model.model.{name}.lora_B.weight"] = (base.out_features, self.config.r)
        self._check_keys(set(want), set(tensors))
        for key, shape in want.items():
            if tuple(tensors[key].shape) != shape:
                raise ConfigError(
                    f"adapter tensor {key} has shape {tuple(tensors[key].shape)} but this model needs "
                    f"{shape}; the adapter was trained for a model of a different shape"
                )
        check_tensors(tensors, self.config.r, source=self._expected_model.get("source", "adapter weights"))

    @staticmethod
    def _check_keys(own: set[str], given: set[str]) -> None:
        missing = sorted(own - given)
        extra = sorted(given - own)
        if missing or extra:
            raise ConfigError(
                f"adapter weights do not match this model: missing {missing[:4]} unexpected {extra[:4]} "
                f"({len(missing)} missing, {len(extra)} unexpected); was it trained for another model?"
            )

    def _check_model(self, model: Any, total: int) -> None:
        """A loaded adapter goes only into a model like the one it was saved from (layer count, type)."""
        facts = self._expected_model
        source = facts.get("source", "the adapter files")
        saved = facts.get("num_hidden_layers")
        if saved is not None and saved != total:
            raise ConfigError(
                f"{source}: the adapter was saved from a model with {saved} language-model layers, but this "
                f"model has {total}; its layer indices would land on the wrong layers. Load it into the "
                "model it was trained for"
            )
        saved_type = facts.get("model_type")
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if saved_type is not None and model_type is not None and saved_type != model_type:
            raise ConfigError(
                f"{source}: the adapter was saved from a {saved_type!r} model, this one is {model_type!r}"
            )

    def detach(self) -> None:
        """Put the original projections back (the adapter weights are kept in this object)."""
        if self.model is None:
            return
        for name, wrapper in self.modules.items():
            parent_name, target = name.rsplit(".", 1)
            wrapper.unmerge()
            setattr(self.model.get_submodule(parent_name), target, wrapper.base_layer)
        self.model = None

    # ------------------------------------------------------------------ the ForwardAdapter protocol
    @contextlib.contextmanager
    def forward_context(self, model: Any, batch: EncodedBatch) -> Iterator[None]:
        """Hold the history gate of ``batch`` for the forward pass(es) over it.

        The first use of a loaded adapter attaches it to ``model``. The gate is built fail-closed
        (:func:`~.gate.build_history_gate`); with no history image in the batch, or for the ungated
        control, no gate is installed.
        """
        if self.model is None:
            self.inject(model, freeze_base=True)
        elif model is not self.model:
            raise ConfigError("this HGKVAdapter is attached to another model; load one adapter per model")
        if not self.config.gated or self.state.disabled:
            yield
            return
        if self.state.mask is not None:
            raise ConfigError("HGKV forward contexts cannot be nested (a gate is already installed)")
        gate = build_history_gate(batch, model_tokens(model))
        if not bool(gate.any()):
            yield  # no restored history image: the adapter context is absent
            return
        self.state.mask = gate.to(self.device)
        self.state.prefilled.clear()
        try:
            yield
        finally:
            self.state.mask = None
            self.state.prefilled.clear()

    @contextlib.contextmanager
    def disable_adapter(self) -> Iterator[None]:
        """Run the frozen policy: every wrapped projection returns its base output."""
        previous = self.state.disabled
        self.state.disabled = True
        try:
            yield
        finally:
            self.state.disabled = previous

    # ------------------------------------------------------------------ weights
    @property
    def device(self) -> torch.device:
        first = next(iter(self.modules.values()), None)
        return first.A.device if first is not None else torch.device("cpu")

    def parameters(self) -> list[torch.Tensor]:
        """The trainable adapter weights (``A`` and ``B`` of every wrapped projection)."""
        return [p for m in self.modules.values() for p in (m.A, m.B)]

    def l2_penalty(self) -> torch.Tensor:
        """``sum_l ||ΔW_l||_F^2`` over every wrapped projection (the paper's ``||ΔW||^2``)."""
        return torch.stack([m.delta_weight().pow(2).sum() for m in self.modules.values()]).sum()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """peft-style keys: ``base_model.model.<module>.lora_A.weight`` / ``lora_B.weight``."""
        out = {}
        for name, module in self.modules.items():
            out[f"base_model.model.{name}.lora_A.weight"] = module.A.detach().cpu().contiguous()
            out[f"base_model.model.{name}.lora_B.weight"] = module.B.detach().cpu().contiguous()
        return out

    @torch.no_grad()
    def load_state_dict(self, tensors: dict[str, torch.Tensor]) -> None:
        """Copy peft-style tensors in; missing, unexpected, mis-shaped or non-finite ones raise :class:`ConfigError`."""
        from causalcache_memory.runtime.hgkv.io import check_tensors

        own = self.state_dict()
        self._check_keys(set(own), set(tensors))
        for key, value in tensors.items():
            if tuple(value.shape) != tuple(own[key].shape):
                raise ConfigError(
                    f"adapter tensor {key} has shape {tuple(value.shape)} but this model needs "
                    f"{tuple(own[key].shape)}; the adapter was trained for a model of a different shape"
                )
        check_tensors(tensors, self.config.r, source="load_state_dict")
        for name, module in self.modules.items():
            module.A.copy_(tensors[f"base_model.model.{name}.lora_A.weight"])
            module.B.copy_(tensors[f"base_model.model.{name}.lora_B.weight"])

    def merge(self) -> None:
        """Fold the ungated control into the base weights; a gated adapter raises.

        Merging a gated adapter would apply ``ΔW`` to every token (instruction, current screen,
        actions), which is not the trained model.
        """
        if self.config.gated:
            raise ConfigError(
                "a history-gated HGKV adapter cannot be merged into the base weights: merging would apply "
                "the residual to every token; keep it as a runtime adapter (only gated=False may merge)"
            )
        for module in self.modules.values():
            module.merge()

    # ------------------------------------------------------------------ files
    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``adapter_model.safetensors`` + ``adapter_config.json`` (peft) + ``hgkv_config.json``."""
        from causalcache_memory.runtime.hgkv.io import save_adapter

        return save_adapter(self, directory)

    @classmethod
    def load(cls, directory: str | Path, model: Any = None) -> HGKVAdapter:
        """Read a saved adapter; with ``model`` attach now, else on the first ``forward_context``."""
        from causalcache_memory.runtime.hgkv.io import read_adapter, read_model_facts

        config, tensors = read_adapter(directory)
        adapter = cls(config, pending=tensors, expected_model=read_model_facts(directory))
        if model is not None:
            adapter.inject(model, freeze_base=True)
        return adapter


def resolve_adapter(value: Any) -> Any:
    """What a runtime's ``adapter=`` argument means: None (frozen), a saved adapter directory (loaded
    lazily, attached on first use; gated or ungated per its ``hgkv_config.json``) or an adapter object
    (returned as is)."""
    if value is None or hasattr(value, "forward_context"):
        return value
    if isinstance(value, (str, Path)):
        return HGKVAdapter.load(value)
    raise ConfigError(
        f"adapter={value!r} must be None, an adapter directory or an object with forward_context(model, batch)"
    )
