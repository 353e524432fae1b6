"""The critics SAC and FastTD3 share: twin Q MLPs on (observation, action) and the soft update of their target.

Shapes: observations [..., D]; actions [..., A]; Q values [..., NUM_CRITICS], or with `num_atoms` K (a
distributional critic) logits [..., NUM_CRITICS, K].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.networks import MLP

NUM_CRITICS = 2


class TwinQ(nn.Module):
    """NUM_CRITICS independent Q functions: (obs [..., D], action [..., A]) -> [..., NUM_CRITICS], or with
    `num_atoms` K (a distributional critic, FastTD3's) -> logits [..., NUM_CRITICS, K]."""

    hidden: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    dtype: Any = jnp.float32
    num_atoms: int | None = None

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs.astype(jnp.float32), action.astype(jnp.float32)], axis=-1)
        outputs = [MLP(tuple(self.hidden) + (self.num_atoms or 1,), self.activation, self.dtype, self.layer_norm,
                       name=f"critic_{index}")(x) for index in range(NUM_CRITICS)]
        if self.num_atoms is None:
            return jnp.concatenate(outputs, axis=-1)
        return jnp.stack(outputs, axis=-2)


def soft_update(target: Any, online: Any, tau: float) -> Any:
    """(1 - tau) * target + tau * online, leaf by leaf."""
    return jax.tree.map(lambda t, o: t * (1.0 - tau) + o * tau, target, online)
