"""Predict the device memory of the compiled training step, before allocating anything.

For given sizes, XLA's compile-time analysis of the step (state donated) gives

    bytes = arguments + outputs - aliased + temporaries + generated code

on abstract inputs (`jax.eval_shape` of the initial state), so nothing is allocated or run. Compiling at
every candidate size would take minutes, so `fit_memory_model` compiles at the algorithm's probe sizes
(`MemoryRules.measured_sizes`: where the rules know it, the size training runs when memory does not limit, which
`--num-envs auto` compiles as training does so that training reuses it; the others never a size the planner can
choose, so training never compiles them again) and fits

    bytes = intercept + per_env * num_envs + per_transition * stored transitions

by least squares: PPO's rollout buffer, shuffled copy and per-minibatch activations grow in proportion to
`num_envs` (the environment state too) and it stores no transitions; SAC's replay buffer grows with its
capacity (its step with `num_envs`). Parameters, optimizer state and code are the intercept.

A probe that is only analysed, never run, compiles on a CPU with `PROBE_COMPILER_OPTIONS` (LLVM's cheaper
code generation: buffer assignment, which the analysis reads, happens before it and is the same), and the
probes compile side by side in threads.

Where the first probe is the size training runs when memory does not limit (`MemoryModel.first_is_unlimited_choice`)
the planner compiles it alone first (`MemoryModel.measured_once`): with bytes a line of non-negative intercept and
slopes, no smaller size needs more than it and a larger one at most in proportion, so when it fits the budget the
choice is made and the other probes are never compiled; only when it does not fit are they compiled and the line
fitted (`rlfit.planning.measure`).

Before any of that, the planner estimates the step at those sizes from its lowered program, which costs a trace
and no compile (`rlfit.hardware.program_memory`, `MemoryModel.source` "lowered"): the values of the unoptimized
program alive at once, those XLA's fusion is expected to keep out of memory left out (`rlfit.hardware.fusion`);
within 10% of XLA's CPU analysis for the DM Control PPO steps measured (benchmarks/trace_bound.py; G1's step at 8
environments +51%), where the bound that counts every value as its own buffer was 1.14-1.32x. Where the estimate
with the margin fits the budget, nothing is compiled for planning at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import math

import numpy as np



@dataclass(frozen=True)
class MemoryPoint:
    """The memory of one training step, in bytes: XLA's compile-time analysis, or the estimate read from the lowered
    program without compiling it (`MemoryModel.source`: then `temp_bytes` is the estimate less arguments and
    results, negative where the results are written into the donated arguments, and nothing is aliased)."""

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
    """Bytes of one step: `intercept_bytes + bytes_per_env * num_envs + bytes_per_transition * transitions`; or,
    measured at one size only (`measured_once`, coefficients None), the bound that one point sets (`estimate`)."""

    intercept_bytes: float | None
    bytes_per_env: float | None
    bytes_per_transition: float | None
    """Per transition the state stores (0 for an algorithm that stores none)."""
    points: tuple[MemoryPoint, ...]
    backend: str
    """The JAX backend the points were compiled for ('cpu', 'gpu', ...)."""
    first_is_unlimited_choice: bool = False
    """Whether `points[0]` is at the sizes the rules choose when memory does not limit (the probe training may
    reuse, `rlfit.planning.measure`)."""
    source: str = "xla"
    """Where the points come from: "xla" (XLA's compile-time analysis of the compiled step) or "lowered" (an
    estimate read from the lowered step without compiling it, `rlfit.hardware.program_memory`; one point only)."""

    @classmethod
    def from_one_point(cls, point: MemoryPoint, backend: str, first_is_unlimited_choice: bool,
                       source: str = "xla") -> MemoryModel:
        """The model of a step measured (or estimated from its lowered program, `source`) at one size only (see
        `estimate`)."""
        return cls(None, None, None, (point,), backend, first_is_unlimited_choice, source)

    @property
    def measured_once(self) -> bool:
        """Measured at one size: no line was fitted, `estimate` is an upper bound."""
        return self.intercept_bytes is None

    def estimate(self, num_envs: int, transitions: int = 0) -> int:
        """Fitted bytes at `num_envs` storing `transitions` (no safety margin). Measured once: an upper bound from
        the one point, its bytes times the larger of 1 and the ratios of `num_envs` and `transitions` to its own
        (bytes a line with non-negative intercept and slopes: at most the point's at smaller sizes, at most in
        proportion at larger ones)."""
        if self.measured_once:
            point = self.points[0]
            ratios = [1.0, num_envs / point.sizes.num_envs] + ([transitions / point.transitions] if point.transitions
                                                               else [])
            return int(math.ceil(point.total_bytes * max(ratios)))
        assert self.intercept_bytes is not None and self.bytes_per_env is not None \
            and self.bytes_per_transition is not None, "a fitted model has an intercept and both slopes"
        return int(round(self.intercept_bytes + self.bytes_per_env * num_envs + self.bytes_per_transition * transitions))

    def to_dict(self) -> dict[str, Any]:
        return {"intercept_bytes": self.intercept_bytes, "bytes_per_env": self.bytes_per_env,
                "bytes_per_transition": self.bytes_per_transition, "backend": self.backend,
                "measured_once": self.measured_once, "first_is_unlimited_choice": self.first_is_unlimited_choice,
                "source": self.source,
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


