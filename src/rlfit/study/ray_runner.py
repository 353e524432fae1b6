"""Running an experiment's trials on a Ray cluster: one Ray task per variant (its pending seeds, trained one
after another in one worker so they share compiled programs), each asking for the GPUs it needs.

Storage: workers write each trial straight into EXP_DIR, so EXP_DIR must be the same path on every node (one
machine, or a shared file system such as NFS); the driver only waits, shows progress and writes the report.
Ray schedules; rlfit does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlfit.errors import UserError
from rlfit.study.experiment import Experiment, ProgressLine
from rlfit.study.manifest import Trial


def check_ray_installed() -> None:
    """One line (exit 2) where Ray is missing, before the experiment's directory is made."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise UserError("--ray needs Ray: pip install 'rlfit[ray]'")


def connect(address: str) -> Any:
    """`ray` connected to `address` ('auto': the running cluster; 'local': a new one on this machine)."""
    check_ray_installed()
    import ray

    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as error:
            raise UserError(f"cannot connect to Ray at '{address}': {str(error).splitlines()[0]}; start a cluster "
                            "(`ray start --head`) or use --ray local") from None
    return ray


def run_on_ray(experiment: Experiment, pending: list[Trial], address: str, progress: ProgressLine,
               done: int, say: Callable[[str], None], train_trials: Callable[..., list[str]]) -> None:
    """Runs `pending` as one Ray task per variant and waits for all; a failed task stops with its error.

    `train_trials(experiment_path, trial_paths, seeds_per_program)` is the task (`rlfit.study.schedule`'s).
    """
    ray = connect(address)
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    task = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(train_trials)
    groups: dict[str, list[str]] = {}
    for trial in pending:
        groups.setdefault(trial.variant, []).append(trial.path)
    per_program = experiment.manifest.seeds_per_program
    running = {task.remote(str(experiment.path), paths, per_program): variant for variant, paths in groups.items()}
    say(f"ray: {len(running)} tasks (one per variant, {gpus} GPU each) on {ray.cluster_resources().get('CPU', 0):.0f} "
        "CPUs")
    while running:
        [finished], _ = ray.wait(list(running), num_returns=1)
        variant = running.pop(finished)
        try:
            trained = ray.get(finished)
        except ray.exceptions.RayTaskError as error:
            cause = str(error.cause if getattr(error, "cause", None) else error).strip().splitlines()[-1]
            raise UserError(f"variant {variant} failed on Ray: {cause}") from None
        done += len(trained)
        progress.show(done, None, f" (ray: variant {variant} finished)")


