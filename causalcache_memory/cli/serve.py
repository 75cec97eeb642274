"""``causalcache serve``: SGLang 0.5.23 with the HGKV plugin, checked active before it reports ready.

Runs ``python -m sglang.launch_server`` with

* ``SGLANG_EXTERNAL_MODEL_PACKAGE`` / ``SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE`` naming the causalcache
  model and processor packages, ``CAUSALCACHE_HGKV_ADAPTER`` (absolute adapter directory; omitted: the
  frozen model with role-keyed caching), ``CAUSALCACHE_HGKV_EXPECT`` (``--expect-*``), and
  ``SGLANG_VLM_CACHE_SIZE_MB`` (vision-encoder reuse of repeated screenshots; SGLang forces 0 for Qwen3-VL
  on large Hopper GPUs unless set);
* ``--tp-size 1 --cuda-graph-backend-prefill disabled`` and a profile: ``deterministic`` (``--enable-deterministic-inference --attention-backend
  fa3 --mm-attention-backend sdpa --random-seed 0``; the radix cache stays on with fa3) for bitwise checks,
  ``fast`` (``--attention-backend fa3 --mem-fraction-static 0.85 --chunked-prefill-size 8192``) for
  throughput. Never ``--disable-radix-cache``: pass 2 reuses pass 1's prefix.

Then it waits for ``/health``, runs :func:`~causalcache_memory.runtime.sglang_server.selfcheck.self_check`
(SGLang only logs a failed plugin import and serves the stock model) and prints the URL only if the plugin
is proven active; otherwise it stops the server and exits 1. With ``--gateway-url`` (an SGLang Model
Gateway already routing to this server) the same probes then go through the gateway
(:func:`~causalcache_memory.runtime.sglang_server.selfcheck.gateway_self_check`): a gateway that drops the
image roles (smg in gRPC mode) stops the server too, with what to change. Arguments after ``--`` go to
SGLang.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROFILES = {
    "deterministic": [
        "--enable-deterministic-inference",
        "--attention-backend",
        "fa3",
        "--mm-attention-backend",
        "sdpa",
        "--random-seed",
        "0",
    ],
    "fast": ["--attention-backend", "fa3", "--mem-fraction-static", "0.85", "--chunked-prefill-size", "8192"],
}


def sglang_command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """``(argv, extra environment)`` of the SGLang server process."""
    from causalcache_memory.runtime.sglang_server import MODEL_PACKAGE, PROCESSOR_PACKAGE
    from causalcache_memory.runtime.sglang_server.plugin import ADAPTER_ENV, EXPECT_ENV

    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(args.model)]
    argv += ["--host", args.host, "--port", str(args.port), "--tp-size", "1"]
    # the hook's per-pass work is data dependent: never inside a prefill CUDA graph (off for these models)
    argv += ["--cuda-graph-backend-prefill", "disabled", *PROFILES[args.profile]]
    argv += list(args.sglang_args or [])
    env = {
        "SGLANG_EXTERNAL_MODEL_PACKAGE": MODEL_PACKAGE,
        "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE": PROCESSOR_PACKAGE,
        "SGLANG_VLM_CACHE_SIZE_MB": str(args.vlm_cache_mb),
    }
    if args.adapter:
        env[ADAPTER_ENV] = str(Path(args.adapter).resolve())
    expect = {
        k: v
        for k, v in (
            ("r", args.expect_rank),
            ("alpha", args.expect_alpha),
            ("num_layers", args.expect_layers),
        )
        if v is not None
    }
    if expect:
        env[EXPECT_ENV] = json.dumps(expect)
    return argv, env


def check_adapter(directory: str, *, allow_zero: bool) -> str:
    """Refuse an unreadable, ungated or (unless ``allow_zero``) untrained adapter before launching."""
    from causalcache_memory.errors import ConfigError
    from causalcache_memory.runtime.hgkv.io import read_adapter

    config, tensors = read_adapter(directory)
    if not config.gated:
        raise ConfigError(
            f"{directory} is the ungated control; merge it into the base weights and serve that model instead"
        )
    nonzero = any(bool(t.abs().sum() > 0) for k, t in tensors.items() if k.endswith("lora_B.weight"))
    if not nonzero and not allow_zero:
        raise ConfigError(
            f"{directory}: every lora_B is zero (an untrained adapter); it cannot change the policy and the "
            "self-check cannot prove it active; train it first or pass --allow-zero-adapter"
        )
    return f"rank {config.r}, alpha {config.alpha}, layers {list(config.layers or ())}"


def _wait_healthy(url: str, proc: subprocess.Popen[Any], timeout_s: float) -> None:
    import httpx

    from causalcache_memory.errors import PolicyUnavailableError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PolicyUnavailableError(
                f"the SGLang server exited with code {proc.returncode} while starting"
            )
        try:
            if httpx.get(f"{url}/health", timeout=5.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise PolicyUnavailableError(f"the SGLang server at {url} was not healthy after {timeout_s:.0f} s")


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def launch(
    argv: list[str],
    env: dict[str, str],
    url: str,
    *,
    adapter: bool,
    startup_timeout_s: float,
    wait: bool = True,
    gateway_url: str | None = None,
) -> tuple[int, subprocess.Popen[Any] | None]:
    """Start ``argv``, wait for health, run the self-check (also through ``gateway_url`` when given);
    ``(exit code, process or None when stopped)``."""
    from causalcache_memory.runtime.sglang_server.selfcheck import gateway_self_check, self_check

    proc = subprocess.Popen(argv, env={**os.environ, **env})
    try:
        _wait_healthy(url, proc, startup_timeout_s)
        report = self_check(url, adapter=adapter)
        via = gateway_self_check(gateway_url, adapter=adapter) if report.ok and gateway_url else None
    except BaseException:
        _stop(proc)
        raise
    if not report.ok:
        _stop(proc)
        print(
            f"causalcache serve: the plugin is NOT active, server stopped: {report.summary()}",
            file=sys.stderr,
        )
        return 1, None
    if via is not None and not via.ok:
        _stop(proc)
        print(
            f"causalcache serve: the plugin is active but NOT through the gateway, server stopped: "
            f"{via.summary()}",
            file=sys.stderr,
        )
        return 1, None
    if via is not None:
        report.details.append(via.summary())
    print(f"causalcache serve: ready at {url} ({report.summary()})", flush=True)
    if not wait:
        return 0, proc
    try:
        return proc.wait(), None
    except KeyboardInterrupt:
        _stop(proc)
        return 130, None


def _serve(args: argparse.Namespace) -> int:
    from causalcache_memory._optional import is_available, require

    note = check_adapter(args.adapter, allow_zero=args.allow_zero_adapter) if args.adapter else "frozen model"
    argv, env = sglang_command(args)
    url = f"http://{args.host}:{args.port}"
    if args.dry_run:
        for key, value in sorted(env.items()):
            print(f"{key}={value}")
        print(" ".join(argv))
        print(f"# {note}; would serve at {url}")
        return 0
    if not is_available("sglang"):
        require(
            "sglang", purpose="causalcache serve (pip install 'causalcache-memory[sglang]' on a GPU machine)"
        )
    code, _ = launch(
        argv,
        env,
        url,
        adapter=bool(args.adapter),
        startup_timeout_s=args.startup_timeout,
        gateway_url=args.gateway_url,
    )
    return code


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve a Qwen-VL policy with SGLang and the HGKV adapter (checks the plugin is active)",
        description=__doc__.split("\n\n", 1)[0],
    )
    p.add_argument("--model", required=True, help="model directory or hub id SGLang loads")
    p.add_argument("--adapter", default=None, help="HGKV adapter directory (omit: the frozen policy)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--profile", choices=sorted(PROFILES), default="deterministic")
    p.add_argument("--expect-rank", type=int, default=None, help="refuse an adapter of another rank")
    p.add_argument("--expect-alpha", type=float, default=None, help="refuse an adapter of another alpha")
    p.add_argument("--expect-layers", type=int, default=None, help="refuse an adapter of another layer count")
    p.add_argument(
        "--gateway-url",
        default=None,
        help="SGLang Model Gateway routing to this server: run the self-check through it too",
    )
    p.add_argument("--vlm-cache-mb", type=int, default=2048, help="SGLANG_VLM_CACHE_SIZE_MB")
    p.add_argument("--startup-timeout", type=float, default=1800.0, help="seconds to wait for /health")
    p.add_argument("--allow-zero-adapter", action="store_true", help="serve an adapter whose B is all zero")
    p.add_argument("--dry-run", action="store_true", help="print the environment and command, start nothing")
    p.add_argument("sglang_args", nargs=argparse.REMAINDER, help="after --: passed to SGLang")
    p.set_defaults(handler=_serve_entry)


def _serve_entry(args: argparse.Namespace) -> int:
    if args.sglang_args and args.sglang_args[0] == "--":
        args.sglang_args = args.sglang_args[1:]
    return _serve(args)
