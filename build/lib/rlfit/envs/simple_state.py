"""The State that rlfit's non-MuJoCo environments (the gridworld, the gymnax and XLand-MiniGrid adapters) return.

It has the fields the environment contract (`rlfit.envs.loading`) asks of Playground's `State`, as a NamedTuple
(a pytree that `jax.vmap`, `jax.lax.cond` and checkpoints handle as they do Playground's).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax


class SimpleState(NamedTuple):
    """One environment's state (leading axis [N] when batched by `VecEnv`)."""

    obs: Any
    """[obs_dim] float32 observation."""
    reward: jax.Array
    """[] float32 reward of the step that led here (0 after a reset)."""
    done: jax.Array
    """[] float32, 1.0 at a terminal state."""
    metrics: dict[str, jax.Array]
    """Scalars the environment reports (may be empty)."""
    info: Any
    """The environment's own state (positions, layout, its PRNG key, ...)."""
