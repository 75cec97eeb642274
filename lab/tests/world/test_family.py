"""The world family: knobs per world, splits of worlds and their rule, vocabularies, screen text, and the
simulated policy's recency mechanisms (checking that its previous action took effect)."""

from __future__ import annotations

import pytest

from causalcache_lab.world import GuiWorld, generate_tasks, run_expert
from causalcache_lab.world.family import KNOB_VALUES, V2, policy_for_world, world_spec
from causalcache_lab.world.family_tasks import generate_world_tasks, world_of
from causalcache_lab.world.language import plan_goal
from causalcache_lab.world.ocr import ocr_png
from causalcache_lab.world.splits import WORLD_SPLITS, require_not_heldout, resolve_worlds
from causalcache_lab.world.vocab import UNDO, VOCABS, decode, encode, summary_op
from causalcache_memory.actions.model import Action
from causalcache_memory.allocation import make_allocation, recent_b
from causalcache_memory.errors import ConfigError
from causalcache_memory.render import render_prompt
from causalcache_memory.trace import Trace


def test_v2_is_one_named_world_and_reproduces_generate_tasks():
    assert world_spec("v2") is V2 and not V2.recency
    assert [t.goal for t in generate_world_tasks(12, 3, worlds="v2")] == [
        t.goal for t in generate_tasks(12, 3, templates="eval")
    ]


def test_a_world_is_a_seed_for_its_knobs():
    assert world_spec("train-03") == world_spec("train-03")
    specs = [world_spec(w) for w in WORLD_SPLITS["train"]]
    assert len({(s.vocab, s.layout, s.skin, s.wording, s.after_read, s.platform) for s in specs}) > 3
    with pytest.raises(ConfigError, match="world="):
        world_spec("heldout-x")


def test_heldout_worlds_have_knob_values_no_training_or_dev_world_has():
    seen = [world_spec(w) for s in ("train", "dev") for w in WORLD_SPLITS[s]]
    held = [world_spec(w) for w in WORLD_SPLITS["heldout"]]
    assert {s.vocab for s in held}.isdisjoint({s.vocab for s in seen})  # an unseen action vocabulary
    assert {s.layout for s in held}.isdisjoint({s.layout for s in seen})  # an unseen layout family
    assert min(s.after_read[1] for s in held) > max(s.after_read[1] for s in seen)  # longer evidence ages
    for knob in ("vocab", "layout"):
        assert set(KNOB_VALUES[knob]["heldout"]).isdisjoint(KNOB_VALUES[knob]["train"])


def test_devage_worlds_are_dev_worlds_with_the_heldout_evidence_ages():
    dev = [world_spec(w) for w in WORLD_SPLITS["dev"]]
    aged = [world_spec(w) for w in WORLD_SPLITS["devage"]]
    held = [world_spec(w) for w in WORLD_SPLITS["heldout"]]
    assert {s.split for s in aged} == {"devage"}
    assert {s.after_read for s in aged} <= set(KNOB_VALUES["after_read"]["heldout"])
    assert min(s.after_read[1] for s in aged) > max(s.after_read[1] for s in dev)
    # the held-out vocabulary and layout stay unseen by every split but the held-out one
    assert {s.vocab for s in aged} <= {s.vocab for s in dev} and {s.vocab for s in aged}.isdisjoint(
        {s.vocab for s in held}
    )
    assert {s.layout for s in aged}.isdisjoint({s.layout for s in held})
    for knob, values in KNOB_VALUES.items():
        assert values["devage"] == values["heldout" if knob == "after_read" else "dev"]
    # not held out: a harness may calibrate on them, and the "dev" split name does not include them
    require_not_heldout(resolve_worlds("devage"), "calibrate")
    assert not set(resolve_worlds("dev")) & set(WORLD_SPLITS["devage"])
    tasks = generate_world_tasks(6, 0, worlds="devage-01", purpose="calibrate")
    assert {world_of(t) for t in tasks} == {"devage-01"}


