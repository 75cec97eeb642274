"""The controller owns every allocation, warm-up included: the memory hands it traces, never an allocator
call of its own; the middleware drives the step session through its public methods only."""

from __future__ import annotations

import ast
import traceback
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from lg_graphs import build_loop, run_config
from lg_support import KeyPolicy, Screens, relaxed_config

from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.archive import LocalArchive
from causalcache_memory.integrations.langgraph import CausalCacheMemory

LANGGRAPH = Path(__file__).resolve().parents[2] / "integrations" / "langgraph"
ALLOCATOR_METHODS = {"allocate", "prepare", "warmup"}


def _calls(path: Path) -> list[tuple[str, str, int]]:
    """``(receiver source, method, line)`` of every attribute call in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (ast.unparse(node.func.value), node.func.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]


def test_the_memory_module_calls_no_allocator_method() -> None:
    calls = _calls(LANGGRAPH / "memory.py")
    direct = [c for c in calls if c[1] in ALLOCATOR_METHODS and c[0] != "self"]
    assert direct == []
    assert ("MemoryController", "warm_allocator") in {c[:2] for c in calls}  # warm-up: the controller's
    source = (LANGGRAPH / "memory.py").read_text(encoding="utf-8")
    assert "AllocationContext" not in source and "NoPolicy" not in source


def test_the_middleware_uses_no_private_state_of_the_session() -> None:
    calls = _calls(LANGGRAPH / "middleware.py")
    assert [c for c in calls if c[0] == "session" and c[1].startswith("_")] == []
    source = ast.parse((LANGGRAPH / "middleware.py").read_text(encoding="utf-8"))
    reads = {
        n.attr for n in ast.walk(source) if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "session"
    }
    assert reads.isdisjoint({"controller", "_controller", "pending", "_pending", "_store", "store"}), reads


class _CallerSpy:
    """A witness-taking allocator recording which module called each of its methods."""

    name, uses_witness = "spy", True

    def __init__(self) -> None:
        self.callers: list[tuple[str, str]] = []

    def _note(self, method: str) -> None:
        caller = traceback.extract_stack(limit=3)[0]
        self.callers.append((method, Path(caller.filename).name))

    def warmup(self) -> None:
        self._note("warmup")

    def prepare(self, archive, sha) -> None:
        self._note("prepare")

    def allocate(self, ctx):
        self._note("allocate")
        return make_allocation(recent_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator="spy")


def test_every_allocator_call_of_a_memory_comes_from_the_controller(tmp_path) -> None:
    spy = _CallerSpy()
    archive = LocalArchive(tmp_path / "a")
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=2, archive=archive, allocation=spy, policy=KeyPolicy()
    )
    assert spy.callers == [("warmup", "warmup.py")]  # at construction, by the controller's warm-up
    saver = InMemorySaver()
    build_loop(memory, Screens(), steps=3, checkpointer=saver).invoke({"goal": "g", "steps": 0}, run_config())
    resumed = CausalCacheMemory(
        config=relaxed_config(), budget=2, archive=archive, allocation=spy, policy=KeyPolicy(), warmup=False
    )
    graph = build_loop(resumed, Screens(), steps=5, checkpointer=saver)
    graph.invoke({"goal": "g", "steps": 3}, run_config())  # a resumed thread: warmed once, untimed
    methods = {m for m, _ in spy.callers}
    assert methods == {"warmup", "prepare", "allocate"}
    assert {module for _, module in spy.callers} <= {"warmup.py", "controller.py", "_worker.py"}
    assert ("allocate", "warmup.py") in spy.callers  # the resumed thread's untimed allocation
