"""An experiment's manifest: one YAML file naming a base config, variants, seeds, evaluation suites, the
measures to compare and stages. Read and validated whole before anything runs.

    name: cartpole_study
    env: CartpoleBalance          # the base: environment, algorithm, preset, overrides
    algo: ppo
    preset: quick
    set: {run.eval_every: 5}
    variants:                     # a list of {name, set} ...
      - {name: lr-1e-3, set: {ppo.learning_rate: 1.0e-3}}
      - {name: lr-3e-4, set: {ppo.learning_rate: 3.0e-4}}
    # grid: {ppo.learning_rate: [1.0e-3, 3.0e-4]}   # ... or a grid over keys (one variant per combination)
    seeds: 8                      # a count (0..7) or a list
    seeds_per_program: auto       # seeds trained in one compiled program: auto (planned per device) or a count
    suites:                       # evaluations of every trained policy on shifted conditions
      slow-control: {set: {env.overrides: {ctrl_dt: 0.02}}, episodes: 32}
    measures: [final_eval_reward] # summary.json fields compared between variants (suites are added)
    correlations: [{x: ppo.learning_rate, y: final_eval_reward}]
    ratios:                       # mean(numerator) / mean(denominator) per variant, both measures as compared
      - {numerator: suite/slow-control, denominator: final_eval_reward}
    stages:                       # --stage NAME: its `set` (and `seeds`, `episodes`) apply over the base
      gpu-test: {set: {run.num_timesteps: 2000}, seeds: 2, episodes: 2}
      mini: {set: {run.num_timesteps: 100000}}
      full: {}
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlfit.errors import UserError, did_you_mean

TOP_KEYS = ("name", "env", "algo", "preset", "set", "variants", "grid", "seeds", "seeds_per_program", "suites",
            "measures", "correlations", "ratios", "stages")
VARIANT_KEYS = ("name", "set")
SUITE_KEYS = ("set", "episodes")
STAGE_KEYS = ("set", "seeds", "seeds_per_program", "episodes")
CORRELATION_KEYS = ("x", "y")
RATIO_KEYS = ("numerator", "denominator")
GPU_TEST_STAGE = "gpu-test"
DEFAULT_MEASURES = ("final_eval_reward",)
DEFAULT_SUITE_EPISODES = 32


@dataclass(frozen=True)
class Variant:
    """One configuration compared in the experiment."""

    name: str
    overrides: Mapping[str, Any]
    """'section.key' -> value, applied over the base's."""


@dataclass(frozen=True)
class Suite:
    """Shifted conditions every trained policy is evaluated on after training."""

    name: str
    overrides: Mapping[str, Any]
    """'section.key' -> value applied to a trained trial's config to build the environment it is evaluated on."""
    episodes: int


@dataclass(frozen=True)
class Trial:
    """One training: a variant with one seed."""

    variant: str
    seed: int

    @property
    def path(self) -> str:
        """The trial's run directory, relative to the experiment's `trials/`."""
        return f"{self.variant}/seed-{self.seed}"


@dataclass(frozen=True)
class Manifest:
    """A validated manifest with its stage applied (`stage` is None when the manifest has no stages)."""

    name: str
    env: str
    preset: str
    overrides: Mapping[str, Any]
    """The base's overrides, the stage's, then the command line's (`--set`), later winning."""
    variants: tuple[Variant, ...]
    seeds: tuple[int, ...]
    seeds_per_program: int | None
    """Seeds of a variant trained in one compiled program; None: planned for the device
    (`rlfit.planning.seed_groups`)."""
    suites: tuple[Suite, ...]
    measures: tuple[str, ...]
    correlations: tuple[tuple[str, str], ...]
    ratios: tuple[tuple[str, str], ...]
    """(numerator, denominator) measure names, as `rlfit.study.experiment.measure_names` gives them."""
    stage: str | None
    raw: Mapping[str, Any]
    """The manifest as read (saved beside the experiment, so `resume` reads the same)."""

    def trials(self) -> list[Trial]:
        """Every (variant, seed), variant by variant."""
        return [Trial(v.name, seed) for v in self.variants for seed in self.seeds]

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def trial_overrides(self, trial: Trial) -> list[str]:
        """The `--set` strings of one trial: base, stage and command line, the variant's, its seed. The W&B
        group is the experiment's name unless the manifest names one (one experiment = one W&B group)."""
        merged = {"run.wandb_group": self.name, **self.overrides, **self.variant(trial.variant).overrides,
                  "run.seed": trial.seed}
        return override_strings(merged)


