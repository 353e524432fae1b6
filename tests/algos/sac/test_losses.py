"""SAC losses against a numpy (float64) computation from the networks' outputs, and where gradients flow."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.losses import actor_loss, alpha_loss, critic_loss
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.offpolicy.replay import Batch

B, D, A = 6, 3, 2
MIN_STD = 1e-3  # Brax's NormalTanhDistribution: std = softplus(raw_scale) + 0.001
REWARD_SCALING, DISCOUNTING, TARGET_ENTROPY = 2.0, 0.9, -0.5 * A


def np_softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def np_policy_sample(networks, policy_params, obs, key):
    """(action, log-prob) in float64: raw = mean + std * eps with eps the key's standard normal draw [B, A]."""
    logits = np.asarray(networks.policy_logits(policy_params, obs), np.float64)
    mean, std = logits[:, :A], np_softplus(logits[:, A:]) + MIN_STD
    eps = np.asarray(jax.random.normal(key, (B, A)), np.float64)
    raw = mean + std * eps
    gauss = -0.5 * eps**2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    return np.tanh(raw), np.sum(gauss - np.log(1.0 - np.tanh(raw) ** 2), axis=-1)


def np_q(networks, q_params, obs, action):
    return np.asarray(networks.q_head(q_params, obs, jnp.asarray(action, jnp.float32)), np.float64)


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "layer_norm"])
def case(request):
    config = SACConfig(policy_hidden=(8, 8), q_hidden=(8, 8), q_layer_norm=request.param)
    networks = make_sac_networks(jnp.zeros(D), A, config)
    params = networks.init(jax.random.PRNGKey(0))
    # a different target network, so that target and online Q values differ
    target_q = networks.init(jax.random.PRNGKey(1)).q
    rng = np.random.default_rng(0)
    batch = Batch(obs=jnp.asarray(rng.normal(size=(B, D)), jnp.float32),
                  action=jnp.asarray(rng.uniform(-1, 1, (B, A)), jnp.float32),
                  reward=jnp.asarray(rng.normal(size=B), jnp.float32),
                  discount=jnp.asarray([1, 0, 1, 1, 0, 1], jnp.float32),
                  next_obs=jnp.asarray(rng.normal(size=(B, D)), jnp.float32))
    return networks, params._replace(target_q=target_q, log_alpha=jnp.asarray(-0.3)), batch


def test_alpha_loss_and_entropy(case):
    networks, params, batch = case
    key = jax.random.PRNGKey(3)
    encoded = networks.encode(params.q, batch.obs)
    loss, entropy = alpha_loss(params.log_alpha, params.policy, networks, encoded, TARGET_ENTROPY, key)
    _, log_prob = np_policy_sample(networks, params.policy, batch.obs, key)
    np.testing.assert_allclose(loss, np.mean(-(-0.3) * (log_prob + TARGET_ENTROPY)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(entropy, -np.mean(log_prob), rtol=1e-5, atol=1e-6)
    grad_log_alpha, grad_policy = jax.grad(lambda la, p: alpha_loss(la, p, networks, encoded, TARGET_ENTROPY,
                                                                   key)[0], argnums=(0, 1))(params.log_alpha,
                                                                                            params.policy)
    np.testing.assert_allclose(grad_log_alpha, -np.mean(log_prob + TARGET_ENTROPY), rtol=1e-5, atol=1e-6)
    assert all(np.all(g == 0) for g in jax.tree.leaves(grad_policy)), "the log-prob must be a constant"


def test_critic_loss(case):
    networks, params, batch = case
    key, alpha = jax.random.PRNGKey(4), jnp.exp(params.log_alpha)
    loss, encoded = critic_loss(params.q, params.policy, params.target_q, alpha, networks, batch, REWARD_SCALING,
                                DISCOUNTING, key)
    np.testing.assert_array_equal(encoded.q, batch.obs)  # vector observations: the heads see them as they are
    next_action, next_log_prob = np_policy_sample(networks, params.policy, batch.next_obs, key)
    next_q = np_q(networks, params.target_q, batch.next_obs, next_action)
    next_value = next_q.min(axis=-1) - float(alpha) * next_log_prob
    target = np.asarray(batch.reward) * REWARD_SCALING + np.asarray(batch.discount) * DISCOUNTING * next_value
    q = np_q(networks, params.q, batch.obs, batch.action)
    assert q.shape == (B, 2) and not np.allclose(q[:, 0], q[:, 1]), "the twin critics must differ"
    np.testing.assert_allclose(loss, 0.5 * np.mean((q - target[:, None]) ** 2), rtol=1e-5, atol=1e-6)
    # no gradient through the target: neither into the policy nor (obviously) the target network
    grad_policy, _ = jax.grad(critic_loss, argnums=1, has_aux=True)(
        params.q, params.policy, params.target_q, alpha, networks, batch, REWARD_SCALING, DISCOUNTING, key)
    assert all(np.all(g == 0) for g in jax.tree.leaves(grad_policy))


def test_critic_target_ignores_the_next_observation_after_a_terminal(case):
    networks, params, batch = case
    args = (params.q, params.policy, params.target_q, jnp.asarray(0.5), networks)
    terminal = batch._replace(discount=jnp.zeros(B))
    moved = terminal._replace(next_obs=terminal.next_obs + 100.0)
    key = jax.random.PRNGKey(5)
    assert critic_loss(*args, terminal, REWARD_SCALING, DISCOUNTING, key)[0] == \
        critic_loss(*args, moved, REWARD_SCALING, DISCOUNTING, key)[0]


def test_actor_loss(case):
    networks, params, batch = case
    key, alpha = jax.random.PRNGKey(6), jnp.exp(params.log_alpha)
    encoded = networks.encode(params.q, batch.obs)
    loss = actor_loss(params.policy, params.q, alpha, networks, encoded, key)
    action, log_prob = np_policy_sample(networks, params.policy, batch.obs, key)
    min_q = np_q(networks, params.q, batch.obs, action).min(axis=-1)
    np.testing.assert_allclose(loss, np.mean(float(alpha) * log_prob - min_q), rtol=1e-5, atol=1e-6)
    grad_policy = jax.grad(actor_loss)(params.policy, params.q, alpha, networks, encoded, key)
    assert all(np.any(g != 0) for g in jax.tree.leaves(grad_policy)), "gradients reach every policy parameter"


def test_networks_parameters():
    config = SACConfig(policy_hidden=(8,), q_hidden=(8, 8), q_layer_norm=True)
    params = make_sac_networks(jnp.zeros(D), A, config).init(jax.random.PRNGKey(0))
    assert set(params.q["params"]) == {"critic_0", "critic_1"}
    assert set(params.q["params"]["critic_0"]) == {"dense_0", "norm_0", "dense_1", "norm_1", "dense_2"}
    for q, target in zip(jax.tree.leaves(params.q), jax.tree.leaves(params.target_q)):
        np.testing.assert_array_equal(q, target)
    assert float(params.log_alpha) == 0.0
    plain = make_sac_networks(jnp.zeros(D), A, SACConfig(q_hidden=(8,))).init(jax.random.PRNGKey(0))
    assert set(plain.q["params"]["critic_0"]) == {"dense_0", "dense_1"}
    half = make_sac_networks(jnp.zeros(D), A, config, precision="fp16")
    assert {leaf.dtype for leaf in jax.tree.leaves(half.init(jax.random.PRNGKey(0)))} == {np.dtype("float32")}
