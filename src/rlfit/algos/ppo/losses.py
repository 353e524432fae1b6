"""The PPO loss: clipped surrogate, value regression, entropy bonus."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation
from rlfit.algos.ppo.networks import Agent, AgentParams
from rlfit.algos.ppo.gae import brax_targets


class Steps(NamedTuple):
    """What Brax's estimator needs to form advantages and targets inside the loss (`ppo.advantages: brax`)."""

    reward: jax.Array
    """[T, b] rewards times `reward_scaling`."""
    termination: jax.Array
    """[T, b] 1.0 where the episode reached a terminal state."""
    truncation: jax.Array
    """[T, b] 1.0 where the episode hit its time limit (masked out)."""
    bootstrap_obs: Observation
    """[1, b, ...] the normalized observation after each sequence's last step (a time axis of 1, so that every
    leaf of the batch shuffles and splits along axis 1)."""


class LossBatch(NamedTuple):
    """One minibatch; every array is [T, b] (b = batch_size sequences), observations [T, b, ...]."""

    obs: Observation
    """Normalized observations."""
    raw_action: jax.Array
    """[T, b, A] pre-tanh actions (continuous) or [T, b] int32 indices (discrete) that were taken."""
    old_log_prob: jax.Array
    """Log-probabilities of those actions under the policy that collected them."""
    advantages: jax.Array | None
    """GAE advantages formed before the epochs (`ppo.advantages: gae_once`); None: formed in the loss from `steps`."""
    returns: jax.Array | None
    """Value targets (advantages + old values) with `advantages`; None with `steps`."""
    latent_noise: jax.Array | None = None
    """[T, b, Z] the bottleneck noise each action was chosen with (`rlfit.networks.bottleneck`); None without."""
    steps: Steps | None = None
    """Rewards and ends for Brax's estimator in the loss (`ppo.advantages: brax`); None with `advantages`."""
    old_logits: jax.Array | None = None
    """[T, b, logits_size] the logits each action was drawn from, for the mean KL that the `adaptive_kl`
    learning-rate schedule reads; None without that schedule."""


class LossTerms(NamedTuple):
    """Scalar parts of the loss, for logging."""

    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array
    bottleneck: jax.Array | None = None
    """beta * mean rate (nats), the information bottleneck's part of `total`; None without a bottleneck."""
    rate_bits: jax.Array | None = None
    """Mean rate KL(q(z | obs) || N(0, I)) in bits over the minibatch; None without a bottleneck."""
    kl_mean: jax.Array | None = None
    """Mean KL(collecting policy || current policy) over the minibatch, as Brax's `kl_mean` (the Gaussians over raw
    actions for a tanh-Gaussian); None without `batch.old_logits`."""


def ppo_loss(
    params: AgentParams,
    batch: LossBatch,
    agent: Agent,
    clipping_epsilon: float,
    entropy_cost: float,
    normalize_advantage: bool,
    entropy_key: jax.Array,
    bottleneck_beta: float = 0.0,
    discounting: float = 0.0,
    gae_lambda: float = 0.0,
) -> tuple[jax.Array, LossTerms]:
    """Brax's PPO loss (0.14.2 `compute_ppo_loss`):

        A, vs   = batch.advantages, batch.returns, or with `batch.steps` Brax's estimator on this update's
                  values (`brax_targets` with `discounting`, `gae_lambda`; no gradient through them)
        ratio   = exp(log pi(a|s) - old_log_prob)
        policy  = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
        value   = 0.25 * mean((vs - V(s))^2)          (Brax's scale: 0.5 * 0.5)
        entropy = -entropy_cost * mean(H[pi(.|s)])   (a tanh-Gaussian: one sample with `entropy_key`,
                                                     see TanhGaussian.entropy; a categorical: exact)
        total   = policy + value + entropy [+ beta * mean(rate)]

    With `batch.old_logits` the minibatch's mean KL(old || pi) is returned as `kl_mean` (no gradient).
    With an information bottleneck (`agent.latent_size` > 0) pi is evaluated with the noise each action was
    chosen with (`batch.latent_noise`), and its rate (nats) weighted by `bottleneck_beta` joins the total.
    """
    values = agent.value(params.value, batch.obs)
    if batch.steps is None:
        assert batch.advantages is not None and batch.returns is not None, "a LossBatch has advantages or steps"
        advantages, returns = batch.advantages, batch.returns
    else:
        bootstrap = agent.value(params.value, batch.steps.bootstrap_obs)[0]
        advantages, returns = brax_targets(batch.steps.reward, values, bootstrap, batch.steps.termination,
                                           batch.steps.truncation, discounting, gae_lambda)
    if normalize_advantage:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    rate = None
    if agent.latent_size:
        assert agent.policy_sample is not None and batch.latent_noise is not None, \
            "an agent with a bottleneck samples its policy with the noise each action was chosen with"
        logits, rate = agent.policy_sample(params.policy, batch.obs, batch.latent_noise)
    else:
        logits = agent.policy_logits(params.policy, batch.obs)
    dist = agent.distribution.from_logits(logits)
    log_ratio = dist.log_prob(batch.raw_action) - batch.old_log_prob
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - clipping_epsilon, 1.0 + clipping_epsilon)
    policy_loss = -jnp.mean(jnp.minimum(ratio * advantages, clipped * advantages))
    value_error = returns - values
    value_loss = 0.25 * jnp.mean(value_error**2)
    entropy_loss = -entropy_cost * jnp.mean(dist.entropy(entropy_key))
    total = policy_loss + value_loss + entropy_loss
    bottleneck = rate_bits = None
    if rate is not None:
        bottleneck = bottleneck_beta * jnp.mean(rate)
        total = total + bottleneck
        rate_bits = jnp.mean(rate) / jnp.log(2.0)
    terms = LossTerms(
        total=total,
        policy=policy_loss,
        value=value_loss,
        entropy=entropy_loss,
        approx_kl=jnp.mean((ratio - 1.0) - log_ratio),
        clip_fraction=jnp.mean((jnp.abs(ratio - 1.0) > clipping_epsilon).astype(jnp.float32)),
        bottleneck=bottleneck,
        rate_bits=rate_bits,
        kl_mean=None if batch.old_logits is None else jnp.mean(
            dist.kl_from(agent.distribution.from_logits(batch.old_logits))),  # type: ignore[arg-type]  # one class: old and new
    )
    return total, jax.lax.stop_gradient(terms)
