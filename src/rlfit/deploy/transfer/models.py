"""The models the transfer check runs on: the nominal one and N drawn by the environment's randomizer.

A randomizer (`rlfit.envs.randomization`) draws a batch of MJX models and marks in `in_axes` which fields it
batched; `draw_models` keeps those fields, [N, ...] each. For model i the check needs the same model twice:

    MJX    the environment's `mjx_model` with row i of every batched field (`with_model`), for the observation,
           reward and termination that the environment's own step computes around its physics;
    native a copy of the environment's `mj_model` with the same row i written into the same fields
           (`native_copy`), which native MuJoCo integrates.

Fields the randomizer did not batch keep the nominal model's values in both.

Keys: the check draws from `fold_in(PRNGKey(seed), TRANSFER_CHECK_STREAM)`: its models from `fold_in(that, 0)`,
its episodes' resets from `fold_in(that, 1)`. Training draws its models from `PRNGKey(run.seed)` (split by the
algorithm, then `models_key`) and every evaluation from `PRNGKey(run.seed ^ 0x5EED)` folded with the iteration, so
the check's models are drawn afresh: none is a model the policy trained or was evaluated on.
"""

from __future__ import annotations

import copy
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.envs.randomization import ModelBatch, Randomizer, draw_models, field_of
from rlfit.errors import UserError

TRANSFER_CHECK_STREAM = 0x54524E53
"""Folded into PRNGKey(--seed) for every key of the transfer check (see the module docstring)."""
MODELS = 0
EPISODES = 1


def check_key(seed: int) -> jax.Array:
    """The root key of a transfer check with seed `seed`."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), TRANSFER_CHECK_STREAM)


def draw_check_models(randomizer: Randomizer, mjx_model: Any, seed: int, count: int) -> ModelBatch:
    """`count` models drawn by `randomizer` from the check's own key: field path -> [count, ...]."""
    return draw_models(randomizer, mjx_model, jax.random.fold_in(check_key(seed), MODELS), count)


def nominal_fields(mjx_model: Any, batch: ModelBatch) -> dict[str, jax.Array]:
    """The nominal model's values of the fields `batch` randomizes, with the batch's dtypes (so the step compiled
    for a randomized model runs the nominal one too)."""
    return {path: jnp.asarray(field_of(mjx_model, path), values.dtype) for path, values in batch.items()}


def row(batch: ModelBatch, index: int) -> dict[str, jax.Array]:
    """Model `index` of the batch: field path -> [...]."""
    return {path: values[index] for path, values in batch.items()}


def native_copy(mj_model: Any, fields: dict[str, Any]) -> Any:
    """A copy of the native `mujoco.MjModel` with `fields` (path -> one model's value) written into it; the other
    fields are the original's, which is never changed. A UserError for a field native MuJoCo's model lacks."""
    model = copy.deepcopy(mj_model)
    for path, value in fields.items():
        *parents, name = path.split(".")
        owner = field_of(model, ".".join(parents)) if parents else model
        current = getattr(owner, name, None)
        if current is None:
            raise UserError(f"the randomizer draws '{path}', a field native MuJoCo's model does not have, so the "
                            "transfer check cannot apply it; randomize fields of mujoco.MjModel")
        value = np.asarray(value)
        if isinstance(current, np.ndarray):
            if current.size != value.size:
                raise UserError(f"the randomizer's '{path}' has {value.size} values where native MuJoCo's model has "
                                f"{current.size}; randomize fields of mujoco.MjModel")
            current[...] = value.reshape(current.shape)
        else:
            setattr(owner, name, type(current)(value.item()))
    return model
