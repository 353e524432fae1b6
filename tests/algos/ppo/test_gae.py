"""compute_gae against a plain-Python double loop: truncation bootstraps, termination does not."""

from __future__ import annotations

import numpy as np
import pytest

from rlfit.algos.ppo.gae import compute_gae


def reference_gae(rewards, values, next_values, terminations, truncations, discount, lam):
    """GAE written as a double loop over envs and time, one episode segment at a time."""
    num_steps, num_envs = rewards.shape
    advantages = np.zeros((num_steps, num_envs))
    for b in range(num_envs):
        running = 0.0
        for t in reversed(range(num_steps)):
            if terminations[t, b]:
                bootstrap = 0.0  # a terminal state has no value beyond it
            else:
                bootstrap = next_values[t, b]  # a time limit (or the sequence end) bootstraps from V(s_{t+1})
            delta = rewards[t, b] + discount * bootstrap - values[t, b]
            episode_ended = terminations[t, b] or truncations[t, b]
            if t == num_steps - 1 or episode_ended:
                running = delta  # nothing of this episode follows inside the sequence
            else:
                running = delta + discount * lam * running
            advantages[t, b] = running
    return advantages, advantages + values


def random_case(seed, num_steps=12, num_envs=5, p_end=0.2):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(num_steps, num_envs))
    values = rng.normal(size=(num_steps, num_envs))
    next_values = rng.normal(size=(num_steps, num_envs))
    ends = rng.random((num_steps, num_envs)) < p_end
    terminal = rng.random((num_steps, num_envs)) < 0.5
    terminations = (ends & terminal).astype(np.float32)
    truncations = (ends & ~terminal).astype(np.float32)
    return [a.astype(np.float32) for a in (rewards, values, next_values)] + [terminations, truncations]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("discount", "lam"), [(0.99, 0.95), (0.9, 1.0), (0.5, 0.0)])
def test_matches_python_loop_on_random_sequences(seed, discount, lam):
    case = random_case(seed)
    assert case[3].any() and case[4].any(), "the case must contain both kinds of episode end"
    advantages, returns = compute_gae(*case, discount, lam)
    expected_adv, expected_ret = reference_gae(*case, discount, lam)
    assert advantages.shape == returns.shape == case[0].shape
    np.testing.assert_allclose(advantages, expected_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns, expected_ret, rtol=1e-5, atol=1e-5)


def test_hand_computed_single_env():
    """T=4, one env: step 1 is truncated, step 3 (the last) is terminal."""
    rewards = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    values = np.array([[0.5], [0.25], [1.0], [2.0]], np.float32)
    next_values = np.array([[0.25], [10.0], [2.0], [100.0]], np.float32)
    terminations = np.array([[0], [0], [0], [1]], np.float32)
    truncations = np.array([[0], [1], [0], [0]], np.float32)
    gamma, lam = 0.5, 0.5
    # step 3: terminal, no bootstrap: 4 - 2 = 2
    a3 = 4.0 - 2.0
    # step 2: bootstraps from next value 2 and continues into step 3
    a2 = (3.0 + 0.5 * 2.0 - 1.0) + gamma * lam * a3
    # step 1: truncated: bootstraps from V(final obs) = 10 but does not continue into the next episode
    a1 = 2.0 + 0.5 * 10.0 - 0.25
    a0 = (1.0 + 0.5 * 0.25 - 0.5) + gamma * lam * a1
    advantages, returns = compute_gae(rewards, values, next_values, terminations, truncations, gamma, lam)
    np.testing.assert_allclose(np.asarray(advantages)[:, 0], [a0, a1, a2, a3], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(returns)[:, 0], np.array([a0, a1, a2, a3]) + values[:, 0], rtol=1e-6)


def test_truncation_bootstraps_and_termination_does_not():
    """The same step once truncated and once terminal differs by exactly discount * next_value."""
    rewards = np.ones((3, 1), np.float32)
    values = np.zeros((3, 1), np.float32)
    next_values = np.full((3, 1), 7.0, np.float32)
    ended = np.array([[0], [1], [0]], np.float32)
    none = np.zeros((3, 1), np.float32)
    truncated, _ = compute_gae(rewards, values, next_values, none, ended, 0.9, 0.8)
    terminated, _ = compute_gae(rewards, values, next_values, ended, none, 0.9, 0.8)
    assert float(truncated[1, 0]) == pytest.approx(1.0 + 0.9 * 7.0)
    assert float(terminated[1, 0]) == pytest.approx(1.0)
    # The step after the boundary is a new episode: unaffected by how the previous one ended.
    assert float(truncated[2, 0]) == pytest.approx(float(terminated[2, 0]))
    # The step before the boundary sees the difference through lambda.
    assert float(truncated[0, 0] - terminated[0, 0]) == pytest.approx(0.9 * 0.8 * 0.9 * 7.0, rel=1e-5)


def test_last_step_bootstraps_from_next_value():
    rewards = np.zeros((2, 3), np.float32)
    values = np.zeros((2, 3), np.float32)
    next_values = np.array([[0, 0, 0], [1, 2, 3]], np.float32)
    none = np.zeros((2, 3), np.float32)
    advantages, _ = compute_gae(rewards, values, next_values, none, none, 0.5, 1.0)
    np.testing.assert_allclose(advantages[1], [0.5, 1.0, 1.5])
    np.testing.assert_allclose(advantages[0], [0.25, 0.5, 0.75])
