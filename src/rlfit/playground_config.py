"""MuJoCo Playground's published Brax settings for an environment (PPO's as a config layer in rlfit's keys)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


def playground_defaults(env_name: str, ppo_keys: Collection[str]) -> dict[str, dict[str, Any]]:
    """Playground's published Brax PPO settings for `env_name`, in rlfit's keys ({} if none)."""
    published = published_config(env_name, "brax_ppo_config")
    if not published:
        return {}
    layer: dict[str, dict[str, Any]] = {"ppo": {}, "network": {}, "run": {}, "env": {}}
    for key, value in published.items():
        if key in ppo_keys:
            layer["ppo"][key] = value
        elif key == "num_timesteps":
            layer["run"]["num_timesteps"] = value
        elif key in ("episode_length", "action_repeat"):
            layer["env"][key] = value
    network = published.get("network_factory") or {}
    for theirs, ours in (("policy_hidden_layer_sizes", "policy_hidden"), ("value_hidden_layer_sizes", "value_hidden"),
                         ("policy_obs_key", "policy_obs_key"), ("value_obs_key", "value_obs_key")):
        if theirs in network:
            layer["network"][ours] = network[theirs]
    if layer["ppo"].get("max_grad_norm") is None:
        layer["ppo"].pop("max_grad_norm", None)
    return layer


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
