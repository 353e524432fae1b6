"""Running a study's trials: each pending trial trained (new ones in seed groups, started ones resumed), then
evaluated on the manifest's suites, here or as Ray tasks (`rlfit.study.ray_runner`); a trial that fails is
recorded and the study goes on. The experiment's data (its manifest, directories, records) is
`rlfit.study.experiment`."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from rlfit.api import train
from rlfit.errors import UserError
from rlfit.hardware.probe import probe_device
from rlfit.planning.out_of_memory import OutOfMemory
from rlfit.run.trainer import reusing_programs
from rlfit.run.checks import run_checks
from rlfit.run.loop import NonFiniteError
from rlfit.run.restore import read_saved_config
from rlfit.run.resume import resume
from rlfit.rundir.layout import RunDir, write_json
from rlfit.rundir.write_failures import WriteFailed
from rlfit.study.experiment import (DEVICE_CHECKS_FILE, FAILED_FILE, SUITES_FILE, Experiment, ProgressLine,
                                    device_identity, open_experiment, read_json, trial_status)
from rlfit.study.experiment_groups import resume_groups, train_new_in_groups
from rlfit.study.manifest import GPU_TEST_STAGE, Trial
from rlfit.study.ray_runner import run_on_ray
from rlfit.study.suites import evaluate_suite


def run_experiment(experiment: Experiment, say: Callable[[str], None] = print, ray: str | None = None) -> None:
    """Trains every trial not yet finished (resuming started ones) and evaluates it on the suites, here or,
    with `ray` (an address, 'auto' or 'local'), as Ray tasks (`rlfit.study.ray_runner`)."""
    manifest = experiment.manifest
    if manifest.stage == GPU_TEST_STAGE:
        device_checks(say, experiment.path)
    progress = ProgressLine(experiment, say)
    trials = manifest.trials()
    pending = [t for t in trials if not trial_settled(experiment, t)]
    done = len(trials) - len(pending)
    progress.show(done, None)
    if ray is not None:
        return run_on_ray(experiment, pending, ray, progress, done, say, train_trials)
    with reusing_programs():
        train_pending(experiment, pending, progress, done)


def train_pending(experiment: Experiment, pending: list[Trial], progress: ProgressLine, done: int) -> None:
    """Trains and evaluates `pending` variant by variant, showing progress: a variant's new trials first in
    seed groups (one compiled program each, `train_new_in_groups`), then whatever is left one after another
    (started trials are resumed alone)."""
    for variant in experiment.manifest.variants:
        trials = [t for t in pending if t.variant == variant.name]
        if experiment.manifest.seeds_per_program != 1:
            resume_groups(experiment, [t for t in trials if trial_status(experiment.trial_dir(t)) == "partial"],
                          progress, done)
        new = [t for t in trials if trial_status(experiment.trial_dir(t)) == "new"]
        if len(new) > 1:
            train_new_in_groups(experiment, new, progress, done)
        for trial in trials:
            run_dir = experiment.trial_dir(trial)
            label = f"{trial.variant} seed {trial.seed}"
            trained = trial_status(run_dir) == "done"  # in a seed group: its share is in the durations
            progress.show(done, label)
            started = time.perf_counter()
            complete_trial(experiment, trial)
            if not trained:
                progress.durations.append(time.perf_counter() - started)
            done += 1
            failure = read_json(run_dir / FAILED_FILE)
            summary = read_json(run_dir / "summary.json") or {}
            outcome = (f"FAILED: {failure.get('error', '')}" if failure is not None
                       else f"final eval {format_reward(summary.get('final_eval_reward'))}")
            progress.show(done, None, f" ({label}: {outcome})")


def trial_settled(experiment: Experiment, trial: Trial) -> bool:
    """Nothing left to do: finished with every suite evaluated, or failed."""
    status = trial_status(experiment.trial_dir(trial))
    return status == "failed" or (status == "done" and suites_done(experiment, trial))


def complete_trial(experiment: Experiment, trial: Trial) -> None:
    """Trains the trial unless it is finished (resuming it if started), then evaluates the missing suites. A
    trial whose training becomes non-finite or runs out of memory is recorded in FAILED_FILE and the
    experiment goes on (a study expects some seeds to diverge; the report lists them)."""
    run_dir = experiment.trial_dir(trial)
    status = trial_status(run_dir)
    if status == "failed":
        return
    if status != "done":
        try:
            train_trial(experiment, trial, status)
        except (NonFiniteError, OutOfMemory) as error:
            write_json(run_dir / FAILED_FILE, {"error": str(error), "kind": type(error).__name__})
            return
    evaluate_suites(experiment, trial)


def format_reward(value: Any) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def train_trial(experiment: Experiment, trial: Trial, status: str) -> None:
    """Trains a new trial, or resumes a started one in its own run directory."""
    run_dir = experiment.trial_dir(trial)
    manifest = experiment.manifest
    try:
        if status == "new":
            if run_dir.exists():  # killed while creating it: nothing in it can be resumed
                shutil.rmtree(run_dir)
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            train(manifest.env, manifest.preset, overrides=manifest.trial_overrides(trial), run_dir=run_dir)
        else:
            resume(run_dir)
    except UserError as error:
        if isinstance(error, OutOfMemory):
            raise
        if isinstance(error, WriteFailed):  # keeps its exit code (4)
            raise WriteFailed(f"trial {trial.path}: {error.what}", error.fix) from None
        raise UserError(f"trial {trial.path}: {error}") from None


def suites_done(experiment: Experiment, trial: Trial) -> bool:
    results = read_json(experiment.trial_dir(trial) / SUITES_FILE) or {}
    return all(suite.name in results for suite in experiment.manifest.suites)


def evaluate_suites(experiment: Experiment, trial: Trial) -> None:
    """Evaluates the trial's final policy on each suite not yet in its suites.json (written after each)."""
    run_dir = experiment.trial_dir(trial)
    results = read_json(run_dir / SUITES_FILE) or {}
    config = None
    for index, suite in enumerate(experiment.manifest.suites):
        if suite.name in results:
            continue
        if config is None:
            config, problem = read_saved_config(RunDir(run_dir))
            if config is None:
                raise UserError(f"trial {trial.path}: config.yaml is {problem}; resume the trial to rebuild it")
        results[suite.name] = evaluate_suite(run_dir, config, suite, index)
        write_json(run_dir / SUITES_FILE, results)


