"""Several recordings read as one dataset: ``data.threads`` as a list of checkpointer + archive pairs.

A team that records with several processes (or machines, or weeks) has several checkpointers and archives.
``data.threads`` takes one recording (a mapping, as before) or a list of them::

    data:
      threads:
        - {name: east, checkpointer: east/checkpoints.sqlite, archive: east/archive, success: east.json}
        - {name: west, checkpointer: postgresql://db/west, archive: s3://team/west-archive, success: all}

* **Thread ids stay distinct.** With more than one recording every trajectory id is
  ``<name>/<thread id>`` (``name`` defaults to ``r<i>``, the recording's position in the list), so two
  recorders that both wrote ``thread-1`` give two trajectories; each trajectory's metadata keeps
  ``recording`` and ``thread_id``. Each recording's ``success`` file names its own threads, un-namespaced.
  Evidence links (``evidence.links``) name the namespaced ids. One recording (a mapping or a list of one)
  keeps the thread ids as they are.
* **One archive view.** Screenshots stay where they were recorded (no blob is copied):
  :class:`RecordingsArchive` reads each hash from the recording's archive that holds it (local folders
  and fsspec URLs such as ``s3://`` alike, through :func:`~causalcache_memory.archive.open_archive`), and
  refuses writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from causalcache_memory.errors import ArchiveError, ConfigError

__all__ = [
    "RecordingsArchive",
    "open_recordings_archive",
    "read_recordings",
    "recording_names",
    "recording_specs",
    "recordings_inputs",
    "stale_conversion_note",
]


def recording_specs(threads: Any) -> list[Any]:
    """``data.threads`` as a list of :class:`~.config.ThreadsSpec` (a single mapping is a list of one)."""
    if threads is None:
        return []
    return list(threads) if isinstance(threads, (list, tuple)) else [threads]


def recording_names(specs: Sequence[Any]) -> list[str] | None:
    """The namespace of each recording (``name`` or ``r<i>``); None for a single recording (ids kept)."""
    if len(specs) <= 1:
        return None
    names = [spec.name or f"r{i}" for i, spec in enumerate(specs)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(
            f"data.threads: recording name(s) {dup} given twice; give each recording its own name"
        )
    bad = [n for n in names if "/" in n or not n.strip()]
    if bad:
        raise ConfigError(f"data.threads: recording name(s) {bad} must be non-empty and hold no '/'")
    return names


def recordings_inputs(specs: Sequence[Any]) -> list[dict[str, Any]]:
    """Each recording's part of the trajectories stage's identity: its spec, its threads' chain heads and
    its success labels' digest."""
    from causalcache_lab.learn.stages import file_digest, inputs_hash
    from causalcache_lab.learn.threads import thread_states

    recording_names(specs)  # refused before any checkpointer is opened
    out = []
    for spec in specs:
        heads = {tid: s.get("cc_head") for tid, s in thread_states(spec.checkpointer).items()}
        out.append(
            {  # a spec without a name dumps as before names existed: its runs stay up to date
                "threads": spec.model_dump(exclude={"name"} if spec.name is None else None),
                "heads": inputs_hash(heads),
                "success_digest": file_digest(spec.success) if spec.success != "all" else "all",
            }
        )
    return out


