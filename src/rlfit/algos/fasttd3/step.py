"""FastTD3 training state and the training step, as pure functions compiled once.

`make_train_step` returns `FastTD3State -> (FastTD3State, FastTD3Metrics)`: `steps` times, the actor acts once
in each of the N environments with Gaussian noise of that environment's own std, the transitions go into the shared
replay buffer (`rlfit.algos.offpolicy.replay`) and `grad_updates_per_step` gradient updates follow, each on its own
batch of n-step transitions (`rlfit.algos.fasttd3.nstep`). The buffer's prefill, insertion and observation
statistics are shared with SAC (`rlfit.algos.offpolicy.collect`), which read only the state's and the config's
common fields (`rlfit.algos.offpolicy.types`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.common.loss_scale import all_finite
from rlfit.algos.common.normalizer import RunningStats, init_stats, normalize
from rlfit.algos.fasttd3.config import FastTD3Config, check_fasttd3_config
from rlfit.algos.fasttd3.networks import FastTD3Networks, FastTD3Params
from rlfit.algos.fasttd3.nstep import NStepBatch, num_valid, sample_nstep
from rlfit.algos.fasttd3.update import (FastTD3Optimizers, FastTD3OptStates, UpdateMetrics, init_opt_states,
                                        make_gradient_update)
from rlfit.algos.offpolicy.collect import act_and_store, empty_replay
from rlfit.algos.offpolicy.replay import ReplayState
from rlfit.algos.offpolicy.state import check_env_batch, reset_envs, with_own_buffers
from rlfit.envs.vec_env import EnvState, StepOutput, VecEnv
from rlfit.parallel.mesh import split_envs


class FastTD3State(NamedTuple):
    """Everything that changes during FastTD3 training."""

    params: FastTD3Params
    opt_state: FastTD3OptStates
    normalizer: RunningStats
    env_state: EnvState
    replay: ReplayState
    key: jax.Array
    """[2] uint32 PRNG key for the next step."""
    policy_steps: jax.Array
    """[] int32 policy steps taken by each environment."""
    grad_steps: jax.Array
    """[] int32 gradient (critic) updates applied."""
    noise_std: jax.Array
    """[N] float32 each environment's exploration noise std, redrawn from [std_min, std_max] when its episode ends."""


class FastTD3Metrics(NamedTuple):
    """Scalars from one training step; the update terms are means over the updates applied."""

    critic_loss: jax.Array
    actor_loss: jax.Array
    """Mean over the actor updates applied."""
    q_mean: jax.Array
    noise_std: jax.Array
    """[] mean exploration noise std over the environments after the step."""
    replay_size: jax.Array
    updates: jax.Array
    actor_updates: jax.Array
    episodes_finished: jax.Array
    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    all_finite: jax.Array


def draw_noise_std(key: jax.Array, num_envs: int, config: FastTD3Config) -> jax.Array:
    """[N] float32 stds drawn uniformly from [std_min, std_max]."""
    return jax.random.uniform(key, (num_envs,), minval=config.std_min, maxval=config.std_max)


def init_fasttd3_state(env: VecEnv, networks: FastTD3Networks, optimizers: FastTD3Optimizers,
                       config: FastTD3Config, seed: int) -> FastTD3State:
    """Fresh parameters, optimizer states, statistics, environments, noise stds and an empty buffer from `seed`."""
    check_fasttd3_config(config)
    check_env_batch(env, config)
    key, params_key, env_key, noise_key = jax.random.split(jax.random.PRNGKey(seed), 4)
    params = networks.init(params_key)
    env_state, one_obs = reset_envs(env, env_key)
    counter = jnp.zeros((), jnp.int32)
    state = FastTD3State(params, init_opt_states(optimizers, params), init_stats(one_obs), env_state,
                         empty_replay(env, config, one_obs), key, counter, counter,
                         draw_noise_std(noise_key, env.num_envs, config))
    return with_own_buffers(state)


def explore(networks: FastTD3Networks, state: FastTD3State, key: jax.Array) -> jax.Array:
    """[N, A] the actor's action plus N(0, noise_std[e]^2) noise per environment e, clipped to [-1, 1]."""
    obs = normalize(state.normalizer, state.env_state.inner.obs)
    action = networks.action(state.params.policy, obs)
    noise = state.noise_std[:, None] * jax.random.normal(key, action.shape)
    return jnp.clip(action + noise, -1.0, 1.0)


