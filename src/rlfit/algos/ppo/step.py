"""One PPO training iteration (collect, normalize, epochs of minibatch updates, each forming its advantages as
Brax does, or GAE once before them) as a pure function.

`make_train_iteration` returns `TrainState -> (TrainState, IterationMetrics)`, compiled once by the runner
with the state donated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from rlfit.algos.ppo.config import PPOConfig
from rlfit.envs.vec_env import EnvState, VecEnv
from rlfit.parallel.mesh import split_envs
from rlfit.algos.ppo.networks import Agent, AgentParams
from rlfit.algos.common.normalizer import RunningStats, init_stats, normalize, update_stats
from rlfit.algos.ppo.sizes import BatchSizes
from rlfit.algos.ppo.gae import compute_gae
from rlfit.algos.common.loss_scale import LossScale, adjust, all_finite, gradients_with, init_loss_scale, select
from rlfit.algos.ppo.losses import LossBatch, LossTerms, Steps, ppo_loss
from rlfit.algos.ppo.rollout import Transition, collect_with_keys, step_keys
from rlfit.algos.ppo.schedule import adapt_learning_rate, adaptive, learning_rate, make_adam, scheduled


class TrainState(NamedTuple):
    """Everything that changes during training (host counters live in the runner)."""

    params: AgentParams
    opt_state: optax.OptState
    normalizer: RunningStats
    env_state: EnvState
    key: jax.Array
    """[2] uint32 PRNG key for the next iteration."""
    loss_scale: LossScale | None = None
    """Dynamic loss scale with fp16 network compute; None otherwise (an empty subtree)."""


class IterationMetrics(NamedTuple):
    """Scalars from one iteration (losses averaged over all minibatch updates)."""

    loss: LossTerms
    grad_norm: jax.Array
    """Mean global gradient norm over the updates that were applied."""
    skipped_updates: jax.Array
    """Minibatch updates skipped because fp16 gradients overflowed (always 0 in fp32/bf16)."""
    updates: jax.Array
    """[] int32 minibatch updates applied (num_updates_per_batch * num_minibatches - skipped)."""
    loss_scale: jax.Array
    """The fp16 loss scale after the iteration; 0 without loss scaling."""
    episodes_finished: jax.Array
    """Number of training episodes that ended during the iteration."""
    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    all_finite: jax.Array
    """False if any loss term or parameter is NaN or infinite."""
    learning_rate: jax.Array | None = None
    """[] the step size after the iteration with `ppo.learning_rate_schedule` `adaptive_kl` or `linear`; None
    without."""


def make_optimizer(ppo: PPOConfig, iterations: int = 1) -> optax.GradientTransformation:
    """Adam, with global-norm clipping first when `max_grad_norm` > 0 (its step size scheduled with
    `ppo.learning_rate_schedule` `adaptive_kl`, or `linear` over the updates of `iterations` iterations:
    `rlfit.algos.ppo.schedule`)."""
    adam = make_adam(ppo, iterations)
    return optax.chain(optax.clip_by_global_norm(ppo.max_grad_norm), adam) if ppo.max_grad_norm > 0 else adam


def init_train_state(env: VecEnv, agent: Agent, optimizer: optax.GradientTransformation, seed: int,
                     loss_scaling: bool = False) -> TrainState:
    """Fresh parameters, optimizer state, statistics and environments from `seed` (and a loss scale for fp16)."""
    key = jax.random.PRNGKey(seed)
    key, params_key, env_key = jax.random.split(key, 3)
    params = agent.init(params_key)
    env_state = jax.jit(env.reset)(env_key)  # compiled: op-by-op dispatch of a physics reset takes far longer
    one_obs = jax.tree.map(lambda x: x[0], env_state.inner.obs)
    state = TrainState(params, optimizer.init(params), init_stats(one_obs), env_state, key,
                       init_loss_scale() if loss_scaling else None)
    # Donation needs one buffer per leaf; initializers may share buffers (e.g. two zero arrays).
    copied: TrainState = jax.tree.map(lambda x: jnp.array(x, copy=True), state)
    return copied


UpdateCarry = tuple[AgentParams, optax.OptState, LossScale | None]
"""What the minibatch updates carry: (params, opt_state, loss_scale)."""
UpdateOutputs = tuple[LossTerms, jax.Array, jax.Array]
"""What each minibatch update gives: (loss terms, grad_norm [], applied [] bool)."""


def make_minibatch_update(agent: Agent, optimizer: optax.GradientTransformation, ppo: PPOConfig,
                          bottleneck_beta: float = 0.0
                          ) -> Callable[[UpdateCarry, tuple[LossBatch, jax.Array]], tuple[UpdateCarry, UpdateOutputs]]:
    """`((params, opt_state, loss_scale), (batch, key)) -> (carry, (terms, grad_norm, applied))`: one Adam step
    on one minibatch, for `lax.scan`. With a loss scale (fp16) the loss is scaled before differentiation, the
    gradients unscaled, and an update with non-finite gradients skipped. With `ppo.learning_rate_schedule:
    adaptive_kl` the step size is first moved by the minibatch's KL (`rlfit.algos.ppo.schedule`), as Brax's
    `minibatch_step` does."""

    def loss_fn(params: AgentParams, batch: LossBatch, key: jax.Array) -> tuple[jax.Array, LossTerms]:
        return ppo_loss(params, batch, agent, ppo.clipping_epsilon, ppo.entropy_cost, ppo.normalize_advantage, key,
                        bottleneck_beta, ppo.discounting, ppo.gae_lambda)

    def minibatch_update(carry: UpdateCarry, inputs: tuple[LossBatch, jax.Array]) -> tuple[UpdateCarry, UpdateOutputs]:
        params, opt_state, loss_scale = carry
        batch, key = inputs
        grads, _, terms, finite = gradients_with(loss_fn, loss_scale)(params, batch, key)
        if adaptive(ppo):
            assert terms.kl_mean is not None, "the loss measures the KL whenever the step size adapts to it"
            opt_state = adapt_learning_rate(opt_state, terms.kl_mean, ppo)
        updates, new_opt_state = optimizer.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if loss_scale is not None:  # an overflowing fp16 update is skipped and the scale adjusted
            new_params, new_opt_state = select(finite, (new_params, new_opt_state), (params, opt_state))
            loss_scale = adjust(loss_scale, finite)
        grad_norm = jnp.where(finite, optax.tree.norm(grads), 0.0)
        return (new_params, new_opt_state, loss_scale), (terms, grad_norm, finite)

    return minibatch_update


def make_epochs(agent: Agent, optimizer: optax.GradientTransformation, ppo: PPOConfig, sizes: BatchSizes,
                bottleneck_beta: float = 0.0
                ) -> Callable[[UpdateCarry, LossBatch, jax.Array], tuple[UpdateCarry, UpdateOutputs]]:
    """`(carry, batch, key) -> (carry, (terms, grad_norms, applied) [E, M])`: `num_updates_per_batch` (E) epochs
    of `num_minibatches` (M) minibatch updates over `batch` [T, S, ...] (S = batch_size * M sequences), carry
    (params, opt_state, loss_scale), with Brax's key use (0.14.2 `sgd_step`, `minibatch_step`): per epoch
    `key, perm, grad = split(key, 3)`, the sequences in the order `permutation(perm, S)` cut into M consecutive
    minibatches, and the m-th minibatch's loss key the second half of the m-th `split` in the chain from `grad`.
    """
    num_sequences = sizes.batch_size * sizes.num_minibatches
    minibatch_update = make_minibatch_update(agent, optimizer, ppo, bottleneck_beta)

    def epoch(carry: tuple[UpdateCarry, jax.Array], data: LossBatch
              ) -> tuple[tuple[UpdateCarry, jax.Array], UpdateOutputs]:
        updates_carry, key = carry
        key, perm_key, grad_key = jax.random.split(key, 3)
        order = jax.random.permutation(perm_key, num_sequences)
        # [T, S, ...] -> shuffle sequences -> [M, T, batch_size, ...]
        minibatches = split_envs(jax.tree.map(
            lambda x: jnp.swapaxes(
                jnp.take(x, order, axis=1).reshape((x.shape[0], sizes.num_minibatches, sizes.batch_size) + x.shape[2:]),
                0, 1),
            data), axis=2)  # over several devices, each computes its share of every minibatch
        updates_carry, outputs = jax.lax.scan(minibatch_update, updates_carry,
                                              (minibatches, chained_keys(grad_key, sizes.num_minibatches)))
        return (updates_carry, key), outputs

    def epochs(carry: UpdateCarry, batch: LossBatch, key: jax.Array) -> tuple[UpdateCarry, UpdateOutputs]:
        outputs: UpdateOutputs
        (carry, _), outputs = jax.lax.scan(lambda c, _: epoch(c, batch), (carry, key), None,
                                           length=ppo.num_updates_per_batch)
        return carry, outputs

    return epochs


def chained_keys(key: jax.Array, count: int) -> jax.Array:
    """[count, 2] keys as Brax's `minibatch_step` draws them: `key, sub = split(key)`, `count` times; the subs."""

    def draw(carry: jax.Array, _: None) -> tuple[jax.Array, jax.Array]:
        carry, sub = jax.random.split(carry)
        return carry, sub

    subs: jax.Array = jax.lax.scan(draw, key, None, length=count)[1]
    return subs


