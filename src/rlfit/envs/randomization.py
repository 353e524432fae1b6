"""Domain randomization: one MuJoCo model per environment, drawn once, stepped under `jax.vmap`.

A randomizer has MuJoCo Playground's signature

    randomize(mjx.Model, keys [N, 2] uint32) -> (batched mjx.Model, in_axes)

where `in_axes` is a model-shaped tree of 0 (the field is batched: one value per environment) and None (shared).
rlfit keeps only the batched fields, as a `ModelBatch`: field path ("body_mass", "opt.gravity") -> [N, ...] array.
The batch is part of the environments' state (`rlfit.envs.vec_env.EnvState.models`): an argument of every compiled
step (so the memory planner counts it), split over devices with the other per-environment arrays, saved in every
checkpoint (so a resume continues on the very same models), and drawn by `VecEnv.reset` from its key (so a
training run's batch follows from its seed, and each evaluation draws models of its own from its own key).

`env.randomization` chooses the randomizer: `auto` (Playground's `registry.get_domain_randomizer(name)` where the
environment has one, else none), `off`, or `module:function` (the user's). `resolve_randomization` checks it once,
abstractly (`jax.eval_shape`: nothing runs or compiles), and any problem is one line (`UserError`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from rlfit.envs.user_code import import_callable
from rlfit.errors import UserError

ModelBatch = dict[str, jax.Array]
"""The randomized fields of N models: field path -> [N, *field shape]."""

Randomizer = Callable[[Any, jax.Array], tuple[Any, Any]]
"""Playground's signature: (mjx.Model, keys [N, 2]) -> (batched model, in_axes)."""

SETTINGS = ("auto", "off")
"""`env.randomization` values besides `module:function`."""

MODELS_STREAM = 0x4D6F6465
"""Folded into `VecEnv.reset`'s key for the models' key (`models_key`), apart from the keys of the episodes."""


@dataclass(frozen=True)
class Randomization:
    """What `env.randomization` resolved to for one environment."""

    setting: str
    """The config's value: `auto`, `off` or `module:function`."""
    source: str | None
    """Whose randomizer runs: `playground:<env name>` or `module:function`; None when the models are not randomized."""
    function: Randomizer | None
    """The randomizer itself (None: off)."""
    fields: tuple[str, ...] = ()
    """The model fields it randomizes (paths such as `body_mass`), sorted."""
    bytes_per_env: int = 0
    """Bytes of one environment's randomized fields (the batch holds N times this)."""
    note: str = ""
    """One line for the console and summary.json: what runs and why (empty for an environment without a model)."""

    @property
    def enabled(self) -> bool:
        return self.function is not None

    def to_dict(self) -> dict[str, Any]:
        """summary.json's `randomization` entry."""
        return {"setting": self.setting, "source": self.source, "fields": list(self.fields),
                "bytes_per_env": self.bytes_per_env, "note": self.note}


def mjx_model_of(env: Any) -> Any | None:
    """The MJX model `env` steps (Playground's `mjx_model`), or None for an environment without one of its own (a
    wrapper such as the pixels' delegates to another's, which a copy of the wrapper would not replace)."""
    return env.mjx_model if "_mjx_model" in getattr(env, "__dict__", {}) else None


def resolve_randomization(setting: str, env_name: str, env: Any, num_envs: int) -> Randomization:
    """`setting` (`env.randomization`) for `env` (named `env_name`) at `num_envs` environments, checked abstractly.

    Raises UserError for a function that cannot be imported, fails, or returns the wrong structure or shapes,
    for an environment without an MJX model (nothing to randomize), and for pixel environments."""
    if setting == "off":
        return Randomization(setting, None, None, note="domain randomization: off (env.randomization: off)"
                             if mjx_model_of(env) is not None else "")
    model = mjx_model_of(env)
    if model is None and mjx_model_of(getattr(env, "env", object())) is not None:
        if setting == "auto":
            return Randomization(setting, None, None, note="domain randomization: off (not with pixel observations)")
        raise UserError(f"env.randomization={setting} works with env.observation: state only; set "
                        "env.randomization: off for pixels")
    if setting == "auto":
        function = _playground_randomizer(env_name) if model is not None else None
        if function is None:
            note = (f"domain randomization: off ({env_name} has no randomizer in Playground)" if model is not None
                    else "")
            return Randomization(setting, None, None, note=note)
        source = f"playground:{env_name}"
    else:
        function, source = _user_randomizer(setting), setting
        if model is None:
            raise UserError(f"env.randomization={setting}: {env_name} has no MJX model to randomize; set "
                            "env.randomization: off")
    fields, bytes_per_env = check_randomizer(function, model, num_envs, source)
    what = "Playground's randomizer" if setting == "auto" else setting
    note = (f"domain randomization: {what} ({len(fields)} fields, {bytes_per_env:,} bytes per environment: "
            f"{', '.join(fields)})")
    return Randomization(setting, source, function, fields, bytes_per_env, note)


def _playground_randomizer(env_name: str) -> Randomizer | None:
    """Playground's randomizer for `env_name`, or None. Playground prints a line to standard output for a locomotion
    or manipulation environment without one; it goes to standard error here, so that the standard output of
    `rlfit plan --json` and `rlfit transfer-check --json` stays one JSON object."""
    import contextlib
    import sys

    from mujoco_playground import registry

    try:
        with contextlib.redirect_stdout(sys.stderr):
            return registry.get_domain_randomizer(env_name)
    except Exception:  # a name outside Playground's registry (`module:factory`): none  # noqa: BLE001
        return None


