"""An experiment on disk: every trial (variant x seed) an ordinary run directory, trained one after another,
then evaluated on the suites (by `rlfit.study.schedule`); stopped or killed at any point, `resume` finishes what
is missing and never trains a finished trial again. This module holds the experiment's data: its manifest,
directories and records.

    EXP_DIR/manifest.yaml        the manifest as given     EXP_DIR/experiment.json   stage, --set, trial list
    EXP_DIR/device_checks.json   (gpu-test stage) the device checks' results and the device they passed on
    EXP_DIR/trials/VARIANT/seed-N/   a run directory (resume, play, export, TensorBoard work on it)
                                     + suites.json: {suite: {episode_reward, ...}}
    EXP_DIR/report/              report.md, results.json, plots (rlfit.study.report)
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from rlfit.rundir.atomic import write_atomic
from rlfit.errors import UserError, did_you_mean
from rlfit.rundir.layout import user_path_errors, write_json
from rlfit.sinks.console import format_duration
from rlfit.study.manifest import (Manifest, Trial, override_strings, parse_manifest,
                                  read_manifest)

EXPERIMENT_FILE = "experiment.json"
MANIFEST_FILE = "manifest.yaml"
SUITES_FILE = "suites.json"
DEVICE_CHECKS_FILE = "device_checks.json"
"""The gpu-test stage's `rlfit doctor --full` results and the device they ran on (`rlfit.study.schedule.device_checks`)."""
FAILED_FILE = "failed.json"
"""Written in a trial whose training diverged or ran out of memory: it is reported, not retried."""
FINISHED = (None, "early_stop", "target_reward")
"""A trial is finished when its last session ended by itself or by one of these stopping rules."""
SUMMARY_MEASURES = ("final_eval_reward", "best_eval_reward", "sps_mean", "train_wall_s", "compile_s", "env_steps",
                    "iterations", "final_description_length_bits")
"""summary.json fields a manifest may name in `measures` (suites add `suite/<name>`). A field may be null in some
trials (final_description_length_bits: policies without a bottleneck); the report leaves those trials out."""


@dataclass(frozen=True)
class Experiment:
    """An experiment directory and its manifest (stage and command line applied)."""

    path: Path
    manifest: Manifest

    @property
    def trials_dir(self) -> Path:
        return self.path / "trials"

    @property
    def report_dir(self) -> Path:
        return self.path / "report"

    def trial_dir(self, trial: Trial) -> Path:
        return self.trials_dir / trial.path

    def with_seeds_per_program(self, count: int | None) -> Experiment:
        """The same experiment with `count` seeds per compiled program (None: planned), as `--seeds-per-program`
        asks; it is how the trials run, not what they are, so it may differ on resume."""
        return dataclasses.replace(self, manifest=dataclasses.replace(self.manifest, seeds_per_program=count))


def validate_manifest(raw: Mapping[str, Any], stage: str | None, command_line: Sequence[str],
                      where: str) -> Manifest:
    """The manifest for `stage`, after checking it and every other stage (`check_manifest`): a problem in the
    full stage is found when the gpu-test stage starts, before hours of training."""
    chosen = parse_manifest(raw, stage, command_line, where=where)
    check_manifest(chosen, where)
    for other in raw.get("stages") or {}:
        if other != chosen.stage:
            check_manifest(parse_manifest(raw, other, command_line, where=where), where)
    return chosen


def check_manifest(manifest: Manifest, where: str = "the manifest") -> None:
    """Resolves every trial's config (variant x seed: every rule a run checks) and every suite's config on it,
    with `env.overrides` checked against the environment's own settings, and checks measures, correlations and
    ratios, so a problem is one line naming the manifest entry before anything runs. The seed enters a config only
    through `run.seed`'s own rule, which `parse_manifest` checked for every seed, so one seed's config stands for
    all (no environment is built and nothing compiles)."""
    from rlfit.config.moved_keys import MOVED_KEYS
    from rlfit.config.schema import all_keys

    for variant in manifest.variants:
        config = variant_config(manifest, variant.name, where)
        for suite in manifest.suites:
            check_suite(config, suite, where)
    measures = measure_names(manifest) + suite_field_names(manifest)
    for measure in manifest.measures:
        if measure not in SUMMARY_MEASURES:
            raise UserError(f"{where}: measures: unknown measure '{measure}'; choose from {', '.join(SUMMARY_MEASURES)} "
                            "(suites are compared as suite/<name> without being listed)")
    keys = set(all_keys()) | set(MOVED_KEYS)  # a key's old name still names it (`rlfit.config.moved_keys`)
    for x, y in manifest.correlations:
        for name in (x, y):
            if name not in measures and name not in keys:
                raise UserError(f"{where}: correlation names '{name}', which is neither a measure "
                                f"({', '.join(measures)}) nor a config key")
    for index, names in enumerate(manifest.generalization):
        for role, name in zip(("ood", "in_distribution", "description"), names):
            if name not in measures:
                raise UserError(f"{where}: generalization[{index}].{role} names '{name}', which is not a measure"
                                f"{did_you_mean(name, list(measures))}; choose from {', '.join(measures)}")
    try:
        check_ratios(manifest.ratios, measures)
    except UserError as error:
        raise UserError(f"{where}: {error}") from None


