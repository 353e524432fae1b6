"""One FastTD3 gradient update: the critics' step, the actor's step when it is due (TD3's delayed policy
updates), then the soft update of the target critics, as a pure function.

The actor's step uses the critics just updated; the target moves by `tau` toward them after every update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from rlfit.algos.contract import Variables
from rlfit.algos.fasttd3.config import FastTD3Config
from rlfit.algos.fasttd3.losses import TargetSettings, actor_loss, critic_loss, critic_target
from rlfit.algos.fasttd3.networks import FastTD3Networks, FastTD3Params
from rlfit.algos.fasttd3.nstep import NStepBatch
from rlfit.algos.offpolicy.critics import apply_gradients as apply, soft_update
from rlfit.algos.common.loss_scale import all_finite


class FastTD3Optimizers(NamedTuple):
    """AdamW for the actor and for the critics."""

    policy: optax.GradientTransformation
    q: optax.GradientTransformation


class FastTD3OptStates(NamedTuple):
    """The optimizer states of the actor and the critics."""

    policy: optax.OptState
    q: optax.OptState


class UpdateMetrics(NamedTuple):
    """Scalars of one gradient update."""

    critic_loss: jax.Array
    actor_loss: jax.Array
    """0 where the actor was not updated."""
    q_mean: jax.Array
    """The critics' mean expected value on the batch."""


def make_optimizers(config: FastTD3Config) -> FastTD3Optimizers:
    return FastTD3Optimizers(optax.adamw(config.actor_learning_rate, weight_decay=config.weight_decay),
                             optax.adamw(config.learning_rate, weight_decay=config.weight_decay))


def init_opt_states(optimizers: FastTD3Optimizers, params: FastTD3Params) -> FastTD3OptStates:
    return FastTD3OptStates(optimizers.policy.init(params.policy), optimizers.q.init(params.q))


ActorOutputs = tuple[Variables, optax.OptState, jax.Array, jax.Array]
"""An actor update's (policy params, optimizer state, loss [], [] bool: gradients finite)."""


def make_gradient_update(
    networks: FastTD3Networks, optimizers: FastTD3Optimizers, config: FastTD3Config,
) -> Callable[[FastTD3Params, FastTD3OptStates, NStepBatch, jax.Array, jax.Array],
              tuple[FastTD3Params, FastTD3OptStates, UpdateMetrics, jax.Array]]:
    """(params, optimizer states, normalized batch [B], key, [] bool: update the actor) -> (params, optimizer
    states, metrics, [] bool: every loss and gradient finite)."""
    settings = TargetSettings(config.policy_noise, config.noise_clip, config.clipped_double_q)

    def update(params: FastTD3Params, opt: FastTD3OptStates, batch: NStepBatch, key: jax.Array,
               update_actor: jax.Array) -> tuple[FastTD3Params, FastTD3OptStates, UpdateMetrics, jax.Array]:
        target = critic_target(params.policy, params.target_q, networks, batch, key, settings)
        (c_loss, q_mean), q_grad = jax.value_and_grad(critic_loss, has_aux=True)(params.q, target, networks, batch)
        q, q_opt = apply(optimizers.q, q_grad, opt.q, params.q)

        def actor_step(_: None) -> ActorOutputs:
            loss, grad = jax.value_and_grad(actor_loss)(params.policy, q, networks, batch.obs,
                                                        config.clipped_double_q)
            policy, policy_opt = apply(optimizers.policy, grad, opt.policy, params.policy)
            return policy, policy_opt, loss, all_finite(grad)

        def keep(_: None) -> ActorOutputs:
            return params.policy, opt.policy, jnp.zeros((), jnp.float32), jnp.ones((), bool)

        policy, policy_opt, a_loss, actor_finite = jax.lax.cond(update_actor, actor_step, keep, None)
        new_params = FastTD3Params(policy, q, soft_update(params.target_q, q, config.tau))
        finite = all_finite((c_loss, a_loss, q_grad)) & actor_finite
        return new_params, FastTD3OptStates(policy_opt, q_opt), UpdateMetrics(c_loss, a_loss, q_mean), finite

    return update
