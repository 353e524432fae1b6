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
      slow-control-sampled: {set: {env.overrides: {ctrl_dt: 0.02}}, policy: stochastic}  # default: most-likely
    measures: [final_eval_reward] # summary.json fields compared between variants (suites are added)
    correlations: [{x: ppo.learning_rate, y: final_eval_reward}]
    ratios:                       # mean(numerator) / mean(denominator) per variant, both measures as compared
      - {numerator: suite/slow-control, denominator: final_eval_reward}
    generalization:               # optional: ood ~ in_distribution + log2(description), variant as grouping factor
      - {ood: suite/slow-control, in_distribution: final_eval_reward, description: final_description_length_bits}
    reference_return: 1000        # optional: the report also gives returns divided by this (here the most a
                                  # DM Control episode can earn: 1000 steps of reward at most 1)
    stages:                       # --stage NAME: its `set` (and `seeds`, `episodes`) apply over the base
      gpu-test: {set: {run.num_timesteps: 2000}, seeds: 2, episodes: 2}
      mini: {set: {run.num_timesteps: 100000}}
      full: {}
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlfit.errors import UserError, did_you_mean
from rlfit.study.suite_policies import MOST_LIKELY_POLICY, POLICIES

TOP_KEYS = ("name", "env", "algo", "preset", "set", "variants", "grid", "seeds", "seeds_per_program", "suites",
            "measures", "correlations", "ratios", "generalization", "reference_return", "stages")
VARIANT_KEYS = ("name", "set")
SUITE_KEYS = ("set", "episodes", "policy")
STAGE_KEYS = ("set", "seeds", "seeds_per_program", "episodes")
CORRELATION_KEYS = ("x", "y")
RATIO_KEYS = ("numerator", "denominator")
GENERALIZATION_KEYS = ("ood", "in_distribution", "description")
GPU_TEST_STAGE = "gpu-test"
DEFAULT_MEASURES = ("final_eval_reward",)
DEFAULT_SUITE_EPISODES = 32
UNSAFE_CHARACTERS = frozenset("/\\~")
"""Characters a grid value's text may not bring into a variant's name (its directory): path separators, and `~`,
which marks a hash suffix (so no value's own text can read as another's hashed name)."""
MAX_VALUE_CHARS = 40
MAX_NAME_BYTES = 200
"""A variant name longer than this (a directory name may have 255 bytes) is cut and ends with a hash."""


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
    policy: str = "most-likely"
    """Which policy acts (`rlfit.study.suite_policies.POLICIES`): 'most-likely' (the mode of its distribution, as
    the policy file deploys it) or 'stochastic' (sampled actions, as it trained)."""


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
    layers: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """The layers `overrides` merges, each with the manifest entry it came from: ('set', ...),
    ('stages.<stage>.set', ...), ('--set', ...) (to name where a bad key was written)."""
    reference_return: float | None = None
    """A return the report divides returns by (the optimum where known), or None: raw returns only."""
    generalization: tuple[tuple[str, str, str], ...] = ()
    """(ood, in_distribution, description) measure names: the report fits ood ~ in_distribution + log2(description)
    with the variant as grouping factor (`rlfit.study.generalization`)."""

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
    return [f"{key}={inline_yaml(value)}" for key, value in overrides.items()]


