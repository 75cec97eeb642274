"""Put a retrained model's OOD guard into the bundled selector, after checking its scorer is the bundle's.

Compares the ONNX weights (every initializer, bitwise), the other ONNX metadata entries and the other
``metadata.json`` sections of ``NEW`` (a model directory retrained from the bundle's recipe) with those of
``BUNDLE``, prints what differs, and with ``--apply`` copies only the guard (the ``causalcache.ood`` ONNX
entry and ``metadata.json`` → ``ood``) into ``BUNDLE``; it refuses when any weight differs.

    causalcache train selector --recipe examples/selector_recipe_worlds.yaml --skip-ablation \\
        --output-dir runs/refit/model
    python lab/tools/selector_bundle_guard.py runs/refit/model causalcache_memory/assets/selector --apply
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper


def _weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def compare(new: Path, bundle: Path) -> dict[str, object]:
    """What differs between the two model directories: weights (bool), ONNX entries, metadata sections."""
    a, b = onnx.load(str(new / "selector.onnx")), onnx.load(str(bundle / "selector.onnx"))
    wa, wb = _weights(a), _weights(b)
    pa = {p.key: p.value for p in a.metadata_props}
    pb = {p.key: p.value for p in b.metadata_props}
    ma = json.loads((new / "metadata.json").read_text())
    mb = json.loads((bundle / "metadata.json").read_text())
    return {
        "initializers": len(wb),
        "weights_identical": wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa),
        "onnx_entries_differing": sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k)),
        "metadata_sections_differing": sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)),
    }


def apply_guard(new: Path, bundle: Path) -> None:
    """Copy the guard of ``new`` into ``bundle`` (ONNX entry ``causalcache.ood``, metadata ``ood``)."""
    source = {p.key: p.value for p in onnx.load(str(new / "selector.onnx")).metadata_props}
    target = onnx.load(str(bundle / "selector.onnx"))
    for entry in target.metadata_props:
        if entry.key == "causalcache.ood":
            entry.value = source["causalcache.ood"]
    onnx.save(target, str(bundle / "selector.onnx"))
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["ood"] = json.loads((new / "metadata.json").read_text())["ood"]
    (bundle / "metadata.json").write_text(json.dumps(meta, indent=1, sort_keys=True))  # as save_model writes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("new", type=Path, help="retrained model directory")
    parser.add_argument("bundle", type=Path, help="bundled model directory")
    parser.add_argument("--apply", action="store_true", help="copy the guard when the weights are identical")
    args = parser.parse_args(argv)
    report = compare(args.new, args.bundle)
    print(json.dumps(report))
    if not args.apply:
        return 0
    if not report["weights_identical"]:
        print("refused: the retrained scorer's weights differ from the bundle's")
        return 1
    apply_guard(args.new, args.bundle)
    print(json.dumps(compare(args.new, args.bundle)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