def _user_randomizer(setting: str) -> Randomizer:
    return import_callable(setting, "env.randomization", expected="give module:function with the signature "
                           "(mjx.Model, keys[num_envs]) -> (model, in_axes)")


def check_randomizer(function: Randomizer, model: Any, num_envs: int, source: str) -> tuple[tuple[str, ...], int]:
    """(the fields `function` randomizes, their bytes per environment), from its abstract output at `num_envs` keys;
    UserError when it fails or its output is not a model batched on axis 0 where `in_axes` says 0."""
    keys = jax.ShapeDtypeStruct((num_envs, 2), np.uint32)
    returned: dict[str, Any] = {}

    def batched_model(model: Any, keys: jax.Array) -> Any:
        batched, returned["in_axes"] = function(model, keys)  # in_axes: Python ints and None, never traced
        return batched

    try:
        batched = jax.eval_shape(batched_model, model, keys)
        in_axes = returned["in_axes"]
    except (TypeError, ValueError) as error:
        if "unpack" in str(error):
            raise UserError(f"env.randomization: {source} must return (model, in_axes), a pair") from None
        raise UserError(f"env.randomization: {source} failed: {_first_line(error)}") from None
    except Exception as error:  # the user's code may raise anything: one line, never a traceback  # noqa: BLE001
        raise UserError(f"env.randomization: {source} failed: {type(error).__name__}: {_first_line(error)}") from None
    try:
        axes = _axes_by_field(in_axes)
        shapes = {path: leaf for path, leaf in _leaves_by_field(batched).items()}
        nominal = _leaves_by_field(model)
    except (TypeError, ValueError) as error:
        raise UserError(f"env.randomization: {source} returned no (model, in_axes) pair of model-shaped trees: "
                        f"{_first_line(error)}") from None
    batched_fields = sorted(path for path, axis in axes.items() if axis is not None)
    if not batched_fields:
        raise UserError(f"env.randomization: {source} batched no field (every in_axes entry is None); set "
                        "env.randomization: off or return in_axes with 0 for the fields it draws")
    size = 0
    for path in batched_fields:
        if axes[path] != 0 or path not in shapes or path not in nominal:
            raise UserError(f"env.randomization: {source} gave in_axes {axes[path]!r} for '{path}'; rlfit takes 0 "
                            "(batched on the first axis) or None for fields of the model")
        want = (num_envs, *np.shape(nominal[path]))
        if tuple(shapes[path].shape) != want:
            raise UserError(f"env.randomization: {source} returned '{path}' of shape {tuple(shapes[path].shape)} for "
                            f"{num_envs} keys; expected {want} (one value per environment)")
        size += int(np.prod(want[1:], dtype=np.int64)) * np.dtype(shapes[path].dtype).itemsize
    return tuple(batched_fields), size


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _field_path(path: tuple[Any, ...]) -> str | None:
    """"opt.gravity" for a field reached by attribute names alone (what `tree_replace` can address), else None (an
    entry of a tuple, such as a mesh's convex hull)."""
    names = [getattr(entry, "name", None) for entry in path]
    return None if any(name is None for name in names) else ".".join(names)


def _axes_by_field(in_axes: Any) -> dict[str, int | None]:
    axes: dict[str, int | None] = {}
    for path, axis in jax.tree_util.tree_flatten_with_path(in_axes, is_leaf=lambda node: node is None)[0]:
        name = _field_path(path)
        if name is None and axis is not None:
            raise ValueError(f"'{jax.tree_util.keystr(path)}' is batched but is not a field of the model")
        if name is not None:
            axes[name] = axis
    return axes


def _leaves_by_field(tree: Any) -> dict[str, Any]:
    pairs = ((_field_path(path), leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0])
    return {name: leaf for name, leaf in pairs if name is not None}


def models_key(key: jax.Array) -> jax.Array:
    """The key N models are drawn from, for `VecEnv.reset(key)`: `key` with MODELS_STREAM folded in."""
    return jax.random.fold_in(key, MODELS_STREAM)


def draw_models(function: Randomizer, model: Any, key: jax.Array, num_envs: int) -> ModelBatch:
    """The randomized fields of `num_envs` models drawn by `function` from `jax.random.split(key, num_envs)`."""
    batched, in_axes = function(model, jax.random.split(key, num_envs))
    leaves = _leaves_by_field(batched)
    return {path: leaves[path] for path, axis in _axes_by_field(in_axes).items() if axis is not None}


def field_of(model: Any, path: str) -> Any:
    """The value of field `path` ("body_mass", "opt.gravity") of an MJX or a native MuJoCo model."""
    value = model
    for name in path.split("."):
        value = getattr(value, name)
    return value


def with_model(env: Any, fields: dict[str, jax.Array]) -> Any:
    """A shallow copy of `env` whose MJX model has `fields` (one environment's values) in place of its own: the
    environment to call under `jax.vmap`, one per model. The shared `env` is never changed (programs compile in
    threads side by side)."""
    own = copy.copy(env)
    own._mjx_model = env.mjx_model.tree_replace(fields)
    return own
