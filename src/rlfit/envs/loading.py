"""Find and build an environment: a Playground registry name, a family-prefixed name (`gymnax:<name>`,
`xminigrid:<name>`, `gridworld:<variant>`) or a user's `module:factory`.

The environment contract is Playground's `MjxEnv`: `reset(key) -> State`, `step(State, action) -> State`,
`action_size: int`, `observation_size: int | dict[str, tuple]`, where `State` has `obs`, `reward`, `done`
(1.0 at a terminal state), `metrics`, `info`. Actions are in [-1, 1]. Discrete environments have an integer
`num_actions` instead of `action_size`, and `step` takes one int32 action in [0, num_actions) (see
`rlfit.envs.action_space`). `step` never auto-resets: `VecEnv` resets finished environments and applies the time
limit.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import jax

from rlfit.config.schema import EnvConfig
from rlfit.envs.user_code import import_callable
from rlfit.errors import UserError
from rlfit.envs.names import check_playground_name

REQUIRED_ATTRIBUTES = ("reset", "step", "observation_size")
ACTION_ATTRIBUTES = ("action_size", "num_actions")
"""A `module:factory` environment needs REQUIRED_ATTRIBUTES and one of ACTION_ATTRIBUTES."""

FAMILIES = {"gymnax": "gymnax", "xminigrid": "XLand-MiniGrid", "gridworld": "gridworld"}
"""Name prefix -> the family of environments it names (`<prefix>:<name>`)."""


def choose_impl(requested: str, backend: str | None = None) -> str:
    """'auto' -> 'jax' on CPU (warp is far slower there), 'warp' on GPU when warp is installed; 'warp' asked for
    where JAX runs on no GPU is refused (MuJoCo Warp needs a CUDA GPU; on a CPU MJX fails inside its step)."""
    backend = backend or jax.default_backend()
    if requested == "warp" and backend == "cpu":
        raise UserError("env.impl=warp needs a CUDA GPU (MuJoCo Warp) and JAX runs on the CPU here: "
                        "use env.impl=jax or env.impl=auto")
    if requested != "auto":
        return requested
    if backend == "cpu":
        return "jax"
    try:
        import warp  # noqa: F401
    except ImportError:
        return "jax"
    return "warp"


def observation_store_key(config: EnvConfig, env: Any, backend: str | None = None) -> str | None:
    """What the observation of `env` (loaded from `config` for `backend`) depends on besides the installed packages,
    for rlfit's program store (`rlfit.envs.vec_env.observation_example`): the environment's settings, its
    implementation and its MuJoCo model's digest. None for a name with a `:` (a family's, whose loading is cheap,
    or a user's factory, whose code the store's digest cannot see)."""
    if ":" in config.name:
        return None
    from rlfit.envs.fingerprint import model_digest

    settings = dataclasses.asdict(dataclasses.replace(config, impl=choose_impl(config.impl, backend)))
    return f"observation of {json.dumps(settings, sort_keys=True, default=str)}, model {model_digest(env)}"


def load_env(config: EnvConfig, backend: str | None = None) -> Any:
    """Builds the environment `config.name` names; raises UserError when it cannot."""
    from rlfit.envs.pixels import wrap_pixels

    prefix, _, name = config.name.partition(":")
    if prefix in FAMILIES:
        if config.observation == "pixels":
            raise UserError(f"env.observation: pixels needs a MuJoCo environment; '{config.name}' is a "
                            f"{FAMILIES[prefix]} environment: use env.observation: state")
        if config.observation_set != "full":
            raise UserError(f"env.observation_set={config.observation_set} needs a MuJoCo Playground environment; "
                            f"'{config.name}' is a {FAMILIES[prefix]} environment: use env.observation_set=full")
        return _load_family(prefix, name, config.overrides)
    if config.observation_set != "full":
        from rlfit.envs.observation_set import apply_observation_set

        if ":" in config.name:  # a user's factory: its code is not in the program store's digest, so nothing is kept
            env, store_key = _load_factory(config), None
        else:
            impl = choose_impl(config.impl, backend)
            overrides = sorted(config.overrides.items())
            env, store_key = _load_playground(config, impl), f"{config.name} ({impl}), overrides {overrides!r}"
        return wrap_pixels(apply_observation_set(env, config.observation_set, config.name, store_key), config)
    if ":" in config.name:
        return wrap_pixels(_load_factory(config), config)
    return wrap_pixels(_load_playground(config, choose_impl(config.impl, backend)), config)


def _load_playground(config: EnvConfig, impl: str) -> Any:
    from mujoco_playground import registry

    check_playground_name(config.name)
    from rlfit.envs.assets import prepare_assets
    from rlfit.envs.overrides import check_env_overrides

    check_env_overrides(config.name, config.overrides)
    prepare_assets(config)
    overrides = {"impl": impl, **dict(config.overrides)}
    try:
        return registry.load(config.name, config_overrides=overrides)
    except KeyError as error:  # a path check_env_overrides let through (a list index): Playground's first line
        problem = str(error.args[0] if error.args else error).split(". Other fields")[0]
        raise UserError(f"env.overrides: {problem}; see {config.name}'s config") from None


def _load_factory(config: EnvConfig) -> Any:
    factory = import_callable(config.name, f"environment '{config.name}'", kind="callable")
    env = factory(**dict(config.overrides))
    missing = [name for name in REQUIRED_ATTRIBUTES if not hasattr(env, name)]
    if not any(hasattr(env, name) for name in ACTION_ATTRIBUTES):
        missing.append("action_size (or num_actions for discrete actions)")
    if missing:
        raise UserError(f"environment '{config.name}' lacks {', '.join(missing)}; it must follow Playground's "
                        "MjxEnv API (reset, step, action_size or num_actions, observation_size)")
    return env


def _load_family(prefix: str, name: str, overrides: Mapping[str, Any]) -> Any:
    if prefix == "gymnax":
        from rlfit.envs.adapters import load_gymnax

        return load_gymnax(name, overrides)
    if prefix == "xminigrid":
        from rlfit.envs.adapters import load_xminigrid

        return load_xminigrid(name, overrides)
    from rlfit.envs import gridworld

    return gridworld.load(name, overrides)


def family_names(prefix: str) -> tuple[str, ...]:
    """Every `<prefix>:<name>` of one family in FAMILIES; UserError when its package is not installed."""
    if prefix == "gymnax":
        from rlfit.envs.adapters import gymnax_names as names
    elif prefix == "xminigrid":
        from rlfit.envs.adapters import xminigrid_names as names
    else:
        from rlfit.envs.gridworld import NAMES

        def names() -> tuple[str, ...]:
            return tuple(NAMES)
    return tuple(f"{prefix}:{name}" for name in names())


def env_label(name: str) -> str:
    """A file-name-safe label for an environment name (module:factory -> module-factory)."""
    return name.replace(":", "-").replace(os.sep, "-").replace(".", "-")