def inline_yaml(value: Any) -> str:
    """`value` as one line of YAML that reads back as the same value: 0.001, [32, 32], {ctrl_dt: 0.02}."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...").strip()


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
    from rlfit.config.schema import parse_override

    _check_keys(raw, TOP_KEYS, where)
    name = _text(raw.get("name"), f"{where}: name")
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UserError(f"{where}: name must be letters, digits, '-', '_' or '.', got '{name}'")
    env = _text(raw.get("env"), f"{where}: env")
    stages = _mapping(raw.get("stages", {}), f"{where}: stages")
    stage = _choose_stage(stages, stage, where)
    stage_spec = _mapping(stages.get(stage, {}) or {}, f"{where}: stages.{stage}") if stage else {}
    _check_keys(stage_spec, STAGE_KEYS, f"{where}: stages.{stage}")
    algo = {"algo": _text(raw["algo"], f"{where}: algo")} if "algo" in raw else {}
    layers = (("set", {**algo, **_overrides(raw.get("set"), f"{where}: set")}),
              (f"stages.{stage}.set", _overrides(stage_spec.get("set"), f"{where}: stages.{stage}.set")),
              ("--set", dict(parse_override(item) for item in command_line)))
    overrides = {key: value for _, layer in layers for key, value in layer.items()}
    overrides = {**algo, **overrides}
    seeds = _seeds(stage_spec.get("seeds", raw.get("seeds", 1)),
                   f"{where}: {f'stages.{stage}.seeds' if 'seeds' in stage_spec else 'seeds'}")
    episodes = stage_spec.get("episodes")
    per_program = parse_seeds_per_program(stage_spec.get("seeds_per_program", raw.get("seeds_per_program", "auto")), where)
    return Manifest(
        name=name, env=env, preset=_text(raw.get("preset", "default"), f"{where}: preset"), overrides=overrides,
        variants=_variants(raw, where), seeds=seeds, seeds_per_program=per_program,
        suites=_suites(raw.get("suites", {}), episodes, where),
        measures=tuple(_strings(raw.get("measures", list(DEFAULT_MEASURES)), f"{where}: measures")),
        correlations=_pairs(raw.get("correlations", []), "correlations", CORRELATION_KEYS, where),
        ratios=_pairs(raw.get("ratios", []), "ratios", RATIO_KEYS, where),
        generalization=_pairs(raw.get("generalization", []), "generalization", GENERALIZATION_KEYS, where),
        stage=stage, raw=dict(raw), layers=tuple((entry, layer) for entry, layer in layers if layer),
        reference_return=_reference_return(raw.get("reference_return"), where))


def _reference_return(value: Any, where: str) -> float | None:
    """None, or a positive finite number: the return the report normalizes returns by."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise UserError(f"{where}: reference_return must be a positive number (the optimum return, e.g. 1000), "
                        f"got {value!r}")
    return float(value)


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
        return grid_variants(_mapping(raw["grid"], f"{where}: grid"), where)
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


def grid_variants(grid: Mapping[str, Any], where: str) -> tuple[Variant, ...]:
    """One variant per combination of the grid's values, named `key=value-key=value` (`variant_name`); UserError
    when a key's list is empty or names one value twice (0.001 and 1.0e-3 are one value: two variants would be one
    configuration trained and counted twice)."""
    keys = [str(key) for key in grid]
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise UserError(f"{where}: grid.{key} must be a non-empty list")
        for (i, first), (j, second) in itertools.combinations(enumerate(values), 2):
            if first == second and isinstance(first, bool) == isinstance(second, bool):
                raise UserError(f"{where}: grid.{key} lists one value twice: [{i}] {first!r} and [{j}] {second!r} "
                                "(as 0.001 and 1.0e-3 are both 0.001); list each value once")
    labels = short_labels(keys)
    variants = [Variant(variant_name(labels, combo), dict(zip(keys, combo)))
                for combo in itertools.product(*grid.values())]
    counts = collections.Counter(v.name for v in variants)
    variants = [Variant(f"{v.name}~{value_hash(v.overrides)}", v.overrides) if counts[v.name] > 1 else v
                for v in variants]
    names = [v.name for v in variants]
    for name in names:
        if names.count(name) > 1:  # values equal in JSON but not in Python (NaN)
            same = [v.overrides for v in variants if v.name == name]
            raise UserError(f"{where}: grid gives two variants the name '{name}' ({same[0]} and {same[1]}); "
                            "list each value once")
    return tuple(variants)


def short_labels(keys: Sequence[str]) -> list[str]:
    """Each grid key's last part (`ppo.learning_rate` -> `learning_rate`), or the whole key where two share it."""
    last = [key.split(".")[-1] for key in keys]
    return [part if last.count(part) == 1 else key for key, part in zip(keys, last)]


def variant_name(labels: Sequence[str], values: Sequence[Any]) -> str:
    """`label=value-label=value`, each value as `format_value` writes it; a name too long for a directory is cut
    and ends with a hash of every value."""
    name = "-".join(f"{label}={format_value(value)}" for label, value in zip(labels, values))
    if len(name.encode()) > MAX_NAME_BYTES:
        name = f"{name.encode()[:MAX_NAME_BYTES - 20].decode(errors='ignore')}~{value_hash(list(values))}"
    return name


