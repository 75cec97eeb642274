"""Mixing label files of several sources into one training set, with stated weights.

Sources measure utility in different units (a mean token log-likelihood, an agreement rate, a 0/1
evidence indicator). Each source's values are first divided by its scale ``s = mean |Q(S') - Q(S)|`` over
its labelled swaps (1 when all are 0), so every source contributes gains of unit size; then a source of
weight ``w`` contributes each of its records ``floor(w)`` times plus once more with probability
``w - floor(w)`` (a stable hash of the record key decides). Weight 1 = each record once.
The mix is described in the training header (``config.sources``), which the model's metadata keeps.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_lab.selector.labels import read_labels

__all__ = ["mix_labels", "source_scale"]


def source_scale(records: list[dict[str, Any]]) -> float:
    """``mean |q - q_base|`` over the nonzero labelled swaps of ``records`` (1.0 when none)."""
    gains = [abs(float(q) - float(g["q_base"])) for r in records for g in r["groups"] for q in g["q"]]
    nonzero = [g for g in gains if g > 0]
    return float(np.mean(nonzero)) if nonzero else 1.0


def _scaled(record: dict[str, Any], scale: float) -> dict[str, Any]:
    rec = copy.deepcopy(record)
    for g in rec["groups"]:
        g["q_base"] = float(g["q_base"]) / scale
        g["q"] = [float(q) / scale for q in g["q"]]
    rec["anchor"] = float(rec["anchor"]) / scale
    for p in rec.get("path", []):
        p["q"] = float(p["q"]) / scale
    return rec


def _copies(key: str, weight: float) -> int:
    whole = math.floor(weight)
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0**64
    return whole + (1 if u < weight - whole else 0)


def mix_labels(
    files: Mapping[str, str | Path], weights: Mapping[str, float]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(header, records)`` of the weighted mix of ``files`` (source name -> labels file)."""
    records: list[dict[str, Any]] = []
    described = []
    labellers = []
    for name, path in files.items():
        header, recs = read_labels(path)
        scale = source_scale(recs)
        weight = float(weights[name])
        added = 0
        for rec in recs:
            for _ in range(_copies(f"{name}:{rec['key']}", weight)):
                records.append(_scaled(rec, scale))
                added += 1
        src = dict(header.get("source") or {"source": "teacher_forced", "model": header.get("labeller")})
        described.append(
            {**src, "name": name, "weight": weight, "scale": scale, "records": len(recs), "used": added}
        )
        labellers.append(str(header.get("labeller")))
    header = {
        "labeller": "+".join(labellers),
        "config_hash": hashlib.sha256(repr(described).encode()).hexdigest()[:16],
        "config": {"sources": described},
    }
    return header, records
