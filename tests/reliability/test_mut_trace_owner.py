"""The cross-process claims of ``trace/owner.py`` on an in-memory claim store (issue 52's mutation run).

Fast and in-process: "another process" is a record written under another owner id, "a dead one" an owner
id whose process the patched liveness check calls dead, and a race is a record a hook writes just before
this process's create of the same name. The real processes, LocalArchive and S3 are in
``test_trace_owner.py`` and ``test_takeover_race.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from causalcache_memory.errors import TraceConflictError
from causalcache_memory.trace import owner
from causalcache_memory.trace.owner import HeadClaims

KEY, EP = ("archive", "ep"), "ep"
ME = "here.1000.mine00000000"
LIVE = "there.4242.0123456789ab"  # another host: never judged dead
DEAD = "here.1111.deaddeaddead"
BASE, LOW_BASE, HIGH_BASE = "b" * 64, "a" * 64, "c" * 64
NEW, LOW_CHILD, HIGH_CHILD = "5" * 64, "0" * 64, "f" * 64
# the archive's claim names (``archive/_keys.py``): ``head.<sha256|root>`` and ``take.<n>``, n >= 1
CLAIM_NAME = re.compile(r"head\.([0-9a-f]{64}|root)|take\.[1-9][0-9]{0,8}")


class _Store:
    """Claims in memory: an exclusive ``claim`` creates a name only if absent, else returns its bytes.
    ``hooks[name]`` runs once just before this process's create of ``name`` (a rival that got there first);
    ``ignores_exclusive`` makes every create overwrite and report success (a store ignoring If-None-Match)."""

    def __init__(self, ignores_exclusive: bool = False) -> None:
        self.names: dict[str, bytes] = {}
        self.hooks: dict[str, Callable[[], None]] = {}
        self.every_create: Callable[[str], None] | None = None
        self.creates: list[str] = []
        self.ignores_exclusive = ignores_exclusive
        self.reads: list[str] = []
        self.vanish = False  # every create reports success and leaves nothing behind

    def claim(self, episode: str, name: str, data: bytes, *, exclusive: bool = True) -> bytes | None:
        assert episode == EP and exclusive and CLAIM_NAME.fullmatch(name), name
        self.creates.append(name)
        if self.vanish:
            return None
        if self.every_create is not None:
            self.every_create(name)
        hook = self.hooks.pop(name, None)
        if self.ignores_exclusive:
            self.names[name] = data
            if hook is not None:
                hook()  # a later writer overwrites what this process was told it created
            return None
        if hook is not None:
            hook()
        if name in self.names:
            return self.names[name]
        self.names[name] = data
        return None

    def read_claim(self, episode: str, name: str) -> bytes | None:
        assert CLAIM_NAME.fullmatch(name), name  # the archive refuses any other name
        self.reads.append(name)
        value = self.names.get(name)
        return None if value is None else bytes(bytearray(value))  # a new object, as a real store returns

    def put(self, name: str, **value: str) -> None:
        self.names[name] = json.dumps({"v": 1, **value}, sort_keys=True).encode()

    def value(self, name: str) -> dict:
        return json.loads(self.names[name])


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setattr(owner, "_SEEN", {})
    monkeypatch.setattr(owner, "_TAKEOVER", {})
    monkeypatch.setattr(owner, "OWNER", ME)
    monkeypatch.setattr(owner, "process_is_dead", lambda host, pid: (host, pid) == ("here", "1111"))
    sleeps: list[float] = []
    monkeypatch.setattr(owner, "time", SimpleNamespace(sleep=sleeps.append))
    store = _Store()
    return SimpleNamespace(store=store, claims=HeadClaims(store), sleeps=sleeps)


def test_a_commit_claims_its_bases_successor_with_a_version_1_claim(env) -> None:
    env.claims.claim(KEY, EP, BASE, NEW)
    env.claims.claim(KEY, EP, None, BASE)
    assert env.store.value(f"head.{BASE}") == {"v": 1, "child": NEW, "owner": ME}
    assert env.store.value("head.root") == {"v": 1, "child": BASE, "owner": ME}
    assert sorted(env.store.names) == sorted([f"head.{BASE}", "head.root"])  # no take-over record


def test_the_same_node_claimed_by_a_live_process_proceeds_writing_nothing(env) -> None:
    env.store.put(f"head.{BASE}", child=NEW, owner=LIVE)
    env.claims.claim(KEY, EP, BASE, "".join(["5"] * 64))  # equal by value, another string object
    assert list(env.store.names) == [f"head.{BASE}"]


def test_a_live_processs_claim_of_another_node_is_a_conflict_naming_it(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=LIVE)
    with pytest.raises(
        TraceConflictError,
        match=r"thread 'ep': another run \(there\.4242\.0123456789ab\) already extended the same head "
        r"\(after b{12}\.\.\., it wrote 0{12}\.\.\.\)",
    ):
        env.claims.claim(KEY, EP, BASE, NEW)
    env.store.names["head.root"] = json.dumps({"owner": LIVE}).encode()  # a claim without a child
    with pytest.raises(TraceConflictError, match=r"\(after the root\.\.\., it wrote None\.\.\.\)"):
        env.claims.claim(KEY, EP, None, NEW)


def test_a_take_over_allowed_for_any_head_takes_a_live_claim_with_the_next_record(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=LIVE)
    env.claims.allow_takeover(KEY, None)
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.1") == {"v": 1, "base": BASE, "child": NEW, "owner": ME}
    env.store.put(f"head.{NEW}", child=HIGH_CHILD, owner=LIVE)
    with pytest.raises(TraceConflictError, match="already extended"):  # the permission was used up
        env.claims.claim(KEY, EP, NEW, LOW_CHILD)


def test_a_take_over_allowed_for_one_head_does_not_take_another(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=LIVE)
    env.claims.allow_takeover(KEY, HIGH_BASE)
    with pytest.raises(TraceConflictError, match="already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)
    env.claims.allow_takeover(KEY, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.1")["base"] == BASE


def test_a_root_take_over_names_root_as_its_base(env) -> None:
    env.store.put("head.root", child=LOW_CHILD, owner=DEAD)
    env.claims.claim(KEY, EP, None, NEW)
    assert env.store.value("take.1") == {"v": 1, "base": "root", "child": NEW, "owner": ME}


def test_own_and_torn_records_in_the_log_are_no_take_over_but_anothers_is(env) -> None:
    env.claims.check_still_owner(KEY, EP, BASE)  # the first commit reads the log to its end: empty
    env.store.put("take.1", base=BASE, child=NEW, owner=ME)  # e.g. another thread of this process
    env.store.names["take.2"] = b""  # torn by a power loss
    env.claims.check_still_owner(KEY, EP, BASE)
    env.store.put("take.3", base=NEW, child=LOW_CHILD, owner=LIVE)
    with pytest.raises(TraceConflictError, match=r"there\.4242.* took this thread over \(after 5{12}"):
        env.claims.check_still_owner(KEY, EP, NEW)
    env.claims.check_still_owner(KEY, EP, NEW)  # reported once: it is seen now


def test_the_first_check_and_one_after_a_reset_read_the_log_to_its_end(env) -> None:
    env.store.put("take.1", base=BASE, child=NEW, owner=LIVE)
    env.store.put("take.2", base=NEW, child=LOW_CHILD, owner=LIVE)
    env.claims.check_still_owner(KEY, EP, LOW_CHILD)  # records before this process's first commit
    env.store.put("take.3", base=LOW_CHILD, child=HIGH_CHILD, owner=LIVE)
    env.claims.allow_takeover(KEY, HIGH_CHILD)  # reset_head: a deliberate take-over
    env.claims.check_still_owner(KEY, EP, HIGH_CHILD)
    env.store.put(f"head.{HIGH_CHILD}", child=LOW_CHILD, owner=LIVE)
    env.claims.claim(KEY, EP, HIGH_CHILD, NEW)
    assert env.store.value("take.4")["owner"] == ME  # after the three it read


def test_a_torn_claim_is_read_fifty_times_ten_ms_apart_then_taken_over(env) -> None:
    env.store.names[f"head.{BASE}"] = b'{"v": 1, "chi'  # bytes that never parse
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.1")["child"] == NEW
    assert env.sleeps == [0.01] * 50  # half a second of re-reads


def test_after_taking_over_past_anothers_record_the_next_check_knows_its_own(env) -> None:
    env.store.put("take.1", base=LOW_BASE, child=BASE, owner=DEAD)
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    env.claims.check_still_owner(KEY, EP, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.2")["owner"] == ME
    env.claims.check_still_owner(KEY, EP, NEW)  # take.1 is not news, take.2 is its own


def test_the_last_record_naming_the_base_is_the_claim_in_force(env) -> None:
    env.store.put(f"head.{BASE}", child=NEW, owner=DEAD)  # this very node, by a dead writer ...
    env.store.put("take.1", base=BASE, child=LOW_CHILD, owner=LIVE)  # ... taken over by a live one
    with pytest.raises(TraceConflictError, match=r"there\.4242.*already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)


@pytest.mark.parametrize("other_base", [LOW_BASE, HIGH_BASE])
def test_records_naming_other_bases_are_not_in_force(env, other_base) -> None:
    env.store.put("take.1", base=other_base, child=LOW_CHILD, owner=LIVE)
    env.store.put(f"head.{BASE}", child=HIGH_CHILD, owner=DEAD)
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.2") == {"v": 1, "base": BASE, "child": NEW, "owner": ME}


def _rival_at(env, name: str, **value: str) -> None:
    env.store.hooks[name] = lambda: env.store.put(name, **value)


def test_a_live_rival_that_created_the_same_take_over_first_lets_this_one_proceed(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    _rival_at(env, "take.1", base=BASE, child=NEW, owner=LIVE)
    env.claims.check_still_owner(KEY, EP, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)  # the same node: proceeds
    assert env.store.value("take.1")["owner"] == LIVE
    env.claims.check_still_owner(KEY, EP, NEW)  # the rival's identical record is known


@pytest.mark.parametrize(
    ("base", "child"),
    [(LOW_BASE, NEW), (HIGH_BASE, NEW), (BASE, LOW_CHILD), (BASE, HIGH_CHILD)],
    ids=["lower-base", "higher-base", "lower-child", "higher-child"],
)
def test_a_live_rival_that_created_another_take_over_first_wins(env, base, child) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    _rival_at(env, "take.1", base=base, child=child, owner=LIVE)
    env.claims.check_still_owner(KEY, EP, BASE)
    with pytest.raises(TraceConflictError, match=r"there\.4242.* already extended the same head"):
        env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.creates == [f"head.{BASE}", "take.1"]  # no retry past a live rival
    env.claims.check_still_owner(KEY, EP, BASE)  # its record was reported once, as a conflict


def test_a_dead_rival_is_retried_by_the_ordinary_rules_not_by_the_permission(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=LIVE)
    env.claims.allow_takeover(KEY, BASE)

    def rivals() -> None:  # a rival that died at once, then a live one behind it
        env.store.put("take.1", base=BASE, child=HIGH_CHILD, owner=DEAD)
        env.store.put("take.2", base=BASE, child=LOW_CHILD, owner=LIVE)

    env.store.hooks["take.1"] = rivals
    with pytest.raises(TraceConflictError, match=r"there\.4242.* already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)
    assert "take.3" not in env.store.names


def test_a_torn_rival_record_is_skipped_and_the_next_record_taken(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    env.store.hooks["take.1"] = lambda: env.store.names.__setitem__("take.1", b"")
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.2") == {"v": 1, "base": BASE, "child": NEW, "owner": ME}


def test_a_commit_gives_up_after_eight_creates_lost_to_rivals_that_died(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)

    def dead_rival(name: str) -> None:
        if name.startswith("take."):
            env.store.put(name, base=BASE, child=HIGH_CHILD, owner=DEAD)

    env.store.every_create = dead_rival
    with pytest.raises(TraceConflictError, match=r"\(an unknown process\) already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.creates == [f"head.{BASE}"] + [f"take.{n}" for n in range(1, 9)]


def test_a_store_that_ignores_exclusive_creates_is_caught_by_the_read_back(env) -> None:
    store = _Store(ignores_exclusive=True)
    claims = HeadClaims(store)
    store.hooks[f"head.{BASE}"] = lambda: store.put(f"head.{BASE}", child=LOW_CHILD, owner=LIVE)
    with pytest.raises(TraceConflictError, match=r"there\.4242.* already extended"):
        claims.claim(KEY, EP, BASE, NEW)


def test_a_reservation_holds_the_head_for_this_process_only(env, monkeypatch) -> None:
    env.claims.reserve(KEY, EP, BASE)
    assert env.store.value(f"head.{BASE}") == {"v": 1, "child": f"reserved:{ME}", "owner": ME}
    env.claims.claim(KEY, EP, BASE, NEW)  # its own commit proceeds
    assert list(env.store.names) == [f"head.{BASE}"]
    monkeypatch.setattr(owner, "OWNER", LIVE)  # another process now
    with pytest.raises(TraceConflictError, match=r"\(here\.1000\.mine00000000\) already extended"):
        env.claims.reserve(("archive", "ep"), EP, BASE)


def test_archives_without_claims_keep_only_the_in_process_check() -> None:
    assert not HeadClaims(object()).enabled
    assert not HeadClaims(SimpleNamespace(claim=lambda *a, **k: None)).enabled
    assert not HeadClaims(SimpleNamespace(claim=lambda *a, **k: None, read_claim=1)).enabled
    assert HeadClaims(_Store()).enabled
    bare = HeadClaims(object())
    bare.check_still_owner(KEY, EP, BASE)
    bare.claim(KEY, EP, BASE, NEW)  # nothing to write to, no error


def _took_over_later(env, n: int, base: str) -> None:
    """Another live process takes the thread over with record ``take.<n>``: the next check must say so."""
    env.store.put(f"take.{n}", base=base, child=HIGH_CHILD, owner=LIVE)
    with pytest.raises(TraceConflictError, match=r"there\.4242.* took this thread over"):
        env.claims.check_still_owner(KEY, EP, base)


@pytest.mark.parametrize("records", [1, 2, 3])
def test_the_first_check_counts_every_record_before_it_so_later_checks_see_only_news(env, records) -> None:
    for n in range(1, records + 1):  # take-overs by other processes, before this process's first commit
        env.store.put(f"take.{n}", base=f"{n:x}" * 64, child=LOW_CHILD, owner=LIVE)
    env.claims.check_still_owner(KEY, EP, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)
    env.claims.check_still_owner(KEY, EP, NEW)  # the old records are not news
    _took_over_later(env, records + 1, NEW)  # the next one is


def test_a_check_reads_past_this_processs_own_record_to_anothers_right_after_it(env) -> None:
    env.claims.check_still_owner(KEY, EP, BASE)  # empty log
    env.store.put("take.1", base=BASE, child=NEW, owner=ME)  # e.g. another thread of this process
    env.store.put("take.2", base=NEW, child=LOW_CHILD, owner=LIVE)
    with pytest.raises(TraceConflictError, match=r"there\.4242.* took this thread over \(after 5{12}"):
        env.claims.check_still_owner(KEY, EP, NEW)


def test_after_a_take_over_the_next_commit_reads_one_record_and_sees_the_next_take_over(env) -> None:
    """'One read per commit': after writing ``take.2`` the still-owner check reads ``take.3`` only."""
    env.store.put("take.1", base=LOW_BASE, child=BASE, owner=DEAD)
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    env.claims.check_still_owner(KEY, EP, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.value("take.2")["owner"] == ME
    env.store.reads.clear()
    env.claims.check_still_owner(KEY, EP, NEW)
    assert env.store.reads == ["take.3"]
    _took_over_later(env, 3, NEW)


def test_a_take_over_after_a_claim_made_without_a_check_is_seen(env) -> None:
    """``HeadClaims`` used directly, without the store's check first: its own claim found in force leaves
    the log position at the records it read (none), so a later take.1 is news."""
    env.claims.reserve(KEY, EP, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)  # finds its own reservation in force
    _took_over_later(env, 1, NEW)


def test_after_losing_a_take_over_race_to_the_same_node_a_later_take_over_is_seen(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    _rival_at(env, "take.1", base=BASE, child=NEW, owner=LIVE)
    env.claims.check_still_owner(KEY, EP, BASE)
    env.claims.claim(KEY, EP, BASE, NEW)  # the same node: proceeds
    env.store.reads.clear()
    env.claims.check_still_owner(KEY, EP, NEW)
    assert env.store.reads == ["take.2"]
    _took_over_later(env, 2, NEW)


def test_after_losing_a_take_over_race_to_another_node_a_later_take_over_is_seen(env) -> None:
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=DEAD)
    _rival_at(env, "take.1", base=BASE, child=LOW_CHILD, owner=LIVE)
    env.claims.check_still_owner(KEY, EP, BASE)
    with pytest.raises(TraceConflictError, match="already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)
    env.store.reads.clear()
    env.claims.check_still_owner(KEY, EP, BASE)  # the rival's record was reported, as a conflict
    assert env.store.reads == ["take.2"]
    _took_over_later(env, 2, LOW_CHILD)


@pytest.mark.parametrize(
    "other",
    ["here.1111", "here.1111.deaddeaddead.x", "here", "None"],
    ids=["no-token", "four-fields", "host-only", "no-owner"],
)
def test_an_owner_id_not_of_three_fields_is_never_judged_dead(env, other) -> None:
    """``<host>.<pid>.<token>`` or nothing: an id of another shape (an older or foreign writer, a claim
    without an owner) names no process this host can check, so its claim is a live one."""
    env.store.put(f"head.{BASE}", child=LOW_CHILD, owner=other)
    if other == "None":
        env.store.names[f"head.{BASE}"] = json.dumps({"v": 1, "child": LOW_CHILD}).encode()
    with pytest.raises(TraceConflictError, match="already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)
    assert "take.1" not in env.store.names


@pytest.mark.parametrize("child", [LOW_CHILD, HIGH_CHILD], ids=["sorts-before", "sorts-after"])
def test_a_later_writer_that_overwrote_the_claim_wins_whatever_its_bytes_sort_as(child) -> None:
    store = _Store(ignores_exclusive=True)
    claims = HeadClaims(store)
    store.hooks[f"head.{BASE}"] = lambda: store.put(f"head.{BASE}", child=child, owner=LIVE)
    with pytest.raises(TraceConflictError, match=r"there\.4242.* already extended"):
        claims.claim(KEY, EP, BASE, NEW)


def test_a_claim_that_cannot_be_read_back_after_its_create_is_not_taken_as_won(env) -> None:
    """The read-back after a create that reported success: a claim not there is not this process's, so
    the commit goes through the take-over log (which does not read back as its own either: it gives up)."""
    env.store.vanish = True
    with pytest.raises(TraceConflictError, match=r"\(an unknown process\) already extended"):
        env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.creates == [f"head.{BASE}"] + ["take.1"] * 8  # eight tries, then it gives up


def test_a_claim_won_at_once_reads_back_only_its_own_claim(env) -> None:
    """The read-back after a create compares bytes (a real store returns a new object): a won claim costs
    one read and no take-over."""
    env.claims.check_still_owner(KEY, EP, BASE)
    env.store.reads.clear()
    env.claims.claim(KEY, EP, BASE, NEW)
    assert env.store.reads == [f"head.{BASE}"] and env.store.creates == [f"head.{BASE}"]
