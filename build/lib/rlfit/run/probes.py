"""The training step measured at given sizes without running it: lowered at those sizes (as training lowers it),
then bounded from its lowered StableHLO (`rlfit.hardware.program_memory`, no compile) or compiled for XLA's
memory analysis. `rlfit.run.sizing` decides which the plan needs; the planner itself only reasons about numbers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from rlfit.algos.registry import algorithm
from rlfit.config.schema import Config
from rlfit.hardware.jax_setup import lower_ahead
from rlfit.hardware.program_memory import UnboundedProgram, lowered_bound
from rlfit.hardware.units import format_bytes
from rlfit.planning.memory import MemoryModel, MemoryPoint, point_from_analysis
from rlfit.planning.plan import make_plan
from rlfit.planning.planner import num_envs_cap, unlimited_choice
from rlfit.run.build import PROGRAM_NAMES, Trainer


PROBE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
"""XLA options of a probe compiled on a CPU: LLVM's cheaper code generation. XLA assigns buffers on the optimized
HLO before LLVM runs, so the memory analysis is the same byte for byte (tests/planning/test_memory.py) while the
compile takes about half as long. Other backends compile probes with the step's own options (not yet measured
there)."""


def probe_options(ynn_fusions: bool) -> dict[str, Any]:
    """The compiler options of a probe: the step's own (`rlfit.hardware.jax_setup.compiler_options`), on a CPU with
    PROBE_COMPILER_OPTIONS added."""
    from rlfit.hardware.jax_setup import compiler_options

    cheap = PROBE_COMPILER_OPTIONS if jax.default_backend() == "cpu" else {}
    return {**compiler_options(ynn_fusions), **cheap}


def lower_iteration(config: Config, sizes: Any, env: Any = None) -> tuple[Any, Trainer]:
    """(the training step for `sizes` on one device lowered on abstract inputs with the state donated, as
    `Trainer.compile_iteration` lowers it on one device, so the persistent compile cache holds one for the other;
    the Trainer it was built with). Traces; compiles nothing. (A run split over several devices is planned per
    device: `rlfit.planning.planner`.)"""
    trainer = Trainer.build(config, make_plan(config, sizes, devices=1), env=env)
    lowered = lower_ahead(trainer.train_iteration_fn(), trainer.abstract_state(), donate_argnums=(0,),
                          store_key=trainer.store_key(PROGRAM_NAMES[0]))
    return lowered, trainer


def compile_iteration(config: Config, sizes: Any, env: Any = None) -> Any:
    """The training step for `sizes` on one device compiled as a probe (`lower_iteration`, `probe_options`): for
    its memory analysis, not to run."""
    lowered, trainer = lower_iteration(config, sizes, env)
    return lowered.compile(compiler_options=probe_options(trainer.step_ynn_fusions))


def analyze_iteration(config: Config, sizes: Any, env: Any = None) -> MemoryPoint:
    """XLA's memory analysis of the step at `sizes` on the default backend (compiles; allocates nothing)."""
    return analyze_compiled(config, sizes, compile_iteration(config, sizes, env))


