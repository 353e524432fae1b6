"""Policy and value networks (MLPs) and the two action distributions: a tanh-squashed Gaussian (continuous
actions) and a categorical (discrete actions).

Shapes: observations [..., obs_dim]; policy output [..., logits_size] (`ActionSpace.logits_size`: 2 * A
(mean, raw scale) or K logits); value [...].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.config.schema import NetworkConfig
from rlfit.envs.action_space import CONTINUOUS, ActionSpace

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


class AgentParams(NamedTuple):
    """Trainable parameters."""

    policy: Any
    value: Any


class Agent(NamedTuple):
    """Pure functions of (params, normalized observation)."""

    policy_logits: Callable[[Any, Any], jax.Array]
    """(policy params, obs [..]) -> [..., action_space.logits_size]."""
    value: Callable[[Any, Any], jax.Array]
    """(value params, obs [..]) -> [...]."""
    init: Callable[[jax.Array], AgentParams]
    """key -> fresh parameters."""
    action_space: ActionSpace
    latent_size: int = 0
    """Z of the policy's information bottleneck (`rlfit.algos.ppo.bottleneck`); 0 without one."""
    policy_sample: Callable[[Any, Any, jax.Array], tuple[jax.Array, jax.Array]] | None = None
    """With a bottleneck: (policy params, obs [..], noise [..., Z]) -> (logits [..., logits_size], rate [...]
    in nats); `policy_logits` is the same network with z = mean."""
    policy_rate: Callable[[Any, Any], jax.Array] | None = None
    """With a bottleneck: (policy params, obs [..]) -> [...] the rate KL(q(z | obs) || N(0, I)) in bits."""
    deployable: Callable[[Any], Any] | None = None
    """With a bottleneck: policy params -> the plain MLP params of the deterministic policy (z = mean), what
    the policy file stores; None: the params themselves."""

    @property
    def distribution(self) -> type:
        """The action distribution the policy's logits parameterize (`distribution_for`)."""
        return distribution_for(self.action_space)


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
                    "network's observation key (network.policy_obs_key, sac.policy_obs_key) to one of them")


def make_agent(obs_example: Any, action_space: ActionSpace | int, config: NetworkConfig, precision: str = "fp32",
               encoder: Any = None, encoder_weights: Any = None) -> Agent:
    """Builds the agent for observations shaped like `obs_example` (one unbatched observation) and `action_space`
    (an int A: A continuous dimensions).

    With `encoder` (an `EncoderSpec`) the policy and the value function each see the observation's camera frames
    through their own encoder, trained by their own loss, both starting from `encoder_weights` when given.
    """
    if isinstance(action_space, int):  # A continuous action dimensions
        action_space = ActionSpace(CONTINUOUS, action_space)
    dtype = COMPUTE_DTYPES[precision]
    policy_net = MLP(tuple(config.policy_hidden) + (action_space.logits_size,), config.activation, dtype)
    value_net = MLP(tuple(config.value_hidden) + (1,), config.activation, dtype)
    if config.bottleneck:
        return _bottleneck_agent(obs_example, action_space, config, dtype, value_net)

    def policy_obs(obs):
        return select_obs(obs, config.policy_obs_key)

    def value_obs(obs):
        return select_obs(obs, config.value_obs_key, config.policy_obs_key)

    if encoder is not None:
        from rlfit.envs.pixels import PIXELS_KEY
        from rlfit.networks.encoders import make_encoder
        from rlfit.networks.pixels import PixelPolicy

        policy_net = PixelPolicy(make_encoder(encoder, dtype), policy_net, detach=False)
        value_net = PixelPolicy(make_encoder(encoder, dtype), value_net, detach=False)

        def policy_obs(obs):  # noqa: F811
            return obs[PIXELS_KEY]

        value_obs = policy_obs

    def init(key: jax.Array) -> AgentParams:
        policy_key, value_key = jax.random.split(key)
        policy, value = policy_net.init(policy_key, policy_obs(obs_example)), value_net.init(value_key, value_obs(obs_example))
        if encoder_weights is not None:  # both encoders start from the pretrained weights
            from rlfit.networks.pixels import with_pretrained

            policy, value = with_pretrained(policy, encoder_weights), with_pretrained(value, encoder_weights)
        return AgentParams(policy, value)

    return Agent(
        policy_logits=lambda params, obs: policy_net.apply(params, policy_obs(obs)),
        value=lambda params, obs: value_net.apply(params, value_obs(obs))[..., 0],
        init=init,
        action_space=action_space,
    )


def _bottleneck_agent(obs_example: Any, action_space: ActionSpace, config: NetworkConfig, dtype: Any,
                      value_net: MLP) -> Agent:
    """The agent whose policy acts through a variational information bottleneck (vector observations)."""
    from rlfit.algos.ppo.bottleneck import BITS_PER_NAT, BottleneckPolicy, fold

    policy_net = BottleneckPolicy(tuple(config.policy_hidden), config.bottleneck, action_space.logits_size,
                                  config.activation, dtype)

    def policy_obs(obs):
        return select_obs(obs, config.policy_obs_key)

    def value_obs(obs):
        return select_obs(obs, config.value_obs_key, config.policy_obs_key)

    def init(key: jax.Array) -> AgentParams:
        policy_key, value_key = jax.random.split(key)
        return AgentParams(policy_net.init(policy_key, policy_obs(obs_example)),
                           value_net.init(value_key, value_obs(obs_example)))

    return Agent(
        policy_logits=lambda params, obs: policy_net.apply(params, policy_obs(obs))[0],
        value=lambda params, obs: value_net.apply(params, value_obs(obs))[..., 0],
        init=init,
        action_space=action_space,
        latent_size=config.bottleneck,
        policy_sample=lambda params, obs, noise: policy_net.apply(params, policy_obs(obs), noise),
        policy_rate=lambda params, obs: policy_net.apply(params, policy_obs(obs))[1] * BITS_PER_NAT,
        deployable=lambda params: fold(params, len(config.policy_hidden)),
    )


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

    def mode(self) -> jax.Array:
        """The most likely action: [...] int32."""
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    @staticmethod
    def env_action(action: jax.Array) -> jax.Array:
        """The environment receives the index itself."""
        return action


def distribution_for(space: ActionSpace) -> type:
    """TanhGaussian for continuous actions, Categorical for discrete ones (both built with `from_logits`)."""
    return Categorical if space.discrete else TanhGaussian


def tanh_log_det_jacobian(raw_action: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2), computed stably, elementwise."""
    return 2.0 * (jnp.log(2.0) - raw_action - jax.nn.softplus(-2.0 * raw_action))


def squash(raw_action: jax.Array) -> jax.Array:
    return jnp.tanh(raw_action)
