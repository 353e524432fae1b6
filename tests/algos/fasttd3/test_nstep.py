"""n-step returns against plain-Python loops: the window arithmetic alone, and transitions sampled from SAC's
ring buffer after it wrapped, with terminal states and time limits inside the windows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.fasttd3.nstep import nstep_return, num_valid, sample_nstep
from rlfit.algos.offpolicy.replay import StepBatch, init_replay, insert

GAMMA = 0.9


def reference(rewards, discounts, ended, gamma):
    """(return, bootstrap) of one window by a loop: stop after the first step where the episode ended."""
    total = 0.0
    for k, (r, d, e) in enumerate(zip(rewards, discounts, ended)):
        total += gamma ** k * r
        if e:
            return total, gamma ** (k + 1) * d
    return total, gamma ** len(rewards) * discounts[-1]


def test_window_return_matches_the_loop():
    rng = np.random.default_rng(0)
    batch, n = 200, 4
    reward = rng.normal(size=(batch, n)).astype(np.float32)
    terminal = rng.random((batch, n)) < 0.15
    truncated = rng.random((batch, n)) < 0.15
    discount = (~terminal).astype(np.float32)
    ended = terminal | truncated
    got = nstep_return(jnp.asarray(reward), jnp.asarray(discount), jnp.asarray(ended), GAMMA)
    for i in range(batch):
        want_return, want_bootstrap = reference(reward[i].tolist(), discount[i].tolist(), ended[i].tolist(), GAMMA)
        assert float(got.reward[i]) == pytest.approx(want_return, abs=1e-5)
        assert float(got.bootstrap[i]) == pytest.approx(want_bootstrap, abs=1e-6)


# Two environments for 12 policy steps in a buffer of 8 rows (it wraps). Environment 0 hits its time limit every
# 4 steps; environment 1 ends in terminal states at steps 2 and 8 and a time limit at step 6.
STEPS, ENVS, ROWS, LIMIT = 12, 2, 8, 4
TERMINAL = {(2, 1), (8, 1)}
TRUNCATED = {(3, 0), (7, 0), (11, 0), (6, 1)}


def obs_id(t, e):
    return float(10 * t + e)


def final_id(t, e):
    """The pre-reset observation reached at step t (stored only at a time limit)."""
    return 1000.0 + 10 * t + e


def reward_of(t, e):
    return 0.1 * t + 0.01 * e + 1.0


def filled_buffer():
    replay = init_replay(StepBatch(jnp.zeros(1), jnp.zeros(1), 0.0, 0.0, 0.0, jnp.zeros(1)), ROWS * ENVS, ENVS, LIMIT)
    for t in range(STEPS):
        envs = range(ENVS)
        step = StepBatch(
            obs=jnp.array([[obs_id(t, e)] for e in envs]),
            action=jnp.array([[obs_id(t, e)] for e in envs]),
            reward=jnp.array([reward_of(t, e) for e in envs]),
            discount=jnp.array([0.0 if (t, e) in TERMINAL else 1.0 for e in envs]),
            truncation=jnp.array([1.0 if (t, e) in TRUNCATED else 0.0 for e in envs]),
            next_obs=jnp.array([[final_id(t, e)] for e in envs]),
        )
        replay = insert(replay, step)
    return replay


def reference_transition(t, e, n):
    """(return, bootstrap, next observation id or None after a terminal state) by a loop over the trajectory."""
    total = 0.0
    for k in range(n):
        s = t + k
        total += GAMMA ** k * reward_of(s, e)
        if (s, e) in TERMINAL:
            return total, 0.0, None
        if (s, e) in TRUNCATED:
            return total, GAMMA ** (k + 1), final_id(s, e)
    return total, GAMMA ** n, obs_id(t + n, e)


@pytest.mark.parametrize("n", [1, 3])
def test_sampled_transitions_match_the_trajectory(n):
    replay = filled_buffer()
    assert int(num_valid(replay, n)) == (ROWS - n) * ENVS
    batch = jax.jit(sample_nstep, static_argnums=(2, 3, 4))(replay, jax.random.PRNGKey(1), 512, n, GAMMA)
    seen = set()
    for i in range(512):
        t, e = divmod(int(batch.obs[i, 0]), 10)
        seen.add((t, e))
        assert float(batch.action[i, 0]) == obs_id(t, e)
        want_return, want_bootstrap, want_next = reference_transition(t, e, n)
        assert float(batch.reward[i]) == pytest.approx(want_return, abs=1e-5), (t, e)
        assert float(batch.bootstrap[i]) == pytest.approx(want_bootstrap, abs=1e-6), (t, e)
        if want_next is not None:
            assert float(batch.next_obs[i, 0]) == want_next, (t, e)
    # the oldest stored row is step 4 (12 steps in 8 rows); the newest n rows have no complete window
    assert seen == {(t, e) for t in range(STEPS - ROWS, STEPS - n) for e in range(ENVS)}
