"""Seeds in one compiled program: a seed trained in a group of 4 equals the seed trained alone (1e-5), and so
does its evaluation; beside other seeds, in another place of the group, it is bit-identical."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import config_sizes, make_plan
from rlfit.run.evaluate import eval_key
from rlfit.run.seed_group import SeedGroup, lane, stack
from rlfit.run.trainer import Trainer
from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES
from tests.seed_groups import train_group_and_alone

ITERATIONS = 3


def test_stack_and_lane_are_inverse():
    trees = [{"a": np.full((2,), i), "b": (np.float32(i),)} for i in range(3)]
    stacked = stack(trees)
    assert stacked["a"].shape == (3, 2) and stacked["b"][0].shape == (3,)
    for i, tree in enumerate(trees):
        assert jax.tree.all(jax.tree.map(lambda x, y: bool(np.array_equal(x, y)), lane(stacked, i), tree))


def test_a_seed_in_a_group_of_four_equals_the_seed_alone():
    config = resolve(TOY_ENV, "smoke", overrides=list(TOY_TRAIN_OVERRIDES))
    trainer = Trainer.build(config, make_plan(config, config_sizes(config)))
    group, grouped, grouped_metrics, alone, alone_metrics = train_group_and_alone(trainer, (5, 6, 7, 8), 7, ITERATIONS)
    seed7 = lane(grouped, 2)
    for ours, theirs in zip(jax.tree.leaves(seed7.params), jax.tree.leaves(alone.params)):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)
    assert float(lane(grouped_metrics, 2).episodes_finished) == float(alone_metrics.episodes_finished)
    rewards = np.asarray(group.evaluate(grouped, ITERATIONS).episode_reward)
    evaluate = trainer.compile(alone).evaluate
    solo = float(evaluate(*trainer.learner.acting(alone), eval_key(7, ITERATIONS)).episode_reward)
    assert rewards.shape == (4,) and rewards[2] == pytest.approx(solo, rel=1e-5, abs=1e-5)
    assert len(set(np.round(rewards, 3).tolist())) > 1  # different seeds, different policies


def test_seeds_must_be_distinct():
    with pytest.raises(ValueError, match="seeds must be distinct"):
        SeedGroup.build(None, (1, 1))


def test_a_seed_does_not_depend_on_the_seeds_beside_it():
    config = resolve(TOY_ENV, "smoke", overrides=list(TOY_TRAIN_OVERRIDES))
    trainer = Trainer.build(config, make_plan(config, config_sizes(config)))
    first = SeedGroup.build(trainer, (5, 6, 7, 8))
    first.compile()
    other = first.with_seeds((9, 7, 10, 11))
    assert other.compiled_step is first.compiled_step  # the same program, other seeds
    a, b = first.init(), other.init()
    for _ in range(ITERATIONS):
        a, _ = first.step(a)
        b, _ = other.step(b)
    for ours, theirs in zip(jax.tree.leaves(lane(a, 2)), jax.tree.leaves(lane(b, 1))):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_a_group_starts_where_each_seed_starts_alone_and_a_second_group_reads_its_programs_from_the_store(
        tmp_path, monkeypatch):
    """A group's starting state is, lane by lane, bit for bit a solo run's; its step and evaluation are kept in the
    program store (a gridworld: a built-in environment, whose programs are stored), so a second process's group
    (here: a new Trainer) traces neither."""
    from rlfit.hardware import program_store

    monkeypatch.setattr(program_store, "store_dir", lambda: tmp_path)
    exported = []
    export = program_store._export
    monkeypatch.setattr(program_store, "_export", lambda fn, *rest: exported.append(fn) or export(fn, *rest))

    def trainer(seed: int) -> Trainer:
        config = resolve("gridworld:Empty-5x5", "smoke", overrides=[f"run.seed={seed}"])
        return Trainer.build(config, make_plan(config, config_sizes(config)))

    group = SeedGroup.build(trainer(0), (3, 4))
    state = group.init()
    for index, seed in enumerate((3, 4)):
        alone = trainer(seed).init_state()
        for ours, theirs in zip(jax.tree.leaves(lane(state, index)), jax.tree.leaves(alone)):
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    group.compile(state)
    assert len(exported) == 3  # the starting state (one for every seed), the group's step and its evaluation
    entries = sorted(tmp_path.glob("*.jaxprog"))

    again = SeedGroup.build(trainer(9), (3, 4))
    again.compile(again.init())
    assert len(exported) == 3 and sorted(tmp_path.glob("*.jaxprog")) == entries
    first, _ = group.step(jax.tree.map(jax.numpy.copy, state))
    second, _ = again.step(jax.tree.map(jax.numpy.copy, state))
    for ours, theirs in zip(jax.tree.leaves(first), jax.tree.leaves(second)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