def override_strings(overrides: Mapping[str, Any]) -> list[str]:
    """{'ppo.learning_rate': 1e-3} -> ['ppo.learning_rate=0.001'] (values as inline YAML)."""
    return [f"{key}={yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix('...').strip()}"
            for key, value in overrides.items()]


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest file as a dict; UserError when it is missing or not a YAML mapping."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no manifest at {path}; give the path of an experiment's YAML file")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UserError(f"{path} is not valid YAML{where}; fix the manifest") from None
    if not isinstance(raw, Mapping):
        raise UserError(f"{path} must hold a mapping (name, env, variants, seeds, ...), got {type(raw).__name__}")
    return dict(raw)


def parse_manifest(raw: Mapping[str, Any], stage: str | None = None, command_line: Sequence[str] = (),
                   where: str = "the manifest") -> Manifest:
    """Validates `raw` and applies `stage` (the manifest's only stage, or 'full', when None) and the
    command line's `key=value` overrides; UserError naming the first problem."""
    from rlfit.config import parse_override

    _check_keys(raw, TOP_KEYS, where)
    name = _text(raw.get("name"), f"{where}: name")
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UserError(f"{where}: name must be letters, digits, '-', '_' or '.', got '{name}'")
    env = _text(raw.get("env"), f"{where}: env")
    stages = _mapping(raw.get("stages", {}), f"{where}: stages")
    stage = _choose_stage(stages, stage, where)
    stage_spec = _mapping(stages.get(stage, {}) or {}, f"{where}: stages.{stage}") if stage else {}
    _check_keys(stage_spec, STAGE_KEYS, f"{where}: stages.{stage}")
    overrides = {**_overrides(raw.get("set"), f"{where}: set"),
                 **_overrides(stage_spec.get("set"), f"{where}: stages.{stage}.set"),
                 **dict(parse_override(item) for item in command_line)}
    if "algo" in raw:
        overrides = {"algo": _text(raw["algo"], f"{where}: algo"), **overrides}
    seeds = _seeds(stage_spec.get("seeds", raw.get("seeds", 1)), where)
    episodes = stage_spec.get("episodes")
    per_program = parse_seeds_per_program(stage_spec.get("seeds_per_program", raw.get("seeds_per_program", "auto")), where)
    return Manifest(
        name=name, env=env, preset=_text(raw.get("preset", "default"), f"{where}: preset"), overrides=overrides,
        variants=_variants(raw, where), seeds=seeds, seeds_per_program=per_program,
        suites=_suites(raw.get("suites", {}), episodes, where),
        measures=tuple(_strings(raw.get("measures", list(DEFAULT_MEASURES)), f"{where}: measures")),
        correlations=_pairs(raw.get("correlations", []), "correlations", CORRELATION_KEYS, where),
        ratios=_pairs(raw.get("ratios", []), "ratios", RATIO_KEYS, where),
        stage=stage, raw=dict(raw))


def _choose_stage(stages: Mapping[str, Any], stage: str | None, where: str) -> str | None:
    if stage is None:
        return "full" if "full" in stages else (next(iter(stages)) if len(stages) == 1 else None) if stages else None
    if stage not in stages:
        known = ", ".join(stages) or "none"
        raise UserError(f"unknown stage '{stage}'; {where} defines: {known}")
    return stage