def variant_config(manifest: Manifest, variant: str, where: str) -> Any:
    """The resolved config of `variant`'s first seed; UserError naming the stage and variant."""
    from rlfit.config.schema import resolve
    from rlfit.envs.overrides import check_env_config

    def check(overrides: Sequence[str]) -> Any:
        config = resolve(manifest.env, manifest.preset, overrides=overrides)
        check_env_config(config.env.name, config.env.overrides)
        return config

    try:
        return check(manifest.trial_overrides(Trial(variant, manifest.seeds[0])))
    except UserError as error:
        raise UserError(f"{where}: {failing_entry(manifest, variant, str(error), check)}: {error}") from None


def failing_entry(manifest: Manifest, variant: str, message: str, check: Callable[[Sequence[str]], Any]) -> str:
    """The manifest entry a variant's config error comes from: the first of the base's layers ('set',
    'stages.<stage>.set', '--set') whose keys, merged with those before it, give the same error; else the variant
    (its `variants[i].set` or, from a grid, its name)."""
    merged: dict[str, Any] = {"run.wandb_group": manifest.name}
    for entry, layer in manifest.layers:
        merged.update(layer)
        try:
            check(override_strings(merged))
        except UserError as error:
            if str(error) == message:
                return entry
    names = [v.name for v in manifest.variants]
    if "grid" in manifest.raw:
        return f"grid (variant '{variant}')"
    index = names.index(variant)
    return f"variants[{index}].set (variant '{variant}')" if "variants" in manifest.raw else f"variant '{variant}'"


def check_suite(config: Any, suite: Any, where: str) -> None:
    """UserError naming `suites.<name>.set` when the suite's overrides on a trial's `config` break a rule or name
    an environment setting the environment does not have."""
    from rlfit.envs.overrides import check_env_config
    from rlfit.study.suites import suite_config

    try:
        shifted = suite_config(config, suite.overrides)
        check_env_config(shifted.env.name, shifted.env.overrides)
    except UserError as error:
        raise UserError(f"{where}: suites.{suite.name}.set: {error}") from None


def check_ratios(ratios: Sequence[tuple[str, str]], measures: Sequence[str]) -> None:
    """UserError when a ratio's numerator or denominator is not one of `measures` (`measure_names`)."""
    for index, pair in enumerate(ratios):
        for role, name in zip(("numerator", "denominator"), pair):
            if name not in measures:
                raise UserError(f"ratios[{index}].{role} names '{name}', which is not a measure"
                                f"{did_you_mean(name, list(measures))}; choose from {', '.join(measures)}")


def measure_names(manifest: Manifest) -> list[str]:
    """The manifest's measures and one `suite/<name>` per suite."""
    return [*manifest.measures, *(f"suite/{s.name}" for s in manifest.suites)]


def suite_field_names(manifest: Manifest) -> list[str]:
    """`suite/<name>/<field>` for every suite and optional field a suite evaluation may record (success rate,
    normalized return, description length: `rlfit.study.measures.SUITE_FIELDS`), which correlations and ratios may
    name."""
    from rlfit.study.measures import SUITE_FIELDS

    return [f"suite/{s.name}/{field}" for s in manifest.suites for field in SUITE_FIELDS]


def start_experiment(manifest_path: str | Path, stage: str | None = None, command_line: Sequence[str] = (),
                     root: str | Path = "experiments") -> Experiment:
    """Validates the manifest, then creates `root/<name>-<stage>-<timestamp>/` with the manifest and record."""
    raw = read_manifest(manifest_path)
    manifest = validate_manifest(raw, stage, command_line, str(manifest_path))
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(root) / "-".join(part for part in (manifest.name, manifest.stage, stamp) if part)
    suffix = 1
    while path.exists():
        suffix += 1
        path = path.with_name(f"{path.name.rsplit('~', 1)[0]}~{suffix}")
    with user_path_errors(path, "choose another --dir"):
        path.mkdir(parents=True)
        try:
            write_atomic(path / MANIFEST_FILE, yaml.safe_dump(dict(raw), sort_keys=False))
            write_json(path / EXPERIMENT_FILE, {
                "name": manifest.name, "stage": manifest.stage, "set": list(command_line),
                "manifest_source": str(Path(manifest_path).resolve()),
                "created": datetime.now().astimezone().isoformat(), "trials": [trial.path for trial in manifest.trials()]})
        except OSError:
            shutil.rmtree(path, ignore_errors=True)  # half an experiment directory could not be resumed
            raise
    return Experiment(path, manifest)


