"""Sizing a run to its device: the algorithm's step bounded from its lowered program (no compile) where that
decides, else compiled at a few sizes, XLA's memory analysis of each, the memory model fitted through them
(`rlfit.planning.memory`), and the planner's choice (`rlfit.planning.planner`).

This is the part of planning that builds and compiles the learner (`rlfit.run.build`); the planner itself only
reasons about numbers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax

from rlfit.algos.registry import algorithm
from rlfit.config.schema import Config
from rlfit.envs import load_env
from rlfit.errors import UserError
from rlfit.hardware.jax_setup import configure_jax, lower_ahead
from rlfit.hardware.program_memory import lowered_bound
from rlfit.hardware.probe import DeviceInfo, probe_device
from rlfit.planning.budget import local_budget, stated_budget
from rlfit.planning.budget import Budget
from rlfit.planning.memory import MemoryModel, MemoryPoint, fit_coefficients, point_from_analysis
from rlfit.planning.plan import Plan, make_plan
from rlfit.planning.planner import (MemoryPlan, check_device_precision, cpu_device, encoder_candidates,
                                    memory_plan_from_model, num_envs_cap, planned_device_count, unlimited_choice)
from rlfit.hardware.units import format_bytes, parse_size
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


def planning_message(text: str) -> None:
    """A line of the planner's (what it compiles) on standard error, where the console writes once training starts."""
    import sys

    print(text, file=sys.stderr, flush=True)


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


def fit_memory_model(config: Config, env: Any = None, target_backend: str | None = None,
                     for_training: bool = False, first_only: bool = False,
                     say: Callable[[str], None] | None = None,
                     lowered: dict[Any, tuple[Any, Trainer]] | None = None) -> MemoryModel:
    """Compiles the step at the algorithm's probe sizes for `target_backend` (default: this process's; a CPU target
    caps the environments, `num_envs_cap`) and fits the model through the results.

    `env` is the loaded environment (loaded once here when None). Takes one compile per probe (side by side).
    `for_training` (`train --num-envs auto` on one device): the probe at the sizes the rules choose when memory does
    not limit compiles with training's options, so training, when it runs those sizes, reads its step from the
    persistent compile cache instead of compiling it again. `first_only`: where the first probe is at those sizes,
    compile it alone and return the model measured once (`MemoryModel.measured_once`; `fit_line` completes it).
    `lowered`: programs already lowered, by sizes (`analyze_probes`).
    """
    env = env if env is not None else load_env(config.env, jax.default_backend())
    cap = num_envs_cap(target_backend or jax.default_backend())
    probes = algorithm(config.algo).memory.measured_sizes(config, cap)
    likely = unlimited_choice(config, cap)
    as_training = likely if for_training else None
    if first_only and probes[0] == likely:
        first = analyze_probes(config, probes[:1], env, as_training=as_training, say=say, lowered=lowered)[0]
        return MemoryModel.from_one_point(first, jax.default_backend(), first_is_unlimited_choice=True)
    points = analyze_probes(config, probes, env, as_training=as_training, say=say, lowered=lowered)
    return MemoryModel(*fit_coefficients(points), points, jax.default_backend(),
                       first_is_unlimited_choice=probes[0] == likely)


def bound_model(config: Config, env: Any, target_backend: str,
                say: Callable[[str], None] | None = None) -> tuple[MemoryModel | None, dict[Any, tuple[Any, Trainer]]]:
    """(the model bounded at one size from the lowered step, or None; the lowered program by its sizes).

    The step at the sizes the rules choose when memory does not limit (`unlimited_choice` within the target's cap)
    is traced and lowered, as training lowers it (the program store then holds it for training), and its StableHLO
    walked for an upper bound of its memory (`rlfit.hardware.program_memory`): no compile. None where the rules
    choose nothing even without a memory limit. The lowered program is returned for a compile that may follow."""
    likely = unlimited_choice(config, num_envs_cap(target_backend))
    if likely is None:
        return None, {}
    if say is not None:
        say(f"planning: bounding the training step's memory at {described(config, likely)} from its lowered program "
            "(no compile)")
    program, trainer = lower_iteration(config, likely, env)
    bound = lowered_bound(program)
    point = MemoryPoint(likely, bound.argument_bytes, bound.output_bytes, 0, bound.temp_bytes, 0,
                        algorithm(config.algo).memory.stored_transitions(likely))
    model = MemoryModel.from_one_point(point, jax.default_backend(), first_is_unlimited_choice=True, source="lowered")
    return model, {likely: (program, trainer)}