def format_value(value: Any) -> str:
    """A grid value as it reads in a variant's name, faithful to it: a float in 6 significant digits when they give
    it back exactly (0.001, 1e-05), else its shortest exact form (0.0010000001); text as is; lists and mappings
    as inline YAML. A value whose text is not path-safe (`/`, a backslash, `~`, a control character) or
    longer than MAX_VALUE_CHARS becomes its safe part and `~` + a hash of the value (`a_b~1f0e3dad`)."""
    if isinstance(value, float):
        text = format(value, "g") if float(format(value, "g")) == value else repr(value)
    elif isinstance(value, (list, dict)):
        text = inline_yaml(value)
    else:
        text = str(value)
    if len(text) <= MAX_VALUE_CHARS and text.isprintable() and not set(text) & UNSAFE_CHARACTERS:
        return text  # after `key=`: a leading '.' hides nothing
    safe = "".join(c if c.isprintable() and c not in UNSAFE_CHARACTERS else "_" for c in text)
    return f"{safe[:MAX_VALUE_CHARS // 2]}~{value_hash(value)}"


def value_hash(value: Any) -> str:
    """8 hex digits of the SHA-256 of `value` as sorted JSON: the same for the same value on every machine."""
    text = json.dumps(value, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _suites(raw: Any, episodes: Any, where: str) -> tuple[Suite, ...]:
    suites = []
    for name, spec in _mapping(raw, f"{where}: suites").items():
        spec = _mapping(spec or {}, f"{where}: suites.{name}")
        _check_keys(spec, SUITE_KEYS, f"{where}: suites.{name}")
        count = episodes if episodes is not None else spec.get("episodes", DEFAULT_SUITE_EPISODES)
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            raise UserError(f"{where}: suites.{name}.episodes must be a positive integer, got {count!r}")
        overrides = _overrides(spec.get("set"), f"{where}: suites.{name}.set")
        if not isinstance(overrides.get("env.overrides", {}), Mapping):
            raise UserError(f"{where}: suites.{name}.set: env.overrides must be a mapping (e.g. {{ctrl_dt: 0.02}}), "
                            f"got {overrides['env.overrides']!r}")
        policy = spec.get("policy", MOST_LIKELY_POLICY)
        if policy not in POLICIES:
            raise UserError(f"{where}: suites.{name}.policy must be one of {', '.join(POLICIES)}, got {policy!r}"
                            f"{did_you_mean(str(policy), POLICIES)}")
        suites.append(Suite(str(name), overrides, count, policy))
    return tuple(suites)


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    """A count (0..count-1) or a list of distinct seeds, each a valid `run.seed` (below 2^32); `where` names the
    manifest entry ('study.yaml: seeds')."""
    from rlfit.config.rules import SEED_LIMIT

    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        if value > SEED_LIMIT:
            raise UserError(f"{where}: a count of {value} seeds goes past the largest seed, {SEED_LIMIT - 1} "
                            "(2^32 - 1); give fewer")
        return tuple(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                 for s in value) and len(set(value)) == len(value):
        for index, seed in enumerate(value):
            if seed >= SEED_LIMIT:
                raise UserError(f"{where}[{index}] is {seed}; a seed must be an integer from 0 to {SEED_LIMIT - 1} "
                                "(2^32 - 1)")
        return tuple(value)
    raise UserError(f"{where} must be a positive count or a list of distinct seeds >= 0, got {value!r}")


def parse_seeds_per_program(value: Any, where: str) -> int | None:
    """'auto' -> None (planned per device), a positive count -> itself; else UserError naming `where`."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if value == "auto":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise UserError(f"{where}: seeds_per_program must be 'auto' or a positive count, got {value!r}")


def _pairs(value: Any, section: str, keys: tuple[str, ...], where: str) -> tuple[tuple[str, ...], ...]:
    """A manifest list of mappings with `keys` (`correlations`: x, y; `ratios`: numerator, denominator;
    `generalization`: ood, in_distribution, description) as tuples in that order."""
    if not isinstance(value, list):
        raise UserError(f"{where}: {section} must be a list of {{{', '.join(keys)}}}, got {value!r}")
    pairs = []
    for index, item in enumerate(value):
        item = _mapping(item, f"{where}: {section}[{index}]")
        _check_keys(item, keys, f"{where}: {section}[{index}]")
        pairs.append(tuple(_text(item.get(key), f"{where}: {section}[{index}].{key}") for key in keys))
    return tuple(pairs)


def _overrides(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, list):  # ["key=value", ...] as on the command line
        from rlfit.config.schema import parse_override

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