def _variants(raw: Mapping[str, Any], where: str) -> tuple[Variant, ...]:
    if "variants" in raw and "grid" in raw:
        raise UserError(f"{where}: give variants or grid, not both")
    if "grid" in raw:
        grid = _mapping(raw["grid"], f"{where}: grid")
        keys = list(grid)
        values = [v if isinstance(v, list) and v else _fail(f"{where}: grid.{k} must be a non-empty list")
                  for k, v in grid.items()]
        return tuple(Variant("-".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in zip(keys, combo)),
                             dict(zip(keys, combo))) for combo in itertools.product(*values))
    items = raw.get("variants", [{"name": "base"}])
    if not isinstance(items, list) or not items:
        raise UserError(f"{where}: variants must be a non-empty list of {{name, set}}")
    variants = []
    for index, item in enumerate(items):
        item = _mapping(item, f"{where}: variants[{index}]")
        _check_keys(item, VARIANT_KEYS, f"{where}: variants[{index}]")
        variant_name = _text(item.get("name"), f"{where}: variants[{index}].name")
        if "/" in variant_name or variant_name.startswith("."):
            raise UserError(f"{where}: variants[{index}].name must not contain '/' or start with '.'")
        variants.append(Variant(variant_name, _overrides(item.get("set"), f"{where}: variants[{index}].set")))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: variant names must differ, got {names}")
    return tuple(variants)


def _suites(raw: Any, episodes: Any, where: str) -> tuple[Suite, ...]:
    suites = []
    for name, spec in _mapping(raw, f"{where}: suites").items():
        spec = _mapping(spec or {}, f"{where}: suites.{name}")
        _check_keys(spec, SUITE_KEYS, f"{where}: suites.{name}")
        count = episodes if episodes is not None else spec.get("episodes", DEFAULT_SUITE_EPISODES)
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            raise UserError(f"{where}: suites.{name}.episodes must be a positive integer, got {count!r}")
        suites.append(Suite(str(name), _overrides(spec.get("set"), f"{where}: suites.{name}.set"), count))
    return tuple(suites)


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return tuple(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                 for s in value) and len(set(value)) == len(value):
        return tuple(value)
    raise UserError(f"{where}: seeds must be a positive count or a list of distinct seeds >= 0, got {value!r}")


def parse_seeds_per_program(value: Any, where: str) -> int | None:
    """'auto' -> None (planned per device), a positive count -> itself; else UserError naming `where`."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if value == "auto":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise UserError(f"{where}: seeds_per_program must be 'auto' or a positive count, got {value!r}")


def _pairs(value: Any, section: str, keys: tuple[str, str], where: str) -> tuple[tuple[str, str], ...]:
    """A manifest list of two-key mappings (`correlations`: x, y; `ratios`: numerator, denominator) as pairs."""
    if not isinstance(value, list):
        raise UserError(f"{where}: {section} must be a list of {{{', '.join(keys)}}}, got {value!r}")
    pairs = []
    for index, item in enumerate(value):
        item = _mapping(item, f"{where}: {section}[{index}]")
        _check_keys(item, keys, f"{where}: {section}[{index}]")
        first, second = (_text(item.get(key), f"{where}: {section}[{index}].{key}") for key in keys)
        pairs.append((first, second))
    return tuple(pairs)


def _overrides(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, list):  # ["key=value", ...] as on the command line
        from rlfit.config import parse_override

        return dict(parse_override(_text(item, where)) for item in value)
    return {str(k): v for k, v in _mapping(value, where).items()}


def _check_keys(spec: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    for key in spec:
        if key not in allowed:
            raise UserError(f"{where}: unknown key '{key}'{did_you_mean(str(key), list(allowed))}; "
                            f"allowed: {', '.join(allowed)}")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be a mapping, got {value!r}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where} must be a non-empty string, got {value!r}")
    return value.strip()


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise UserError(f"{where} must be a non-empty list of names, got {value!r}")
    return value


def _short(value: Any) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _fail(message: str) -> Any:
    raise UserError(message)