def fit_line(config: Config, model: MemoryModel, env: Any = None, target_backend: str | None = None,
             say: Callable[[str], None] | None = None) -> MemoryModel:
    """`model` measured once, completed: the algorithm's other probes compiled (as probes) and the line fitted through
    them and the first point. A fitted model is returned as it is."""
    if not model.measured_once:
        return model
    env = env if env is not None else load_env(config.env, jax.default_backend())
    probes = algorithm(config.algo).memory.measured_sizes(config, num_envs_cap(target_backend or
                                                                               jax.default_backend()))
    points = model.points + analyze_probes(config, probes[1:], env, say=say)
    return dataclasses.replace(model, **dict(zip(("intercept_bytes", "bytes_per_env", "bytes_per_transition"),
                                                 fit_coefficients(points), strict=True)), points=points)


def memory_plan(config: Config, device_memory: int | str | None = None, target_backend: str | None = None,
                env: Any = None, device: DeviceInfo | None = None,
                models: dict[str, MemoryModel] | None = None, devices: int | None = None,
                for_training: bool = False, fit_lines: bool = False,
                say: Callable[[str], None] | None = None) -> MemoryPlan:
    """Probes the device (unless given), fits the memory model (compiles, unless `models` holds it) and plans.

    `device_memory` plans for a device of that size instead of this one; `target_backend` ('gpu' or 'cpu')
    is the backend that device computes on (default: this process's). `models` caches fitted models by the
    planned config's `network.encoder` across calls (one fit serves every device size). With pixel
    observations and `network.encoder=auto` on an accelerator, R3D-18 is planned first and kept where some
    configuration of it fits; else the CPU's encoder for the frames (`encoder_candidates`). `devices` (default:
    `run.devices` on this process; a stated `device_memory` may name more devices than this machine has) is how
    many devices of that size the run is split over. `for_training`: training follows on this process
    (`fit_memory_model`; on one device only, where training's step is the probe's program).

    Where the algorithm's first probe is the size its rules choose when memory does not limit, that probe compiles
    alone first; if it fits the budget it is the choice and nothing else compiles (the model is measured once:
    other sizes are bounded by it, `MemoryModel.estimate`); if not, the other probes compile and the line decides.
    `fit_lines` compiles every probe and fits the line whatever the first gives (`rlfit plan --fit-line`). `say`
    (a console's, or None) hears what is compiled and why.
    """
    device = device or probe_device()
    local = device if device.jax_uses_it else cpu_device(device)
    if device_memory is None:
        budget = local_budget(local)
    else:
        budget = stated_budget(parse_size(device_memory), target_backend or local.jax_backend, local)
    if devices is None:
        devices = planned_device_count(config.run.devices, stated=device_memory is not None)
    models = {} if models is None else models
    candidates = encoder_candidates(config, budget.target_backend)
    tried: list[MemoryPlan] = []
    for encoder in candidates:
        planned_config = config if encoder is None else config.replace(network={"encoder": encoder})
        key = planned_config.network.encoder
        models[key], planned = deciding_model(planned_config, models.get(key), budget, devices, env,
                                              for_training=for_training and devices == 1, fit_lines=fit_lines,
                                              say=say)
        tried.append(dataclasses.replace(planned, config=planned_config))
        if tried[-1].chosen is not None:
            break
    planned = tried[-1]
    if candidates == (None,):
        return planned
    first = tried[0]
    if planned is first:
        reason = (f"network.encoder=auto on {budget.target_backend}: {first.config.network.encoder} fits "
                  f"(predicted {format_bytes(first.chosen.predicted_bytes)})" if first.chosen else
                  f"network.encoder=auto on {budget.target_backend}: nothing fits, not even the smallest encoder")
    else:
        smallest = min(c.predicted_bytes for c in first.candidates)
        reason = (f"network.encoder=auto on {budget.target_backend}: {first.config.network.encoder} does not fit the "
                  f"budget of {format_bytes(budget.budget_bytes)} in any configuration (its smallest is predicted "
                  f"at {format_bytes(smallest)}); planned {planned.config.network.encoder} instead")
    return dataclasses.replace(planned, reasons=(reason,) + planned.reasons)


