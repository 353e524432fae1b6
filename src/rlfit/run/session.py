"""One training session of a single run: `rlfit.train` plans it and creates its run directory; `execute` trains it as
one lane (`rlfit.run.lanes`), for a new run and a resumed one alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from rlfit.algos.contract import TrainState
from rlfit.config.schema import DEFAULT_ENV, Config, resolve
from rlfit.planning.plan import Plan
from rlfit.planning.preset import PresetChoice, choose_preset
from rlfit.run.trainer import Environment, Trainer
from rlfit.run.lanes import LaneSpec, train_lanes
from rlfit.run.loop import RunResult
from rlfit.run.progress import Progress
from rlfit.run.new_run import check_new_run_dir, create_run_dir, default_run_path
from rlfit.run.stepper import OneSeed
from rlfit.rundir.layout import RunDir, write_json
from rlfit.rundir.write_failures import stop_on_refusal
from rlfit.sinks.console import ConsoleSink


def train(
    env: str = DEFAULT_ENV,
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides: Sequence[str] = (),
    *,
    run_dir: str | Path | None = None,
    quiet: bool = True,
    live: bool | None = None,
    num_envs_auto: bool = False,
    device_memory: int | str | None = None,
) -> RunResult:
    """Trains `env` and returns the final state, counters and summary.

    `overrides` are `section.key=value` strings applied last (like `--set`). The run directory
    defaults to `runs/<env>-<timestamp>/`. `quiet=False` prints progress (a live bar when `live`).
    `num_envs_auto=True` trains with the largest configuration predicted to fit the device's memory, or
    `device_memory` bytes (an int, or a size such as '12GiB') when given; the plan is saved as plan.json.
    `run.fit_to_device` in the config (set by the `g1` preset) asks for the same. With no `preset` (and none in
    the config file) the preset is chosen for the device (`rlfit.planning.preset`): quick on a CPU,
    Playground's published settings on a GPU, sized down where they do not fit; plan.json and summary.json say which.

    >>> result = rlfit.train("CartpoleBalance", preset="quick", overrides=["run.seed=1"])
    >>> result.summary["final_eval_reward"], result.state.params
    """
    from rlfit.run.opener import open_session
    from rlfit.run.probes import StepProbes, planning_message

    choice = preset_for_device(env, preset, config_file, overrides)
    config = resolve(env, choice.name, config_file, overrides)
    planned = open_session(config, StepProbes(None if quiet else planning_message), device_memory=device_memory,
                           auto_num_envs=num_envs_auto, shrink_to_fit=choice.by_device and plan_backend() != "cpu")
    plan = dataclasses.replace(planned.plan, preset=choice.name, reasons=planned.plan.reasons + (choice.reason,))
    return train_planned(planned.config, plan, run_dir, env=planned.env, quiet=quiet, live=live,
                         note=f"rlfit: {choice.reason}" if choice.by_device else None)


def preset_for_device(env: str, preset: str | None, config_file: str | Path | None = None,
                      overrides: Sequence[str] = (), backend: str | None = None) -> PresetChoice:
    """The preset `rlfit train` uses: `preset`, else the config file's, else the one for this device (or for
    `backend`, where `rlfit plan` plans for another device)."""
    from rlfit.config.algorithms import config_module
    from rlfit.config.schema import chosen_algo, file_preset, read_yaml

    file_layer = read_yaml(config_file) if config_file is not None else {}
    named = preset or file_preset(file_layer, config_file)
    algo = chosen_algo(file_layer, overrides)
    return choose_preset(named, config_module(algo).PRESETS, backend or plan_backend())


def plan_backend() -> str:
    """The backend this process's JAX computes on ('cpu', 'gpu', 'tpu')."""
    import jax

    return jax.default_backend()


def train_config(config: Config, plan: Plan, run_dir: str | Path | None = None, *, quiet: bool = True,
                 live: bool | None = None, note: str | None = None) -> RunResult:
    """Trains a resolved config with a plan (validated input; writes the run directory, holding its lock). `note`
    (e.g. the preset chosen for the device) is printed, unless `quiet`, once the environment has loaded."""
    from rlfit.run.opener import open_planned

    open_planned(config)
    return train_planned(config, plan, run_dir, quiet=quiet, live=live, note=note)


def train_planned(config: Config, plan: Plan, run_dir: str | Path | None = None, *, env: Environment | None = None,
                  quiet: bool = True, live: bool | None = None, note: str | None = None) -> RunResult:
    """`train_config` once the process is set up (`rlfit.run.opener`): `env` is the environment planning loaded
    (None: loaded here), so that a process loads it once."""
    from rlfit.parallel.distributed import is_writer

    path = Path(run_dir) if run_dir else default_run_path(config.env.name)
    if not is_writer():  # another process of a distributed run: process 0 writes the run directory
        return execute(Trainer.build(config, plan, env=env), RunDir(path), quiet=True)
    check_new_run_dir(path)
    trainer = Trainer.build(config, plan, env=env)
    if note and not quiet:
        print(note, flush=True)
    directory, lock = create_run_dir(path, config)
    with lock:
        with stop_on_refusal(f"free space or fix permissions, then `rlfit resume {directory.path}`"):
            write_json(directory.plan, plan.to_dict())
        return execute(trainer, directory, quiet=quiet, live=live)


def execute(trainer: Trainer[TrainState], directory: RunDir, state: TrainState | None = None, progress: Progress | None = None, *,
            quiet: bool = True, live: bool | None = None) -> RunResult:
    """Runs `trainer` in `directory` from `state`/`progress` (fresh when None): a run is one lane
    (`rlfit.run.lanes.train_lanes`: sinks, checkpoints, signals), with the console unless `quiet`.

    The caller holds the directory's lock. A file of the run that cannot be written stops the run in one line
    (exit code 4), the checkpoints written before it intact. A run stopped by SIGTERM/SIGINT, saved and closed,
    raises StopRequested (the signal's exit code).
    """
    from rlfit.parallel.distributed import is_writer

    plan = trainer.plan
    quiet = quiet or not is_writer()  # with jax.distributed, the other processes write nothing
    console = None if quiet else ConsoleSink(plan.num_iterations, plan.num_iterations * plan.env_steps_per_iteration,
                                             start_iteration=progress.iteration if progress else 0, live=live)
    if console is not None and trainer.randomization.note:
        console.message(trainer.randomization.note)
    [result] = train_lanes(OneSeed(trainer), [LaneSpec(trainer, directory, progress)], state, console=console)
    if console is not None:
        console.message(summary_line(result))
    return result


def summary_line(result: RunResult) -> str:
    s = result.record
    assert s is not None, "a single run's result has its summary"
    reward = "n/a" if s.final_eval_reward is None else f"{s.final_eval_reward:.1f}"
    speed = "n/a" if s.sps_mean is None else f"{s.sps_mean:,.0f}"  # None: no step this session
    return (f"done: eval reward {reward} after {s.env_steps:,} steps; train {s.train_wall_s:.1f}s "
            f"({speed} steps/s), compile {s.compile_s:.1f}s; run dir {result.run_dir.path}")
