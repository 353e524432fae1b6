"""Network pieces every algorithm builds from: MLPs, the observation a network sees, and the two action
distributions: a tanh-squashed Gaussian (continuous actions) and a categorical (discrete actions).

Shapes: observations [..., obs_dim]; policy output [..., logits_size] (`ActionSpace.logits_size`: 2 * A
(mean, raw scale) or K logits); value [...].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.envs.action_space import ActionSpace

MIN_STD = 1e-3
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "swish": nn.swish, "relu": nn.relu, "tanh": nn.tanh, "elu": nn.elu, "gelu": nn.gelu,
}
COMPUTE_DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}


class MLP(nn.Module):
    """Dense layers with `activation` between them (after a LayerNorm with `layer_norm`); parameters fp32,
    compute in `dtype`."""

    layer_sizes: Sequence[int]
    activation: str = "swish"
    dtype: Any = jnp.float32
    layer_norm: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.astype(self.dtype)
        for index, size in enumerate(self.layer_sizes):
            x = nn.Dense(size, dtype=self.dtype, param_dtype=jnp.float32,
                         kernel_init=nn.initializers.lecun_uniform(), name=f"dense_{index}")(x)
            if index < len(self.layer_sizes) - 1:
                if self.layer_norm:
                    x = nn.LayerNorm(dtype=self.dtype, param_dtype=jnp.float32, name=f"norm_{index}")(x)
                x = ACTIVATIONS[self.activation](x)
        return x.astype(jnp.float32)


def forward(module: nn.Module, params: Any, *inputs: Any) -> Any:
    """`module.apply(params, *inputs)`: what the module's `__call__` returns for `inputs` (an array [..., out], or
    a bottleneck policy's (logits, rate)); the callers' NamedTuple fields carry the precise types.

    Flax annotates `Module.apply` as returning `Any | tuple[Any, variables]`, the tuple being its `mutable=`
    overload's, which rlfit never uses; so every `apply` reads as a tuple to the type checker. This helper is the
    one place that drops that branch instead of each network module disabling the checks.
    """
    return module.apply(params, *inputs)


def select_obs(obs: Any, key: str, fallback: str | None = None) -> jax.Array:
    """The array a network sees: `obs` itself, or `obs[key]` (else `obs[fallback]`) for dict observations.

    A dict without either entry is a UserError naming the entries it has (never a silent pick of another).
    """
    if not isinstance(obs, Mapping):
        return obs
    if key in obs:
        return obs[key]
    if fallback is not None and fallback in obs:
        return obs[fallback]
    from rlfit.errors import UserError

    raise UserError(f"the observation has no entry '{key}' (it has {', '.join(sorted(map(str, obs)))}); set the "
                    "network's observation key (ppo.policy_obs_key, sac.policy_obs_key, fasttd3.policy_obs_key) to one of them")


class TanhGaussian(NamedTuple):
    """A diagonal Gaussian over raw actions; the environment receives tanh(raw) in [-1, 1]."""

    mean: jax.Array
    std: jax.Array

    @classmethod
    def from_logits(cls, logits: jax.Array) -> TanhGaussian:
        mean, raw_scale = jnp.split(logits, 2, axis=-1)
        return cls(mean, jax.nn.softplus(raw_scale) + MIN_STD)

    def sample_raw(self, key: jax.Array) -> jax.Array:
        return self.mean + self.std * jax.random.normal(key, self.mean.shape)

    def log_prob(self, raw_action: jax.Array) -> jax.Array:
        """Log-density of tanh(raw_action), summed over action dims: [...]."""
        z = (raw_action - self.mean) / self.std
        gaussian = -0.5 * z**2 - jnp.log(self.std) - 0.5 * jnp.log(2 * jnp.pi)
        return jnp.sum(gaussian - tanh_log_det_jacobian(raw_action), axis=-1)

    def entropy(self, key: jax.Array) -> jax.Array:
        """Entropy of the squashed distribution, one reparameterized sample per row: [...].

        H[tanh(u)] = H[u] + E[log |d tanh(u) / du|]; the second term penalizes saturating the tanh,
        which the Gaussian entropy alone would reward.
        """
        gaussian = jnp.sum(0.5 + 0.5 * jnp.log(2 * jnp.pi) + jnp.log(self.std), axis=-1)
        return gaussian + jnp.sum(tanh_log_det_jacobian(self.sample_raw(key)), axis=-1)

    def kl_from(self, old: TanhGaussian) -> jax.Array:
        """KL(old || self) of the Gaussians over raw actions, summed over action dims: [...]. As Brax's
        `NormalDistribution.kl_divergence` computes it (with its 1e-5 inside the log of the scale ratio), for the
        `adaptive_kl` learning-rate schedule."""
        return jnp.sum(jnp.log(self.std / old.std + 1e-5)
                       + (old.std**2 + (old.mean - self.mean) ** 2) / (2.0 * self.std**2) - 0.5, axis=-1)

    def mode(self) -> jax.Array:
        """The deterministic action tanh(mean)."""
        return jnp.tanh(self.mean)

    @staticmethod
    def env_action(raw_action: jax.Array) -> jax.Array:
        """What the environment receives for a sampled raw action: tanh(raw) in [-1, 1]."""
        return jnp.tanh(raw_action)


class Categorical(NamedTuple):
    """A categorical distribution over K discrete actions, from unnormalized logits [..., K]."""

    logits: jax.Array
    """[..., K] log-probabilities up to a constant."""

    @classmethod
    def from_logits(cls, logits: jax.Array) -> Categorical:
        return cls(jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1))

    def sample_raw(self, key: jax.Array) -> jax.Array:
        """[...] int32 action indices."""
        return jax.random.categorical(key, self.logits, axis=-1).astype(jnp.int32)

    def log_prob(self, action: jax.Array) -> jax.Array:
        """log pi(action): [...]."""
        return jnp.take_along_axis(self.logits, action.astype(jnp.int32)[..., None], axis=-1)[..., 0]

    def entropy(self, key: jax.Array | None = None) -> jax.Array:
        """Exact entropy -sum p log p: [...] (`key` unused; the same signature as TanhGaussian's)."""
        return -jnp.sum(jnp.exp(self.logits) * self.logits, axis=-1)

    def kl_from(self, old: Categorical) -> jax.Array:
        """Exact KL(old || self) = sum p_old (log p_old - log p_self): [...]."""
        return jnp.sum(jnp.exp(old.logits) * (old.logits - self.logits), axis=-1)

    def mode(self) -> jax.Array:
        """The most likely action: [...] int32."""
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    @staticmethod
    def env_action(action: jax.Array) -> jax.Array:
        """The environment receives the index itself."""
        return action


def distribution_for(space: ActionSpace) -> type[TanhGaussian] | type[Categorical]:
    """TanhGaussian for continuous actions, Categorical for discrete ones (both built with `from_logits`)."""
    return Categorical if space.discrete else TanhGaussian


def tanh_log_det_jacobian(raw_action: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2), computed stably, elementwise."""
    return 2.0 * (jnp.log(2.0) - raw_action - jax.nn.softplus(-2.0 * raw_action))


def squash(raw_action: jax.Array) -> jax.Array:
    return jnp.tanh(raw_action)
