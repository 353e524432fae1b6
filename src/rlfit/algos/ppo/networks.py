"""PPO's networks, its agent: a policy network and a value network over (normalized) observations, optionally through
pixel encoders or a variational information bottleneck (`rlfit.networks.bottleneck`).

Shapes: observations [..., obs_dim]; policy output [..., logits_size] (`ActionSpace.logits_size`: 2 * A
(mean, raw scale) or K logits); value [...].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import numpy as np
import numpy.typing as npt
from jax.typing import DTypeLike

from rlfit.algos.contract import Observation, Variables
from rlfit.networks.bottleneck import BITS_PER_NAT, BottleneckPolicy, fold
from rlfit.algos.ppo.config import PPOConfig
from rlfit.envs.action_space import CONTINUOUS, ActionSpace
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.networks import COMPUTE_DTYPES, MLP, Categorical, TanhGaussian, distribution_for, forward, select_obs
from rlfit.networks.encoders import EncoderSpec, make_encoder
from rlfit.networks.pixels import PixelPolicy, with_pretrained


class AgentParams(NamedTuple):
    """Trainable parameters."""

    policy: Variables
    value: Variables


class Agent(NamedTuple):
    """Pure functions of (params, normalized observation)."""

    policy_logits: Callable[[Variables, Observation], jax.Array]
    """(policy params, obs [..]) -> [..., action_space.logits_size]."""
    value: Callable[[Variables, Observation], jax.Array]
    """(value params, obs [..]) -> [...]."""
    init: Callable[[jax.Array], AgentParams]
    """key -> fresh parameters."""
    action_space: ActionSpace
    latent_size: int = 0
    """Z of the policy's information bottleneck (`rlfit.networks.bottleneck`); 0 without one."""
    policy_sample: Callable[[Variables, Observation, jax.Array], tuple[jax.Array, jax.Array]] | None = None
    """With a bottleneck: (policy params, obs [..], noise [..., Z]) -> (logits [..., logits_size], rate [...]
    in nats); `policy_logits` is the same network with z = mean."""
    policy_rate: Callable[[Variables, Observation], jax.Array] | None = None
    """With a bottleneck: (policy params, obs [..]) -> [...] the rate KL(q(z | obs) || N(0, I)) in bits."""
    deployable: Callable[[Variables], Variables] | None = None
    """With a bottleneck: policy params -> the plain MLP params of the deterministic policy (z = mean), what
    the policy file stores; None: the params themselves."""

    @property
    def distribution(self) -> type[TanhGaussian] | type[Categorical]:
        """The action distribution the policy's logits parameterize (`distribution_for`)."""
        return distribution_for(self.action_space)


def make_agent(obs_example: Observation, action_space: ActionSpace | int, config: PPOConfig, precision: str = "fp32",
               encoder: EncoderSpec | None = None, encoder_weights: dict[str, npt.NDArray[np.generic]] | None = None
               ) -> Agent:
    """Builds the agent for observations shaped like `obs_example` (one unbatched observation) and `action_space`
    (an int A: A continuous dimensions), with the networks `config` (the `ppo` section) describes.

    With `encoder` (an `EncoderSpec`) the policy and the value function each see the observation's camera frames
    through their own encoder, trained by their own loss, both starting from `encoder_weights` when given.
    """
    if isinstance(action_space, int):  # A continuous action dimensions
        action_space = ActionSpace(CONTINUOUS, action_space)
    dtype = COMPUTE_DTYPES[precision]
    policy_net: nn.Module = MLP(tuple(config.policy_hidden) + (action_space.logits_size,), config.activation, dtype)
    value_net: nn.Module = MLP(tuple(config.value_hidden) + (1,), config.activation, dtype)
    if config.bottleneck:
        return _bottleneck_agent(obs_example, action_space, config, dtype, value_net)

    def policy_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.policy_obs_key)

    def value_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.value_obs_key, config.policy_obs_key)

    if encoder is not None:
        policy_net = PixelPolicy(make_encoder(encoder, dtype), policy_net, detach=False)
        value_net = PixelPolicy(make_encoder(encoder, dtype), value_net, detach=False)

        def policy_obs(obs: Observation) -> jax.Array:  # noqa: F811
            return select_obs(obs, PIXELS_KEY)

        value_obs = policy_obs

    def init(key: jax.Array) -> AgentParams:
        policy_key, value_key = jax.random.split(key)
        policy, value = policy_net.init(policy_key, policy_obs(obs_example)), value_net.init(value_key, value_obs(obs_example))
        if encoder_weights is not None:  # both encoders start from the pretrained weights
            policy, value = with_pretrained(policy, encoder_weights), with_pretrained(value, encoder_weights)
        return AgentParams(policy, value)

    return Agent(
        policy_logits=lambda params, obs: forward(policy_net, params, policy_obs(obs)),
        value=lambda params, obs: forward(value_net, params, value_obs(obs))[..., 0],
        init=init,
        action_space=action_space,
    )


def _bottleneck_agent(obs_example: Observation, action_space: ActionSpace, config: PPOConfig, dtype: DTypeLike,
                      value_net: nn.Module) -> Agent:
    """The agent whose policy acts through a variational information bottleneck (vector observations)."""
    policy_net = BottleneckPolicy(tuple(config.policy_hidden), config.bottleneck, action_space.logits_size,
                                  config.activation, dtype)

    def policy_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.policy_obs_key)

    def value_obs(obs: Observation) -> jax.Array:
        return select_obs(obs, config.value_obs_key, config.policy_obs_key)

    def init(key: jax.Array) -> AgentParams:
        policy_key, value_key = jax.random.split(key)
        return AgentParams(policy_net.init(policy_key, policy_obs(obs_example)),
                           value_net.init(value_key, value_obs(obs_example)))

    return Agent(
        policy_logits=lambda params, obs: forward(policy_net, params, policy_obs(obs))[0],
        value=lambda params, obs: forward(value_net, params, value_obs(obs))[..., 0],
        init=init,
        action_space=action_space,
        latent_size=config.bottleneck,
        policy_sample=lambda params, obs, noise: forward(policy_net, params, policy_obs(obs), noise),
        policy_rate=lambda params, obs: forward(policy_net, params, policy_obs(obs))[1] * BITS_PER_NAT,
        deployable=lambda params: fold(params, len(config.policy_hidden)),
    )
