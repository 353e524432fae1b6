"""PPO's learning-rate schedule (`ppo.learning_rate_schedule`): a fixed Adam step, or Brax 0.14.2's adaptive-KL
schedule (`ppo/optimizer.py`, `adaptive_kl_learning_rate`), which rsl_rl also uses.

With `adaptive_kl` the step size lives in the optimizer state (`optax.inject_hyperparams`), so it is carried from
one minibatch update and one iteration to the next, checkpointed and resumed with the rest of the state:

    before each minibatch update, with kl the minibatch's mean KL(collecting policy || current policy):
        lr = max(min_lr, lr / 1.5)   if kl > 2 * desired_kl
        lr = min(max_lr, lr * 1.5)   if 0 < kl < desired_kl / 2
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from rlfit.algos.ppo.config import PPOConfig

ADAPTIVE_KL = "adaptive_kl"


def adaptive(ppo: PPOConfig) -> bool:
    """Whether `ppo`'s step size adapts to the policy's KL (and the rollout keeps the logits it acted with)."""
    return ppo.learning_rate_schedule == ADAPTIVE_KL


def make_adam(ppo: PPOConfig) -> optax.GradientTransformation:
    """Adam at `ppo.learning_rate`; with `adaptive_kl` its step size an injected hyperparameter the schedule sets."""
    if adaptive(ppo):
        return optax.inject_hyperparams(optax.adam)(learning_rate=ppo.learning_rate)
    return optax.adam(ppo.learning_rate)


def adapt_learning_rate(opt_state: Any, kl_mean: jax.Array, ppo: PPOConfig) -> Any:
    """`opt_state` with its step size moved by the minibatch's mean KL [] as Brax's schedule moves it (see the
    module docstring)."""
    kl_mean = jax.lax.stop_gradient(kl_mean)
    lr = optax.tree_utils.tree_get(opt_state, "learning_rate")
    lr = jnp.where(kl_mean > ppo.desired_kl * 2.0, jnp.maximum(ppo.learning_rate_schedule_min_lr, lr / 1.5), lr)
    lr = jnp.where((kl_mean < ppo.desired_kl / 2.0) & (kl_mean > 0.0),
                   jnp.minimum(ppo.learning_rate_schedule_max_lr, lr * 1.5), lr)
    return optax.tree_utils.tree_set(opt_state, learning_rate=lr)


def learning_rate(opt_state: Any, ppo: PPOConfig) -> jax.Array:
    """The step size the next update takes: [] float32 (`ppo.learning_rate` without a schedule)."""
    if adaptive(ppo):
        return jnp.asarray(optax.tree_utils.tree_get(opt_state, "learning_rate"), jnp.float32)
    return jnp.asarray(ppo.learning_rate, jnp.float32)
