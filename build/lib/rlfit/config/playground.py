"""MuJoCo Playground's published Brax settings for an environment (each algorithm's config turns them into a layer)."""

from __future__ import annotations

from typing import Any


def published_config(env_name: str, function: str) -> dict[str, Any]:
    """Playground's `<suite>_params.<function>(env_name)` as a dict ({} where it publishes none)."""
    if ":" in env_name:
        return {}
    try:
        from mujoco_playground._src import dm_control_suite, locomotion, manipulation
        from mujoco_playground.config import (
            dm_control_suite_params,
            locomotion_params,
            manipulation_params,
        )
    except ImportError:  # pragma: no cover - playground is a dependency
        return {}
    for suite, params in ((dm_control_suite, dm_control_suite_params), (locomotion, locomotion_params),
                          (manipulation, manipulation_params)):
        if env_name in suite.ALL_ENVS:
            if not hasattr(params, function):
                return {}
            try:
                return getattr(params, function)(env_name, "jax").to_dict()
            except Exception:  # noqa: BLE001 - a published config is a convenience, not a requirement
                return {}
    return {}
