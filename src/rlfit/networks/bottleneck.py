"""A variational information bottleneck in front of the policy's output (Alemi et al., 2017, "Deep Variational
Information Bottleneck"), whose rate is the agent's description length of an observation.

    h      = act(MLP(obs))                            the policy's hidden layers   [..., H]
    mu     = Dense(h), sigma = softplus(Dense(h))     q(z | obs) = N(mu, sigma^2)  [..., Z]
    z      = mu + sigma * noise                       noise ~ N(0, I), drawn per step by the rollout and kept
    logits = Dense(z)                                 the action distribution's    [..., logits_size]
    rate   = KL(q(z | obs) || N(0, I)) = 0.5 * sum(mu^2 + sigma^2 - 1 - log sigma^2)   nats [...]

PPO adds `beta * mean(rate)` to its loss. Because the rollout keeps each step's noise, the loss re-evaluates
pi(a | obs, noise) with the same noise: the importance ratio is exact for the joint policy over (noise, action),
whose noise distribution does not depend on the parameters. Acting deterministically (evaluation, the policy
file, export) uses z = mu; the two linear maps then compose into one layer, so the deployable network is a
plain MLP (`fold`) that `rlfit.load_policy` and the ONNX export read unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks import ACTIVATIONS, MLP

MIN_SIGMA = 1e-4
BITS_PER_NAT = 1.0 / math.log(2.0)


class BottleneckPolicy(nn.Module):
    """obs [..., D] (and noise [..., Z] or None for z = mu) -> (logits [..., out], rate [...] in nats)."""

    hidden: tuple[int, ...]
    latent: int
    out: int
    activation: str
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, obs: jax.Array, noise: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        h = obs.astype(self.dtype)
        if self.hidden:
            h = ACTIVATIONS[self.activation](MLP(self.hidden, self.activation, self.dtype, name="trunk")(h))
        dense = dict(dtype=self.dtype, param_dtype=jnp.float32, kernel_init=nn.initializers.lecun_uniform())
        mu = nn.Dense(self.latent, name="mu", **dense)(h).astype(jnp.float32)
        sigma = jax.nn.softplus(nn.Dense(self.latent, name="raw_sigma", **dense)(h).astype(jnp.float32)) + MIN_SIGMA
        z = mu if noise is None else mu + sigma * noise
        logits = nn.Dense(self.out, name="out", **dense)(z.astype(self.dtype))
        return logits.astype(jnp.float32), gaussian_kl(mu, sigma)


def gaussian_kl(mu: jax.Array, sigma: jax.Array) -> jax.Array:
    """KL(N(mu, diag sigma^2) || N(0, I)) in nats, summed over the last axis: [...]."""
    return 0.5 * jnp.sum(mu**2 + sigma**2 - 1.0 - 2.0 * jnp.log(sigma), axis=-1)


def fold(params: Any, hidden_layers: int) -> dict[str, Any]:
    """The deterministic policy (z = mu) as plain MLP params {'params': {'dense_i': {'kernel', 'bias'}}}:
    the trunk's layers, then one layer out(mu(h)) = h @ (W_mu W_out) + (b_mu W_out + b_out)."""
    inner = params["params"]
    layers = {f"dense_{i}": inner["trunk"][f"dense_{i}"] for i in range(hidden_layers)}
    mu, out = inner["mu"], inner["out"]
    layers[f"dense_{hidden_layers}"] = {"kernel": mu["kernel"] @ out["kernel"],
                                        "bias": mu["bias"] @ out["kernel"] + out["bias"]}
    return {"params": layers}
