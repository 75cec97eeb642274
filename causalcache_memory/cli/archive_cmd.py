"""``causalcache archive check [--repair]`` and ``causalcache archive gc``: integrity and retention."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _open(args: argparse.Namespace):  # returns a ScreenshotArchive
    from causalcache_memory.archive import open_archive

    if args.config:
        from causalcache_memory.config import load_config

        if args.archive:
            raise SystemExit("causalcache archive: give an ARCHIVE or --config, not both")
        return open_archive(load_config(args.config).archive.url)
    if not args.archive:
        raise SystemExit("causalcache archive: give the archive path/URL or --config FILE")
    return open_archive(args.archive)


def _check(args: argparse.Namespace) -> int:
    from causalcache_memory.archive import check_archive

    archive = _open(args)
    report = check_archive(archive, repair=args.repair)
    if args.json:
        print(json.dumps({"archive": archive.url, **report.to_dict()}, indent=2))
    else:
        print(f"{archive.url}: {report.objects} objects checked, {len(report.corrupt)} corrupt")
        for kind, sha in report.corrupt:
            action = "deleted (a later put of the same bytes stores it again)" if args.repair else "corrupt"
            print(f"  {kind} {sha}: {action}")
        for episode, sha in report.dangling:
            print(f"  episode {episode} references {sha}, which is not stored")
        for problem in report.layout:
            print(f"  {problem} (never followed; remove it)")
        print(f"  temporary files: {report.temp_files} left, {report.temp_removed} of dead writers removed")
        if report.corrupt and not args.repair:
            print("  run again with --repair to delete the damaged objects")
    return 0 if report.ok else 1


def _release_pruned(args: argparse.Namespace) -> Any:
    """The ``release(archive, dry_run)`` of ``--release-pruned``: the config's checkpointer decides."""
    if not args.config:
        raise SystemExit("causalcache archive gc: --release-pruned reads the checkpointer from --config FILE")
    from causalcache_memory.config import load_config
    from causalcache_memory.integrations.langgraph.retention import release_pruned_threads
    from causalcache_memory.integrations.langgraph.savers import build_checkpointer

    checkpointer = build_checkpointer(load_config(args.config).checkpointer)
    return lambda archive: release_pruned_threads(
        checkpointer, archive, idle_s=args.release_pruned, dry_run=args.dry_run
    )


def _gc_one(archive: Any, args: argparse.Namespace, pruned: Any) -> dict[str, Any]:
    from causalcache_memory.archive.retention import release_idle

    released = []
    if args.release_idle is not None:
        released = release_idle(archive, args.release_idle, dry_run=args.dry_run)
    if pruned is not None:
        released += [e for e in pruned(archive) if e not in released]
    report = archive.gc(grace_seconds=args.grace_seconds, dry_run=args.dry_run)
    return {
        "archive": archive.url,
        "dry_run": args.dry_run,
        "released_episodes": released,
        "kept": report.kept,
        "deleted": report.deleted,
        "bytes_freed": report.bytes_freed,
        "skipped_recent": report.skipped_recent,
    }


def _gc(args: argparse.Namespace) -> int:
    from causalcache_memory.archive.namespaces import tenant_archives

    archive = _open(args)
    pruned = _release_pruned(args) if args.release_pruned is not None else None
    out = _gc_one(archive, args, pruned)
    tenants = {name: _gc_one(sub, args, pruned) for name, sub in tenant_archives(archive)}
    if tenants:
        out["tenants"] = tenants
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    for result in (out, *tenants.values()):
        print(
            f"{result['archive']}: released {len(result['released_episodes'])} episode(s); {verb} "
            f"{result['deleted']} object(s) ({result['bytes_freed']} bytes), kept {result['kept']} referenced, "
            f"{result['skipped_recent']} too recent"
        )
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("archive", nargs="?", help="archive directory or fsspec URL")
    parser.add_argument("--config", help="read archive.url from this YAML config instead")
    parser.add_argument("--json", action="store_true", help="print a JSON report")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("archive", help="check, repair and garbage-collect a screenshot archive")
    sub = parser.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="re-hash every object; report corruption, dangling refs, symlinks")
    _common(check)
    check.add_argument(
        "--repair", action="store_true", help="delete damaged objects and dead writers' temp files"
    )
    check.set_defaults(handler=_check)
    gc = sub.add_parser(
        "gc",
        help="delete objects no live episode references (after --release-idle / --release-pruned), in the "
        "archive and in each tenant archive under tenants/",
    )
    _common(gc)
    gc.add_argument("--grace-seconds", type=float, default=3600.0, help="keep objects younger than this")
    gc.add_argument(
        "--release-idle",
        type=float,
        metavar="SECONDS",
        help="first release episodes idle for longer than this",
    )
    gc.add_argument(
        "--release-pruned",
        type=float,
        metavar="SECONDS",
        help="first release episodes whose thread has no checkpoint left in the --config file's "
        "checkpointer (pruned, expired, deleted) and no new reference for longer than this",
    )
    gc.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    gc.set_defaults(handler=_gc)
