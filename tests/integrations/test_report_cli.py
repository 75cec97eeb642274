"""``causalcache report`` for a thread recorded by the memory: archive + thread id, or config + checkpointer."""

from __future__ import annotations

import re

import user_agent as ua

from causalcache_memory.cli.main import main


def _run_agent(tmp_path, steps: int = 12):
    (tmp_path / "cc.yaml").write_text(
        "budget: 2\nallocation: {allocator: recent}\narchive: {url: data/archive}\n"
        "checkpointer: {kind: sqlite, path: data/cp.sqlite}\n"
    )
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    memory = CausalCacheMemory.from_yaml(tmp_path / "cc.yaml")
    graph = ua.build_agent(memory, steps=steps, checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("user/thread 1"))  # unsafe characters: hashed id
    return memory, graph


def test_report_from_archive_and_thread(tmp_path, capsys):
    _run_agent(tmp_path)
    out = tmp_path / "r.html"
    code = main(
        [
            "report",
            "--archive",
            str(tmp_path / "data" / "archive"),
            "--thread",
            "user/thread 1",
            "--out",
            str(out),
        ]
    )
    assert code == 0 and "12 events, 12 decisions" in capsys.readouterr().out
    page = out.read_text()
    assert page.count('<section class="step">') == 12
    assert page.count('data-fidelity="recent"') == sum(min(2, t - 1) for t in range(1, 13))
    assert len(set(re.findall(r"\.im\d+\{", page))) >= 3  # screenshots embedded
    assert "Reply not parsed" in page and ua.UNPARSEABLE.replace("'", "&#x27;") in page
    assert "(reply not parsed)" in page
    # actions in the summaries' units (pixels on the recorded screen), never 0-1 fractions or JSON
    actions = re.findall(r"<p>Action: <code>(.*?)</code>", page)
    assert actions and all("&quot;" not in a and not re.search(r"\(0\.\d+, 0\.\d+\)", a) for a in actions)
    assert any(re.fullmatch(r"click \(\d{2,4}, \d{2,4}\)", a) for a in actions), actions


def test_report_from_config_and_checkpointer_last_steps(tmp_path, capsys):
    _run_agent(tmp_path, steps=8)
    out = tmp_path / "r2.html"
    code = main(
        [
            "report",
            "--config",
            str(tmp_path / "cc.yaml"),
            "--thread",
            "user/thread 1",
            "--out",
            str(out),
            "--last",
            "3",
        ]
    )
    assert code == 0
    page = out.read_text()
    assert page.count('<section class="step">') == 3 and "last 3 of 8 decisions" in page


def test_report_names_recorded_threads_when_the_thread_is_unknown(tmp_path, capsys):
    _run_agent(tmp_path, steps=2)
    code = main(["report", "--archive", str(tmp_path / "data" / "archive"), "--thread", "nope"])
    err = capsys.readouterr().err
    assert code == 1 and "no trace recorded for thread 'nope'" in err and "thread-" in err
