"""The run plan: everything derived from a frozen config and the device (sizes, iterations, precision, reasons).

The config says what the user asked for; the plan says what will run. The hardware planner
(`rlfit.planning`) can choose the sizes; by default they are the config's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from rlfit.algos.contract import Sizes
from rlfit.config.schema import Config
from rlfit.rundir.records import WRITTEN_WHEN_SET, JsonRecord


@dataclass(frozen=True)
class PlanExtra(JsonRecord):
    """plan.json's `extra` (`Plan.extra`): the memory planner's figures where it ran, and a seed group's record; each
    key only where it has a value (`rlfit.rundir.records.WRITTEN_WHEN_SET`)."""

    budget_bytes: int | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """Device bytes an iteration may use (the device's free memory or `--device-memory`, times the planner's
    fraction)."""
    margin: float | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """The safety factor on fitted bytes: a configuration fits when `estimate * margin <= budget_bytes`."""
    memory_model: dict[str, Any] | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """The fitted memory model (`rlfit.planning.memory_model.MemoryModel.to_dict()`: coefficients, `source`, the
    measured `points`)."""
    seed_group: dict[str, Any] | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """For a lane of a seed group: the group's `seeds`, size and reason (how `rlfit experiment resume` finds it)."""


@dataclass(frozen=True)
class Plan:
    """What will run."""

    sizes: Sizes
    """The algorithm's sizes NamedTuple (`rlfit.algos.contract.Sizes`: `num_envs`, `steps_per_iteration`, ...)."""
    env_steps_per_iteration: int
    """Simulator steps per iteration (policy steps * action_repeat)."""
    num_iterations: int
    """ceil(num_timesteps / env_steps_per_iteration)."""
    backend: str
    device: str
    impl: str
    precision: str
    reasons: tuple[str, ...] = ()
    predicted_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """`PlanExtra.to_json()`: the memory planner's figures (budget, margin, fitted model), as JSON values."""
    devices: int = 1
    """Local devices the run is split over (`rlfit.parallel.mesh`); the sizes are totals over all of them."""
    preset: str | None = None
    """The preset the config was built from (named, or chosen for the device: `rlfit.planning.preset`);
    None where the config did not come from `rlfit train` (the API's `train_config`, an experiment's trial)."""

    @property
    def figures(self) -> PlanExtra:
        """`extra` as its record."""
        return PlanExtra.from_json(self.extra)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["sizes"] = self.sizes._asdict()
        out["reasons"] = list(self.reasons)
        return out

    def with_sizes(self, sizes: Sizes, config: Config, done: tuple[int, int], reason: str) -> Plan:
        """The same plan with other batch sizes from a point `done` = (iterations, env steps) on."""
        per_iteration = sizes.steps_per_iteration * config.env.action_repeat
        return dataclasses.replace(self, sizes=sizes, env_steps_per_iteration=per_iteration,
                                   num_iterations=iterations_to_total(config, per_iteration, done),
                                   reasons=self.reasons + (reason,), predicted_bytes=None)


def config_sizes(config: Config) -> Sizes:
    """The sizes the config asks for, as its algorithm's sizes NamedTuple."""
    from rlfit.algos.registry import algorithm

    return algorithm(config.algo).config_sizes(config)


def sizes_from_dict(config: Config, sizes: dict[str, Any]) -> Sizes:
    """Sizes saved in a plan (plan.json, a checkpoint's record) as the config's algorithm's NamedTuple."""
    from rlfit.algos.registry import algorithm

    return algorithm(config.algo).sizes_type(**sizes)


def _valid_num_envs(config: Config, num_envs: int) -> bool:
    """Whether `config` with this many environments passes its algorithm's rules."""
    from rlfit.config.algorithms import config_module
    from rlfit.errors import UserError

    try:
        config_module(config.algo).check(config.replace(**{config.algo: {"num_envs": num_envs}}))
    except UserError:
        return False
    return True


def iterations_to_total(config: Config, per_iteration: int, done: tuple[int, int] = (0, 0)) -> int:
    """Iterations needed to reach `run.num_timesteps` when `done` = (iterations, env steps) are behind us."""
    iterations, env_steps = done
    return iterations + max(0, math.ceil((config.run.num_timesteps - env_steps) / per_iteration))


def make_plan(config: Config, sizes: Sizes | None = None, reasons: tuple[str, ...] = (),
              done: tuple[int, int] = (0, 0), devices: int | None = None) -> Plan:
    """The plan for `config` on this process's JAX devices, with `sizes` (default: the config's).

    `done` = (iterations, env steps) already trained (when resuming); the plan runs to `run.num_timesteps`.
    `devices` (default: from `run.devices`) is how many devices (of every process) the run is split over; raises UserError
    when `num_envs` does not split evenly over them.
    """
    import jax

    from rlfit.envs.loading import choose_impl
    from rlfit.parallel.mesh import check_divisible, device_count

    sizes = sizes or config_sizes(config)
    device = jax.devices()[0]
    if devices is None:
        devices = device_count(config.run.devices, len(jax.devices()), jax.default_backend())
    check_divisible(sizes.num_envs, devices, f"{config.algo}.num_envs", lambda n: _valid_num_envs(config, n))
    per_iteration = sizes.steps_per_iteration * config.env.action_repeat
    return Plan(
        sizes=sizes,
        env_steps_per_iteration=per_iteration,
        num_iterations=iterations_to_total(config, per_iteration, done),
        backend=jax.default_backend(),
        device=f"{device.platform}:{getattr(device, 'device_kind', device.platform)}",
        impl=choose_impl(config.env.impl),
        precision=config.run.precision,
        reasons=reasons or ("sizes from the config",),
        devices=devices,
    )
