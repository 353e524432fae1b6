"""Helpers for the play, export and G1 tests: run directories made without training, headless GL detection.

`make_policy_run` writes what `rlfit train` leaves for a policy: `config.yaml` and `policy/`, with freshly
initialized parameters and random (but valid) observation statistics, so normalization matters in the maths.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp


def random_stats(obs_example, seed: int = 0, count: float = 100.0):
    """RunningStats like `obs_example` with mean ~ N(0, 1) and std in [0.5, 2]."""
    from rlfit.algos.common.normalizer import RunningStats

    leaves, treedef = jax.tree.flatten(obs_example)
    keys = jax.random.split(jax.random.PRNGKey(seed), 2 * len(leaves))
    means = [jax.random.normal(k, jnp.shape(x)) for k, x in zip(keys[::2], leaves)]
    stds = [jax.random.uniform(k, jnp.shape(x), minval=0.5, maxval=2.0) for k, x in zip(keys[1::2], leaves)]
    return RunningStats(jnp.asarray(count, jnp.float32), jax.tree.unflatten(treedef, means),
                        jax.tree.unflatten(treedef, [count * s**2 for s in stds]))


def make_policy_run(run_dir: Path, env_name: str, overrides: Sequence[str] = (), preset: str = "smoke",
                    seed: int = 0, traced: bool = False) -> Path:
    """Writes RUN_DIR/config.yaml and RUN_DIR/policy/ for `env_name`; returns RUN_DIR. With `traced`, the learner's
    initial state is only traced (nothing compiled or run: a pixel environment's reset compiles for seconds) and the
    policy's parameters are drawn from N(0, 0.1^2) in its shapes."""
    from rlfit.config.schema import resolve
    from rlfit.planning.plan import make_plan
    from rlfit.deploy.policy_file import save_policy
    from rlfit.run.new_run import create_run_dir
    from rlfit.run.trainer import Trainer

    config = resolve(env_name, preset, None, overrides)
    plan = make_plan(config)
    trainer = Trainer.build(config, plan)
    if traced:
        shapes, _ = jax.eval_shape(lambda: trainer.learner.acting(trainer.learner.init(seed)))
        leaves, treedef = jax.tree.flatten(shapes)
        keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
        params = jax.tree.unflatten(treedef, [0.1 * jax.random.normal(k, s.shape, s.dtype) for k, s in zip(keys, leaves)])
    else:
        params, _ = trainer.learner.acting(trainer.learner.init(seed))
    obs = trainer.obs_example  # `observation_example(trainer.env)`, which the build traced (or read) already
    _, lock = create_run_dir(Path(run_dir), config)
    lock.release()
    save_policy(Path(run_dir) / "policy", params, random_stats(obs, seed), trainer.learner.policy, obs,
                trainer.action_space, config.env.name, plan.precision, config.algo)
    return Path(run_dir)


def headless_gl_reason() -> str | None:
    """Why videos cannot be rendered here (None when EGL or OSMesa works)."""
    from rlfit.deploy.play.gl import HEADLESS_BACKENDS, backend_works

    if any(backend_works(name) for name in HEADLESS_BACKENDS):
        return None
    return ("no headless OpenGL (EGL or OSMesa) here; as root, `make install` installs Mesa EGL "
            "(libegl1 libegl-mesa0 libgl1-mesa-dri)")
