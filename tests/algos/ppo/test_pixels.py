"""PPO on camera frames: the policy and the value function each train their own encoder, over any leading axes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from rlfit.algos.ppo.config import PPOConfig
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.algos.ppo.networks import make_agent
from rlfit.networks.encoders import EncoderSpec
from rlfit.networks.pixels import ENCODER, encoder_optimizer

T, SIZE, C, A = 2, 16, 3, 2


@pytest.fixture(scope="module")
def agent():
    obs = {PIXELS_KEY: jnp.zeros((T, SIZE, SIZE, C), jnp.uint8), "state": jnp.zeros(4)}
    spec = EncoderSpec("simple2dcnn", features=8, frames=T, image_size=SIZE, channels=C)
    return make_agent(obs, A, PPOConfig(policy_hidden=(16,), value_hidden=(16,)), encoder=spec)


def frames(key, leading):
    return jax.random.randint(key, (*leading, T, SIZE, SIZE, C), 0, 256).astype(jnp.uint8)


def test_rollout_shaped_batches_give_one_output_per_step_and_environment(agent):
    params = agent.init(jax.random.PRNGKey(0))
    obs = {PIXELS_KEY: frames(jax.random.PRNGKey(1), (5, 3)), "state": jnp.zeros((5, 3, 4))}  # [unroll, envs]
    assert agent.policy_logits(params.policy, obs).shape == (5, 3, 2 * A)
    assert agent.value(params.value, obs).shape == (5, 3)
    flat = {PIXELS_KEY: obs[PIXELS_KEY].reshape((15, T, SIZE, SIZE, C))}
    assert jnp.allclose(agent.value(params.value, flat).reshape(5, 3), agent.value(params.value, obs), atol=1e-6)


def test_each_loss_trains_its_own_encoder(agent):
    params = agent.init(jax.random.PRNGKey(0))
    obs = {PIXELS_KEY: frames(jax.random.PRNGKey(2), (6,))}
    policy_grad = jax.grad(lambda p: jnp.sum(agent.policy_logits(p, obs) ** 2))(params.policy)
    value_grad = jax.grad(lambda p: jnp.sum(agent.value(p, obs) ** 2))(params.value)
    for grad in (policy_grad, value_grad):
        assert sum(float(jnp.abs(x).sum()) for x in jax.tree.leaves(grad["params"][ENCODER])) > 0


@pytest.mark.parametrize("freeze", [False, True])
def test_freezing_keeps_the_encoder_and_trains_the_head(agent, freeze):
    import optax

    params = agent.init(jax.random.PRNGKey(0)).policy
    optimizer = encoder_optimizer(optax.adam(1e-2), freeze)
    obs = {PIXELS_KEY: frames(jax.random.PRNGKey(3), (6,))}
    grads = jax.grad(lambda p: jnp.sum(agent.policy_logits(p, obs) ** 2))(params)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    new = optax.apply_updates(params, updates)
    moved = [float(jnp.abs(a - b).sum()) for a, b in zip(jax.tree.leaves(new["params"][ENCODER]),
                                                         jax.tree.leaves(params["params"][ENCODER]))]
    assert (sum(moved) == 0.0) == freeze
    assert any(float(jnp.abs(a - b).sum()) > 0 for a, b in zip(jax.tree.leaves(new["params"]["head"]),
                                                                jax.tree.leaves(params["params"]["head"])))
