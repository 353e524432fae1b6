"""Collecting experience: the policy acts in the batched environment for `unroll_length` steps.

Knows nothing about the learning algorithm beyond "a policy whose logits parameterize an action distribution"
(the agent's: a tanh-Gaussian for continuous actions, a categorical for discrete ones).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation, Variables
from rlfit.envs.vec_env import EnvState, VecEnv
from rlfit.algos.ppo.networks import Agent
from rlfit.algos.common.normalizer import RunningStats, normalize


class Transition(NamedTuple):
    """One step of experience; leading axes [T, B] after `collect`."""

    obs: Observation
    """Raw (unnormalized) observation the action was chosen on."""
    raw_action: jax.Array
    """[A] float32 pre-tanh action (continuous) or [] int32 action index (discrete)."""
    log_prob: jax.Array
    reward: jax.Array
    termination: jax.Array
    truncation: jax.Array
    next_obs: Observation
    """Observation reached (the final one if the episode ended), for bootstrapping."""
    latent_noise: jax.Array
    """[Z] the noise of the policy's information bottleneck at this step ([0] without one)."""
    finished_return: jax.Array
    finished_length: jax.Array
    logits: jax.Array | None = None
    """[logits_size] the logits the action was drawn from, kept (`collect(keep_logits=True)`) for the KL of the
    `adaptive_kl` learning-rate schedule; None otherwise."""


def policy_logits(agent: Agent, policy_params: Variables, obs: Observation, noise: jax.Array) -> jax.Array:
    """The acting logits [..., logits_size]; through the bottleneck with `noise` [..., Z] when the agent has one."""
    if not agent.latent_size:
        return agent.policy_logits(policy_params, obs)
    assert agent.policy_sample is not None, "an agent with a latent size has a bottleneck's policy_sample"
    return agent.policy_sample(policy_params, obs, noise)[0]


def collect(
    env: VecEnv,
    agent: Agent,
    policy_params: Variables,
    stats: RunningStats,
    env_state: EnvState,
    key: jax.Array,
    unroll_length: int,
    num_unrolls: int,
    keep_logits: bool = False,
) -> tuple[EnvState, Transition]:
    """Runs `num_unrolls` unrolls of `unroll_length` steps; returns transitions [T, num_unrolls * N] (with the
    acting logits when `keep_logits`). Each step acts with its own key from `step_keys(key, ...)`."""
    return collect_with_keys(env, agent, policy_params, stats, env_state,
                             step_keys(key, unroll_length, num_unrolls), keep_logits)


def step_keys(key: jax.Array, unroll_length: int, num_unrolls: int) -> jax.Array:
    """[U, T, 2] the keys `collect` acts with: `split(key, U)`, each of those split into T."""
    return jax.vmap(lambda unroll_key: jax.random.split(unroll_key, unroll_length))(jax.random.split(key, num_unrolls))


def collect_with_keys(
    env: VecEnv,
    agent: Agent,
    policy_params: Variables,
    stats: RunningStats,
    env_state: EnvState,
    keys: jax.Array,
    keep_logits: bool = False,
) -> tuple[EnvState, Transition]:
    """`collect` with each step's key given: `keys` [U, T, 2] (U unrolls of T steps, one after another), the
    step's action drawn with its key (its bottleneck noise too, from a split of it); transitions [T, U * N]."""
    num_unrolls, unroll_length = keys.shape[:2]

    def act_and_step(state: EnvState, step_key: jax.Array) -> tuple[EnvState, Transition]:
        obs = state.inner.obs
        action_key, noise = step_key, jnp.zeros((env.num_envs, 0))  # no bottleneck: the same stream as before it
        if agent.latent_size:
            action_key, noise_key = jax.random.split(step_key)
            noise = jax.random.normal(noise_key, (env.num_envs, agent.latent_size))
        logits = policy_logits(agent, policy_params, normalize(stats, obs), noise)
        dist = agent.distribution.from_logits(logits)
        raw_action = dist.sample_raw(action_key)
        next_state, out = env.step(state, dist.env_action(raw_action))
        transition = Transition(obs, raw_action, dist.log_prob(raw_action), out.reward, out.termination,
                                out.truncation, out.next_obs, noise, out.finished_return, out.finished_length,
                                logits if keep_logits else None)
        return next_state, transition

    def unroll(state: EnvState, unroll_keys: jax.Array) -> tuple[EnvState, Transition]:
        return jax.lax.scan(act_and_step, state, unroll_keys)

    env_state, data = jax.lax.scan(unroll, env_state, keys)
    # [U, T, N, ...] -> [T, U * N, ...]
    data = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape((unroll_length, num_unrolls * env.num_envs)
                                                                + x.shape[3:]), data)
    return env_state, data
