"""`rlfit ARGS` with the training environments' resets changed: an experiment for issue 44 (what drives the
PointMass collapse), not a feature of rlfit.

    .venv/bin/python benchmarks/reset_variant_train.py cached train PointMass --preset quick --seed 0
    .venv/bin/python benchmarks/reset_variant_train.py staggered train PointMass --preset quick --seed 0

rlfit's `VecEnv` resets a finished environment with a fresh key of its own (a new random start every episode),
and all training environments start together, so with a fixed episode length they all end together.

- `cached`: each training environment keeps the key of its first reset and resets with it again (the reset is a
  pure function of its key, so the state is the first one): as Playground's `wrap_for_brax_training`
  (`BraxAutoResetWrapper`, `full_reset=False`) puts back the first state and observation.
- `staggered`: each training environment's first episode starts at a random step count in [0, episode length),
  so episodes end at different iterations instead of all together (resets stay fresh, as rlfit's).

Only the training environments change (the first `VecEnv` that `rlfit.run.trainer` makes); evaluation does not.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

import rlfit.run.trainer
from rlfit.envs.vec_env import EnvState, VecEnv


class CachedResetVecEnv(VecEnv):
    """Finished environments restart from their first state."""

    def reset(self, key: jax.Array) -> EnvState:
        """As `VecEnv.reset`, but each environment's `reset_key` is the key of its first reset."""
        start_key, _ = jax.random.split(key)
        start_keys = jax.random.split(start_key, self.num_envs)
        inner = jax.vmap(self.env.reset)(start_keys)
        zeros = jnp.zeros(self.num_envs)
        return EnvState(inner, zeros.astype(jnp.int32), zeros, start_keys)

    def _reset_finished(self, state: EnvState, finished: jax.Array) -> EnvState:
        first = jax.vmap(self.env.reset)(state.reset_key)
        done = finished > 0

        def pick(new: jax.Array, old: jax.Array) -> jax.Array:
            return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)

        return EnvState(inner=jax.tree.map(pick, first, state.inner),
                        step_count=jnp.where(done, 0, state.step_count),
                        episode_return=jnp.where(done, 0.0, state.episode_return),
                        reset_key=state.reset_key)


class StaggeredVecEnv(VecEnv):
    """The first episodes start at random step counts, so the environments' episodes end at different times."""

    def reset(self, key: jax.Array) -> EnvState:
        state = super().reset(key)
        offsets = jax.random.randint(jax.random.fold_in(key, 1), (self.num_envs,), 0, self.episode_length)
        return state._replace(step_count=offsets.astype(jnp.int32))


VARIANTS = {"cached": CachedResetVecEnv, "staggered": StaggeredVecEnv}


def training_env_factory(variant: type[VecEnv]):
    """A stand-in for `VecEnv` in `rlfit.run.trainer`: the first environment it makes (training) is `variant`."""
    made = []

    def make(*args, **kwargs) -> VecEnv:
        cls = variant if not made else VecEnv
        made.append(cls)
        return cls(*args, **kwargs)

    return make


def main() -> int:
    from rlfit.cli import main as rlfit_main

    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        print(f"reset_variant_train.py: error: the first argument must be one of {', '.join(VARIANTS)}",
              file=sys.stderr)
        return 2
    rlfit.run.trainer.VecEnv = training_env_factory(VARIANTS[sys.argv[1]])
    return rlfit_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
