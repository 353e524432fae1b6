"""Frozen, typed run configuration: `algo` (a registered algorithm: ppo, sac, fasttd3, ...), sections `env`, the
algorithm's (named like it: `ppo`, `sac`, `fasttd3`),
`network` (the camera-frame encoder, for every algorithm) and `run`. PPO's network settings, once in `network`,
are in `ppo`; the old names are still read (`rlfit.config.moved_keys`).

A config is built once from layers, lowest first, and validated before anything compiles:

    rlfit defaults < Playground's published per-environment settings for the algorithm < preset < YAML file
        < --set

The algorithm's section, presets and published settings come from its folder (`rlfit.config.algorithms`).

and validated before anything compiles. Nothing downstream mutates it; derived sizes live in
`rlfit.planning.plan`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlfit.config.moved_keys import announce, rewrite_layers
from rlfit.config.rules import check_config
from rlfit.config.values import FrozenDict, plain, to_type
from rlfit.errors import UserError, did_you_mean
from rlfit.config.algorithms import ALGORITHMS, DEFAULT_ALGORITHM, config_module

DEFAULT_ENV = "CartpoleBalance"


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to train and how to build it."""

    name: str = DEFAULT_ENV
    """Playground registry name (e.g. `CartpoleBalance`), `gridworld:<variant>`, `gymnax:<name>`,
    `xminigrid:<name>`, or `module:factory` for your own environment."""
    impl: str = "auto"
    """MJX implementation: `auto` (jax on CPU, warp on GPU), `jax` or `warp`."""
    episode_length: int = 1000
    """Steps before an episode is truncated (a time limit, not a terminal state); gymnax and XLand-MiniGrid
    environments also stop at their own limit, if shorter."""
    action_repeat: int = 1
    """Environment steps per policy decision."""
    randomization: str = "auto"
    """Domain randomization (one MuJoCo model per environment, drawn once from the run's seed): `auto` (MuJoCo
    Playground's randomizer where the environment has one, as Playground trains its robots for hardware; else off,
    with a note), `off` (the nominal model), or `module:function` (your own, with Playground's signature
    `(mjx.Model, keys[num_envs]) -> (batched model, in_axes)`). Evaluation then also reports returns on freshly drawn
    models (`eval/randomized/...`), and `rlfit transfer-check` runs the exported policy in native MuJoCo on them."""
    menagerie_path: str = ""
    """An existing MuJoCo Menagerie folder for robot assets (else `RLFIT_MENAGERIE_PATH`, else Playground's)."""
    overrides: Mapping[str, Any] = field(default_factory=FrozenDict)
    """Passed to Playground as `config_overrides` (e.g. `{ctrl_dt: 0.02}`); for the other families, their own
    parameters (gridworld: `GridConfig` fields; gymnax and XLand-MiniGrid: `EnvParams` fields)."""
    observation: str = "state"
    """What the policy sees: `state` (the environment's vector) or `pixels` (camera frames; the state stays
    available to a critic as privileged input)."""
    camera: str = ""
    """With pixels: a camera named in the model, or empty for its first camera (DM Control's default; the free view
    of the whole model when it has none)."""
    image_size: int = 64
    """With pixels: frame height and width in pixels."""
    channels: str = "rgb"
    """With pixels: `rgb`, `gray`, `depth` or `rgbd` (every channel uint8; depth quantized, see the docs' pixels page)."""
    frames: int = 3
    """With pixels: how many recent frames the policy sees (1 an image, 3 a frame stack, 8 or 16 a clip)."""
    renderer: str = "auto"
    """With pixels: `jax` (MJX ray casting, any device), `warp` (MuJoCo Warp, CUDA GPU), `auto` (jax)."""
    observation_set: str = "full"
    """What the policy observes: `full` (the environment's own observation) or `robot` (only what a robot measures:
    the entries that need a state estimator, such as G1's pelvis linear velocity, are dropped from the policy's
    `state`, derived from the environment's own observation code; the critic keeps the privileged state). `robot`
    takes a Playground environment with a privileged observation (the locomotion ones); see the docs' deployment
    page."""