@pytest.mark.parametrize(
    ("split", "knob", "value"), [("devshift", "layout", "stretch"), ("devtype", "vocab", "slash")]
)
def test_adaptation_splits_have_one_value_of_their_own_and_the_heldout_ages(split, knob, value):
    mine = [world_spec(w) for w in WORLD_SPLITS[split]]
    others = [world_spec(w) for name, ids in WORLD_SPLITS.items() if name != split for w in ids]
    assert {s.split for s in mine} == {split} and {getattr(s, knob) for s in mine} == {value}
    assert value not in {getattr(s, knob) for s in others}  # unseen by every other split, held-out included
    for name, values in KNOB_VALUES.items():
        expected = (value,) if name == knob else values["heldout" if name == "after_read" else "dev"]
        assert values[split] == expected
    require_not_heldout(resolve_worlds(split), "calibrate")
    assert not set(resolve_worlds("dev")) & set(WORLD_SPLITS[split])


def test_devmix_worlds_have_the_widest_heldout_age_range_and_development_values_otherwise():
    mixed = [world_spec(w) for w in WORLD_SPLITS["devmix"]]
    assert {s.split for s in mixed} == {"devmix"} and {s.after_read for s in mixed} == {(0, 6)}
    assert (0, 6) in KNOB_VALUES["after_read"]["heldout"] and (0, 6) not in KNOB_VALUES["after_read"]["dev"]
    for name, values in KNOB_VALUES.items():
        assert values["devmix"] == (((0, 6),) if name == "after_read" else values["dev"])
    require_not_heldout(resolve_worlds("devmix"), "calibrate")
    tasks = generate_world_tasks(8, 0, worlds="devmix-02", purpose="calibrate")
    assert {world_of(t) for t in tasks} == {"devmix-02"}


def test_slash_navigates_by_typing_as_the_heldout_vocabulary_does_in_other_words():
    # navigation is a typed text with no tap location, as in the held-out vocabulary, in other words
    for op in ("open_app", "back", "home"):
        slash, command = encode("slash", op, "Notes"), encode("command", op, "Notes")
        assert slash.type == command.type == "type" and slash.x is None and slash.text != command.text
        assert (
            decode("command", slash) == slash and decode("slash", command) == command
        )  # not navigation there


