"""PPO's learning-rate schedule (`ppo.learning_rate_schedule`): a fixed Adam step, a step decaying linearly to zero
over the run's updates (`linear`, as in the PPO paper's MuJoCo and Atari settings), or Brax 0.14.2's adaptive-KL
schedule (`ppo/optimizer.py`, `adaptive_kl_learning_rate`), which rsl_rl also uses.

With `linear` the update numbered n (counted from 0 over the whole run, in the optimizer state, so a resumed run
continues the same line) takes the step `learning_rate * (1 - n / total_updates)`, where total_updates =
iterations x `num_updates_per_batch` x `num_minibatches` and iterations is the plan's count to `run.num_timesteps`.

With `adaptive_kl` the step size lives in the optimizer state (`optax.inject_hyperparams`), so it is carried from
one minibatch update and one iteration to the next, checkpointed and resumed with the rest of the state:

    before each minibatch update, with kl the minibatch's mean KL(collecting policy || current policy):
        lr = max(min_lr, lr / 1.5)   if kl > 2 * desired_kl
        lr = min(max_lr, lr * 1.5)   if 0 < kl < desired_kl / 2
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import optax

from rlfit.algos.ppo.config import PPOConfig

ADAPTIVE_KL = "adaptive_kl"
LINEAR = "linear"


def adaptive(ppo: PPOConfig) -> bool:
    """Whether `ppo`'s step size adapts to the policy's KL (and the rollout keeps the logits it acted with)."""
    return ppo.learning_rate_schedule == ADAPTIVE_KL


def total_updates(ppo: PPOConfig, iterations: int) -> int:
    """The minibatch updates of a run of `iterations` iterations: the length of the `linear` schedule."""
    return max(1, iterations * ppo.num_updates_per_batch * ppo.num_minibatches)


def make_adam(ppo: PPOConfig, iterations: int = 1) -> optax.GradientTransformation:
    """Adam at `ppo.learning_rate`; with `adaptive_kl` its step size an injected hyperparameter the schedule sets;
    with `linear` one that falls to 0 over the updates of `iterations` iterations (recorded in the state)."""
    if adaptive(ppo):
        return optax.inject_hyperparams(optax.adam)(learning_rate=ppo.learning_rate)
    if ppo.learning_rate_schedule == LINEAR:
        decay = optax.linear_schedule(ppo.learning_rate, 0.0, total_updates(ppo, iterations))
        return optax.inject_hyperparams(optax.adam)(learning_rate=decay)
    return optax.adam(ppo.learning_rate)


def scheduled(ppo: PPOConfig) -> bool:
    """Whether the optimizer state holds the step size (`adaptive_kl` or `linear`), reported each iteration."""
    return ppo.learning_rate_schedule in (ADAPTIVE_KL, LINEAR)


def adapt_learning_rate(opt_state: optax.OptState, kl_mean: jax.Array, ppo: PPOConfig) -> optax.OptState:
    """`opt_state` with its step size moved by the minibatch's mean KL [] as Brax's schedule moves it (see the
    module docstring)."""
    kl_mean = jax.lax.stop_gradient(kl_mean)
    lr = optax.tree_utils.tree_get(opt_state, "learning_rate")
    lr = jnp.where(kl_mean > ppo.desired_kl * 2.0, jnp.maximum(ppo.learning_rate_schedule_min_lr, lr / 1.5), lr)
    lr = jnp.where((kl_mean < ppo.desired_kl / 2.0) & (kl_mean > 0.0),
                   jnp.minimum(ppo.learning_rate_schedule_max_lr, lr * 1.5), lr)
    return optax.tree_utils.tree_set(opt_state, learning_rate=lr)


def _injected(path: tuple[object, ...], _value: object) -> bool:
    """True for the injected hyperparameter (under `hyperparams`), not a schedule's state (`hyperparams_states`)."""
    return any(getattr(key, "name", None) == "hyperparams" for key in path)


def learning_rate(opt_state: optax.OptState, ppo: PPOConfig) -> jax.Array:
    """The step size the optimizer state holds: [] float32. With `adaptive_kl` the one the next update starts from;
    with `linear` the one the last update took; `ppo.learning_rate` without a schedule."""
    if scheduled(ppo):  # the injected value, not the state of the `linear` schedule kept under the same name
        rate = optax.tree_utils.tree_get(opt_state, "learning_rate", filtering=_injected)
        return jnp.asarray(rate, jnp.float32)
    return jnp.asarray(ppo.learning_rate, jnp.float32)
