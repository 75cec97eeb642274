"""``causalcache config validate FILE`` and ``causalcache config schema``."""

from __future__ import annotations

import argparse
import json
import sys


def _validate(args: argparse.Namespace) -> int:
    from causalcache_memory.config import CausalCacheConfig, load_config

    config = load_config(args.file, CausalCacheConfig)
    if config.policy.kind is not None:  # runtimes live in the runtime layer: checked here, not in the core
        from causalcache_memory.runtime.registry import lookup_runtime

        lookup_runtime(config.policy.kind)
    print(
        f"{args.file}: valid (budget={config.budget}, allocator={config.allocation.allocator}, "
        f"policy={config.policy.kind}, archive={config.archive.url})"
    )
    if args.show:
        print(json.dumps(config.model_dump(mode="json"), indent=2))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from causalcache_memory.config import config_schema

    json.dump(config_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="validate a YAML config or print the config JSON schema")
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    validate = sub.add_parser("validate", help="validate FILE and report every problem at once")
    validate.add_argument("file")
    validate.add_argument("--show", action="store_true", help="print the resolved config with defaults")
    validate.set_defaults(handler=_validate)
    schema = sub.add_parser("schema", help="print the JSON schema of the config")
    schema.set_defaults(handler=_schema)
