"""The one set-up of a training process, for `rlfit train`, `rlfit resume` and an experiment's seed groups alike:
the checks that refuse a run before anything is built (W&B asked for but missing, a precision this device cannot
keep), JAX configured once (`rlfit.hardware.jax_setup.configure_jax`: matmul precision, the compile cache), then the
plan (`rlfit.planning.device_plan.plan_for`). The lanes' sinks and checkpointers are opened in one place too
(`rlfit.run.lanes.open_lane`).

    planned = open_session(config, StepProbes(say), auto_num_envs=True)   # a new run, a restart, a seed group
    open_planned(config)          # a plan made already: a resumed run's (its checkpoint's sizes), `train_config`'s
"""

from __future__ import annotations

from rlfit.config.schema import Config
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.device_plan import Planned, check_device_precision, plan_for
from rlfit.planning.measure import StepMeasurer
from rlfit.sinks.wandb import check_wandb_available


def open_session(config: Config, measurer: StepMeasurer, *, device_memory: int | str | None = None,
                 auto_num_envs: bool = False, shrink_to_fit: bool = False) -> Planned:
    """`config` checked, JAX configured for its precision (once, before planning: the planner's probes compile as,
    and for, training), and its plan on this device (`plan_for`; fitted to the device where `auto_num_envs` or
    `run.fit_to_device` asks). Raises UserError where W&B is missing, or as `plan_for` does."""
    check_wandb_available(config)
    configure_jax(config.run.precision)
    return plan_for(config, measurer, device_memory=device_memory,
                    auto_num_envs=auto_num_envs or config.run.fit_to_device, shrink_to_fit=shrink_to_fit)


def open_planned(config: Config) -> None:
    """`open_session` for a run whose plan is made already (a resumed run's, from its checkpoint's sizes; the API's
    `train_config`): refused first where W&B is missing or this device cannot keep the run's precision, then JAX
    configured for it."""
    check_wandb_available(config)
    check_device_precision(config.run.precision)
    configure_jax(config.run.precision)