def device_checks(say: Callable[[str], None], experiment_dir: Path) -> None:
    """`rlfit doctor --full`'s checks, recorded in EXP_DIR/DEVICE_CHECKS_FILE; UserError when one fails (the
    gpu-test stage runs them first). Once they passed in this experiment on this device (`device_identity`:
    the same accelerator, driver and JAX), a resume does not run them again."""
    device = probe_device()
    identity = device_identity(device)
    record = read_json(experiment_dir / DEVICE_CHECKS_FILE)
    if isinstance(record, dict) and record.get("passed") is True and record.get("device") == identity:
        say(f"gpu-test: rlfit doctor --full's checks passed on this device in this experiment ({DEVICE_CHECKS_FILE}); "
            "not run again")
        return
    say("gpu-test: running rlfit doctor --full's checks first")
    results = run_checks(device, lambda r: say(f"  {'pass' if r.passed else 'FAIL'}  {r.name:<10s} {r.figure}"))
    failed = [r.name for r in results if not r.passed]
    write_json(experiment_dir / DEVICE_CHECKS_FILE, {
        "passed": not failed, "device": identity, "checked": datetime.now().astimezone().isoformat(),
        "results": [r.to_dict() for r in results]})
    if failed:
        raise UserError(f"device checks failed ({', '.join(failed)}); see `rlfit doctor --full` before running "
                        "the experiment")


def train_trials(experiment_path: str, trial_paths: list[str], seeds_per_program: int | None = None) -> list[str]:
    """In a Ray worker: trains and evaluates the given trials of the experiment as `rlfit experiment` does here
    (seed groups, then one after another); returns their paths."""
    experiment = open_experiment(experiment_path).with_seeds_per_program(seeds_per_program)
    trials = {t.path: t for t in experiment.manifest.trials()}
    with reusing_programs():
        train_pending(experiment, [trials[path] for path in trial_paths], ProgressLine(experiment, lambda _: None), 0)
    return trial_paths
