"""The critic target (clipped double Q over distributions, target policy smoothing with a noise clip) against a
plain-Python computation, and the actor loss's choice of critic."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.fasttd3.config import FastTD3Config
from rlfit.algos.fasttd3.losses import TargetSettings, actor_loss, critic_target, smoothed_action
from rlfit.algos.fasttd3.networks import make_fasttd3_networks
from rlfit.algos.fasttd3.nstep import NStepBatch
from tests.algos.fasttd3.test_distributional import reference_projection

CONFIG = FastTD3Config(n_step=3, actor_hidden=(16,), critic_hidden=(16,), num_atoms=11, v_min=-5.0, v_max=5.0,
                       actor_init_scale=1.0)


def test_smoothing_noise_is_clipped_then_the_action():
    action = jnp.array([[0.0, 0.9, -0.95]] * 200)
    key = jax.random.PRNGKey(3)
    got = np.asarray(smoothed_action(action, key, policy_noise=1.0, noise_clip=0.3))
    noise = np.asarray(jax.random.normal(key, action.shape))  # the draw smoothed_action makes
    want = np.clip(np.asarray(action) + np.clip(noise, -0.3, 0.3), -1.0, 1.0)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(got[:, 0]).max() <= 0.3 + 1e-6 and got.max() <= 1.0 and got.min() >= -1.0


@pytest.mark.parametrize("clipped_double_q", [True, False])
def test_critic_target_matches_a_plain_computation(clipped_double_q):
    networks = make_fasttd3_networks(jnp.zeros(3), 2, CONFIG)
    params = networks.init(jax.random.PRNGKey(0))
    target_q = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(jax.random.PRNGKey(9), x.shape), params.target_q)
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    batch = NStepBatch(obs=jax.random.normal(keys[0], (8, 3)), action=jnp.zeros((8, 2)),
                       reward=jax.random.uniform(keys[1], (8,), minval=-1.0, maxval=1.0),
                       bootstrap=jnp.array([0.0, 0.9, 0.81, 0.729] * 2), next_obs=jax.random.normal(keys[2], (8, 3)))
    settings = TargetSettings(policy_noise=0.2, noise_clip=0.1, clipped_double_q=clipped_double_q)
    got = np.asarray(critic_target(params.policy, target_q, networks, batch, keys[3], settings))

    next_action = np.clip(np.tanh(np.asarray(networks.actor(params.policy, batch.next_obs)))
                          + np.clip(0.2 * np.asarray(jax.random.normal(keys[3], (8, 2))), -0.1, 0.1), -1.0, 1.0)
    logits = np.asarray(networks.critic(target_q, batch.next_obs, jnp.asarray(next_action)), np.float64)
    support = np.linspace(-5.0, 5.0, 11)
    for i in range(8):
        probs = [np.exp(row - row.max()) / np.exp(row - row.max()).sum() for row in logits[i]]
        means = [float(p @ support) for p in probs]
        if clipped_double_q:
            chosen = probs[0] if means[0] <= means[1] else probs[1]
        else:
            chosen = (probs[0] + probs[1]) / 2
        want = reference_projection(chosen.tolist(), float(batch.reward[i]), float(batch.bootstrap[i]), support.tolist())
        np.testing.assert_allclose(got[i], want, atol=1e-5)


def test_actor_loss_is_minus_the_smaller_expected_value():
    networks = make_fasttd3_networks(jnp.zeros(3), 2, CONFIG)
    params = networks.init(jax.random.PRNGKey(0))
    obs = jax.random.normal(jax.random.PRNGKey(4), (6, 3))
    logits = networks.critic(params.q, obs, networks.action(params.policy, obs))
    values = np.asarray(jnp.sum(jax.nn.softmax(logits, axis=-1) * networks.support, axis=-1))
    assert float(actor_loss(params.policy, params.q, networks, obs, True)) == pytest.approx(-values.min(1).mean(), abs=1e-6)
    assert float(actor_loss(params.policy, params.q, networks, obs, False)) == pytest.approx(-values.mean(), abs=1e-6)
