"""FastTD3's seeds in one compiled program (`rlfit experiment`'s seed groups): a seed trained in a group of 3
follows its solo run (rounding apart, as for PPO in tests/study/test_seed_group.py), replay buffer, exploration
stds and evaluation included; the same seed in another group of the same size is bit-identical."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import config_sizes, make_plan
from rlfit.run.trainer import Trainer
from rlfit.run.evaluate import eval_key
from rlfit.run.seed_group import SeedGroup, lane
from tests.conftest import TOY_ENV
from tests.seed_groups import train_group_and_alone

ITERATIONS = 3
OVERRIDES = ("algo=fasttd3", "env.episode_length=50", "fasttd3.num_envs=4", "fasttd3.batch_size=16",
             "fasttd3.max_replay_size=400", "fasttd3.min_replay_size=16", "run.num_eval_envs=8")
"""The smoke preset's tiny networks; 4 environments x 8 policy steps per iteration, two critic updates each."""


@pytest.fixture(scope="module")
def trainer():
    config = resolve(TOY_ENV, "smoke", overrides=list(OVERRIDES))
    return Trainer.build(config, make_plan(config, config_sizes(config)))


def test_a_fasttd3_seed_in_a_group_equals_the_seed_alone(trainer):
    group, grouped, _, alone, _ = train_group_and_alone(trainer, (3, 4, 5), 4, ITERATIONS)
    seed4 = lane(grouped, 1)
    leaves = jax.tree.leaves_with_path(seed4)
    assert len(leaves) == len(jax.tree.leaves(alone))
    for (path, ours), theirs in zip(leaves, jax.tree.leaves(alone), strict=True):
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        if np.issubdtype(ours.dtype, np.floating):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=jax.tree_util.keystr(path))
        else:  # keys, counters, write positions: exact
            np.testing.assert_array_equal(ours, theirs, err_msg=jax.tree_util.keystr(path))
    rewards = np.asarray(group.evaluate(grouped, ITERATIONS).episode_reward)
    solo = float(trainer.compile(alone).evaluate(*trainer.learner.acting(alone), eval_key(4, ITERATIONS)).episode_reward)
    assert rewards.shape == (3,) and rewards[1] == pytest.approx(solo, rel=1e-5, abs=1e-5)
    assert len(set(np.round(rewards, 4).tolist())) > 1  # different seeds, different policies


def test_a_fasttd3_seed_does_not_depend_on_the_seeds_beside_it(trainer):
    first = SeedGroup.build(trainer, (3, 4, 5))
    first.compile()
    other = first.with_seeds((4, 9, 10))
    assert other.compiled_step is first.compiled_step
    a, b = first.init(), other.init()
    for _ in range(ITERATIONS):
        a, _ = first.step(a)
        b, _ = other.step(b)
    for ours, theirs in zip(jax.tree.leaves(lane(a, 1)), jax.tree.leaves(lane(b, 0)), strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