def open_experiment(path: str | Path, check: bool = False) -> Experiment:
    """An existing experiment directory, with the manifest, stage and `--set` it was started with; `check`: every
    stage validated as at the start (`validate_manifest`), for a session that will train."""
    path = Path(path)
    record_path = path / EXPERIMENT_FILE
    if not record_path.is_file() or not (path / MANIFEST_FILE).is_file():
        raise UserError(f"{path} is not an experiment directory (no {EXPERIMENT_FILE} and {MANIFEST_FILE}); "
                        "give the directory `rlfit experiment` created")
    stage, command_line = read_record(record_path)
    raw = read_manifest(path / MANIFEST_FILE)
    where = str(path / MANIFEST_FILE)
    manifest = (validate_manifest(raw, stage, command_line, where) if check
                else parse_manifest(raw, stage, command_line, where=where))
    return Experiment(path, manifest)


def read_record(record_path: Path) -> tuple[str | None, list[str]]:
    """(stage, `--set` items) of an experiment's record; UserError when it is unreadable, not JSON, or not the
    mapping `start_experiment` writes."""
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not text
        reason = error.strerror if isinstance(error, OSError) else f"not JSON: {str(error).splitlines()[0]}"
        raise UserError(f"{record_path} is unreadable ({reason}); restore it") from None
    if not isinstance(record, dict):
        raise UserError(f"{record_path} holds a JSON {type(record).__name__}, not an experiment's record (a mapping "
                        "with stage, set and trials); restore it")
    stage, command_line = record.get("stage", ...), record.get("set", [])
    if stage is not None and not isinstance(stage, str):
        raise UserError(f"{record_path} has {'no stage' if stage is ... else f'stage {stage!r}'}; restore it (the "
                        "stage the experiment was started with, or null for a manifest without stages)")
    if not isinstance(command_line, list) or not all(isinstance(item, str) for item in command_line):
        raise UserError(f"{record_path} has set {command_line!r}, not a list of KEY=VALUE; restore it")
    return stage, command_line


def trial_status(run_dir: Path) -> str:
    """'done' (its last session finished, by itself or a stopping rule), 'failed' (its training diverged or ran
    out of memory: FAILED_FILE), 'partial' (resumable: it has its config or a checkpoint), or 'new' (absent, or
    killed while its directory was being created)."""
    from rlfit.rundir.layout import RunDir

    summary = read_json(run_dir / "summary.json")
    if summary is not None and summary.get("stopped_by", "") in FINISHED:
        return "done"
    if (run_dir / FAILED_FILE).is_file():
        return "failed"
    directory = RunDir(run_dir)
    return "partial" if directory.config.is_file() or directory.checkpoints.is_dir() else "new"


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class ProgressLine:
    """Trials done / running / left and an ETA from the trials trained in this session, one line per event."""

    def __init__(self, experiment: Experiment, say: Callable[[str], None]):
        self.name = experiment.manifest.name + (f" [{experiment.manifest.stage}]" if experiment.manifest.stage else "")
        self.total = len(experiment.manifest.trials())
        self.say = say
        self.durations: list[float] = []

    def show(self, done: int, running: str | None, note: str = "", running_count: int = 1) -> None:
        running_count = running_count if running else 0
        left = self.total - done - running_count
        eta = ""
        if self.durations:
            remaining = (left + running_count) * sum(self.durations) / len(self.durations)
            eta = f", eta {format_duration(remaining)}"
        now = f", running {running}" if running else ""
        self.say(f"{self.name}: {done}/{self.total} done{now}, {left} left{eta}{note}")


def failed_trials(experiment: Experiment) -> dict[str, str]:
    """trial path -> its error, for every failed trial."""
    return {t.path: (read_json(experiment.trial_dir(t) / FAILED_FILE) or {}).get("error", "unreadable record")
            for t in experiment.manifest.trials() if trial_status(experiment.trial_dir(t)) == "failed"}


def device_identity(device: Any) -> dict[str, Any]:
    """What decides whether checks that passed still hold: the accelerator (platform, name, count, compute
    capability), its driver and the JAX version (not free memory, which changes from run to run)."""
    return {name: getattr(device, name) for name in
            ("platform", "name", "count", "compute_capability", "driver", "jax_version")}
