"""SAC training state and the training step, as pure functions compiled once.

`make_train_step` returns `SACState -> (SACState, SACMetrics)`: `steps` times, the policy acts once in each of
the N environments, the transitions go into the replay buffer and `grad_updates_per_step` gradient updates
follow, each on its own batch sampled uniformly from the buffer (Brax's `training_step`). Compile it once with
`jax.jit(train_step, donate_argnums=0)`; the state keeps every leaf's shape and dtype.

Unlike Brax, a policy step's own transitions are first sampled in the next policy step: the buffer stores each
observation once, and a transition's next observation is the following step's (see `rlfit.algos.offpolicy.replay`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.common.normalizer import RunningStats, init_stats, normalize
from rlfit.algos.offpolicy.collect import act_and_store, empty_replay
from rlfit.algos.offpolicy.replay import Batch, ReplayState, num_valid, sample
from rlfit.algos.offpolicy.state import check_env_batch, reset_envs, with_own_buffers
from rlfit.algos.sac.augment import augment_batch
from rlfit.algos.sac.config import SACConfig, check_sac_config
from rlfit.algos.sac.losses import sample_action
from rlfit.algos.sac.networks import SACNetworks, SACParams
from rlfit.algos.sac.update import (SACOptimizers, SACOptStates, UpdateMetrics, init_opt_states,
                                    make_gradient_update)
from rlfit.envs.vec_env import EnvState, StepOutput, VecEnv
from rlfit.parallel.mesh import split_envs
from rlfit.algos.common.loss_scale import LossScale, all_finite, init_loss_scale, select


class SACState(NamedTuple):
    """Everything that changes during SAC training."""

    params: SACParams
    opt_state: SACOptStates
    normalizer: RunningStats
    env_state: EnvState
    replay: ReplayState
    key: jax.Array
    """[2] uint32 PRNG key for the next step."""
    policy_steps: jax.Array
    """[] int32 policy steps taken by each environment (transitions collected = policy_steps * num_envs)."""
    grad_steps: jax.Array
    """[] int32 gradient updates applied."""
    loss_scale: LossScale | None = None
    """The dynamic loss scale with fp16 compute (`rlfit.algos.common.loss_scale`); None otherwise."""


class SACMetrics(NamedTuple):
    """Scalars from one training step; the update terms are means over the updates applied."""

    critic_loss: jax.Array
    actor_loss: jax.Array
    alpha_loss: jax.Array
    alpha: jax.Array
    entropy: jax.Array
    """Mean -log pi(a|s) on the sampled observations."""
    replay_size: jax.Array
    """[] int32 transitions in the replay buffer after the step."""
    updates: jax.Array
    """[] int32 gradient updates applied in the step."""
    loss_scale: jax.Array
    """[] float32 the loss scale after the step (fp16), 0 without one."""
    skipped_updates: jax.Array
    """[] int32 updates skipped because fp16 gradients overflowed."""
    episodes_finished: jax.Array
    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    all_finite: jax.Array
    """False if any loss term or parameter is NaN or infinite."""


def init_sac_state(env: VecEnv, networks: SACNetworks, optimizers: SACOptimizers, config: SACConfig,
                   seed: int, loss_scaling: bool = False) -> SACState:
    """Fresh parameters, optimizer states, statistics, environments and an empty replay buffer from `seed`
    (and a loss scale with `loss_scaling`, for fp16 compute)."""
    check_sac_config(config)
    check_env_batch(env, config)
    key, params_key, env_key = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = networks.init(params_key)
    env_state, one_obs = reset_envs(env, env_key)
    counter = jnp.zeros((), jnp.int32)
    state = SACState(params, init_opt_states(optimizers, params), init_stats(one_obs), env_state,
                     empty_replay(env, config, one_obs), key, counter, counter, init_loss_scale() if loss_scaling else None)
    return with_own_buffers(state)


def make_train_step(env: VecEnv, networks: SACNetworks, optimizers: SACOptimizers, config: SACConfig,
                    steps: int = 1) -> Callable[[SACState], tuple[SACState, SACMetrics]]:
    """The training step (see the module docstring): `steps` policy steps, each followed by its updates.

    An update is skipped (parameters and optimizer states kept) while the buffer holds no valid transition,
    which happens only in the first policy step when `min_replay_size` is 0.
    """
    gradient_update = make_gradient_update(networks, optimizers, config)
    num_updates = config.grad_updates_per_step

    def one_update(state: SACState, inputs: tuple[Batch, jax.Array]
                   ) -> tuple[SACState, tuple[UpdateMetrics, jax.Array, jax.Array]]:
        """One gradient update on a [batch_size] batch, kept only if the buffer holds a valid transition."""
        batch, key = inputs
        stats = state.normalizer
        batch = batch._replace(obs=normalize(stats, batch.obs), next_obs=normalize(stats, batch.next_obs))
        if networks.encoder is not None:
            augment_key, key = jax.random.split(key)
            batch = augment_batch(batch, augment_key)
        params, opt_state, loss_scale, metrics, finite = gradient_update(
            state.params, state.opt_state, state.loss_scale, batch, key)
        ready = num_valid(state.replay) > 0
        learned = select(ready, (params, opt_state, loss_scale), (state.params, state.opt_state, state.loss_scale))
        applied = ready & finite
        state = state._replace(params=learned[0], opt_state=learned[1], loss_scale=learned[2],
                               grad_steps=state.grad_steps + applied)
        return state, (metrics, applied, ready & ~finite)

    def policy_step(state: SACState, _no_input: None) -> tuple[SACState, tuple[UpdateMetrics, jax.Array, jax.Array, StepOutput]]:
        key, action_key, sample_key, update_key = jax.random.split(state.key, 4)
        obs = normalize(state.normalizer, state.env_state.inner.obs)
        action, _ = sample_action(networks.policy_logits(state.params.policy, obs), action_key)
        state, out = act_and_store(env, config, state._replace(key=key), action)
        batches = sample(state.replay, sample_key, num_updates * config.batch_size)
        batches = jax.tree.map(lambda x: x.reshape((num_updates, config.batch_size) + x.shape[1:]), batches)
        batches = split_envs(batches, axis=1)  # over several devices, each computes its share of every update
        update_keys = jax.random.split(update_key, num_updates)
        state, (metrics, applied, skipped) = jax.lax.scan(one_update, state, (batches, update_keys))
        return state, (metrics, applied, skipped, out)

    def train_step(state: SACState) -> tuple[SACState, SACMetrics]:
        state, (metrics, applied, skipped, out) = jax.lax.scan(policy_step, state, None, length=steps)
        return state, step_metrics(env, state, metrics, applied, skipped, out)

    return train_step


def step_metrics(env: VecEnv, state: SACState, metrics: UpdateMetrics, applied: jax.Array, skipped: jax.Array,
                 out: StepOutput) -> SACMetrics:
    """The step's metrics from its updates' outputs [steps, updates], the state after it and its environment
    steps' outputs."""
    count = jnp.maximum(jnp.sum(applied), 1).astype(jnp.float32)
    means = jax.tree.map(lambda x: jnp.sum(jnp.where(applied, x, 0.0)) / count, metrics)
    finite = jnp.logical_and(all_finite(means), all_finite(state.params))
    return SACMetrics(
        critic_loss=means.critic_loss,
        actor_loss=means.actor_loss,
        alpha_loss=means.alpha_loss,
        alpha=means.alpha,
        entropy=means.entropy,
        replay_size=state.replay.size * env.num_envs,
        updates=jnp.sum(applied).astype(jnp.int32),
        loss_scale=state.loss_scale.scale if state.loss_scale is not None else jnp.zeros((), jnp.float32),
        skipped_updates=jnp.sum(skipped).astype(jnp.int32),
        episodes_finished=jnp.sum(out.finished_length > 0).astype(jnp.float32),
        episode_return_sum=jnp.sum(out.finished_return),
        episode_length_sum=jnp.sum(out.finished_length),
        all_finite=finite,
    )