def make_train_step(env: VecEnv, networks: FastTD3Networks, optimizers: FastTD3Optimizers, config: FastTD3Config,
                    steps: int = 1) -> Callable[[FastTD3State], tuple[FastTD3State, FastTD3Metrics]]:
    """The training step (see the module docstring). An update is skipped (nothing changes) while the buffer
    holds no complete n-step window."""
    gradient_update = make_gradient_update(networks, optimizers, config)
    num_updates, batch_size = config.grad_updates_per_step, config.batch_size

    def one_update(state: FastTD3State, inputs: tuple[NStepBatch, jax.Array]
                   ) -> tuple[FastTD3State, tuple[UpdateMetrics, jax.Array, jax.Array, jax.Array]]:
        batch, key = inputs
        stats = state.normalizer
        batch = batch._replace(obs=normalize(stats, batch.obs), next_obs=normalize(stats, batch.next_obs))
        update_actor = (state.grad_steps + 1) % config.policy_delay == 0
        params, opt_state, metrics, finite = gradient_update(state.params, state.opt_state, batch, key, update_actor)
        ready = num_valid(state.replay, config.n_step) > 0
        params, opt_state = jax.tree.map(lambda new, old: jnp.where(ready, new, old), (params, opt_state),
                                         (state.params, state.opt_state))
        state = state._replace(params=params, opt_state=opt_state, grad_steps=state.grad_steps + ready)
        return state, (metrics, ready, ready & update_actor, finite | ~ready)

    def policy_step(state: FastTD3State, _: None
                    ) -> tuple[FastTD3State, tuple[UpdateMetrics, jax.Array, jax.Array, jax.Array, StepOutput]]:
        key, action_key, noise_key, sample_key, update_key = jax.random.split(state.key, 5)
        action = explore(networks, state, action_key)
        state, out = act_and_store(env, config, state._replace(key=key), action)
        ended = (out.termination > 0) | (out.truncation > 0)
        fresh = draw_noise_std(noise_key, env.num_envs, config)
        state = state._replace(noise_std=jnp.where(ended, fresh, state.noise_std))
        batches = sample_nstep(state.replay, sample_key, num_updates * batch_size, config.n_step, config.discounting)
        batches = jax.tree.map(lambda x: x.reshape((num_updates, batch_size) + x.shape[1:]), batches)
        batches = split_envs(batches, axis=1)
        state, per_update = jax.lax.scan(one_update, state, (batches, jax.random.split(update_key, num_updates)))
        return state, (*per_update, out)

    def train_step(state: FastTD3State) -> tuple[FastTD3State, FastTD3Metrics]:
        state, (metrics, applied, actor_applied, finite, out) = jax.lax.scan(policy_step, state, None, length=steps)
        return state, summarize(state, metrics, applied, actor_applied, finite, out, env.num_envs)

    return train_step


def masked_mean(values: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.maximum(jnp.sum(mask), 1).astype(jnp.float32)


def summarize(state: FastTD3State, metrics: UpdateMetrics, applied: jax.Array, actor_applied: jax.Array,
              finite: jax.Array, out: StepOutput, num_envs: int) -> FastTD3Metrics:
    """The step's metrics from its [steps, updates] per-update terms and [steps, N] environment outputs."""
    return FastTD3Metrics(
        critic_loss=masked_mean(metrics.critic_loss, applied),
        actor_loss=masked_mean(metrics.actor_loss, actor_applied),
        q_mean=masked_mean(metrics.q_mean, applied),
        noise_std=jnp.mean(state.noise_std),
        replay_size=state.replay.size * num_envs,
        updates=jnp.sum(applied).astype(jnp.int32),
        actor_updates=jnp.sum(actor_applied).astype(jnp.int32),
        episodes_finished=jnp.sum(out.finished_length > 0).astype(jnp.float32),
        episode_return_sum=jnp.sum(out.finished_return),
        episode_length_sum=jnp.sum(out.finished_length),
        all_finite=jnp.all(finite) & all_finite(state.params),
    )

