"""Frozen, typed run configuration: sections `env`, `ppo`, `network`, `run`.

A config is built once from layers, lowest first:

    rlfit defaults < Playground's published per-environment PPO config < preset < YAML file < --set

and validated before anything compiles. Nothing downstream mutates it; derived sizes live in
`rlfit.plan`.
"""

from __future__ import annotations

import dataclasses
import itertools
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlfit.config_values import FrozenDict, plain, to_type
from rlfit.errors import UserError, did_you_mean
from rlfit.playground_config import playground_defaults

DEFAULT_ENV = "CartpoleBalance"


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to train and how to build it."""

    name: str = DEFAULT_ENV
    """Playground registry name (e.g. `CartpoleBalance`) or `module:factory` for your own environment."""
    impl: str = "auto"
    """MJX implementation: `auto` (jax on CPU, warp on GPU), `jax` or `warp`."""
    episode_length: int = 1000
    """Steps before an episode is truncated (a time limit, not a terminal state)."""
    action_repeat: int = 1
    """Environment steps per policy decision."""
    menagerie_path: str = ""
    """An existing MuJoCo Menagerie folder for robot assets (else `RLFIT_MENAGERIE_PATH`, else Playground's)."""
    overrides: Mapping[str, Any] = field(default_factory=FrozenDict)
    """Passed to Playground as `config_overrides` (e.g. `{ctrl_dt: 0.02}`)."""


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; names follow Brax's `ppo.train`."""

    num_envs: int = 2048
    """Parallel training environments."""
    batch_size: int = 1024
    """Sequences of `unroll_length` steps per minibatch."""
    num_minibatches: int = 32
    """Minibatches per epoch; one iteration collects `batch_size * num_minibatches` sequences."""
    unroll_length: int = 30
    """Steps per collected sequence (GAE horizon before bootstrapping)."""
    num_updates_per_batch: int = 16
    """Epochs over each collected batch."""
    learning_rate: float = 1e-3
    """Adam step size."""
    entropy_cost: float = 1e-2
    """Weight of the entropy bonus."""
    discounting: float = 0.995
    """Discount factor gamma."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip."""
    reward_scaling: float = 10.0
    """Rewards are multiplied by this before the loss."""
    max_grad_norm: float = 0.0
    """Global gradient-norm clip; 0 disables it."""
    normalize_observations: bool = True
    """Running mean/std observation normalization."""
    normalize_advantage: bool = True
    """Standardize advantages per minibatch."""


@dataclass(frozen=True)
class NetworkConfig:
    """Policy and value MLPs."""

    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Hidden layer sizes of the policy."""
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    """Hidden layer sizes of the value function."""
    activation: str = "swish"
    """Hidden activation: swish, relu, tanh, elu, gelu (tanh approximation)."""
    policy_obs_key: str = "state"
    """For dict observations: the entry the policy sees."""
    value_obs_key: str = "privileged_state"
    """For dict observations: the entry the value function sees (falls back to `policy_obs_key`)."""


@dataclass(frozen=True)
class RunConfig:
    """Length, evaluation, output and precision of a run."""

    num_timesteps: int = 5_000_000
    """Total environment steps to train for (rounded up to whole iterations)."""
    seed: int = 0
    """Seed for parameters, environments and sampling."""
    eval_every: int = 10
    """Evaluate every this many iterations (and at the end); 0 evaluates only at the end."""
    num_eval_envs: int = 128
    """Environments in each deterministic evaluation."""
    precision: str = "fp32"
    """Network compute precision: fp32, bf16, or fp16 with dynamic loss scaling (params and optimizer stay fp32)."""
    save_interval: int = 50
    """Checkpoint every this many iterations (and at the end)."""
    keep_checkpoints: int = 3
    """How many recent checkpoints to keep (the best by eval reward is kept too)."""
    continue_on_save_error: bool = False
    """Keep training when a checkpoint cannot be written (default: stop)."""
    fit_to_device: bool = False
    """Let the planner size num_envs and the batch to this device's memory (as `--num-envs auto`)."""
    oom_backoff: bool = True
    """On out-of-memory, halve num_envs, recompile and continue (false: stop with exit code 5)."""


@dataclass(frozen=True)
class Config:
    """The whole resolved configuration of one run."""

    env: EnvConfig = field(default_factory=EnvConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict (tuples as lists), as written to `config.yaml`."""
        return plain(dataclasses.asdict(self))

    def replace(self, **sections: Mapping[str, Any]) -> Config:
        """A new config with some keys of some sections replaced, validated again."""
        updates = {f"{s}.{k}": v for s, keys in sections.items() for k, v in keys.items()}
        return from_layers([self.to_dict(), _nest(updates)])


SECTIONS: dict[str, type] = {"env": EnvConfig, "ppo": PPOConfig, "network": NetworkConfig, "run": RunConfig}
PPO_KEYS = frozenset(f.name for f in dataclasses.fields(PPOConfig))

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    # Minutes on a 2-core CPU: fewer environments, shorter run, same algorithm.
    "quick": {
        "ppo": {"num_envs": 512, "batch_size": 256, "num_minibatches": 16, "unroll_length": 30,
                "num_updates_per_batch": 8},
        "network": {"policy_hidden": (32, 32, 32, 32), "value_hidden": (64, 64)},
        "run": {"num_timesteps": 10_000_000, "eval_every": 5, "num_eval_envs": 32},
    },
    # Playground's published settings for the environment, as Brax users run them.
    "default": {},
    # A longer run with more parallel environments, for a large GPU.
    "production": {
        "ppo": {"num_envs": 8192, "batch_size": 2048, "num_minibatches": 32},
        "run": {"eval_every": 20},
    },
    # The guides' G1 humanoid recipe: [256]*3 networks, lr 3e-4, 1024 envs on a 16 GB card.
    "g1": {
        "ppo": {"num_envs": 1024, "batch_size": 256, "num_minibatches": 32, "unroll_length": 20,
                "num_updates_per_batch": 4, "learning_rate": 3e-4, "entropy_cost": 5e-3,
                "discounting": 0.97, "clipping_epsilon": 0.2, "reward_scaling": 1.0, "max_grad_norm": 1.0},
        "network": {"policy_hidden": (256, 256, 256), "value_hidden": (256, 256, 256)},
        "run": {"num_timesteps": 1000 * 256 * 32 * 20, "save_interval": 50, "eval_every": 50,
                "num_eval_envs": 128, "fit_to_device": True},
    },
    # One iteration of anything on a 2-core CPU (checks that the pipeline works, learns nothing).
    "smoke": {
        "ppo": {"num_envs": 8, "batch_size": 8, "num_minibatches": 2, "unroll_length": 4,
                "num_updates_per_batch": 1},
        "network": {"policy_hidden": (32, 32), "value_hidden": (32, 32)},
        "env": {"episode_length": 100},
        "run": {"num_timesteps": 64, "eval_every": 0, "num_eval_envs": 4},
    },
}


def resolve(
    env_name: str,
    preset: str = "default",
    config_file: str | Path | None = None,
    overrides: Sequence[str] = (),
) -> Config:
    """The config for `env_name`: defaults < Playground's < preset < file < `key=value` overrides."""
    if preset not in PRESETS:
        raise UserError(f"unknown preset '{preset}'{did_you_mean(preset, PRESETS)}; "
                        f"choose one of: {', '.join(PRESETS)}")
    layers: list[Mapping[str, Any]] = [{"env": {"name": env_name}}, playground_defaults(env_name, PPO_KEYS),
                                       PRESETS[preset]]
    if config_file is not None:
        layers.append(read_yaml(config_file))
    layers.append(_nest(dict(parse_override(item) for item in overrides)))
    config = from_layers(layers)
    if config.env.name != env_name:
        raise UserError(f"env.name is '{config.env.name}' in the config but '{env_name}' on the command line; "
                        "drop one of them")
    return config


def from_layers(layers: Sequence[Mapping[str, Any]]) -> Config:
    """Merges nested dicts (later wins), checks every key and type, validates, freezes."""
    merged: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for layer in layers:
        for section, keys in layer.items():
            if section not in SECTIONS:
                raise UserError(f"unknown config section '{section}'{did_you_mean(section, SECTIONS)}; "
                                f"sections are {', '.join(SECTIONS)}")
            if not isinstance(keys, Mapping):
                raise UserError(f"config section '{section}' must be a mapping of keys, got {keys!r}")
            for key, value in keys.items():
                merged[section][key] = _coerce(section, key, value)
    config = Config(**{name: SECTIONS[name](**merged[name]) for name in SECTIONS})
    validate(config)
    return config


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Reads a YAML config file; a missing or malformed file is a one-line UserError."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise UserError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise UserError(f"malformed YAML in {path}{where}: {problem}; fix the file or pass keys with --set") from None
    if data is None:
        raise UserError(f"config file {path} is empty; give it sections (env, ppo, network, run) or drop --config")
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of sections (env, ppo, network, run)")
    return data


def parse_override(item: str) -> tuple[str, Any]:
    """'ppo.learning_rate=3e-4' -> ('ppo.learning_rate', 0.0003), value parsed as YAML."""
    if "=" not in item:
        raise UserError(f"--set expects key=value (e.g. ppo.learning_rate=3e-4), got '{item}'")
    key, text = item.split("=", 1)
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    return key.strip(), value


def all_keys() -> list[str]:
    """Every 'section.key' the config accepts."""
    return [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


def field_docs() -> dict[str, str]:
    """'section.key' -> its one-line description (from the attribute docstrings above)."""
    import ast
    import inspect

    docs: dict[str, str] = {}
    for section, cls in SECTIONS.items():
        body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
        for node, after in itertools.pairwise(body):
            if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr):
                docs[f"{section}.{node.target.id}"] = str(after.value.value)  # type: ignore[union-attr]
    return docs


def validate(config: Config) -> None:
    """Checks every value and every rule the trainer needs; raises a UserError naming the fix."""
    from rlfit.constraints import check_config

    check_config(config)


def _coerce(section: str, key: str, value: Any) -> Any:
    cls = SECTIONS[section]
    hints = typing.get_type_hints(cls)
    if key not in hints:
        known = [f"{section}.{k}" for k in hints]
        hint = did_you_mean(f"{section}.{key}", all_keys()) or did_you_mean(f"{section}.{key}", known)
        raise UserError(f"unknown config key '{section}.{key}'{hint}; see `rlfit keys` for the list")
    return to_type(f"{section}.{key}", hints[key], value)


def _nest(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    nested: dict[str, dict[str, Any]] = {}
    for dotted, value in flat.items():
        section, _, key = dotted.partition(".")
        if not key:
            raise UserError(f"config key '{dotted}' needs a section, e.g. ppo.{dotted}{did_you_mean(dotted, all_keys())}")
        nested.setdefault(section, {})[key] = value
    return nested