@dataclass(frozen=True)
class NetworkConfig:
    """The camera-frame encoder, shared by every algorithm (PPO's policy and value networks are in `ppo`)."""

    encoder: str = "auto"
    """With pixel observations: `simple2dcnn`, `simple3dcnn`, `r3d18`, `timesformer` or `auto` (by device)."""
    encoder_features: int = 50
    """With pixel observations: the width of the encoder's output features."""
    pretrained: str = ""
    """A safetensors file of encoder weights (`rlfit convert-weights` makes one), or empty to train from scratch."""
    freeze_encoder: bool = False
    """Keep the encoder's weights fixed (sensible with `pretrained`)."""


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
    stop_grace_s: float = 25.0
    """A stop request (SIGTERM, SIGINT, `time_budget`) leaves a checkpoint within this many seconds, even when an
    iteration takes longer: the last finished iteration, saved from a host copy kept when iterations outlast it
    (`rlfit.run.stop_grace`). Schedulers kill about 30 s after SIGTERM. 0: wait for the running iteration."""
    fit_to_device: bool = False
    """Let the planner size the run to this device's memory, as `--num-envs auto` (PPO: num_envs and the batch;
    SAC, FastTD3: the replay buffer)."""
    oom_backoff: bool = True
    """On out-of-memory, halve num_envs, recompile and continue (false: stop with exit code 5)."""
    checkpoint_replay: bool = True
    """Checkpoints hold the filled part of an off-policy algorithm's replay buffer, so a resumed run is the same
    run; false leaves it out (for huge buffers): resume then collects it again and the run is no longer bit-exact."""
    time_budget: str = ""
    """Stop cleanly, with a checkpoint, before this much training time has passed in this session ('20m',
    '11h30m', '90s'; empty: no budget). The next iteration is started only if the measured iteration time, a
    checkpoint and a margin still fit."""
    early_stop_patience: int = 0
    """Stop after this many evaluations in a row without the eval reward improving on the best by more than
    `early_stop_min_delta` (0: never)."""
    early_stop_min_delta: float = 0.0
    """The improvement of the eval reward that counts for `early_stop_patience`."""
    target_reward: str = ""
    """Stop once an evaluation reaches this reward (a number; empty: never)."""
    wandb: str = "off"
    """Weights & Biases: off, online, offline, or auto. auto and online go online only when W&B answers an
    authenticated check within `wandb_timeout_s`, else log offline with a line naming the cause and how to
    `wandb sync`; online without a key is refused. Needs `pip install rlfit[wandb]`."""
    wandb_project: str = "rlfit"
    """The W&B project."""
    wandb_entity: str = ""
    """The W&B entity (team or user; empty: the key's default)."""
    wandb_group: str = ""
    """The W&B group (an experiment sets it to the experiment's name)."""
    wandb_timeout_s: float = 10.0
    """How long W&B (auto or online) may wait on the network, the check and the online start together, before the
    run logs offline instead."""
    devices: str = "auto"
    """How many of this process's devices train the run, data parallel (`rlfit.parallel.mesh`): auto (all of them) or a
    number. Sizes stay global: `num_envs` is the total, split evenly over the devices."""


HOST_LOOP_FIELDS = frozenset({
    "num_timesteps", "eval_every", "save_interval", "keep_checkpoints", "continue_on_save_error", "fit_to_device",
    "oom_backoff", "checkpoint_replay", "time_budget", "stop_grace_s", "early_stop_patience", "early_stop_min_delta",
    "target_reward", "wandb", "wandb_project", "wandb_entity", "wandb_group", "wandb_timeout_s"})
"""`run` settings that only the host loop reads (how long, when to evaluate or save, where to log): rlfit's own
algorithms never trace them into a program (what they size goes through the plan, whose sizes are part of every
program's key), so a run that changes only these reuses stored programs (`rlfit.hardware.program_store`).
tests/run/test_program_store.py checks it for every shipped algorithm."""