def make_train_iteration(
    env: VecEnv,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    ppo: PPOConfig,
    sizes: BatchSizes,
    bottleneck_beta: float = 0.0,
) -> Callable[[TrainState], tuple[TrainState, IterationMetrics]]:
    """The training iteration for these sizes; see the module docstring. Its keys: `key, collect, epochs =
    split(state.key, 3)`, the rollout's step keys `rollout.step_keys(collect, ...)`.

    A state with a loss scale (fp16 compute) trains with dynamic loss scaling: each minibatch's loss is scaled
    before differentiation, the gradients unscaled, and an update with non-finite gradients skipped
    (`rlfit.algos.common.loss_scale`).
    """
    num_unrolls = sizes.batch_size * sizes.num_minibatches // sizes.num_envs
    iterate = make_iteration_from_keys(env, agent, optimizer, ppo, sizes, bottleneck_beta)

    def train_iteration(state: TrainState) -> tuple[TrainState, IterationMetrics]:
        key, collect_key, epochs_key = jax.random.split(state.key, 3)
        state, metrics = iterate(state, step_keys(collect_key, sizes.unroll_length, num_unrolls), epochs_key)
        return state._replace(key=key), metrics

    return train_iteration


def make_iteration_from_keys(
    env: VecEnv,
    agent: Agent,
    optimizer: optax.GradientTransformation,
    ppo: PPOConfig,
    sizes: BatchSizes,
    bottleneck_beta: float = 0.0,
) -> Callable[[TrainState, jax.Array, jax.Array], tuple[TrainState, IterationMetrics]]:
    """`(state, collect_keys [U, T, 2], epochs_key) -> (state, metrics)`: one iteration with its keys given
    (U = batch_size * num_minibatches / num_envs unrolls of T steps): collect, the observation statistics and the
    batch (`loss_batch`), the epochs of updates (`make_epochs`). The returned state keeps `state.key`."""
    epochs = make_epochs(agent, optimizer, ppo, sizes, bottleneck_beta)

    def iterate(state: TrainState, collect_keys: jax.Array, epochs_key: jax.Array
                ) -> tuple[TrainState, IterationMetrics]:
        env_state, data = collect_with_keys(env, agent, state.params.policy, state.normalizer, state.env_state,
                                            collect_keys, keep_logits=adaptive(ppo))
        data = split_envs(data, axis=1)  # [T, B, ...]: sequences stay on the device that collected them
        stats, batch = loss_batch(agent, ppo, state, data)
        (params, opt_state, loss_scale), (terms, grad_norms, applied) = epochs(
            (state.params, state.opt_state, state.loss_scale), batch, epochs_key)
        metrics = iteration_metrics(terms, grad_norms, applied, loss_scale, params, data)
        if scheduled(ppo):
            metrics = metrics._replace(learning_rate=learning_rate(opt_state, ppo))
        return TrainState(params, opt_state, stats, env_state, state.key, loss_scale), metrics

    return iterate


