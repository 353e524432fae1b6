"""Predict the device memory of the compiled training iteration, before allocating anything.

For given batch sizes, XLA's compile-time analysis of the iteration (state donated) gives

    bytes = arguments + outputs - aliased + temporaries + generated code

on abstract inputs (`jax.eval_shape` of the initial state), so nothing is allocated or run. Compiling at
every candidate size would take minutes, so `fit_memory_model` compiles at two sizes of the candidate family
(`rlfit.planning.candidates`) and fits a line in `num_envs`: in that family the rollout buffer, the shuffled
copy and the per-minibatch activations all grow in proportion to `num_envs` (the environment state too),
while parameters, optimizer state and code do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlfit.config import Config
from rlfit.algos.ppo.sizes import BatchSizes
from rlfit.planning.candidates import scale_sizes

MEASURE_NUM_ENVS = (256, 2048)
"""The two sizes compiled for the fit (compile-only, so their size costs nothing)."""


@dataclass(frozen=True)
class MemoryPoint:
    """XLA's compile-time memory analysis of one training iteration, in bytes."""

    sizes: BatchSizes
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    """Outputs written into donated arguments (not counted twice)."""
    temp_bytes: int
    code_bytes: int

    @property
    def total_bytes(self) -> int:
        """Device bytes live while the iteration runs: arguments + outputs - aliased + temporaries + code."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes + self.code_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"num_envs": self.sizes.num_envs, "sizes": self.sizes._asdict(), "argument_bytes": self.argument_bytes,
                "output_bytes": self.output_bytes, "alias_bytes": self.alias_bytes, "temp_bytes": self.temp_bytes,
                "code_bytes": self.code_bytes, "total_bytes": self.total_bytes}


@dataclass(frozen=True)
class MemoryModel:
    """Bytes of one iteration as a line in num_envs: `intercept_bytes + bytes_per_env * num_envs`."""

    intercept_bytes: float
    bytes_per_env: float
    points: tuple[MemoryPoint, ...]
    backend: str
    """The JAX backend the points were compiled for ('cpu', 'gpu', ...)."""

    def estimate(self, num_envs: int) -> int:
        """Fitted bytes at `num_envs` (no safety margin)."""
        return int(round(self.intercept_bytes + self.bytes_per_env * num_envs))

    def to_dict(self) -> dict[str, Any]:
        return {"intercept_bytes": self.intercept_bytes, "bytes_per_env": self.bytes_per_env, "backend": self.backend,
                "points": [p.to_dict() for p in self.points]}


def point_from_analysis(sizes: BatchSizes, analysis: Any) -> MemoryPoint:
    """A MemoryPoint from a `Compiled.memory_analysis()` result (`CompiledMemoryStats`)."""
    return MemoryPoint(sizes, int(analysis.argument_size_in_bytes), int(analysis.output_size_in_bytes),
                       int(analysis.alias_size_in_bytes), int(analysis.temp_size_in_bytes),
                       int(analysis.generated_code_size_in_bytes))


def fit_line(points: Sequence[MemoryPoint]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of total bytes against num_envs; needs two distinct num_envs."""
    xs = [float(p.sizes.num_envs) for p in points]
    ys = [float(p.total_bytes) for p in points]
    if len(set(xs)) < 2:
        raise ValueError("fitting a line needs points at two or more different num_envs")
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def compile_iteration(config: Config, sizes: BatchSizes, env: Any = None) -> Any:
    """The training iteration for `sizes`, compiled ahead of time on abstract inputs (state donated)."""
    import jax

    from rlfit.plan import make_plan
    from rlfit.trainer import Trainer

    trainer = Trainer.build(config, make_plan(config, sizes), env=env)
    return jax.jit(trainer.train_iteration_fn(), donate_argnums=0).lower(trainer.abstract_state()).compile()


def analyze_iteration(config: Config, sizes: BatchSizes, env: Any = None) -> MemoryPoint:
    """XLA's memory analysis of the iteration at `sizes` on the default backend (compiles; allocates nothing)."""
    analysis = compile_iteration(config, sizes, env).memory_analysis()
    if analysis is None:
        raise RuntimeError("this JAX backend gives no compile-time memory analysis")
    return point_from_analysis(sizes, analysis)


def fit_memory_model(config: Config, env: Any = None, num_envs: Sequence[int] = MEASURE_NUM_ENVS) -> MemoryModel:
    """Compiles the iteration at each of `num_envs` (config's proportions) and fits a line through the results.

    `env` is the loaded environment (loaded once here when None). Takes one compile per point.
    """
    import jax

    from rlfit.envs import load_env
    from rlfit.plan import config_sizes

    env = env if env is not None else load_env(config.env, jax.default_backend())
    base = config_sizes(config)
    points = tuple(analyze_iteration(config, scale_sizes(base, n), env) for n in num_envs)
    intercept, slope = fit_line(points)
    return MemoryModel(intercept, slope, points, jax.default_backend())
