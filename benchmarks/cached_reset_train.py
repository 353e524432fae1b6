"""`rlfit ARGS` with the training environments restarting from a cached first state, as Playground's Brax wrapper
does: an experiment for issue 44 (what drives the PointMass collapse), not a feature of rlfit.

rlfit's `VecEnv` resets a finished environment with a fresh key of its own (a new random start every episode).
Playground's `wrap_for_brax_training` (`BraxAutoResetWrapper`, `full_reset=False`) puts back the state and
observation the environment had after its first reset, so each of Brax's training environments replays one start
for the whole run. This script patches `VecEnv` (this process only) so that every environment keeps the key of its
first reset and resets with it again: the reset is a pure function of its key, so the state is the first one. The
evaluation environments are unchanged (they never reset within an episode). Then it runs rlfit's command line.

    .venv/bin/python benchmarks/cached_reset_train.py train PointMass --preset quick --seed 0
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

from rlfit.envs.vec_env import EnvState, VecEnv


def reset_keeping_first_keys(self: VecEnv, key: jax.Array) -> EnvState:
    """As `VecEnv.reset`, but each environment's `reset_key` is the key of its first reset."""
    start_key, _ = jax.random.split(key)
    start_keys = jax.random.split(start_key, self.num_envs)
    inner = jax.vmap(self.env.reset)(start_keys)
    zeros = jnp.zeros(self.num_envs)
    return EnvState(inner, zeros.astype(jnp.int32), zeros, start_keys)


def reset_to_first_state(self: VecEnv, state: EnvState, finished: jax.Array) -> EnvState:
    """Finished environments restart from their first state (their first reset's key, unchanged)."""
    first = jax.vmap(self.env.reset)(state.reset_key)
    done = finished > 0

    def pick(new: jax.Array, old: jax.Array) -> jax.Array:
        return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)

    return EnvState(inner=jax.tree.map(pick, first, state.inner),
                    step_count=jnp.where(done, 0, state.step_count),
                    episode_return=jnp.where(done, 0.0, state.episode_return),
                    reset_key=state.reset_key)


def main() -> int:
    from rlfit.cli import main as rlfit_main

    VecEnv.reset = reset_keeping_first_keys
    VecEnv._reset_finished = reset_to_first_state
    return rlfit_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
