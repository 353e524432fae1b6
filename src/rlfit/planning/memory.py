"""Predict the device memory of the compiled training step, before allocating anything.

For given sizes, XLA's compile-time analysis of the step (state donated) gives

    bytes = arguments + outputs - aliased + temporaries + generated code

on abstract inputs (`jax.eval_shape` of the initial state), so nothing is allocated or run. Compiling at
every candidate size would take minutes, so `fit_memory_model` compiles at the algorithm's measured sizes
(`MemoryRules.measured_sizes`) and fits

    bytes = intercept + per_env * num_envs + per_transition * stored transitions

by least squares: PPO's rollout buffer, shuffled copy and per-minibatch activations grow in proportion to
`num_envs` (the environment state too) and it stores no transitions; SAC's replay buffer grows with its
capacity (its step with `num_envs`). Parameters, optimizer state and code are the intercept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlfit.config.schema import Config


@dataclass(frozen=True)
class MemoryPoint:
    """XLA's compile-time memory analysis of one training step, in bytes."""

    sizes: Any
    """The algorithm's sizes NamedTuple."""
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    """Outputs written into donated arguments (not counted twice)."""
    temp_bytes: int
    code_bytes: int
    transitions: int = 0
    """Transitions the state stores at these sizes (a replay buffer's capacity)."""

    @property
    def total_bytes(self) -> int:
        """Device bytes live while the iteration runs: arguments + outputs - aliased + temporaries + code."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes + self.code_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"num_envs": self.sizes.num_envs, "sizes": self.sizes._asdict(), "argument_bytes": self.argument_bytes,
                "output_bytes": self.output_bytes, "alias_bytes": self.alias_bytes, "temp_bytes": self.temp_bytes,
                "code_bytes": self.code_bytes, "transitions": self.transitions, "total_bytes": self.total_bytes}


@dataclass(frozen=True)
class MemoryModel:
    """Bytes of one step: `intercept_bytes + bytes_per_env * num_envs + bytes_per_transition * transitions`."""

    intercept_bytes: float
    bytes_per_env: float
    bytes_per_transition: float
    """Per transition the state stores (0 for an algorithm that stores none)."""
    points: tuple[MemoryPoint, ...]
    backend: str
    """The JAX backend the points were compiled for ('cpu', 'gpu', ...)."""

    def estimate(self, num_envs: int, transitions: int = 0) -> int:
        """Fitted bytes at `num_envs` storing `transitions` (no safety margin)."""
        return int(round(self.intercept_bytes + self.bytes_per_env * num_envs + self.bytes_per_transition * transitions))

    def to_dict(self) -> dict[str, Any]:
        return {"intercept_bytes": self.intercept_bytes, "bytes_per_env": self.bytes_per_env,
                "bytes_per_transition": self.bytes_per_transition, "backend": self.backend,
                "points": [p.to_dict() for p in self.points]}


def point_from_analysis(sizes: Any, analysis: Any, transitions: int = 0) -> MemoryPoint:
    """A MemoryPoint from a `Compiled.memory_analysis()` result (`CompiledMemoryStats`)."""
    return MemoryPoint(sizes, int(analysis.argument_size_in_bytes), int(analysis.output_size_in_bytes),
                       int(analysis.alias_size_in_bytes), int(analysis.temp_size_in_bytes),
                       int(analysis.generated_code_size_in_bytes), transitions)


def fit_coefficients(points: Sequence[MemoryPoint]) -> tuple[float, float, float]:
    """Least-squares (intercept, per env, per transition) of total bytes; needs two distinct num_envs, and two
    distinct stored transition counts unless every point stores the same (then per transition is 0)."""
    if len({p.sizes.num_envs for p in points}) < 2:
        raise ValueError("fitting needs points at two or more different num_envs")
    stores = len({p.transitions for p in points}) > 1
    columns = [[1.0, float(p.sizes.num_envs)] + ([float(p.transitions)] if stores else []) for p in points]
    solution = np.linalg.lstsq(np.array(columns), np.array([float(p.total_bytes) for p in points]), rcond=None)[0]
    return float(solution[0]), float(solution[1]), float(solution[2]) if stores else 0.0


def compile_iteration(config: Config, sizes: Any, env: Any = None) -> Any:
    """The training step for `sizes` on one device, compiled ahead of time on abstract inputs (state donated).
    (A run split over several devices is planned per device: `rlfit.planning.planner`.)"""
    from rlfit.planning.plan import make_plan
    from rlfit.run.build import Trainer

    return Trainer.build(config, make_plan(config, sizes, devices=1), env=env).compile_iteration()


def analyze_iteration(config: Config, sizes: Any, env: Any = None) -> MemoryPoint:
    """XLA's memory analysis of the step at `sizes` on the default backend (compiles; allocates nothing)."""
    from rlfit.config.algorithms import algorithm

    analysis = compile_iteration(config, sizes, env).memory_analysis()
    if analysis is None:
        raise RuntimeError("this JAX backend gives no compile-time memory analysis")
    return point_from_analysis(sizes, analysis, algorithm(config.algo).memory.stored_transitions(sizes))


def fit_memory_model(config: Config, env: Any = None) -> MemoryModel:
    """Compiles the step at the algorithm's measured sizes and fits the model through the results.

    `env` is the loaded environment (loaded once here when None). Takes one compile per point.
    """
    import jax

    from rlfit.config.algorithms import algorithm
    from rlfit.envs import load_env

    env = env if env is not None else load_env(config.env, jax.default_backend())
    measured = algorithm(config.algo).memory.measured_sizes(config)
    points = tuple(analyze_iteration(config, sizes, env) for sizes in measured)
    return MemoryModel(*fit_coefficients(points), points, jax.default_backend())
