"""The categorical (C51) value distribution: fixed atoms and the projection of a shifted, scaled distribution
back onto them (Bellemare et al. 2017, Algorithm 1).

Shapes: B = batch, K = atoms.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def atoms(v_min: float, v_max: float, num_atoms: int) -> jax.Array:
    """[K] float32 atoms evenly spaced from v_min to v_max."""
    return jnp.linspace(v_min, v_max, num_atoms, dtype=jnp.float32)


def expected_value(probs: jax.Array, support: jax.Array) -> jax.Array:
    """[...] the mean of distributions `probs` [..., K] over `support` [K]."""
    return jnp.sum(probs * support, axis=-1)


def project(probs: jax.Array, reward: jax.Array, bootstrap: jax.Array, support: jax.Array) -> jax.Array:
    """[B, K] the distribution of reward + bootstrap * Z, Z ~ `probs` [B, K] on `support` [K], projected onto it.

    `bootstrap` [B] is gamma^n times the discount (0 after a terminal state: all mass goes to the atoms around
    `reward`). Each shifted atom r + bootstrap * z_j is clipped into [v_min, v_max] and its mass split between
    the two neighbouring atoms in proportion to closeness (all of it to one atom when it lands on it).
    """
    num_atoms = support.shape[0]
    v_min, v_max = support[0], support[-1]
    spacing = (v_max - v_min) / (num_atoms - 1)
    shifted = jnp.clip(reward[:, None] + bootstrap[:, None] * support[None, :], v_min, v_max)
    position = (shifted - v_min) / spacing  # [B, K] in [0, K - 1]
    lower = jnp.clip(jnp.floor(position), 0, num_atoms - 1)
    upper = jnp.clip(jnp.ceil(position), 0, num_atoms - 1)
    on_atom = (lower == upper).astype(probs.dtype)
    lower_mass = probs * (upper - position + on_atom)
    upper_mass = probs * (position - lower)

    def one(lower_i: jax.Array, upper_i: jax.Array, lower_mass_i: jax.Array, upper_mass_i: jax.Array) -> jax.Array:
        projected = jnp.zeros((num_atoms,), probs.dtype)
        projected = projected.at[lower_i.astype(jnp.int32)].add(lower_mass_i)
        return projected.at[upper_i.astype(jnp.int32)].add(upper_mass_i)

    projected: jax.Array = jax.vmap(one)(lower, upper, lower_mass, upper_mass)
    return projected


def cross_entropy(target: jax.Array, logits: jax.Array) -> jax.Array:
    """[...] -sum_k target_k log softmax(logits)_k over the last axis (target [..., K], logits [..., K])."""
    return -jnp.sum(target * jax.nn.log_softmax(logits, axis=-1), axis=-1)
