"""The run plan: everything derived from a frozen config and the device (sizes, iterations, precision, reasons).

The config says what the user asked for; the plan says what will run. The hardware planner
(`rlfit.planning`) can choose the sizes; by default they are the config's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from rlfit.config import Config


@dataclass(frozen=True)
class Plan:
    """What will run."""

    sizes: Any
    """The algorithm's sizes NamedTuple (`num_envs`, `steps_per_iteration`, ...)."""
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

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["sizes"] = self.sizes._asdict()
        out["reasons"] = list(self.reasons)
        return out

    def with_sizes(self, sizes: Any, config: Config, done: tuple[int, int], reason: str) -> Plan:
        """The same plan with other batch sizes from a point `done` = (iterations, env steps) on."""
        per_iteration = sizes.steps_per_iteration * config.env.action_repeat
        return dataclasses.replace(self, sizes=sizes, env_steps_per_iteration=per_iteration,
                                   num_iterations=iterations_to_total(config, per_iteration, done),
                                   reasons=self.reasons + (reason,), predicted_bytes=None)


def config_sizes(config: Config) -> Any:
    """The sizes the config asks for, as its algorithm's sizes NamedTuple."""
    from rlfit.algos.registry import algorithm

    return algorithm(config.algo).config_sizes(config)


def sizes_from_dict(config: Config, sizes: dict[str, Any]) -> Any:
    """Sizes saved in a plan (plan.json, a checkpoint's record) as the config's algorithm's NamedTuple."""
    from rlfit.algos.registry import algorithm

    return algorithm(config.algo).sizes_type(**sizes)


def iterations_to_total(config: Config, per_iteration: int, done: tuple[int, int] = (0, 0)) -> int:
    """Iterations needed to reach `run.num_timesteps` when `done` = (iterations, env steps) are behind us."""
    iterations, env_steps = done
    return iterations + max(0, math.ceil((config.run.num_timesteps - env_steps) / per_iteration))


def make_plan(config: Config, sizes: Any = None, reasons: tuple[str, ...] = (),
              done: tuple[int, int] = (0, 0)) -> Plan:
    """The plan for `config` on the default JAX device, with `sizes` (default: the config's).

    `done` = (iterations, env steps) already trained (when resuming); the plan runs to `run.num_timesteps`.
    """
    import jax

    from rlfit.envs.loading import choose_impl

    sizes = sizes or config_sizes(config)
    device = jax.devices()[0]
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
    )
