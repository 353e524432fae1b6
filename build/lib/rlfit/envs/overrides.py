"""Checking `env.overrides` against the environment's own settings without building it: Playground's default
config (a ConfigDict, read in microseconds), a gridworld's GridConfig fields, or a `module:factory`'s keyword
arguments. An unknown key is one line naming it, a close match and the valid keys."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from rlfit.envs.names import check_playground_name
from rlfit.errors import UserError, did_you_mean

MAX_LISTED = 24
"""Valid keys named in the error at most (a locomotion config has more; the rest are counted)."""


def check_env_overrides(name: str, overrides: Mapping[str, Any]) -> None:
    """UserError when `overrides` names a key environment `name` does not have (or, with overrides, when `name` is
    not a Playground environment). Environments whose keys are known only once built (gymnax, XLand-MiniGrid, a
    factory taking **kwargs) are checked when they are loaded."""
    if not overrides:
        return
    valid = override_keys(name)
    if valid is None:
        return
    for key in overrides:
        if key not in valid:
            raise UserError(unknown_key_message(str(key), name, valid))


def override_keys(name: str) -> list[str] | None:
    """Every key `env.overrides` may set for environment `name` (nested Playground keys as `a.b`), or None when
    they are only known once the environment is built."""
    prefix = name.partition(":")[0]
    if prefix == "gridworld":
        from rlfit.envs.gridworld import GridConfig

        return list(GridConfig._fields)
    if prefix in ("gymnax", "xminigrid"):
        return None
    if ":" in name:
        return factory_keywords(name)
    from mujoco_playground import registry

    check_playground_name(name)
    return sorted(flattened_keys(registry.get_default_config(name)))


def flattened_keys(config: Any, prefix: str = "") -> Iterable[str]:
    """'a', 'b', 'b.c', ... of a nested ConfigDict (or mapping): every path `update_from_flattened_dict` takes."""
    for key, value in config.items():
        path = f"{prefix}{key}"
        yield path
        if hasattr(value, "items"):
            yield from flattened_keys(value, f"{path}.")


def factory_keywords(name: str) -> list[str] | None:
    """The keyword arguments of a `module:factory` environment, or None when it takes **kwargs or cannot be read
    (loading it says why)."""
    import importlib

    module_name, _, factory_name = name.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
        parameters = inspect.signature(factory).parameters.values()
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def unknown_key_message(key: str, name: str, valid: list[str]) -> str:
    """'env.overrides names 'ctrl_td' (did you mean ctrl_dt?), which CartpoleBalance does not have; valid keys:
    ...' with the top-level keys (nested ones as `section.<key>`), at most MAX_LISTED."""
    top = [k for k in valid if "." not in k]
    nested = {k.split(".")[0] for k in valid if "." in k}
    listed = [f"{k}.<key>" if k in nested else k for k in top]
    more = f" and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
    return (f"env.overrides names '{key}'{did_you_mean(key, valid)}, which {name} does not have; valid keys: "
            f"{', '.join(listed[:MAX_LISTED])}{more}")


def check_env_config(name: str, overrides: Mapping[str, Any]) -> None:
    """What loading environment `name` with `overrides` would refuse, found without building it: an unknown
    Playground name, an unknown override key, and a gridworld setting's value (its settings are checked in Python,
    nothing compiled)."""
    if ":" not in name:
        check_playground_name(name)
    check_env_overrides(name, overrides)
    if name.startswith("gridworld:"):
        from rlfit.envs import gridworld

        gridworld.load(name.partition(":")[2], overrides)