def deciding_model(config: Config, model: MemoryModel | None, budget: Budget, devices: int, env: Any,
                   for_training: bool, fit_lines: bool,
                   say: Callable[[str], None] | None) -> tuple[MemoryModel, MemoryPlan]:
    """(the cheapest model that decides the plan for `budget`, the plan from it), starting from `model` (one made for
    another budget, or None). In order, each step only where the one before does not choose its own point:

    1. the bound from the lowered step at the sizes chosen when memory does not limit (`bound_model`; skipped with
       `fit_lines`): if even the bound fits, those sizes are the choice and nothing compiles;
    2. XLA's analysis of that step alone (`fit_memory_model(first_only=True)`), for training to reuse under
       `for_training`;
    3. the other probes compiled and the line fitted through XLA's points (`fit_line`).
    """
    target = budget.target_backend
    lowered: dict[Any, tuple[Any, Trainer]] = {}
    if model is None or model.measured_once:
        env = env if env is not None else load_env(config.env, jax.default_backend())  # loaded once for every step
    if model is None and not fit_lines:
        model, lowered = bound_model(config, env, target, say=say)
    if model is not None:
        planned = memory_plan_from_model(config, model, budget, devices=devices)
        if not model.measured_once or chose_the_first_probe(planned):
            if say is not None and model.source == "lowered":
                say(f"planning: {described(config, model.points[0].sizes)} is bounded at "
                    f"{format_bytes(model.points[0].total_bytes)} without compiling: it fits the budget of "
                    f"{format_bytes(budget.budget_bytes)}")
            return model, planned
    if model is None or model.source == "lowered":
        if say is not None and model is not None:
            say(f"planning: the bound at {described(config, model.points[0].sizes)}, "
                f"{format_bytes(model.points[0].total_bytes)}, does not fit the budget of "
                f"{format_bytes(budget.budget_bytes)}: compiling for XLA's analysis")
        model = fit_memory_model(config, env, target, for_training=for_training, first_only=not fit_lines, say=say,
                                 lowered=lowered)
        planned = memory_plan_from_model(config, model, budget, devices=devices)
        if not model.measured_once or chose_the_first_probe(planned):
            return model, planned
    if say is not None:
        say(f"planning: {described(config, model.points[0].sizes)} does not fit the budget of "
            f"{format_bytes(budget.budget_bytes)}: compiling another size to fit the memory line")
    model = fit_line(config, model, env, target, say=say)
    return model, memory_plan_from_model(config, model, budget, devices=devices)


def chose_the_first_probe(planned: MemoryPlan) -> bool:
    """Whether `planned` chose the sizes of its model's first probe (so a model measured there alone decides)."""
    return planned.chosen is not None and planned.chosen.sizes == planned.model.points[0].sizes


def plan_for(config: Config, device_memory: int | str | None = None,
             auto_num_envs: bool = False, say: Callable[[str], None] | None = None) -> tuple[Config, Plan]:
    """(the config to run, its Plan) on this process's device.

    Without `auto_num_envs` the config's sizes run as given (with `device_memory`, their predicted bytes are
    recorded too). With it, the largest valid configuration predicted to fit the budget (this device's, or
    `device_memory` bytes, e.g. '12GiB') runs. The config returned differs from the one given only where the
    planner resolved `network.encoder=auto` for pixels on an accelerator (`memory_plan`). Raises UserError for
    bf16 on a device without it, a bad size, or when nothing fits. `say` hears what the planner compiles.
    """
    device = check_device_precision(config.run.precision)
    encoder_choice = encoder_candidates(config, device.jax_backend if device.jax_uses_it else "cpu") != (None,)
    if not auto_num_envs and device_memory is None and not encoder_choice:
        return config, make_plan(config)

    configure_jax(config.run.precision)  # the same settings (and compile cache) the run will use
    planned = memory_plan(config, device_memory, None, device=device, for_training=auto_num_envs, say=say)
    config = planned.config
    extra = {"budget_bytes": planned.budget.budget_bytes, "margin": planned.margin,
             "memory_model": planned.model.to_dict()}
    if not auto_num_envs:
        return config, dataclasses.replace(make_plan(config, reasons=("sizes from the config",) + planned.reasons),
                                           predicted_bytes=planned.requested.predicted_bytes, extra=extra)
    if planned.chosen is None:
        raise UserError(planned.nothing_fits)
    reasons = ("num_envs auto: sizes chosen by the memory planner",) + planned.reasons
    return config, dataclasses.replace(make_plan(config, planned.chosen.sizes, reasons),
                                       predicted_bytes=planned.chosen.predicted_bytes, extra=extra)
