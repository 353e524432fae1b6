"""The training step measured at given sizes without running it: lowered at those sizes (as training lowers it),
then estimated from its lowered StableHLO (`rlfit.hardware.program_memory`, no compile) or compiled for XLA's
memory analysis (`StepProbes`, the measurer `rlfit.run` hands the planner). Which measure the plan needs, and what
it means, is the planner's (`rlfit.planning.measure`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import ParamSpec, TypeVar

import jax

from rlfit.algos.contract import Sizes, TrainState
from rlfit.algos.registry import algorithm
from rlfit.config.schema import Config
from rlfit.hardware.jax_setup import lower_ahead
from rlfit.hardware.program_memory import UnboundedProgram, lowered_bound
from rlfit.hardware.units import format_bytes
from rlfit.planning.measure import described
from rlfit.planning.memory_model import MemoryPoint, point_from_analysis
from rlfit.planning.plan import make_plan
from rlfit.run.trainer import PROGRAM_NAMES, Environment, StartingState, Trainer


PROBE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
"""XLA options of a probe compiled on a CPU: LLVM's cheaper code generation. XLA assigns buffers on the optimized
HLO before LLVM runs, so the memory analysis is the same byte for byte (tests/planning/test_memory.py) while the
compile takes about half as long. Other backends compile probes with the step's own options (not yet measured
there)."""


def probe_options(ynn_fusions: bool) -> dict[str, str | int | float | bool]:
    """The compiler options of a probe: the step's own (`rlfit.hardware.jax_setup.compiler_options`), on a CPU with
    PROBE_COMPILER_OPTIONS added."""
    from rlfit.hardware.jax_setup import compiler_options

    cheap = PROBE_COMPILER_OPTIONS if jax.default_backend() == "cpu" else {}
    return {**compiler_options(ynn_fusions), **cheap}


def lower_iteration(config: Config, sizes: Sizes, env: Environment | None = None
                    ) -> tuple[jax.stages.Lowered, Trainer[TrainState]]:
    """(the training step for `sizes` on one device lowered on abstract inputs with the state donated, as
    `Trainer.compile_iteration` lowers it on one device, so the persistent compile cache holds one for the other;
    the Trainer it was built with). Traces; compiles nothing. (A run split over several devices is planned per
    device: `rlfit.planning.fit`.)"""
    trainer = Trainer.build(config, make_plan(config, sizes, devices=1), env=env)
    lowered: jax.stages.Lowered = lower_ahead(trainer.train_iteration_fn(), trainer.abstract_state(), donate_argnums=(0,),
                          store_key=trainer.store_key(PROGRAM_NAMES[0]))
    return lowered, trainer


def analyze_compiled(config: Config, sizes: Sizes, compiled: jax.stages.Compiled) -> MemoryPoint:
    """The MemoryPoint of the step at `sizes` from its compiled executable's memory analysis."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        raise RuntimeError("this JAX backend gives no compile-time memory analysis")
    return point_from_analysis(sizes, analysis, algorithm(config.algo).memory.stored_transitions(sizes))