def analyze_compiled(config: Config, sizes: Any, compiled: Any) -> MemoryPoint:
    """The MemoryPoint of the step at `sizes` from its compiled executable's memory analysis."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        raise RuntimeError("this JAX backend gives no compile-time memory analysis")
    return point_from_analysis(sizes, analysis, algorithm(config.algo).memory.stored_transitions(sizes))


def analyze_probes(config: Config, probes: Sequence[Any], env: Any, as_training: Any = None,
                   say: Callable[[str], None] | None = None,
                   lowered: dict[Any, tuple[Any, Trainer]] | None = None) -> tuple[MemoryPoint, ...]:
    """The MemoryPoints of the step at each of `probes`: traced one after another here (tracing holds Python's
    lock), each compiled in a thread as soon as it is traced (XLA compiles without the lock), so a probe's compile
    runs beside the next probe's tracing and the other compiles. The probe at `as_training` (sizes, or None)
    compiles with training's own options (the persistent cache then holds training's step at those sizes), and
    training's starting state at those sizes compiles beside it (`training_programs_beside`); the others with
    `probe_options`. The first probe is traced and compiled first. `say` (the console's, or None) hears each
    probe's start and its compile's seconds and bytes. `lowered` holds programs already lowered (`lower_iteration`)
    by their sizes: those are compiled as they are, not traced again."""
    from concurrent.futures import ThreadPoolExecutor

    from rlfit.hardware.jax_setup import compiler_options

    with ThreadPoolExecutor(max_workers=len(probes) + 1) as pool:
        compiling, beside = [], []
        for sizes in probes:
            if say is not None:
                say(f"planning: compiling the training step at {described(config, sizes)} for XLA's memory analysis"
                    + (" (as training compiles it, for training to reuse)" if sizes == as_training else ""))
            program, trainer = (lowered or {}).get(sizes) or lower_iteration(config, sizes, env)
            options = (compiler_options(trainer.step_ynn_fusions) if sizes == as_training
                       else probe_options(trainer.step_ynn_fusions))
            compiling.append(pool.submit(timed, program.compile, compiler_options=options))
            if sizes == as_training:
                beside = training_programs_beside(trainer, pool)
        compiled = [future.result() for future in compiling]
        for future in beside:
            future.exception()  # waited for; a failure is training's to meet and report when it compiles again
    points = tuple(analyze_compiled(config, sizes, c) for sizes, (c, _) in zip(probes, compiled, strict=True))
    for point, (_, seconds) in zip(points, compiled, strict=True):
        if say is not None:
            say(f"planning: {described(config, point.sizes)} compiled in {seconds:.1f}s: "
                f"{format_bytes(point.total_bytes)} by XLA's analysis")
    return points


def measured_alone(config: Config, sizes: Any, env: Any, for_training: bool,
                   say: Callable[[str], None] | None = None,
                   lowered: dict[Any, tuple[Any, Trainer]] | None = None) -> MemoryModel:
    """The model measured once: XLA's analysis of the step at `sizes`, the rules' choice when memory does not limit
    (with training's options, and training's starting state beside it, under `for_training`)."""
    point = analyze_probes(config, [sizes], env, as_training=sizes if for_training else None, say=say,
                           lowered=lowered)[0]
    return MemoryModel.from_one_point(point, jax.default_backend(), first_is_unlimited_choice=True)


def bound_model(config: Config, env: Any, target_backend: str,
                say: Callable[[str], None] | None = None) -> tuple[MemoryModel | None, dict[Any, tuple[Any, Trainer]]]:
    """(the model bounded at one size from the lowered step, or None; the lowered program by its sizes).

    The step at the sizes the rules choose when memory does not limit (`unlimited_choice` within the target's cap)
    is traced and lowered, as training lowers it (the program store then holds it for training), and its StableHLO
    walked for an upper bound of its memory (`rlfit.hardware.program_memory`): no compile. None where the rules
    choose nothing even without a memory limit, or where the program holds a value of no static size
    (`UnboundedProgram`). The lowered program is returned for a compile that may follow."""
    likely = unlimited_choice(config, num_envs_cap(target_backend))
    if likely is None:
        return None, {}
    if say is not None:
        say(f"planning: bounding the training step's memory at {described(config, likely)} from its lowered program "
            "(no compile)")
    program, trainer = lower_iteration(config, likely, env)
    try:
        bound = lowered_bound(program)
    except UnboundedProgram as reason:
        if say is not None:
            say(f"planning: no bound without compiling ({reason})")
        return None, {likely: (program, trainer)}
    point = MemoryPoint(likely, bound.argument_bytes, bound.output_bytes, 0, bound.temp_bytes, 0,
                        algorithm(config.algo).memory.stored_transitions(likely))
    model = MemoryModel.from_one_point(point, jax.default_backend(), first_is_unlimited_choice=True, source="lowered")
    return model, {likely: (program, trainer)}


def timed(work: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """(`work(*args, **kwargs)`, its seconds)."""
    import time

    started = time.perf_counter()
    return work(*args, **kwargs), time.perf_counter() - started


def described(config: Config, sizes: Any) -> str:
    """`num_envs=512`, and the transitions stored at `sizes` where the algorithm stores any
    (`MemoryRules.stored_transitions`)."""
    stored = algorithm(config.algo).memory.stored_transitions(sizes)
    return f"num_envs={sizes.num_envs}" + (f" storing {stored:,} transitions" if stored else "")


def training_programs_beside(trainer: Trainer, pool: Any) -> list[Any]:
    """Starts compiling in `pool` what training compiles before its first step besides the step itself: the
    starting state (a plain `train` compiles it beside its step too). It lands in the persistent compile cache
    and the program store, so that under `--num-envs auto` training reads it back as it reads its step, and the
    planner's probe costs the wall time a plain `train` spends compiling. (The evaluation is not needed before
    the first step: training compiles it in the background, as a plain `train` does.) Returns the futures
    (compiled for nothing if the planner then chooses other sizes)."""
    return [pool.submit(trainer.starting_state_program, trainer.config.run.seed)]