def loss_batch(agent: Agent, ppo: PPOConfig, state: TrainState, data: Transition) -> tuple[RunningStats, LossBatch]:
    """The updated observation statistics and the epochs' batch from collected `data` [T, B, ...], split over the
    devices by sequence: normalized observations, and the scaled rewards and ends from which the loss forms
    Brax's advantages (`ppo.advantages: brax`), or GAE advantages and returns formed here (`gae_once`).

    The order is Brax 0.14.2's `training_step`: the batch is normalized with the statistics updated by `data`,
    except with `ppo.learning_rate_schedule: adaptive_kl`, where it is normalized with the statistics the rollout
    acted with (so that the KL compares the acting and the current policy on the same inputs) and the updated
    statistics only take effect from the next iteration."""
    stats = update_stats(state.normalizer, data.obs) if ppo.normalize_observations else state.normalizer
    batch_stats = state.normalizer if adaptive(ppo) else stats
    obs = normalize(batch_stats, data.obs)
    noise = data.latent_noise if agent.latent_size else None
    if ppo.advantages == "brax":
        last_next_obs = normalize(batch_stats, jax.tree.map(lambda x: x[-1:], data.next_obs))
        steps = Steps(data.reward * ppo.reward_scaling, data.termination, data.truncation, last_next_obs)
        return stats, split_envs(LossBatch(obs, data.raw_action, data.log_prob, None, None, noise, steps,
                                           data.logits), axis=1)
    next_obs = normalize(batch_stats, data.next_obs)
    # One time step at a time: peak memory of [B] values instead of [T, B] activations of the value net.
    values = jax.lax.map(lambda o: agent.value(state.params.value, o), obs)
    next_values = jax.lax.map(lambda o: agent.value(state.params.value, o), next_obs)
    advantages, returns = compute_gae(data.reward * ppo.reward_scaling, values, next_values, data.termination,
                                      data.truncation, ppo.discounting, ppo.gae_lambda)
    return stats, split_envs(LossBatch(obs, data.raw_action, data.log_prob, advantages, returns, noise, None,
                                       data.logits), axis=1)


def iteration_metrics(terms: LossTerms, grad_norms: jax.Array, applied: jax.Array, loss_scale: LossScale | None,
                      params: AgentParams, data: Transition) -> IterationMetrics:
    """The iteration's metrics from the updates' per-minibatch outputs, the new parameters and the collected data."""
    num_applied = jnp.sum(applied)
    mean_terms = jax.tree.map(jnp.mean, terms)
    finite = jnp.logical_and(all_finite(mean_terms), all_finite(params))
    return IterationMetrics(
        loss=mean_terms,
        grad_norm=jnp.sum(grad_norms) / jnp.maximum(num_applied, 1),
        skipped_updates=(applied.size - num_applied).astype(jnp.float32),
        updates=num_applied.astype(jnp.int32),
        loss_scale=loss_scale.scale if loss_scale is not None else jnp.asarray(0.0, jnp.float32),
        episodes_finished=jnp.sum(data.finished_length > 0).astype(jnp.float32),
        episode_return_sum=jnp.sum(data.finished_return),
        episode_length_sum=jnp.sum(data.finished_length),
        all_finite=finite,
    )
