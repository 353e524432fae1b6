"""Every rule a config must satisfy before anything compiles, with the nearest valid values in the message."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from rlfit.config.algorithms import config_module
from rlfit.errors import UserError
from rlfit.parallel.mesh import parse_devices
from rlfit.config.values import finite_float, parse_duration, parse_reward


class ConfigView(Protocol):
    """What the rules read of a config (`rlfit.config.schema.Config` is one): the algorithm's name and the
    sections, each a frozen dataclass (`getattr(config, 'ppo')` for an algorithm's)."""

    @property
    def algo(self) -> str: ...
    @property
    def env(self) -> Any: ...
    @property
    def network(self) -> Any: ...
    @property
    def run(self) -> Any: ...
    @property
    def algos(self) -> Mapping[str, Any]: ...


IMPLS = ("auto", "jax", "warp")
PRECISIONS = ("fp32", "bf16", "fp16")
ACTIVATIONS = ("swish", "relu", "tanh", "elu", "gelu")

OBSERVATIONS = ("state", "pixels")
OBSERVATION_SETS = ("full", "robot")
CHANNELS = ("rgb", "gray", "depth", "rgbd")
RENDERERS = ("auto", "jax", "warp")
ENCODERS = ("auto", "simple2dcnn", "simple3dcnn", "r3d18", "timesformer")
WANDB_MODES = ("off", "online", "offline", "auto")

_POSITIVE_INTS = ("env.episode_length", "env.action_repeat", "run.num_timesteps", "run.num_eval_envs",
                  "run.save_interval", "run.keep_checkpoints", "env.image_size", "env.frames",
                  "network.encoder_features")
_NON_NEGATIVE = ("run.eval_every", "run.early_stop_patience", "run.early_stop_min_delta", "run.wandb_timeout_s")
_CHOICES = {"env.impl": IMPLS, "run.precision": PRECISIONS, "env.observation": OBSERVATIONS, "env.channels": CHANNELS,
            "env.observation_set": OBSERVATION_SETS,
            "env.renderer": RENDERERS, "network.encoder": ENCODERS, "run.wandb": WANDB_MODES}


def check_config(config: ConfigView) -> None:
    """Raises UserError for the first rule `config` breaks: the generic ones, then the algorithm's."""
    check_seed(config.run.seed, "run.seed")
    check_finite(config)
    check_ranges(config, positive_ints=_POSITIVE_INTS, non_negative=_NON_NEGATIVE, choices=_CHOICES)
    if not config.env.name:
        raise UserError("env.name is empty; give a Playground environment name or module:factory")
    check_pixels(config)
    check_observation_set(config)
    check_randomization(config.env.randomization)
    parse_devices(config.run.devices)
    parse_duration(config.run.time_budget, "run.time_budget")
    if not config.run.stop_grace_s >= 0:
        raise UserError(f"run.stop_grace_s must be 0 or more seconds, got {config.run.stop_grace_s}; e.g. 25 (0: a stop "
                        "waits for the running iteration)")
    parse_reward(config.run.target_reward, "run.target_reward")
    config_module(config.algo).check(config)


def check_finite(config: ConfigView) -> None:
    """Rule: every float of every section is finite (a config built in code skips `to_type`, which refuses
    non-finite input from files, presets and --set)."""
    for section in ("env", *config.algos, "network", "run"):  # the order of `rlfit.config.schema.section_types`
        values = getattr(config, section)
        for field in dataclasses.fields(values):
            value = getattr(values, field.name)
            if isinstance(value, float):
                finite_float(f"{section}.{field.name}", value)


def check_ranges(config: ConfigView, positive_ints=(), non_negative=(), positive_floats=(), unit_interval=(),
                 choices=None) -> None:
    """Raises UserError for the first named key ('section.key') outside its range."""
    for name in positive_ints:
        if _get(config, name) <= 0:
            raise UserError(f"{name} must be a positive integer, got {_get(config, name)}")
    for name in non_negative:
        if _get(config, name) < 0:
            raise UserError(f"{name} must be zero or more, got {_get(config, name)}")
    for name in positive_floats:
        if not _get(config, name) > 0:
            raise UserError(f"{name} must be greater than 0, got {_get(config, name)}")
    for name in unit_interval:
        if not 0 < _get(config, name) <= 1:
            raise UserError(f"{name} must be in (0, 1], got {_get(config, name)}")
    for name, allowed in (choices or {}).items():
        if _get(config, name) not in allowed:
            raise UserError(f"{name} must be one of {', '.join(allowed)}, got '{_get(config, name)}'")


def check_layer_sizes(config: ConfigView, *names: str) -> None:
    """Rule: each named key ('section.key') is a non-empty list of positive layer sizes."""
    for name in names:
        sizes = _get(config, name)
        if not sizes or any(size <= 0 for size in sizes):
            raise UserError(f"{name} must be a non-empty list of positive layer sizes, got {list(sizes)}")


def check_pixels(config: ConfigView) -> None:
    """Rules of pixel observations: a sensible frame size and a pretrained file that exists and is safetensors,
    not a pickle (its arrays are checked against the encoder when it is loaded)."""
    env, network = config.env, config.network
    if env.observation != "pixels":
        return
    if not 8 <= env.image_size <= 512:
        raise UserError(f"env.image_size must be from 8 to 512 pixels, got {env.image_size}")
    if env.frames > 64:
        raise UserError(f"env.frames must be at most 64 (a 16-frame clip is long), got {env.frames}")
    if network.pretrained:
        from pathlib import Path

        from rlfit.config.weights_file import check_safetensors

        path = Path(network.pretrained).expanduser()
        if not path.is_file():
            raise UserError(f"network.pretrained: no file at {path}; give a safetensors file "
                            "(`rlfit convert-weights` makes one) or drop the setting to train from scratch")
        check_safetensors(path)  # a pickle or PyTorch file is refused before anything runs


def check_observation_set(config: ConfigView) -> None:
    """Rules of `env.observation_set: robot`: state observations, and the algorithm's policy reads the entry the set
    slices (`state`; a policy on `privileged_state` would see what the set drops)."""
    if config.env.observation_set != "robot":
        return
    if config.env.observation != "state":
        raise UserError("env.observation_set=robot slices the state the policy sees; with env.observation=pixels "
                        "the policy sees frames: use env.observation_set=full or env.observation=state")
    key = getattr(getattr(config, config.algo, None), "policy_obs_key", "state")
    if key != "state":
        raise UserError(f"env.observation_set=robot slices the observation entry 'state', but {config.algo}."
                        f"policy_obs_key is '{key}': set {config.algo}.policy_obs_key=state or env.observation_set=full")


def check_randomization(setting: str) -> None:
    """Rule: `env.randomization` is `auto`, `off` or `module:function` (imported and checked with the environment,
    `rlfit.envs.randomization`)."""
    module, colon, function = setting.partition(":")
    if setting not in ("auto", "off") and not (colon and module and function):
        raise UserError(f"env.randomization must be auto, off or module:function, got '{setting}'")


SEED_LIMIT = 2**32


def check_seed(seed: int, name: str) -> None:
    """Rule: a seed is a 32-bit unsigned integer (JAX's PRNGKey keeps 32 bits; larger seeds would alias)."""
    if not 0 <= seed < SEED_LIMIT:
        raise UserError(f"{name} must be an integer from 0 to {SEED_LIMIT - 1} (2^32 - 1), got {seed}")


def _get(config: ConfigView, dotted: str):
    section, key = dotted.split(".")
    return getattr(getattr(config, section), key)
