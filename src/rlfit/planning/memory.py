"""Predict the device memory of the compiled training step, before allocating anything.

For given sizes, XLA's compile-time analysis of the step (state donated) gives

    bytes = arguments + outputs - aliased + temporaries + generated code

on abstract inputs (`jax.eval_shape` of the initial state), so nothing is allocated or run. Compiling at
every candidate size would take minutes, so `fit_memory_model` compiles at the algorithm's probe sizes
(`MemoryRules.measured_sizes`: small, and never a size the planner can choose, so training never compiles a
probe's size again) and fits

    bytes = intercept + per_env * num_envs + per_transition * stored transitions

by least squares: PPO's rollout buffer, shuffled copy and per-minibatch activations grow in proportion to
`num_envs` (the environment state too) and it stores no transitions; SAC's replay buffer grows with its
capacity (its step with `num_envs`). Parameters, optimizer state and code are the intercept.

A probe is only analysed, never run, so on a CPU it compiles with `PROBE_COMPILER_OPTIONS` (LLVM's cheaper
code generation: buffer assignment, which the analysis reads, happens before it and is the same), and the
probes compile side by side in threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlfit.config import Config


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


PROBE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
"""XLA options of a probe compiled on a CPU: LLVM's cheaper code generation. XLA assigns buffers on the optimized
HLO before LLVM runs, so the memory analysis is the same byte for byte (tests/planning/test_memory.py) while the
compile takes about half as long. Other backends compile probes with the step's own options (not yet measured
there)."""


def probe_options(ynn_fusions: bool) -> dict[str, Any]:
    """The compiler options of a probe: the step's own (`rlfit.jax_setup.compiler_options`), on a CPU with
    PROBE_COMPILER_OPTIONS added."""
    import jax

    from rlfit.jax_setup import compiler_options

    cheap = PROBE_COMPILER_OPTIONS if jax.default_backend() == "cpu" else {}
    return {**compiler_options(ynn_fusions), **cheap}


def lower_iteration(config: Config, sizes: Any, env: Any = None) -> tuple[Any, dict[str, Any]]:
    """(the training step for `sizes` on one device lowered on abstract inputs with the state donated, the
    compiler options a probe of it compiles with). Traces; compiles nothing. (A run split over several
    devices is planned per device: `rlfit.planning.planner`.)"""
    import jax

    from rlfit.plan import make_plan
    from rlfit.trainer import Trainer

    trainer = Trainer.build(config, make_plan(config, sizes, devices=1), env=env)
    lowered = jax.jit(trainer.train_iteration_fn(), donate_argnums=(0,)).lower(trainer.abstract_state())
    return lowered, probe_options(trainer.step_ynn_fusions)


def compile_iteration(config: Config, sizes: Any, env: Any = None) -> Any:
    """The training step for `sizes` on one device compiled as a probe (`lower_iteration`): for its memory
    analysis, not to run."""
    lowered, options = lower_iteration(config, sizes, env)
    return lowered.compile(compiler_options=options)


def analyze_iteration(config: Config, sizes: Any, env: Any = None) -> MemoryPoint:
    """XLA's memory analysis of the step at `sizes` on the default backend (compiles; allocates nothing)."""
    return analyze_compiled(config, sizes, compile_iteration(config, sizes, env))


def analyze_compiled(config: Config, sizes: Any, compiled: Any) -> MemoryPoint:
    """The MemoryPoint of the step at `sizes` from its compiled executable's memory analysis."""
    from rlfit.algos.registry import algorithm

    analysis = compiled.memory_analysis()
    if analysis is None:
        raise RuntimeError("this JAX backend gives no compile-time memory analysis")
    return point_from_analysis(sizes, analysis, algorithm(config.algo).memory.stored_transitions(sizes))


def analyze_probes(config: Config, probes: Sequence[Any], env: Any) -> tuple[MemoryPoint, ...]:
    """The MemoryPoints of the step at each of `probes`: traced one after another here (tracing holds Python's
    lock), each compiled in a thread as soon as it is traced (XLA compiles without the lock), so a probe's compile
    runs beside the next probe's tracing and the other compiles."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        compiling = []
        for sizes in probes:
            lowered, options = lower_iteration(config, sizes, env)
            compiling.append(pool.submit(lowered.compile, compiler_options=options))
        compiled = [future.result() for future in compiling]
    return tuple(analyze_compiled(config, sizes, c) for sizes, c in zip(probes, compiled, strict=True))


def fit_memory_model(config: Config, env: Any = None) -> MemoryModel:
    """Compiles the step at the algorithm's probe sizes and fits the model through the results.

    `env` is the loaded environment (loaded once here when None). Takes one compile per probe (side by side).
    """
    import jax

    from rlfit.algos.registry import algorithm
    from rlfit.envs import load_env

    env = env if env is not None else load_env(config.env, jax.default_backend())
    points = analyze_probes(config, algorithm(config.algo).memory.measured_sizes(config), env)
    return MemoryModel(*fit_coefficients(points), points, jax.default_backend())
