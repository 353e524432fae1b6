"""SAC's Learner (`ALGORITHM.build`, as the runner builds it) on the toy env: fixed shapes (compiled once), replay
growth, updates, target, seeds."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlfit.config.schema import resolve
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import Trainer

N, EPISODE_LENGTH, STEPS = 4, 5, 3
OVERRIDES = ("algo=sac", f"env.episode_length={EPISODE_LENGTH}", f"sac.num_envs={N}", "sac.batch_size=16",
             "sac.min_replay_size=10", f"sac.max_replay_size={12 * N}", "sac.grad_updates_per_step=2", "sac.tau=0.1",
             "sac.learning_rate=1e-3", "sac.normalize_observations=true", "sac.policy_hidden=[16]", "sac.q_hidden=[16]",
             f"sac.policy_steps_per_iteration={STEPS}")
"""Prefill: ceil(10 / 4) = 3 policy steps; the 12-row ring is full after 3 more train steps of 3 policy steps."""
TOY = "tests.toy_env:make"


class Setup:
    """The Learner `Trainer.build` makes (`rlfit.algos.sac.algorithm.build`), its step jitted with the state donated."""

    def __init__(self, *changes: str):
        config = resolve(TOY, "default", overrides=[*OVERRIDES, *changes])
        self.config = config.sac
        self.learner = Trainer.build(config, make_plan(config)).learner
        self.step = jax.jit(self.learner.step, donate_argnums=0)

    def init(self, seed: int = 0):
        """A fresh state, its replay buffer prefilled to `min_replay_size`."""
        return self.learner.init(seed)


@pytest.fixture(scope="module")
def setup():
    return Setup()


def avals(tree):
    return [(leaf.shape, leaf.dtype, jax.typeof(leaf).weak_type) for leaf in jax.tree.leaves(tree)]


def copy_tree(tree):
    return jax.tree.map(lambda x: np.array(x), tree)


def test_prefill_fills_the_buffer_with_uniform_random_actions(setup):
    state = setup.init()
    assert int(state.replay.size) == 3 and int(state.policy_steps) == 3 and int(state.grad_steps) == 0
    actions = np.asarray(state.replay.action[:3])
    assert np.all(np.abs(actions) <= 1) and np.unique(actions).size == actions.size
    assert float(state.normalizer.count) == 3 * N


def test_state_keeps_shapes_dtypes_and_compiles_once(setup):
    state = setup.init()
    before = avals(state)
    sizes = []
    for _ in range(4):
        state, metrics = setup.step(state)
        assert avals(state) == before
        assert bool(metrics.all_finite)
        sizes.append(int(metrics.replay_size))
    assert setup.step._cache_size() == 1, "the train step recompiled"
    assert sizes == [6 * N, 9 * N, 12 * N, 12 * N], "replay grows by num_envs per policy step up to capacity"
    assert int(state.policy_steps) == 3 + 4 * STEPS and int(state.grad_steps) == 4 * STEPS * 2
    assert float(state.normalizer.count) == (3 + 4 * STEPS) * N


def test_first_step_waits_then_parameters_change_and_the_target_follows_by_tau():
    setup = Setup("sac.min_replay_size=0", "sac.grad_updates_per_step=1", "sac.policy_steps_per_iteration=1")
    state = setup.init()
    params0 = copy_tree(state.params)
    state, metrics = setup.step(state)  # one row stored: its successor is not, so nothing to learn from yet
    assert int(state.grad_steps) == 0 and int(metrics.replay_size) == N
    for old, new in zip(jax.tree.leaves(params0), jax.tree.leaves(state.params)):
        np.testing.assert_array_equal(old, new)
    assert float(metrics.critic_loss) == 0.0 and bool(metrics.all_finite)

    state, metrics = setup.step(state)  # one update on the first row's transitions
    after = copy_tree(state.params)
    assert int(state.grad_steps) == 1
    for name in ("policy", "q", "target_q", "log_alpha"):
        for old, new in zip(jax.tree.leaves(getattr(params0, name)), jax.tree.leaves(getattr(after, name))):
            assert not np.allclose(old, new), f"a {name} array did not change"
    for old_target, q, target in zip(*(jax.tree.leaves(t) for t in (params0.target_q, after.q, after.target_q))):
        np.testing.assert_allclose(target, 0.9 * old_target + 0.1 * q, rtol=1e-6, atol=1e-7)
    assert float(metrics.alpha) == pytest.approx(float(np.exp(after.log_alpha)))
    assert np.isfinite([metrics.critic_loss, metrics.actor_loss, metrics.alpha_loss, metrics.entropy]).all()


def test_episode_statistics(setup):
    state = setup.init()
    finished, length_sum = 0.0, 0.0
    for _ in range(4):
        state, metrics = setup.step(state)
        finished += float(metrics.episodes_finished)
        length_sum += float(metrics.episode_length_sum)
        assert float(metrics.episode_return_sum) <= float(metrics.episode_length_sum)  # reward <= 1 per step
    # policy steps 4 to 15 (after 3 of prefill) end episodes at 5, 10, 15 in every environment: the toy point
    # cannot leave [-2, 2] in 5 steps, so all end at the time limit
    assert finished == 3 * N and length_sum == 3 * N * EPISODE_LENGTH


def test_same_seed_same_result_different_seed_diverges(setup):
    def run(seed):
        state = setup.init(seed)
        for _ in range(2):
            state, metrics = setup.step(state)
        return copy_tree(state.params), float(metrics.critic_loss)

    params_a, loss_a = run(0)
    params_b, loss_b = run(0)
    params_c, loss_c = run(1)
    for a, b in zip(jax.tree.leaves(params_a), jax.tree.leaves(params_b)):
        np.testing.assert_array_equal(a, b)
    assert loss_a == loss_b and loss_a != loss_c
    assert all(not np.allclose(a, c) for a, c in zip(jax.tree.leaves(params_a), jax.tree.leaves(params_c)))


def test_initial_alpha_sets_the_starting_temperature_and_adam_moves_it_one_step():
    setup = Setup("sac.min_replay_size=0", "sac.grad_updates_per_step=1", "sac.policy_steps_per_iteration=1",
                  "sac.initial_alpha=0.1")
    state = setup.init()
    assert float(state.params.log_alpha) == pytest.approx(np.log(0.1), abs=1e-7)
    state, _ = setup.step(state)
    state, metrics = setup.step(state)  # the first update
    # Adam's first step moves a parameter by the learning rate (times g / (|g| + eps), |g| >> eps) either way.
    step = abs(float(state.params.log_alpha) - np.log(0.1))
    assert step == pytest.approx(setup.config.alpha_learning_rate, rel=1e-3)
    assert float(metrics.alpha) == pytest.approx(np.exp(float(state.params.log_alpha)))