def read_recordings(specs: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """``(trajectories, report)`` of every recording, ids namespaced when there are several (module doc).

    ``report`` is the one recording's :class:`~.threads.ThreadReport` as a dict, or with several the
    summed counts and ``recordings``: ``{name: that recording's report}``.
    """
    from causalcache_lab.learn.threads import load_success_labels, threads_to_trajectories

    names = recording_names(specs)
    trajectories: list[Any] = []
    reports: dict[str, dict[str, Any]] = {}
    for i, spec in enumerate(specs):
        field = "data.threads.success" if names is None else f"data.threads[{i}].success"
        trajs, report = threads_to_trajectories(
            spec.checkpointer,
            spec.archive,
            load_success_labels(spec.success, field=field),
            platform=spec.platform,
            source=spec.source,
            success_field=field,
        )
        if names is None:
            return trajs, report.to_dict()
        name = names[i]
        trajectories.extend(
            replace(
                t,
                trajectory_id=f"{name}/{t.trajectory_id}",
                metadata={**t.metadata, "recording": name, "thread_id": t.trajectory_id},
            )
            for t in trajs
        )
        reports[name] = report.to_dict()
    total: dict[str, Any] = {}
    for rep in reports.values():
        for key, value in rep.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
            elif isinstance(value, dict):
                merged = total.setdefault(key, {})
                for k, v in value.items():
                    merged[k] = merged.get(k, 0) + v
    return trajectories, {**total, "recordings": reports}


def open_recordings_archive(specs: Sequence[Any]) -> Any:
    """The archive labelling and training read: the one recording's, or a :class:`RecordingsArchive`."""
    from causalcache_memory.archive import open_archive

    if len(specs) == 1:
        return open_archive(specs[0].archive)
    return RecordingsArchive([open_archive(spec.archive) for spec in specs])


class RecordingsArchive:
    """A read-only view of several archives: each hash is read from the first archive that holds it.

    Blobs are content-addressed, so a screenshot stored by two recorders is the same bytes in both.
    Writes (``put``, ``put_text``, ``put_record``, ``retain``, ``release``, ``gc``) raise
    :class:`~causalcache_memory.errors.ArchiveError`: ``learn`` never writes to a recording.
    """

    def __init__(self, archives: Sequence[Any]) -> None:
        if not archives:
            raise ConfigError("RecordingsArchive needs at least one archive")
        self.archives = list(archives)
        self.url = "recordings:" + "+".join(str(a.url) for a in self.archives)
        self._where: dict[str, Any] = {}

    def _holder(self, sha256: str) -> Any:
        found = self._where.get(sha256)
        if found is None:
            found = next((a for a in self.archives if sha256 in a), self.archives[0])
            self._where[sha256] = found
        return found

    def __contains__(self, sha256: object) -> bool:
        return isinstance(sha256, str) and any(sha256 in a for a in self.archives)

    def get_bytes(self, sha256: str) -> bytes:
        return self._holder(sha256).get_bytes(sha256)  # type: ignore[no-any-return]

    def open_image(self, sha256: str) -> Any:
        return self._holder(sha256).open_image(sha256)

    def get_text(self, sha256: str) -> str | None:
        for archive in [self._holder(sha256), *self.archives]:
            text = archive.get_text(sha256)
            if text is not None:
                return text  # type: ignore[no-any-return]
        return None

    def get_record(self, sha256: str) -> bytes:
        last: Exception | None = None
        for archive in self.archives:
            try:
                return archive.get_record(sha256)  # type: ignore[no-any-return]
            except ArchiveError as exc:
                last = exc
        assert last is not None
        raise last

    def iter_hashes(self) -> Iterator[str]:
        seen: set[str] = set()
        for archive in self.archives:
            for sha in archive.iter_hashes():
                if sha not in seen:
                    seen.add(sha)
                    yield sha

    def live_episodes(self) -> list[str]:
        return sorted({e for a in self.archives for e in a.live_episodes()})

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise ArchiveError(f"{self.url} is a read-only view of several recordings' archives")

    put = put_text = put_record = release = gc = _read_only

    def retain(self, episode_id: str, hashes: Iterable[str], *, require_stored: bool = False) -> None:
        self._read_only()


def stale_conversion_note(trajectories: Sequence[Any], folder: Any) -> str | None:
    """A note when threads were converted before the live prompt's fields (screen sizes, summaries) were
    kept per step (:func:`~.threads.threads_to_trajectories`): a trajectories stage from before then is
    still up to date, and its prompts parse pixel actions on the 0-1000 grid."""
    steps = [s for t in trajectories for s in t.steps]
    if not steps or any("summary" in s.metadata for s in steps):
        return None
    return (
        f"the trajectories in {folder} were converted before learn kept the recorded screen sizes: agreement "
        "labels of an agent that clicks in pixels need them. Delete that folder to convert again (the "
        "labels and the model are then redone)"
    )
