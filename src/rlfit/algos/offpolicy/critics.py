"""The critics SAC and FastTD3 share: twin Q MLPs on (observation, action) and the soft update of their target.

Shapes: observations [..., D]; actions [..., A]; Q values [..., NUM_CRITICS], or with `num_atoms` K (a
distributional critic) logits [..., NUM_CRITICS, K].
"""

from __future__ import annotations

from collections.abc import Sequence
import optax
from jax.typing import DTypeLike

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlfit.algos.contract import TreeT
from rlfit.networks import MLP

NUM_CRITICS = 2


class TwinQ(nn.Module):
    """NUM_CRITICS independent Q functions: (obs [..., D], action [..., A]) -> [..., NUM_CRITICS], or with
    `num_atoms` K (a distributional critic, FastTD3's) -> logits [..., NUM_CRITICS, K]."""

    hidden: Sequence[int]
    activation: str = "relu"
    layer_norm: bool = False
    dtype: DTypeLike = jnp.float32
    num_atoms: int | None = None

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs.astype(jnp.float32), action.astype(jnp.float32)], axis=-1)
        outputs = [MLP(tuple(self.hidden) + (self.num_atoms or 1,), self.activation, self.dtype, self.layer_norm,
                       name=f"critic_{index}")(x) for index in range(NUM_CRITICS)]
        if self.num_atoms is None:
            return jnp.concatenate(outputs, axis=-1)
        return jnp.stack(outputs, axis=-2)


def soft_update(target: TreeT, online: TreeT, tau: float) -> TreeT:
    """(1 - tau) * target + tau * online, leaf by leaf."""
    updated: TreeT = jax.tree.map(lambda t, o: t * (1.0 - tau) + o * tau, target, online)
    return updated


def apply_gradients(optimizer: optax.GradientTransformation, grads: TreeT, opt_state: optax.OptState, params: TreeT
                    ) -> tuple[TreeT, optax.OptState]:
    """One optimizer step: (the updated params, the optimizer's new state)."""
    updates, opt_state = optimizer.update(grads, opt_state, params)
    updated: TreeT = optax.apply_updates(params, updates)
    return updated, opt_state