@dataclass(frozen=True)
class Config:
    """The whole resolved configuration of one run; `config.ppo` / `config.sac` is an algorithm's section."""

    algo: str = DEFAULT_ALGORITHM
    """The learning algorithm, by its registered name (`--algo`); its section holds its settings."""
    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    run: RunConfig = field(default_factory=RunConfig)
    algos: Mapping[str, Any] = field(default_factory=lambda: FrozenDict(default_sections()))
    """Every registered algorithm's section (name -> its frozen dataclass), defaults for those not chosen."""

    def __getattr__(self, name: str) -> Any:
        algos = self.__dict__.get("algos") or {}
        if name in algos:
            return algos[name]
        raise AttributeError(f"'Config' has no attribute '{name}'")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), as written to `config.yaml`: `algo`, then the sections (the
        chosen algorithm's only)."""
        return {"algo": self.algo, "env": plain(dataclasses.asdict(self.env)),
                self.algo: plain(dataclasses.asdict(self.algos[self.algo])),
                "network": plain(dataclasses.asdict(self.network)), "run": plain(dataclasses.asdict(self.run))}

    def program_settings(self) -> dict[str, Any]:
        """`to_dict_without_seed()` less `HOST_LOOP_FIELDS`: what rlfit's own compiled programs are built from."""
        described = self.to_dict_without_seed()
        described["run"] = {k: v for k, v in described["run"].items() if k not in HOST_LOOP_FIELDS}
        return described

    def to_dict_without_seed(self) -> dict[str, Any]:
        """`to_dict()` less `run.seed`: what a compiled program depends on (the seed only enters its inputs)."""
        described = self.to_dict()
        described["run"] = {k: v for k, v in described["run"].items() if k != "seed"}
        return described

    def replace(self, **sections: Mapping[str, Any]) -> Config:
        """A new config with some keys of some sections replaced, validated again."""
        updates = {f"{s}.{k}": v for s, keys in sections.items() for k, v in keys.items()}
        return from_layers([self.to_dict(), _nest(updates)])


FIXED_SECTIONS: dict[str, type] = {"env": EnvConfig, "network": NetworkConfig, "run": RunConfig}


def section_types() -> dict[str, type]:
    """Every section name -> its dataclass: env, each algorithm's, network, run."""
    return {"env": EnvConfig, **{name: config_module(name).SECTION for name in ALGORITHMS},
            "network": NetworkConfig, "run": RunConfig}


def default_sections() -> dict[str, Any]:
    return {name: config_module(name).SECTION() for name in ALGORITHMS}


def preset_names() -> list[str]:
    """Every preset of any algorithm, in order of first appearance."""
    return list(dict.fromkeys(name for algo in ALGORITHMS for name in config_module(algo).PRESETS))


def resolve(
    env_name: str,
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides: Sequence[str] = (),
) -> Config:
    """The config for `env_name`: defaults < Playground's < preset < file < `key=value` overrides.

    The algorithm (`algo`) is the overrides', else the file's, else ppo; it picks the preset and the
    published layer. The preset is `preset`, else the file's `preset:`, else `default` (`rlfit train` chooses one
    for the device first: `rlfit.planning.preset`).
    """
    file_layer = read_yaml(config_file) if config_file is not None else {}
    preset = preset or file_preset(file_layer, config_file) or "default"
    file_layer = {key: value for key, value in file_layer.items() if key != "preset"}
    algo = chosen_algo(file_layer, overrides)
    presets = config_module(algo).PRESETS
    if preset not in presets:
        hint = did_you_mean(preset, presets)
        elsewhere = [a for a in ALGORITHMS if preset in config_module(a).PRESETS]
        hint = hint or (f" (it is a preset of algo {', '.join(elsewhere)})" if elsewhere else "")
        raise UserError(f"unknown preset '{preset}' for algo {algo}{hint}; choose one of: {', '.join(presets)}")
    override_layer = _nest(dict(parse_override(item) for item in overrides))
    layers: list[Mapping[str, Any]] = [{"algo": algo, "env": {"name": env_name}},
                                       config_module(algo).published(env_name), presets[preset], file_layer,
                                       override_layer]
    config = from_layers(layers)
    if config.env.name != env_name:
        raise UserError(f"env.name is '{config.env.name}' in the config but '{env_name}' on the command line; "
                        "drop one of them")
    return config


def chosen_algo(file_layer: Mapping[str, Any], overrides: Sequence[str] = ()) -> str:
    """The algorithm a config will train: the last `algo=` override, else the file's `algo`, else ppo."""
    algo = DEFAULT_ALGORITHM
    algo = file_layer.get("algo", algo)
    for item in overrides:
        key, value = parse_override(item)
        if key == "algo":
            algo = value
    check_algo(algo)
    return algo


def file_preset(file_layer: Mapping[str, Any], config_file: str | Path | None) -> str | None:
    """The preset a config file names (`preset: quick` at its top level), or None."""
    named = file_layer.get("preset")
    if named is not None and not isinstance(named, str):
        raise UserError(f"preset in {config_file} must be a preset's name (e.g. preset: quick), got {named!r}")
    return named


def check_algo(algo: Any) -> None:
    if algo not in ALGORITHMS:
        raise UserError(f"unknown algo '{algo}'{did_you_mean(str(algo), ALGORITHMS)}; choose one of: "
                        f"{', '.join(ALGORITHMS)}")


def from_layers(layers: Sequence[Mapping[str, Any]]) -> Config:
    """Merges nested dicts (later wins), checks every key and type, validates, freezes.

    A layer may hold `algo` (a name) besides sections; keys of another algorithm's section are refused. Keys under
    their old names (`rlfit.config.moved_keys`) are moved to their new section first, with one note per process.
    """
    types = section_types()
    merged: dict[str, dict[str, Any]] = {name: {} for name in types}
    algo = DEFAULT_ALGORITHM
    for layer in layers:
        if "algo" in layer:
            check_algo(layer["algo"])
            algo = layer["algo"]
    layers, moved = rewrite_layers(layers, algo)
    for layer in layers:
        for section, keys in layer.items():
            if section == "algo":
                check_algo(keys)
                algo = keys
                continue
            if section not in types:
                raise UserError(f"unknown config section '{section}'{did_you_mean(section, types)}; "
                                f"sections are algo, {', '.join(types)}")
            if keys is None:
                continue
            if not isinstance(keys, Mapping):
                raise UserError(f"config section '{section}' must be a mapping of keys, got {keys!r}")
            for key, value in keys.items():
                merged[section][key] = _coerce(types, section, key, value)
    for other in ALGORITHMS:
        if other != algo and merged[other]:
            key = next(iter(merged[other]))
            raise UserError(f"{other}.{key} is a setting of algo {other}, but this run's algo is {algo}; "
                            f"add --algo {other} or drop the {other} settings")
    algos = FrozenDict({name: types[name](**merged[name]) for name in ALGORITHMS})
    config = Config(algo, *(types[name](**merged[name]) for name in FIXED_SECTIONS), algos=algos)
    validate(config)
    announce(moved)
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
        raise UserError(f"config file {path} is empty; give it sections (env, ppo or sac, network, run) or drop --config")
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of sections (algo, env, ppo or sac, network, run)")
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
    return [f"{s}.{f.name}" for s, cls in section_types().items() for f in dataclasses.fields(cls)]


def validate(config: Config) -> None:
    """Checks every value and every rule the trainer needs; raises a UserError naming the fix."""
    check_config(config)


def _coerce(types: Mapping[str, type], section: str, key: str, value: Any) -> Any:
    cls = types[section]
    hints = typing.get_type_hints(cls)
    if key not in hints:
        known = [f"{section}.{k}" for k in hints]
        hint = did_you_mean(f"{section}.{key}", all_keys()) or did_you_mean(f"{section}.{key}", known)
        raise UserError(f"unknown config key '{section}.{key}'{hint}; see `rlfit keys` for the list")
    return to_type(f"{section}.{key}", hints[key], value)


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        if dotted == "algo":
            nested["algo"] = value
            continue
        section, _, key = dotted.partition(".")
        if not key:
            raise UserError(f"config key '{dotted}' needs a section, e.g. ppo.{dotted}{did_you_mean(dotted, all_keys())}")
        nested.setdefault(section, {})[key] = value
    return nested