class StepProbes:
    """The training step measured for the planner (`rlfit.planning.measure.StepMeasurer`): lowered at given sizes
    as training lowers it, then estimated from its lowered program or compiled for XLA's memory analysis. It loads
    the environment on its first measure and keeps it (`env`), for every later measure and for training
    (`rlfit.planning.device_plan.Planned.env`); a program lowered for an estimate is kept for the compile that may follow.
    `say` (the console's, or None) hears what is estimated and compiled, and the planner's reasons."""

    def __init__(self, say: Callable[[str], None] | None = None, env: Environment | None = None) -> None:
        self.say = say
        """Hears each measure and the planner's decisions (`rlfit.planning.measure`), or None."""
        self._env = env
        """The environment measured on (given, or loaded by the first measure)."""
        self._lowered: dict[Sizes, tuple[Config, jax.stages.Lowered, Trainer[TrainState]]] = {}
        """Programs lowered for an estimate and not yet compiled, by their sizes, with the config they are for."""

    @property
    def env(self) -> Environment | None:
        """The environment loaded for measuring (None where nothing was measured and none given)."""
        return self._env

    def environment(self, config: Config) -> Environment:
        """The environment of `config` on this process's backend: loaded once, on the first call."""
        if self._env is None:
            from rlfit.envs import load_env

            self._env = load_env(config.env, jax.default_backend())
        return self._env

    def estimate(self, config: Config, sizes: Sizes) -> MemoryPoint | None:
        """The step's memory at `sizes` estimated from its StableHLO (`rlfit.hardware.program_memory`: the walk with
        XLA's fusion modelled, `ProgramBound.estimate_bytes`), the
        step traced and lowered as training lowers it (the program store then holds it for training); no compile.
        None where the program holds a value of no static size (`UnboundedProgram`). The lowered program is kept
        for a compile of the same sizes (`analyze`)."""
        self._tell(f"planning: estimating the training step's memory at {described(config, sizes)} from its lowered "
                   "program (no compile)")
        program, trainer = lower_iteration(config, sizes, self.environment(config))
        self._lowered[sizes] = (config, program, trainer)
        try:
            bound = lowered_bound(program)
        except UnboundedProgram as reason:
            self._tell(f"planning: no estimate without compiling ({reason})")
            return None
        temp = bound.estimate_bytes - bound.argument_bytes - bound.output_bytes
        return MemoryPoint(sizes, bound.argument_bytes, bound.output_bytes, 0, temp, 0,
                           algorithm(config.algo).memory.stored_transitions(sizes))

    def analyze(self, config: Config, probes: Sequence[Sizes], as_training: Sizes | None = None
                ) -> tuple[MemoryPoint, ...]:
        """The MemoryPoints of the step at each of `probes`: traced one after another here (tracing holds Python's
        lock), each compiled in a thread as soon as it is traced (XLA compiles without the lock), so a probe's
        compile runs beside the next probe's tracing and the other compiles. The probe at `as_training` (sizes, or
        None) compiles with training's own options (the persistent cache then holds training's step at those
        sizes), and training's starting state at those sizes compiles beside it (`training_programs_beside`); the
        others with `probe_options`. The first probe is traced and compiled first. Each probe's start and its
        compile's seconds and bytes are told to `say`. A program kept from `estimate` is compiled as it is, not traced
        again."""
        from concurrent.futures import ThreadPoolExecutor

        from rlfit.hardware.jax_setup import compiler_options

        with ThreadPoolExecutor(max_workers=len(probes) + 1) as pool:
            compiling: list[Future[tuple[jax.stages.Compiled, float]]] = []
            beside: list[Future[tuple[StartingState[TrainState], object]]] = []
            for sizes in probes:
                self._tell(f"planning: compiling the training step at {described(config, sizes)} for XLA's memory "
                           "analysis" + (" (as training compiles it, for training to reuse)" if sizes == as_training
                                         else ""))
                program, trainer = self._lowered_at(config, sizes)
                options = (compiler_options(trainer.step_ynn_fusions) if sizes == as_training
                           else probe_options(trainer.step_ynn_fusions))
                compiling.append(pool.submit(timed, program.compile,  # type: ignore[arg-type]  # jax's stubs: str/bool only
                                             compiler_options=options))  # XLA takes its integer options too
                if sizes == as_training:
                    beside = training_programs_beside(trainer, pool)
            compiled = [future.result() for future in compiling]
            for future in beside:
                future.exception()  # waited for; a failure is training's to meet and report when it compiles again
        points = tuple(analyze_compiled(config, sizes, c) for sizes, (c, _) in zip(probes, compiled, strict=True))
        for point, (_, seconds) in zip(points, compiled, strict=True):
            self._tell(f"planning: {described(config, point.sizes)} compiled in {seconds:.1f}s: "
                       f"{format_bytes(point.total_bytes)} by XLA's analysis")
        return points

    def _lowered_at(self, config: Config, sizes: Sizes) -> tuple[jax.stages.Lowered, Trainer[TrainState]]:
        """The step at `sizes` lowered: the one `estimate` kept for this config (taken: it compiles once), else
        lowered now."""
        kept = self._lowered.pop(sizes, None)
        if kept is not None and kept[0] == config:
            return kept[1], kept[2]
        return lower_iteration(config, sizes, self.environment(config))

    def _tell(self, line: str) -> None:
        if self.say is not None:
            self.say(line)


ResultT = TypeVar("ResultT")
WorkArgs = ParamSpec("WorkArgs")


def timed(work: Callable[WorkArgs, ResultT], *args: WorkArgs.args, **kwargs: WorkArgs.kwargs) -> tuple[ResultT, float]:
    """(`work(*args, **kwargs)`, its seconds)."""
    import time

    started = time.perf_counter()
    return work(*args, **kwargs), time.perf_counter() - started


def training_programs_beside(trainer: Trainer[TrainState], pool: Executor
                             ) -> list[Future[tuple[StartingState[TrainState], object]]]:
    """Starts compiling in `pool` what training compiles before its first step besides the step itself: the
    starting state (a plain `train` compiles it beside its step too). It lands in the persistent compile cache
    and the program store, so that under `--num-envs auto` training reads it back as it reads its step, and the
    planner's probe costs the wall time a plain `train` spends compiling. (The evaluation is not needed before
    the first step: training compiles it in the background, as a plain `train` does.) Returns the futures
    (compiled for nothing if the planner then chooses other sizes)."""
    return [pool.submit(trainer.starting_state_program, trainer.config.run.seed)]


def planning_message(text: str) -> None:
    """A line of the planner's (what it compiles) on standard error, where the console writes once training starts."""
    import sys

    print(text, file=sys.stderr, flush=True)