def test_the_stretch_layout_spreads_rows_shifts_columns_and_stays_on_the_screen():
    from causalcache_lab.world.env import GuiWorld, build_screen
    from causalcache_lab.world.font import CELL_H, CELL_W
    from causalcache_lab.world.render import restyle

    for world_id in WORLD_SPLITS["devshift"]:  # mobile and desktop screens
        world = GuiWorld(generate_world_tasks(1, 0, worlds=world_id)[0], slips=False)
        world.step(encode(world.spec.vocab, "open_app", "Notes"))
        plain = build_screen(world.data, world.nav, world.size, world.outputs)
        cols, rows = world.size[0] // CELL_W, world.size[1] // CELL_H
        content = [e for e in plain.elements if e.kind not in ("bar", "dock")]
        moved = [e for e in world.screen().elements if e.kind not in ("bar", "dock")]
        assert moved and all(e.box[2] <= cols and e.box[3] <= rows for e in world.screen().elements)
        assert {e.box[0] for e in moved} == {
            e.box[0] + 3 for e in content if e.label in {m.label for m in moved}
        }
        below = [(p.box[1], m.box[1]) for p in content for m in moved if p.label == m.label and p.box[1] >= 4]
        assert below and all(m == 4 + ((r - 4) * 9) // 8 for r, m in below)
        assert restyle(plain, "stretch", world.size).elements == world.screen().elements


def test_every_world_split_has_a_place_in_the_per_split_summary():
    from causalcache_lab.eval.worlds import WORLD_SPLIT_ORDER

    assert set(WORLD_SPLIT_ORDER) == {*WORLD_SPLITS, "v2"}


@pytest.mark.parametrize("purpose", ["train", "calibrate"])
def test_the_harness_refuses_to_train_or_calibrate_on_heldout_worlds(purpose):
    with pytest.raises(ConfigError, match="held-out"):
        generate_world_tasks(8, 0, worlds="heldout", purpose=purpose)
    with pytest.raises(ConfigError, match="held-out"):
        require_not_heldout(["dev-00", "heldout-02"], purpose)
    require_not_heldout(resolve_worlds("train,dev"), purpose)  # allowed
    assert len(generate_world_tasks(8, 0, worlds="heldout", purpose="evaluate")) == 8


def test_the_expert_solves_tasks_in_every_family_world():
    for world_id in [w for ids in WORLD_SPLITS.values() for w in ids[:2]]:
        for task in generate_world_tasks(6, 1, worlds=world_id):
            assert world_of(task) == world_id
            _, world = run_expert(task)
            assert task.check(world.state()), (world_id, task.goal)


def test_goal_wordings_plan_like_v2():
    plain = "Find the room of Dentist. Send the room to Alice in Messages."
    assert plan_goal(
        "Please find the room of Dentist. Please send the room to Alice in Messages."
    ) == plan_goal(plain)
    assert plan_goal("Get the room of Dentist. Message the room to Alice in Messages.") == plan_goal(plain)


def test_a_world_accepts_only_its_vocabulary():
    task = generate_world_tasks(1, 0, worlds="heldout-00")[0]
    assert world_spec("heldout-00").vocab == "command"
    world = GuiWorld(task, slips=False)
    world.step(Action("open_app", text="Shop"))  # touch navigation does nothing in a command world
    assert world.app == "Home"
    world.step(encode("command", "open_app", "Shop"))
    assert world.app == "Shop"
    typed = GuiWorld(generate_world_tasks(1, 0, worlds="devtype-00")[0], slips=False)
    typed.step(encode("command", "open_app", "Shop"))  # the held-out words do nothing in a slash world
    assert typed.app == "Home"
    typed.step(encode("slash", "open_app", "Shop"))
    assert typed.app == "Shop"
    for vocab in VOCABS:
        for op in ("open_app", "back", "home"):
            assert decode(vocab, encode(vocab, op, "Notes")).type == op
        assert decode(vocab, encode(vocab, "back", target=UNDO)).type == "back"


@pytest.mark.parametrize(
    ("vocab", "line", "expected"),
    [
        ("slash", ' "/notes"', ("open_app", ' "notes"')),
        ("slash", ' "/back"', ("back", "")),
        ("slash", ' "/undo"', ("back", f' "{UNDO}"')),
        ("slash", ' "/home"', ("home", "")),
        ("slash", ' "Gate 12"', ("type", ' "Gate 12"')),  # a typed value is not navigation
        ("command", ' "open Notes"', ("open_app", ' "notes"')),
        ("command", ' "/notes"', ("type", ' "/notes"')),  # another vocabulary's words
    ],
)
def test_a_typed_summary_line_reads_as_its_vocabularys_navigation(vocab, line, expected):
    assert summary_op(vocab, "type", line) == expected


def test_screen_text_is_what_ocr_reads_with_positions():
    for world_id in ("v2", "heldout-01", "train-00"):
        task = generate_world_tasks(1, 2, worlds=world_id)[0]
        world = GuiWorld(task, slips=False)
        _, info = world.step(encode(world.spec.vocab, "open_app", task.steps[0].app))
        text = world.screen_text()
        assert list(info.screen_text) == text  # beside the PNG on every step
        lines = ocr_png(world.screenshot()).lines
        assert [e["text"] for e in text] == [ln.text for ln in lines]
        for entry, line in zip(text, lines, strict=True):
            assert entry["box"] == pytest.approx(line.box_rel, abs=0.03)


# ---------------------------------------------------------------------------------------- recency
def _missed_tap_trace(archive):
    """A dev-world trajectory whose tap at a push step did nothing: the post-action screen is the screen
    the tap was taken on. Returns (trace at the next decision, the step's action, the plan)."""
    for task in generate_world_tasks(40, 4, worlds="dev", purpose="calibrate"):
        steps = task.steps
        k = next((i for i, s in enumerate(steps, 1) if s.op == "click" and s.push and i >= 4), None)
        if k is None:
            continue
        traj, _ = run_expert(task, archive)
        trace = Trace(task.goal, episode_id=task.task_id, platform=task.platform)
        trace.observe(traj.steps[0].screenshot_before)
        for i, step in enumerate(traj.steps[:k], 1):
            after = step.screenshot_before if i == k else step.screenshot_after  # the tap at k missed
            trace.record(step.action, step.response, after, app=step.app, screen_size=traj.screen_size)
        return task, trace, traj.steps[k - 1].action
    raise AssertionError("no dev task with a push tap after step 4")


def test_redoes_a_missed_tap_only_when_the_screen_it_was_taken_on_is_in_the_prompt(archive):
    task, trace, tap = _missed_tap_trace(archive)
    policy = policy_for_world(world_of(task), seed=0)
    policy.blind_notice = 0.0
    t = len(trace) + 1
    with_pre = make_allocation(recent_b(t, 4), t=t, budget=4, allocator="recent")
    without = make_allocation([j for j in recent_b(t, 4) if j != t - 2], t=t, budget=3, allocator="test")
    redo = policy.view(render_prompt(trace, with_pre).bind(archive)).intended
    blind = policy.view(render_prompt(trace, without).bind(archive)).intended
    assert redo is not None and redo.type == "click" and redo.target == tap.target
    assert blind is None or blind.target != tap.target  # it believes the tap worked and moves on


def test_undoes_a_tap_that_navigated_to_another_line(archive):
    for task in generate_world_tasks(40, 6, worlds="dev", purpose="calibrate"):
        k = next(
            (i for i, s in enumerate(task.steps, 1) if s.op == "click" and s.push and s.label and i >= 3),
            None,
        )
        if k is None:
            continue
        world = GuiWorld(task, slips=False)
        trace = Trace(task.goal, episode_id=task.task_id, platform=task.platform)
        trace.observe(archive.put(world.screenshot()).sha256)
        from causalcache_lab.world.expert import expert_action

        for i, step in enumerate(task.steps[:k], 1):
            action = expert_action(world, step, task.value)
            if i == k:  # tap the next clickable item instead, but narrate the intended label
                items = [e for e in world.screen().elements if e.kind == "item" and e.label != step.label]
                if not items:
                    break
                from causalcache_lab.world.expert import element_action

                action = element_action("click", items[0], world.size, target=step.label)
            png, info = world.step(action)
            trace.record(action, "", archive.put(png).sha256, app=info.app, screen_size=world.size)
        else:
            policy = policy_for_world(world_of(task), seed=0)
            t = len(trace) + 1
            prompt = render_prompt(trace, make_allocation(recent_b(t, 4), t=t, budget=4, allocator="recent"))
            undo = policy.view(prompt.bind(archive)).intended
            assert undo is not None and decode(world.spec.vocab, undo).type == "back"
            assert undo.target == UNDO
            return
    raise AssertionError("no dev task to misnavigate")


def test_the_selector_recipe_refuses_heldout_worlds_for_training_and_dev(tmp_path):
    from causalcache_lab.selector.recipe import world_setup

    with pytest.raises(ConfigError, match="refusing to train on held-out"):
        world_setup(tasks=2, archive=str(tmp_path / "a"), worlds="heldout-00")
    with pytest.raises(ConfigError, match="refusing to calibrate on held-out"):
        world_setup(
            tasks=2, archive=str(tmp_path / "a"), worlds="train-03", dev_tasks=2, dev_worlds="heldout"
        )
    setup = world_setup(
        tasks=2, archive=str(tmp_path / "a"), worlds="train-03", dev_tasks=2, dev_worlds="dev-00"
    )
    assert {t.metadata["world"] for t in setup["trajectories"]} == {"train-03", "dev-00"}
    train = next(t for t in setup["trajectories"] if t.metadata["world"] == "train-03")
    policy = setup["policy"].for_trajectory(train)  # each world's trajectories: that world's policy
    assert policy.vocab == "keys" and policy.recency
