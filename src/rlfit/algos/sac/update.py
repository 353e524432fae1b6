"""One SAC gradient update (temperature, critics, actor, soft target update) as a pure function.

The order and inputs follow Brax's `sgd_step`: the critic and actor losses use the temperature from before this
update's alpha step, the actor loss the Q parameters from before this update's critic step, and the target Q
parameters then move by `tau` toward the new Q parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from rlfit.algos.contract import Variables
from rlfit.algos.offpolicy.critics import apply_gradients as apply, soft_update
from rlfit.algos.sac.networks import Encoded
from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.losses import actor_loss, alpha_loss, critic_loss
from rlfit.algos.sac.networks import SACNetworks, SACParams, share_encoder, without_encoder
from rlfit.algos.offpolicy.replay import Batch
from rlfit.algos.common.loss_scale import LossScale, adjust, gradients_with, select
from rlfit.networks.pixels import encoder_optimizer


class SACOptimizers(NamedTuple):
    """Adam for the policy and the Q networks, and for log(alpha)."""

    policy: optax.GradientTransformation
    q: optax.GradientTransformation
    alpha: optax.GradientTransformation


class SACOptStates(NamedTuple):
    """The optimizer states of the policy, the Q networks and log(alpha)."""

    policy: optax.OptState
    q: optax.OptState
    alpha: optax.OptState


class UpdateMetrics(NamedTuple):
    """Scalars of one gradient update."""

    critic_loss: jax.Array
    actor_loss: jax.Array
    alpha_loss: jax.Array
    alpha: jax.Array
    """exp(log_alpha) after the update."""
    entropy: jax.Array
    """Mean -log pi(a|s) over the batch, a sampled from the policy before the update."""


def make_optimizers(config: SACConfig, encoder: bool = False, freeze_encoder: bool = False) -> SACOptimizers:
    """Adam(learning_rate) for the policy and Q networks, Adam(alpha_learning_rate) for log(alpha), as Brax;
    with an `encoder`, frozen batch-norm statistics (and with `freeze_encoder` the encoder) are not updated."""
    networks = [optax.adam(config.learning_rate), optax.adam(config.learning_rate)]
    if encoder:
        networks = [encoder_optimizer(optimizer, freeze_encoder) for optimizer in networks]
    policy, q = networks
    return SACOptimizers(policy, q, optax.adam(config.alpha_learning_rate))


def init_opt_states(optimizers: SACOptimizers, params: SACParams) -> SACOptStates:
    return SACOptStates(optimizers.policy.init(params.policy), optimizers.q.init(params.q),
                        optimizers.alpha.init(params.log_alpha))


def make_gradient_update(
    networks: SACNetworks,
    optimizers: SACOptimizers,
    config: SACConfig,
) -> Callable[[SACParams, SACOptStates, LossScale | None, Batch, jax.Array],
              tuple[SACParams, SACOptStates, LossScale | None, UpdateMetrics, jax.Array]]:
    """(params, optimizer states, loss scale or None, normalized batch [B], key) -> (params, optimizer states,
    loss scale, metrics, [] bool: applied).

    With a loss scale (fp16 compute) each loss is scaled before differentiation and its gradients unscaled; an
    update whose gradients overflowed is skipped whole (nothing changes but the halved scale).
    """
    target_entropy = config.resolved_target_entropy(networks.action_size)

    def critic(q_params: Variables, params: SACParams, alpha: jax.Array, batch: Batch, key: jax.Array
               ) -> tuple[jax.Array, Encoded]:
        return critic_loss(q_params, params.policy, params.target_q, alpha, networks, batch, config.reward_scaling,
                           config.discounting, key)

    def actor(policy_params: Variables, q_params: Variables, alpha: jax.Array, encoded: Encoded, key: jax.Array
              ) -> tuple[jax.Array, None]:
        return actor_loss(policy_params, q_params, alpha, networks, encoded, key), None

    def update(params: SACParams, opt: SACOptStates, loss_scale: LossScale | None, batch: Batch, key: jax.Array
               ) -> tuple[SACParams, SACOptStates, LossScale | None, UpdateMetrics, jax.Array]:
        alpha_key, critic_key, actor_key = jax.random.split(key, 3)
        alpha = jnp.exp(params.log_alpha)
        q_grad, c_loss, encoded, q_finite = gradients_with(critic, loss_scale)(
            params.q, params, alpha, batch, critic_key)
        alpha_grad, a_loss, entropy, alpha_finite = gradients_with(alpha_loss, loss_scale)(
            params.log_alpha, params.policy, networks, encoded, target_entropy, alpha_key)
        policy_grad, p_loss, _, policy_finite = gradients_with(actor, loss_scale)(
            params.policy, params.q, alpha, encoded, actor_key)
        log_alpha, alpha_opt = apply(optimizers.alpha, alpha_grad, opt.alpha, params.log_alpha)
        q, q_opt = apply(optimizers.q, q_grad, opt.q, params.q)
        policy, policy_opt = apply(optimizers.policy, policy_grad, opt.policy, params.policy)
        if networks.encoder is not None:
            policy = share_encoder(policy, q)
        new_params = SACParams(policy, q, soft_update(params.target_q, without_encoder(q), config.tau), log_alpha)
        new_opt = SACOptStates(policy_opt, q_opt, alpha_opt)
        finite = alpha_finite & q_finite & policy_finite
        if loss_scale is not None:  # an overflowing fp16 update is skipped and the scale adjusted
            new_params, new_opt = select(finite, (new_params, new_opt), (params, opt))
            loss_scale = adjust(loss_scale, finite)
        metrics = UpdateMetrics(c_loss, p_loss, a_loss, jnp.exp(new_params.log_alpha), entropy)
        return new_params, new_opt, loss_scale, metrics, finite

    return update
